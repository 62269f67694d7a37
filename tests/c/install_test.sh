#!/usr/bin/env bash
# The C API as a program outside the tree sees it: `cmake --install --component c_api` into a
# temporary prefix, then examples/c/hello.c built with `pkg-config --cflags --libs ebb` and, as a
# CMake project, with find_package(ebb) + ebb::ebb; both run a bundled model with no
# LD_LIBRARY_PATH. Last, the runtime and the C API configure with the server off and the server's
# packages (gRPC, protobuf, Boost, prometheus-cpp, CLI11, pybind11) made unfindable.
#   install_test.sh BUILD_DIR SOURCE_DIR MODEL C_COMPILER
set -euo pipefail
build=$1 source=$2 model=$3 cc=$4
tmp=$(mktemp -d)
trap 'rm -rf -- "$tmp"' EXIT
fail() { echo "install_test: $*" >&2; exit 1; }

prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" --component c_api >/dev/null
for f in include/ebb/c.h lib/libebb.so lib/libebb.so.1 lib/libonnxruntime.so.1 lib/pkgconfig/ebb.pc \
         lib/cmake/ebb/ebbConfig.cmake lib/cmake/ebb/ebbTargets.cmake; do
    [[ -e $prefix/$f ]] || fail "the install has no $f"
done
[[ -L $prefix/lib/libebb.so && $(readlink "$prefix/lib/libebb.so") == libebb.so.1 ]] || fail "libebb.so is not a link to libebb.so.1"

# 1. pkg-config (the 20-line example, as C11 with warnings as errors).
export PKG_CONFIG_PATH=$prefix/lib/pkgconfig
flags=$(pkg-config --cflags --libs ebb) || fail "pkg-config --cflags --libs ebb failed"
# shellcheck disable=SC2086
"$cc" -std=c11 -Wall -Wextra -Wpedantic -Werror "$source/examples/c/hello.c" -o "$tmp/hello" $flags \
    -Wl,-rpath,"$prefix/lib"
out=$(env -u LD_LIBRARY_PATH "$tmp/hello" "$model") || fail "hello failed: $out"
[[ $out == "ebb "*": y has 12288 values" ]] || fail "hello printed: $out"
if env -u LD_LIBRARY_PATH ldd "$tmp/hello" | grep -q "$build"; then
    fail "hello resolves a library in the build tree"
fi
echo "pkg-config: $flags -> $out"

# 2. find_package(ebb) from another CMake project.
mkdir -p "$tmp/project"
cp "$source/examples/c/hello.c" "$tmp/project/"
cat >"$tmp/project/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.16)
project(hello C)
find_package(ebb 0.1 REQUIRED)
add_executable(hello hello.c)
target_link_libraries(hello PRIVATE ebb::ebb)
CMAKE
cmake -S "$tmp/project" -B "$tmp/project/build" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" \
    >"$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log"; fail "find_package(ebb) project did not configure"; }
cmake --build "$tmp/project/build" >"$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; fail "it did not build"; }
out=$(env -u LD_LIBRARY_PATH "$tmp/project/build/hello" "$model") || fail "the find_package build failed: $out"
[[ $out == "ebb "*": y has 12288 values" ]] || fail "the find_package build printed: $out"
echo "find_package(ebb): $out"

# 3. The runtime and the C API without the server's dependencies (configure only: the build is
#    the same sources as this tree's).
cmake -S "$source" -B "$tmp/no-server" -DEBB_BUILD_SERVER=OFF -DEBB_BUILD_PYTHON=OFF \
    -DEBB_BUILD_TESTS=OFF -DCMAKE_DISABLE_FIND_PACKAGE_gRPC=ON -DCMAKE_DISABLE_FIND_PACKAGE_Protobuf=ON \
    -DCMAKE_DISABLE_FIND_PACKAGE_Boost=ON -DCMAKE_DISABLE_FIND_PACKAGE_prometheus-cpp=ON \
    -DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON -DCMAKE_DISABLE_FIND_PACKAGE_pybind11=ON \
    >"$tmp/no-server.log" 2>&1 || { cat "$tmp/no-server.log"; fail "the runtime does not configure without the server"; }
[[ -d $tmp/no-server/CMakeFiles/ebb_c.dir ]] || fail "no target ebb_c in the server-less tree"
[[ ! -d $tmp/no-server/CMakeFiles/ebb_server_core.dir ]] || fail "the server-less tree has the server"
if grep -Eq '^(gRPC|Protobuf|Boost|prometheus-cpp|pybind11|CLI11)_DIR:PATH=/' "$tmp/no-server/CMakeCache.txt"; then
    fail "the server-less configure found a server package: $(grep -E '_DIR:PATH=/' "$tmp/no-server/CMakeCache.txt")"
fi
grep -q 'HTTPLIB_FOUND' "$tmp/no-server/CMakeCache.txt" && fail "the server-less configure looked for cpp-httplib"
echo "configured without gRPC, protobuf, Boost, prometheus-cpp, CLI11, cpp-httplib, pybind11"
