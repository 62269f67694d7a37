"""Callbacks from the library's threads into Python (ctypes CFUNCTYPE): a pool whose last reference goes
inside its own on_event, on its keep-alive thread, ends without joining that thread from itself (which
would abort the process), and the process goes on; a run_with_recovery body keeps a session that outlives
the call."""
import gc
import subprocess
import sys
import threading

import numpy as np

import ebb
from conftest import model

DROP_IN_CALLBACK = r"""
import gc, sys, threading, time
import ebb
rt = ebb.Runtime()
done = threading.Event()
holder = {}

def on_event(e):
    if e.kind == "evict" and e.reason == "keep_alive":
        holder.clear()  # the last reference to the pool, on the pool's keep-alive thread
        done.set()

pool = ebb.ModelPool(rt, on_event=on_event)
pool.add("t", sys.argv[1], device="cpu")
with pool.acquire("t", keep_alive_ms=50):
    pass
holder["pool"] = pool
del pool
assert done.wait(30), "no keep-alive eviction"
time.sleep(0.5)
gc.collect()
again = ebb.ModelPool(rt)
again.add("t", sys.argv[1], device="cpu")
with again.acquire("t") as lease:
    print("after", lease.session.name)
"""


def test_a_pool_dropped_inside_its_own_event_callback():
    run = subprocess.run([sys.executable, "-c", DROP_IN_CALLBACK, model("tiny")], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip() == "after t"


def test_a_session_kept_from_a_recovery_body_outlives_it(runtime):
    pool = ebb.ModelPool(runtime)
    pool.add("t", model("tiny"), device="cpu")
    kept = pool.run_with_recovery("t", lambda s: s)
    pool.unload("t")
    del pool
    gc.collect()
    assert kept.run({"x": np.ones((1, 64), np.float32)})["y"].shape == (1, 64)
