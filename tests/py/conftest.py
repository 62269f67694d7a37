"""Shared fixtures of the Python tests (run by ctest: tests/CMakeLists.txt, one process per file).

Paths come from the environment ctest sets (EBB_MODELS_DIR, EBB_FIXTURES_DIR,
EBB_BINARY, EBB_BUILD_DIR), else from this file's place in the checkout.

One Runtime per process may own the shared CPU arena: each test module gets its
own Runtime (module scope), built from the module's POLICY (None: the defaults),
and drops it at the end, so running several files in one pytest process works too.
"""
import gc
import os
import pathlib
import sys

import numpy as np
import pytest

import ebb

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODELS = pathlib.Path(os.environ.get("EBB_MODELS_DIR", ROOT / "models"))
FIXTURES = pathlib.Path(os.environ.get("EBB_FIXTURES_DIR", ROOT / "tests" / "fixtures"))
BUILD = pathlib.Path(os.environ.get("EBB_BUILD_DIR", ROOT / "build"))
EBB_BINARY = pathlib.Path(os.environ.get("EBB_BINARY", BUILD / "ebb"))

MiB = 1 << 20

sys.path.insert(0, str(ROOT / "tools"))  # make_test_models: the external-data tests' models


def model(name: str) -> str:
    return str(MODELS / name / "model.onnx")


def rss_bytes() -> int:
    """VmRSS of this process, read from /proc/self/status."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


def shared_arena(rt: "ebb.Runtime") -> dict:
    """The shared CPU arena's statistics (runtime.memory())."""
    for arena in rt.memory()["arenas"]:
        if arena["name"] == "cpu:shared":
            return arena
    raise AssertionError("no shared CPU arena in runtime.memory()")


def input_views(session: "ebb.Session", inputs) -> dict:
    """How Session.run hands each input to the library: {name: (borrowed, data address)}. Reads the
package's internals (Session._inputs_of, the C API's handles): for the zero-copy tests only."""
    from ebb._lib import lib
    from ebb._tensors import Held
    held = Held()
    try:
        names, handles, n = session._inputs_of(held, inputs)
        return {names[i].decode(): (bool(lib.ebb_tensor_borrowed(handles[i])), lib.ebb_tensor_data(handles[i]) or 0)
                for i in range(n)}
    finally:
        held.close()


def image_input(h: int, w: int, seed: int = 1, channels: int = 3) -> np.ndarray:
    """A float32 [1,C,H,W] tensor with values uniform in [0, 1)."""
    return np.random.default_rng(seed).random((1, channels, h, w), dtype=np.float32)


def write_variant(source: str, target: pathlib.Path, doc: str) -> str:
    """A copy of a model with another doc_string (ModelProto field 6 appended), so its own session."""
    data = pathlib.Path(source).read_bytes() + b"\x32" + bytes([len(doc)]) + doc.encode()
    target.write_bytes(data)
    return str(target)


@pytest.fixture(scope="module")
def runtime(request):
    rt = ebb.Runtime(getattr(request.module, "POLICY", None))
    yield rt
    del rt
    gc.collect()
