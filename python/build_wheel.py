"""Writes ebb's wheel: the pure-Python package python/ebb plus the C API's library and ONNX Runtime's,
tagged py3-none-<platform> (one wheel per platform for every CPython 3: nothing in it is compiled
against Python). Standard library only, so that it also packs the Windows cross-build.

    python/build_wheel.py --platform linux_x86_64 --out DIR --lib libebb.so.1 --lib libonnxruntime.so.1
    python/build_wheel.py --platform win_amd64 --out DIR --lib ebb.dll --lib onnxruntime.dll

Libraries are stored under their file names beside the package's files (ebb/libebb.so.1, ...),
symbolic links followed. `make wheel` (Linux) and `make windows-dist` (Windows) call it; setup.py
uses native_libraries() for `pip install .`.
"""
import argparse
import base64
import hashlib
import pathlib
import re
import sys
import zipfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "python" / "ebb"
NAME = "ebb"
SUMMARY = "ONNX models in-process that stay loaded but give their inference memory back"


def version() -> str:
    match = re.search(r"project\(ebb VERSION ([0-9.]+)", (ROOT / "CMakeLists.txt").read_text())
    if not match:
        raise SystemExit("build_wheel: no `project(ebb VERSION x.y.z)` in CMakeLists.txt")
    return match.group(1)


def native_libraries(lib_dir: pathlib.Path, cuda: bool = False) -> list:
    """The libraries of an installed C API (`cmake --install BUILD --component c_api`) a Linux wheel ships:
    libebb.so.1 and ONNX Runtime's library; its CUDA provider (and the shared provider library it needs)
    only when asked for."""
    names = ["libebb.so.1", "libonnxruntime.so.1"]
    if cuda:
        names += ["libonnxruntime_providers_shared.so", "libonnxruntime_providers_cuda.so"]
    missing = [n for n in names if not (lib_dir / n).exists()]
    if missing:
        raise SystemExit(f"build_wheel: {', '.join(missing)} not in {lib_dir}")
    return [lib_dir / n for n in names]


def package_files() -> list:
    return sorted(p for p in PACKAGE.iterdir() if p.is_file() and p.suffix in (".py", ".pyi", "") and
                  not p.name.startswith(".") and p.name != "__pycache__")


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def write_wheel(out_dir: pathlib.Path, platform: str, libraries: list) -> pathlib.Path:
    ver = version()
    tag = f"py3-none-{platform}"
    dist_info = f"{NAME}-{ver}.dist-info"
    wheel = out_dir / f"{NAME}-{ver}-{tag}.whl"
    out_dir.mkdir(parents=True, exist_ok=True)
    entries = [(f"ebb/{p.name}", p.read_bytes()) for p in package_files()]
    entries += [(f"ebb/{pathlib.Path(lib).name}", pathlib.Path(lib).resolve().read_bytes()) for lib in libraries]
    metadata = (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {ver}\nSummary: {SUMMARY}\n"
                "Requires-Python: >=3.10\nProvides-Extra: numpy\nRequires-Dist: numpy; extra == \"numpy\"\n"
                "License: see the project's licence; ONNX Runtime: MIT\n")
    wheel_file = f"Wheel-Version: 1.0\nGenerator: ebb build_wheel.py\nRoot-Is-Purelib: false\nTag: {tag}\n"
    entries += [(f"{dist_info}/METADATA", metadata.encode()), (f"{dist_info}/WHEEL", wheel_file.encode()),
                (f"{dist_info}/top_level.txt", b"ebb\n")]
    record = [_record_line(name, data) for name, data in entries] + [f"{dist_info}/RECORD,,"]
    entries.append((f"{dist_info}/RECORD", ("\n".join(record) + "\n").encode()))
    tmp = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(tmp, "w", compression=zipfile.ZIP_DEFLATED) as z:
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0))  # reproducible
            info.external_attr = (0o755 if name.endswith((".so", ".so.1", ".dll")) else 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
    tmp.replace(wheel)
    return wheel


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--platform", required=True, help="linux_x86_64 or win_amd64")
    parser.add_argument("--out", required=True, type=pathlib.Path)
    parser.add_argument("--lib", action="append", default=[], help="a library to ship (repeat)")
    parser.add_argument("--c-api-lib-dir", type=pathlib.Path,
                        help="instead of --lib: the lib folder of an installed C API (Linux)")
    parser.add_argument("--cuda", action="store_true", help="with ONNX Runtime's CUDA provider (Linux)")
    args = parser.parse_args()
    libs = list(args.lib)
    if args.c_api_lib_dir:
        libs += native_libraries(args.c_api_lib_dir, args.cuda)
    if not libs:
        parser.error("no library: give --lib or --c-api-lib-dir")
    print(write_wheel(args.out, args.platform, libs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
