"""What the Python binding costs over the C++ library, measured in one process (`make bench`).

    PYTHONPATH=build/python /usr/bin/python3 python/bench/bench_python.py [--iterations N] [--repeats R]

Prints one JSON object. Every C++ baseline runs in THIS process, on the same sessions and the same
input arrays, through ebb._ebb._bench (a C++ loop timed in C++, no Python between its runs), and is
interleaved with the Python calls it is compared with, so that drift on a shared machine hits both:

* call_overhead: convnet on a 256x256 input. Python `op.run` inside one operation against C++
  Session::Run with ends_operation=false (the run boundary without a release), and Python
  `session.run` (a whole operation: it releases) against C++ Session::Run with ends_operation=true.
  Ratios of medians; the goal (<= 1.05) is on the first, where the release's regrowth does not swamp
  the call.
* run_tiled: waifu2x_scale2x over float32 frames in 48-pixel tiles (overlap 8), one operation of all
  frames; Python `runtime.run_tiled` (progress hook, Ctrl-C check and conversions included) against
  C++ RunTiled called from C++. Per-frame cost; goal <= 1.03.
* operation_block: the `with runtime.operation()` block, deferred (release at block exit through
  Runtime::Trim) and planned (total_runs: the last run carries the release), against the C++
  Operation (RunPerFrame called from C++) on the same frames: time per operation and the memory each
  ends at (arena reserved; RSS less the results, which the caller holds while it is read).
"""
import argparse
import json
import os
import pathlib
import statistics
import sys
import time

import numpy as np

import ebb
from ebb import _ebb

ROOT = pathlib.Path(__file__).resolve().parents[2]
MODELS = pathlib.Path(os.environ.get("EBB_MODELS_DIR", ROOT / "models"))


def rss_bytes():
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


def shared_reserved(rt):
    return next(a["reserved"] for a in rt.memory()["arenas"] if a["name"] == "cpu:shared")


def noise(side, seed, count=1):
    rng = np.random.default_rng(seed)
    return [rng.random((1, 3, side, side), dtype=np.float32) for _ in range(count)]


def call_overhead(rt, iterations):
    s = rt.load(str(MODELS / "convnet" / "model.onnx"), device="cpu")
    inputs = {"x": noise(256, 1)[0]}
    py_mid, cpp_mid, py_whole, cpp_whole = [], [], [], []
    with rt.operation() as op:
        for _ in range(5):
            op.run(s, inputs)
            _ebb._bench.time_cpp_runs(s, inputs, 1, False)
        for i in range(iterations):
            for turn in ((0, 1) if i % 2 == 0 else (1, 0)):  # alternate the order
                if turn == 0:
                    t0 = time.perf_counter()
                    op.run(s, inputs)
                    py_mid.append(time.perf_counter() - t0)
                else:
                    cpp_mid.extend(_ebb._bench.time_cpp_runs(s, inputs, 1, False))
    for i in range(max(5, iterations // 3)):
        for turn in ((0, 1) if i % 2 == 0 else (1, 0)):
            if turn == 0:
                t0 = time.perf_counter()
                s.run(inputs)
                py_whole.append(time.perf_counter() - t0)
            else:
                cpp_whole.extend(_ebb._bench.time_cpp_runs(s, inputs, 1, True))
    ms = lambda v: statistics.median(v) * 1e3
    return {
        "model": "convnet", "input_shape": [1, 3, 256, 256], "iterations": iterations,
        "baseline": "Session::Run timed in C++ in this process (ebb._ebb._bench.time_cpp_runs), interleaved",
        "mid_operation": {"cpp_median_ms": ms(cpp_mid), "python_median_ms": ms(py_mid),
                          "ratio": ms(py_mid) / ms(cpp_mid), "python_extra_us": (ms(py_mid) - ms(cpp_mid)) * 1e3},
        "whole_operation": {"cpp_median_ms": ms(cpp_whole), "python_median_ms": ms(py_whole),
                            "ratio": ms(py_whole) / ms(cpp_whole), "iterations": len(py_whole)},
    }


def run_tiled(rt, repeats):
    up = rt.load(str(MODELS / "waifu2x_scale2x" / "model.onnx"), device="cpu")
    frames = noise(96, 2, count=3)
    tile, overlap = 48, 8
    py, cpp = [], []
    rt.run_tiled(up, frames, tile=tile, overlap=overlap)  # warm-up
    runs_before = up.run_count
    _ebb._bench.time_cpp_run_tiled(rt, up, frames, tile, overlap)
    runs = up.run_count - runs_before
    for i in range(repeats):
        for turn in ((0, 1) if i % 2 == 0 else (1, 0)):
            if turn == 0:
                t0 = time.perf_counter()
                rt.run_tiled(up, frames, tile=tile, overlap=overlap)
                py.append(time.perf_counter() - t0)
            else:
                cpp.append(_ebb._bench.time_cpp_run_tiled(rt, up, frames, tile, overlap)[0])
    per_frame = lambda v: statistics.median(v) * 1e3 / len(frames)
    return {
        "model": "waifu2x_scale2x", "frames": len(frames), "frame_shape": [1, 3, 96, 96], "tile": tile,
        "overlap": overlap, "runs_per_operation": runs, "repeats": repeats,
        "baseline": "RunTiled called from C++ in this process (ebb._ebb._bench.time_cpp_run_tiled), interleaved",
        "cpp_ms_per_frame": per_frame(cpp), "python_ms_per_frame": per_frame(py),
        "ratio": per_frame(py) / per_frame(cpp),
    }


def operation_block(rt, repeats):
    s = rt.load(str(MODELS / "convnet" / "model.onnx"), device="cpu")
    frames = noise(512, 3, count=3)

    def deferred():
        with rt.operation() as op:
            return [op.run(s, {"x": f})["y"] for f in frames]

    def planned():
        with rt.operation(total_runs=len(frames)) as op:
            return [op.run(s, {"x": f})["y"] for f in frames]

    def cpp():
        return _ebb._bench.time_cpp_run_per_frame(rt, s, frames)[1]

    modes = {"cpp_operation": cpp, "block_deferred": deferred, "block_planned": planned}
    for fn in modes.values():
        fn()  # warm-up
    rt.trim()
    floor = {"reserved": shared_reserved(rt), "rss": rss_bytes()}
    times = {m: [] for m in modes}
    after = {m: [] for m in modes}
    for i in range(repeats):
        order = list(modes) if i % 2 == 0 else list(reversed(modes))
        for m in order:
            t0 = time.perf_counter()
            outputs = modes[m]()
            times[m].append(time.perf_counter() - t0)
            # The results are the caller's memory: held while measuring, not counted.
            after[m].append((shared_reserved(rt), rss_bytes() - sum(o.nbytes for o in outputs)))
            del outputs
    result = {"model": "convnet", "frames": len(frames), "frame_shape": [1, 3, 512, 512], "repeats": repeats,
              "reserved_after_load": floor["reserved"], "rss_after_load": floor["rss"]}
    base = statistics.median(times["cpp_operation"])
    for m in modes:
        result[m] = {"median_ms": statistics.median(times[m]) * 1e3,
                     "ratio_to_cpp": statistics.median(times[m]) / base,
                     "reserved_after_max": max(r for r, _ in after[m]),
                     "rss_after_max": max(r for _, r in after[m])}
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="accepted for symmetry with ebb bench: JSON is the only output")
    args = parser.parse_args()
    rt = ebb.Runtime()
    overhead = call_overhead(rt, args.iterations)
    tiled = run_tiled(rt, args.repeats)
    block = operation_block(rt, args.repeats)
    floor = block["reserved_after_load"]
    same_floor = lambda m: block[m]["reserved_after_max"] == floor and \
        block[m]["rss_after_max"] <= block["rss_after_load"] * 1.10
    report = {
        "benchmark": "python", "python": sys.version.split()[0], "ebb": ebb.__version__,
        "load_average_1min": os.getloadavg()[0], "cpus": os.cpu_count(),
        "call_overhead": overhead, "run_tiled": tiled, "operation_block": block,
        "goals": {
            "call_overhead_ratio_le_1_05": overhead["mid_operation"]["ratio"] <= 1.05,
            "run_tiled_per_frame_ratio_le_1_03": tiled["ratio"] <= 1.03,
            "block_deferred_same_floor_as_cpp": same_floor("block_deferred") and same_floor("cpp_operation"),
            "block_planned_same_floor_as_cpp": same_floor("block_planned") and same_floor("cpp_operation"),
        },
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
