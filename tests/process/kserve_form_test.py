"""KServe's single-model form of `ebb serve`: `--model-name m --model-dir DIR` (DIR as KServe mounts
it at /mnt/models) answers the v2 health, metadata and inference calls over HTTP and gRPC under
the name `m`, and is ready only once the model is loaded; a model with external data works there
too. Run by ctest with EBB_BINARY, EBB_MODELS_DIR and EBB_GRPC_PYTHON.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import urllib.error
import urllib.request

import grpc
import numpy as np
import pytest
from serve_process import ServeProcess

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import make_test_models  # noqa: E402  (the external-data models)
sys.path.insert(0, os.environ["EBB_GRPC_PYTHON"])
import grpc_service_pb2 as pb  # noqa: E402
import grpc_service_pb2_grpc as pb_grpc  # noqa: E402

EBB = os.environ["EBB_BINARY"]
MODELS = os.environ["EBB_MODELS_DIR"]


class Server(ServeProcess):
    def __init__(self, *args):
        self.loaded = threading.Event()
        super().__init__(EBB, *args, on_line=lambda line: "loaded, ready" in line and self.loaded.set())
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}")
        self.v2 = pb_grpc.GRPCInferenceServiceStub(self.channel)

    def http(self, path, body=None):
        request = urllib.request.Request(f"http://127.0.0.1:{self.http_port}{path}",
                                         data=json.dumps(body).encode() if body is not None else None,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=60) as reply:
                return reply.status, json.loads(reply.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"null")

    def stop(self):
        self.channel.close()
        self.proc.terminate()
        return self.proc.wait(timeout=60)


@pytest.fixture()
def tmp():
    folder = tempfile.mkdtemp(prefix="ebb_kserve_")
    yield folder
    shutil.rmtree(folder)


def mount(tmp, layout):
    """A folder as KServe mounts the model: {relative path: bundled model name}."""
    folder = os.path.join(tmp, "mnt", "models")
    for relative, model in layout.items():
        os.makedirs(os.path.dirname(os.path.join(folder, relative)), exist_ok=True)
        shutil.copyfile(os.path.join(MODELS, model, "model.onnx"), os.path.join(folder, relative))
    return folder


def check_serves_tiny_as_m(s, version="1"):
    assert s.loaded.wait(60), s.lines
    # HTTP: health, server and model metadata, inference.
    assert s.http("/v2/health/live")[0] == 200
    assert s.http("/v2/health/ready")[0] == 200
    assert s.http("/v2/models/m/ready")[0] == 200
    status, meta = s.http("/v2/models/m")
    assert status == 200 and meta["name"] == "m" and meta["versions"] == [version]
    (inp,) = meta["inputs"]
    x = np.arange(64, dtype=np.float32).reshape(1, 64) / 64
    status, reply = s.http("/v2/models/m/infer", {"inputs": [{"name": inp["name"], "shape": [1, 64],
                                                              "datatype": "FP32", "data": x.ravel().tolist()}]})
    assert status == 200 and reply["model_name"] == "m", reply
    http_out = np.array(reply["outputs"][0]["data"], dtype=np.float32)
    # gRPC: the same calls.
    assert s.v2.ServerLive(pb.ServerLiveRequest()).live
    assert s.v2.ServerReady(pb.ServerReadyRequest()).ready
    assert s.v2.ModelReady(pb.ModelReadyRequest(name="m")).ready
    gmeta = s.v2.ModelMetadata(pb.ModelMetadataRequest(name="m"))
    assert gmeta.name == "m" and list(gmeta.versions) == [version]
    request = pb.ModelInferRequest(model_name="m")
    request.inputs.add(name=inp["name"], datatype="FP32", shape=[1, 64])
    request.raw_input_contents.append(x.tobytes())
    reply = s.v2.ModelInfer(request)
    assert reply.model_name == "m"
    grpc_out = np.frombuffer(reply.raw_output_contents[0], dtype=np.float32)
    np.testing.assert_array_equal(grpc_out, http_out)
    # Only that model: the repository index lists it alone; other names are unknown.
    status, index = s.http("/v2/repository/index", {})
    assert status == 200 and [e["name"] for e in index] == ["m"]
    assert s.http("/v2/models/tiny")[0] == 404


def test_model_onnx(tmp):
    s = Server("--model-name", "m", "--model-dir", mount(tmp, {"model.onnx": "tiny"}))
    try:
        check_serves_tiny_as_m(s)
    finally:
        assert s.stop() == 0


def test_one_onnx_file_and_version_folders(tmp):
    s = Server("--model-name", "m", "--model-dir", mount(tmp, {"mnist-like.onnx": "tiny"}))
    try:
        check_serves_tiny_as_m(s)
    finally:
        assert s.stop() == 0
    shutil.rmtree(os.path.join(tmp, "mnt"))
    s = Server("--model-name", "m", "--model-dir", mount(tmp, {"1/model.onnx": "convnet", "2/model.onnx": "tiny"}))
    try:
        check_serves_tiny_as_m(s, version="2")
    finally:
        assert s.stop() == 0


def check_serves_matmul_as_m(model_dir, version):
    s = Server("--model-name", "m", "--model-dir", model_dir)
    try:
        assert s.loaded.wait(60), s.lines
        status, reply = s.http("/v2/models/m/infer", {"inputs": [{"name": "x", "shape": [1, 64], "datatype": "FP32",
                                                                 "data": [1.0] * 64}]})
        assert status == 200 and reply["outputs"][0]["data"] == [32.0] * 64, reply
        assert reply["model_version"] == version
    finally:
        assert s.stop() == 0


def test_external_data_beside_the_model(tmp):
    # The model with its weights in weights.bin beside it, as onnx saves external data: as the one
    # .onnx file of the mount, and in a version folder.
    model = make_test_models.make_matmul(64, 0.5)
    mounted = os.path.join(tmp, "mnt", "models")
    path = make_test_models.write_external(model, os.path.dirname(mounted), "models", quiet=True)
    os.rename(path, os.path.join(mounted, "mnist-like.onnx"))
    check_serves_matmul_as_m(mounted, "1")
    versions = os.path.join(tmp, "versions")
    make_test_models.write_external(model, versions, "2", quiet=True)
    check_serves_matmul_as_m(versions, "2")
    # Weights that are not there: the process says which file and exits non-zero.
    os.remove(os.path.join(versions, "2", "weights.bin"))
    result = subprocess.run([EBB, "serve", "--model-name", "m", "--model-dir", versions, "--port", "0",
                             "--grpc-port", "-1"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "external-data file 'weights.bin'" in result.stderr, result.stderr
    assert "does not exist" in result.stderr


def test_not_ready_until_loaded(tmp):
    # A 100 MB model loads for about a second here (its optimized form written on the way):
    # the ports answer at once, live but not ready, and ready once it is loaded.
    folder = os.path.join(tmp, "mnt", "models")
    os.makedirs(folder)
    shutil.copyfile(os.path.join(os.environ["EBB_GENERATED_MODELS_DIR"], "conv_100mb", "model.onnx"),
                    os.path.join(folder, "model.onnx"))
    env_cache = os.path.join(tmp, "cache")
    os.environ["EBB_CACHE_DIR"] = env_cache  # a fresh cache: a first load
    try:
        s = Server("--model-name", "big", "--model-dir", folder)
    finally:
        os.environ.pop("EBB_CACHE_DIR")
    try:
        assert s.http("/v2/health/live")[0] == 200
        assert s.http("/v2/health/ready")[0] == 503
        assert not s.v2.ServerReady(pb.ServerReadyRequest()).ready
        assert s.loaded.wait(120), s.lines
        assert s.http("/v2/health/ready")[0] == 200
        assert s.v2.ServerReady(pb.ServerReadyRequest()).ready
        assert s.v2.ModelReady(pb.ModelReadyRequest(name="big")).ready
    finally:
        assert s.stop() == 0


def test_bad_folders_fail_clearly(tmp):
    # A model that does not load: never ready, and the process says why and exits non-zero.
    folder = os.path.join(tmp, "broken")
    os.makedirs(folder)
    with open(os.path.join(folder, "model.onnx"), "w") as f:
        f.write("not a model")
    result = subprocess.run([EBB, "serve", "--model-name", "m", "--model-dir", folder, "--port", "0",
                             "--grpc-port", "-1"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 1 and "did not load" in result.stderr
    os.makedirs(os.path.join(tmp, "empty"))
    for args, message in [(["--model-dir", os.path.join(tmp, "empty")], "holds no model"),
                          (["--model-dir", os.path.join(tmp, "nothing")], "does not exist"),
                          ([], "--model-dir")]:
        result = subprocess.run([EBB, "serve", "--model-name", "m", *args, "--port", "0"], capture_output=True,
                                text=True, timeout=60)
        assert result.returncode != 0 and message in result.stderr, (args, result.stderr)
