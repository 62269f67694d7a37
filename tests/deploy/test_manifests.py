"""The Kubernetes manifests under deploy/: YAML that parses, only fields the KServe / ModelMesh CRDs
define (tests/deploy/crd_fields.py), the wiring between them (ports, probes, endpoints, runtime names),
and `ebb serve` run with exactly each runtime's command and args, its probes probed.

The args are the manifest's; only the container's paths (/mnt/models, /models) become temporary
folders and its ports free ports. A flag the built ebb does not know (`ebb serve --help`) fails the
test; the args run whole and serve a model as KServe / ModelMesh would.

Run by ctest with EBB_SOURCE_DIR, EBB_BINARY, EBB_MODELS_DIR and EBB_GRPC_PYTHON in the environment.
"""

import copy
import json
import os
import sys

import grpc
import numpy as np
import pytest
import yaml

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.environ["EBB_GRPC_PYTHON"])
import crd_fields  # noqa: E402
import grpc_service_pb2 as pb  # noqa: E402
import grpc_service_pb2_grpc as pb_grpc  # noqa: E402
import health_pb2  # noqa: E402
import health_pb2_grpc  # noqa: E402
import serve_util  # noqa: E402

SOURCE = os.environ["EBB_SOURCE_DIR"]
EBB = os.environ["EBB_BINARY"]
MODELS = os.environ["EBB_MODELS_DIR"]
DEPLOY = os.path.join(SOURCE, "deploy")

MANIFESTS = {
    "kserve/cluster-serving-runtime.yaml": ("ClusterServingRuntime", crd_fields.CLUSTER_SERVING_RUNTIME),
    "kserve/inference-service.yaml": ("InferenceService", crd_fields.INFERENCE_SERVICE),
    "modelmesh/serving-runtime.yaml": ("ServingRuntime", crd_fields.MODELMESH_SERVING_RUNTIME),
    "modelmesh/predictor.yaml": ("InferenceService", crd_fields.INFERENCE_SERVICE),
}
API_VERSIONS = {"ClusterServingRuntime": "serving.kserve.io/v1alpha1", "ServingRuntime": "serving.kserve.io/v1alpha1",
                "InferenceService": "serving.kserve.io/v1beta1"}
# The ports of the containers ModelMesh puts into a runtime's pod (modelmesh-serving: model-mesh 8033,
# LiteLinks 8080, probes 8089, preStop 8090, metrics 2112; REST proxy 8008; puller 8086).
MODELMESH_POD_PORTS = {8033, 8080, 8089, 8090, 2112, 8008, 8086}


def load(name):
    with open(os.path.join(DEPLOY, name)) as f:
        documents = list(yaml.safe_load_all(f))
    assert len(documents) == 1, f"{name}: one document expected"
    return documents[0]


def arg(args, flag):
    assert args.count(flag) == 1, (flag, args)
    return args[args.index(flag) + 1]


# --- Fields -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(MANIFESTS))
def test_fields_are_the_crds(name):
    kind, schema = MANIFESTS[name]
    doc = load(name)
    assert doc["kind"] == kind and doc["apiVersion"] == API_VERSIONS[kind]
    assert crd_fields.check(doc, schema) == []
    for path, allowed in crd_fields.ENUMS.items():
        for value in crd_fields.values_at(doc, path):
            assert value in allowed, f"{name}: {path} = {value!r}"


def test_the_walker_finds_what_the_crds_do_not_define():
    doc = load("kserve/cluster-serving-runtime.yaml")
    broken = copy.deepcopy(doc)
    broken["spec"]["containers"][0]["livenessprobe"] = broken["spec"]["containers"][0].pop("livenessProbe")
    broken["spec"]["supportedModelFormats"][0]["autoSelect"] = "true"
    broken["spec"]["multiModel"] = 1
    assert crd_fields.check(broken, crd_fields.CLUSTER_SERVING_RUNTIME) == [
        "spec.supportedModelFormats[0].autoSelect: 'true' is not a boolean",
        "spec.containers[0].livenessprobe: not a field of the CRD",
        "spec.multiModel: 1 is not a boolean"]
    mm = copy.deepcopy(load("modelmesh/serving-runtime.yaml"))
    mm["spec"]["supportedModelFormats"][0]["priority"] = 1  # KServe's field, not ModelMesh's
    assert crd_fields.check(mm, crd_fields.MODELMESH_SERVING_RUNTIME) == [
        "spec.supportedModelFormats[0].priority: not a field of the CRD"]


# --- Wiring -------------------------------------------------------------------------------------------


def probe_port(container, probe):
    port = container[probe]["httpGet"]["port"]
    if isinstance(port, str):  # a port's name
        port = {p["name"]: p["containerPort"] for p in container.get("ports", [])}[port]
    return port


def check_prometheus(annotations, http_port):
    assert annotations["prometheus.io/scrape"] == "true"
    assert annotations["prometheus.io/port"] == str(http_port)
    assert annotations["prometheus.io/path"] == "/metrics"  # docs/server.md


def test_kserve_runtime_wiring():
    runtime = load("kserve/cluster-serving-runtime.yaml")
    spec = runtime["spec"]
    assert {"name": "onnx", "version": "1", "autoSelect": True} in spec["supportedModelFormats"]
    assert set(spec["protocolVersions"]) == {"v2", "grpc-v2"}
    (container,) = spec["containers"]
    assert container["name"] == "kserve-container"  # the name KServe's controller looks for
    args = container["args"]
    http_port, grpc_port = int(arg(args, "--port")), int(arg(args, "--grpc-port"))
    assert arg(args, "--model-dir") == "/mnt/models" and arg(args, "--model-name") == "{{.Name}}"
    assert arg(args, "--host") == "0.0.0.0"
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"http1": http_port, "h2c": grpc_port}
    assert container["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert container["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert probe_port(container, "readinessProbe") == probe_port(container, "livenessProbe") == http_port
    check_prometheus(spec["annotations"], http_port)
    assert spec["annotations"]["prometheus.kserve.io/port"] == str(http_port)
    assert container["resources"]["limits"]["memory"]
    isvc = load("kserve/inference-service.yaml")
    model = isvc["spec"]["predictor"]["model"]
    assert model["runtime"] == runtime["metadata"]["name"] and model["modelFormat"]["name"] == "onnx"
    assert model["storageUri"]


def test_modelmesh_runtime_wiring():
    runtime = load("modelmesh/serving-runtime.yaml")
    spec = runtime["spec"]
    assert spec["multiModel"] is True and "builtInAdapter" not in spec
    assert {"name": "onnx", "version": "1", "autoSelect": True} in spec["supportedModelFormats"]
    (container,) = spec["containers"]
    args = container["args"]
    http_port, grpc_port = int(arg(args, "--port")), int(arg(args, "--grpc-port"))
    assert spec["grpcEndpoint"] == spec["grpcDataEndpoint"] == f"port:{grpc_port}"
    assert arg(args, "--repository") == "/models"  # where ModelMesh's puller puts the models
    assert "--modelmesh" in args and "--no-load" in args
    # ModelMesh's validator, and the ports of the containers it adds to the same pod.
    rules = crd_fields.MODELMESH_RULES
    assert not (rules["forbidden_container_fields"] & set(container))
    assert container["name"] not in rules["reserved_container_names"]
    assert not container["name"].startswith(rules["reserved_prefix"])
    for p in container.get("ports", []):
        assert p["containerPort"] not in rules["reserved_ports"] and p.get("name") not in rules["reserved_port_names"]
    assert http_port not in MODELMESH_POD_PORTS and grpc_port not in MODELMESH_POD_PORTS
    assert container["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert probe_port(container, "livenessProbe") == http_port
    check_prometheus(spec["annotations"], http_port)
    assert spec["annotations"]["prometheus.io/scheme"] == "http"  # ModelMesh's own pod template says https
    predictor = load("modelmesh/predictor.yaml")
    assert predictor["metadata"]["annotations"]["serving.kserve.io/deploymentMode"] == "ModelMesh"
    model = predictor["spec"]["predictor"]["model"]
    assert model["runtime"] == runtime["metadata"]["name"] and model["modelFormat"]["name"] == "onnx"


# --- `ebb serve` with the manifests' args -------------------------------------------------------------------


class Run:
    """A runtime manifest's container run as `ebb serve`: its command with EBB for the image's binary,
    its args with container paths and ports mapped; flags this ebb does not know left out."""

    def __init__(self, manifest, tmp, paths, substitutions=None):
        self.container = load(manifest)["spec"]["containers"][0]
        command, args = self.container["command"], list(self.container["args"])
        assert command[0] == "/opt/ebb/bin/ebb" and command[1:] == ["serve"], command
        for old, new in (substitutions or {}).items():
            args = [a.replace(old, new) for a in args]
        self.ports = {int(arg(args, "--port")): serve_util.free_port(),
                      int(arg(args, "--grpc-port")): serve_util.free_port()}
        mapped = [paths.get(a, str(self.ports.get(int(a), a)) if a.isdigit() else a) for a in args]
        self.args, unknown = serve_util.split_unknown(mapped, serve_util.serve_flags(EBB))
        assert not unknown, f"the manifest passes flags `ebb serve` does not accept: {unknown}"
        env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
        env["EBB_CACHE_DIR"] = os.path.join(tmp, "cache")
        self.http_port = self.port(int(arg(args, "--port")))
        self.grpc_port = self.port(int(arg(args, "--grpc-port")))
        self.server = serve_util.Server([EBB, "serve", *self.args], self.http_port, env=env, cwd=tmp)

    def port(self, manifest_port):
        return self.ports[manifest_port]

    def probe(self, name):
        probe = self.container[name]["httpGet"]
        status, body = serve_util.http(self.port(probe_port(self.container, name)), probe["path"])
        assert status == 200, (name, status, body)

    def check_common(self, annotations):
        """Liveness (and readiness, where the manifest has one), metrics where Prometheus is pointed,
        and the gRPC port answering grpc.health.v1."""
        self.server.wait_live()
        self.probe("livenessProbe")
        if "readinessProbe" in self.container:
            self.server.wait_ready()
            self.probe("readinessProbe")
        status, text = serve_util.http(self.port(int(annotations["prometheus.io/port"])),
                                       annotations["prometheus.io/path"])
        assert status == 200 and b"# TYPE ebb_" in text
        with grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}") as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=30)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING


def grpc_infer_tiny(port, model_name, model_file):
    x = (np.arange(64, dtype=np.float32).reshape(1, 64) - 16) / 8
    request = pb.ModelInferRequest(model_name=model_name, inputs=[
        pb.ModelInferRequest.InferInputTensor(name="x", datatype="FP32", shape=[1, 64])])
    request.raw_input_contents.append(x.tobytes())
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        reply = pb_grpc.GRPCInferenceServiceStub(channel).ModelInfer(request, timeout=60)
    y = np.frombuffer(reply.raw_output_contents[0], dtype=np.float32).reshape(1, 64)
    np.testing.assert_allclose(y, serve_util.tiny_reference(model_file, x), rtol=1e-5, atol=1e-5)


def test_kserve_runtime_args_run(tmp_path):
    """KServe's part: the storage initializer's /mnt/models holds model.onnx, {{.Name}} is the
    InferenceService's name; then the probes, an inference over HTTP and gRPC under that name."""
    tmp = str(tmp_path)
    name = load("kserve/inference-service.yaml")["metadata"]["name"]
    mnt = os.path.join(tmp, "mnt-models")
    serve_util.copy_model(MODELS, "tiny", mnt)
    run = Run("kserve/cluster-serving-runtime.yaml", tmp, {"/mnt/models": mnt}, {"{{.Name}}": name})
    try:
        run.check_common(load("kserve/cluster-serving-runtime.yaml")["spec"]["annotations"])
        status, body = serve_util.http(run.http_port, f"/v2/models/{name}/ready")
        assert status == 200, body
        serve_util.infer_tiny_http(run.http_port, name, os.path.join(mnt, "model.onnx"))
        grpc_infer_tiny(run.grpc_port, name, os.path.join(mnt, "model.onnx"))
    finally:
        assert run.server.stop() == 0, run.server.output()


# mmesh.ModelRuntime (ModelMesh's model-runtime.proto), encoded by hand: ebb's own stubs belong to
# the ModelMesh tests; here only the calls ModelMesh makes first.
def _field(number, value):
    data = value.encode()
    return bytes([number << 3 | 2]) + _varint(len(data)) + data


def _varint(n):
    out = b""
    while True:
        byte, n = n & 0x7F, n >> 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


def _decode(data):
    """{field number: last value} of a message's varint and length-delimited fields."""
    fields, i = {}, 0
    while i < len(data):
        key, i = _read_varint(data, i)
        if key & 7 == 0:
            fields[key >> 3], i = _read_varint(data, i)
        elif key & 7 == 2:
            n, i = _read_varint(data, i)
            fields[key >> 3], i = data[i:i + n], i + n
        else:
            raise AssertionError(f"wire type {key & 7}")
    return fields


def _read_varint(data, i):
    n = shift = 0
    while True:
        n |= (data[i] & 0x7F) << shift
        shift += 7
        i += 1
        if not data[i - 1] & 0x80:
            return n, i


def test_hand_encoded_messages_are_protobuf():
    """The encoder and decoder above against protobuf's own, on messages of the same shapes."""
    request = pb.ModelInferRequest.FromString(_field(1, "tiny-mm__isvc") + _field(2, "é" * 200))
    assert request.model_name == "tiny-mm__isvc" and request.model_version == "é" * 200
    reply = health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.NOT_SERVING)
    assert _decode(reply.SerializeToString()) == {1: 2}
    size = pb.InferParameter(int64_param=3 << 40).SerializeToString()
    assert _decode(size) == {2: 3 << 40}  # int64_param is field 2


def mmesh_call(channel, method, request=b""):
    call = channel.unary_unary(f"/mmesh.ModelRuntime/{method}", request_serializer=lambda b: b,
                               response_deserializer=lambda b: b)
    return _decode(call(request, timeout=60))


def test_modelmesh_runtime_args_run(tmp_path):
    """ModelMesh's part: runtimeStatus on grpcEndpoint, the puller's copy in /models/<id>/, loadModel,
    then inference on grpcDataEndpoint with the model id as model_name, and unloadModel."""
    tmp = str(tmp_path)
    models = os.path.join(tmp, "models")
    os.makedirs(models)
    spec = load("modelmesh/serving-runtime.yaml")["spec"]
    run = Run("modelmesh/serving-runtime.yaml", tmp, {"/models": models})
    try:
        run.check_common(spec["annotations"])
        endpoint = run.port(int(spec["grpcEndpoint"].split(":")[1]))
        data_endpoint = run.port(int(spec["grpcDataEndpoint"].split(":")[1]))
        model_id = "tiny-mm__isvc-0123456789"
        folder = os.path.join(models, model_id)
        serve_util.copy_model(MODELS, "tiny", folder)
        key = json.dumps({"model_type": {"name": "onnx", "version": "1"}})
        with grpc.insecure_channel(f"127.0.0.1:{endpoint}") as channel:
            status = mmesh_call(channel, "runtimeStatus")
            assert status.get(1) == 1 and status.get(2, 0) > 0, status  # READY, capacityInBytes
            loaded = mmesh_call(channel, "loadModel", _field(1, model_id) + _field(2, "onnx") +
                                _field(3, folder + "/") + _field(4, key))
            size = loaded.get(1) or mmesh_call(channel, "modelSize", _field(1, model_id)).get(1)
            assert size and size < status[2], (loaded, status)
            grpc_infer_tiny(data_endpoint, model_id, os.path.join(folder, "model.onnx"))
            mmesh_call(channel, "unloadModel", _field(1, model_id))
    finally:
        assert run.server.stop() == 0, run.server.output()
