"""What the Python binding costs over the C++ library, measured in one process (`make bench`).

    PYTHONPATH=build/python /usr/bin/python3 python/bench/bench_python.py [--iterations N] [--repeats R]

Prints one JSON object. Every C++ baseline runs in THIS process, on the same sessions and the same
input arrays, through build/python/bench/libebb_pybench.so (python/bench/bench_timer.c: a loop over the
C API's run boundary timed in C, no Python between its runs; a benchmark-only library, never in the
wheel, loaded with ctypes beside the package's libebb.so.1), and is
interleaved with the Python calls it is compared with (the order rotated every round), so that drift
on a shared machine hits both. Each figure is a median of wall time and of process CPU time; the
runtime has one intra-op thread, so a run's CPU time is its own work, not time spent waiting for a
core another process holds. Each comparison also times the C++ baseline twice ("cpp_again"): that
A/A ratio is the noise of the measurement, to read the A/B ratio against.

* call_overhead: convnet on a 256x256 input. Python `op.run` against ebb_operation_run timed in C
  on the SAME open operation (the Python Operation's handle): the run boundary without a release, in
  the same arena state on both sides, no operation ended (no trim) between samples; the goal (<= 1.05).
  "runs_in_the_operation" and "arena_shrinks_during" (0) show it. Also Python `session.run` (a whole
  operation: it releases) against ebb_session_run, where the release and the regrowth after it dominate.
* run_tiled: waifu2x_scale2x over two 64x64 float32 frames in 48-pixel tiles (overlap 8), one
  operation of all frames (8 runs); Python `runtime.run_tiled` (progress hook, Ctrl-C check,
  conversions) against C++ RunTiled called from C++. Per-frame cost; goal <= 1.03.
* gil_spin: the spin test model (tests/models/spin: a Loop that only counts, no memory) runs in one
  thread while a pure-Python counter runs in another: the counter's rate during the run against its
  rate alone (the median of 5 interleaved rounds) shows the GIL released during runs (goal >= 0.5 of
  its rate alone; 0 if it were held). Also (no goal) against its rate beside a thread hashing (pbkdf2) with
  the GIL released: the same CPU share, so about 1 when released even on a loaded machine.
* operation_block: the `with runtime.operation()` block, deferred (release at block exit through
  Runtime::Trim) and planned (total_runs: the last run carries the release), against the C++
  Operation (RunPerFrame called from C++) on the same frames: time per operation and the memory each
  ends at (arena reserved; RSS less the results, which the caller holds while it is read).
"""
import argparse
import ctypes
import hashlib
import json
import os
import pathlib
import statistics
import sys
import threading
import time
from ctypes import POINTER, byref, c_char_p, c_double, c_int, c_int64, c_size_t, c_void_p

import numpy as np

import ebb
from ebb import _lib, _tensors

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODELS = pathlib.Path(os.environ.get("EBB_MODELS_DIR", ROOT / "models"))
TEST_MODELS = ROOT / "tests" / "models"
BUILD = pathlib.Path(os.environ.get("EBB_BUILD_DIR", ROOT / "build"))

# The C baselines (python/bench/bench_timer.c), linked to the libebb.so.1 the package loaded (same soname).
_bench = ctypes.CDLL(str(BUILD / "python" / "bench" / "libebb_pybench.so"))
_bench.ebb_pybench_time_runs.restype = c_void_p
_bench.ebb_pybench_time_runs.argtypes = (c_void_p, c_void_p, POINTER(c_char_p), POINTER(c_void_p), c_size_t, c_int,
                                         POINTER(c_double), POINTER(c_double))
_bench.ebb_pybench_time_frames.restype = c_void_p
_bench.ebb_pybench_time_frames.argtypes = (c_void_p, c_void_p, POINTER(c_void_p), c_size_t, c_int64, c_int64,
                                           POINTER(c_double), POINTER(c_double), POINTER(c_void_p))


class CInputs:
    """The inputs (or frames) as the C API's borrowed tensors, made once, as Session.run makes them."""

    def __init__(self, session, inputs=None, frames=None):
        self.held = _tensors.Held()
        if inputs is not None:
            self.names, self.handles, self.count = session._inputs_of(self.held, inputs)
        else:
            handles = [_tensors.float_handle(self.held, f, "frame") for f in frames]
            self.handles, self.count = (c_void_p * len(handles))(*handles), len(handles)


def time_cpp_runs(op, s, c_inputs, iterations):
    """[(wall, cpu)] of `iterations` runs timed in C: inside `op` (an open ebb.Operation: ebb_operation_run on
    its own handle, the call op.run makes) or, with op None, each a whole operation (ebb_session_run)."""
    wall, cpu = (c_double * iterations)(), (c_double * iterations)()
    _lib.check(_bench.ebb_pybench_time_runs(op._h if op is not None else None, s._h, c_inputs.names, c_inputs.handles,
                                            c_inputs.count, iterations, wall, cpu))
    return list(zip(wall, cpu))


def time_cpp_frames(rt, s, c_frames, tile, overlap):
    """(wall, cpu, results) of one RunTiled (tile > 0) or RunPerFrame (tile 0) called from C."""
    wall, cpu, results = c_double(), c_double(), c_void_p()
    _lib.check(_bench.ebb_pybench_time_frames(rt._h, s._h, c_frames.handles, c_frames.count, tile, overlap,
                                              byref(wall), byref(cpu), byref(results)))
    return wall.value, cpu.value, _tensors.frames_out(results.value, False)


def rss_bytes():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


def shared_arena(rt):
    return next(a for a in rt.memory()["arenas"] if a["name"] == "cpu:shared")


def shared_reserved(rt):
    return shared_arena(rt)["reserved"]


def shared_shrinks(rt):
    return shared_arena(rt)["shrinks"]


def noise(side, seed, count=1):
    rng = np.random.default_rng(seed)
    return [rng.random((1, 3, side, side), dtype=np.float32) for _ in range(count)]


def timed(fn):
    """(wall seconds, process CPU seconds, result) of fn()."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, out


def interleave(modes, repeats, after=None):
    """Each mode once per repeat, the order rotated every repeat; {mode: [(wall, cpu)]}."""
    names = list(modes)
    samples = {m: [] for m in names}
    for i in range(repeats):
        k = i % len(names)
        for m in names[k:] + names[:k]:
            wall, cpu, out = modes[m]()
            samples[m].append((wall, cpu))
            if after:
                after(m, out)
            del out  # before the next mode runs
    return samples


def medians(samples, per=1):
    """{mode: {"wall_ms", "cpu_ms"}}: medians in milliseconds, divided by `per`."""
    return {m: {"wall_ms": statistics.median(w for w, _ in v) * 1e3 / per,
                "cpu_ms": statistics.median(c for _, c in v) * 1e3 / per} for m, v in samples.items()}


def compare(samples, subject, base, again, per=1):
    """Medians of every mode, subject/base ratios, and base/again (A/A: the noise of this measurement)."""
    med = medians(samples, per)
    return {"medians": med,
            "ratio_wall": med[subject]["wall_ms"] / med[base]["wall_ms"],
            "ratio_cpu": med[subject]["cpu_ms"] / med[base]["cpu_ms"],
            "a_a_ratio_wall": med[again]["wall_ms"] / med[base]["wall_ms"],
            "a_a_ratio_cpu": med[again]["cpu_ms"] / med[base]["cpu_ms"]}


def call_overhead(rt, iterations):
    s = rt.load(str(MODELS / "convnet" / "model.onnx"), device="cpu")
    inputs = {"x": noise(256, 1)[0]}
    c_inputs = CInputs(s, inputs=inputs)

    def cpp_run(op):
        wall, cpu = time_cpp_runs(op, s, c_inputs, 1)[0]
        return wall, cpu, None

    # Mid-operation: every mode's runs are runs of the SAME open operation (the C side runs in the Python
    # Operation's handle), so all see the same arena state and none ends an operation (a trim) between
    # samples; a baseline that ended an operation of its own per sample made the next run, whichever side,
    # regrow the arena.
    with rt.operation() as op:
        mid = {"python": lambda: timed(lambda: op.run(s, inputs)),
               "cpp": lambda: cpp_run(op), "cpp_again": lambda: cpp_run(op)}
        interleave(mid, 5)
        shrinks = shared_shrinks(rt)
        mid_samples = interleave(mid, iterations)
        mid_state = {"runs_in_the_operation": op.done, "arena_shrinks_during": shared_shrinks(rt) - shrinks}
    whole = {"python": lambda: timed(lambda: s.run(inputs)),
             "cpp": lambda: cpp_run(None), "cpp_again": lambda: cpp_run(None)}
    whole_samples = interleave(whole, max(5, iterations // 3))
    return {
        "model": "convnet", "input_shape": [1, 3, 256, 256], "iterations": iterations,
        "baseline": "the C API's run boundary (ebb_operation_run in the Python Operation's own open operation / "
                    "ebb_session_run) timed in C in this process (libebb_pybench.so), interleaved",
        "mid_operation": dict(compare(mid_samples, "python", "cpp", "cpp_again"), **mid_state),
        "whole_operation": compare(whole_samples, "python", "cpp", "cpp_again"),
    }


def run_tiled(rt, repeats):
    up = rt.load(str(MODELS / "waifu2x_scale2x" / "model.onnx"), device="cpu")
    frames = noise(64, 2, count=2)
    c_frames = CInputs(up, frames=frames)
    tile, overlap = 48, 8
    runs_before = up.run_count
    modes = {"python": lambda: timed(lambda: rt.run_tiled(up, frames, tile=tile, overlap=overlap)),
             "cpp": lambda: time_cpp_frames(rt, up, c_frames, tile, overlap),
             "cpp_again": lambda: time_cpp_frames(rt, up, c_frames, tile, overlap)}
    interleave(modes, 1)  # warm-up
    runs = (up.run_count - runs_before) // len(modes)
    result = compare(interleave(modes, repeats), "python", "cpp", "cpp_again", per=len(frames))
    return {
        "model": "waifu2x_scale2x", "frames": len(frames), "frame_shape": [1, 3, 64, 64], "tile": tile,
        "overlap": overlap, "runs_per_operation": runs, "repeats": repeats,
        "baseline": "RunTiled called from C in this process (ebb_run_tiled, libebb_pybench.so), interleaved",
        "per_frame": result,
    }


def operation_block(rt, repeats):
    s = rt.load(str(MODELS / "convnet" / "model.onnx"), device="cpu")
    frames = noise(512, 3, count=3)

    def block(total):
        with rt.operation(total_runs=total) as op:
            return [op.run(s, {"x": f})["y"] for f in frames]

    c_frames = CInputs(s, frames=frames)
    modes = {"cpp_operation": lambda: time_cpp_frames(rt, s, c_frames, 0, 0),
             "block_deferred": lambda: timed(lambda: block(None)),
             "block_planned": lambda: timed(lambda: block(len(frames)))}
    interleave(modes, 1)  # warm-up
    rt.trim()
    floor = {"reserved": shared_reserved(rt), "rss": rss_bytes()}
    after = {m: [] for m in modes}

    def measure(mode, outputs):
        # The results are the caller's memory: held while measuring, not counted.
        after[mode].append((shared_reserved(rt), rss_bytes() - sum(o.nbytes for o in outputs)))

    samples = interleave(modes, repeats, measure)
    result = {"model": "convnet", "frames": len(frames), "frame_shape": [1, 3, 512, 512], "repeats": repeats,
              "reserved_after_load": floor["reserved"], "rss_after_load": floor["rss"]}
    med = medians(samples)
    for m in modes:
        result[m] = dict(med[m], ratio_wall_to_cpp=med[m]["wall_ms"] / med["cpp_operation"]["wall_ms"],
                         ratio_cpu_to_cpp=med[m]["cpu_ms"] / med["cpp_operation"]["cpu_ms"],
                         reserved_after_max=max(r for r, _ in after[m]),
                         rss_after_max=max(r for _, r in after[m]))
    return result


def gil_spin(rt, seconds=0.5, rounds=5):
    """A pure-Python counter's rate while the spin model runs in another thread, against its rate alone: the
    median over `rounds` interleaved rounds (alone and during alternate first), the counter in a thread of its
    own both times. A held GIL gives 0 in every round; a shared machine moves single rounds both ways."""
    spin = rt.load(str(TEST_MODELS / "spin" / "model.onnx"), device="cpu")
    trips = 1000
    while True:  # trips for a run of about `seconds`
        wall, _, _ = timed(lambda: spin.run({"n": np.array([trips], np.int64)}))
        if wall >= seconds or trips >= 1 << 34:
            break
        trips *= 4 if wall < seconds / 8 else 2

    def counter_rate(during_this):
        """The counter's rate (counts per second) in a thread while during_this() runs on this one."""
        stop, rates = threading.Event(), []

        def count():
            n, start = 0, time.perf_counter()
            while not stop.is_set():
                n += 1
            rates.append(n / (time.perf_counter() - start))

        counter = threading.Thread(target=count)
        counter.start()
        out = during_this()
        stop.set()
        counter.join()
        return rates[0], out

    def alone():
        return counter_rate(lambda: time.sleep(wall))[0]

    def during():
        return counter_rate(lambda: timed(lambda: spin.run({"n": np.array([trips], np.int64)}))[0])

    # A second reference, for reading the ratio on a loaded machine: the counter while this thread hashes
    # for about as long in one call that releases the GIL (hashlib.pbkdf2_hmac). It has the same two busy
    # threads as during(), so the CPU share they split is the same; against it a released GIL reads about 1
    # however loaded the machine is (with autogroup scheduling, two busy threads of one process get half
    # each, which alone() does not see).
    def pbkdf2(n):
        return hashlib.pbkdf2_hmac("sha256", b"ebb", b"gil_spin", n)

    hash_rounds = 100000
    hash_rounds = max(1000, int(hash_rounds * wall / max(timed(lambda: pbkdf2(hash_rounds))[0], 1e-6)))

    def beside_hashing():
        return counter_rate(lambda: pbkdf2(hash_rounds))[0]

    samples = []
    for i in range(rounds):
        a, h = (alone(), beside_hashing()) if i % 2 == 0 else (None, beside_hashing())
        d, run_wall = during()
        a = alone() if a is None else a
        samples.append({"alone": a, "beside_hashing": h, "during_run": d, "ratio": d / a, "ratio_to_hashing": d / h,
                        "run_wall_ms": run_wall * 1e3})
    return {"model": "spin", "trips": trips, "rounds": samples,
            "ratio_during_to_alone": statistics.median(x["ratio"] for x in samples),
            "ratio_during_to_beside_hashing": statistics.median(x["ratio_to_hashing"] for x in samples)}


# Goals in the form every `ebb bench` command prints (cli/bench_goals.h): the measured value, the limit,
# the comparison and whether it was met.
def at_most(value, limit, unit):
    return {"value": value, "limit": limit, "op": "<=", "met": value <= limit, "unit": unit}


def holds(observed):
    return {"value": bool(observed), "limit": True, "op": "==", "met": bool(observed)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json", action="store_true", help="accepted for symmetry with ebb bench: JSON is the only output")
    args = parser.parse_args()
    # One intra-op thread: a run does not wait at ORT's barriers for a thread that another process's work
    # has pushed off its core, which makes timings on a shared machine much steadier. Both sides use it.
    rt = ebb.Runtime({"intra_op_threads": 1})
    overhead = call_overhead(rt, args.iterations)
    tiled = run_tiled(rt, args.repeats)
    block = operation_block(rt, args.repeats)
    spin = gil_spin(rt)
    floor = block["reserved_after_load"]
    same_floor = lambda m: block[m]["reserved_after_max"] == floor and \
        block[m]["rss_after_max"] <= block["rss_after_load"] * 1.10
    mid, tiled_frame = overhead["mid_operation"], tiled["per_frame"]
    report = {
        "benchmark": "python", "policy": {"intra_op_threads": 1},
        "python": sys.version.split()[0], "ebb": ebb.__version__,
        "load_average_1min": os.getloadavg()[0], "cpus": os.cpu_count(),
        "call_overhead": overhead, "run_tiled": tiled, "operation_block": block, "gil_spin": spin,
        "goals": {
            "call_overhead_wall_ratio_le_1_05": at_most(mid["ratio_wall"], 1.05, "Python median / C++ median, wall"),
            "call_overhead_cpu_ratio_le_1_05": at_most(mid["ratio_cpu"], 1.05, "Python median / C++ median, CPU"),
            "run_tiled_per_frame_wall_ratio_le_1_03": at_most(tiled_frame["ratio_wall"], 1.03,
                                                              "Python median / C++ median per frame, wall"),
            "run_tiled_per_frame_cpu_ratio_le_1_03": at_most(tiled_frame["ratio_cpu"], 1.03,
                                                             "Python median / C++ median per frame, CPU"),
            "block_deferred_same_floor_as_cpp": holds(same_floor("block_deferred") and same_floor("cpp_operation")),
            "block_planned_same_floor_as_cpp": holds(same_floor("block_planned") and same_floor("cpp_operation")),
            "gil_released_during_runs": {"value": spin["ratio_during_to_alone"], "limit": 0.5, "op": ">=",
                                         "met": spin["ratio_during_to_alone"] >= 0.5,
                                         "unit": "Python counter rate during a spin run / alone, median of rounds"},
        },
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
