"""ebb.ModelPool from Python: leases as context managers, budget, pins, keep-alive, events, errors,
recovery, and handles that keep what they point into alive."""
import gc
import os
import threading
import time

import pytest

import ebb
from conftest import image_input, model, write_variant

NAMES = ["a", "b", "c"]


@pytest.fixture(scope="module")
def variants(tmp_path_factory):
    folder = tmp_path_factory.mktemp("variants")
    return {n: write_variant(model("convnet"), folder / f"{n}.onnx", f"variant {n}") for n in NAMES}


def make_pool(runtime, variants, pinned=(), **options):
    events = []
    pool = ebb.ModelPool(runtime, on_event=lambda e: events.append((e, threading.current_thread().name)),
                         **options)
    for n in NAMES:
        pool.add(n, variants[n], device="cpu", pinned=n in pinned)
    return pool, events


def use(pool, name, **options):
    with pool.acquire(name, **options) as lease:
        return lease.session.run({"x": image_input(512, 512)})["y"]


@pytest.fixture(scope="module")
def charge(runtime, variants):
    pool, _ = make_pool(runtime, variants, budget_bytes=1 << 40)
    for n in NAMES:
        use(pool, n)
    return max(pool.status(n).charge_bytes for n in NAMES)


def test_a_lease_holds_the_model(runtime, variants):
    pool, events = make_pool(runtime, variants, budget_bytes=1 << 40)
    assert "a" in pool and "z" not in pool
    assert pool.status("a").state == "UNAVAILABLE"
    with pool.acquire("a") as lease:
        assert lease.name == "a" and not lease.released
        assert pool.status("a").state == "READY" and pool.status("a").in_flight == 1
        assert lease.session.run({"x": image_input(16, 16)})["y"].shape == (1, 3, 16, 16)
    assert lease.released and pool.status("a").in_flight == 0
    with pytest.raises(ebb.FailedPrecondition, match="released"):
        lease.session
    (load, thread), = [(e, t) for e, t in events if e.kind == "load"]
    assert load.name == "a" and load.on_demand and load.load_ms > 0 and load.reason is None
    assert [e.kind for e in pool.events()] == ["load"]
    assert pool.events() == []
    s = pool.status("a")
    assert s.charge_bytes == max(s.load_bytes + s.transient_bytes, os.path.getsize(variants["a"]))
    assert pool.used("cpu") == s.charge_bytes
    assert [m.name for m in pool.snapshot()] == NAMES


def test_budget_evicts_the_least_recently_used_and_spares_pinned(runtime, variants, charge):
    budget = charge * 5 // 2
    pool, events = make_pool(runtime, variants, pinned=("a",), budget_bytes=budget)
    assert pool.budget("cpu") == budget
    for _ in range(2):
        for n in NAMES:
            use(pool, n)
            assert pool.used("cpu") <= budget
    evicted = [e.name for e, _ in events if e.kind == "evict" and e.reason == "budget"]
    assert evicted and "a" not in evicted
    assert pool.status("a").state == "READY" and pool.status("a").pinned


def test_keep_alive_and_the_reaper_thread(runtime, variants):
    pool, events = make_pool(runtime, variants, budget_bytes=1 << 40, keep_alive_ms=-1)
    use(pool, "a", keep_alive_ms=0)
    assert pool.status("a").state == "UNAVAILABLE"
    use(pool, "b", keep_alive_ms=100)
    deadline = time.monotonic() + 10
    while pool.status("b").state == "READY" and time.monotonic() < deadline:
        time.sleep(0.05)
    keep_alive = [(e.name, t) for e, t in events if e.kind == "evict" and e.reason == "keep_alive"]
    assert [n for n, _ in keep_alive] == ["a", "b"]
    # "a" went on this thread when its lease came back; "b" on the pool's keep-alive thread.
    assert keep_alive[0][1] == threading.current_thread().name
    assert keep_alive[1][1] != threading.current_thread().name


def test_errors(runtime, variants, charge):
    pool, _ = make_pool(runtime, variants, budget_bytes=charge * 3 // 2)
    with pytest.raises(ebb.NotFound):
        pool.acquire("nope")
    with pytest.raises(ebb.Unavailable):
        pool.acquire("a", load_on_demand=False)
    use(pool, "a")
    use(pool, "b")
    with pool.acquire("a"):
        with pytest.raises(ebb.ResourceExhausted, match="cannot fit model 'b'") as err:
            pool.acquire("b")
        assert isinstance(err.value, MemoryError)
    with pytest.raises(TypeError):
        ebb.ModelPool(runtime, on_event=42)


def test_run_with_recovery(runtime, variants):
    pool, events = make_pool(runtime, variants, budget_bytes=1 << 40)
    assert pool.run_with_recovery("a", lambda s: s.run({"x": image_input(8, 8)})["y"].shape) == (1, 3, 8, 8)
    calls = []

    def body(session):
        calls.append(session)
        if len(calls) == 1:
            raise ebb.ResourceExhausted("out of memory in the body")
        return "second try"

    assert pool.run_with_recovery("a", body) == "second try"
    assert len(calls) == 2 and calls[0] is not calls[1]  # a fresh load
    assert any(e.kind == "evict" and e.reason == "out_of_memory" for e, _ in events)
    with pytest.raises(ZeroDivisionError):
        pool.run_with_recovery("a", lambda s: 1 / 0)
    with pytest.raises(ebb.ResourceExhausted, match="again"):
        pool.run_with_recovery("a", lambda s: (_ for _ in ()).throw(ebb.ResourceExhausted("again")))


def test_handles_keep_what_they_point_into_alive(variants):
    # Another Runtime in this process needs the shared arena: the module's one is idle, use a per-session policy.
    rt = ebb.Runtime({"cpu": {"arena": "per_session"}})
    pool = ebb.ModelPool(rt, budget_bytes=1 << 40, on_event=lambda e: None)
    pool.add("a", variants["a"], device="cpu")
    lease = pool.acquire("a")
    assert pool.runtime is rt
    del pool, rt
    gc.collect()
    assert lease.session.run({"x": image_input(16, 16)})["y"].shape == (1, 3, 16, 16)
    lease.release()
    del lease
    gc.collect()
