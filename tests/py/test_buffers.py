"""The package without NumPy (run with EBB_NUMPY=0, as in an interpreter that has none): any buffer-protocol
object in (bytes, bytearray, array.array, memoryview, ebb.Tensor), read in place; ebb.Tensor out, a view of
the memory ebb made for the result (shape, type, a memoryview with format and shape). The values equal the
NumPy path's (computed here by the same library in the same process: NumPy is only a reader of them)."""
import array
import gc

import numpy as np
import pytest

import ebb
from conftest import FIXTURES, image_input, input_views, model


def test_numpy_is_off():
    from ebb import _tensors
    assert _tensors.np is None


def test_buffers_in_tensor_out_equal_numpy(runtime):
    s = runtime.load(model("convnet"))
    x = image_input(16, 16)
    flat = array.array("f", x.ravel().tolist())
    shaped = memoryview(flat).cast("B").cast("f", x.shape)
    views = input_views(s, {"x": shaped})
    assert views["x"][0] and views["x"][1] == flat.buffer_info()[0]  # read in place, no copy
    out = s.run({"x": shaped})["y"]
    assert isinstance(out, ebb.Tensor) and out.type == "FP32" and out.format == "f"
    expected = np.frombuffer(out.tobytes(), np.float32).reshape(out.shape)
    assert out.shape[0] == 1 and out.data.shape == out.shape and out.nbytes == expected.nbytes
    # bytes and bytearray of the same data, shaped by a memoryview cast
    for buf in (bytes(shaped), bytearray(bytes(shaped))):
        again = s.run({"x": memoryview(buf).cast("f", x.shape)})["y"]
        assert again.tobytes() == out.tobytes()
    # an output is an input too, read in place
    tiny = runtime.load(model("tiny"))
    y = tiny.run({"x": array.array("f", [1.0] * 64)})["y"]  # a flat buffer takes the model's static shape [1,64]
    assert y.shape == (1, 64)
    z = tiny.run({"x": y})["y"]
    assert z.shape == (1, 64) and len(z.tolist()[0]) == 64


def test_outputs_own_their_memory_and_free_it(runtime):
    s = runtime.load(model("convnet"))
    x = memoryview(bytearray(4 * 3 * 8 * 8)).cast("f", (1, 3, 8, 8))
    out = s.run({"x": x})["y"]
    view = out.data
    del out
    gc.collect()
    view[0, 0, 0, 0] = 2.5  # the memoryview keeps ebb's tensor alive
    assert view[0, 0, 0, 0] == 2.5


def test_wrong_buffers_say_what_the_model_expects(runtime):
    s = runtime.load(model("convnet"))
    with pytest.raises(TypeError, match=r"input 'x' of model 'convnet' must be float32 \(FP32\).*format 'd'"):
        s.run({"x": memoryview(array.array("d", [0.0] * 48)).cast("B").cast("d", (1, 3, 4, 4))})
    with pytest.raises(TypeError, match="flat buffer"):
        s.run({"x": array.array("f", [0.0] * 48)})  # convnet's shape is dynamic: a flat buffer needs one
    with pytest.raises(TypeError, match="buffer protocol"):
        s.run({"x": [0.0] * 48})
    with pytest.raises(ebb.InvalidArgument, match="must have shape"):
        s.run({"x": memoryview(bytearray(4 * 8)).cast("f", (1, 8))})


def test_images_and_ready_made_operations_without_numpy(runtime):
    image = ebb.read_image(FIXTURES / "astronaut_96.png")
    assert isinstance(image, ebb.Tensor) and image.type == "UINT8" and image.shape == (96, 96, 3)
    up = runtime.load(model("waifu2x_scale2x"))
    out = runtime.run_tiled(up, [image], tile=64, overlap=8)
    assert isinstance(out[0], ebb.Tensor) and out[0].shape == (192, 192, 3) and out[0].type == "UINT8"
    tensor = ebb.image_to_tensor(image)
    assert tensor.shape == (1, 3, 96, 96) and ebb.tensor_to_image(tensor).tobytes() == image.tobytes()


def test_strings_without_numpy(runtime):
    s = runtime.load(model("strings"))
    out = s.run({"text": [["apple", "banana", "kiwi"], [b"cherry", b"", "caf\u00e9"]]})
    assert out["echo"].type == "BYTES" and out["echo"].shape == (2, 3)
    assert out["echo"].tolist() == [b"apple", b"banana", b"kiwi", b"cherry", b"", "caf\u00e9".encode()]
    assert out["id"].tolist() == [[0, 1, -1], [2, -1, -1]]
