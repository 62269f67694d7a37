"""The modal operator from Blender's own event loop: Blender with a window on a virtual display (Xvfb, Mesa's
software OpenGL), driven by tests/blender/modal_driver.py. Shows what the headless tests cannot: invoked from
the UI the operator returns at once and the event loop keeps running while ebb works (GIL released), the
result appears in the Image Editor, Esc after the first run cancels (no result, the memory back), and the next
job works. Run by ctest with /usr/bin/python3 -m pytest; skipped where xvfb-run is missing."""
import json
import os
import shutil
import subprocess

import pytest

import launch


@pytest.mark.skipif(shutil.which("xvfb-run") is None, reason="xvfb-run (Debian's xvfb) is not installed")
def test_invoked_from_the_ui_the_job_runs_beside_the_event_loop_and_esc_cancels(tmp_path):
    env = dict(os.environ, **launch.user_folder(tmp_path), TMPDIR=str(tmp_path))
    launch.build_addon.stage(tmp_path / "scripts" / "addons" / launch.build_addon.NAME)
    out = tmp_path / "observed.json"
    run = subprocess.run(["xvfb-run", "-a", "-s", "-screen 0 1280x800x24", launch.BLENDER, "--factory-startup",
                          "--enable-event-simulate", "--python-use-system-env", "--python",
                          str(launch.HERE / "modal_driver.py"), "--", str(out)],
                         env=env, capture_output=True, text=True, timeout=240)
    assert out.exists(), run.stdout + run.stderr
    seen = json.loads(out.read_text())
    assert "error" not in seen, seen["error"]
    print(seen)
    assert seen["invoke"] == ["RUNNING_MODAL"]
    # The event loop ran on while ebb worked: many timer ticks, none waiting for more than a fraction of the job.
    assert seen["ticks_during_job"] >= 5
    assert seen["longest_tick_gap"] < seen["job_seconds"] / 3
    assert seen["progress_seen"][-1] >= 1  # progress was visible to the UI thread between runs
    assert seen["first"] == {"outcome": "done", "runs": 6, "result": [600, 400], "shown": "ui_2x"}
    assert seen["invoke_big"] == ["RUNNING_MODAL"]
    cancelled = seen["cancelled"]
    assert cancelled["outcome"] == "cancelled" and 1 <= cancelled["runs"] < cancelled["total"] == 24
    assert cancelled["result"] is False
    assert cancelled["shared_arena"] == cancelled["after_load"]
    assert seen["invoke_again"] == ["RUNNING_MODAL"] and seen["again"] == "done"
