"""ebb.ModelPool from Python: leases as context managers, budget, pins, keep-alive, events, errors,
recovery, admission by memory (the same as from C++: tests/unit/pool/model_pool_test.cc), and handles that keep
what they point into alive."""
import gc
import os
import threading
import time

import pytest

import ebb
from conftest import MiB, image_input, model, write_variant

NAMES = ["a", "b", "c"]
# The shared arena capped at 320 MiB: two 1024x1024 convnet runs fit (128 MiB of arena each), four do not.
CAP = 320 * MiB
# The default release (idle): a run's arena stays until runs pause, and the pool still measures and
# charges as if each run gave it back (docs/memory-budget.md, under the idle release).
POLICY = {"cpu": {"arena_settings": {"max_bytes": CAP}}}


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
    # Admission by memory off: a charge then holds the transient peak (nearly all of the convnet's).
    pool, _ = make_pool(runtime, variants, budget_bytes=1 << 40, admit_by_memory=False)
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
    assert s.charge_bytes == max(s.load_bytes, os.path.getsize(variants["a"]))  # admission by memory: the idle cost
    assert pool.used("cpu") == s.charge_bytes
    assert [m.name for m in pool.snapshot()] == NAMES


def test_budget_evicts_the_least_recently_used_and_spares_pinned(runtime, variants, charge):
    budget = charge * 5 // 2
    pool, events = make_pool(runtime, variants, pinned=("a",), budget_bytes=budget, admit_by_memory=False)
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
    pool, _ = make_pool(runtime, variants, budget_bytes=charge * 3 // 2, admit_by_memory=False)
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


def run_1024(pool, x):
    return pool.run_with_recovery("a", lambda s: s.run({"x": x})["y"].shape, input_elements=x.size)


def test_four_concurrent_runs_that_each_fit_alone_all_succeed_under_the_cap(runtime, variants):
    pool, events = make_pool(runtime, variants)
    x = image_input(1024, 1024)
    results = []
    threads = [threading.Thread(target=lambda: results.append(run_1024(pool, x))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [(1, 3, 1024, 1024)] * 4
    s = pool.status("a")
    assert [n for n, _ in s.need_points] == [x.size] and s.out_of_memory == 0
    (elements, arena), = s.arena_need_points
    assert elements == x.size and 128 * MiB <= arena <= s.need_points[0][1]
    need = pool.predict_need("a", x.size)
    assert (need["memory_bytes"], need["arena_bytes"]) == (s.need_points[0][1], arena)
    cpu = pool.admission()[0]
    assert cpu["device"] == "cpu" and cpu["arena_cap_bytes"] == CAP
    assert cpu["admitted"] == 4 and cpu["waited"] >= 2  # the first ran alone, then at most two at once
    assert cpu["reserved_bytes"] == cpu["arena_reserved_bytes"] == cpu["runs"] == cpu["waiting"] == 0
    waits = [e for e, _ in events if e.kind == "wait"]
    assert len(waits) == cpu["waited"] and all(e.admitted and e.wait_ms > 0 for e in waits)


def test_a_run_that_needs_more_than_the_budget_fails_at_once_with_the_numbers(runtime, variants):
    budget = 1 << 30
    pool, _ = make_pool(runtime, variants, budget_bytes=budget)
    # Two sizes measured alone: the line through them bounds a larger run's need.
    pool.run_with_recovery("a", lambda s: s.run({"x": image_input(512, 512)}), input_elements=3 * 512 * 512)
    run_1024(pool, image_input(1024, 1024))
    big = 3 * 4096 * 4096
    need = pool.predict_need("a", big)
    assert need["memory_at_least"] > budget and need["memory_bytes"] >= need["memory_at_least"]
    calls = []
    start = time.monotonic()
    with pytest.raises(ebb.ResourceExhausted) as err:
        pool.run_with_recovery("a", calls.append, input_elements=big)
    assert time.monotonic() - start < 1 and calls == []  # at once, and fn never ran
    message = str(err.value)
    assert f"a run of {big} input elements needs at least" in message
    assert f"({need['memory_at_least']} bytes) of memory" in message
    assert f"the memory budget on cpu of 1024.0 MiB ({budget} bytes)" in message and "even alone" in message
    assert pool.admission()[0]["refused"] == 1


def test_a_waiting_run_honours_its_timeout_and_a_lease_holds_its_reservation(runtime, variants):
    pool, _ = make_pool(runtime, variants)
    x = image_input(1024, 1024)
    run_1024(pool, x)  # measured alone
    # A lease for a 1280x1280 run holds 200 MiB or more of the 320 (1.5625 times a 1024x1024 run's
    # 128 MiB of arena, or its memory need where this pool's runs did not raise the arena's peak):
    # a 1024x1024 run cannot fit beside it.
    with pool.acquire("a", input_elements=3 * 1280 * 1280) as held:
        assert pool.admission()[0]["arena_reserved_bytes"] >= 200 * MiB
        assert pool.status("a").reserved_bytes > 0
        start = time.monotonic()
        with pytest.raises(ebb.Unavailable, match="waited .* ms for memory"):
            pool.run_with_recovery("a", lambda s: 1, input_elements=x.size, timeout_s=0.3)
        assert 0.25 <= time.monotonic() - start < 5
        assert not held.released
    assert run_1024(pool, x) == (1, 3, 1024, 1024)  # the reservation came back with the lease
    cpu = pool.admission()[0]
    assert cpu["timed_out"] == 1 and cpu["arena_reserved_bytes"] == 0


def test_wait_for_memory_ms_is_the_default_timeout_and_0_does_not_wait(runtime, variants):
    # Python's 0 means "do not wait" (the C setter's 0 would mean "the default, a minute").
    x = image_input(1024, 1024)
    for wait_ms, least, most in ((0, 0, 0.2), (300, 0.25, 5)):
        pool, _ = make_pool(runtime, variants, wait_for_memory_ms=wait_ms)
        run_1024(pool, x)  # measured alone
        with pool.acquire("a", input_elements=3 * 1280 * 1280):  # holds what a 1024x1024 run would need
            start = time.monotonic()
            with pytest.raises(ebb.Unavailable, match="waited .* ms for memory"):
                run_1024(pool, x)
            assert least <= time.monotonic() - start < most, wait_ms
    with pytest.raises(ValueError, match="wait_for_memory_ms"):
        ebb.ModelPool(runtime, wait_for_memory_ms=-1)


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
