"""Black-box tests of the gRPC front end of `ebb serve` (inference.GRPCInferenceService and
grpc.health.v1.Health), with Debian's python3-grpcio and stubs generated from ebb's .proto files
during the build.

The requests are built the way the Triton Python client (tritonclient.grpc) builds them, since
that client cannot be installed here: every input's data in raw_input_contents
(InferInput.set_data_from_numpy: tobytes(), or for BYTES serialize_byte_tensor: each element as
a 4-byte little-endian length, then its bytes), model_version "" unless given, requested outputs
with parameters["classification"].int64_param = K (InferRequestedOutput(name, class_count=K)),
load_model with parameters["config"].string_param, unload_model with
parameters["unload_dependents"].bool_param (tritonclient/grpc/_infer_input.py,
_requested_output.py, _utils.py, _client.py). The typed `contents` form is tested as well.

Run by ctest (tests/CMakeLists.txt) with EBB_BINARY, EBB_MODELS_DIR and EBB_GRPC_PYTHON (the
generated stubs) in the environment.
"""

import gzip
import json
import os
import shutil
import signal
import socket
import struct
import sys
import tempfile
import threading
import time
import urllib.request

import grpc
import numpy as np
import pytest
from h2_stall import StalledClient
from serve_process import ServeProcess
from triton_bytes import deserialize_bytes, serialize_bytes

sys.path.insert(0, os.environ["EBB_GRPC_PYTHON"])
import grpc_service_pb2 as pb  # noqa: E402
import grpc_service_pb2_grpc as pb_grpc  # noqa: E402
import health_pb2  # noqa: E402
import health_pb2_grpc  # noqa: E402
import model_config_pb2  # noqa: E402

EBB = os.environ["EBB_BINARY"]
MODELS = os.environ["EBB_MODELS_DIR"]
TEST_MODELS = os.environ["EBB_TEST_MODELS_DIR"]  # identity, halves
SERVICE = "inference.GRPCInferenceService"
MAX_BODY = 80_000_000
MiB = 1 << 20
# RSS bounds hold only without a sanitizer (tests/CMakeLists.txt; tests/test_util.h: kRssBoundsHold).
RSS_BOUNDS_HOLD = os.environ.get("EBB_RSS_BOUNDS_HOLD", "1") == "1"


# --- Set-up ---------------------------------------------------------------------------------

def copy_model(model, folder):
    os.makedirs(folder, exist_ok=True)
    source = TEST_MODELS if model in ("identity", "halves", "zeros", "spin") else MODELS
    shutil.copyfile(os.path.join(source, model, "model.onnx"), os.path.join(folder, "model.onnx"))


def make_repository(tmp):
    """The bundled models the tests use, a versioned copy of tiny, a broken model and a link out."""
    root = os.path.join(tmp, "repo")
    for model in ["tiny", "mixed", "strings", "identity", "halves", "convnet", "zeros", "spin"]:
        copy_model(model, os.path.join(root, model))
    copy_model("mixed", os.path.join(root, "labelled"))
    with open(os.path.join(root, "labelled", "labels.txt"), "w") as f:
        f.write("zero\none\ntwo\nthree\n")
    copy_model("tiny", os.path.join(root, "vtiny", "1"))
    with open(os.path.join(MODELS, "tiny", "model.onnx"), "rb") as f:
        tiny = f.read()
    os.makedirs(os.path.join(root, "vtiny", "3"))
    with open(os.path.join(root, "vtiny", "3", "model.onnx"), "wb") as f:
        f.write(tiny + b"\x32\x02v3")  # a doc_string appended: other bytes, the same model
    os.makedirs(os.path.join(root, "broken"))
    with open(os.path.join(root, "broken", "model.onnx"), "w") as f:
        f.write("not a model")
    copy_model("tiny", os.path.join(tmp, "outside", "escape"))
    os.symlink(os.path.join(tmp, "outside", "escape"), os.path.join(root, "escape"))
    return root


class Server(ServeProcess):
    """`ebb serve` as a child process on free loopback ports (HTTP and gRPC)."""

    def __init__(self, repository, *args):
        super().__init__(EBB, "--repository", repository, *args)

    def channel(self):
        channel = grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}", options=[
            ("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)])
        grpc.channel_ready_future(channel).result(timeout=30)
        return channel

    def stub(self):
        return pb_grpc.GRPCInferenceServiceStub(self.channel())

    def http(self, path, body=None):
        request = urllib.request.Request(f"http://127.0.0.1:{self.http_port}{path}", data=body,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=120) as reply:
                return reply.status, reply.read(), dict(reply.headers)
        except urllib.error.HTTPError as e:
            return e.code, e.read(), dict(e.headers)

    def metric(self, sample):
        _, text, _ = self.http("/metrics")
        for line in text.decode().splitlines():
            if line.startswith(sample + " "):
                return float(line.split()[-1])
        return 0.0

    def status(self, key="VmRSS"):
        """VmRSS or VmHWM of the server, in bytes."""
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) * 1024
        raise AssertionError(f"no {key}")

    def reset_peak(self):
        """Starts VmHWM afresh at the current RSS (proc(5), clear_refs)."""
        with open(f"/proc/{self.proc.pid}/clear_refs", "w") as f:
            f.write("5")

    def raw_infer(self, message, compression=None, timeout=60):
        """ModelInfer with `message` as the serialized request, as it is: (code, details)."""
        with grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}", options=[
                ("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]) as channel:
            call = channel.unary_unary(f"/{SERVICE}/ModelInfer", request_serializer=lambda b: b,
                                       response_deserializer=lambda b: b)
            try:
                call(message, timeout=timeout, compression=compression)
                return grpc.StatusCode.OK, ""
            except grpc.RpcError as e:
                return e.code(), e.details()

    def stop(self, sig=signal.SIGTERM):
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout=120)
        self.drain.join(timeout=10)
        return code


@pytest.fixture(scope="module")
def repository():
    tmp = tempfile.mkdtemp(prefix="ebb_grpc_")
    yield make_repository(tmp)
    shutil.rmtree(tmp)


@pytest.fixture(scope="module")
def server(repository):
    # Compressed requests accepted, to test what the scan does with an inflated message; the default
    # (refused) has a test of its own. --confine-links: the repository's link out ("escape") is refused.
    s = Server(repository, "--max-body-bytes", str(MAX_BODY), "--grpc-compressed-requests", "--confine-links")
    yield s
    assert s.stop() == 0


# --- Requests built as tritonclient builds them ------------------------------------------------

def infer_request(model, inputs, outputs=(), version="", request_id="", parameters=None):
    """inputs: [(name, datatype, shape, raw bytes)]; outputs: [(name, class_count)]."""
    request = pb.ModelInferRequest(model_name=model, model_version=version, id=request_id)
    for name, datatype, shape, raw in inputs:
        request.inputs.add(name=name, datatype=datatype, shape=list(shape))
        request.raw_input_contents.append(raw)
    for name, class_count in outputs:
        out = request.outputs.add(name=name)
        if class_count:
            out.parameters["classification"].int64_param = class_count
    for key, value in (parameters or {}).items():
        request.parameters[key].int64_param = value
    return request


def outputs_of(response):
    """{name: (datatype, shape, raw bytes)}."""
    return {o.name: (o.datatype, list(o.shape), raw) for o, raw in zip(response.outputs, response.raw_output_contents)}


def mixed_inputs():
    a = np.array([[1.5, 9, 3, 4], [5, 6, 7, 8]], dtype=np.float32)
    b = np.array([[1, 2, 3, 4], [50, 6, 7, 8]], dtype=np.int64)
    c = np.array([[0, 1, 2, 3], [0, 1, 2, 3]], dtype=np.uint8)
    flag = np.array([[True, False, True, False], [False, False, True, True]])
    return a, b, c, flag


def mixed_request(**kwargs):
    a, b, c, flag = mixed_inputs()
    return infer_request("mixed", [("a", "FP32", a.shape, a.tobytes()), ("b", "INT64", b.shape, b.tobytes()),
                                   ("c", "UINT8", c.shape, c.tobytes()), ("flag", "BOOL", flag.shape, flag.tobytes())],
                         **kwargs)


def mixed_expected():
    a, b, c, flag = mixed_inputs()
    return {"sum": a + b.astype(np.float32) + c.astype(np.float32), "b2": b * 2, "nflag": ~flag,
            "d": a.astype(np.float64)}


# Every element type ebb serves: (input suffix, datatype, numpy type, typed contents field, values).
TYPES = [
    ("bool", "BOOL", np.bool_, "bool_contents", [True, False, True, True, False, False]),
    ("uint8", "UINT8", np.uint8, "uint_contents", [0, 255, 1, 254, 42, 7]),
    ("uint16", "UINT16", np.uint16, "uint_contents", [0, 65535, 1, 65534, 42, 7]),
    ("uint32", "UINT32", np.uint32, "uint_contents", [0, 2**32 - 1, 1, 2**32 - 2, 42, 7]),
    ("uint64", "UINT64", np.uint64, "uint64_contents", [0, 2**64 - 1, 1, 2**64 - 2, 42, 7]),
    ("int8", "INT8", np.int8, "int_contents", [-128, 127, 0, -1, 42, 7]),
    ("int16", "INT16", np.int16, "int_contents", [-32768, 32767, 0, -1, 42, 7]),
    ("int32", "INT32", np.int32, "int_contents", [-2**31, 2**31 - 1, 0, -1, 42, 7]),
    ("int64", "INT64", np.int64, "int64_contents", [-2**63, 2**63 - 1, 0, -1, 42, 7]),
    ("fp32", "FP32", np.float32, "fp32_contents", [0.1, -0.0, 3.4028235e38, -3.4028235e38, 1e-45, 1 / 3]),
    ("fp64", "FP64", np.float64, "fp64_contents", [0.1, -0.0, 1.7976931348623157e308, -1.0, 5e-324, 1 / 3]),
]
STRINGS = [b"apple", b"", b"with\x00nul", "ünïcode".encode(), b"\xff\xfe not utf-8", b"x" * 300]


# --- Every RPC -----------------------------------------------------------------------------

def test_health_and_metadata_rpcs(server):
    stub = server.stub()
    assert stub.ServerLive(pb.ServerLiveRequest()).live
    assert stub.ServerReady(pb.ServerReadyRequest()).ready
    meta = stub.ServerMetadata(pb.ServerMetadataRequest())
    assert meta.name == "ebb"
    for e in ["binary_tensor_data", "classification", "model_configuration", "model_repository", "statistics"]:
        assert e in meta.extensions
    model = stub.ModelMetadata(pb.ModelMetadataRequest(name="mixed"))
    assert model.name == "mixed" and list(model.versions) == ["1"] and model.platform == "onnxruntime_onnx"
    assert [(t.name, t.datatype, list(t.shape)) for t in model.inputs] == [
        ("a", "FP32", [-1, 4]), ("b", "INT64", [-1, 4]), ("c", "UINT8", [-1, 4]), ("flag", "BOOL", [-1, 4])]
    assert [t.datatype for t in model.outputs] == ["FP32", "INT64", "BOOL", "FP64"]
    strings = stub.ModelMetadata(pb.ModelMetadataRequest(name="strings"))
    assert strings.inputs[0].datatype == "BYTES"
    # The same as over HTTP.
    status, body, _ = server.http("/v2/models/mixed")
    http = json.loads(body)
    assert status == 200 and [t["shape"] for t in http["inputs"]] == [list(t.shape) for t in model.inputs]
    assert stub.ModelReady(pb.ModelReadyRequest(name="mixed")).ready
    assert stub.ModelReady(pb.ModelReadyRequest(name="vtiny", version="3")).ready


def test_health_service(server):
    health = health_pb2_grpc.HealthStub(server.channel())
    serving = health_pb2.HealthCheckResponse.SERVING
    assert health.Check(health_pb2.HealthCheckRequest(service="")).status == serving
    assert health.Check(health_pb2.HealthCheckRequest(service=SERVICE)).status == serving
    with pytest.raises(grpc.RpcError) as e:
        health.Check(health_pb2.HealthCheckRequest(service="no.such.Service"))
    assert e.value.code() == grpc.StatusCode.NOT_FOUND


def test_health_watch_of_unknown_service(server):
    """Watch answers SERVICE_UNKNOWN for a name it does not know (the protocol), and the stream stays open."""
    health = health_pb2_grpc.HealthStub(server.channel())
    watch = health.Watch(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=30)
    assert next(watch).status == health_pb2.HealthCheckResponse.SERVICE_UNKNOWN
    watch.cancel()
    watch = health.Watch(health_pb2.HealthCheckRequest(service=SERVICE), timeout=30)
    assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
    watch.cancel()
    assert health.Check(health_pb2.HealthCheckRequest(service="")).status == \
        health_pb2.HealthCheckResponse.SERVING


def test_no_callback_threads(server):
    """Every method is served from ebb's completion queue (server/grpc/async_call.h): one callback method
    (gRPC's own health service has two) would start gRPC's callback threads ("nexting_thread"), which poll
    the sockets too and cost every call thread hops (docs/performance.md, "gRPC, 2026-12-02")."""
    stub = server.stub()
    assert stub.ServerLive(pb.ServerLiveRequest()).live
    health = health_pb2_grpc.HealthStub(server.channel())
    assert health.Check(health_pb2.HealthCheckRequest(service="")).status == \
        health_pb2.HealthCheckResponse.SERVING
    names = []
    for task in os.listdir(f"/proc/{server.proc.pid}/task"):
        with open(f"/proc/{server.proc.pid}/task/{task}/comm") as f:
            names.append(f.read().strip())
    assert names and not [n for n in names if n.startswith("nexting")], names


def test_model_config_rpc(server):
    stub = server.stub()
    config = stub.ModelConfig(pb.ModelConfigRequest(name="mixed")).config
    assert (config.name, config.platform, config.backend, config.max_batch_size) == (
        "mixed", "onnxruntime_onnx", "onnxruntime", 0)
    assert config.version_policy.WhichOneof("policy_choice") == "latest"
    assert [(i.name, i.data_type, list(i.dims)) for i in config.input][0] == ("a", model_config_pb2.TYPE_FP32,
                                                                            [-1, 4])
    ebb = json.loads(config.parameters["ebb"].string_value)
    assert ebb["kind"] == "tensor" and "charge_bytes" in ebb
    assert stub.ModelConfig(pb.ModelConfigRequest(name="strings")).config.input[0].data_type == \
        model_config_pb2.TYPE_STRING
    labelled = stub.ModelConfig(pb.ModelConfigRequest(name="labelled")).config
    assert labelled.output[0].label_filename == "labels.txt"
    # The same configuration as GET .../config.
    _, body, _ = server.http("/v2/models/mixed/config")
    http = json.loads(body)
    assert [o["dims"] for o in http["output"]] == [list(o.dims) for o in config.output]


def test_load_unload_and_index(server):
    stub = server.stub()
    stub.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name="tiny"))
    assert not stub.ModelReady(pb.ModelReadyRequest(name="tiny")).ready
    index = stub.RepositoryIndex(pb.RepositoryIndexRequest())
    entries = {(m.name, m.version): m for m in index.models}
    assert entries[("tiny", "1")].state == "UNAVAILABLE" and entries[("tiny", "1")].reason == "unloaded"
    assert entries[("vtiny", "3")].state == "READY"
    assert entries[("broken", "1")].state == "UNAVAILABLE" and entries[("broken", "1")].reason
    ready = {m.name for m in stub.RepositoryIndex(pb.RepositoryIndexRequest(ready=True)).models}
    assert "tiny" not in ready and "mixed" in ready and "broken" not in ready
    assert all(m.state == "READY" for m in stub.RepositoryIndex(pb.RepositoryIndexRequest(ready=True)).models)

    stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="tiny"))
    assert stub.ModelReady(pb.ModelReadyRequest(name="tiny")).ready
    # A configuration, as tritonclient's load_model(config=...) sends it.
    load = pb.RepositoryModelLoadRequest(model_name="vtiny")
    load.parameters["config"].string_param = json.dumps({"version_policy": {"all": {}}})
    stub.RepositoryModelLoad(load)
    assert list(stub.ModelMetadata(pb.ModelMetadataRequest(name="vtiny")).versions) == ["1", "3"]
    assert stub.ModelReady(pb.ModelReadyRequest(name="vtiny", version="1")).ready
    stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="vtiny"))  # back to config.json
    assert list(stub.ModelMetadata(pb.ModelMetadataRequest(name="vtiny")).versions) == ["3"]
    unload = pb.RepositoryModelUnloadRequest(model_name="tiny")
    unload.parameters["unload_dependents"].bool_param = False
    stub.RepositoryModelUnload(unload)
    assert not stub.ModelReady(pb.ModelReadyRequest(name="tiny")).ready
    stub.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="tiny"))

    for bad, code in [(pb.RepositoryModelLoadRequest(model_name="nope"), grpc.StatusCode.NOT_FOUND),
                      (pb.RepositoryModelLoadRequest(model_name="broken"), grpc.StatusCode.UNAVAILABLE)]:
        with pytest.raises(grpc.RpcError) as e:
            stub.RepositoryModelLoad(bad)
        assert e.value.code() == code
    wrong = pb.RepositoryModelLoadRequest(model_name="tiny")
    wrong.parameters["config"].string_param = json.dumps({"max_batch_size": 8})
    with pytest.raises(grpc.RpcError) as e:
        stub.RepositoryModelLoad(wrong)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "max_batch_size" in e.value.details()
    files = pb.RepositoryModelLoadRequest(model_name="tiny")
    files.parameters["file:1/model.onnx"].bytes_param = b"\x00"
    with pytest.raises(grpc.RpcError) as e:
        stub.RepositoryModelLoad(files)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "file:1/model.onnx" in e.value.details()


# --- Tensors -------------------------------------------------------------------------------

def typed_request(types, strings):
    request = pb.ModelInferRequest(model_name="identity")
    for suffix, datatype, _, field, values in types:
        tensor = request.inputs.add(name="in_" + suffix, datatype=datatype, shape=[len(values)])
        getattr(tensor.contents, field).extend(values)
    tensor = request.inputs.add(name="in_bytes", datatype="BYTES", shape=[len(strings)])
    tensor.contents.bytes_contents.extend(strings)
    return request


def raw_request(types, strings):
    inputs = [("in_" + s, d, [len(v)], np.array(v, dtype=t).tobytes()) for s, d, t, _, v in types]
    inputs.append(("in_bytes", "BYTES", [len(strings)], serialize_bytes(strings)))
    return infer_request("identity", inputs)


def test_every_datatype_typed_and_raw(server):
    stub = server.stub()
    for request in [typed_request(TYPES, STRINGS), raw_request(TYPES, STRINGS)]:
        out = outputs_of(stub.ModelInfer(request))
        for suffix, datatype, np_type, _, values in TYPES:
            got_type, shape, raw = out["out_" + suffix]
            assert (got_type, shape) == (datatype, [len(values)])
            assert raw == np.array(values, dtype=np_type).tobytes(), suffix  # bit for bit, -0.0 included
        got_type, shape, raw = out["out_bytes"]
        assert (got_type, shape) == ("BYTES", [len(STRINGS)])
        assert deserialize_bytes(raw) == STRINGS


def test_fp16_and_bf16_go_raw(server):
    stub = server.stub()
    half = np.array([1.0, -0.0, 65504.0, 5.96e-08, 1 / 3, -2.5], dtype=np.float16)
    brain = np.array([0x3F80, 0x8000, 0x7F7F, 0x0001, 0x3EAB, 0xFF7F], dtype=np.uint16)  # BF16 bits
    out = outputs_of(stub.ModelInfer(infer_request("halves", [("in_fp16", "FP16", [6], half.tobytes()),
                                                               ("in_bf16", "BF16", [6], brain.tobytes())])))
    assert out["out_fp16"] == ("FP16", [6], half.tobytes())
    assert out["out_bf16"] == ("BF16", [6], brain.tobytes())
    typed = pb.ModelInferRequest(model_name="halves")
    typed.inputs.add(name="in_fp16", datatype="FP16", shape=[1]).contents.fp32_contents.append(1.0)
    typed.inputs.add(name="in_bf16", datatype="BF16", shape=[1]).contents.fp32_contents.append(1.0)
    with pytest.raises(grpc.RpcError) as e:
        stub.ModelInfer(typed)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "raw_input_contents" in e.value.details()
    # The same bytes as the HTTP binary form.
    header = json.dumps({"inputs": [
        {"name": "in_fp16", "shape": [6], "datatype": "FP16", "parameters": {"binary_data_size": 12}},
        {"name": "in_bf16", "shape": [6], "datatype": "BF16", "parameters": {"binary_data_size": 12}}],
        "parameters": {"binary_data_output": True}}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{server.http_port}/v2/models/halves/infer",
                                     data=header + half.tobytes() + brain.tobytes(),
                                     headers={"Inference-Header-Content-Length": str(len(header))})
    with urllib.request.urlopen(request, timeout=60) as reply:
        length = int(reply.headers["Inference-Header-Content-Length"])
        assert reply.read()[length:] == half.tobytes() + brain.tobytes()


def test_strings_model_and_results_identical_to_http_and_in_process(server):
    stub = server.stub()
    text = [b"apple", b"cherry", b"", b"banana", b"pear", b"with\x00nul"]
    raw = outputs_of(stub.ModelInfer(infer_request("strings", [("text", "BYTES", [2, 3], serialize_bytes(text))])))
    assert deserialize_bytes(raw["echo"][2]) == text and raw["echo"][1] == [2, 3]
    assert np.frombuffer(raw["id"][2], dtype=np.int64).tolist() == [0, 2, -1, 1, -1, -1]
    typed = pb.ModelInferRequest(model_name="strings")
    typed.inputs.add(name="text", datatype="BYTES", shape=[2, 3]).contents.bytes_contents.extend(text)
    assert outputs_of(stub.ModelInfer(typed)) == raw

    # mixed: typed and raw agree with each other, with the arithmetic, and with HTTP.
    expected = mixed_expected()
    by_raw = outputs_of(stub.ModelInfer(mixed_request()))
    for name, value in expected.items():
        assert by_raw[name][2] == value.tobytes(), name
    typed = pb.ModelInferRequest(model_name="mixed")
    a, b, c, flag = mixed_inputs()
    typed.inputs.add(name="a", datatype="FP32", shape=[2, 4]).contents.fp32_contents.extend(a.flatten().tolist())
    typed.inputs.add(name="b", datatype="INT64", shape=[2, 4]).contents.int64_contents.extend(b.flatten().tolist())
    typed.inputs.add(name="c", datatype="UINT8", shape=[2, 4]).contents.uint_contents.extend(c.flatten().tolist())
    typed.inputs.add(name="flag", datatype="BOOL", shape=[2, 4]).contents.bool_contents.extend(flag.flatten().tolist())
    assert outputs_of(stub.ModelInfer(typed)) == by_raw
    _, body, _ = server.http("/v2/models/mixed/infer", json.dumps({"inputs": [
        {"name": "a", "shape": [2, 4], "datatype": "FP32", "data": a.flatten().tolist()},
        {"name": "b", "shape": [2, 4], "datatype": "INT64", "data": b.flatten().tolist()},
        {"name": "c", "shape": [2, 4], "datatype": "UINT8", "data": c.flatten().tolist()},
        {"name": "flag", "shape": [2, 4], "datatype": "BOOL", "data": flag.flatten().tolist()}]}).encode())
    for o in json.loads(body)["outputs"]:
        np_type = {"FP32": np.float32, "INT64": np.int64, "BOOL": np.bool_, "FP64": np.float64}[o["datatype"]]
        assert np.array(o["data"], dtype=np_type).tobytes() == by_raw[o["name"]][2], o["name"]

    # convnet: bit for bit the same as the HTTP binary answer (which server_test checks against an
    # in-process run).
    rng = np.random.default_rng(3)
    x = rng.random((1, 3, 24, 20), dtype=np.float32)
    out = outputs_of(stub.ModelInfer(infer_request("convnet", [("x", "FP32", x.shape, x.tobytes())])))
    header = json.dumps({"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                                     "parameters": {"binary_data_size": x.nbytes}}],
                         "parameters": {"binary_data_output": True}}).encode()
    request = urllib.request.Request(f"http://127.0.0.1:{server.http_port}/v2/models/convnet/infer",
                                     data=header + x.tobytes(),
                                     headers={"Inference-Header-Content-Length": str(len(header))})
    with urllib.request.urlopen(request, timeout=60) as reply:
        length = int(reply.headers["Inference-Header-Content-Length"])
        assert reply.read()[length:] == out["y"][2]


def test_id_version_keep_alive_and_requested_outputs(server):
    stub = server.stub()
    response = stub.ModelInfer(mixed_request(outputs=[("d", 0), ("sum", 0)], request_id="req-7",
                                             parameters={"keep_alive": -1}))
    assert response.id == "req-7" and response.model_name == "mixed" and response.model_version == "1"
    assert [o.name for o in response.outputs] == ["d", "sum"]
    x = np.full((1, 64), 0.5, dtype=np.float32)
    v = stub.ModelInfer(infer_request("vtiny", [("x", "FP32", [1, 64], x.tobytes())], version="3"))
    assert v.model_version == "3"
    with pytest.raises(grpc.RpcError) as e:
        stub.ModelInfer(infer_request("vtiny", [("x", "FP32", [1, 64], x.tobytes())], version="1"))
    assert e.value.code() == grpc.StatusCode.NOT_FOUND and "versions served: 3" in e.value.details()


def test_classification(server):
    stub = server.stub()
    response = outputs_of(stub.ModelInfer(mixed_request(outputs=[("sum", 2)])))
    datatype, shape, raw = response["sum"]
    assert (datatype, shape) == ("BYTES", [2, 2])
    sums = mixed_expected()["sum"]
    expected = []
    for row in sums:
        for i in np.argsort(-row, kind="stable")[:2]:
            expected.append(("%f:%d" % (row[i], i)).encode())
    assert deserialize_bytes(raw) == expected
    request = mixed_request(outputs=[("sum", 1)])
    request.model_name = "labelled"
    labelled = outputs_of(stub.ModelInfer(request))
    assert deserialize_bytes(labelled["sum"][2]) == [b"12.000000:1:one", b"55.000000:0:zero"]
    # The same strings as HTTP's classification in JSON.
    a, b, c, flag = mixed_inputs()
    _, body, _ = server.http("/v2/models/mixed/infer", json.dumps({
        "inputs": [{"name": "a", "shape": [2, 4], "datatype": "FP32", "data": a.flatten().tolist()},
                   {"name": "b", "shape": [2, 4], "datatype": "INT64", "data": b.flatten().tolist()},
                   {"name": "c", "shape": [2, 4], "datatype": "UINT8", "data": c.flatten().tolist()},
                   {"name": "flag", "shape": [2, 4], "datatype": "BOOL", "data": flag.flatten().tolist()}],
        "outputs": [{"name": "sum", "parameters": {"classification": 2}}]}).encode())
    assert [s.encode() for s in json.loads(body)["outputs"][0]["data"]] == expected


# --- Bad requests (server_test's table, with gRPC codes) -----------------------------------

def tiny(x_shape=(1, 64), datatype="FP32", name="x", model="tiny", raw=None, version=""):
    x = np.zeros(x_shape, dtype=np.float32)
    return infer_request(model, [(name, datatype, list(x_shape), x.tobytes() if raw is None else raw)],
                         version=version)


def bad_requests():
    G = grpc.StatusCode
    two_raw = tiny()
    two_raw.raw_input_contents.append(b"\x00")
    mixed_up = tiny()
    mixed_up.inputs[0].contents.fp32_contents.extend([0.0] * 64)
    over_range = pb.ModelInferRequest(model_name="identity")
    for suffix, datatype, _, field, values in TYPES:
        over_range.inputs.add(name="in_" + suffix, datatype=datatype, shape=[len(values)])
        getattr(over_range.inputs[-1].contents, field).extend(values)
    over_range.inputs[1].contents.uint_contents[0] = 300  # UINT8
    over_range.inputs.add(name="in_bytes", datatype="BYTES", shape=[1]).contents.bytes_contents.append(b"x")
    bad_bytes = infer_request("strings", [("text", "BYTES", [1, 2], struct.pack("<I", 9) + b"abc")])
    return [
        ("unknown model", tiny(model="nope"), G.NOT_FOUND, "unknown model 'nope'"),
        ("a path as model name", tiny(model="../../etc"), G.INVALID_ARGUMENT, "invalid model name"),
        ("a hidden name", tiny(model="..tiny"), G.INVALID_ARGUMENT, "invalid model name"),
        ("a link out of the repository", tiny(model="escape"), G.INVALID_ARGUMENT, "resolves outside the repository"),
        ("unknown version", tiny(version="2"), G.NOT_FOUND, "versions served: 1"),
        ("wrong input name", tiny(name="z"), G.INVALID_ARGUMENT, "no input named 'z'"),
        ("wrong datatype", tiny(datatype="INT32"), G.INVALID_ARGUMENT, "must be FP32"),
        ("unknown datatype", tiny(datatype="FP8"), G.INVALID_ARGUMENT, "unknown datatype"),
        ("wrong shape", tiny(x_shape=(1, 32)), G.INVALID_ARGUMENT, "[1,64]"),
        ("raw length not matching the shape", tiny(raw=b"\x00" * 63 * 4), G.INVALID_ARGUMENT, "needs 256"),
        ("more raw contents than inputs", two_raw, G.INVALID_ARGUMENT, "raw_input_contents has 2 entries"),
        ("both raw and typed", mixed_up, G.INVALID_ARGUMENT, "raw_input_contents"),
        ("a typed value out of range", over_range, G.INVALID_ARGUMENT, "out of the UINT8 range"),
        ("malformed BYTES", bad_bytes, G.INVALID_ARGUMENT, "claims 9 bytes"),
        ("message over the size limit", tiny(raw=b"\x00" * (MAX_BODY + 1)), G.RESOURCE_EXHAUSTED, ""),
        ("model that failed to load", tiny(model="broken"), G.UNAVAILABLE, "failed to load"),
    ]


def test_bad_requests_get_clear_codes_and_the_server_keeps_serving(server):
    stub = server.stub()
    negative = tiny()
    negative.inputs[0].shape[:] = [1, -64]
    cases = bad_requests()
    cases.append(("negative dimension", negative, grpc.StatusCode.INVALID_ARGUMENT, "negative dimension"))
    good = mixed_request()
    expected = outputs_of(stub.ModelInfer(good))
    for what, request, code, mentions in cases:
        with pytest.raises(grpc.RpcError) as e:
            stub.ModelInfer(request)
        assert e.value.code() == code, f"{what}: {e.value.code()} {e.value.details()}"
        assert mentions in e.value.details(), f"{what}: {e.value.details()}"
        assert outputs_of(stub.ModelInfer(good)) == expected, f"after {what}"


# --- Size, concurrency, statistics ---------------------------------------------------------

def test_64_mib_raw_tensors(server):
    stub = server.stub()
    n = 16 * 1024 * 1024  # 64 MiB of FP32
    x = np.arange(n, dtype=np.float32)
    inputs = [("in_" + s, d, [1], np.array(v[:1], dtype=t).tobytes()) for s, d, t, _, v in TYPES]
    inputs[[i[0] for i in inputs].index("in_fp32")] = ("in_fp32", "FP32", [n], x.tobytes())
    inputs.append(("in_bytes", "BYTES", [1], serialize_bytes([b"big"])))
    response = stub.ModelInfer(infer_request("identity", inputs, outputs=[("out_fp32", 0)]))
    assert list(response.outputs[0].shape) == [n]
    assert response.raw_output_contents[0] == x.tobytes()


def test_16_concurrent_clients(server):
    expected_mixed = outputs_of(server.stub().ModelInfer(mixed_request()))
    x = np.full((1, 64), 0.25, dtype=np.float32)
    tiny_request = infer_request("tiny", [("x", "FP32", [1, 64], x.tobytes())])
    expected_tiny = outputs_of(server.stub().ModelInfer(tiny_request))
    wrong = []

    def client(k):
        stub = server.stub()  # its own channel
        for _ in range(10):
            try:
                if k % 2:
                    ok = outputs_of(stub.ModelInfer(tiny_request)) == expected_tiny
                else:
                    ok = outputs_of(stub.ModelInfer(mixed_request())) == expected_mixed
            except grpc.RpcError as e:
                ok = False
                wrong.append(e.details())
            if not ok:
                wrong.append(k)

    threads = [threading.Thread(target=client, args=(k,)) for k in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []


def test_statistics_agree_with_metrics_and_http(server):
    stub = server.stub()
    model = "strings"

    def stats():
        (s,) = stub.ModelStatistics(pb.ModelStatisticsRequest(name=model)).model_stats
        return s

    before = stats()
    text = serialize_bytes([b"apple", b"kiwi"])
    for _ in range(4):
        stub.ModelInfer(infer_request(model, [("text", "BYTES", [1, 2], text)]))
    for _ in range(3):
        with pytest.raises(grpc.RpcError):
            stub.ModelInfer(infer_request(model, [("text", "BYTES", [1, 3], text)]))  # 2 elements, shape needs 3
    s = stats()
    i = s.inference_stats
    assert (s.name, s.version) == (model, "1")
    assert s.inference_count - before.inference_count == 4 and s.execution_count == s.inference_count
    assert i.success.count - before.inference_stats.success.count == 4
    assert i.fail.count - before.inference_stats.fail.count == 3
    assert i.compute_infer.count == i.success.count == s.inference_count
    assert i.success.ns > i.compute_infer.ns > 0 and s.last_inference > 1_600_000_000_000
    assert s.ebb.state == "READY" and s.ebb.charge_bytes > 0 and s.ebb.releases >= 4
    # /metrics counts the same requests, from the same place.
    label = '{model="%s"}' % model
    assert server.metric("ebb_inference_requests_total" + label) == i.success.count + i.fail.count
    assert server.metric("ebb_inference_duration_seconds_count" + label) == i.success.count
    assert server.metric('ebb_inference_failures_total{code="invalid_argument",model="%s"}' % model) == i.fail.count
    assert server.metric("ebb_releases_total" + label) == s.ebb.releases
    _, body, _ = server.http(f"/v2/models/{model}/stats")
    http = json.loads(body)["model_stats"][0]
    assert http["inference_stats"]["success"] == {"count": i.success.count, "ns": i.success.ns}
    assert http["inference_stats"]["fail"] == {"count": i.fail.count, "ns": i.fail.ns}
    every = stub.ModelStatistics(pb.ModelStatisticsRequest()).model_stats
    assert {m.name for m in every} >= {"tiny", "mixed", "strings", "vtiny", "identity"}
    with pytest.raises(grpc.RpcError) as e:
        stub.ModelStatistics(pb.ModelStatisticsRequest(name=model, version="9"))
    assert e.value.code() == grpc.StatusCode.NOT_FOUND


# --- Separate servers: a full queue, shutdown ---------------------------------------------

def big_convnet_request(side):
    x = np.random.default_rng(1).random((1, 3, side, side), dtype=np.float32)
    return infer_request("convnet", [("x", "FP32", list(x.shape), x.tobytes())])


def wait_until_running(s):
    for _ in range(2000):
        if s.metric("ebb_inference_running") >= 1:
            return
        time.sleep(0.01)
    raise AssertionError("no inference started")


def wait_until_reserved(s, at_least):
    series = 'ebb_memory_reserved_bytes{against="arena",device="cpu"}'
    for _ in range(2000):
        if s.metric(series) >= at_least:
            return
        time.sleep(0.01)
    raise AssertionError("no run reserved %d bytes" % at_least)


def test_a_full_queue_is_unavailable_as_in_triton(repository):
    # Triton answers a full queue with UNAVAILABLE ("Exceeds maximum queue size"), as HTTP 503;
    # RESOURCE_EXHAUSTED is ebb's memory budget (and gRPC's own message size limit).
    s = Server(repository, "--workers", "1", "--queue", "0", "--no-load")
    try:
        first = {}
        t = threading.Thread(target=lambda: first.update(r=s.stub().ModelInfer(big_convnet_request(2048))))
        t.start()
        wait_until_running(s)
        with pytest.raises(grpc.RpcError) as e:
            s.stub().ModelInfer(big_convnet_request(16))
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE and "server busy" in e.value.details()
        t.join()
        assert list(first["r"].outputs[0].shape) == [1, 3, 2048, 2048]
        assert s.stub().ModelInfer(big_convnet_request(16)).model_name == "convnet"
    finally:
        assert s.stop(signal.SIGINT) == 0


def test_sigterm_mid_request_drains_and_health_turns_not_serving(repository):
    s = Server(repository)
    channel = s.channel()
    health = health_pb2_grpc.HealthStub(channel)
    stub = pb_grpc.GRPCInferenceServiceStub(channel)
    watched = []
    watch = health.Watch(health_pb2.HealthCheckRequest(service=""))

    def read_watch():
        try:
            for update in watch:
                watched.append(update.status)
        except grpc.RpcError:
            pass

    watcher = threading.Thread(target=read_watch)
    watcher.start()
    result = {}
    in_flight = threading.Thread(target=lambda: result.update(r=stub.ModelInfer(big_convnet_request(1536))))
    in_flight.start()
    wait_until_running(s)
    s.proc.send_signal(signal.SIGTERM)
    # While the request drains: health says NOT_SERVING, the server is not ready, new work is refused.
    deadline = time.time() + 10
    while health.Check(health_pb2.HealthCheckRequest(service="")).status != health_pb2.HealthCheckResponse.NOT_SERVING:
        assert time.time() < deadline, "health never turned NOT_SERVING"
        time.sleep(0.01)
    assert health.Check(health_pb2.HealthCheckRequest(service=SERVICE)).status == \
        health_pb2.HealthCheckResponse.NOT_SERVING
    assert not stub.ServerReady(pb.ServerReadyRequest()).ready
    with pytest.raises(grpc.RpcError) as e:
        stub.ModelInfer(big_convnet_request(16))
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE and "shutting down" in e.value.details()
    in_flight.join()
    assert list(result["r"].outputs[0].shape) == [1, 3, 1536, 1536], "the request in flight was answered"
    assert s.proc.wait(timeout=60) == 0
    # grpc-python's watch stream does not always end when the server's process does (it sometimes
    # waited out the whole join): once the update has come, the stream is cancelled here.
    deadline = time.time() + 10
    while health_pb2.HealthCheckResponse.NOT_SERVING not in watched and time.time() < deadline:
        time.sleep(0.01)
    watch.cancel()
    watcher.join(timeout=10)
    assert watched[0] == health_pb2.HealthCheckResponse.SERVING
    assert health_pb2.HealthCheckResponse.NOT_SERVING in watched


# --- Hostile input (issue 17) ------------------------------------------------------------------
# Each test: the status and message, the server's memory (VmHWM, VmRSS) against before, and a good
# request right after. The messages are built on the wire by hand where protobuf's own classes
# would cost the client what they used to cost the server.

def varint(n):
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes(out + bytearray([n]))


def field(number, payload=b""):
    """A length-delimited field on the wire: tag, length, payload."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def name(model):
    return field(1, model.encode())  # ModelInferRequest.model_name


N = 8 * MiB  # entries of 2 bytes: 16 MiB messages
AMPLIFIERS = [  # (what, message, compressed, what the refusal says); 4 MiB took 0.45 GiB, 16 MiB 1.5-1.9 GiB
    ("empty inputs", name("nope") + field(5) * N, False, "more than 4096 inputs"),
    ("empty inputs, gzip-compressed (16 KB sent)", name("nope") + field(5) * N, True, "more than 4096 inputs"),
    ("empty inputs to a model that exists", name("tiny") + field(5) * N, False, "more than 4096 inputs"),
    ("empty requested outputs", name("nope") + field(6) * N, False, "more than 4096 requested outputs"),
    ("empty raw_input_contents", name("nope") + field(7) * N, False, "more than 4096 raw_input_contents"),
    ("empty bytes_contents", name("nope") + field(5, field(5, field(8) * N)), False,
     "more than 1048576 elements in bytes_contents"),
    ("empty parameters", name("nope") + field(4) * N, False, "more than 4096 parameters"),
    ("unknown fields", name("nope") + field(99) * (N * 2 // 3), False, "more than 1024 fields unknown"),
    ("INT64 typed contents of 1-byte varints", name("nope") + field(5, field(5, field(3, b"\x00" * 2 * N))), False,
     "more than 4194304 elements in typed contents"),
    ("a shape of a million dimensions", name("nope") + field(5, field(3, b"\x01" * MiB)), False,
     "more than 64 dimensions"),
    ("a group", name("nope") + b"\x2b" + b"\x2c", False, "groups are not part of this protocol"),
    ("a length past the end", name("nope") + varint(5 << 3 | 2) + varint(1000), False, "runs past the end"),
]


@pytest.mark.parametrize("what,message,compressed,mentions", AMPLIFIERS, ids=[a[0] for a in AMPLIFIERS])
def test_a_message_of_many_small_entries_is_refused_before_it_is_parsed(server, what, message, compressed, mentions):
    good = mixed_request()
    expected = outputs_of(server.stub().ModelInfer(good))
    before = server.status()
    server.reset_peak()
    started = time.monotonic()
    code, details = server.raw_infer(message, grpc.Compression.Gzip if compressed else None)
    took = time.monotonic() - started
    assert code == grpc.StatusCode.INVALID_ARGUMENT and mentions in details, f"{what}: {code} {details}"
    assert took < 10, f"{what}: {took:.1f} s"
    if RSS_BOUNDS_HOLD:
        # The message itself (gRPC holds it whole) and a little more: was 60-120 times its size.
        peak = server.status("VmHWM") - before
        assert peak < len(message) + 32 * MiB, f"{what}: peak +{peak / MiB:.0f} MiB for {len(message) / MiB:.0f} MiB"
    assert outputs_of(server.stub().ModelInfer(good)) == expected, f"after {what}"
    if RSS_BOUNDS_HOLD:  # gRPC's receive buffers go back to the heap, which the inference trims
        after = server.status() - before
        assert after < 16 * MiB, f"{what}: RSS stayed +{after / MiB:.0f} MiB"


def test_a_gzip_bomb_of_empty_inputs_is_small_on_the_wire():
    # The compressed form of the 16 MiB message above, as the test sends it: ~16 KB.
    assert len(gzip.compress(AMPLIFIERS[1][1])) < 64 * 1024


def test_compressed_requests_are_refused_before_they_are_inflated_by_default(repository, server):
    # gRPC 1.51 inflates a compressed message whole before it compares its size with --max-body-bytes:
    # 256 MiB of unknown fields in ~0.3 MB of gzip would cost the server 256 MiB and more, then
    # RESOURCE_EXHAUSTED. By default compression is off, and such a request is refused on its headers.
    bomb = name("nope") + b"\x98\x06\x00" * (256 * MiB // 3)
    s = Server(repository)
    try:
        before = s.status()
        s.reset_peak()
        code, details = s.raw_infer(bomb, grpc.Compression.Gzip)
        assert code == grpc.StatusCode.UNIMPLEMENTED and "Compression algorithm 'gzip' is disabled" in details, details
        code, details = s.raw_infer(name("nope"), grpc.Compression.Deflate)
        assert code == grpc.StatusCode.UNIMPLEMENTED and "'deflate' is disabled" in details, details
        if RSS_BOUNDS_HOLD:
            assert s.status("VmHWM") - before < 16 * MiB
        assert s.stub().ModelInfer(tiny()).model_name == "tiny"
    finally:
        assert s.stop() == 0
    # With --grpc-compressed-requests (the module's server), a compressed request is answered as any other.
    response = server.stub().ModelInfer(tiny(), compression=grpc.Compression.Gzip)
    assert response.model_name == "tiny" and len(response.raw_output_contents[0]) == 256


def test_200000_output_names_are_refused_at_once_and_4096_are_checked_in_linear_time(server):
    # 2.4 MB of distinct names: 92 s of one core before (a linear search per name for duplicates).
    message = name("tiny") + b"".join(field(6, field(1, b"o%07d" % i)) for i in range(200_000))
    started = time.monotonic()
    code, details = server.raw_infer(message)
    assert code == grpc.StatusCode.INVALID_ARGUMENT and "more than 4096 requested outputs" in details, details
    assert time.monotonic() - started < 10
    # At the limit the request is decoded: the duplicate, last of 4096, is found at once.
    request = tiny()
    for i in range(4095):
        request.outputs.add(name="o%d" % i)
    request.outputs.add(name="o0")
    started = time.monotonic()
    with pytest.raises(grpc.RpcError) as e:
        server.stub().ModelInfer(request)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "output 'o0' is requested twice" in e.value.details()
    assert time.monotonic() - started < 10
    assert server.stub().ModelInfer(tiny()).model_name == "tiny"


def test_long_names_are_not_echoed_whole(server):
    """Issue 17, finding 9: an error echoed a whole 100 KB model name, and the client then failed on the
    reply's metadata size. Names in messages are clipped to 128 bytes and their length."""
    long = "n" * 100_000
    stub = server.stub()
    cases = [pb.ModelInferRequest(model_name=long)]
    bad_input = tiny()
    bad_input.inputs[0].name = long
    cases.append(bad_input)
    bad_output = tiny()
    bad_output.outputs.add(name=long)
    cases.append(bad_output)
    for request in cases:
        with pytest.raises(grpc.RpcError) as e:
            stub.ModelInfer(request)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value.details()[:300]
        assert "n" * 128 + "... (100000 bytes)" in e.value.details(), e.value.details()[:300]
        assert len(e.value.details()) < 1000
    with pytest.raises(grpc.RpcError) as e:
        stub.ModelMetadata(pb.ModelMetadataRequest(name=long))
    assert "... (100000 bytes)" in e.value.details() and len(e.value.details()) < 1000
    assert stub.ModelInfer(tiny()).model_name == "tiny"


def test_keep_alive_is_range_checked_as_over_http(server):
    stub = server.stub()
    message = "parameters.keep_alive must be an integer (milliseconds) of at most 31536000000 (365 days; negative: " \
              "never unload), got "
    too_long = mixed_request(parameters={"keep_alive": 31536000001})
    as_string = mixed_request()
    as_string.parameters["keep_alive"].string_param = "1000"
    past_int64 = mixed_request()
    past_int64.parameters["keep_alive"].uint64_param = 2**63
    for request, got in [(too_long, "31536000001"), (as_string, "a string_param"), (past_int64, str(2**63))]:
        with pytest.raises(grpc.RpcError) as e:
            stub.ModelInfer(request)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and e.value.details() == message + got
    # The same words as HTTP's (the one check in server/core: CheckKeepAlive).
    status, body, _ = server.http("/v2/models/tiny/infer", json.dumps({
        "parameters": {"keep_alive": 31536000001},
        "inputs": [{"name": "x", "shape": [1, 64], "datatype": "FP32", "data": [0.0] * 64}]}).encode())
    assert status == 400 and json.loads(body)["error"] == message + "31536000001"
    assert stub.ModelInfer(mixed_request(parameters={"keep_alive": 31536000000})).model_name == "mixed"


def identity_request(fp32_bytes):
    """An identity request (every input it takes) whose FP32 input is `fp32_bytes` long."""
    inputs = [("in_" + s, d, [1], np.array(v[:1], dtype=t).tobytes()) for s, d, t, _, v in TYPES]
    n = fp32_bytes // 4
    inputs[[i[0] for i in inputs].index("in_fp32")] = ("in_fp32", "FP32", [n], np.ones(n, np.float32).tobytes())
    inputs.append(("in_bytes", "BYTES", [1], serialize_bytes([b"x"])))
    return infer_request("identity", inputs, outputs=[("out_bool", 0)])


def spin_request(iterations):
    """A run of ~1.5 us per iteration that needs no memory: holds a worker."""
    return infer_request("spin", [("n", "INT64", [1], np.array([iterations], np.int64).tobytes())])


def wait_for_metric(s, sample, at_least, timeout=30):
    deadline = time.monotonic() + timeout
    while s.metric(sample) < at_least:
        assert time.monotonic() < deadline, f"{sample} never reached {at_least}"
        time.sleep(0.01)


def test_a_request_refused_as_busy_is_never_decoded(repository):
    # It used to be decoded before admission: bytes, parsed message and tensors (~3x its size) for an answer
    # that needed none of them.
    s = Server(repository, "--workers", "1", "--queue", "0")
    try:
        busy = threading.Thread(target=lambda: s.stub().ModelInfer(spin_request(4_000_000), timeout=120))
        busy.start()
        wait_until_running(s)
        big = identity_request(64 * MiB).SerializeToString()
        before = s.status()
        s.reset_peak()
        code, details = s.raw_infer(big)
        assert code == grpc.StatusCode.UNAVAILABLE and "server busy: 1 inferences running and 0 waiting" in details
        if RSS_BOUNDS_HOLD:
            peak = s.status("VmHWM") - before
            assert peak < len(big) + 32 * MiB, f"peak +{peak / MiB:.0f} MiB for a {len(big) / MiB:.0f} MiB message"
        busy.join()
        assert outputs_of(s.stub().ModelInfer(identity_request(1024)))["out_bool"][1] == [1]
    finally:
        assert s.stop() == 0


def post_slowly(port, body_length, send):
    """An HTTP request whose body is `body_length` bytes of JSON whitespace, of which `send` are sent now."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.sendall(b"POST /v2/models/tiny/infer HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: %d\r\n\r\n" % body_length)
    sock.sendall(b" " * send)
    return sock


def test_the_request_byte_budget_is_shared_by_http_and_grpc(repository):
    # --max-body-bytes-in-flight bounds what both front ends hold together: HTTP bodies being received
    # and gRPC messages waiting or running. Before, gRPC had no budget at all.
    budget = 48_000_000
    s = Server(repository, "--max-body-bytes", "32000000", "--max-body-bytes-in-flight", str(budget),
               "--workers", "1", "--queue", "1")
    try:
        refusal = f"server busy: the requests being received are over the server's budget of {budget} bytes " \
                  "(--max-body-bytes-in-flight, HTTP and gRPC together); retry later"
        grpc_big = identity_request(20_000_000)
        # 1. An HTTP body being received holds 30 MB: a 20 MB gRPC message does not fit beside it.
        held = post_slowly(s.http_port, 31_000_000, 30_000_000)
        wait_for_metric(s, "ebb_request_bytes_in_flight", 30_000_000)
        before = s.status()
        s.reset_peak()
        with pytest.raises(grpc.RpcError) as e:
            s.stub().ModelInfer(grpc_big)
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE and e.value.details() == refusal
        held.close()
        deadline = time.monotonic() + 30
        while s.metric("ebb_request_bytes_in_flight") > 0:
            assert time.monotonic() < deadline, "the HTTP body was never given back"
            time.sleep(0.01)
        assert list(s.stub().ModelInfer(grpc_big).outputs[0].shape) == [1], "fits once the HTTP body is gone"
        if RSS_BOUNDS_HOLD:
            assert s.status("VmHWM") - before < budget + 64 * MiB
        # 2. A gRPC request waiting for the busy worker holds 30 MB: a 20 MB HTTP body does not fit.
        busy = threading.Thread(target=lambda: s.stub().ModelInfer(spin_request(4_000_000), timeout=120))
        busy.start()
        wait_until_running(s)
        queued = {}
        waiting = threading.Thread(target=lambda: queued.update(r=s.stub().ModelInfer(identity_request(30_000_000))))
        waiting.start()
        wait_for_metric(s, "ebb_inference_queued", 1)
        status, body, _ = s.http("/v2/models/tiny/infer", b" " * 20_000_000)
        assert status == 503 and "--max-body-bytes-in-flight" in json.loads(body)["error"]
        busy.join()
        waiting.join()
        assert list(queued["r"].outputs[0].shape) == [1], "the queued request was answered"
        status, _, _ = s.http("/v2/models/tiny/infer", json.dumps({"inputs": [
            {"name": "x", "shape": [1, 64], "datatype": "FP32", "data": [0.5] * 64}]}).encode())
        assert status == 200
    finally:
        assert s.stop() == 0


def test_a_reply_the_client_never_takes_is_dropped_after_the_write_timeout(repository):
    # 64 replies of 3 MiB to a client that grants no flow-control window: +390 MiB held for as long as the
    # client stayed (30 s and more) before. Now each call is cancelled --write-timeout-s after its reply
    # was ready, and gRPC frees it.
    s = Server(repository, "--write-timeout-s", "2")
    client = None
    try:
        zeros = infer_request("zeros", [("n", "INT64", [1], np.array([786432], np.int64).tobytes())])
        assert len(s.stub().ModelInfer(zeros).raw_output_contents[0]) == 3 * MiB
        before = s.status()
        client = StalledClient(s.grpc_port)
        message = zeros.SerializeToString()
        for i in range(64):
            client.call(2 * i + 1, f"/{SERVICE}/ModelInfer".encode(), message)
        assert client.wait(lambda c: len(c.headers) == 64, 60), f"{len(client.headers)} replies started"
        held = s.status() - before
        started = time.monotonic()
        assert client.wait(lambda c: len(c.reset | c.ended) == 64, 30), \
            f"{len(client.reset | client.ended)} of 64 calls ended"
        took = time.monotonic() - started
        assert took < 2 + 10, f"the calls ended {took:.1f} s after their replies were ready"
        assert client.data_bytes == 0, "the client granted no window: nothing could be sent"
        if RSS_BOUNDS_HOLD:
            assert held > 150 * MiB, f"the replies were held: +{held / MiB:.0f} MiB"
            time.sleep(0.5)
            after = s.status() - before
            assert after < 32 * MiB, f"RSS stayed +{after / MiB:.0f} MiB after the calls were cancelled"
        # The server goes on; so do other clients, and the stalled one's connection.
        assert len(s.stub().ModelInfer(zeros).raw_output_contents[0]) == 3 * MiB
    finally:
        if client:
            client.close()
        assert s.stop() == 0


def test_every_other_rpc_bounds_its_message_before_parsing_it(server):
    # Synchronous methods had gRPC parse up to --max-body-bytes first: 16 MiB of empty unknown fields sent to
    # ModelMetadata peaked at +358 MiB. Now every method's message is walked first, as ModelInfer's is.
    with grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}",
                               options=[("grpc.max_send_message_length", -1)]) as channel:
        def call(method, message):
            rpc = channel.unary_unary(f"/{SERVICE}/{method}", request_serializer=lambda b: b,
                                      response_deserializer=lambda b: b)
            try:
                rpc(message, timeout=60)
                return grpc.StatusCode.OK, ""
            except grpc.RpcError as e:
                return e.code(), e.details()

        unknown = name("mixed") + field(99) * 1025
        cases = [
            ("ModelMetadata", unknown, grpc.StatusCode.INVALID_ARGUMENT, "more than 1024 fields unknown"),
            ("ModelStatistics", unknown, grpc.StatusCode.INVALID_ARGUMENT, "more than 1024 fields unknown"),
            ("ModelMetadata", name("mixed") + field(99, b"x" * (4 * MiB)), grpc.StatusCode.RESOURCE_EXHAUSTED,
             "bytes is larger than the limit of 4194304 bytes for this RPC"),
            ("RepositoryModelLoad", name("mixed") + b"".join(field(3, field(1, b"k%d" % i)) for i in range(4097)),
             grpc.StatusCode.INVALID_ARGUMENT, "more than 4096 entries"),
            ("ServerLive", field(99) * 1025, grpc.StatusCode.INVALID_ARGUMENT, "more than 1024 fields unknown"),
            ("ModelReady", name("mixed") + b"\x2b", grpc.StatusCode.INVALID_ARGUMENT, "groups are not part"),
        ]
        big = name("nope") + field(99) * (N * 2 // 3)
        before = server.status()
        server.reset_peak()
        code, details = call("ModelMetadata", big)
        assert code == grpc.StatusCode.RESOURCE_EXHAUSTED, details
        if RSS_BOUNDS_HOLD:
            peak = server.status("VmHWM") - before
            assert peak < len(big) + 32 * MiB, f"peak +{peak / MiB:.0f} MiB for {len(big) / MiB:.0f} MiB"
        for method, message, expected, mentions in cases:
            code, details = call(method, message)
            assert code == expected and mentions in details, f"{method}: {code} {details}"
        # A newer client's few unknown fields are fine; so is every RPC as the stubs send it.
        code, _ = call("ModelMetadata", name("mixed") + field(99) * 10)
        assert code == grpc.StatusCode.OK
    stub = server.stub()
    assert stub.ModelMetadata(pb.ModelMetadataRequest(name="mixed")).name == "mixed"
    assert stub.ServerLive(pb.ServerLiveRequest()).live


@pytest.mark.skipif(not RSS_BOUNDS_HOLD, reason="a run's need is measured from RSS and the arena's peak, which a "
                    "sanitizer's allocator and timing change (the pool's and the server's admission tests skip there too)")
def test_admission_by_memory_over_grpc(repository):
    # The shared arena capped at 900 MiB: a 2560x2560 convnet run (800 MiB of arena, predicted from a
    # 1024x1024 one's 128 MiB) fills it for a second or more, and a 1024x1024 request waits beside it.
    policy = os.path.join(os.path.dirname(repository), "cap_900mib.json")
    with open(policy, "w") as f:
        json.dump({"cpu": {"arena_settings": {"max_bytes": 900 << 20}}}, f)
    s = Server(repository, "--policy", policy, "--workers", "2", "--no-load")
    try:
        stub = s.stub()
        # Two sizes measured alone: the line through them bounds a larger request's need.
        assert stub.ModelInfer(big_convnet_request(512)).model_name == "convnet"
        assert stub.ModelInfer(big_convnet_request(1024)).model_name == "convnet"
        # Needing more than the cap: RESOURCE_EXHAUSTED at once, with the numbers.
        with pytest.raises(grpc.RpcError) as e:
            stub.ModelInfer(big_convnet_request(3072))
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "a run of 28311552 input elements needs at least" in e.value.details()
        assert "the shared CPU arena's cap of 900.0 MiB (943718400 bytes)" in e.value.details()
        big = {}
        t = threading.Thread(target=lambda: big.update(r=stub.ModelInfer(big_convnet_request(2560))))
        t.start()
        # Its reservation held, not only its call started: the 78 MB request is decoded after the
        # worker admits it, and a smaller one sent meanwhile could reach the pool first.
        wait_until_reserved(s, 500 << 20)
        # A client whose deadline passes while its request waits for memory: the server sees the call
        # cancelled (ServerContext::IsCancelled) and its run leaves the line.
        with pytest.raises(grpc.RpcError) as e:
            stub.ModelInfer(big_convnet_request(1024), timeout=0.5)
        assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        deadline = time.time() + 10
        while s.metric('ebb_runs_waiting_for_memory{device="cpu"}') != 0:
            assert time.time() < deadline, "the cancelled call kept its place"
            time.sleep(0.01)
        while s.metric('ebb_inference_failures_total{code="cancelled",model="convnet"}') != 1:
            assert time.time() < deadline, "the cancelled call was not counted"
            time.sleep(0.01)
        t.join()
        assert list(big["r"].outputs[0].shape) == [1, 3, 2560, 2560]
        stats = stub.ModelStatistics(pb.ModelStatisticsRequest(name="convnet")).model_stats[0].ebb
        # 2560x2560 too, once it was alone.
        assert [p.input_elements for p in stats.need_points][:2] == [3 * 512 * 512, 3 * 1024 * 1024]
        assert [p.input_elements for p in stats.arena_need_points][:2] == [3 * 512 * 512, 3 * 1024 * 1024]
        assert stats.predicted_arena_need_bytes >= 800 << 20 and stats.reserved_bytes == 0
    finally:
        assert s.stop(signal.SIGINT) == 0
