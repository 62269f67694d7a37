#!/usr/bin/python3
"""Soak of `ebb serve`: mixed good and bad requests, loads and unloads, for a bounded time.

Starts the real `ebb serve` on a temporary repository (copies of the bundled tiny, mixed and
waifu2x models, plus tiny_copy with tiny's bytes) on a free loopback port, and sends from
--clients threads, until --seconds have passed: good requests (JSON and binary tensors, an
image-to-image operation) and bad ones (malformed JSON, wrong shapes and types, deep nesting, an
oversize body, a zero image dimension, an out-of-range keep_alive, an unknown model), while one
thread unloads and loads a model. Every few seconds it prints the server's RSS.

It fails (exit 1) when any good request fails, a bad request gets anything but its 4xx, the
server dies, or the RSS after warm-up grows by more than --max-growth (10 %): the largest RSS of
the last 10 s against the largest of the 10 s after warm-up. Loopback only; bounded in time.

    /usr/bin/python3 tests/soak/soak.py --ebb build/ebb --seconds 60
"""
import argparse
import http.client
import json
import os
import random
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "..", "..", "models")
MAX_BODY = 4_000_000


def make_repository(root):
    for name, source in [("tiny", "tiny"), ("tiny_copy", "tiny"), ("mixed", "mixed"),
                         ("waifu2x_scale2x", "waifu2x_scale2x")]:
        os.makedirs(os.path.join(root, name))
        shutil.copy(os.path.join(MODELS, source, "model.onnx"), os.path.join(root, name, "model.onnx"))
    with open(os.path.join(root, "waifu2x_scale2x", "config.json"), "w") as f:
        f.write('{"kind": "image_to_image", "tile": {"size": 32, "overlap": 6}}')


def tensor(name, shape, datatype, data):
    return {"name": name, "shape": shape, "datatype": datatype, "data": data}


def good_requests():
    tiny = json.dumps({"inputs": [tensor("x", [1, 64], "FP32", [0.25] * 64)]})
    mixed = json.dumps({"inputs": [tensor("a", [1, 4], "FP32", [1, 2, 3, 4]), tensor("b", [1, 4], "INT64", [1, 2, 3, 4]),
                                   tensor("c", [1, 4], "UINT8", [0, 1, 2, 3]),
                                   tensor("flag", [1, 4], "BOOL", [True, False, True, False])]})
    header = json.dumps({"inputs": [{"name": "x", "shape": [1, 64], "datatype": "FP32",
                                     "parameters": {"binary_data_size": 256}}],
                         "outputs": [{"name": "y", "parameters": {"binary_data": True}}]}).encode()
    binary = header + struct.pack("<64f", *([0.5] * 64))
    image = json.dumps({"inputs": [tensor("x", [1, 3, 24, 24], "FP32", [[[[0.5] * 24] * 24] * 3])]})
    return [
        ("tiny json", "/v2/models/tiny/infer", tiny.encode(), {}),
        ("tiny_copy json", "/v2/models/tiny_copy/infer", tiny.encode(), {}),
        ("mixed json", "/v2/models/mixed/infer", mixed.encode(), {}),
        ("tiny binary", "/v2/models/tiny/infer", binary, {"Inference-Header-Content-Length": str(len(header))}),
        ("image operation", "/v2/models/waifu2x_scale2x/infer", image.encode(), {}),
    ]


def bad_requests():
    x = '{"name":"x","shape":[1,64],"datatype":"FP32","data":[%s]}'
    zeros = ",".join(["0"] * 64)
    return [
        ("malformed json", "/v2/models/tiny/infer", b'{"inputs": [', 400),
        ("wrong shape", "/v2/models/tiny/infer", ('{"inputs":[%s]}' % (x % "0,0")).encode(), 400),
        ("wrong type", "/v2/models/tiny/infer",
         ('{"inputs":[{"name":"x","shape":[1,64],"datatype":"INT32","data":[%s]}]}' % zeros).encode(), 400),
        ("bad element", "/v2/models/tiny/infer", ('{"inputs":[%s]}' % (x % ('"a",' + zeros[2:]))).encode(), 400),
        ("deep nesting", "/v2/models/tiny/infer", ('{"id":' + "[" * 50000 + "]" * 50000 + ',"inputs":[]}').encode(), 400),
        ("oversize", "/v2/models/tiny/infer", b" " * (MAX_BODY + 1000), 413),
        ("zero image dimension", "/v2/models/waifu2x_scale2x/infer",
         b'{"inputs":[{"name":"x","shape":[100000,0,1,1],"datatype":"FP32","data":[]}]}', 400),
        ("keep_alive out of range", "/v2/models/tiny/infer",
         ('{"parameters":{"keep_alive":9223372036854775807},"inputs":[%s]}' % (x % zeros)).encode(), 400),
        ("unknown model", "/v2/models/nope/infer", b"{}", 404),
    ]


def rss_bytes(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class Soak:
    def __init__(self, port, pid, seconds, clients):
        self.port, self.pid, self.deadline, self.clients = port, pid, time.time() + seconds, clients
        self.lock = threading.Lock()
        self.counts = {"good": 0, "bad": 0, "loads": 0}
        self.failures = []
        self.goods, self.bads = good_requests(), bad_requests()

    def post(self, path, body, headers):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=120)
        try:
            c.request("POST", path, body=body, headers=dict(headers, **{"Content-Type": "application/json"}))
            r = c.getresponse()
            return r.status, r.read()
        finally:
            c.close()

    def fail(self, what):
        with self.lock:
            if len(self.failures) < 20:
                self.failures.append(what)

    def client(self, seed):
        rng = random.Random(seed)
        while time.time() < self.deadline:
            if rng.random() < 0.6:
                name, path, body, headers = rng.choice(self.goods)
                try:
                    status, answer = self.post(path, body, headers)
                except OSError as e:
                    status, answer = -1, str(e).encode()
                if status != 200:
                    self.fail("good %s: %s %s" % (name, status, answer[:200]))
                with self.lock:
                    self.counts["good"] += 1
            else:
                name, path, body, expected = rng.choice(self.bads)
                try:
                    status, answer = self.post(path, body, {})
                except OSError as e:
                    status, answer = -1, str(e).encode()
                if status != expected:
                    self.fail("bad %s: %s (expected %s) %s" % (name, status, expected, answer[:200]))
                with self.lock:
                    self.counts["bad"] += 1

    def loader(self):
        while time.time() < self.deadline:
            for action in ("unload", "load"):
                try:
                    status, answer = self.post("/v2/repository/models/tiny_copy/" + action, b"", {})
                except OSError as e:
                    status, answer = -1, str(e).encode()
                if status != 200:
                    self.fail("%s tiny_copy: %s %s" % (action, status, answer[:200]))
                with self.lock:
                    self.counts["loads"] += 1
                time.sleep(0.5)

    def run(self, interval):
        threads = [threading.Thread(target=self.client, args=(i,)) for i in range(self.clients)]
        threads.append(threading.Thread(target=self.loader))
        for t in threads:
            t.start()
        samples, start = [], time.time()
        while any(t.is_alive() for t in threads):
            time.sleep(interval)
            t = time.time() - start
            rss = rss_bytes(self.pid)
            samples.append((t, rss))
            with self.lock:
                c = dict(self.counts)
            print("soak: t=%5.0fs rss=%7.1f MiB good=%d bad=%d load/unload=%d" %
                  (t, rss / 2**20, c["good"], c["bad"], c["loads"]), flush=True)
        for t in threads:
            t.join()
        return samples


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ebb", required=True, help="the ebb binary")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--warmup", type=float, default=0, help="seconds of warm-up (default: a third, at most 60)")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--interval", type=float, default=2, help="seconds between RSS reports")
    ap.add_argument("--max-growth", type=float, default=0.10)
    args = ap.parse_args()
    warmup = args.warmup or min(60.0, args.seconds / 3)

    root = tempfile.mkdtemp(prefix="ebb_soak_")
    server = None
    try:
        make_repository(root)
        server = subprocess.Popen([args.ebb, "serve", "--repository", root, "--port", "0", "--device", "cpu",
                                   "--max-body-bytes", str(MAX_BODY)],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        port = None
        for line in server.stdout:
            m = re.search(r"http://127\.0\.0\.1:(\d+)", line)
            if m:
                port = int(m.group(1))
                break
        if port is None:
            print("soak: the server did not start")
            return 1
        threading.Thread(target=lambda: [None for _ in server.stdout], daemon=True).start()
        soak = Soak(port, server.pid, args.seconds, args.clients)
        samples = soak.run(args.interval)
        alive = server.poll() is None
        after_warmup = [rss for t, rss in samples if warmup <= t <= warmup + 10] or [samples[-1][1]]
        end = samples[-1][0]
        last = [rss for t, rss in samples if t >= end - 10]
        growth = max(last) / max(after_warmup) - 1
        print("soak: %d good requests, %d bad requests, %d loads and unloads in %.0f s" %
              (soak.counts["good"], soak.counts["bad"], soak.counts["loads"], end))
        print("soak: RSS after warm-up (%.0f s) %.1f MiB, at the end %.1f MiB: %+.1f %% (limit %+.0f %%)" %
              (warmup, max(after_warmup) / 2**20, max(last) / 2**20, 100 * growth, 100 * args.max_growth))
        ok = True
        for f in soak.failures:
            print("soak: FAILED: " + f)
            ok = False
        if not alive:
            print("soak: FAILED: the server died")
            ok = False
        if growth > args.max_growth:
            print("soak: FAILED: RSS grew by more than the limit")
            ok = False
        print("soak: %s" % ("OK" if ok else "FAILED"))
        return 0 if ok else 1
    finally:
        if server is not None and server.poll() is None:
            server.send_signal(signal.SIGTERM)
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
