#!/usr/bin/env bash
# Builds the GPU bundle: everything the CUDA checks need on a GPU machine that has a driver and the
# CUDA 13 / cuDNN 9 libraries in its Python packages, and nothing else (docs/gpu-check.md). `make
# gpu-bundle` runs it after `make setup GPU=1` and the build of ebb and ebb_cuda_check.
#
#   scripts/gpu/bundle.sh [--build-dir DIR] [--out DIR] [--part-mib N] [--call-limit-mib N]
#                         [--gzip-level N] [--provider-stand-in[=MIB]]
#
#   --build-dir DIR       the built tree (default build): ebb and tests/ebb_cuda_check in it
#   --out DIR             where the bundle goes (default DIR/gpu-bundle); emptied first
#   --part-mib N          largest part, MiB (default 56: a part and the working tree fit one device call)
#   --call-limit-mib N    what one device call may carry, working tree included (default 64)
#   --gzip-level N        gzip level of the archive (default 6)
#   --provider-stand-in   put a file of random bytes (default 4 MiB) where the CUDA provider library
#                         goes: for the CPU tests, which exercise the split and the checks of a bundle
#                         without the 230 MB provider. run.sh refuses such a bundle outside --dry-run.
#
# Result, in OUT: carry-1/ ... carry-N/, one per device call, each holding one part of the archive
# (bundle.tar.gz.part-K), manifest.json (every part's size and sha256, the archive's sha256) and a
# copy of run.sh and run.py; and plan.txt (the parts, their sizes, the calls). The archive holds
# ebb-gpu/: bin/ (ebb, ebb_cuda_check), lib/ (ONNX Runtime and its CUDA provider), lib/debian/
# (every other library their ldd closure resolves from Debian, glibc's excepted), lib/compat/
# (Debian's libstdc++ and libgcc_s, used there only when the machine's own are older), models/,
# BUNDLE.json (what was bundled: versions, sha256s, the glibc needed, the CUDA libraries expected
# from the machine) and FILES.sha256 (every file's sha256).
set -euo pipefail

SOURCE=$(cd "$(dirname "$0")/../.." && pwd)
die() { echo "gpu-bundle: ERROR: $*" >&2; exit 1; }
log() { echo "gpu-bundle: $*"; }

build_dir=build
out=""
part_mib=56
call_limit_mib=64
gzip_level=6
stand_in_mib=0
while (($#)); do
    case $1 in
        --build-dir) build_dir=${2:?--build-dir needs a folder}; shift 2 ;;
        --out) out=${2:?--out needs a folder}; shift 2 ;;
        --part-mib) part_mib=${2:?}; shift 2 ;;
        --call-limit-mib) call_limit_mib=${2:?}; shift 2 ;;
        --gzip-level) gzip_level=${2:?}; shift 2 ;;
        --provider-stand-in) stand_in_mib=4; shift ;;
        --provider-stand-in=*) stand_in_mib=${1#*=}; shift ;;
        -h|--help) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) die "unknown argument $1 (--help)" ;;
    esac
done
for n in "$part_mib" "$call_limit_mib" "$gzip_level" "$stand_in_mib"; do
    [[ $n =~ ^[0-9]+$ ]] || die "not a number: $n"
done
((part_mib >= 1)) || die "--part-mib must be at least 1"
((gzip_level >= 1 && gzip_level <= 9)) || die "--gzip-level must be 1..9"
build_dir=$(cd "$build_dir" 2>/dev/null && pwd) || die "no build folder $build_dir"
[[ -x $build_dir/ebb && -x $build_dir/tests/ebb_cuda_check ]] ||
    die "build ebb and ebb_cuda_check first: cmake --build $build_dir --target ebb ebb_cuda_check"
[[ -n $out ]] || out=$build_dir/gpu-bundle
mkdir -p "$out"
out=$(cd "$out" && pwd)
[[ $out != / && $out != "$SOURCE" ]] || die "refusing to empty $out"
ort_root=$(sed -n 's/^EBB_ORT_ROOT:PATH=//p' "$build_dir/CMakeCache.txt")
[[ -n $ort_root ]] || ort_root=$SOURCE/third_party/onnxruntime
provider_src=$ort_root/lib/libonnxruntime_providers_cuda.so
if ((stand_in_mib == 0)) && [[ ! -f $provider_src ]]; then
    die "no CUDA provider library at $provider_src: run make setup GPU=1 (or pass --provider-stand-in)"
fi

# The archive, its parts and the staging copy exist at once for a moment: about 3x the bundle.
need_mib=$(( stand_in_mib ? 600 : 1200 ))
free_mib=$(df -Pm "$out" | awk 'NR == 2 {print $4}')
((free_mib >= need_mib)) || die "$free_mib MiB free under $out, $need_mib MiB needed"

rm -rf -- "${out:?}"/*
stage=$out/stage
root=$stage/ebb-gpu
mkdir -p "$root"

# 1. ebb, ebb_cuda_check, ONNX Runtime, the models: CMake's install (stripped; RUNPATH $ORIGIN/../lib).
cmake --install "$build_dir" --prefix "$root" --strip --component runtime >/dev/null
cmake --install "$build_dir" --prefix "$root" --strip --component gpu_check >/dev/null
cmake --install "$build_dir" --prefix "$root" --component models >/dev/null
[[ -x $root/bin/ebb && -x $root/bin/ebb_cuda_check ]] || die "the install gave no bin/ebb or bin/ebb_cuda_check"
provider=$root/lib/libonnxruntime_providers_cuda.so
rm -f -- "$provider"
if ((stand_in_mib)); then
    python3 -c "import random, sys; sys.stdout.buffer.write(random.Random(26).randbytes($stand_in_mib << 20))" \
        >"$provider"
    log "CUDA provider: a stand-in of $stand_in_mib MiB (random bytes)"
else
    cp "$provider_src" "$provider"
fi
chmod 0755 "$provider"

# 2. The libraries the binaries load from Debian: ldd's closure of every ELF file staged but the
# provider (whose own needs are CUDA's, glibc's and libstdc++'s), each mapped to its package.
is_elf() { [[ $(head -c 4 "$1" | od -An -c | tr -d ' ') == 177ELF ]]; }
elves=()
while IFS= read -r -d '' f; do
    [[ $f == "$provider" ]] || ! is_elf "$f" || elves+=("$f")
done < <(find "$root/bin" "$root/lib" -maxdepth 1 -type f -print0 | sort -z)
mkdir -p "$root/lib/debian" "$root/lib/compat"
# Every library outside the bundle first (name, path), then one dpkg -S for all of them: a dpkg -S
# reads the whole package database, so one per library took most of a minute.
declare -A seen=()
names=() paths=()
for f in "${elves[@]}"; do
    listing=$(env -u LD_LIBRARY_PATH ldd "$f") || die "ldd $f failed"
    ! grep -q "not found" <<<"$listing" || die "ldd $f: $(grep "not found" <<<"$listing" | tr -s ' \t' ' ')"
    while read -r name path; do
        [[ -n ${seen[$name]:-} ]] && continue
        seen[$name]=1
        case $path in "$root"/*) continue ;; esac
        names+=("$name") paths+=("$path")
    done < <(awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' <<<"$listing")
done
# The forms a library's path may take in the database: as ldd gave it, resolved, and with or without
# /usr (merged /usr). dpkg -S prints "package[:arch][, package...]: path" for each it owns.
candidates() { local path=$1 real; real=$(readlink -f "$path"); echo "$path"; echo "$real"; echo "${path#/usr}"; echo "/usr$path"; }
declare -A owner=()
if ((${#paths[@]} > 0)); then
    while IFS= read -r line; do
        [[ $line == *": /"* && $line != diversion\ * ]] || continue
        owned="/${line#*: /}"
        owner[$owned]=${line%%[:,]*}
    done < <(for path in "${paths[@]}"; do candidates "$path"; done | sort -u | xargs -d '\n' dpkg -S 2>/dev/null || true)
fi
libs_json=()
for i in "${!names[@]}"; do
    name=${names[$i]} path=${paths[$i]} pkg=""
    while IFS= read -r c; do
        [[ -z $pkg ]] || break
        pkg=${owner[$c]:-}
    done < <(candidates "$path")
    [[ -n $pkg ]] || die "no Debian package owns $path"
    case $pkg in
        libc6) continue ;;                              # glibc: the machine's own
        libstdc++6|libgcc-s1) dir=compat ;;             # used there only when newer than its own
        *) dir=debian ;;
    esac
    cp -L "$path" "$root/lib/$dir/$name"
    chmod 0644 "$root/lib/$dir/$name"
    libs_json+=("{\"name\": \"$name\", \"package\": \"$pkg\", \"dir\": \"lib/$dir\"}")
done
log "libraries from Debian: $(find "$root/lib/debian" -type f | wc -l) in lib/debian, $(find "$root/lib/compat" -type f | wc -l) in lib/compat"

# 3. What the machine must offer: a glibc at least this new, and the provider's CUDA libraries.
all_elves=("${elves[@]}")
for f in "$root"/lib/debian/* "$root"/lib/compat/*; do all_elves+=("$f"); done
is_elf "$provider" && all_elves+=("$provider")
glibc_needed=$(for f in "${all_elves[@]}"; do objdump -p "$f"; done | grep -oE 'GLIBC_[0-9]+\.[0-9]+(\.[0-9]+)?' |
               sed 's/^GLIBC_//' | sort -uV | tail -n1)
glibcxx_needed=$(for f in "${all_elves[@]}"; do objdump -p "$f"; done | grep -oE 'GLIBCXX_[0-9.]+' |
                 sed 's/^GLIBCXX_//' | sort -uV | tail -n1)
glibcxx_bundled=$(grep -aoE 'GLIBCXX_3\.4\.[0-9]+' "$root/lib/compat/libstdc++.so.6" | sed 's/^GLIBCXX_//' |
                  sort -uV | tail -n1)
# The provider's NEEDED entries that nothing here provides (CUDA's), and cuDNN, which it loads itself.
cuda_libs=()
if is_elf "$provider"; then
    while read -r needed; do
        case $needed in
            libc.so.*|libm.so.*|libdl.so.*|librt.so.*|libpthread.so.*|ld-linux*|libstdc++.so.*|libgcc_s.so.*) ;;
            *) [[ -e $root/lib/$needed ]] || cuda_libs+=("$needed") ;;
        esac
    done < <(objdump -p "$provider" | awk '$1 == "NEEDED" {print $2}')
else
    cuda_libs=(libcublasLt.so.13 libcublas.so.13 libcurand.so.10 libcudart.so.13 libcuda.so.1)
fi
cuda_libs+=(libcudnn.so.9)
provider_sha=$(sha256sum "$provider" | cut -d' ' -f1)
commit=$(git -C "$SOURCE" rev-parse HEAD 2>/dev/null || echo unknown)
[[ -z $(git -C "$SOURCE" status --porcelain 2>/dev/null) ]] || commit+="+changes"
json_list() { local IFS=,; echo "[$*]"; }
quoted() { printf '"%s"\n' "$@" | paste -sd, -; }
cat >"$root/BUNDLE.json" <<EOF
{
  "format": 1,
  "commit": "$commit",
  "ebb_version": "$("$build_dir/ebb" --version | head -n1 | awk '{print $2}')",
  "ort_version": "1.29.0",
  "provider": {"file": "lib/libonnxruntime_providers_cuda.so", "stand_in": $( ((stand_in_mib)) && echo true || echo false),
               "bytes": $(stat -c %s "$provider"), "sha256": "$provider_sha",
               "package": "com.github.asus4.onnxruntime.linux-x64-gpu@0.4.9"},
  "glibc_needed": "$glibc_needed",
  "glibcxx_needed": "$glibcxx_needed",
  "glibcxx_bundled": "$glibcxx_bundled",
  "cuda_libraries_expected": [$(quoted "${cuda_libs[@]}")],
  "libraries": $(json_list "${libs_json[@]}")
}
EOF
(cd "$root" && find . -type f ! -name FILES.sha256 -printf '%P\n' | LC_ALL=C sort | xargs -d '\n' sha256sum) \
    >"$root/FILES.sha256"
log "staged $(du -sm "$root" | cut -f1) MiB in $(wc -l <"$root/FILES.sha256") files; glibc $glibc_needed or newer needed"

# 4. The archive and its parts, one carry folder per part.
archive=$out/bundle.tar.gz
tar -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 -cf - ebb-gpu |
    gzip -n "-$gzip_level" >"$archive"
rm -rf -- "$stage"
archive_sha=$(sha256sum "$archive" | cut -d' ' -f1)
archive_bytes=$(stat -c %s "$archive")
# As few parts as the limit allows, of equal size (each call then keeps the same margin).
limit_bytes=$((part_mib << 20))
count=$(( (archive_bytes + limit_bytes - 1) / limit_bytes ))
split -b $(( (archive_bytes + count - 1) / count )) --numeric-suffixes=1 -a 2 "$archive" "$out/bundle.tar.gz.part-"
rm -f -- "$archive"
parts=("$out"/bundle.tar.gz.part-*)
((${#parts[@]} == count)) || die "split made ${#parts[@]} parts, not $count"
parts_json=()
for i in "${!parts[@]}"; do
    p=${parts[$i]}
    parts_json+=("{\"index\": $((i + 1)), \"name\": \"$(basename "$p")\", \"bytes\": $(stat -c %s "$p"), \"sha256\": \"$(sha256sum "$p" | cut -d' ' -f1)\"}")
done
cat >"$out/manifest.json" <<EOF
{
  "format": 1,
  "bundle": "$archive_sha",
  "archive": "bundle.tar.gz",
  "archive_bytes": $archive_bytes,
  "part_limit_bytes": $((part_mib << 20)),
  "stand_in": $( ((stand_in_mib)) && echo true || echo false),
  "commit": "$commit",
  "parts": $(json_list "${parts_json[@]}")
}
EOF
for i in "${!parts[@]}"; do
    carry=$out/carry-$((i + 1))
    mkdir -p "$carry"
    mv "${parts[$i]}" "$carry/"
    cp "$out/manifest.json" "$carry/"
    cp "$SOURCE/scripts/gpu/run.sh" "$SOURCE/scripts/gpu/run.py" "$carry/"
done
rm -f -- "$out/manifest.json"

# 5. The plan: each call carries one folder beside the working tree that the device tool sends
# (tracked files and untracked ones git does not ignore, of this checkout).
tree_bytes=$(cd "$SOURCE" && git ls-files -z -co --exclude-standard 2>/dev/null | xargs -0 -r stat -c %s 2>/dev/null |
             awk '{s += $1} END {print s + 0}')
limit=$((call_limit_mib << 20))
{
    echo "GPU bundle $archive_sha ($archive_bytes bytes, $count parts of at most $part_mib MiB)"
    echo "commit $commit; provider $( ((stand_in_mib)) && echo "stand-in" || echo "$provider_sha")"
    echo "working tree of this checkout: $tree_bytes bytes"
    rel=$(realpath --relative-to="$SOURCE" "$out")
    [[ $rel != ../* ]] || echo "(outside the checkout: copy the carry folders into an ignored folder of it)"
    for i in $(seq 1 "$count"); do
        bytes=$(du -sb "$out/carry-$i" | cut -f1)
        echo "call $i: carry $rel/carry-$i ($bytes bytes; $((bytes + tree_bytes)) of $limit with the tree)," \
             "run: bash $rel/carry-$i/run.sh"
    done
} >"$out/plan.txt"
sed 's/^/gpu-bundle: /' "$out/plan.txt"
for i in $(seq 1 "$count"); do
    bytes=$(du -sb "$out/carry-$i" | cut -f1)
    ((bytes + tree_bytes <= limit)) ||
        die "call $i would carry $((bytes + tree_bytes)) bytes with the working tree, over $call_limit_mib MiB: lower --part-mib"
done
