"""Fixtures of the tests that run inside Blender (tests/blender/launch.py starts Blender and pytest in it).

The add-on is staged in the scratch user folder by the launcher; `addon` enables it the way Blender's
preferences do (bpy.ops.preferences.addon_enable) once per file, so the tests of a file share one Blender
process, one ebb runtime and the model it loaded. `prefs` puts the add-on's preferences back after a test.
References come from the real `ebb run` (EBB_BINARY) on the same pixels written as PNG.
"""
import os
import pathlib
import subprocess
import sys
import threading
import time

import bpy
import numpy as np
import pytest

import ebb

ROOT = pathlib.Path(__file__).resolve().parents[3]
MODELS = pathlib.Path(os.environ.get("EBB_MODELS_DIR", ROOT / "models"))
EBB_BINARY = os.environ.get("EBB_BINARY", str(ROOT / "build" / "ebb"))
UPSCALER = MODELS / "waifu2x_scale2x"
MiB = 1 << 20
ADDON = "ebb_upscale"


@pytest.fixture(scope="module")
def addon():
    assert bpy.ops.preferences.addon_enable(module=ADDON) == {'FINISHED'}
    yield sys.modules[ADDON]
    if ADDON in bpy.context.preferences.addons:
        bpy.ops.preferences.addon_disable(module=ADDON)


@pytest.fixture
def engine(addon):
    return addon.engine.ENGINE


@pytest.fixture
def prefs(addon):
    p = bpy.context.preferences.addons[ADDON].preferences
    saved = {k: getattr(p, k) for k in ("model_folder", "tile_size", "policy_file")}
    yield p
    for k, v in saved.items():
        setattr(p, k, v)


def make_image(name: str, width: int, height: int, seed: int) -> np.ndarray:
    """A new 8-bit RGBA image datablock of random pixels (opaque); returns its RGB bytes, top row first."""
    rgba = np.random.default_rng(seed).integers(0, 256, (height, width, 4), dtype=np.uint8)
    rgba[..., 3] = 255
    image = bpy.data.images.new(name, width, height, alpha=True)
    image.pixels.foreach_set((rgba[::-1].astype(np.float32) / 255).ravel())
    return rgba[..., :3].copy()


def image_bytes(image) -> np.ndarray:
    """An 8-bit image's pixels as Blender holds them: uint8 RGBA, top row first."""
    w, h = image.size
    buf = np.empty(w * h * 4, np.float32)
    image.pixels.foreach_get(buf)
    return np.rint(buf.reshape(h, w, 4)[::-1] * 255).astype(np.uint8)


def ebb_run(folder: pathlib.Path, frame: np.ndarray, name: str) -> np.ndarray:
    """`ebb run` over the bundled upscaler for one uint8 frame, as a user runs it on a PNG."""
    src, out = folder / f"{name}.png", folder / f"{name}_ebb_run.png"
    ebb.write_png(src, frame)
    run = subprocess.run([EBB_BINARY, "run", str(UPSCALER), "-i", str(src), "-o", str(out)],
                         capture_output=True, text=True, env=dict(os.environ, EBB_LOG="quiet"))
    assert run.returncode == 0, run.stderr
    return ebb.read_image(out)


def rss() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


class RssSampler:
    """Blender's RSS read from /proc every 2 ms on a thread of its own, while a job runs."""

    def __enter__(self):
        self.peak = rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample)
        self._thread.start()
        return self

    def _sample(self):
        while not self._stop.wait(0.002):
            self.peak = max(self.peak, rss())

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss())


def shared_arena(engine) -> int:
    return next(a["reserved"] for a in engine.runtime.memory()["arenas"] if a["name"] == "cpu:shared")


def wait_until(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)
