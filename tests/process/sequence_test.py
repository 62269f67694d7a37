"""Operations that span requests, over HTTP and gRPC, on `ebb serve` as a child process: Triton's
sequence parameters (server/core/sequences.h) and the idle release mode (MemoryPolicy release
"idle"), measured on the server's own metrics (ebb_releases_total, the shared arena's reserved
bytes).

The requests carry the sequence parameters exactly as the Triton Python client sends them, since
that client cannot be installed here (tritonclient/http/_utils.py and grpc/_utils.py,
_get_inference_request): once sequence_id is neither 0 nor "", all three parameters are set; over
HTTP as JSON values (the id as given, int or str; the flags as booleans), over gRPC as
parameters["sequence_id"].string_param for a str id, else .int64_param, and
parameters["sequence_start"/"sequence_end"].bool_param.

Run by ctest (tests/CMakeLists.txt) with EBB_BINARY, EBB_MODELS_DIR and EBB_GRPC_PYTHON.
"""

import json
import os
import shutil
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

import grpc
import numpy as np
import pytest
from serve_process import ServeProcess

sys.path.insert(0, os.environ["EBB_GRPC_PYTHON"])
import grpc_service_pb2 as pb  # noqa: E402
import grpc_service_pb2_grpc as pb_grpc  # noqa: E402

EBB = os.environ["EBB_BINARY"]
MODELS = os.environ["EBB_MODELS_DIR"]
MiB = 1 << 20
SIDE = 256  # convnet at 256x256: a run grows the shared arena by ~16 MiB
ARENA = 'ebb_arena_reserved_bytes{arena="cpu:shared"}'


# --- Set-up -----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def workdir():
    tmp = tempfile.mkdtemp(prefix="ebb_sequence_")
    root = os.path.join(tmp, "repo")
    for model in ["tiny", "convnet"]:
        os.makedirs(os.path.join(root, model))
        shutil.copyfile(os.path.join(MODELS, model, "model.onnx"), os.path.join(root, model, "model.onnx"))
    yield tmp
    shutil.rmtree(tmp)


class Server(ServeProcess):
    """`release`: --release's value; None for ebb serve's own default."""

    def __init__(self, workdir, *args, release="operation_end", policy=None):
        extra = []
        if policy is not None:
            path = os.path.join(workdir, f"policy_{time.monotonic_ns()}.json")
            with open(path, "w") as f:
                json.dump(policy, f)
            extra = ["--policy", path]
        super().__init__(EBB, "--repository", os.path.join(workdir, "repo"), *extra, *args, release=release)
        self.grpc = pb_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}"))

    def http(self, path, body=None):
        request = urllib.request.Request(f"http://127.0.0.1:{self.http_port}{path}", data=body,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=120) as reply:
                return reply.status, reply.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()

    def metric(self, sample):
        _, text = self.http("/metrics")
        for line in text.decode().splitlines():
            if line.startswith(sample + " "):
                return float(line.split()[-1])
        return 0.0

    def releases(self, model="convnet"):
        return self.metric(f'ebb_releases_total{{model="{model}"}}')

    def arena(self):
        return self.metric(ARENA)

    def stop(self):
        self.proc.terminate()
        code = self.proc.wait(timeout=120)
        self.drain.join(timeout=10)
        return code


def sequence_parameters(sequence_id, start, end):
    """tritonclient.http: the parameters it adds for infer(..., sequence_id=, sequence_start=, sequence_end=)."""
    if sequence_id != 0 and sequence_id != "":
        return {"sequence_id": sequence_id, "sequence_start": start, "sequence_end": end}
    return {}


def http_infer(server, model="convnet", sequence_id=0, start=False, end=False, side=SIDE, parameters=None):
    if model == "convnet":
        x = np.random.default_rng(1).random((1, 3, side, side), dtype=np.float32)
        inputs = [{"name": "x", "shape": list(x.shape), "datatype": "FP32", "data": x.ravel().tolist()}]
    else:
        inputs = [{"name": "x", "shape": [1, 64], "datatype": "FP32", "data": [0.5] * 64}]
    body = {"inputs": inputs}
    params = dict(sequence_parameters(sequence_id, start, end), **(parameters or {}))
    if params:
        body["parameters"] = params
    return server.http(f"/v2/models/{model}/infer", json.dumps(body).encode())


def grpc_request(model="convnet", sequence_id=0, start=False, end=False, side=SIDE):
    """tritonclient.grpc's _get_inference_request, for the sequence part."""
    request = pb.ModelInferRequest(model_name=model)
    if model == "convnet":
        x = np.random.default_rng(1).random((1, 3, side, side), dtype=np.float32)
        request.inputs.add(name="x", datatype="FP32", shape=list(x.shape))
    else:
        x = np.full((1, 64), 0.5, dtype=np.float32)
        request.inputs.add(name="x", datatype="FP32", shape=[1, 64])
    request.raw_input_contents.append(x.tobytes())
    if sequence_id != 0 and sequence_id != "":
        if isinstance(sequence_id, str):
            request.parameters["sequence_id"].string_param = sequence_id
        else:
            request.parameters["sequence_id"].int64_param = sequence_id
        request.parameters["sequence_start"].bool_param = start
        request.parameters["sequence_end"].bool_param = end
    return request


def wait_for(condition, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


# --- Sequences under the library's default release mode (operation_end) ------------------------

@pytest.fixture(scope="module")
def server(workdir):
    s = Server(workdir, "--max-sequences", "3")
    assert http_infer(s)[0] == 200  # loaded and measured once
    yield s
    assert s.stop() == 0


def run_sequence(send, count):
    for i in range(count):
        send(i == 0, i == count - 1)


def test_http_sequence_releases_once_at_its_end(server):
    floor = server.arena()
    before = server.releases()
    for i in range(5):
        status, body = http_infer(server, sequence_id=11, start=i == 0, end=False)
        assert status == 200, body
        assert server.releases() == before, "a request of an open sequence released"
        assert server.arena() > floor + 4 * MiB, "the arena went back in the middle of the sequence"
    assert server.metric("ebb_sequences_open") == 1
    status, body = http_infer(server, sequence_id=11, end=True)
    assert status == 200, body
    assert server.releases() == before + 1
    assert server.arena() <= floor + MiB
    assert server.metric("ebb_sequences_open") == 0
    # Outside a sequence each request is its own operation: one release each.
    http_infer(server)
    http_infer(server)
    assert server.releases() == before + 3


@pytest.mark.parametrize("sequence_id", [12, "job-12"])
def test_grpc_sequence_releases_once_at_its_end(server, sequence_id):
    floor = server.arena()
    before = server.releases()
    for i in range(4):
        server.grpc.ModelInfer(grpc_request(sequence_id=sequence_id, start=i == 0, end=i == 3))
        if i < 3:
            assert server.releases() == before
            assert server.arena() > floor + 4 * MiB
    assert server.releases() == before + 1
    assert server.arena() <= floor + MiB


def test_one_request_with_start_and_end_is_a_whole_operation(server):
    before = server.releases()
    assert http_infer(server, sequence_id=13, start=True, end=True)[0] == 200
    assert server.releases() == before + 1
    assert server.metric("ebb_sequences_open") == 0


def test_unknown_ids_are_refused_as_triton_refuses_them(server):
    message = ("inference request for sequence 99 to model 'convnet' must specify the START flag on the first "
               "request of the sequence")
    status, body = http_infer(server, sequence_id=99)
    assert status == 400 and json.loads(body)["error"] == message
    with pytest.raises(grpc.RpcError) as e:
        server.grpc.ModelInfer(grpc_request(sequence_id=99, end=True))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and e.value.details() == message
    # 7 and "7" are different ids; an ended id is unknown again.
    assert http_infer(server, sequence_id=7, start=True)[0] == 200
    status, body = http_infer(server, sequence_id="7")
    assert status == 400 and "sequence 7 to model" in json.loads(body)["error"]
    assert http_infer(server, sequence_id=7, end=True)[0] == 200
    assert http_infer(server, sequence_id=7)[0] == 400
    # Without an id (0 or "") the flags mean nothing, as in Triton: a plain request.
    assert http_infer(server, parameters={"sequence_id": 0, "sequence_start": False, "sequence_end": True})[0] == 200


def test_a_failed_last_request_still_closes_and_releases(server):
    floor = server.arena()
    assert http_infer(server, sequence_id=51, start=True)[0] == 200
    assert server.arena() > floor + 4 * MiB
    body = {"inputs": [{"name": "y", "shape": [1, 64], "datatype": "FP32", "data": [0.5] * 64}],
            "parameters": sequence_parameters(51, False, True)}
    status, reply = server.http("/v2/models/convnet/infer", json.dumps(body).encode())
    assert status == 400 and "has no input named 'y'" in json.loads(reply)["error"]
    assert server.metric("ebb_sequences_open") == 0
    assert server.arena() <= floor + MiB


def test_a_reused_open_id_restarts_the_sequence_as_in_triton(server):
    before = server.releases()
    assert http_infer(server, sequence_id=21, start=True)[0] == 200
    assert http_infer(server, sequence_id=21, start=True)[0] == 200  # Triton: a warning, the new one goes on
    assert server.metric("ebb_sequences_open") == 1
    assert server.releases() == before
    assert http_infer(server, sequence_id=21, end=True)[0] == 200
    assert server.releases() == before + 1


def test_wrong_parameter_types_get_clear_errors(server):
    for params, text in [({"sequence_id": True}, "parameters.sequence_id must be a non-negative integer or a string"),
                         ({"sequence_id": -3}, "parameters.sequence_id must be a non-negative integer or a string"),
                         ({"sequence_id": 1.5}, "parameters.sequence_id must be a non-negative integer or a string"),
                         ({"sequence_id": 5, "sequence_start": "yes"}, "parameters.sequence_start must be true or false"),
                         ({"sequence_id": 5, "sequence_end": 1}, "parameters.sequence_end must be true or false")]:
        status, body = http_infer(server, parameters=params)
        assert status == 400 and text in json.loads(body)["error"], (params, body)
    request = grpc_request()
    request.parameters["sequence_id"].bool_param = True
    with pytest.raises(grpc.RpcError) as e:
        server.grpc.ModelInfer(request)
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.details() == "invalid value type for 'sequence_id' parameter, expected int64_param or string_param."
    request = grpc_request(sequence_id=5, start=True)
    request.parameters["sequence_start"].int64_param = 1
    with pytest.raises(grpc.RpcError) as e:
        server.grpc.ModelInfer(request)
    assert e.value.details() == "invalid value type for 'sequence_start' parameter, expected bool_param."
    assert server.metric("ebb_sequences_open") == 0
    assert http_infer(server)[0] == 200  # still serving


def test_long_string_ids_are_refused_alike_and_never_quoted_whole(server):
    """Round four: gRPC took string ids of any length (20 starts of a 64 MiB id held 2.7 GB, each id
    stored twice), and the START error quoted an 8 MiB id whole, so the client saw
    RESOURCE_EXHAUSTED on the reply's metadata instead of the error. One bound on both front ends."""
    limit = "parameters.sequence_id is a string of {} bytes, longer than the limit of 1024 bytes"
    for size in [1025, 8 * MiB]:
        for start in [True, False]:
            with pytest.raises(grpc.RpcError) as e:
                server.grpc.ModelInfer(grpc_request(model="tiny", sequence_id="s" * size, start=start))
            assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT, e.value.code()
            assert e.value.details() == limit.format(size)
    status, body = http_infer(server, model="tiny", sequence_id="s" * 1025, start=True)
    assert status == 400 and json.loads(body)["error"] == limit.format(1025)
    assert server.metric("ebb_sequences_open") == 0
    # At the bound an id works, and the START error quotes it clipped.
    longest = "s" * 1024
    with pytest.raises(grpc.RpcError) as e:
        server.grpc.ModelInfer(grpc_request(model="tiny", sequence_id=longest))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert e.value.details() == ("inference request for sequence " + "s" * 128 + "... (1024 bytes) to model 'tiny' "
                                 "must specify the START flag on the first request of the sequence")
    server.grpc.ModelInfer(grpc_request(model="tiny", sequence_id=longest, start=True))
    server.grpc.ModelInfer(grpc_request(model="tiny", sequence_id=longest, end=True))
    assert server.metric("ebb_sequences_open") == 0


def test_open_sequences_are_limited_with_a_clear_error(server):
    for n in (31, 32, 33):
        assert http_infer(server, model="tiny", sequence_id=n, start=True)[0] == 200
    status, body = http_infer(server, model="tiny", sequence_id=34, start=True)
    assert status == 503
    assert "too many open sequences: 3 are open, the limit (--max-sequences)" in json.loads(body)["error"]
    with pytest.raises(grpc.RpcError) as e:
        server.grpc.ModelInfer(grpc_request(model="tiny", sequence_id=34, start=True))
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE
    assert http_infer(server, model="tiny", sequence_id=31, end=True)[0] == 200
    assert http_infer(server, model="tiny", sequence_id=34, start=True, end=True)[0] == 200
    for n in (32, 33):
        assert http_infer(server, model="tiny", sequence_id=n, end=True)[0] == 200
    assert server.metric("ebb_sequences_open") == 0


def test_a_timed_out_sequence_is_ended_and_released(workdir):
    s = Server(workdir, "--sequence-timeout-ms", "400")
    try:
        assert http_infer(s)[0] == 200
        floor = s.arena()
        before = s.releases()
        assert http_infer(s, sequence_id=5, start=True)[0] == 200
        s.grpc.ModelInfer(grpc_request(sequence_id="five", start=True))
        assert s.arena() > floor + 4 * MiB
        assert s.releases() == before
        assert wait_for(lambda: s.metric('ebb_sequences_timed_out_total{model="convnet"}') == 2, timeout=20)
        assert s.metric("ebb_sequences_open") == 0
        assert s.releases() == before + 2
        assert s.arena() <= floor + MiB
        # Its id is unknown from then on, as after a timeout in Triton.
        status, body = http_infer(s, sequence_id=5, end=True)
        assert status == 400 and "must specify the START flag" in json.loads(body)["error"]
    finally:
        assert s.stop() == 0


# --- The idle release mode --------------------------------------------------------------------

IDLE_MS = 1000  # long beside a request's time even on a loaded machine: a busy burst has no such gap


@pytest.fixture(scope="module")
def idle_server(workdir):
    s = Server(workdir, release="idle", policy={"idle_release_ms": IDLE_MS})
    assert http_infer(s)[0] == 200
    assert wait_for(lambda: s.arena() <= MiB)
    yield s
    assert s.stop() == 0


def burst(send, seconds):
    """Sends back to back for `seconds`: (requests sent, when the last one was sent)."""
    end = time.monotonic() + seconds
    count = 0
    last_sent = None
    while time.monotonic() < end:
        last_sent = time.monotonic()
        send()
        count += 1
    return count, last_sent


def test_idle_release_fires_after_the_debounce_and_not_during_a_burst(idle_server):
    s = idle_server
    floor = s.arena()
    before = s.releases()
    idle_before = s.metric('ebb_idle_releases_total{model="convnet"}')
    seen = []
    # Two clients, one over HTTP and one over gRPC, back to back for three debounces.
    x = np.random.default_rng(1).random((1, 3, SIDE, SIDE), dtype=np.float32)
    body = json.dumps({"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                                   "data": x.ravel().tolist()}]}).encode()
    request = grpc_request()
    seconds = 3 * IDLE_MS / 1000
    clients = [threading.Thread(target=lambda: seen.append(burst(lambda: s.http("/v2/models/convnet/infer", body),
                                                                 seconds))),
               threading.Thread(target=lambda: seen.append(burst(lambda: s.grpc.ModelInfer(request), seconds)))]
    for c in clients:
        c.start()
    mid = []
    time.sleep(seconds / 2)
    mid.append((s.releases(), s.arena()))
    for c in clients:
        c.join()
    # The server's last run ended after the last request was sent, and the release comes a debounce after
    # that run: measured from the last send, the wait is at least the debounce, however late the
    # clients' threads are joined on a slow machine.
    last_sent = max(sent for _, sent in seen)
    assert sum(count for count, _ in seen) >= 4
    assert s.releases() == before, "released during the burst"
    assert mid[0][0] == before and mid[0][1] > floor + 4 * MiB
    assert s.arena() > floor + 4 * MiB, "the arena went back during the burst"
    assert wait_for(lambda: s.releases() == before + 1, timeout=10)
    waited = time.monotonic() - last_sent
    assert waited >= IDLE_MS / 1000 * 0.9
    assert s.arena() <= floor + MiB
    assert s.metric('ebb_idle_releases_total{model="convnet"}') == idle_before + 1
    time.sleep(3 * IDLE_MS / 1000)
    assert s.releases() == before + 1, "released again with no request"


def test_idle_mode_sequence_holds_across_pauses_and_releases_at_its_end(idle_server):
    s = idle_server
    wait_for(lambda: s.arena() <= MiB)
    floor = s.arena()
    before = s.releases()
    for i in range(3):
        s.grpc.ModelInfer(grpc_request(sequence_id=41, start=i == 0))
        time.sleep(2 * IDLE_MS / 1000)  # pauses longer than the debounce: no idle release while it is open
        assert s.releases() == before
        assert s.arena() > floor + 4 * MiB
    status, body = http_infer(s, sequence_id=41, end=True)
    assert status == 200, body
    assert s.releases() == before + 1  # at once, not after the debounce
    assert s.arena() <= floor + MiB
    time.sleep(2 * IDLE_MS / 1000)
    assert s.releases() == before + 1


def test_ebb_serve_releases_when_idle_by_default(workdir):
    s = Server(workdir, release=None)  # no --release, no --policy: ebb serve's default
    try:
        assert http_infer(s)[0] == 200
        assert wait_for(lambda: s.releases() == 1)
        floor = s.arena()
        assert http_infer(s)[0] == 200
        assert wait_for(lambda: s.releases() == 2)
        assert s.arena() <= floor + MiB
        # Both were idle releases (off the request, after the debounce), not the run boundary's.
        assert s.metric('ebb_idle_releases_total{model="convnet"}') == 2
    finally:
        assert s.stop() == 0
    # A policy file that sets release wins over the default; --release wins over both.
    path = os.path.join(workdir, "never.json")
    with open(path, "w") as f:
        json.dump({"release": "never"}, f)
    for args, idle in [(["--policy", path], False), (["--policy", path, "--release", "idle"], True)]:
        s = Server(workdir, *args, release=None)
        try:
            assert http_infer(s)[0] == 200
            time.sleep(0.3)
            assert (s.metric('ebb_idle_releases_total{model="convnet"}') == 1) == idle, args
            assert (s.arena() > 4 * MiB) != idle, args
        finally:
            assert s.stop() == 0
