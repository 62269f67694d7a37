"""The offline install from the checkout, the documented way: a venv of Debian's interpreter that sees
Debian's packages (setuptools, wheel, numpy), then `pip install --no-build-isolation .`.

EBB_BUILD_DIR points setup.py at the build tree ctest runs in, so nothing is compiled again; the
package is then imported and run from the venv, outside the checkout, without PYTHONPATH."""
import os
import pathlib
import subprocess
import sys

from conftest import BUILD, ROOT, model

CHECK = r"""
import sys
import numpy as np
import ebb
s = ebb.Runtime().load(sys.argv[1])
print(s.run({"x": np.ones((1, 64), np.float32)})["y"].shape)
print(ebb.__file__)
print(ebb.__version__)
with open("/proc/self/maps") as maps:
    print(sorted({line.split()[-1] for line in maps if "libonnxruntime.so" in line}))
import importlib, pathlib
package = pathlib.Path(ebb.__file__).parent
modules = [ebb] + [importlib.import_module("ebb." + p.stem) for p in package.glob("_*.py") if p.stem != "__init__"]
print(sorted(p.name for p in package.iterdir() if "bench" in p.name.lower())
      + sorted(m.__name__ + "." + n for m in modules for n in vars(m) if "bench" in n.lower())
      + [n for n in ("ebb_bench_time_runs",) if hasattr(ebb._lib.lib, n)])
"""


def test_pip_install_into_a_venv(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(EBB_BUILD_DIR=str(BUILD), PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-build-isolation", str(ROOT)], env=env,
                         cwd=tmp_path, capture_output=True, text=True)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    run = subprocess.run([str(venv / "bin" / "python"), "-c", CHECK, model("tiny")], env=env, cwd=tmp_path,
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    shape, location, version, libs, bench = run.stdout.splitlines()
    assert shape == "(1, 64)"
    site = pathlib.Path(location).parent.parent
    assert site.name == "site-packages" and venv in site.parents
    assert version == "0.1.0"
    # ONNX Runtime is the copy installed beside the extension, not the checkout's.
    assert libs == repr([str(pathlib.Path(location).parent / "libonnxruntime.so.1")])
    # No benchmark hook ships: no file (python/bench/ stays in the build tree), no name in a module, and
    # libebb.so.1 no longer has the old C++ baseline of make java-bench.
    assert bench == "[]"
