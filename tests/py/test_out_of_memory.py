"""A real out-of-memory: the shared CPU arena capped at 16 MiB (policy cpu.arena_settings.max_bytes),
a run that needs more, ebb.ResourceExhausted, and the next load working."""
import pytest

import ebb
from conftest import MiB, image_input, model, shared_arena

POLICY = {"cpu": {"arena_settings": {"max_bytes": 16 * MiB}}}


def test_the_cap_is_in_force(runtime):
    assert runtime.policy["cpu"]["arena_settings"]["max_bytes"] == 16 * MiB
    assert shared_arena(runtime)["limit"] == 16 * MiB


def test_out_of_memory_raises_resource_exhausted_and_the_next_load_works(runtime):
    s = runtime.load(model("convnet"))
    assert s.run({"x": image_input(32, 32)})["y"].shape == (1, 3, 32, 32)  # small: fits
    loads = runtime.load_count
    with pytest.raises(ebb.ResourceExhausted) as err:
        s.run({"x": image_input(1024, 1024)})  # ~128 MiB of activations
    assert isinstance(err.value, MemoryError) and err.value.code == "resource_exhausted"
    assert "shared CPU arena" in str(err.value)
    # The session that ran out left the cache: the next load builds it afresh, and it runs.
    fresh = runtime.load(model("convnet"))
    assert fresh is not s and runtime.load_count == loads + 1
    assert fresh.run({"x": image_input(32, 32)})["y"].shape == (1, 3, 32, 32)
    assert shared_arena(runtime)["reserved"] <= 16 * MiB


def test_out_of_memory_inside_an_operation_gives_memory_back(runtime):
    s = runtime.load(model("convnet"))
    small, big = image_input(64, 64), image_input(1024, 1024)
    runtime.trim()
    floor = shared_arena(runtime)["reserved"]
    with pytest.raises(MemoryError):
        runtime.run_per_frame(s, [small, big, small])
    # The failed operation gave back what it grew (a few bytes may belong to the fresh session's load).
    assert shared_arena(runtime)["reserved"] <= floor + 64 * 1024
    with pytest.raises(ebb.ResourceExhausted):
        with runtime.operation() as op:
            op.run(runtime.load(model("convnet")), {"x": small})
            op.run(runtime.load(model("convnet")), {"x": big})
    assert shared_arena(runtime)["reserved"] <= floor + 64 * 1024
    assert runtime.load(model("convnet")).run({"x": small})["y"].shape == (1, 3, 64, 64)
