"""examples/python/upscale_frames.py runs as documented and gives its memory back."""
import os
import re
import subprocess
import sys

import ebb
from conftest import FIXTURES, ROOT


def test_the_blender_style_example(tmp_path):
    frames = [FIXTURES / "astronaut_96.png", tmp_path / "second.png"]
    ebb.write_png(frames[1], ebb.read_image(frames[0])[:64, :80].copy())
    run = subprocess.run([sys.executable, str(ROOT / "examples" / "python" / "upscale_frames.py"),
                          *map(str, frames), "-o", str(tmp_path / "out"), "--tile", "48"],
                         capture_output=True, text=True, env=dict(os.environ, EBB_LOG="quiet"))
    assert run.returncode == 0, run.stderr
    reserved = {label: float(mib) for label, mib in
                re.findall(r"^  (before|at peak|after) .*arena reserved +([\d.]+) MiB", run.stdout, re.M)}
    assert reserved["at peak"] > reserved["before"] + 1
    assert reserved["after"] == reserved["before"]
    # The "UI loop" polls every 50 ms, so on a fast machine it may see only the last run; it always sees that.
    assert re.search(r"^  run (\d+)/\1$", run.stdout, re.M), run.stdout
    for path, shape in zip(frames, [(192, 192, 3), (128, 160, 3)]):
        assert ebb.read_image(tmp_path / "out" / f"{path.stem}_2x.png").shape == shape
