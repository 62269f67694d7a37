"""ModelMesh's side of the model-runtime SPI (mmesh.ModelRuntime), played over real gRPC against
`ebb serve --modelmesh` as a child process: runtimeStatus, loads beyond the capacity (the pool
evicts idle models, least recently used first), inference with the model id injected (model_name
and the mm-model-id header), modelSize, unloadModel with memory back to the floor, a cancelled
load followed by unloadModel, paths outside the model root refused, runtimeStatus purging, the
files beside a model (labels.txt, config.json) confined like the model: no link out, no FIFO or
device, size-capped, refused at once; and models with external data (predicted and charged with
their weights, new weights served after a reload, weights outside the model's folder refused).

Memory is the server's real RSS (/proc/<pid>/status). Run by ctest (tests/CMakeLists.txt) with
EBB_BINARY, EBB_MODELS_DIR, EBB_GENERATED_MODELS_DIR and EBB_GRPC_PYTHON (the generated stubs).
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
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
import model_runtime_pb2 as mm  # noqa: E402
import model_runtime_pb2_grpc as mm_grpc  # noqa: E402

EBB = os.environ["EBB_BINARY"]
MODELS = os.environ["EBB_MODELS_DIR"]
GENERATED = os.environ["EBB_GENERATED_MODELS_DIR"]
MiB = 1 << 20
# RSS bounds do not hold under a sanitizer's allocator (set by tests/CMakeLists.txt; 1 outside it).
RSS_BOUNDS_HOLD = os.environ.get("EBB_RSS_BOUNDS_HOLD", "1") == "1"
# The models ModelMesh is asked to load, in this order: the bundled ones and six more copies of
# waifu2x (other bytes, the same graph). Their measured charges here, on a first load in the process
# (the optimized-model cache empty): ppocr_det 8.0 MiB, each waifu2x 1.1-1.3 MiB, the others under
# 0.3 MiB. A charge is never below the model's file size: ppocr_det 4.5 MiB, waifu2x 1.1 MiB.
BUNDLED = ["ppocr_det", "waifu2x_scale2x", "convnet", "tiny", "mixed", "twochannel", "strings"]
COPIES = {f"waifu2x_{c}": "waifu2x_scale2x" for c in "bcdefg"}
ROUND = BUNDLED + list(COPIES)
# Room for ppocr_det with an inference's transient beside it, but not for the whole round whatever
# RSS reads: the file sizes alone (12.3 MiB) exceed it, so the pool has to evict.
BUDGET = 12 * MiB


def rss(pid, key="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise AssertionError(f"no {key}")


class Server(ServeProcess):
    """`ebb serve` as a child process on free loopback ports."""

    def __init__(self, *args, cache=None, extra_env=None):
        env = dict(os.environ)
        if cache:
            env["EBB_CACHE_DIR"] = cache
        env.update(extra_env or {})
        super().__init__(EBB, *args, env=env)
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}")
        grpc.channel_ready_future(self.channel).result(timeout=30)
        self.mesh = mm_grpc.ModelRuntimeStub(self.channel)
        self.v2 = pb_grpc.GRPCInferenceServiceStub(self.channel)

    def rss(self, key="VmRSS"):
        return rss(self.proc.pid, key)

    def index(self):
        return {m.name: m.state for m in self.v2.RepositoryIndex(pb.RepositoryIndexRequest()).models}

    def load(self, model_id, path, **kwargs):
        return self.mesh.loadModel(mm.LoadModelRequest(modelId=model_id, modelType="onnx", modelPath=path,
                                                       modelKey="{}"), **kwargs)

    def stop(self):
        self.channel.close()
        self.proc.terminate()
        return self.proc.wait(timeout=120)


def copy_model(src_folder, dst_folder, extra=b""):
    os.makedirs(dst_folder, exist_ok=True)
    with open(os.path.join(src_folder, "model.onnx"), "rb") as f:
        data = f.read()
    with open(os.path.join(dst_folder, "model.onnx"), "wb") as f:
        f.write(data + extra)  # extra: a doc_string field appended, other bytes for the same graph


def zeros_request(v2, model_id, header=None):
    """A ModelInfer request of zeros for the model's inputs, as ModelMesh forwards it."""
    meta = v2.ModelMetadata(pb.ModelMetadataRequest(name=model_id),
                            metadata=[("mm-model-id", header)] if header else None)
    request = pb.ModelInferRequest(model_name=model_id)
    sizes = {"FP32": 4, "FP64": 8, "INT64": 8, "INT32": 4, "FP16": 2, "UINT8": 1, "INT8": 1, "BOOL": 1}
    for t in meta.inputs:
        shape = [d if d >= 0 else (1 if i == 0 else 64) for i, d in enumerate(t.shape)]
        tensor = request.inputs.add(name=t.name, datatype=t.datatype, shape=shape)
        count = int(np.prod(shape))
        if t.datatype == "BYTES":
            tensor.contents.bytes_contents.extend([b"x"] * count)
        else:
            request.raw_input_contents.append(bytes(count * sizes[t.datatype]))
    assert not (request.raw_input_contents and any(t.datatype == "BYTES" for t in meta.inputs))
    return request


@pytest.fixture(scope="module")
def tmp():
    folder = tempfile.mkdtemp(prefix="ebb_modelmesh_")
    yield folder
    shutil.rmtree(folder)


@pytest.fixture(scope="module")
def root(tmp):
    """The puller's folder: /models/<id>/model.onnx for each model, plus a conv model and things outside."""
    root = os.path.join(tmp, "models")
    for name in BUNDLED:
        copy_model(os.path.join(MODELS, name), os.path.join(root, name))
    for name, source in COPIES.items():
        copy_model(os.path.join(MODELS, source), os.path.join(root, name), extra=b"\x32\x01" + name[-1].encode())
    copy_model(os.path.join(GENERATED, "conv_100mb"), os.path.join(root, "big"), extra=b"\x32\x03big")
    copy_model(os.path.join(MODELS, "tiny"), os.path.join(tmp, "outside", "tiny"))
    os.symlink(os.path.join(tmp, "outside", "tiny"), os.path.join(root, "escape"))
    os.makedirs(os.path.join(root, "empty"))
    return root


@pytest.fixture(scope="module")
def server(tmp, root):
    s = Server("--modelmesh", "--repository", root, "--no-load", "--memory-budget", str(BUDGET),
               cache=os.path.join(tmp, "cache"))
    yield s
    assert s.stop() == 0


def test_runtime_status(server):
    status = server.mesh.runtimeStatus(mm.RuntimeStatusRequest())
    assert status.status == mm.RuntimeStatusResponse.READY
    assert status.capacityInBytes == BUDGET
    assert status.maxLoadingConcurrency == 1
    assert status.modelLoadingTimeoutMs > 0
    assert status.defaultModelSizeInBytes > 0
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", status.runtimeVersion)
    service = "inference.GRPCInferenceService"
    assert set(status.methodInfos) == {f"{service}/{m}" for m in
                                       ["ModelInfer", "ModelMetadata", "ModelReady", "ModelConfig",
                                        "ModelStatistics"]}
    for info in status.methodInfos.values():
        assert list(info.idInjectionPath) == [1]  # model_name / name is field 1 of each request
    # The injection path really is model_name: field number 1 of ModelInferRequest.
    assert pb.ModelInferRequest.DESCRIPTOR.fields_by_number[1].name == "model_name"
    assert pb.ModelMetadataRequest.DESCRIPTOR.fields_by_number[1].name == "name"


def play_round(server, root, ids):
    """ModelMesh's part for one round: predictModelSize and loadModel for every model of ROUND, one
    by one, beyond the capacity; inference with the model ids injected; modelSize; unloadModel for
    every one."""
    sizes, predicted = {}, {}
    for name in ROUND:
        predicted[name] = server.mesh.predictModelSize(
            mm.PredictModelSizeRequest(modelId=ids[name], modelPath=os.path.join(root, name))).sizeInBytes
        was_ready = {n for n, state in server.index().items() if state == "READY"}
        before = server.rss()
        sizes[name] = server.load(ids[name], os.path.join(root, name)).sizeInBytes
        grew = server.rss() - before
        index = server.index()
        # sizeInBytes is the pool's measured charge: the RSS growth over the load (measured inside
        # the load, heap trimmed before and after), never below the file size, so it matches what
        # we see from outside, when the load evicted nothing (an eviction gives memory back
        # meanwhile). Within 25% or 3 MiB: the pool trims the heap before it measures, we cannot
        # from outside (measured before the malloc thresholds were fixed: ppocr_det charged 11.2 MiB,
        # seen growing 9.1 MiB from outside).
        assert sizes[name] >= os.path.getsize(os.path.join(root, name, "model.onnx"))
        if {n for n, state in index.items() if state == "READY"} == was_ready | {ids[name]}:
            assert abs(sizes[name] - grew) <= max(0.25 * grew, 3 * MiB), (name, sizes[name], grew)
        assert predicted[name] >= sizes[name], (name, predicted[name], sizes[name])
        # The budget holds after every load: the models loaded together fit the capacity.
        ready = [n for n in ROUND if index.get(ids[n]) == "READY"]
        held = sum(server.mesh.modelSize(mm.ModelSizeRequest(modelId=ids[n])).sizeInBytes for n in ready)
        assert held <= BUDGET, (ready, held)
        assert index[ids[name]] == "READY"
    # The file sizes alone exceed the budget (BUDGET), so the loads evicted, the least recently
    # used first.
    assert sum(sizes.values()) > BUDGET, "the test needs loads beyond the capacity"
    index = server.index()
    evicted = [n for n in ROUND if index[ids[n]] == "UNAVAILABLE"]
    assert evicted and evicted[0] == BUNDLED[0], evicted

    # Inference with the model id injected: in model_name (as ModelMesh rewrites it) ...
    for name in ["tiny", "mixed", "strings", "twochannel"]:
        reply = server.v2.ModelInfer(zeros_request(server.v2, ids[name]))
        assert reply.model_name == ids[name] and len(reply.outputs) > 0
    # ... and in the mm-model-id header, which names the model whatever model_name says.
    request = zeros_request(server.v2, ids["tiny"], header=ids["tiny"])
    request.model_name = "not-this-one"
    reply = server.v2.ModelInfer(request, metadata=[("mm-model-id", ids["tiny"])])
    assert reply.model_name == ids["tiny"]
    ready = server.v2.ModelReady(pb.ModelReadyRequest(name="whatever"), metadata=[("mm-model-id", ids["tiny"])])
    assert ready.ready
    with pytest.raises(grpc.RpcError) as e:
        server.v2.ModelInfer(request)  # without the header: the name in the request, unknown
    assert e.value.code() == grpc.StatusCode.NOT_FOUND
    # An evicted model stays registered and comes back on its next request.
    reply = server.v2.ModelInfer(zeros_request(server.v2, ids[evicted[0]]))
    assert reply.model_name == ids[evicted[0]]

    # modelSize: the measured charge (an inference's memory is reserved per run, not part of it).
    for name in ["tiny", "mixed"]:
        size = server.mesh.modelSize(mm.ModelSizeRequest(modelId=ids[name])).sizeInBytes
        assert size >= sizes[name]
    with pytest.raises(grpc.RpcError) as e:
        server.mesh.modelSize(mm.ModelSizeRequest(modelId="never-loaded"))
    assert e.value.code() == grpc.StatusCode.NOT_FOUND

    # unloadModel: every one (twice: idempotent).
    for name in ROUND:
        server.mesh.unloadModel(mm.UnloadModelRequest(modelId=ids[name]))
        server.mesh.unloadModel(mm.UnloadModelRequest(modelId=ids[name]))
    server.mesh.unloadModel(mm.UnloadModelRequest(modelId="never-loaded"))
    assert not any(i in server.index() for i in ids.values())


def test_loads_beyond_capacity_inference_sizes_unload_and_memory_back(server, root):
    if not RSS_BOUNDS_HOLD:  # charges are RSS growth: under ASan ppocr_det alone is charged 94 MiB
        pytest.skip("the budget's charges are RSS, which a sanitizer's allocator inflates many times")
    server.mesh.runtimeStatus(mm.RuntimeStatusRequest())
    time.sleep(0.5)
    start = server.rss()
    ids = {name: f"{name}__isvc-6b2eb0b8bf" for name in ROUND}
    play_round(server, root, ids)
    time.sleep(0.5)
    floor = server.rss()
    # The first round leaves what the first use of ORT in the process keeps (measured here: 3.0-3.8
    # MiB). Before ebb fixed glibc's malloc thresholds (src/ort/ort_context.cc, FixMallocThresholds) it
    # left 8.8-11.5 MiB, more or less depending on the order of evictions and on-demand reloads:
    # glibc had raised its mmap threshold after ORT freed large blocks, and the large blocks it then
    # kept in the heap arenas malloc_trim did not all give back.
    assert floor - start <= 6 * MiB, (start, floor)

    # The second round, under other ids: the memory comes back to the floor. Tolerance 3 MiB:
    # measured here, RSS after it 0.4-0.7 MiB above the floor, while ppocr_det alone holds its 4.5 MiB
    # of weights: a model left loaded, or a load and unload that leak 3 MiB a round, show.
    play_round(server, root, {name: f"{name}__isvc-0c1f5e2a9d" for name in ROUND})
    time.sleep(0.5)
    back = server.rss()
    assert back - floor <= 3 * MiB, (floor, back)


def test_a_model_larger_than_the_budget_is_refused(server):
    # Its file alone (100 MB) exceeds the 12 MiB budget: no eviction can make room, so the pool
    # refuses before loading, and nothing stays attached.
    with pytest.raises(grpc.RpcError) as e:
        server.load("big__isvc-0", "big")
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "big__isvc-0" not in server.index()


@pytest.mark.parametrize("name", ["ppocr_det", "tiny"])
def test_sizes_match_the_memory_a_load_adds(tmp, root, name):
    """ModelMesh's two size promises for a first load in a fresh server (as in a new pod): the
    predicted size is at least what the load adds to the server's RSS, and loadModel's sizeInBytes
    (and modelSize, the same before any inference) is within 20% of it. tiny is where the memory
    outside the pool's measurement counts (charge 0.6-0.8 MiB, RSS growth 0.8-1.1 MiB measured here):
    without it, its size was 0.69-0.77 of the growth."""
    if not RSS_BOUNDS_HOLD:
        pytest.skip("the sizes are RSS, which a sanitizer's allocator inflates many times")
    s = Server("--modelmesh", "--repository", root, "--no-load", cache=os.path.join(tmp, "cache_sizes_" + name))
    try:
        s.mesh.runtimeStatus(mm.RuntimeStatusRequest())
        model_id = name + "__isvc-5a1e"
        predicted = s.mesh.predictModelSize(mm.PredictModelSizeRequest(modelId=model_id, modelPath=name)).sizeInBytes
        time.sleep(0.3)  # settle after start-up
        before = s.rss()
        size = s.load(model_id, name).sizeInBytes
        grew = s.rss() - before
        assert predicted >= grew, (name, predicted, grew)
        assert abs(size - grew) <= 0.2 * grew, (name, size, grew)
        assert s.mesh.modelSize(mm.ModelSizeRequest(modelId=model_id)).sizeInBytes == size
    finally:
        assert s.stop() == 0


def test_a_model_measured_larger_than_the_budget_is_refused_and_unloaded(tmp, root):
    # ppocr_det's file (4.5 MiB) fits a 5 MiB budget, so the pool loads it; its first load in a
    # process with an empty optimized-model cache is measured at 8.0 MiB (more under a
    # sanitizer), more than the whole budget: loadModel answers RESOURCE_EXHAUSTED and nothing
    # stays loaded, and the server keeps serving models that fit.
    s = Server("--modelmesh", "--repository", root, "--no-load", "--memory-budget", str(5 * MiB),
               cache=os.path.join(tmp, "cache_alone"))
    try:
        s.mesh.runtimeStatus(mm.RuntimeStatusRequest())
        with pytest.raises(grpc.RpcError) as e:
            s.load("ocr__isvc-2", "ppocr_det")
        assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "cannot fit model 'ocr__isvc-2' even alone" in e.value.details(), e.value.details()
        assert "it was unloaded" in e.value.details(), e.value.details()
        assert s.index().get("ocr__isvc-2") != "READY"
        if RSS_BOUNDS_HOLD:  # a sanitizer's allocator may charge even tiny more than 5 MiB
            assert s.load("tiny__isvc-2", "tiny").sizeInBytes > 0
            reply = s.v2.ModelInfer(zeros_request(s.v2, "tiny__isvc-2"))
            assert reply.model_name == "tiny__isvc-2"
    finally:
        assert s.stop() == 0


def test_cancelled_load_then_unload_leaves_nothing(tmp, root):
    s = Server("--modelmesh", "--repository", root, "--no-load", "--memory-budget", str(1 << 30),
               cache=os.path.join(tmp, "cache_cancel"))
    try:
        s.mesh.runtimeStatus(mm.RuntimeStatusRequest())
        time.sleep(0.5)
        floor = s.rss()
        # A deadline shorter than the load (a 100 MB model: about a second here): ModelMesh then
        # sends unloadModel at once, while the load is still running in the server.
        with pytest.raises(grpc.RpcError) as e:
            s.load("big__isvc-1", "big", timeout=0.15)
        assert e.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        s.mesh.unloadModel(mm.UnloadModelRequest(modelId="big__isvc-1"))
        assert "big__isvc-1" not in s.index()
        with pytest.raises(grpc.RpcError) as e:
            s.v2.ModelReady(pb.ModelReadyRequest(name="big__isvc-1"))
        assert e.value.code() == grpc.StatusCode.NOT_FOUND
        # An explicit cancel, the unload right behind it.
        future = s.mesh.loadModel.future(mm.LoadModelRequest(modelId="big__isvc-2", modelType="onnx",
                                                             modelPath="big"))
        time.sleep(0.1)
        future.cancel()
        s.mesh.unloadModel(mm.UnloadModelRequest(modelId="big__isvc-2"))
        time.sleep(3.0)  # a load the server still ran must have undone itself by now
        assert "big__isvc-2" not in s.index()
        if RSS_BOUNDS_HOLD:
            assert s.rss() - floor <= 8 * MiB, "a cancelled load left memory behind"
        # Loaded for real it takes ~100 MB, so the check above would see it; unloadModel gives it back.
        size = s.load("big__isvc-3", "big").sizeInBytes
        assert size > 90 * MiB
        if RSS_BOUNDS_HOLD:
            assert s.rss() - floor > 90 * MiB
        s.mesh.unloadModel(mm.UnloadModelRequest(modelId="big__isvc-3"))
        time.sleep(0.5)
        if RSS_BOUNDS_HOLD:
            assert s.rss() - floor <= 8 * MiB
    finally:
        assert s.stop() == 0


def test_paths_outside_the_root_and_bad_requests(server, root, tmp):
    cases = [
        ("../outside/tiny", grpc.StatusCode.INVALID_ARGUMENT),
        (os.path.join(tmp, "outside", "tiny"), grpc.StatusCode.INVALID_ARGUMENT),
        ("escape", grpc.StatusCode.INVALID_ARGUMENT),           # a symlink pointing out
        ("tiny/../../outside/tiny", grpc.StatusCode.INVALID_ARGUMENT),
        ("/etc/passwd", grpc.StatusCode.INVALID_ARGUMENT),
        ("missing", grpc.StatusCode.FAILED_PRECONDITION),
        ("empty", grpc.StatusCode.FAILED_PRECONDITION),         # a folder without a model
        ("", grpc.StatusCode.INVALID_ARGUMENT),
    ]
    for path, code in cases:
        for call in (lambda: server.load("x", path),
                     lambda: server.mesh.predictModelSize(mm.PredictModelSizeRequest(modelId="x", modelPath=path))):
            with pytest.raises(grpc.RpcError) as e:
                call()
            assert e.value.code() == code, (path, e.value.details())
    assert "x" not in server.index()
    for bad_id in ["a/b", "../x", ".hidden", "", "x" * 200, "sp ace"]:
        with pytest.raises(grpc.RpcError) as e:
            server.load(bad_id, "tiny")
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, bad_id
    # A broken model file: a load was attempted and failed; nothing stays attached.
    os.makedirs(os.path.join(root, "broken"), exist_ok=True)
    with open(os.path.join(root, "broken", "model.onnx"), "w") as f:
        f.write("not a model")
    with pytest.raises(grpc.RpcError) as e:
        server.load("broken__isvc-1", "broken")
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    assert "broken__isvc-1" not in server.index()
    # The server keeps serving.
    assert server.load("tiny__isvc-ok", "tiny").sizeInBytes > 0
    server.mesh.unloadModel(mm.UnloadModelRequest(modelId="tiny__isvc-ok"))


def test_files_beside_a_model_are_confined_and_never_block(tmp):
    """Issue 17, finding 4, over loadModel: labels.txt linked to a file outside the model root was
    served by classification, a FIFO config.json blocked loadModel for good (and unloadModel of that
    id behind it), config.json -> /dev/zero grew memory ~750 MiB/s. Each is now refused at once with a
    message naming the file, and the server keeps serving."""
    pulled = os.path.join(tmp, "beside")
    repository = os.path.join(tmp, "beside_repository")
    os.makedirs(repository)
    secret = os.path.join(tmp, "secret.txt")
    with open(secret, "w") as f:
        f.write("SECRET-0\nSECRET-1\nSECRET-2\nSECRET-3\n")
    for name, source in [("tiny", "tiny"), ("labels_link_out", "mixed"), ("config_fifo", "tiny"),
                         ("config_zero", "tiny"), ("config_huge", "tiny")]:
        copy_model(os.path.join(MODELS, source), os.path.join(pulled, name))
    os.symlink(secret, os.path.join(pulled, "labels_link_out", "labels.txt"))
    os.mkfifo(os.path.join(pulled, "config_fifo", "config.json"))
    os.symlink("/dev/zero", os.path.join(pulled, "config_zero", "config.json"))
    with open(os.path.join(pulled, "config_huge", "config.json"), "w") as f:
        f.truncate(1 << 30)  # 1 GiB, sparse
    cases = [
        ("labels_link_out", "labels.txt' resolves outside"),
        ("config_fifo", "config.json' is a FIFO, not a regular file"),
        ("config_zero", "config.json' resolves outside"),
        ("config_huge", "is 1073741824 bytes, larger than the limit of 64 KiB for config.json"),
    ]

    def hung(signum, frame):
        raise TimeoutError("the server did not answer within 120 s")
    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(120)  # a hang fails this test rather than ctest's whole run
    s = Server("--modelmesh", "--repository", repository, "--model-root", pulled, "--no-load",
               cache=os.path.join(tmp, "cache_beside"))
    try:
        s.load("tiny__warm", "tiny")
        s.mesh.unloadModel(mm.UnloadModelRequest(modelId="tiny__warm"))
        before = s.rss()
        for name, fragment in cases:
            model_id = f"{name}__isvc"
            start = time.monotonic()
            with pytest.raises(grpc.RpcError) as e:
                s.load(model_id, name, timeout=10)
            assert time.monotonic() - start < 5, name
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, (name, e.value.details())
            assert fragment in e.value.details(), (name, e.value.details())
            assert "SECRET" not in e.value.details()
            s.mesh.unloadModel(mm.UnloadModelRequest(modelId=model_id), timeout=10)
            assert model_id not in s.index()
        if RSS_BOUNDS_HOLD:
            assert s.rss() - before <= 16 * MiB, "refusing a file cost memory"
        assert s.load("tiny__ok", "tiny", timeout=30).sizeInBytes > 0
        reply = s.v2.ModelInfer(zeros_request(s.v2, "tiny__ok"), timeout=30)
        assert reply.model_name == "tiny__ok"
        s.mesh.unloadModel(mm.UnloadModelRequest(modelId="tiny__ok"))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        assert s.stop() == 0


def infer_ones(server, model_id, side):
    request = pb.ModelInferRequest(model_name=model_id)
    request.inputs.add(name="x", datatype="FP32", shape=[1, side])
    request.raw_input_contents.append(np.ones((1, side), np.float32).tobytes())
    reply = server.v2.ModelInfer(request, metadata=[("mm-model-id", model_id)])
    return np.frombuffer(reply.raw_output_contents[0], np.float32)


def test_models_with_external_data(server, root, tmp):
    # 4 MiB of weights in weights.bin, a 150-byte model.onnx; under a sanitizer 16 KiB, since its allocator
    # makes a 4 MiB model's measured charge (27 MB under ASan) exceed the module server's 12 MiB budget.
    side = 1024 if RSS_BOUNDS_HOLD else 64
    path = make_test_models.write_external(make_test_models.make_matmul(side, 1.0), root, "ext", quiet=True)
    files = os.path.getsize(path) + os.path.getsize(os.path.join(root, "ext", "weights.bin"))
    predicted = server.mesh.predictModelSize(mm.PredictModelSizeRequest(modelId="ext__isvc-1", modelPath="ext"))
    assert predicted.sizeInBytes == int(np.ceil(files * 1.5)) + 16 * MiB, "the weights file counts"
    assert server.load("ext__isvc-1", "ext").sizeInBytes >= files
    assert (infer_ones(server, "ext__isvc-1", side) == side).all()
    # New weights renamed over the old ones: unloadModel and loadModel serve them.
    new = os.path.join(root, "ext", "weights.new")
    np.full((side, side), 2.0, np.float32).tofile(new)
    os.replace(new, os.path.join(root, "ext", "weights.bin"))
    server.mesh.unloadModel(mm.UnloadModelRequest(modelId="ext__isvc-1"))
    server.load("ext__isvc-1", "ext")
    assert (infer_ones(server, "ext__isvc-1", side) == 2 * side).all()
    server.mesh.unloadModel(mm.UnloadModelRequest(modelId="ext__isvc-1"))
    # The whole model folder is confined to the root: weights linked out of it, or missing, are
    # refused by predictModelSize and loadModel alike; nothing stays attached.
    small = make_test_models.make_matmul(64, 1.0)
    for name in ["ext_link", "ext_missing"]:
        make_test_models.write_external(small, root, name, quiet=True)
        os.remove(os.path.join(root, name, "weights.bin"))
    np.ones((64, 64), np.float32).tofile(os.path.join(tmp, "outside.bin"))
    os.symlink(os.path.join(tmp, "outside.bin"), os.path.join(root, "ext_link", "weights.bin"))
    for name, predict_code, says in [("ext_link", grpc.StatusCode.INVALID_ARGUMENT, "outside the model's folder"),
                                     ("ext_missing", grpc.StatusCode.FAILED_PRECONDITION, "does not exist")]:
        with pytest.raises(grpc.RpcError) as e:
            server.mesh.predictModelSize(mm.PredictModelSizeRequest(modelId=name, modelPath=name))
        assert e.value.code() == predict_code and says in e.value.details(), e.value.details()
        with pytest.raises(grpc.RpcError) as e:
            server.load(name + "__isvc-1", name)
        assert e.value.code() == grpc.StatusCode.UNAVAILABLE and says in e.value.details(), e.value.details()
        assert name + "__isvc-1" not in server.index()
    assert server.load("tiny__isvc-ext", "tiny").sizeInBytes > 0, "the server keeps serving"
    server.mesh.unloadModel(mm.UnloadModelRequest(modelId="tiny__isvc-ext"))


def test_runtime_status_purges_loaded_models(server, root):
    for name in ["tiny", "mixed"]:
        server.load(f"{name}__purge", name)
    assert server.index()["tiny__purge"] == "READY"
    server.v2.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name="convnet"))  # a repository folder's
    assert server.index()["convnet"] == "READY"
    status = server.mesh.runtimeStatus(mm.RuntimeStatusRequest())
    assert status.status == mm.RuntimeStatusResponse.READY
    index = server.index()
    assert "tiny__purge" not in index and "mixed__purge" not in index
    assert all(state != "READY" for state in index.values()), index


def test_modelmesh_is_off_by_default_and_needs_a_grpc_port(root):
    plain = Server("--repository", root, "--no-load")
    try:
        with pytest.raises(grpc.RpcError) as e:
            plain.mesh.runtimeStatus(mm.RuntimeStatusRequest())
        assert e.value.code() == grpc.StatusCode.UNIMPLEMENTED
    finally:
        assert plain.stop() == 0
    result = subprocess.run([EBB, "serve", "--modelmesh", "--repository", root, "--grpc-port", "0", "--port", "0"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "--grpc-port" in result.stderr
    result = subprocess.run([EBB, "serve", "--model-root", root, "--repository", root, "--port", "0"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0 and "--modelmesh" in result.stderr


def test_load_and_unloads_racing_a_failing_reload_leave_the_server_serving(tmp):
    """KServe's RepositoryModelLoad, RepositoryModelUnload and ModelMesh's unloadModel of one id, 30 ms
    apart, while the reload fails (its file replaced by 48 MiB that is not a model, so the load hashes
    for a while first): the unloads wait for the load, and whichever wakes after unloadModel removed
    the id must not use it (this corrupted the heap: SIGABRT in malloc_consolidate, 4 runs of 4)."""
    root = os.path.join(tmp, "race_root")
    copy_model(os.path.join(MODELS, "tiny"), os.path.join(root, "good"))
    s = Server("--modelmesh", "--repository", root, "--no-load", cache=os.path.join(tmp, "cache_race"))
    try:
        for round in range(6):
            folder = os.path.join(root, f"m{round}")
            copy_model(os.path.join(MODELS, "tiny"), folder)
            model_id = f"m{round}__isvc"
            s.load(model_id, f"m{round}")
            s.v2.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name=model_id))  # attached, unloaded
            with open(os.path.join(folder, "model.onnx"), "wb") as f:
                f.write(bytes([0x41 + round]) * (48 * MiB))
            results = {}

            def call(name, fn):
                try:
                    fn()
                    results[name] = "OK"
                except grpc.RpcError as e:
                    results[name] = e.code()
            calls = [("load", lambda: s.v2.RepositoryModelLoad(pb.RepositoryModelLoadRequest(model_name=model_id))),
                     ("unload", lambda: s.v2.RepositoryModelUnload(pb.RepositoryModelUnloadRequest(model_name=model_id))),
                     ("unloadModel", lambda: s.mesh.unloadModel(mm.UnloadModelRequest(modelId=model_id)))]
            threads = []
            for name, fn in calls:
                threads.append(threading.Thread(target=call, args=(name, fn)))
                threads[-1].start()
                time.sleep(0.03)
            for t in threads:
                t.join(timeout=60)
            assert s.proc.poll() is None, f"the server died in round {round}: {results}"
            assert results["load"] != "OK", "the reload of a file that is not a model must fail"
            assert results["unloadModel"] == "OK"
            assert results["unload"] in ("OK", grpc.StatusCode.NOT_FOUND), results
            assert model_id not in s.index()
        # Still serving: a good model loads and answers.
        s.load("good__isvc", "good")
        reply = s.v2.ModelInfer(zeros_request(s.v2, "good__isvc"))
        assert reply.outputs[0].name == "y"
    finally:
        assert s.stop() == 0


def test_forgotten_model_ids_leave_no_metric_series(tmp, root):
    """Each ModelMesh id gets metric series (requests, latency, loads, evictions) and statistics; once
    unloadModel forgets the id they go too: 2,000 ids used to grow /metrics to 2.9 MB, ~7.5 KB of RSS
    each. Here 300 ids come and go after 400 others, and /metrics and RSS stay where they were.
    The server's heap is in 4 KiB pages here (EBB_NO_HUGEPAGES): with ebb's default huge-page heap
    (glibc.malloc.hugetlb=1) RSS moves in 2 MiB steps, and a few KB of heap growth that crosses a
    boundary read as 2,154,496 bytes kept (one huge page more, seen in CI and reproduced here)."""
    s = Server("--modelmesh", "--repository", root, "--no-load", cache=os.path.join(tmp, "cache_series"),
               extra_env={"EBB_NO_HUGEPAGES": "1"})

    def metrics():
        with urllib.request.urlopen(f"http://127.0.0.1:{s.http_port}/metrics", timeout=30) as r:
            return r.read().decode()

    def cycle(model_id):
        s.load(model_id, "tiny")
        s.v2.ModelInfer(zeros_request(s.v2, model_id))
        s.mesh.unloadModel(mm.UnloadModelRequest(modelId=model_id))
    try:
        # The process's one-time growth first (heap arenas, gRPC's buffers): measured here, RSS
        # rises over the first ~400 cycles, then stays within +-0.5 MiB up to 1,200.
        for i in range(400):
            cycle(f"warm{i}__isvc")
        before_text, before_rss = metrics(), s.rss()
        for i in range(300):
            cycle(f"tiny{i}__isvc")
        text = metrics()
        assert "tiny1__isvc" not in text and "warm0__isvc" not in text

        def series(t):  # each sample's name and labels, without its value
            return {line.rsplit(" ", 1)[0] for line in t.splitlines() if line and not line.startswith("#")}
        new_series = sorted(series(text) - series(before_text))
        per_model = [k for k in new_series if 'model="' in k]
        assert not per_model, "series of forgotten ids stayed:\n" + "\n".join(per_model)[:3000]
        # Series of the server's own may appear (a histogram's first sample: on a loaded machine a request
        # can wait for memory, ebb_memory_wait_seconds, 17 lines), a few; 300 ids would leave hundreds.
        assert len(new_series) <= 40, "series that stayed:\n" + "\n".join(new_series)[:3000]
        if RSS_BOUNDS_HOLD:
            grew = s.rss() - before_rss
            assert grew <= MiB, f"300 forgotten ids kept {grew} bytes"
        stats = s.v2.ModelStatistics(pb.ModelStatisticsRequest())
        assert not [m.name for m in stats.model_stats if "__isvc" in m.name]
    finally:
        assert s.stop() == 0
