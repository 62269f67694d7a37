"""The Linux wheel (py3-none-linux_x86_64, built by `make wheel` / the build's target ebb_wheel) in a fresh
virtual environment of every CPython the machine has: pyenv's 3.10, 3.11, 3.12 and 3.13, without NumPy (the
buffers path), and Debian's /usr/bin/python3 (with NumPy, seen through --system-site-packages). Each installs
the wheel with `pip install --no-deps --no-index` (Debian's pip, into the venv's site-packages: a venv without
pip of its own is made in a second, where ensurepip takes many) and runs convnet. An interpreter that is missing
is a skip with its reason, never a silent pass."""
import os
import pathlib
import shutil
import subprocess
import sys
import zipfile

import pytest

from conftest import BUILD, model

PYENV_VERSIONS = ["3.10.13", "3.11.7", "3.12.1", "3.13.0"]
WHEEL_DIR = BUILD / "python" / "dist"

CHECK = r"""
import array, sys
import ebb
assert ebb.__file__.startswith(sys.prefix), (ebb.__file__, sys.prefix)
rt = ebb.Runtime()
s = rt.load(sys.argv[1])
x = array.array("f", [0.5] * (3 * 16 * 16))
out = s.run({"x": memoryview(x).cast("B").cast("f", (1, 3, 16, 16))})["y"]
numpy = type(out).__module__ == "numpy"
shape = tuple(out.shape)
values = out.ravel().tolist() if numpy else out.data.cast("B").cast("f").tolist()
assert shape[0] == 1 and len(values) > 0 and all(v == v for v in values)
print(sys.version_info[:2], "numpy" if numpy else "buffers", shape, round(sum(values), 3))
"""


def _wheel() -> pathlib.Path:
    wheels = sorted(WHEEL_DIR.glob("ebb-*-py3-none-linux_x86_64.whl"))
    assert wheels, f"no wheel in {WHEEL_DIR}: build the target ebb_wheel (make wheel)"
    return wheels[-1].resolve()


def _interpreter(version: str) -> str:
    pyenv = shutil.which("pyenv") or os.path.expanduser("~/.pyenv/bin/pyenv")
    if not os.path.exists(pyenv):
        pytest.skip(f"CPython {version}: pyenv is not installed here")
    prefix = subprocess.run([pyenv, "prefix", version], capture_output=True, text=True)
    python = pathlib.Path(prefix.stdout.strip()) / "bin" / "python"
    if prefix.returncode != 0 or not python.exists():
        pytest.skip(f"CPython {version} is not installed in pyenv ({prefix.stderr.strip()})")
    return str(python)


def test_the_wheel_holds_the_package_and_the_libraries():
    with zipfile.ZipFile(_wheel()) as z:
        names = set(z.namelist())
        wheel_file = z.read("ebb-0.1.0.dist-info/WHEEL").decode()
    assert {"ebb/__init__.py", "ebb/_lib.py", "ebb/libebb.so.1", "ebb/libonnxruntime.so.1"} <= names
    assert "Tag: py3-none-linux_x86_64" in wheel_file and "Root-Is-Purelib: false" in wheel_file
    assert not any(n.endswith(".a") or "_ebb." in n and n.endswith(".so") for n in names)  # no static runtime
    assert not any("providers_cuda" in n for n in names)  # without the CUDA provider unless asked for


def _install_and_run(python: str, tmp_path: pathlib.Path, system_site: bool) -> str:
    venv = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", "--without-pip", *(["--system-site-packages"] if system_site else []),
                    str(venv)], check=True, capture_output=True)
    site = subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          check=True, capture_output=True, text=True).stdout.strip()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "EBB_LIBRARY")}
    env.update(PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    pip = subprocess.run(["/usr/bin/python3", "-m", "pip", "install", "--no-deps", "--no-index", "--no-compile",
                          "--target", site, str(_wheel())], env=env, capture_output=True, text=True)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    run = subprocess.run([str(venv / "bin" / "python"), "-c", CHECK, model("convnet")], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout


@pytest.mark.parametrize("version", PYENV_VERSIONS)
def test_pyenv_python_runs_convnet_from_the_wheel_without_numpy(version, tmp_path):
    python = _interpreter(version)
    has_numpy = subprocess.run([python, "-c", "import numpy"], capture_output=True).returncode == 0
    out = _install_and_run(python, tmp_path, system_site=False)
    assert out.startswith(f"({version.split('.')[0]}, {version.split('.')[1]})")
    assert ("numpy" if has_numpy else "buffers") in out


def test_debian_python_runs_convnet_from_the_wheel_with_numpy(tmp_path):
    if not os.path.exists("/usr/bin/python3"):
        pytest.skip("Debian's /usr/bin/python3 is not installed")
    out = _install_and_run("/usr/bin/python3", tmp_path, system_site=True)
    assert "numpy" in out
