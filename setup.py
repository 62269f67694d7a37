"""Builds the Python package ebb for `pip install --no-build-isolation .` (pyproject.toml).

The extension is CMake's target `ebb_python` (python/CMakeLists.txt); this file only
runs CMake and copies what it built, with ONNX Runtime's libraries beside it (the
extension looks for them in its own folder first: RPATH $ORIGIN).

EBB_BUILD_DIR: an existing, configured CMake build tree to reuse (e.g. `build`, after
`make build`: then nothing is compiled again). Default: build/pip, configured here with
the tests off.
"""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


def cmake_cache_value(build_dir: Path, key: str) -> str:
    text = (build_dir / "CMakeCache.txt").read_text()
    match = re.search(rf"^{key}:[A-Z]+=(.*)$", text, re.MULTILINE)
    if not match:
        raise RuntimeError(f"{key} is not in {build_dir}/CMakeCache.txt")
    return match.group(1)


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        build_dir = Path(os.environ.get("EBB_BUILD_DIR") or ROOT / "build" / "pip").resolve()
        if not (build_dir / "CMakeCache.txt").exists():
            subprocess.check_call(["cmake", "-S", str(ROOT), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
                                   "-DEBB_BUILD_TESTS=OFF", f"-DEBB_PYTHON={sys.executable}"])
        subprocess.check_call(["cmake", "--build", str(build_dir), "--target", "ebb_python",
                               "-j", str(os.cpu_count() or 1)])
        built = build_dir / "python" / "ebb"
        extension = next(built.glob("_ebb*.so"))
        dest = Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(extension, dest.parent / extension.name)
        ort_lib = Path(cmake_cache_value(build_dir, "EBB_ORT_ROOT")) / "lib"
        for lib in ("libonnxruntime.so.1", "libonnxruntime_providers_shared.so", "libonnxruntime_providers_cuda.so"):
            if (ort_lib / lib).exists():
                shutil.copy2(ort_lib / lib, dest.parent / lib)  # follows the .so.1 symlink


setup(
    packages=["ebb"],
    package_dir={"": "python"},
    package_data={"ebb": ["*.pyi", "py.typed"]},
    ext_modules=[Extension("ebb._ebb", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    zip_safe=False,
)
