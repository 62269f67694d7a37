"""Inside Blender with a window (tests/blender/test_modal.py starts it under Xvfb): the operators invoked as
the UI invokes them, from Blender's own event loop.

A generator advanced by a bpy.app.timers callback plays the user: it turns the biggest area into an Image
Editor showing a generated image, invokes ebb.upscale_image there ('INVOKE_DEFAULT': the modal operator),
counts how often the event loop ran while ebb worked, then starts a bigger job and presses Esc
(window.event_simulate, hence --enable-event-simulate) after its first run, then upscales once more.
What it saw goes to the JSON file named after `--`; an exception is recorded there too. Then Blender quits.
"""
import json
import sys
import time
import traceback

import bpy
import numpy as np

OUT = sys.argv[sys.argv.index("--") + 1]
observed = {}


def new_image(name, width, height, seed):
    image = bpy.data.images.new(name, width, height, alpha=True)
    image.pixels.foreach_set(np.random.default_rng(seed).random(width * height * 4, dtype=np.float32))
    return image


def shared_arena(engine):
    return next(a["reserved"] for a in engine.runtime.memory()["arenas"] if a["name"] == "cpu:shared")


def invoke(window, area, image):
    area.spaces.active.image = image
    region = next(r for r in area.regions if r.type == 'WINDOW')
    with bpy.context.temp_override(window=window, area=area, region=region):
        return sorted(bpy.ops.ebb.upscale_image('INVOKE_DEFAULT'))


def play():
    assert bpy.ops.preferences.addon_enable(module="ebb_upscale") == {'FINISHED'}
    from ebb_upscale.engine import ENGINE
    window = bpy.context.window_manager.windows[0]
    area = max(window.screen.areas, key=lambda a: a.width * a.height)
    area.type = 'IMAGE_EDITOR'
    yield

    # 1. An upscale from the UI: the modal operator returns at once, the event loop keeps running.
    observed["invoke"] = invoke(window, area, new_image("ui", 300, 200, seed=1))
    ticks, seen_progress = [time.monotonic()], set()
    while ENGINE.job is not None:
        ticks.append(time.monotonic())
        seen_progress.add(ENGINE.job.done)
        yield
    observed["ticks_during_job"] = len(ticks) - 1
    observed["longest_tick_gap"] = max(b - a for a, b in zip(ticks, ticks[1:]))
    observed["job_seconds"] = ENGINE.last["seconds"]
    observed["progress_seen"] = sorted(seen_progress)
    observed["first"] = {"outcome": ENGINE.last["outcome"], "runs": ENGINE.last["runs"],
                         "result": list(bpy.data.images["ui_2x"].size) if "ui_2x" in bpy.data.images else None,
                         "shown": area.spaces.active.image.name}

    # 2. A bigger job, Esc after its first run.
    after_load = ENGINE.model("").after_load["shared_arena"]
    observed["invoke_big"] = invoke(window, area, new_image("big", 600, 400, seed=2))
    while ENGINE.job is not None and ENGINE.job.done < 1:
        yield
    window.event_simulate(type='ESC', value='PRESS')
    window.event_simulate(type='ESC', value='RELEASE')
    while ENGINE.job is not None:
        yield
    observed["cancelled"] = {"outcome": ENGINE.last["outcome"], "runs": ENGINE.last["runs"],
                             "total": ENGINE.last["total"], "result": "big_2x" in bpy.data.images,
                             "shared_arena": shared_arena(ENGINE), "after_load": after_load}

    # 3. The next job works.
    observed["invoke_again"] = invoke(window, area, bpy.data.images["ui"])
    while ENGINE.job is not None:
        yield
    observed["again"] = ENGINE.last["outcome"]


def main():
    steps = play()

    def tick():
        try:
            next(steps)
            return 0.01
        except StopIteration:
            pass
        except BaseException:
            observed["error"] = traceback.format_exc()
        with open(OUT, "w") as f:
            json.dump(observed, f)
        bpy.ops.wm.quit_blender()
        return None

    bpy.app.timers.register(tick, first_interval=0.5)


main()
