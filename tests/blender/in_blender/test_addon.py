"""The add-on in real Blender: enabling it, ebb.upscale_image against `ebb run`, the cached session, the
memory going back to Blender, and ebb.upscale_sequence as one operation. One Blender process."""
import gc

import bpy
import numpy as np
import pytest

from conftest import MiB, RssSampler, ebb_run, image_bytes, make_image, rss, shared_arena


def test_the_addon_enables_with_its_operators_panel_and_preferences(addon, engine, prefs):
    assert addon.__name__ in bpy.context.preferences.addons
    for op in ("upscale_image", "upscale_sequence", "unload_models"):
        assert hasattr(bpy.ops.ebb, op)
    assert hasattr(bpy.types, "EBB_PT_upscale")
    assert prefs.model_folder == "" and prefs.tile_size == 0 and prefs.policy_file == ""
    assert engine.runtime is None  # nothing is loaded before the first upscale


def test_upscale_image_equals_ebb_run_and_a_second_one_loads_nothing(engine, tmp_path):
    rgb = make_image("gen", 300, 200, seed=1)
    assert bpy.ops.ebb.upscale_image(image="gen") == {'FINISHED'}
    result = bpy.data.images["gen_2x"]
    assert tuple(result.size) == (600, 400) and not result.is_float
    got = image_bytes(result)
    expected = ebb_run(tmp_path, rgb, "gen")
    assert expected.shape == (400, 600, 3)
    # 8-bit pixels go through as bytes (Blender's floats are byte/255), so not even one level differs.
    assert np.array_equal(got[..., :3], expected)
    assert (got[..., 3] == 255).all()
    assert engine.runtime.load_count == 1

    # The second invocation: the session is cached, nothing is loaded; the result image is reused.
    assert bpy.ops.ebb.upscale_image(image="gen") == {'FINISHED'}
    assert engine.runtime.load_count == 1
    assert [i.name for i in bpy.data.images if i.name.startswith("gen_2x")] == ["gen_2x"]
    assert np.array_equal(image_bytes(bpy.data.images["gen_2x"]), got)
    last = engine.last
    assert last["outcome"] == "done" and last["runs"] == last["total"] == 6  # 3 x 2 tiles of 128


def test_the_memory_goes_back_to_blender(engine):
    # The image of the test before: the model is loaded and the result datablock exists.
    model = engine.model("")  # the cached model (no load)
    assert engine.runtime.load_count == 1
    after_load = model.after_load["shared_arena"]
    gc.collect()
    before = rss()
    with RssSampler() as sampler:
        assert bpy.ops.ebb.upscale_image(image="gen") == {'FINISHED'}
    after = rss()
    print(f"Blender RSS: before {before / MiB:.1f} MiB, peak {sampler.peak / MiB:.1f} MiB, "
          f"after {after / MiB:.1f} MiB; shared arena after load {after_load} B, now {shared_arena(engine)} B")
    assert abs(after - before) <= min(0.10 * before, 16 * MiB)
    assert sampler.peak - before >= 64 * MiB  # the tiles' arena: ~118 MiB at 128x128
    assert shared_arena(engine) == after_load


def test_a_float_image_runs_as_float_tensors(engine):
    rng = np.random.default_rng(3)
    rgba = rng.random((48, 64, 4), dtype=np.float32)
    rgba[..., 3] = rng.random((48, 64), dtype=np.float32)
    image = bpy.data.images.new("hdr", 64, 48, alpha=True, float_buffer=True)
    image.pixels.foreach_set(rgba[::-1].ravel())
    assert bpy.ops.ebb.upscale_image(image="hdr") == {'FINISHED'}
    result = bpy.data.images["hdr_2x"]
    assert result.is_float and tuple(result.size) == (128, 96)
    buf = np.empty(128 * 96 * 4, np.float32)
    result.pixels.foreach_get(buf)
    got = buf.reshape(96, 128, 4)[::-1]
    tensor = np.ascontiguousarray(rgba[..., :3].transpose(2, 0, 1)[np.newaxis])
    model = engine.model("")
    expected = engine.runtime.run_tiled(model.session, [tensor], tile=128, overlap=8)[0][0].transpose(1, 2, 0)
    np.testing.assert_allclose(got[..., :3], expected, atol=1e-6)
    assert np.array_equal(got[..., 3], np.repeat(np.repeat(rgba[..., 3], 2, axis=0), 2, axis=1))


def test_upscale_sequence_is_one_operation_released_once(engine, tmp_path):
    import ebb
    folder = tmp_path / "seq"
    folder.mkdir()
    frames = {n: np.random.default_rng(10 + n).integers(0, 256, (120, 160, 3), dtype=np.uint8) for n in range(1, 5)}
    for n, frame in frames.items():
        ebb.write_png(folder / f"shot_{n:04d}.png", frame)
    image = bpy.data.images.load(str(folder / "shot_0001.png"))
    image.source = 'SEQUENCE'
    session = engine.model("").session
    releases, runs, loads = session.release_count, session.run_count, engine.runtime.load_count
    out = tmp_path / "out"
    assert bpy.ops.ebb.upscale_sequence(image=image.name, frame_start=2, frame_end=4, directory=str(out)) \
        == {'FINISHED'}
    assert session.release_count == releases + 1  # ONE release, after the last tile of the last frame
    assert session.run_count == runs + 3 * 4  # 2 x 2 tiles of 128 per 160x120 frame
    assert engine.runtime.load_count == loads
    assert sorted(p.name for p in out.iterdir()) == ["shot_0002.png", "shot_0003.png", "shot_0004.png"]
    for n in (2, 3, 4):
        assert np.array_equal(ebb.read_image(out / f"shot_{n:04d}.png"), ebb_run(tmp_path, frames[n], f"f{n}"))
    sequence = bpy.data.images[f"{image.name}_2x"]
    assert sequence.source == 'SEQUENCE'
    assert bpy.path.abspath(sequence.filepath) == str(out / "shot_0002.png")


def test_a_second_upscale_after_the_result_was_saved_reuses_it(engine, tmp_path):
    # Issue 34: once the result was saved (Blender makes it a FILE image), the next upscale wrote
    # 'photo.png_2x.001' beside it instead of reusing 'photo.png_2x'.
    make_image("photo.png", 64, 48, seed=5)
    assert bpy.ops.ebb.upscale_image(image="photo.png") == {'FINISHED'}
    result = bpy.data.images["photo.png_2x"]
    result.filepath_raw = str(tmp_path / "photo_2x.png")
    result.file_format = 'PNG'
    result.save()
    assert result.source == 'FILE'
    bpy.data.images.remove(bpy.data.images["photo.png"])
    got = make_image("photo.png", 64, 48, seed=6)  # new pixels under the same name
    assert bpy.ops.ebb.upscale_image(image="photo.png") == {'FINISHED'}
    assert [i.name for i in bpy.data.images if i.name.startswith("photo.png_2x")] == ["photo.png_2x"]
    assert bpy.data.images["photo.png_2x"].is_dirty  # the new pixels, not yet saved over the file
    assert np.array_equal(image_bytes(bpy.data.images["photo.png_2x"])[..., :3], ebb_run(tmp_path, got, "photo6"))


def write_sequence(folder, numbers, seed=20):
    import ebb
    folder.mkdir()
    for n in numbers:
        ebb.write_png(folder / f"shot_{n:04d}.png",
                      np.random.default_rng(seed + n).integers(0, 256, (40, 56, 3), dtype=np.uint8))


def test_the_default_frame_range_is_every_file_of_the_sequence(engine, tmp_path):
    # Issue 34: a sequence opened from Python (or found by sequence detection) has frame_duration 1,
    # and the default range upscaled 1 of its 5 frames.
    write_sequence(tmp_path / "seq", range(3, 8))
    (tmp_path / "seq" / "shot_03.png").write_bytes(b"")      # another width: not a frame of it
    (tmp_path / "seq" / "other_0009.png").write_bytes(b"")   # another name
    image = bpy.data.images.load(str(tmp_path / "seq" / "shot_0003.png"), check_existing=False)
    image.source = 'SEQUENCE'
    assert image.frame_duration == 1  # what the add-on used to take
    out = tmp_path / "out"
    assert bpy.ops.ebb.upscale_sequence(image=image.name, directory=str(out)) == {'FINISHED'}
    assert sorted(p.name for p in out.iterdir()) == [f"shot_{n:04d}.png" for n in range(3, 8)]


def test_an_output_folder_relative_to_an_unsaved_blend_file_is_refused_before_any_work(engine, tmp_path):
    # Issue 34: the docs' directory="//up" in an unsaved file wrote under Blender's working folder.
    write_sequence(tmp_path / "seq", range(1, 3))
    image = bpy.data.images.load(str(tmp_path / "seq" / "shot_0001.png"), check_existing=False)
    image.source = 'SEQUENCE'
    assert not bpy.data.filepath
    runs = engine.model("").session.run_count
    for directory, says in [("//up", "is relative to the .blend file, which is not saved yet"),
                            ("up", "is relative: give an absolute folder")]:
        with pytest.raises(RuntimeError, match=says):
            bpy.ops.ebb.upscale_sequence(image=image.name, directory=directory)
    assert engine.model("").session.run_count == runs  # refused before any run: nothing written


class Layout:
    """Stands in for Blender's UILayout in a panel's draw(): records the labels and operators drawn."""

    def __init__(self, record=None):
        self.record = [] if record is None else record
        self.enabled = True

    def column(self, **_):
        return Layout(self.record)

    row = box = column

    def label(self, text="", **_):
        self.record.append(("label", text))

    def operator(self, idname, **_):
        self.record.append(("operator", idname))
        return type("Properties", (), {})()

    def prop(self, data, name, **_):
        self.record.append(("prop", name))

    def separator(self):
        pass


def draw_panel(image) -> list:
    layout = Layout()
    panel = type("Panel", (), {"layout": layout})()
    space = type("Space", (), {"image": image})()
    context = type("Context", (), {"space_data": space, "window_manager": bpy.context.window_manager})()
    bpy.types.EBB_PT_upscale.draw(panel, context)
    return layout.record


def test_the_panel_shows_the_loaded_models_and_the_last_jobs_memory(engine):
    record = draw_panel(bpy.data.images["gen"])
    labels = [text for kind, text in record if kind == "label"]
    assert ("operator", "ebb.upscale_image") in record and ("operator", "ebb.unload_models") in record
    assert "waifu2x_scale2x on cpu" in labels
    last = engine.last
    assert f"{last['label']}: done" in labels
    assert any(t.startswith("took ") and " MiB, gave back " in t for t in labels), labels
    assert any(t.startswith("RSS ") for t in labels) and any(t.startswith("arena peak ") for t in labels)
    # An image sequence: the frame range and the output folder for Upscale Sequence.
    sequence = next(i for i in bpy.data.images if i.source == 'SEQUENCE')
    assert [name for kind, name in draw_panel(sequence) if kind == "prop"] == \
        ["ebb_frame_start", "ebb_frame_end", "ebb_directory"]
