"""Upscale frames 2x with the bundled waifu2x model, tiled, as ONE operation: what a Blender add-on does.

    PYTHONPATH=build/python /usr/bin/python3 examples/python/upscale_frames.py [FRAME.png ...] [-o OUT_DIR]

Without frames it upscales the two astronaut photos of tests/fixtures. Only ebb and numpy.

In an add-on, the operation runs on a worker thread (as here): ebb releases the GIL while models run,
so Blender's UI thread stays responsive; a bpy.app.timers callback polls `progress` the way the loop at
the bottom of main() does, and a Cancel button sets `cancel`. The model stays loaded between clicks
(keep the Runtime and the Session on the add-on), but its inference memory goes back to Blender after
the last tile of the last frame.
"""
import argparse
import pathlib
import threading
import time

import ebb

REPO = pathlib.Path(__file__).resolve().parents[2]
MiB = 1 << 20


def memory_line(runtime: ebb.Runtime, label: str) -> str:
    m = runtime.memory()
    reserved = sum(a["reserved"] for a in m["arenas"])
    return f"  {label:<28} arena reserved {reserved / MiB:8.1f} MiB   RSS {m['rss_bytes'] / MiB:8.1f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description="upscale frames 2x as one ebb operation")
    parser.add_argument("frames", nargs="*", type=pathlib.Path)
    parser.add_argument("-o", "--out", type=pathlib.Path, default=pathlib.Path("upscaled"))
    parser.add_argument("--tile", type=int, default=128)
    args = parser.parse_args()
    paths = args.frames or [REPO / "tests" / "fixtures" / n for n in ("astronaut_96.png", "astronaut_192.png")]

    runtime = ebb.Runtime()  # one per process (it owns the shared, capped CPU arena)
    upscaler = runtime.load(REPO / "models" / "waifu2x_scale2x" / "model.onnx")
    frames = [ebb.read_image(p) for p in paths]  # uint8 [H,W,3]
    print(f"{upscaler.name} on {upscaler.device}: {len(frames)} frames, tiles of {args.tile}")
    print(memory_line(runtime, "before (model loaded)"))

    progress = {"done": 0, "total": 0, "peak": None}
    cancel = threading.Event()  # a Cancel button would set this
    result = {}

    def on_progress(done: int, total: int) -> None:  # between runs, on the worker thread
        progress.update(done=done, total=total)
        m = runtime.memory()
        reserved = sum(a["reserved"] for a in m["arenas"])
        if progress["peak"] is None or reserved > progress["peak"][0]:
            progress["peak"] = (reserved, m["rss_bytes"])

    def work() -> None:
        try:
            # Every tile of every frame in ONE operation: released once, after the last tile.
            result["images"] = runtime.run_tiled(upscaler, frames, tile=args.tile, overlap=8,
                                                 on_progress=on_progress, cancel=cancel)
        except ebb.Error as e:  # ebb.Cancelled, ebb.ResourceExhausted (also a MemoryError), ...
            result["error"] = e

    worker = threading.Thread(target=work)
    worker.start()
    shown = 0
    while worker.is_alive() or shown < progress["done"]:  # the "UI thread" keeps running meanwhile
        if progress["done"] > shown:
            shown = progress["done"]
            print(f"  run {shown}/{progress['total']}")
        time.sleep(0.05)
    worker.join()
    if "error" in result:
        raise SystemExit(f"upscaling failed: {result['error']}")

    peak_reserved, peak_rss = progress["peak"]
    print(f"  {'at peak (during the tiles)':<28} arena reserved {peak_reserved / MiB:8.1f} MiB   "
          f"RSS {peak_rss / MiB:8.1f} MiB")
    print(memory_line(runtime, "after (released)"))

    args.out.mkdir(parents=True, exist_ok=True)
    for path, image in zip(paths, result["images"]):
        target = args.out / f"{path.stem}_2x.png"
        ebb.write_png(target, image)
        print(f"  {path.name} -> {target} ({image.shape[1]}x{image.shape[0]})")


if __name__ == "__main__":
    main()
