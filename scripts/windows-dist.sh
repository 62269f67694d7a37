#!/usr/bin/env bash
# `make windows-dist`: the Windows release archive ebb-<version>-windows-x64.zip in the Windows build
# folder (docs/windows.md): ebb.exe, ebb.dll, its import library libebb.dll.a and include/ebb/c.h,
# onnxruntime.dll (+ onnxruntime_providers_shared.dll), the bundled models, the licences and a README;
# and the Python package's Windows wheel ebb-<version>-py3-none-win_amd64.whl beside it (python/build_wheel.py:
# the package's files with ebb.dll and onnxruntime.dll; every CPython 3 on Windows, Blender's included).
# Usage: scripts/windows-dist.sh BUILD_DIR VERSION
set -euo pipefail
cd "$(dirname "$0")/.."
build=$1
version=$2
name=ebb-$version-windows-x64
stage=$build/dist/$name
rm -rf "$build/dist"
mkdir -p "$stage/include/ebb" "$stage/licences"
cp "$build/ebb.exe" "$build/ebb.dll" "$build/libebb.dll.a" "$stage/"
cp third_party/onnxruntime-windows/bin/*.dll "$stage/"
cp include/ebb/c.h "$stage/include/ebb/"
for m in models/*/; do
  m=${m%/}
  [ -f "$m/model.onnx" ] || continue
  mkdir -p "$stage/$m"
  cp "$m"/* "$stage/$m/"
done
cp third_party/onnxruntime/LICENSE "$stage/licences/onnxruntime-LICENSE.txt"
cp third_party/onnxruntime/ThirdPartyNotices.txt "$stage/licences/onnxruntime-ThirdPartyNotices.txt"
cat > "$stage/README.txt" <<TEXT
ebb $version for Windows x64

ebb runs ONNX models with ONNX Runtime 1.29.0 (onnxruntime.dll, CPU execution provider), keeps them
loaded and gives their inference memory back at the end of each operation.

  ebb.exe run models\\waifu2x_scale2x -i in.png -o out.png     upscale an image
  ebb.exe info models\\tiny                                      a model's inputs and outputs
  ebb.exe serve --repository models --port 8000                 KServe v2 inference server, HTTP only
                                                                (this build has no gRPC)
  ebb.exe bench floor --json                                    memory after load, at the peak, after release

The C API: include\\ebb\\c.h, ebb.dll, and libebb.dll.a to link with (MinGW; MSVC users make an import
library from ebb.dll). onnxruntime.dll must stay beside ebb.exe and ebb.dll.

Built with MinGW-w64 and tested under Wine: memory figures measured under Wine are Wine's, not Windows'.
Licences: licences\\ (ONNX Runtime, MIT) and each model's folder (LICENSE, LICENSE-NOTICE).
TEXT
(cd "$build/dist" && rm -f "../$name.zip" && zip -qr "../$name.zip" "$name")
echo "$build/$name.zip"
/usr/bin/python3 python/build_wheel.py --platform win_amd64 --out "$build" \
  --lib "$build/ebb.dll" --lib third_party/onnxruntime-windows/bin/onnxruntime.dll
