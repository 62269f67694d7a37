#!/usr/bin/env bash
# The Windows release archive (make windows-dist) from outside the tree, under Wine: unpacked into an
# empty folder, `ebb.exe run` upscales a bundled image there with output bytes identical to the Linux
# build's `ebb run`, and `ebb.exe serve` answers an HTTP inference from a Linux client (curl).
# Usage: tests/windows/dist_test.sh ZIP LINUX_EBB SOURCE_DIR
set -euo pipefail
zip=$(realpath "$1")
linux_ebb=$(realpath "$2")
src=$(realpath "$3")
WINE=/usr/lib/wine/wine64
work=$(mktemp -d)
server=
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null || true
  [ -n "$server" ] && wait "$server" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
export WINEPREFIX=${WINEPREFIX:-$work/wine} WINEDEBUG=-all EBB_CACHE_DIR=$work/cache

cd "$work"
unzip -q "$zip"
dist=$(ls -d "$work"/ebb-*-windows-x64)
for f in ebb.exe ebb.dll libebb.dll.a include/ebb/c.h onnxruntime.dll README.txt \
         licences/onnxruntime-LICENSE.txt models/waifu2x_scale2x/model.onnx models/waifu2x_scale2x/LICENSE; do
  [ -f "$dist/$f" ] || { echo "dist_test: $f is missing from the archive"; exit 1; }
done

# 1. The same upscale on Windows (under Wine) and on Linux: identical bytes.
cp "$src/tests/fixtures/astronaut_96.png" "$work/in.png"
(cd "$dist" && "$WINE" ebb.exe run models/waifu2x_scale2x -i ../in.png -o ../out_windows.png) > "$work/run.log" 2>&1 ||
  { cat "$work/run.log"; echo "dist_test: ebb.exe run failed"; exit 1; }
"$linux_ebb" run "$src/models/waifu2x_scale2x" -i "$work/in.png" -o "$work/out_linux.png" > /dev/null
cmp "$work/out_windows.png" "$work/out_linux.png" ||
  { echo "dist_test: the Windows build's output differs from the Linux build's"; exit 1; }
echo "dist_test: ebb.exe run: $(stat -c %s "$work/out_windows.png") bytes, identical to the Linux build's"

# 1b. Arguments outside the ANSI code page (issue 34): a model folder and images named in Chinese and
# Japanese, with an accented folder, read as UTF-16 and converted once to UTF-8: the same bytes again.
mkdir -p "$work/モデル é" "$work/写真"
cp -r "$dist/models/waifu2x_scale2x" "$work/モデル é/超解像"
cp "$work/in.png" "$work/写真/宇宙飛行士.png"
(cd "$work" && "$WINE" "$dist/ebb.exe" run "モデル é/超解像" -i "写真/宇宙飛行士.png" -o "写真/出力_2x.png") \
  > "$work/cjk.log" 2>&1 || { cat "$work/cjk.log"; echo "dist_test: ebb.exe run with CJK names failed"; exit 1; }
cmp "$work/写真/出力_2x.png" "$work/out_linux.png" ||
  { echo "dist_test: the output under a CJK name differs from the Linux build's"; exit 1; }
grep -q "写真/宇宙飛行士.png -> 写真/出力_2x.png" "$work/cjk.log" ||
  { cat "$work/cjk.log"; echo "dist_test: the names were not printed back in UTF-8"; exit 1; }
echo "dist_test: ebb.exe run with CJK model folder and image names: identical to the Linux build's"

# 1c. Without onnxruntime.dll beside it (issue 34): one line naming the DLL, not a silent exit.
mkdir "$work/no_ort"
cp "$dist/ebb.exe" "$dist/ebb.dll" "$work/no_ort/"
set +e
(cd "$work/no_ort" && "$WINE" ebb.exe --version) > "$work/no_ort.log" 2>&1
code=$?
set -e
[ "$code" = 1 ] && grep -q "ebb: error: .*onnxruntime.dll cannot be loaded" "$work/no_ort.log" ||
  { cat "$work/no_ort.log"; echo "dist_test: without onnxruntime.dll: exit $code, not the one-line error"; exit 1; }
echo "dist_test: without onnxruntime.dll: $(head -1 "$work/no_ort.log")"

# 1d. Windows hints (issue 34): --version names the DLL with Windows separators and no `make setup`.
(cd "$dist" && "$WINE" ebb.exe --version) > "$work/version.log" 2> /dev/null
grep -q 'onnxruntime_providers_cuda.dll; this Windows build' "$work/version.log" &&
  ! grep -q 'make setup\|/onnxruntime_providers_cuda' "$work/version.log" ||
  { cat "$work/version.log"; echo "dist_test: --version's CUDA line is not Windows'"; exit 1; }

# 1e. ONNX Runtime's display-adapter probe (issue 34): under Wine it finds no DXGI and its DLL writes
# "Failed to create DXGI factory." to its C runtime's stderr; ebb silences that while it creates ORT's
# environment (port::OrtStderrSilenced), and ebb's own errors, written after that, still reach stderr.
for log in run.log cjk.log version.log; do
  ! grep -q "DXGI" "$work/$log" || { cat "$work/$log"; echo "dist_test: ORT's DXGI line is in $log"; exit 1; }
done
echo "not a PNG" > "$work/not_an_image.png"
set +e
(cd "$dist" && "$WINE" ebb.exe run models/waifu2x_scale2x -i ../not_an_image.png -o ../never.png) > /dev/null 2> "$work/err.log"
code=$?
set -e
[ "$code" != 0 ] && grep -q "ebb: error: " "$work/err.log" && ! grep -q "DXGI" "$work/err.log" ||
  { cat "$work/err.log"; echo "dist_test: a failing run's stderr: exit $code, not ebb's error alone"; exit 1; }
echo "dist_test: no DXGI line; a failing run's stderr: $(head -1 "$work/err.log")"

# 2. ebb.exe serve answers an inference over HTTP from this (Linux) side.
(cd "$dist" && exec "$WINE" ebb.exe serve --repository models --port 0 --no-load) > "$work/serve.log" 2>&1 &
server=$!
url=
for _ in $(seq 1 600); do
  url=$(grep -o 'http://127.0.0.1:[0-9]*' "$work/serve.log" | head -1 || true)
  [ -n "$url" ] && break
  kill -0 "$server" 2>/dev/null || { cat "$work/serve.log"; echo "dist_test: ebb.exe serve exited"; exit 1; }
  sleep 0.1
done
[ -n "$url" ] || { cat "$work/serve.log"; echo "dist_test: ebb.exe serve printed no URL"; exit 1; }
grep -q "HTTP only" "$work/serve.log" || { cat "$work/serve.log"; echo "dist_test: no HTTP-only notice"; exit 1; }
# The start-up hint pastes into cmd.exe: double quotes, no sh single quotes, findstr for grep. With
# --no-load it is the repository index request (no model is loaded to make an inference request from).
grep -q 'curl -s -d "" http://127.0.0.1:[0-9]*/v2/repository/index' "$work/serve.log" &&
  grep -q '| findstr ebb_arena' "$work/serve.log" && ! grep -q "curl .*'" "$work/serve.log" ||
  { cat "$work/serve.log"; echo "dist_test: the start-up hint is not cmd.exe's"; exit 1; }
data=$(seq -s, 1 64)  # tiny: x FP32 [1, 64]
reply=$(curl -sf -X POST "$url/v2/models/tiny/infer" -H 'Content-Type: application/json' \
  -d "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,64],\"datatype\":\"FP32\",\"data\":[$data]}]}") ||
  { cat "$work/serve.log"; echo "dist_test: the inference request failed"; exit 1; }
echo "dist_test: ebb.exe serve answered: $reply"
echo "$reply" | grep -q '"outputs"' || { echo "dist_test: no outputs in the reply"; exit 1; }
echo "dist_test: passed"
