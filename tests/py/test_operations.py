"""Operations from Python: the `with runtime.operation()` block and the ready-made operations,
their memory floor (measured in this process through runtime.memory() and /proc/self/status),
progress, cancellation, Ctrl-C and errors."""
import os
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest

import ebb
from conftest import FIXTURES, MiB, image_input, model, rss_bytes, shared_arena

SIZE = 1024  # convnet at 1024x1024: ~128 MiB of arena per run, so the floor test measures something


@pytest.fixture(scope="module")
def convnet(runtime):
    return runtime.load(model("convnet"), device="cpu")


@pytest.fixture(scope="module")
def upscaler(runtime):
    return runtime.load(model("waifu2x_scale2x"), device="cpu")


@pytest.fixture(scope="module")
def frames():
    return [image_input(SIZE, SIZE, seed=s) for s in range(3)]


class Floor:
    """Memory after load (arena reserved, RSS), and checks that an operation came back to it."""

    def __init__(self, runtime):
        self.runtime = runtime
        runtime.trim()
        self.arena = shared_arena(runtime)["reserved"]
        self.rss = rss_bytes()

    def check(self, held=0, freed_results=0):
        """held: bytes of outputs the caller still holds (the caller's memory, not counted).
        freed_results: bytes of results a stopped operation had made; the library frees them after
        its release, and glibc may keep such freed blocks for reuse, so they are allowed on top."""
        assert shared_arena(self.runtime)["reserved"] == self.arena
        rss = rss_bytes() - held
        assert rss <= self.rss * 1.10 + freed_results, \
            f"RSS {rss / MiB:.1f} MiB after vs {self.rss / MiB:.1f} MiB after load"


def nbytes(arrays):
    return sum(a.nbytes for a in arrays)


# --- the with-block --------------------------------------------------------------------------


@pytest.mark.parametrize("planned", [False, True], ids=["deferred", "planned"])
def test_block_releases_once_after_its_last_run(runtime, convnet, frames, planned):
    floor = Floor(runtime)
    releases = convnet.release_count
    outs = []
    with runtime.operation(total_runs=len(frames) if planned else None) as op:
        for i, f in enumerate(frames):
            outs.append(op.run(convnet, {"x": f})["y"])
            if i == 0:  # the arena is kept between runs: something to release
                assert shared_arena(runtime)["reserved"] > floor.arena + 64 * MiB
                assert not op.released
        assert op.done == len(frames)
        # Planned: the last run carried the release itself, before the block ends.
        assert op.released == planned
        assert convnet.release_count == releases + (1 if planned else 0)
    assert op.released
    floor.check(held=nbytes(outs))


def test_block_matches_the_cpp_operation(runtime, convnet, frames):
    """Deferred, planned and the C++ Operation (RunPerFrame): the same outputs, the same floor."""
    floor = Floor(runtime)
    cpp = runtime.run_per_frame(convnet, frames)
    floor.check(held=nbytes(cpp))
    for total in (None, len(frames)):
        with runtime.operation(total_runs=total) as op:
            outs = [op.run(convnet, {"x": f})["y"] for f in frames]
        floor.check(held=nbytes(cpp) + nbytes(outs))
        assert all(a.tobytes() == b.tobytes() for a, b in zip(outs, cpp))
        del outs  # before the next operation, which may reuse the freed blocks


def test_an_exception_in_the_block_gives_memory_back(runtime, convnet, frames):
    floor = Floor(runtime)
    with pytest.raises(KeyError):
        with runtime.operation() as op:
            op.run(convnet, {"x": frames[0]})
            assert shared_arena(runtime)["reserved"] > floor.arena
            raise KeyError("the caller's own error")
    assert op.released
    floor.check()


def test_ctrl_c_in_the_block_gives_memory_back(runtime, convnet, frames):
    floor = Floor(runtime)
    with pytest.raises(KeyboardInterrupt):
        with runtime.operation(total_runs=3) as op:
            op.run(convnet, {"x": frames[0]})
            raise KeyboardInterrupt
    floor.check()


def test_a_failed_run_ends_the_block_and_gives_memory_back(runtime, convnet, frames):
    floor = Floor(runtime)
    with runtime.operation() as op:
        op.run(convnet, {"x": frames[0]})
        with pytest.raises(ebb.InvalidArgument):
            op.run(convnet, {"x": image_input(8, 8, channels=1)})
        floor.check()  # given back at the failure, as a failed C++ Operation does
        with pytest.raises(ebb.FailedPrecondition, match="already ended: invalid_argument"):
            op.run(convnet, {"x": frames[0]})


def test_block_cancellation(runtime, convnet, frames):
    floor = Floor(runtime)
    seen = []

    def progress(done, total):
        seen.append((done, total))
        return done < 2  # False after the second run: cancel

    with pytest.raises(ebb.Cancelled, match="cancelled after 2 runs"):
        with runtime.operation(on_progress=progress) as op:
            for f in frames:
                op.run(convnet, {"x": f})
    assert seen == [(1, None), (2, None)]
    floor.check()

    stop = threading.Event()
    with pytest.raises(ebb.Cancelled) as err:
        with runtime.operation(total_runs=3, cancel=stop) as op:
            op.run(convnet, {"x": frames[0]})
            stop.set()
            op.run(convnet, {"x": frames[1]})
    assert err.value.code == "cancelled" and op.done == 1
    floor.check()


def test_block_misuse(runtime, convnet, frames):
    op = runtime.operation()
    with pytest.raises(ebb.FailedPrecondition, match="only valid inside"):
        op.run(convnet, {"x": frames[0]})
    with runtime.operation(total_runs=1) as op:
        op.run(convnet, {"x": image_input(8, 8)})
        with pytest.raises(ebb.FailedPrecondition, match="planned 1 runs"):
            op.run(convnet, {"x": image_input(8, 8)})
    with pytest.raises(ebb.FailedPrecondition, match="entered once"):
        with op:
            pass
    with pytest.raises(ValueError):
        runtime.operation(total_runs=-1)
    with pytest.raises(TypeError, match="threading.Event"):
        runtime.operation(cancel=True)


# --- ready-made operations ---------------------------------------------------------------------


def test_run_per_frame_equals_single_runs(runtime, convnet):
    small = [image_input(64, 48, seed=s) for s in range(3)] + [image_input(32, 32, seed=9)]
    runs = convnet.run_count
    outs = runtime.run_per_frame(convnet, small)
    assert convnet.run_count == runs + len(small)
    for f, o in zip(small, outs):
        assert o.dtype == np.float32 and o.shape == f.shape
        assert o.tobytes() == convnet.run({"x": f})["y"].tobytes()


def test_run_joint_is_one_run_over_the_batch(runtime, convnet):
    small = [image_input(40, 40, seed=s) for s in range(3)]
    runs = convnet.run_count
    outs = runtime.run_joint(convnet, small)
    assert convnet.run_count == runs + 1
    for f, o in zip(small, outs):
        np.testing.assert_allclose(o, convnet.run({"x": f})["y"], rtol=1e-5, atol=1e-6)


def test_run_pipeline_chains_models(runtime, convnet):
    small = [image_input(32, 32, seed=s) for s in range(2)]
    outs = runtime.run_pipeline([convnet, convnet], small)
    for f, o in zip(small, outs):
        once = convnet.run({"x": f})["y"]
        assert o.tobytes() == convnet.run({"x": once})["y"].tobytes()
    with pytest.raises(ebb.InvalidArgument):
        runtime.run_pipeline([], small)


def test_run_tiled_images_and_tensors(runtime, upscaler):
    img = ebb.read_image(FIXTURES / "astronaut_96.png")
    progress = []
    img = img[:64, :64].copy()
    out = runtime.run_tiled(upscaler, [img, img[:40, :56].copy()], tile=48, overlap=8,
                            on_progress=lambda done, total: progress.append((done, total)))
    assert [o.shape for o in out] == [(128, 128, 3), (80, 112, 3)] and out[0].dtype == np.uint8
    assert progress == [(i, progress[-1][1]) for i in range(1, progress[-1][1] + 1)]
    tensors = runtime.run_tiled(upscaler, [ebb.image_to_tensor(img)], tile=48, overlap=8)
    assert tensors[0].dtype == np.float32 and tensors[0].shape == (1, 3, 128, 128)
    assert np.array_equal(ebb.tensor_to_image(tensors[0]), out[0])


def test_image_frames_are_converted_to_the_models_channels(runtime, convnet):
    img = ebb.read_image(FIXTURES / "astronaut_96.png")
    out = runtime.run_per_frame(convnet, [img])[0]
    expected = ebb.tensor_to_image(convnet.run({"x": ebb.image_to_tensor(img, 3)})["y"])
    assert out.dtype == np.uint8 and np.array_equal(out, expected)


def test_frame_errors(runtime, convnet):
    f = image_input(8, 8)
    img = np.zeros((8, 8, 3), np.uint8)
    with pytest.raises(TypeError, match="frames must be a list"):
        runtime.run_per_frame(convnet, f)
    with pytest.raises(TypeError, match=r"frame 0 must be a float32 NCHW tensor \[1,C,H,W\] or a uint8 HWC image"):
        runtime.run_per_frame(convnet, [f.astype(np.float64)])
    with pytest.raises(TypeError, match="frame 1 is a uint8 image but frame 0 is a float32 tensor"):
        runtime.run_per_frame(convnet, [f, img])
    with pytest.raises(ValueError, match="C-contiguous"):
        runtime.run_per_frame(convnet, [image_input(8, 16)[..., ::2]])
    with pytest.raises(ebb.InvalidArgument, match="tile size"):
        runtime.run_tiled(convnet, [f], tile=16, overlap=8)


def test_cancel_by_progress_callback(runtime, convnet, frames):
    floor = Floor(runtime)
    runs = convnet.run_count
    with pytest.raises(ebb.Cancelled, match="cancelled after 2 of 3 runs"):
        runtime.run_per_frame(convnet, frames, on_progress=lambda done, total: done < 2)
    assert convnet.run_count == runs + 2
    floor.check(freed_results=2 * frames[0].nbytes)


def test_cancel_by_event_from_another_thread(runtime, upscaler):
    floor = Floor(runtime)
    stop = threading.Event()
    many = [image_input(192, 192, seed=s) for s in range(4)]  # 36 tiles of 48 per frame: 144 runs
    runs = upscaler.run_count
    timer = threading.Timer(0.3, stop.set)
    timer.start()
    with pytest.raises(ebb.Cancelled):
        runtime.run_tiled(upscaler, many, tile=48, overlap=8, cancel=stop)
    timer.join()
    assert upscaler.run_count - runs < 144  # stopped early (0 runs if it came before the start)
    floor.check(freed_results=4 * many[0].nbytes * 4)  # the frames' 2x results
    stop.set()  # already set before the start: not a single run
    with pytest.raises(ebb.Cancelled, match="after 0 of"):
        runtime.run_per_frame(upscaler, many, cancel=stop)


def test_an_exception_in_the_callback_stops_and_is_raised(runtime, convnet, frames):
    floor = Floor(runtime)

    def progress(done, total):
        raise ZeroDivisionError("from the callback")

    with pytest.raises(ZeroDivisionError, match="from the callback"):
        runtime.run_per_frame(convnet, frames, on_progress=progress)
    floor.check(freed_results=frames[0].nbytes)


def test_ctrl_c_stops_a_ready_made_operation(runtime, upscaler):
    """A real SIGINT while the operation runs with the GIL released: it stops between runs."""
    floor = Floor(runtime)
    many = [image_input(192, 192, seed=s) for s in range(4)]
    runs = upscaler.run_count
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        runtime.run_tiled(upscaler, many, tile=48, overlap=8)
    timer.join()
    assert upscaler.run_count - runs < 144  # stopped early (0 runs if it came before the start)
    floor.check(freed_results=4 * many[0].nbytes * 4)  # the frames' 2x results


NEVER = r"""
import sys
import numpy as np
import ebb
rt = ebb.Runtime({"release": "never"})
s = rt.load(sys.argv[1])
x = np.random.default_rng(1).random((1, 3, 512, 512), dtype=np.float32)
reserved = lambda: next(a["reserved"] for a in rt.memory()["arenas"] if a["name"] == "cpu:shared")
with rt.operation() as op:
    op.run(s, {"x": x})
kept = reserved()
try:
    with rt.operation() as op:
        op.run(s, {"x": x})
        raise KeyError
except KeyError:
    pass
print(kept, reserved())
"""


def test_the_block_follows_the_policy(tmp_path):
    """With {"release": "never"} the block keeps the arena at its end, as the C++ run boundary does; an
    exception still gives it back, as a cancelled C++ Operation does."""
    run = subprocess.run([sys.executable, "-c", NEVER, model("convnet")], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    kept, after_exception = map(int, run.stdout.split())
    assert kept > 16 * MiB and after_exception < 1 * MiB
