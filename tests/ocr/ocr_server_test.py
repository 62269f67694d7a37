"""The OCR pipeline as a model of `ebb serve` (server/core/ocr_model.h): a page's text over HTTP
(KServe v2 JSON with the binary tensor extension, as tritonclient.http sends BYTES) and over gRPC
(requests built field for field as tritonclient.grpc builds them, tests/process/grpc_test.py), empty
outputs for a page with no text, invalid_argument naming a non-image, and switching between OCR
and a 100 MB model under a budget that holds one of them, 4 clients at once.

Run by ctest with EBB_BINARY, EBB_MODELS_DIR, EBB_GENERATED_MODELS_DIR and EBB_GRPC_PYTHON.
"""

import io
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request

import grpc
import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "process"))  # serve_process
sys.path.insert(0, HERE)
sys.path.insert(0, os.environ["EBB_GRPC_PYTHON"])
import grpc_service_pb2 as pb  # noqa: E402
import grpc_service_pb2_grpc as pb_grpc  # noqa: E402
import render_pages  # noqa: E402
from ocr_accuracy_test import edit_distance, normalise  # noqa: E402
from PIL import Image  # noqa: E402
from serve_process import ServeProcess as BaseServeProcess  # noqa: E402
from triton_bytes import deserialize_bytes, serialize_bytes  # noqa: E402

EBB = os.environ["EBB_BINARY"]
MODELS = os.environ["EBB_MODELS_DIR"]
GENERATED = os.environ["EBB_GENERATED_MODELS_DIR"]
MiB = 1 << 20


class ServeProcess(BaseServeProcess):
    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(timeout=120)
        self.drain.join(timeout=10)
        return code


def place(src, dst):
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


@pytest.fixture(scope="module")
def repository():
    tmp = tempfile.mkdtemp()
    for part in ("ppocr_det", "ppocr_cls", "ppocr_rec"):
        place(os.path.join(MODELS, part, "model.onnx"), os.path.join(tmp, part, "model.onnx"))
    for f in ("config.json", "keys.txt"):
        place(os.path.join(MODELS, "ocr", f), os.path.join(tmp, "ocr", f))
    place(os.path.join(GENERATED, "conv_100mb", "model.onnx"), os.path.join(tmp, "conv_100mb", "model.onnx"))
    yield tmp
    shutil.rmtree(tmp)


def png_bytes(img):
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()


@pytest.fixture(scope="module")
def page():
    import random
    img, lines = render_pages.render(random.Random(7), 1000, 700, [22, 30], 8)
    return png_bytes(img), lines


def http_ocr(port, images, timeout=120):
    """As tritonclient.http sends a BYTES input: binary data after the JSON header; JSON outputs."""
    raw = serialize_bytes(images)
    header = json.dumps({"inputs": [{"name": "image", "shape": [len(images)], "datatype": "BYTES",
                                     "parameters": {"binary_data_size": len(raw)}}]}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v2/models/ocr/infer", data=header + raw,
                                     headers={"Inference-Header-Content-Length": str(len(header))})
    with urllib.request.urlopen(request, timeout=timeout) as reply:
        return {o["name"]: o for o in json.loads(reply.read())["outputs"]}


def grpc_ocr(port, images):
    request = pb.ModelInferRequest(model_name="ocr")
    request.inputs.add(name="image", datatype="BYTES", shape=[len(images)])
    request.raw_input_contents.append(serialize_bytes(images))
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        response = pb_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request, timeout=120)
    return {o.name: (o.datatype, list(o.shape), raw) for o, raw in zip(response.outputs, response.raw_output_contents)}


def library_text(png):
    """What `ebb ocr` (the library, in-process) reads on the page: the server must answer the same."""
    with tempfile.NamedTemporaryFile(suffix=".png") as f:
        f.write(png)
        f.flush()
        out = subprocess.run([EBB, "ocr", "--models", MODELS, "--json", f.name], check=True, capture_output=True,
                             text=True)
    return [line["text"] for line in json.loads(out.stdout)[0]["lines"]]


def cer(expected_lines, got_lines):
    """Over every character, spaces included, the lines joined by newlines (as the accuracy test counts
    it): that the page's text came through, line by line."""
    expected = "\n".join(expected_lines)
    return edit_distance(expected, normalise("\n".join(got_lines))) / len(expected)


def test_page_text_over_http_and_grpc(repository, page):
    png, lines = page
    s = ServeProcess(EBB, "--repository", repository)
    try:
        out = http_ocr(s.http_port, [png])
        text = out["text"]["data"]
        assert text == library_text(png)
        assert cer(lines, text) <= 0.02, (lines, text)
        n = len(text)
        assert out["boxes"]["shape"] == [n, 4, 2] and out["confidence"]["shape"] == [n]
        assert all(0 < c <= 1 for c in out["confidence"]["data"])
        got = grpc_ocr(s.grpc_port, [png])
        assert [t.decode() for t in deserialize_bytes(got["text"][2])] == text
        assert got["boxes"][:2] == ("FP32", [n, 4, 2]) and got["confidence"][:2] == ("FP32", [n])
        assert np.allclose(np.frombuffer(got["boxes"][2], dtype=np.float32), out["boxes"]["data"])

        # Two images in one request: their lines one after another, `image` telling whose.
        blank = png_bytes(Image.new("RGB", (320, 240), "white"))
        two = http_ocr(s.http_port, [blank, png, blank])
        assert two["text"]["data"] == text and two["image"]["data"] == [1] * n
        # A page without text: empty outputs, not an error.
        empty = grpc_ocr(s.grpc_port, [blank])
        assert empty["text"][1] == [0] and empty["boxes"][1] == [0, 4, 2] and empty["confidence"][1] == [0]

        # Not an image: invalid_argument naming the element; the server keeps serving.
        with pytest.raises(grpc.RpcError) as e:
            grpc_ocr(s.grpc_port, [png, b"this is not an image"])
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "element 1" in e.value.details()
        with pytest.raises(urllib.error.HTTPError) as h:
            http_ocr(s.http_port, [b"GIF89a..."])
        assert h.value.code == 400 and "element 0" in h.value.read().decode()
        assert http_ocr(s.http_port, [png])["text"]["data"] == text
    finally:
        assert s.stop() == 0


def test_switching_with_a_100_mb_model_under_a_budget_for_one(repository, page):
    """OCR and conv_100mb alternate, 4 clients at once, under a budget that holds only one of them:
    every request succeeds (no failure, no false out-of-memory)."""
    if os.environ.get("EBB_RSS_BOUNDS_HOLD", "1") != "1":
        pytest.skip("the budget's charges are RSS, which a sanitizer's allocator inflates many times "
                    "(as modelmesh_test's budget tests skip there)")
    png, lines = page
    budget = 300 * MiB  # conv_100mb is charged about 200 MiB loaded, the OCR pipeline about 120 MiB
    s = ServeProcess(EBB, "--repository", repository, "--memory-budget", str(budget), "--no-load",
                     "--wait-for-capacity-ms", "60000")
    errors = []
    x = np.random.default_rng(1).random((1, 3, 64, 64), dtype=np.float32)
    header = json.dumps({"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                                     "parameters": {"binary_data_size": x.nbytes}}],
                         "parameters": {"binary_data_output": True}}).encode()

    def conv():
        request = urllib.request.Request(f"http://127.0.0.1:{s.http_port}/v2/models/conv_100mb/infer",
                                         data=header + x.tobytes(),
                                         headers={"Inference-Header-Content-Length": str(len(header))})
        with urllib.request.urlopen(request, timeout=120) as reply:
            assert reply.status == 200

    def client(k):
        try:
            for i in range(4):
                if (i + k) % 2 == 0:
                    assert cer(lines, http_ocr(s.http_port, [png])["text"]["data"]) <= 0.02
                else:
                    conv()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(repr(e))

    try:
        threads = [threading.Thread(target=client, args=(k,)) for k in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
    finally:
        assert s.stop() == 0
