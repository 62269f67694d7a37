"""The GPU bundle, on a machine without a GPU (docs/gpu-check.md): scripts/gpu/bundle.sh builds it from
this build tree, with a small stand-in where the 230 MB CUDA provider library goes (so nothing is
downloaded) and small parts (so the split is exercised); then each carry folder's run.sh is run as the
device calls would run it, with --dry-run: parts are verified and stashed, a corrupt or truncated part
is refused, the reassembled archive and every file are checked, and the dry run walks every step that
needs no GPU (the machine's libraries, ldd, ebb --version, each CUDA check's code on CPU sessions with
no goal judged, and the two benchmarks on CPU), writing its JSON report.

Run by ctest with EBB_SOURCE_DIR and EBB_BUILD_DIR in the environment.
"""

import hashlib
import json
import math
import os
import shutil
import subprocess
import sys
import tarfile

import pytest

SOURCE = os.path.realpath(os.environ["EBB_SOURCE_DIR"])
BUILD = os.path.realpath(os.environ["EBB_BUILD_DIR"])
WORK = os.path.join(BUILD, "gpu-bundle-test")  # under build/ (ignored by git), removed at the end
PART_MIB = 8


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def run_sh(carry, stash, out, *extra):
    env = dict(os.environ, EBB_GPU_PYTHON=sys.executable)
    env.pop("OUT", None)
    return subprocess.run(["bash", os.path.join(carry, "run.sh"), "--stash", stash, "--out", out, *extra],
                          capture_output=True, text=True, timeout=240, env=env)


def report(out):
    with open(os.path.join(out, "gpu-report.json")) as f:
        return json.load(f)


@pytest.fixture(scope="module")
def bundle():
    shutil.rmtree(WORK, ignore_errors=True)
    out = os.path.join(WORK, "bundle")
    run = subprocess.run(["bash", os.path.join(SOURCE, "scripts/gpu/bundle.sh"), "--build-dir", BUILD, "--out", out,
                          "--provider-stand-in", "--part-mib", str(PART_MIB), "--gzip-level", "1"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    carries = sorted((d for d in os.listdir(out) if d.startswith("carry-")), key=lambda d: int(d.split("-")[1]))
    with open(os.path.join(out, carries[0], "manifest.json")) as f:
        manifest = json.load(f)
    yield {"out": out, "carries": [os.path.join(out, c) for c in carries], "manifest": manifest, "log": run.stdout}
    shutil.rmtree(WORK, ignore_errors=True)


def test_parts_stay_under_the_limit_and_match_the_manifest(bundle):
    manifest, carries = bundle["manifest"], bundle["carries"]
    limit = PART_MIB << 20
    assert manifest["part_limit_bytes"] == limit
    assert manifest["stand_in"] is True
    assert len(carries) == len(manifest["parts"]) == math.ceil(manifest["archive_bytes"] / limit) >= 2
    assert sum(p["bytes"] for p in manifest["parts"]) == manifest["archive_bytes"]
    for carry, part in zip(carries, manifest["parts"]):
        assert sorted(os.listdir(carry)) == sorted([part["name"], "manifest.json", "run.py", "run.sh"])
        path = os.path.join(carry, part["name"])
        assert os.path.getsize(path) == part["bytes"] <= limit
        assert sha256(path) == part["sha256"]
        with open(os.path.join(carry, "manifest.json")) as f:
            assert json.load(f) == manifest
        for script in ("run.sh", "run.py"):
            assert sha256(os.path.join(carry, script)) == sha256(os.path.join(SOURCE, "scripts/gpu", script))
    # plan.txt names every call with what it carries, inside the device tool's 64 MiB.
    with open(os.path.join(bundle["out"], "plan.txt")) as f:
        plan = f.read()
    for i in range(1, len(carries) + 1):
        assert f"call {i}: carry " in plan and f"carry-{i}/run.sh" in plan, plan


def test_the_archive_holds_everything_the_checks_need(bundle, tmp_path):
    manifest = bundle["manifest"]
    archive = tmp_path / "bundle.tar.gz"
    with open(archive, "wb") as dst:
        for carry, part in zip(bundle["carries"], manifest["parts"]):
            with open(os.path.join(carry, part["name"]), "rb") as src:
                shutil.copyfileobj(src, dst)
    assert sha256(archive) == manifest["bundle"]
    with tarfile.open(archive) as t:
        names = set(t.getnames())
        regular = {m.name[len("ebb-gpu/"):] for m in t.getmembers() if m.isfile()}
        info = json.load(t.extractfile("ebb-gpu/BUNDLE.json"))
        listed = t.extractfile("ebb-gpu/FILES.sha256").read().decode().splitlines()
    for need in ("bin/ebb", "bin/ebb_cuda_check", "lib/libonnxruntime.so", "lib/libonnxruntime.so.1",
                 "lib/libonnxruntime_providers_shared.so", "lib/libonnxruntime_providers_cuda.so",
                 "lib/compat/libstdc++.so.6", "lib/compat/libgcc_s.so.1", "models/waifu2x_scale2x/model.onnx",
                 "models/convnet/model.onnx", "models/tiny/model.onnx"):
        assert "ebb-gpu/" + need in names, need
    debian = {n.split("/")[-1] for n in names if n.startswith("ebb-gpu/lib/debian/")}
    assert {"libgrpc++.so.1.51", "libprotobuf.so.32", "libssl.so.3", "libpng16.so.16"} <= debian, debian
    assert not debian & {"libc.so.6", "libm.so.6", "libdl.so.2", "librt.so.1", "libpthread.so.0"}  # glibc's own
    # Runs on Debian 12's glibc (2.36) or newer.
    assert tuple(map(int, info["glibc_needed"].split("."))) <= (2, 36), info["glibc_needed"]
    assert info["provider"]["stand_in"] is True
    assert {"libcudart.so.13", "libcublas.so.13", "libcudnn.so.9", "libcuda.so.1"} <= set(info["cuda_libraries_expected"])
    # FILES.sha256 lists every regular file but itself.
    assert {line.split("  ", 1)[1] for line in listed} == regular - {"FILES.sha256"}


def test_a_corrupt_or_truncated_part_is_refused(bundle, tmp_path):
    part = bundle["manifest"]["parts"][1]
    stash, out = str(tmp_path / "stash"), str(tmp_path / "out")
    for damage in ("flip", "truncate"):
        bad = tmp_path / f"bad-{damage}"
        shutil.copytree(bundle["carries"][1], bad)
        path = bad / part["name"]
        data = bytearray(path.read_bytes())
        if damage == "flip":
            data[len(data) // 2] ^= 0x01
        else:
            del data[-1000:]
        path.write_bytes(bytes(data))
        r = run_sh(str(bad), stash, out, "--dry-run")
        assert r.returncode == 2, r.stdout + r.stderr
        assert f"REFUSED part {part['index']}" in r.stdout, r.stdout
        rep = report(out)
        assert rep["state"] == "corrupt part"
        assert rep["parts"]["refused"][0]["expected_sha256"] == part["sha256"]
        assert not os.path.exists(os.path.join(stash, "parts", part["name"]))
    # The good one is taken.
    r = run_sh(bundle["carries"][1], stash, out, "--dry-run")
    assert r.returncode == 3 and report(out)["parts"]["have"] == [part["index"]], r.stdout


def test_a_part_damaged_in_the_stash_fails_the_reassembly(bundle, tmp_path):
    stash, out = str(tmp_path / "stash"), str(tmp_path / "out")
    for carry in bundle["carries"][:-1]:
        assert run_sh(carry, stash, out, "--dry-run").returncode == 3
    first = os.path.join(stash, "parts", bundle["manifest"]["parts"][0]["name"])
    with open(first, "r+b") as f:  # same size, other bytes: only the archive's sha256 can tell
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0xFF]))
    r = run_sh(bundle["carries"][-1], stash, out, "--dry-run")
    assert r.returncode == 2, r.stdout + r.stderr
    rep = report(out)
    assert rep["state"] == "corrupt bundle" and "sha256" in rep["error"], rep
    assert not os.path.exists(os.path.join(stash, "bundle"))


def test_dry_run_walks_every_step_in_any_order(bundle, tmp_path):
    stash, out = str(tmp_path / "stash"), str(tmp_path / "out")
    carries = bundle["carries"]
    n = len(carries)
    # Parts may come in any order; each call but the last says what is missing.
    order = [carries[-1]] + carries[:-2] + [carries[-2]]
    for k, carry in enumerate(order[:-1]):
        r = run_sh(carry, stash, out, "--dry-run")
        assert r.returncode == 3, r.stdout + r.stderr
        rep = report(out)
        assert rep["state"] == "incomplete" and len(rep["parts"]["have"]) == k + 1
        assert len(rep["parts"]["missing"]) == n - k - 1 and rep["next"], rep
    r = run_sh(order[-1], stash, out, "--dry-run")
    assert r.returncode == 0, r.stdout + r.stderr
    rep = report(out)
    assert rep["mode"] == "dry-run" and rep["state"] == "complete", rep
    assert rep["verdict"] == "dry run: every step walked" and rep["failed"] == []
    assert rep["unpack"]["reused"] is False and rep["unpack"]["files_verified"] > 50
    assert rep["machine"]["glibc"]["ok"] is True
    assert rep["closure"]["elf_files"] > 50 and rep["closure"]["unresolved_not_cuda"] == {}
    assert rep["steps"]["ebb_version"]["status"] == "pass"
    assert "ONNX Runtime 1.29.0" in rep["steps"]["ebb_version"]["output"]
    listed = subprocess.run([os.path.join(BUILD, "tests", "ebb_cuda_check"), "--list"], capture_output=True,
                            text=True, check=True).stdout.split()
    assert [c["check"] for c in rep["checks"]] == listed
    # Each check's code ran on CPU sessions (nothing threw or crashed), its goals not judged.
    for c in rep["checks"]:
        assert c["status"] == "skip" and "exercised on CPU: goals not judged" in c["message"], c
        assert c["goals"] and c["figures"], c
    figures = {c["check"]: c["figures"] for c in rep["checks"]}
    assert figures["provider"]["assignment"]["nodes"]["CPUExecutionProvider"] > 0
    # The device API's first step: the CPU device refused (as measured), the stand-in provider not registered.
    assert figures["device_api"]["cpu_device_create_shared_allocator"].startswith(
        "refused: Invalid memory type for OrtEpDevice"), figures["device_api"]
    assert figures["device_api"]["register"].startswith("failed: "), figures["device_api"]
    assert figures["shared_arena"]["sessions"] == 11
    for mode in ("per_session_never", "shared_never", "env_allocator_never", "shared_operation_end"):
        assert figures["shared_arena"][mode]["loads"] == 11, figures["shared_arena"]
    assert "waifu2x" in figures["shared_arena_release"] and "error" in figures["shared_arena_oom"]
    runs = figures["operation_release"]["operation"]["runs"]
    assert [r["release_spec"] for r in runs] == ["", "", "cpu:0"], runs
    for name in ("bench_floor", "bench_release"):
        b = rep["benches"][name]
        assert b["status"] == "skip" and b["result"]["device"] == "cpu" and b["result"]["goals"], b
    assert os.path.getsize(os.path.join(out, "gpu-check.log")) > 0
    # A second run on the same machine reuses the verified bundle.
    r = run_sh(order[-1], stash, out, "--dry-run", "--checks", "provider")
    assert r.returncode == 0, r.stdout + r.stderr
    rep = report(out)
    assert rep["unpack"]["reused"] is True and [c["check"] for c in rep["checks"]] == ["provider"]
    # Without --dry-run, a bundle with a stand-in provider is refused.
    r = run_sh(order[-1], stash, out)
    assert r.returncode == 2 and report(out)["state"] == "stand-in bundle", r.stdout
