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
data=$(seq -s, 1 64)  # tiny: x FP32 [1, 64]
reply=$(curl -sf -X POST "$url/v2/models/tiny/infer" -H 'Content-Type: application/json' \
  -d "{\"inputs\":[{\"name\":\"x\",\"shape\":[1,64],\"datatype\":\"FP32\",\"data\":[$data]}]}") ||
  { cat "$work/serve.log"; echo "dist_test: the inference request failed"; exit 1; }
echo "dist_test: ebb.exe serve answered: $reply"
echo "$reply" | grep -q '"outputs"' || { echo "dist_test: no outputs in the reply"; exit 1; }
echo "dist_test: passed"
