"""Installs the Python package ebb from a checkout: `pip install --no-build-isolation .` (pyproject.toml).

The package is pure Python over the C API (ctypes); this file only builds CMake's target ebb_c
(libebb.so.1), installs its component c_api into a staging folder (libebb.so.1 with RPATH $ORIGIN,
ONNX Runtime's library beside it) and copies those libraries into the package. The wheel is tagged
py3-none-<platform>: one for every CPython 3. `make wheel` writes the same wheel without pip
(python/build_wheel.py).

EBB_BUILD_DIR: an existing, configured CMake build tree to reuse (e.g. `build`, after `make build`:
then nothing is compiled again). Default: build/pip, configured here with the tests off.
"""
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT / "python"))
from build_wheel import native_libraries  # noqa: E402

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70: the wheel package's
    from wheel.bdist_wheel import bdist_wheel


class BuildWithLibrary(build_py):
    def run(self) -> None:
        super().run()
        build_dir = Path(os.environ.get("EBB_BUILD_DIR") or ROOT / "build" / "pip").resolve()
        if not (build_dir / "CMakeCache.txt").exists():
            subprocess.check_call(["cmake", "-S", str(ROOT), "-B", str(build_dir), "-DCMAKE_BUILD_TYPE=Release",
                                   "-DEBB_BUILD_TESTS=OFF"])
        subprocess.check_call(["cmake", "--build", str(build_dir), "--target", "ebb_c", "-j", str(os.cpu_count() or 1)])
        stage = build_dir / "pip-stage"
        subprocess.check_call(["cmake", "--install", str(build_dir), "--component", "c_api", "--prefix", str(stage)])
        dest = Path(self.build_lib) / "ebb"
        for lib in native_libraries(stage / "lib", cuda=os.environ.get("EBB_WHEEL_CUDA") == "1"):
            shutil.copyfile(lib, dest / lib.name)  # follows the .so.1 link


class PlatformWheel(bdist_wheel):
    """py3-none-<platform>: the package holds native libraries but nothing built against Python."""

    def finalize_options(self) -> None:
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):
        return "py3", "none", sysconfig.get_platform().replace("-", "_").replace(".", "_")


class BinaryDistribution(Distribution):
    def has_ext_modules(self) -> bool:
        return True


setup(
    packages=["ebb"],
    package_dir={"": "python"},
    package_data={"ebb": ["*.pyi", "py.typed"]},
    cmdclass={"build_py": BuildWithLibrary, "bdist_wheel": PlatformWheel},
    distclass=BinaryDistribution,
    zip_safe=False,
)
