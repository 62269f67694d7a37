"""The package, the Runtime and Session.run on the real bundled models and ONNX Runtime."""
import ast
import os
import pathlib
import pydoc
import subprocess
import time

import numpy as np
import pytest

import ebb
from ebb import _ebb
from conftest import EBB_BINARY, FIXTURES, MODELS, MiB, image_input, input_views, model, rss_bytes, shared_arena

# --- the package ---------------------------------------------------------------------


def test_imports_the_extension_for_this_interpreter():
    assert pathlib.Path(_ebb.__file__).parent == pathlib.Path(ebb.__file__).parent
    assert ebb.__version__ == "0.1.0"


def _stub_names():
    tree = ast.parse((pathlib.Path(ebb.__file__).parent / "__init__.pyi").read_text())
    names = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            names[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
        elif isinstance(node, ast.FunctionDef):
            names[node.name] = None
    return names


def test_stubs_match_the_module():
    stubs = _stub_names()
    public = {n for n in ebb.__all__ if n != "__version__"}
    assert set(stubs) == public
    for name, members in stubs.items():
        obj = getattr(ebb, name)
        if members is None:
            assert callable(obj), name
            continue
        if issubclass(obj, ebb.Error):
            continue
        real = {m for m in dir(obj) if not m.startswith("_") or m in ("__enter__", "__exit__", "__contains__")}
        expected = {m for m in members if m != "__init__"}
        assert expected == real, f"{name}: stub has {sorted(expected - real)}, module has {sorted(real - expected)}"


def test_help_of_session_run_explains_the_release():
    text = pydoc.render_doc(ebb.Session.run, renderer=pydoc.plaintext)
    assert "ONE whole operation" in text
    assert "given back" in text and "GIL is released" in text
    assert "runtime.operation()" in text


def test_exceptions_keep_the_status_code():
    assert issubclass(ebb.ResourceExhausted, MemoryError)
    assert issubclass(ebb.InvalidArgument, ValueError)
    assert issubclass(ebb.NotFound, LookupError)
    for cls, code in [(ebb.InvalidArgument, "invalid_argument"), (ebb.NotFound, "not_found"),
                      (ebb.ResourceExhausted, "resource_exhausted"), (ebb.Unavailable, "unavailable"),
                      (ebb.FailedPrecondition, "failed_precondition"), (ebb.Cancelled, "cancelled"),
                      (ebb.Internal, "internal")]:
        assert issubclass(cls, ebb.Error)
        assert cls.code == code


# --- Runtime ---------------------------------------------------------------------------


def test_one_runtime_owns_the_shared_arena(runtime):
    with pytest.raises(ebb.FailedPrecondition, match="shared CPU arena") as err:
        ebb.Runtime()
    assert err.value.code == "failed_precondition"


def test_policies_are_read_from_dicts_and_files(runtime, tmp_path):
    assert runtime.policy["release"] == "idle"  # the library's default, through the C API
    assert runtime.policy["cpu"]["arena"] == "shared"
    with pytest.raises(ebb.InvalidArgument, match="unknown policy key 'policy.nope'"):
        ebb.Runtime({"nope": 1})
    with pytest.raises(ebb.NotFound):
        ebb.Runtime(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"release": "sometimes"}')
    with pytest.raises(ebb.InvalidArgument, match="bad.json"):
        ebb.Runtime(str(bad))
    with pytest.raises(TypeError):
        ebb.Runtime(42)
    # Round four: the file is read under the checked-file rules (a FIFO blocked, /dev/zero was read
    # until memory ran out), and the thread count is bounded.
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(ebb.InvalidArgument, match="not a regular file"):
        ebb.Runtime(fifo)
    with pytest.raises(ebb.InvalidArgument, match="not a regular file"):
        ebb.Runtime("/dev/zero")
    with pytest.raises(ebb.InvalidArgument, match="policy.intra_op_threads must be an integer from 0 to"):
        ebb.Runtime({"intra_op_threads": 100000})


def test_load_is_cached_by_content(runtime, tmp_path):
    first = runtime.load(model("convnet"))
    loads = runtime.load_count
    again = runtime.load(pathlib.Path(model("convnet")))
    assert again is first
    assert runtime.load_count == loads
    # Same bytes elsewhere: the same loaded model (the key is the content), no
    # new load, but a handle under its own name, so errors name it.
    copy = tmp_path / "copy.onnx"
    copy.write_bytes(pathlib.Path(model("convnet")).read_bytes())
    named = runtime.load(copy)
    assert named.name == "copy"
    assert runtime.load(copy) is named
    assert runtime.load(model("convnet")) is first
    runtime.load_bytes(copy.read_bytes())
    assert runtime.load_count == loads


def test_load_takes_a_model_folder_file_or_name_as_the_cli_does(runtime, tmp_path):
    # The same library call as `ebb info MODEL` (ResolveModel, ebb/model_location.h).
    by_file = runtime.load(model("convnet"))
    loads = runtime.load_count
    assert runtime.load(MODELS / "convnet") is by_file
    assert runtime.load(str(MODELS / "convnet") + "/") is by_file
    assert runtime.load("convnet", models=MODELS) is by_file
    assert runtime.load_count == loads
    # A folder's config.json applies as on the command line: its device unless one is asked for.
    folder = tmp_path / "tiny_cpu"
    folder.mkdir()
    (folder / "model.onnx").write_bytes(pathlib.Path(model("tiny")).read_bytes())
    (folder / "config.json").write_text('{"device": "cpu"}')
    assert runtime.load(folder).device == "cpu"
    assert runtime.load("tiny_cpu", models=tmp_path).device == "cpu"
    (folder / "config.json").write_text('{"devise": "cpu"}')
    with pytest.raises(ebb.InvalidArgument, match="config.json: unknown key"):
        runtime.load(folder)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ebb.NotFound, match="has no model.onnx"):
        runtime.load(tmp_path / "empty")
    # The error for a model that is none of the three is the CLI's, word for word but the folder's origin.
    with pytest.raises(ebb.NotFound) as err:
        runtime.load("nope", models=tmp_path)
    assert str(err.value).endswith(f"model 'nope' not found: no such model file or model folder, "
                                   f"and no folder 'nope' under models= '{tmp_path}'")
    cli = subprocess.run([str(EBB_BINARY), "info", "nope", "--models", str(tmp_path)], capture_output=True, text=True)
    assert cli.returncode == 1
    assert cli.stderr.strip() == (f"ebb: error: not_found: model 'nope' not found: no such model file or model "
                                  f"folder, and no folder 'nope' under --models '{tmp_path}'")
    # unload takes the same forms.
    assert runtime.unload("convnet", models=MODELS) == 1
    assert runtime.load(MODELS / "convnet") is not by_file


def _matmul_model(folder, value, external=True):
    """y = x @ w, w 64x64 of `value` (an input of ones gives 64 * value), written by the onnx package
    with external data (weights.bin beside model.onnx) or in one file."""
    import make_test_models as tool
    model = tool.make_matmul(64, value)
    write = tool.write_external if external else tool.write
    return pathlib.Path(write(model, str(folder.parent), folder.name, quiet=True))


def _replace_weights(path, value):
    """A new weights file renamed over the old one."""
    new = path.with_suffix(".new")
    np.full((64, 64), value, np.float32).tofile(new)
    os.replace(new, path)


def _set_location(path, location):
    """Rewrites the external-data location model.onnx names (the weights are not read)."""
    import onnx
    m = onnx.load_model(str(path), load_external_data=False)
    for t in m.graph.initializer:
        for entry in t.external_data:
            if entry.key == "location":
                entry.value = location
    path.write_bytes(m.SerializeToString())


ONES = {"x": np.ones((1, 64), np.float32)}


def test_new_external_weights_beside_the_same_model_file_load_anew(runtime, tmp_path):
    path = _matmul_model(tmp_path / "ext", 1.0)
    first = runtime.load(path, device="cpu")
    np.testing.assert_array_equal(first.run(ONES)["y"], np.full((1, 64), 64, np.float32))
    loads = runtime.load_count
    assert runtime.load(path, device="cpu") is first
    _replace_weights(tmp_path / "ext" / "weights.bin", 2.0)
    second = runtime.load(path, device="cpu")
    assert second is not first and runtime.load_count == loads + 1
    np.testing.assert_array_equal(second.run(ONES)["y"], np.full((1, 64), 128, np.float32))
    # The session loaded before keeps its weights; the same model in one file gives the same outputs.
    np.testing.assert_array_equal(first.run(ONES)["y"], np.full((1, 64), 64, np.float32))
    single = runtime.load(_matmul_model(tmp_path / "single", 2.0, external=False), device="cpu")
    np.testing.assert_array_equal(single.run(ONES)["y"], second.run(ONES)["y"])


def test_missing_or_escaping_external_weights_are_refused(runtime, tmp_path):
    good = runtime.load(_matmul_model(tmp_path / "good", 1.0), device="cpu")
    path = _matmul_model(tmp_path / "missing", 1.0)
    (tmp_path / "missing" / "weights.bin").unlink()
    with pytest.raises(ebb.FailedPrecondition, match="external-data file 'weights.bin' .* does not exist"):
        runtime.load(path)
    # A location leading out of the model's folder, however it is written.
    outside = tmp_path / "outside.bin"
    np.ones((64, 64), np.float32).tofile(outside)
    for name, location, says in [("dotdot", "../outside.bin", "leaves the model's folder"),
                                 ("absolute", str(outside), "is absolute")]:
        path = _matmul_model(tmp_path / name, 1.0)
        (tmp_path / name / "weights.bin").unlink()
        _set_location(path, location)
        with pytest.raises(ebb.InvalidArgument, match=says):
            runtime.load(path)
    (tmp_path / "link").mkdir()
    (tmp_path / "link" / "weights.bin").symlink_to(outside)
    link = tmp_path / "link" / "model.onnx"
    link.write_bytes((tmp_path / "good" / "model.onnx").read_bytes())
    with pytest.raises(ebb.InvalidArgument, match="resolves outside the model's folder"):
        runtime.load(link)
    with pytest.raises(ebb.InvalidArgument, match="external-data files"):
        runtime.load_bytes((tmp_path / "good" / "model.onnx").read_bytes())
    np.testing.assert_array_equal(good.run(ONES)["y"], np.full((1, 64), 64, np.float32))


def test_load_errors(runtime, tmp_path):
    with pytest.raises(ebb.NotFound, match="no such model file or model folder"):
        runtime.load(tmp_path / "nope.onnx")
    junk = tmp_path / "junk.onnx"
    junk.write_bytes(b"not a model")
    with pytest.raises(ebb.InvalidArgument):
        runtime.load(junk)
    with pytest.raises(ebb.InvalidArgument):
        runtime.load(model("tiny"), device="gpu")
    with pytest.raises(TypeError):
        runtime.load(3)


def test_session_describes_the_model(runtime):
    s = runtime.load(model("mixed"), device="cpu")
    assert s.name == "mixed" and s.device == "cpu" and s.fallback_reason == ""
    assert [(i.name, i.type, i.dtype, i.shape) for i in s.inputs] == [
        ("a", "FP32", np.float32, (-1, 4)), ("b", "INT64", np.int64, (-1, 4)),
        ("c", "UINT8", np.uint8, (-1, 4)), ("flag", "BOOL", np.bool_, (-1, 4))]
    assert [o.name for o in s.outputs] == ["sum", "b2", "nflag", "d"]
    assert s.release_targets == ["cpu:0"]
    assert s.metadata("no such key") is None


def test_unload_and_clear(runtime, tmp_path):
    path = tmp_path / "tiny.onnx"
    path.write_bytes(pathlib.Path(model("tiny")).read_bytes() + b"\x32\x01u")
    s = runtime.load(path)
    cached = runtime.cached
    assert runtime.unload(path) == 1
    assert runtime.cached == cached - 1
    # A session that left the cache still runs.
    x = np.ones((1, 64), np.float32)
    assert s.run({"x": x})["y"].shape == (1, 64)
    assert runtime.unload(s) == 0


def test_memory_is_the_library_reading(runtime):
    m = runtime.memory()
    assert set(m) == {"rss_bytes", "peak_rss_bytes", "arenas", "gpus"}
    arena = shared_arena(runtime)
    assert {"reserved", "in_use", "peak_in_use", "limit", "regions", "shrinks"} <= set(arena)
    assert abs(m["rss_bytes"] - rss_bytes()) < 16 * MiB
    runtime.trim()


# --- Session.run -------------------------------------------------------------------------


def test_run_every_dtype_of_mixed(runtime):
    s = runtime.load(model("mixed"))
    a = np.array([[1, 2, 3, 4]], np.float32)
    b = np.array([[10, 20, 30, 40]], np.int64)
    c = np.array([[0, 0, 0, 1]], np.uint8)
    flag = np.array([[True, False, True, False]])
    out = s.run({"a": a, "b": b, "c": c, "flag": flag})
    assert list(out) == ["sum", "b2", "nflag", "d"]
    np.testing.assert_array_equal(out["sum"], np.array([[11, 22, 33, 45]], np.float32))
    assert out["b2"].dtype == np.int64 and out["b2"].tolist() == [[20, 40, 60, 80]]
    assert out["nflag"].dtype == np.bool_ and out["nflag"].tolist() == [[False, True, False, True]]
    assert out["d"].dtype == np.float64 and out["d"].tolist() == [[1, 2, 3, 4]]
    only = s.run({"a": a, "b": b, "c": c, "flag": flag}, outputs=["d"])
    assert list(only) == ["d"]


def test_inputs_are_borrowed_and_outputs_owned(runtime):
    s = runtime.load(model("convnet"))
    x = image_input(16, 16)
    views = input_views(s, {"x": x})
    assert views["x"] == (True, x.ctypes.data)  # the run reads the array in place
    out = s.run({"x": x})["y"]
    assert out.flags.writeable and out.flags.c_contiguous and out.base is not None
    del s
    runtime.trim()
    out += 1  # the output's memory is its own, not an arena's
    assert np.isfinite(out).all()


def test_a_run_is_one_operation_and_releases_once_runs_pause(runtime):
    # The default release, "idle": a single run's memory goes back once no run has ended for
    # idle_release_ms (waited for, up to 10 s), so runs called back to back keep the arena.
    s = runtime.load(model("convnet"))
    runtime.trim()
    floor = shared_arena(runtime)["reserved"]
    releases = s.release_count
    s.run({"x": image_input(256, 256)})
    # Both waited for: an idle release armed by earlier tests' runs of this (cached) session may come
    # just before this run and count first.
    deadline = time.monotonic() + 10
    while (s.release_count == releases or shared_arena(runtime)["reserved"] != floor) and time.monotonic() < deadline:
        time.sleep(0.002)
    assert s.release_count > releases
    assert shared_arena(runtime)["reserved"] == floor


def test_outputs_match_a_run_without_release(runtime):
    s = runtime.load(model("convnet"))
    x = image_input(96, 80, seed=3)
    released = s.run({"x": x})["y"]
    with runtime.operation(total_runs=2) as op:
        kept = op.run(s, {"x": x})["y"]  # not the last run: no release
        op.run(s, {"x": x})
    assert released.tobytes() == kept.tobytes()


def test_outputs_match_the_ebb_binary(runtime, tmp_path):
    """`ebb run` (the C++ CLI) and Python's run_tiled give the same pixels."""
    folder = pathlib.Path(model("waifu2x_scale2x")).parent
    src = FIXTURES / "astronaut_96.png"
    cli_out = tmp_path / "cli.png"
    subprocess.run([str(EBB_BINARY), "run", str(folder), "-i", str(src), "-o", str(cli_out), "--tile", "48",
                    "--overlap", "8", "--device", "cpu"], check=True, capture_output=True,
                   env=dict(os.environ, EBB_LOG="quiet"))
    up = runtime.load(folder / "model.onnx", device="cpu")
    ours = runtime.run_tiled(up, [ebb.read_image(src)], tile=48, overlap=8)[0]
    theirs = ebb.read_image(cli_out)
    assert ours.shape == theirs.shape == (192, 192, 3)
    assert np.array_equal(ours, theirs)


# --- bad inputs: clear errors, nothing lost -------------------------------------------------


def test_bad_inputs_raise_helpful_errors(runtime):
    s = runtime.load(model("convnet"))
    good = image_input(8, 8)
    with pytest.raises(TypeError, match=r"input 'x' of model 'convnet' must be float32 \(FP32\) with shape "
                                        r"\[-1,3,-1,-1\].*got a float64 array of shape \(1, 3, 8, 8\)"):
        s.run({"x": good.astype(np.float64)})
    with pytest.raises(ebb.InvalidArgument, match=r"input 'x' of model 'convnet' must have shape \[-1,3,-1,-1\]"
                                                  r" \(-1 = any\), got \[1,2,8,8\]") as err:
        s.run({"x": image_input(8, 8, channels=2)})
    assert isinstance(err.value, ValueError)
    with pytest.raises(ebb.InvalidArgument, match=r"has no input named 'image' \(its inputs: x\)"):
        s.run({"image": good})
    with pytest.raises(ebb.InvalidArgument, match="needs input 'x', which is missing"):
        s.run({})
    with pytest.raises(ValueError, match=r"input 'x' .* must be a C-contiguous.*numpy.ascontiguousarray"):
        s.run({"x": image_input(8, 16)[..., ::2]})
    with pytest.raises(TypeError, match=r"input 'x' .* must be a numpy.ndarray of float32 .*; got list"):
        s.run({"x": good.tolist()})
    with pytest.raises(TypeError, match="inputs must be a dict"):
        s.run([good])
    with pytest.raises(TypeError, match="outputs must be None or a list"):
        s.run({"x": good}, outputs="y")
    with pytest.raises(ebb.InvalidArgument, match="has no output named 'z'"):
        s.run({"x": good}, outputs=["z"])
    # Nothing was lost: the session still runs.
    assert s.run({"x": good})["y"].shape == (1, 3, 8, 8)


# --- images ---------------------------------------------------------------------------------


def test_images_round_trip(tmp_path):
    img = ebb.read_image(FIXTURES / "astronaut_96.png")
    assert img.dtype == np.uint8 and img.shape == (96, 96, 3)
    ebb.write_png(tmp_path / "copy.png", img)
    assert np.array_equal(ebb.read_image(tmp_path / "copy.png"), img)
    t = ebb.image_to_tensor(img, 3)
    assert t.dtype == np.float32 and t.shape == (1, 3, 96, 96)
    np.testing.assert_allclose(t[0, :, 5, 7], img[5, 7] / 255.0, rtol=1e-6)
    assert np.array_equal(ebb.tensor_to_image(t), img)
    ebb.write_png(tmp_path / "tensor.png", t)
    assert np.array_equal(ebb.read_image(tmp_path / "tensor.png"), img)
    gray = img[:, :, 0].copy()
    ebb.write_png(tmp_path / "gray.png", gray)
    assert ebb.read_image(tmp_path / "gray.png").shape == (96, 96, 1)


def test_image_errors(tmp_path):
    with pytest.raises(ebb.NotFound):
        ebb.read_image(tmp_path / "none.png")
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 20)
    with pytest.raises(ebb.InvalidArgument, match="bad.png"):
        ebb.read_image(bad)
    with pytest.raises(TypeError, match="uint8 image"):
        ebb.write_png(tmp_path / "x.png", np.zeros((4, 4, 3), np.int32))
    with pytest.raises(ebb.InvalidArgument):
        ebb.write_png(tmp_path / "x.png", np.zeros((4, 4, 2), np.uint8))


# --- model folders ---------------------------------------------------------------------------


def test_read_model_config_is_the_library_reader(tmp_path):
    assert ebb.read_model_config(MODELS / "waifu2x_scale2x") == {
        "kind": "image_to_image", "pinned": False, "scale": 2,
        "tile": {"size": 128, "overlap": 8, "tiles_per_run": 1}}
    assert ebb.read_model_config(tmp_path) == {"kind": "tensor", "pinned": False}  # no config.json: defaults
    (tmp_path / "config.json").write_text('{"kind": "image_to_image", "device": "cpu", "keep_alive_ms": 0}')
    assert ebb.read_model_config(str(tmp_path)) == {"kind": "image_to_image", "pinned": False, "device": "cpu",
                                                    "keep_alive_ms": 0}
    (tmp_path / "config.json").write_text('{"kind": "image_to_image", "tiles": {}}')
    with pytest.raises(ebb.InvalidArgument, match=r"config\.json.*unknown key 'config\.tiles'"):
        ebb.read_model_config(tmp_path)
    (tmp_path / "config.json").write_text('{"tile": {"size": 16, "overlap": 8}}')
    with pytest.raises(ebb.InvalidArgument):  # no core left: the library's tile plan refuses it
        ebb.read_model_config(tmp_path)
    with pytest.raises(TypeError, match="folder must be a str"):
        ebb.read_model_config(3)


def test_string_tensors(runtime):
    # ONNX strings (BYTES) in and out: bytes or str elements in, an object array of bytes out.
    session = runtime.load(model("strings"))
    text = np.array([["apple", "banana", "kiwi"], [b"cherry", b"", "caf\u00e9"]], dtype=object)
    out = session.run({"text": text})
    assert out["echo"].dtype == object
    assert out["echo"].shape == (2, 3)
    assert out["echo"].tolist() == [[b"apple", b"banana", b"kiwi"], [b"cherry", b"", "caf\u00e9".encode()]]
    assert out["id"].tolist() == [[0, 1, -1], [2, -1, -1]]
    with pytest.raises(TypeError, match="bytes or str elements"):
        session.run({"text": np.zeros((1, 1), dtype=np.float32)})
    with pytest.raises(TypeError, match="bytes or str elements"):
        session.run({"text": np.array([[1]], dtype=object)})
