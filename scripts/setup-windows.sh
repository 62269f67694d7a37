#!/usr/bin/env bash
# What the Windows cross-build needs (`make windows` runs it; docs/windows.md):
#   - Debian's MinGW-w64 toolchain (posix threads), its tools (gendef) and Wine (wine64);
#   - ONNX Runtime 1.29.0 for Windows x64: onnxruntime.dll and onnxruntime_providers_shared.dll from the
#     same npm package scripts/setup.sh fetched (checked there), with an import library made by gendef +
#     dlltool, into third_party/onnxruntime-windows/;
#   - the libraries Debian ships no MinGW build of, built from Debian's own source packages
#     (bookworm) with the same toolchain into .deps/mingw/prefix: zlib, libpng1.6, libjpeg-turbo,
#     googletest, prometheus-cpp (core), cpp-httplib (its header-only httplib.h);
#   - a folder of links to the header-only libraries ebb uses as they are (nlohmann-json, xxHash,
#     CLI11, Boost, RapidJSON), so that /usr/include itself is never on the Windows include path.
# Idempotent: a second run downloads and builds nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { echo "setup-windows: $*"; }
die() { echo "setup-windows: ERROR: $*" >&2; exit 1; }

DEPS=$PWD/.deps/mingw
PREFIX=$DEPS/prefix
ORT_WIN=third_party/onnxruntime-windows
ORT_TGZ=.deps/com.github.asus4.onnxruntime-0.4.9.tgz
JOBS=${JOBS:-$(nproc)}

# --- Toolchain and Wine
need=()
for pkg in g++-mingw-w64-x86-64-posix mingw-w64-tools wine64 dpkg-dev zip unzip; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  log "installing ${need[*]}"
  apt-get install -y --no-install-recommends "${need[@]}" >/dev/null
fi

# --- ONNX Runtime's Windows DLLs
[ -f "$ORT_TGZ" ] || die "$ORT_TGZ is missing: run scripts/setup.sh first"
if [ ! -f "$ORT_WIN/lib/libonnxruntime.dll.a" ]; then
  log "ONNX Runtime for Windows x64 from $ORT_TGZ"
  tmp=$(mktemp -d)
  tar -xzf "$ORT_TGZ" -C "$tmp" package/Plugins/Windows/x64
  mkdir -p "$ORT_WIN/bin" "$ORT_WIN/lib"
  cp "$tmp"/package/Plugins/Windows/x64/*.dll "$ORT_WIN/bin/"
  (cd "$ORT_WIN/lib" && gendef - ../bin/onnxruntime.dll > onnxruntime.def 2>/dev/null &&
     x86_64-w64-mingw32-dlltool -d onnxruntime.def -l libonnxruntime.dll.a -D onnxruntime.dll)
  rm -rf "$tmp"
fi
# The delay-load import library the programs link (cmake/windows-deps.cmake): onnxruntime.dll is loaded on
# first use, so that a program started without it says so (port::CheckOrtLibrary) instead of the loader
# ending it without a word.
if [ ! -f "$ORT_WIN/lib/libonnxruntime.delay.a" ]; then
  (cd "$ORT_WIN/lib" && x86_64-w64-mingw32-dlltool -d onnxruntime.def -y libonnxruntime.delay.a -D onnxruntime.dll)
fi

# --- Header-only libraries, each by itself
HDR=$DEPS/headers
mkdir -p "$HDR"
for h in nlohmann CLI boost rapidjson fast_float fmt xxhash.h; do
  [ -e "/usr/include/$h" ] || die "/usr/include/$h is missing (scripts/setup.sh installs it)"
  [ -e "$HDR/$h" ] || ln -s "/usr/include/$h" "$HDR/$h"
done

# --- Debian source packages, built with the MinGW toolchain
SRC=$DEPS/src
mkdir -p "$SRC" "$PREFIX"
fetch_source() {  # NAME: the bookworm source package into $SRC/NAME-*
  local name=$1
  if ! ls -d "$SRC/$name"/*/ >/dev/null 2>&1; then
    local apt_dir=$DEPS/apt
    if [ ! -d "$apt_dir/lists/partial" ]; then
      mkdir -p "$apt_dir/sources" "$apt_dir/lists/partial"
      sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources > "$apt_dir/sources/debian.sources"
      apt-get -o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$apt_dir/sources" \
        -o Dir::State::Lists="$apt_dir/lists" update >/dev/null
    fi
    mkdir -p "$SRC/$name"
    (cd "$SRC/$name" && apt-get -o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$apt_dir/sources" \
       -o Dir::State::Lists="$apt_dir/lists" source "$name/bookworm" >/dev/null 2>&1) ||
      die "cannot fetch the source package $name/bookworm"
  fi
  ls -d "$SRC/$name"/*/ | head -1
}
cross_cmake() {  # SOURCE BUILD [cmake args]: configure, build, install into $PREFIX
  local source=$1 build=$2
  shift 2
  cmake -S "$source" -B "$build" -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/mingw-w64-x86_64.cmake" \
    -DEBB_MINGW_DEPS="$PREFIX" -DCMAKE_INSTALL_PREFIX="$PREFIX" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CROSSCOMPILING_EMULATOR= "$@" >/dev/null
  cmake --build "$build" -j "$JOBS" >/dev/null
  cmake --install "$build" >/dev/null
}

if [ ! -f "$PREFIX/.zlib" ]; then
  log "zlib (Debian source package) for MinGW"
  dir=$(fetch_source zlib)
  # Debian's zlib source (dfsg) has no win32/ folder, which zlib's CMake wants for its DLL's resources:
  # only the static library is built, and installed by hand.
  cmake -S "$dir" -B "$DEPS/build/zlib" -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/mingw-w64-x86_64.cmake" \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_CROSSCOMPILING_EMULATOR= >/dev/null
  cmake --build "$DEPS/build/zlib" --target zlibstatic -j "$JOBS" >/dev/null
  mkdir -p "$PREFIX/include" "$PREFIX/lib"
  cp "$dir/zlib.h" "$DEPS/build/zlib/zconf.h" "$PREFIX/include/"
  cp "$DEPS/build/zlib/libzlibstatic.a" "$PREFIX/lib/"
  touch "$PREFIX/.zlib"
fi
if [ ! -f "$PREFIX/.libpng" ]; then
  log "libpng1.6 (Debian source package) for MinGW"
  dir=$(fetch_source libpng1.6)
  cross_cmake "$dir" "$DEPS/build/libpng" -DPNG_SHARED=OFF -DPNG_TESTS=OFF -DPNG_EXECUTABLES=OFF \
    -DZLIB_ROOT="$PREFIX" -DZLIB_LIBRARY="$PREFIX/lib/libzlibstatic.a" -DZLIB_INCLUDE_DIR="$PREFIX/include"
  touch "$PREFIX/.libpng"
fi
if [ ! -f "$PREFIX/.libjpeg" ]; then
  log "libjpeg-turbo (Debian source package) for MinGW"
  dir=$(fetch_source libjpeg-turbo)
  cross_cmake "$dir" "$DEPS/build/libjpeg" -DENABLE_SHARED=OFF -DWITH_TURBOJPEG=OFF -DWITH_SIMD=OFF
  touch "$PREFIX/.libjpeg"
fi
if [ ! -f "$PREFIX/.googletest" ]; then
  log "googletest (Debian source package) for MinGW"
  dir=$(fetch_source googletest)
  cross_cmake "$dir" "$DEPS/build/googletest" -DBUILD_GMOCK=OFF -Dgtest_disable_pthreads=OFF
  touch "$PREFIX/.googletest"
fi
if [ ! -f "$PREFIX/.prometheus-cpp" ]; then
  log "prometheus-cpp (Debian source package, the core library only) for MinGW"
  dir=$(fetch_source prometheus-cpp)
  cross_cmake "$dir" "$DEPS/build/prometheus-cpp" -DENABLE_PULL=OFF -DENABLE_PUSH=OFF -DENABLE_COMPRESSION=OFF \
    -DENABLE_TESTING=OFF -DBUILD_SHARED_LIBS=OFF -DUSE_THIRDPARTY_LIBRARIES=OFF -DGENERATE_PKGCONFIG=OFF
  touch "$PREFIX/.prometheus-cpp"
fi
if [ ! -f "$PREFIX/.cpp-httplib" ]; then
  # Debian's libcpp-httplib-dev ships the split header (the code is in its .so); the source package's
  # httplib.h is the header-only original, used as it is (`ebb bench http`'s client).
  log "cpp-httplib (Debian source package, its header-only httplib.h)"
  dir=$(fetch_source cpp-httplib)
  mkdir -p "$PREFIX/include"
  cp "$dir/httplib.h" "$PREFIX/include/httplib.h"
  touch "$PREFIX/.cpp-httplib"
fi
log "done"
