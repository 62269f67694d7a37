#!/usr/bin/env bash
# The container image's build steps, runnable outside a container (the Dockerfile runs this same
# script; tests/deploy/test_image.py runs it on the build tree): build ebb, install it into a
# staging root laid out as the image's file system, and derive the Debian packages its libraries
# come from.
#
#   deploy/image/stage.sh [--build-dir DIR] [--no-models] [--update-packages] STAGING_ROOT
#
#   --build-dir DIR     take ebb from this build tree, already built (ctest's case); without it the
#                       script runs scripts/setup.sh and builds the target `ebb` in build/
#   --no-models         leave the bundled models out (the install component `runtime` only)
#   --update-packages   write the derived package list into deploy/image/runtime-packages.txt;
#                       without it a derived list that differs from that file is an error
#
# Result: STAGING_ROOT/opt/ebb/{bin,lib,models,share} (CMakeLists.txt, "Install"), and
# STAGING_ROOT/opt/ebb/share/ebb/runtime-packages.txt: every Debian package owning a library that
# `ldd` resolves outside the staging root for the staged ebb and ONNX Runtime libraries, one a
# line, sorted. The image's runtime stage installs deploy/image/runtime-packages.txt, which must
# equal it.
set -euo pipefail

SOURCE=$(cd "$(dirname "$0")/../.." && pwd)
PACKAGES_FILE=deploy/image/runtime-packages.txt

die() { echo "stage: ERROR: $*" >&2; exit 1; }
log() { echo "stage: $*"; }

build_dir=""
models=1
update=0
root=""
while (($#)); do
    case $1 in
        --build-dir) build_dir=${2:?--build-dir needs a folder}; shift 2 ;;
        --no-models) models=0; shift ;;
        --update-packages) update=1; shift ;;
        -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) die "unknown option $1" ;;
        *) [[ -z $root ]] || die "one staging root only"; root=$1; shift ;;
    esac
done
[[ -n $root ]] || die "usage: deploy/image/stage.sh [--build-dir DIR] [--no-models] [--update-packages] STAGING_ROOT"
mkdir -p "$root"
root=$(cd "$root" && pwd)
[[ $root != / ]] || die "the staging root cannot be /"
if [[ -n $build_dir ]]; then
    build_dir=$(cd "$build_dir" && pwd) || die "no build folder $build_dir"
fi
cd "$SOURCE"

# 1. The build: the project's own setup and CMake build, or a tree that is already built.
if [[ -z $build_dir ]]; then
    bash scripts/setup.sh
    build_dir=build
    [[ -f $build_dir/CMakeCache.txt ]] || cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo
    cmake --build "$build_dir" --target ebb -j "$(nproc)"
fi
[[ -x $build_dir/ebb ]] || die "no ebb in $build_dir (build it first)"

# 2. The install into the image's layout. --strip: no debug sections in the image.
prefix=$root/opt/ebb
rm -rf -- "$prefix"
# The components `runtime` (the server) and `models`, not `c_api` (libebb.so for C programs, which
# the image does not need).
cmake --install "$build_dir" --prefix "$prefix" --strip --component runtime >/dev/null
if ((models)); then
    cmake --install "$build_dir" --prefix "$prefix" --strip --component models >/dev/null
fi
[[ -x $prefix/bin/ebb ]] || die "the install put no bin/ebb into $prefix"
log "installed into $prefix"

# 3. The runtime library closure: ldd on every ELF file staged (with no LD_LIBRARY_PATH, so only
# the RUNPATH and the system's paths count), each library outside the staging root mapped to its
# Debian package by one `dpkg -S` call. ldd may print a merged-/usr path (/usr/lib/...) that dpkg
# knows as /lib/... or the reverse, so both spellings (and the link's target) are asked.
spellings() {
    local c
    for c in "$1" "$(readlink -f "$1")"; do
        echo "$c"
        case $c in
            /usr/lib/*) echo "${c#/usr}" ;;
            /lib/*|/lib64/*) echo "/usr$c" ;;
        esac
    done
}

elves=()
while IFS= read -r -d '' f; do
    if [[ $(head -c 4 "$f" | od -An -c | tr -d ' ') == 177ELF ]]; then
        case $f in
            */libonnxruntime_providers_cuda.so) ;;  # needs the CUDA libraries of a GPU base image
            *) elves+=("$f") ;;
        esac
    fi
done < <(find "$prefix/bin" "$prefix/lib" -type f -print0)
((${#elves[@]})) || die "no ELF file staged"

libs=()
for f in "${elves[@]}"; do
    listing=$(env -u LD_LIBRARY_PATH ldd "$f") || die "ldd $f failed"
    if grep -q "not found" <<<"$listing"; then
        die "ldd $f: $(grep "not found" <<<"$listing" | tr -s ' \t' ' ')"
    fi
    while read -r lib; do
        case $lib in "$root"/*|"") ;; *) libs+=("$lib") ;; esac
    done < <(awk '$2 == "=>" && $3 ~ /^\// {print $3} $1 ~ /^\// {print $1}' <<<"$listing")
done
mapfile -t libs < <(printf '%s\n' "${libs[@]}" | sort -u)
mapfile -t asked < <(for lib in "${libs[@]}"; do spellings "$lib"; done | sort -u)
declare -A owner=()
while IFS= read -r line; do
    owner[${line#*: }]=${line%%: *}
done < <(dpkg -S "${asked[@]}" 2>/dev/null || true)
packages=()
for lib in "${libs[@]}"; do
    found=""
    while read -r c; do
        [[ -n ${owner[$c]:-} ]] && found=${owner[$c]} && break
    done < <(spellings "$lib")
    [[ -n $found ]] || die "no Debian package owns $lib"
    mapfile -t -O "${#packages[@]}" packages < <(tr ',' '\n' <<<"$found" | sed 's/^ *//; s/:[a-z0-9_-]*$//')
done
mkdir -p "$prefix/share/ebb"
derived=$prefix/share/ebb/runtime-packages.txt
printf '%s\n' "${packages[@]}" | LC_ALL=C sort -u >"$derived"
log "runtime packages ($(wc -l <"$derived")): $(tr '\n' ' ' <"$derived")"

if ((update)); then
    cp "$derived" "$SOURCE/$PACKAGES_FILE"
    log "wrote $PACKAGES_FILE"
elif ! diff -u "$SOURCE/$PACKAGES_FILE" "$derived" >&2; then
    die "$PACKAGES_FILE differs from the libraries ebb needs (above); rerun with --update-packages"
fi
