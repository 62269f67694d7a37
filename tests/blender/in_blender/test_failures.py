"""What goes wrong, in real Blender: ebb missing, a job cancelled after its first run, broken model folders,
out of memory, the add-on disabled and enabled again. Every error is a Blender report (a script sees it as
RuntimeError, Blender's way), never a traceback, and Blender keeps running. One Blender process."""
import gc
import json
import sys
import threading

import bpy
import pytest

from conftest import MiB, RssSampler, UPSCALER, make_image, rss, shared_arena, wait_until


def no_traceback(capfd) -> str:
    out = capfd.readouterr()
    assert "Traceback" not in out.out + out.err
    return out.out + out.err


def test_without_ebb_the_operators_report_how_to_install_it(engine, monkeypatch, capfd):
    make_image("small", 96, 64, seed=4)
    assert engine.runtime is None
    monkeypatch.setitem(sys.modules, "ebb", None)  # `import ebb` now raises ImportError
    with pytest.raises(RuntimeError, match="ebb is not installed in Blender's Python"):
        bpy.ops.ebb.upscale_image(image="small")
    no_traceback(capfd)


def test_a_job_cancelled_after_its_first_run_writes_nothing_and_gives_the_memory_back(engine, capfd):
    assert bpy.ops.ebb.upscale_image(image="small") == {'FINISHED'}  # loads the model
    after_load = engine.model("").after_load["shared_arena"]
    make_image("big", 600, 400, seed=5)  # 6 x 4 = 24 tiles
    images = set(bpy.data.images.keys())
    cancelled_at = []

    def press_esc():  # what Esc does in the modal operator: job.cancel(), from another thread here
        wait_until(lambda: engine.job is not None and engine.job.done >= 1)
        cancelled_at.append(engine.job.done)
        engine.job.cancel()

    canceller = threading.Thread(target=press_esc)
    canceller.start()
    gc.collect()
    before = rss()
    with RssSampler() as sampler:
        assert bpy.ops.ebb.upscale_image(image="big") == {'CANCELLED'}
    canceller.join()
    after = rss()
    with capfd.disabled():
        print(f"\ncancelled job: RSS before {before / MiB:.1f} MiB, peak {sampler.peak / MiB:.1f} MiB, "
              f"after {after / MiB:.1f} MiB; cancel requested after run {cancelled_at[0]}, "
              f"stopped after {engine.last['runs']} of {engine.last['total']}")
    assert set(bpy.data.images.keys()) == images  # no partial result
    last = engine.last
    assert last["outcome"] == "cancelled" and cancelled_at[0] <= last["runs"] < last["total"] == 24
    assert shared_arena(engine) == after_load  # ebb's arena: exactly back where the load left it
    # The process: the job's +135 MiB peak goes back. What stays is Blender's and NumPy's heap around
    # the job (its image's float copies, the tiles' arrays), 12-16 MiB in the runs measured here (a
    # 16 MiB bound failed CI twice by 0.3 MiB), far below the transient a kept arena would leave.
    assert abs(after - before) <= min(0.10 * before, 24 * MiB)
    assert sampler.peak - before >= 64 * MiB
    assert "cancelled after" in no_traceback(capfd)
    # The next job works.
    assert bpy.ops.ebb.upscale_image(image="small") == {'FINISHED'}
    assert tuple(bpy.data.images["small_2x"].size) == (192, 128)


def broken_folders(root):
    missing = root / "missing"
    bad_config = root / "bad_config"
    bad_config.mkdir()
    (bad_config / "model.onnx").write_bytes((UPSCALER / "model.onnx").read_bytes())
    (bad_config / "config.json").write_text('{"kind": "image_to_image", "tile": {"size": 128, "overlap": 8, "x": 1}}')
    tensor = root / "tensor_model"
    tensor.mkdir()
    (tensor / "model.onnx").write_bytes((UPSCALER / "model.onnx").read_bytes())
    no_model = root / "no_model"
    no_model.mkdir()
    (no_model / "config.json").write_text('{"kind": "image_to_image"}')
    garbage = root / "garbage"
    garbage.mkdir()
    (garbage / "config.json").write_text((UPSCALER / "config.json").read_text())
    (garbage / "model.onnx").write_bytes(b"\x08\x07 this is not an ONNX model" * 100)
    return [(missing, "does not exist"), (bad_config, "unknown key 'config.tile.x'"),
            (tensor, "not an image_to_image model"), (no_model, "has no model.onnx"),
            (garbage, "invalid argument: ")]


def test_a_broken_model_folder_is_an_error_report_and_blender_keeps_running(engine, prefs, tmp_path, capfd):
    loads = engine.runtime.load_count
    for folder, message in broken_folders(tmp_path):
        prefs.model_folder = str(folder)
        with pytest.raises(RuntimeError) as err:
            bpy.ops.ebb.upscale_image(image="small")
        assert str(err.value).startswith("Error: ebb: ") and message in str(err.value), str(err.value)
        assert str(folder) in str(err.value)
        no_traceback(capfd)
    assert engine.runtime.load_count == loads  # a failed load is not cached, nothing else was loaded
    prefs.model_folder = ""
    assert bpy.ops.ebb.upscale_image(image="small") == {'FINISHED'}


def test_another_model_folder_and_tile_size_from_the_preferences(engine, prefs, tmp_path):
    folder = tmp_path / "upscaler_tile64"
    folder.mkdir()
    (folder / "model.onnx").write_bytes((UPSCALER / "model.onnx").read_bytes())
    (folder / "config.json").write_text('{"kind": "image_to_image", "scale": 2, "tile": {"size": 64, "overlap": 8}}')
    prefs.model_folder = str(folder)
    assert bpy.ops.ebb.upscale_image(image="small") == {'FINISHED'}
    assert engine.last["runs"] == 4  # 96x64 in cores of 64 - 2 x 8: 2 x 2 tiles (the bundled config: 1)
    assert str(folder) in engine.models
    prefs.tile_size = 48  # the preference overrides the folder's tile size: cores of 32, 3 x 2 tiles
    assert bpy.ops.ebb.upscale_image(image="small") == {'FINISHED'}
    assert engine.last["runs"] == 6
    assert tuple(bpy.data.images["small_2x"].size) == (192, 128)


def test_out_of_memory_is_an_error_report_and_the_next_job_works(engine, prefs, tmp_path, capfd):
    policy = tmp_path / "capped.json"
    policy.write_text(json.dumps({"cpu": {"arena_settings": {"max_bytes": 16 * MiB}}}))  # a tile needs ~118 MiB
    prefs.policy_file = str(policy)
    with pytest.raises(RuntimeError, match="ebb: out of memory: .*shared CPU arena"):
        bpy.ops.ebb.upscale_image(image="small")
    no_traceback(capfd)
    assert engine.last["outcome"].startswith("failed: out of memory")
    prefs.policy_file = ""  # back to ebb's defaults: a new runtime
    assert bpy.ops.ebb.upscale_image(image="small") == {'FINISHED'}


def test_disabling_the_addon_lets_go_of_ebb_and_enabling_it_again_works(addon, engine):
    assert engine.runtime is not None
    bpy.ops.preferences.addon_disable(module=addon.__name__)
    assert engine.runtime is None and not engine.models
    bpy.ops.preferences.addon_enable(module=addon.__name__)
    assert bpy.ops.ebb.upscale_image(image="small") == {'FINISHED'}
    assert engine.runtime.load_count == 1


def test_unload_models_drops_them_and_the_next_job_loads_again(engine):
    loads = engine.runtime.load_count
    assert engine.runtime.cached >= 1 and engine.models
    assert bpy.ops.ebb.unload_models() == {'FINISHED'}
    assert engine.runtime.cached == 0 and not engine.models
    assert bpy.ops.ebb.upscale_image(image="small") == {'FINISHED'}
    assert engine.runtime.load_count == loads + 1
