"""No reference or memory leaks over 1000 runs (or failed calls): sys.getrefcount of everything passed in, the number
of live Python objects, and the process RSS stay flat."""
import gc
import sys

import numpy as np
import pytest

import ebb
from conftest import MiB, image_input, model, rss_bytes

N = 1000


def flat(make_call, *watched, runs_per_call=1):
    """N runs (N / runs_per_call calls of make_call()) after a warm-up; returns (refcounts before/after,
    objects, RSS growth)."""
    for _ in range(50):
        make_call()
    gc.collect()
    refs = [sys.getrefcount(w) for w in watched]
    objects = len(gc.get_objects())
    rss = rss_bytes()
    for _ in range(N // runs_per_call):
        make_call()
    gc.collect()
    return refs, [sys.getrefcount(w) for w in watched], len(gc.get_objects()) - objects, rss_bytes() - rss


def check(result):
    refs_before, refs_after, objects, rss = result
    assert refs_after == refs_before
    assert objects < 50, f"{objects} more live Python objects after {N} calls"
    assert rss < 4 * MiB, f"RSS grew by {rss / MiB:.1f} MiB over {N} calls"


@pytest.fixture(scope="module")
def convnet(runtime):
    return runtime.load(model("convnet"))


def test_session_run(convnet):
    x = image_input(32, 32)  # 12 KiB of output per call: losing them would show in RSS
    inputs = {"x": x}
    check(flat(lambda: convnet.run(inputs), x, inputs, convnet))


def test_operation_runs(runtime, convnet):
    x = image_input(32, 32)
    inputs = {"x": x}

    def block():
        with runtime.operation() as op:
            op.run(convnet, inputs)
            op.run(convnet, inputs)

    check(flat(block, x, inputs, convnet, runtime, runs_per_call=2))


def test_ready_made_operation(runtime, convnet):
    frames = [image_input(32, 32, seed=s) for s in range(2)]
    progress = lambda done, total: None
    check(flat(lambda: runtime.run_per_frame(convnet, frames, on_progress=progress),
               frames[0], frames, convnet, progress, runs_per_call=2))


def test_errors(convnet):
    bad = image_input(8, 8).astype(np.float64)
    inputs = {"x": bad}

    def fail():
        try:
            convnet.run(inputs)
        except TypeError:
            pass
        try:
            convnet.run({"x": image_input(8, 8, channels=1)})
        except ebb.InvalidArgument:
            pass

    check(flat(fail, bad, inputs, convnet, runs_per_call=2))


def test_pool_leases(runtime):
    pool = ebb.ModelPool(runtime, budget_bytes=1 << 40)
    pool.add("tiny", model("tiny"), device="cpu")
    x = np.ones((1, 64), np.float32)

    def lease():
        with pool.acquire("tiny") as held:
            held.session.run({"x": x})

    check(flat(lease, x, pool))
