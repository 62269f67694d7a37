"""What the deploy tests share: `ebb serve` as a child process on given ports, the flags a built ebb
knows (from `ebb serve --help`), HTTP probes, and the tiny model's reference output (numpy, from the
model file's own weights)."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request

import numpy as np
import onnx
from onnx import numpy_helper


def free_port():
    """A TCP port nothing listens on now (on every address, as the manifests' --host 0.0.0.0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("0.0.0.0", 0))
        return s.getsockname()[1]


def serve_flags(ebb):
    """{flag: takes a value} for every option of `ebb serve`, as its --help lists them (CLI11 prints
    an option's value type in capitals after its name, and nothing after a flag's)."""
    out = subprocess.run([ebb, "serve", "--help"], capture_output=True, text=True, timeout=60, check=True).stdout
    flags = {}
    for line in out.splitlines():
        # "  --port INT=8000    HTTP port", "  --no-load{false}    do not load ...": the type follows
        # the name after one space; the help text after two or more.
        m = re.match(r"\s+(?:-\w,)?(--[A-Za-z0-9][A-Za-z0-9-]*)( [A-Z][A-Z0-9_:]*(?=[=\s]|$))?", line)
        if m:
            flags[m.group(1)] = m.group(2) is not None
    assert "--port" in flags and flags["--port"] and "--no-load" in flags and not flags["--no-load"], out
    return flags


def split_unknown(args, flags):
    """(args without the flags `flags` does not know, those flags). An unknown flag's value is the
    next argument when that does not start with "--"."""
    kept, unknown, i = [], [], 0
    while i < len(args):
        a = args[i]
        if a.startswith("--") and a.split("=", 1)[0] not in flags:
            unknown.append(a)
            i += 2 if i + 1 < len(args) and not args[i + 1].startswith("--") else 1
            continue
        kept.append(a)
        i += 1
    return kept, unknown


def http(port, path, body=None, timeout=30):
    """(status, body) of a request to 127.0.0.1:port."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=body,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            return reply.status, reply.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class Server:
    """`ebb serve ARGS` (ARGS as given: host, ports and paths included), with stdout and stderr kept."""

    def __init__(self, command, http_port, env=None, cwd=None):
        self.command = command
        self.http_port = http_port
        self.proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     env=env, cwd=cwd)
        self.lines = []
        self.drain = threading.Thread(target=lambda: self.lines.extend(self.proc.stdout), daemon=True)
        self.drain.start()

    def output(self):
        return "".join(self.lines)

    def wait_live(self, seconds=60):
        """Waits for GET /v2/health/live to answer 200; fails with the server's output if it exits."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"{self.command} exited {self.proc.returncode}:\n{self.output()}"
            try:
                if http(self.http_port, "/v2/health/live", timeout=2)[0] == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"{self.command}: not live after {seconds} s:\n{self.output()}")

    def wait_ready(self, seconds=60):
        deadline = time.monotonic() + seconds
        while http(self.http_port, "/v2/health/ready")[0] != 200:
            assert time.monotonic() < deadline, f"not ready after {seconds} s:\n{self.output()}"
            time.sleep(0.05)

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.drain.join(timeout=5)
        return self.proc.returncode


def copy_model(models_dir, name, folder):
    os.makedirs(folder, exist_ok=True)
    shutil.copyfile(os.path.join(models_dir, name, "model.onnx"), os.path.join(folder, "model.onnx"))


def tiny_reference(model_file, x):
    """y = relu(x @ w + b) with the tiny model's own weights (tools/make_test_models.py)."""
    weights = {t.name: numpy_helper.to_array(t) for t in onnx.load(model_file).graph.initializer}
    return np.maximum(x @ weights["w"] + weights["b"], 0).astype(np.float32)


def infer_tiny_http(port, model_name, model_file):
    """Infers on the tiny model served as `model_name` over HTTP; checks the output against numpy."""
    x = (np.arange(64, dtype=np.float32).reshape(1, 64) - 32) / 16
    body = json.dumps({"inputs": [{"name": "x", "shape": [1, 64], "datatype": "FP32",
                                   "data": x.ravel().tolist()}]}).encode()
    status, reply = http(port, f"/v2/models/{model_name}/infer", body)
    assert status == 200, reply
    out = json.loads(reply)["outputs"][0]
    assert out["name"] == "y" and out["shape"] == [1, 64]
    np.testing.assert_allclose(np.array(out["data"], dtype=np.float32).reshape(1, 64),
                               tiny_reference(model_file, x), rtol=1e-5, atol=1e-5)
