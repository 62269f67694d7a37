"""The GPU machine's side of the CUDA checks (docs/gpu-check.md); run through run.sh.

One call of the device tool carries one part of the bundle (scripts/gpu/bundle.sh). This script:
  1. verifies the parts it was given (size, sha256 from manifest.json) and stores them in the stash,
     which outlives the call while the machine stays warm; a corrupt part is refused (exit 2);
  2. while parts are missing, says which and stops (exit 3);
  3. once all are there: reassembles the archive, checks its sha256, unpacks it, checks every file's
     sha256 (FILES.sha256);
  4. checks the machine: glibc at least the bundle's need, the CUDA and cuDNN libraries found in the
     Python packages of the running python3 (their folders go into LD_LIBRARY_PATH), the driver
     (libcuda.so.1, nvidia-smi), and `ldd` of every bundled ELF file against that path;
  5. runs ebb_cuda_check, one process per check, with --expect-gpu, then `ebb bench floor` and
     `ebb bench release` on cuda:0, each under a timeout and inside an overall deadline;
  6. writes $OUT/gpu-report.json (everything, machine-readable) and $OUT/gpu-check.log (every step's
     command and output) and prints a summary.
--dry-run (no GPU): the same steps; CUDA libraries and a driver may be missing, each check's code runs on
CPU sessions (ebb_cuda_check --exercise-on-cpu: figures, no goal judged), the benchmarks fall back to CPU
at small sizes, and nothing is judged that needs a GPU.
Exit status: 0 passed (dry run: every step walked), 1 a check or step failed, 2 corrupt, 3 incomplete.
Only the Python standard library is used: it runs on the machine's own python3.
"""

import argparse
import glob
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time

EXIT_OK, EXIT_FAILED, EXIT_CORRUPT, EXIT_INCOMPLETE = 0, 1, 2, 3
CHUNK = 1 << 22


class Bundle(Exception):
    """A part or the bundle is corrupt or unusable: exit 2."""


def sha256_of(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(CHUNK):
            h.update(block)
    return h.hexdigest()


def version_tuple(text):
    return tuple(int(x) for x in re.findall(r"\d+", text or ""))


class Log:
    """gpu-check.log: every step's command and output."""

    LIMIT = 12 << 20  # the device tool brings back files of up to 16 MiB

    def __init__(self, path):
        self.f = open(path, "w", encoding="utf-8", errors="replace")
        self.written = 0

    def write(self, text):
        text = text if text.endswith("\n") else text + "\n"
        if self.written + len(text) > self.LIMIT:
            text = text[:max(0, self.LIMIT - self.written)] + "\n[log cut at its size limit]\n"
        if self.written < self.LIMIT:
            self.f.write(text)
            self.f.flush()
        self.written += len(text)


def say(text):
    print(f"ebb-gpu: {text}", flush=True)


# --- 1-3. parts, stash, reassembly -------------------------------------------------------------

def load_manifest(sources, stash):
    for d in sources:
        path = os.path.join(d, "manifest.json")
        if os.path.isfile(path):
            with open(path) as f:
                return json.load(f)
    path = os.path.join(stash, "manifest.json")
    if os.path.isfile(path):
        with open(path) as f:
            return json.load(f)
    raise Bundle("no manifest.json beside run.sh nor in the stash " + stash)


def prepare_stash(stash, manifest):
    """The stash holds parts of one bundle: another bundle's are removed."""
    os.makedirs(os.path.join(stash, "parts"), exist_ok=True)
    path = os.path.join(stash, "manifest.json")
    old = None
    if os.path.isfile(path):
        with open(path) as f:
            old = json.load(f).get("bundle")
    if old != manifest["bundle"]:
        if old:
            say(f"the stash held another bundle ({old[:12]}); removed")
        for sub in ("parts", "bundle"):
            shutil.rmtree(os.path.join(stash, sub), ignore_errors=True)
        os.makedirs(os.path.join(stash, "parts"), exist_ok=True)
        with open(path, "w") as f:
            json.dump(manifest, f, indent=1)


def take_parts(sources, stash, manifest):
    """Verifies the parts beside run.sh and copies the good ones into the stash; returns (taken, refused)."""
    taken, refused = [], []
    for part in manifest["parts"]:
        for d in sources:
            src = os.path.join(d, part["name"])
            if not os.path.isfile(src):
                continue
            size, digest = os.path.getsize(src), sha256_of(src)
            if size != part["bytes"] or digest != part["sha256"]:
                refused.append({"part": part["index"], "file": src, "bytes": size, "sha256": digest,
                                "expected_bytes": part["bytes"], "expected_sha256": part["sha256"]})
                continue
            dst = os.path.join(stash, "parts", part["name"])
            if not (os.path.isfile(dst) and os.path.getsize(dst) == size):
                shutil.copyfile(src, dst + ".tmp")
                os.replace(dst + ".tmp", dst)
            taken.append(part["index"])
    return taken, refused


def stashed_parts(stash, manifest):
    have = []
    for part in manifest["parts"]:
        path = os.path.join(stash, "parts", part["name"])
        if os.path.isfile(path) and os.path.getsize(path) == part["bytes"]:
            have.append(part["index"])
    return have


def unpack(stash, manifest, log):
    """Reassembles the archive from the stashed parts (its sha256 checked while streaming it into tar),
    unpacks it and checks every file. Returns the bundle's root folder. Skips the work when this
    bundle was unpacked and verified before on this machine."""
    target = os.path.join(stash, "bundle")
    root = os.path.join(target, "ebb-gpu")
    marker = os.path.join(target, "verified")
    if os.path.isfile(marker) and open(marker).read().strip() == manifest["bundle"]:
        return root, {"reused": True}
    shutil.rmtree(target, ignore_errors=True)
    tmp = target + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    start = time.monotonic()
    h = hashlib.sha256()
    tar_bin = shutil.which("tar")
    if tar_bin:
        proc = subprocess.Popen([tar_bin, "-xzf", "-", "-C", tmp, "--no-same-owner"], stdin=subprocess.PIPE)
        sink = proc.stdin
    else:
        proc, sink = None, open(os.path.join(tmp, "bundle.tar.gz"), "wb")
    for part in manifest["parts"]:
        with open(os.path.join(stash, "parts", part["name"]), "rb") as f:
            while block := f.read(CHUNK):
                h.update(block)
                if sink:
                    try:
                        sink.write(block)
                    except BrokenPipeError:  # tar gave up: the digest below says why
                        sink = None
    try:
        if sink:
            sink.close()
    except BrokenPipeError:
        pass
    tar_rc = proc.wait() if proc else 0
    if h.hexdigest() != manifest["bundle"]:
        shutil.rmtree(tmp, ignore_errors=True)
        raise Bundle(f"the reassembled archive's sha256 is {h.hexdigest()}, the manifest says {manifest['bundle']}")
    if tar_rc != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise Bundle(f"tar could not unpack the reassembled archive (exit {tar_rc})")
    if not proc:
        with tarfile.open(os.path.join(tmp, "bundle.tar.gz")) as t:
            t.extractall(tmp, filter="data") if hasattr(tarfile, "data_filter") else t.extractall(tmp)
        os.remove(os.path.join(tmp, "bundle.tar.gz"))
    unpacked_s = time.monotonic() - start
    bad = []
    files = 0
    with open(os.path.join(tmp, "ebb-gpu", "FILES.sha256")) as f:
        for line in f:
            digest, name = line.rstrip("\n").split("  ", 1)
            path = os.path.join(tmp, "ebb-gpu", name)
            files += 1
            if not os.path.isfile(path) or sha256_of(path) != digest:
                bad.append(name)
    if bad:
        shutil.rmtree(tmp, ignore_errors=True)
        raise Bundle("files whose sha256 does not match FILES.sha256: " + ", ".join(bad[:20]))
    os.replace(tmp, target)
    with open(marker, "w") as f:
        f.write(manifest["bundle"] + "\n")
    log.write(f"unpacked {manifest['archive_bytes']} bytes in {unpacked_s:.1f} s; {files} files verified")
    return root, {"reused": False, "unpack_seconds": round(unpacked_s, 2), "files_verified": files,
                  "verify_seconds": round(time.monotonic() - start - unpacked_s, 2)}


# --- 4. the machine -----------------------------------------------------------------------------

def ldconfig_paths():
    """{soname: path} of the dynamic loader's cache (x86-64 entries)."""
    exe = shutil.which("ldconfig") or ("/sbin/ldconfig" if os.path.exists("/sbin/ldconfig") else None)
    libs = {}
    if not exe:
        return libs
    try:
        out = subprocess.run([exe, "-p"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return libs
    for line in out.splitlines():
        m = re.match(r"\s*(\S+) \(([^)]*)\) => (\S+)", line)
        if m and ("x86-64" in m.group(2) or "64bit" in m.group(2)):
            libs.setdefault(m.group(1), m.group(3))
    return libs


def nvidia_library_dirs():
    """Folders under the `nvidia` packages of this interpreter's site-packages holding shared libraries."""
    bases = []
    for p in sys.path:
        nv = os.path.join(p, "nvidia")
        if p and os.path.isdir(nv) and os.path.realpath(nv) not in bases:
            bases.append(os.path.realpath(nv))
    dirs = []
    for nv in bases:
        for top, subdirs, files in os.walk(nv):
            subdirs[:] = [s for s in subdirs if s not in ("include", "__pycache__", "bin")]
            if any(re.match(r"lib.+\.so(\.\d+)*$", f) for f in files):
                dirs.append(top)
    return bases, sorted(set(dirs))


def highest(pattern, path):
    try:
        with open(path, "rb") as f:
            found = set(re.findall(pattern, f.read()))
    except OSError:
        return None
    return max((x.decode() for x in found), key=version_tuple, default=None)


def machine(root, info, stash, log):
    """The machine's glibc, libstdc++, CUDA libraries and driver; returns (report, LD_LIBRARY_PATH list)."""
    env = {}
    glibc = os.confstr("CS_GNU_LIBC_VERSION") if hasattr(os, "confstr") else ""
    glibc = (glibc or "").replace("glibc ", "")
    env["glibc"] = {"machine": glibc, "needed": info["glibc_needed"],
                    "ok": version_tuple(glibc) >= version_tuple(info["glibc_needed"])}
    cache = ldconfig_paths()
    system_stdcxx = cache.get("libstdc++.so.6")
    system_glibcxx = highest(rb"GLIBCXX_3\.4\.\d+", system_stdcxx) if system_stdcxx else None
    use_compat = system_glibcxx is None or version_tuple(system_glibcxx) < version_tuple(info["glibcxx_bundled"])
    env["libstdcxx"] = {"machine": system_stdcxx, "machine_glibcxx": system_glibcxx,
                        "bundled_glibcxx": info["glibcxx_bundled"], "needed_glibcxx": info["glibcxx_needed"],
                        "uses": "bundled (lib/compat)" if use_compat else "the machine's"}
    bases, nv_dirs = nvidia_library_dirs()
    expected = info["cuda_libraries_expected"]
    found = {}
    for lib in expected:
        for d in nv_dirs:
            if os.path.exists(os.path.join(d, lib)):
                found[lib] = d
                break
        else:
            if lib in cache:
                found[lib] = os.path.dirname(cache[lib])
    driver_dirs = []
    if "libcuda.so.1" not in found:
        for d in ("/usr/local/nvidia/lib64", "/usr/local/nvidia/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib64"):
            if os.path.exists(os.path.join(d, "libcuda.so.1")):
                found["libcuda.so.1"] = d
                driver_dirs.append(d)
                break
    env["python"] = {"executable": sys.executable, "version": sys.version.split()[0], "nvidia_packages": bases}
    env["cuda_libraries"] = {lib: found.get(lib) for lib in expected}
    env["cuda_libraries_missing"] = [lib for lib in expected if lib not in found]
    smi = shutil.which("nvidia-smi")
    env["nvidia_smi"] = None
    if smi:
        r = run_step([smi, "--query-gpu=index,name,memory.total,memory.used,driver_version",
                      "--format=csv,noheader"], {}, 30, log)
        env["nvidia_smi"] = r["stdout"].strip() or r["stderr"].strip()
    # The provider's cuDNN loader tries libcudnn.so.9, then libcudnn.so; a wheel ships only the first:
    # a link to it under the second name, in case this build asks for that one.
    links = os.path.join(stash, "links")
    shutil.rmtree(links, ignore_errors=True)
    os.makedirs(links)
    cudnn = found.get("libcudnn.so.9")
    if cudnn and not os.path.exists(os.path.join(cudnn, "libcudnn.so")):
        os.symlink(os.path.join(cudnn, "libcudnn.so.9"), os.path.join(links, "libcudnn.so"))
    lib = os.path.join(root, "lib")
    path = [lib, os.path.join(lib, "debian")] + ([os.path.join(lib, "compat")] if use_compat else [])
    path += nv_dirs + driver_dirs + [links]
    env["ld_library_path"] = path
    return env, path


def closure(root, path, info, log):
    """`ldd` of every bundled ELF file against LD_LIBRARY_PATH: what does not resolve."""
    env = dict(os.environ, LD_LIBRARY_PATH=":".join(path))
    missing = {}
    checked = 0
    for f in sorted(glob.glob(os.path.join(root, "bin", "*")) + glob.glob(os.path.join(root, "lib", "**", "*.so*"),
                                                                           recursive=True)):
        if os.path.islink(f) or not os.path.isfile(f):
            continue
        with open(f, "rb") as fh:
            if fh.read(4) != b"\x7fELF":
                continue
        checked += 1
        try:
            out = subprocess.run(["ldd", f], capture_output=True, text=True, env=env, timeout=60).stdout
        except (OSError, subprocess.TimeoutExpired) as e:
            missing[os.path.relpath(f, root)] = [f"ldd failed: {e}"]
            continue
        gone = sorted({m.group(1) for m in re.finditer(r"^\s*(\S+) => not found", out, re.M)})
        if gone:
            missing[os.path.relpath(f, root)] = gone
    log.write(f"ldd: {checked} ELF files, unresolved: {json.dumps(missing)}")
    expected = set(info["cuda_libraries_expected"])
    not_cuda = {f: [x for x in libs if x not in expected] for f, libs in missing.items()}
    not_cuda = {f: libs for f, libs in not_cuda.items() if libs}
    return {"elf_files": checked, "unresolved": missing, "unresolved_not_cuda": not_cuda}


# --- 5. the checks ------------------------------------------------------------------------------

def run_step(cmd, env, timeout, log):
    start = time.monotonic()
    full_env = dict(os.environ, **env)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, env=full_env, timeout=max(1, timeout),
                           errors="replace")
        rc, out, err, timed_out = p.returncode, p.stdout, p.stderr, False
    except subprocess.TimeoutExpired as e:
        rc, timed_out = None, True
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        err = e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or "")
    except OSError as e:
        rc, out, err, timed_out = None, "", str(e), False
    seconds = time.monotonic() - start
    log.write(f"$ {' '.join(cmd)}\n(rc {rc}{', timed out' if timed_out else ''}, {seconds:.1f} s)\n"
              f"--- stdout\n{out}\n--- stderr\n{err}\n")
    return {"rc": rc, "stdout": out, "stderr": err, "timed_out": timed_out, "seconds": round(seconds, 2)}


def tail(text, n=1500):
    return text if len(text) <= n else "..." + text[-n:]


class Deadline:
    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def left(self):
        return self.end - time.monotonic()


CHECK_SECONDS = {"shared_arena": 200}


def run_checks(root, env, dry_run, deadline, only, log, save):
    exe = os.path.join(root, "bin", "ebb_cuda_check")
    models = os.path.join(root, "models")
    listed = run_step([exe, "--list"], env, 30, log)
    names = listed["stdout"].split() if listed["rc"] == 0 else []
    if not names:
        return [{"check": "list", "status": "fail", "message": "ebb_cuda_check --list failed: " +
                 tail(listed["stderr"] or listed["stdout"])}]
    results = []
    for name in names:
        if only and name not in only:
            continue
        # shared_arena loads 4 x 50 CUDA sessions; the others load a few.
        budget = min(CHECK_SECONDS.get(name, 150), deadline.left() - 60)  # a minute for the benchmarks and report
        if budget < 20:
            results.append({"check": name, "status": "fail", "message": "not run: the overall deadline was near"})
            continue
        # A dry run exercises each check's code on CPU sessions (small frames, no goal judged).
        mode = ["--exercise-on-cpu", "--side", "64", "--sessions", "11"] if dry_run else ["--expect-gpu"]
        cmd = [exe, "--check", name, "--models", models] + mode
        r = run_step(cmd, env, budget, log)
        result = None
        for line in reversed(r["stdout"].splitlines()):
            if line.startswith("{"):
                try:
                    result = json.loads(line)
                    break
                except ValueError:
                    pass
        if result is None or r["rc"] not in (0, 1, 77):
            why = "timed out" if r["timed_out"] else f"exit {r['rc']}"
            result = {"check": name, "status": "fail",
                      "message": f"ebb_cuda_check {why} without a result: {tail(r['stderr'], 800)}"}
        if dry_run and result["status"] == "fail":
            result["message"] = "dry run: " + result.get("message", "")
        result["process_seconds"] = r["seconds"]
        results.append(result)
        save(results)  # a report even if the call's own time limit stops what follows
        message = result.get("message", "")
        say(f"check {name}: {result['status']}" + ("" if result["status"] == "pass" else
                                                      f" ({message[:300]}{'...' if len(message) > 300 else ''})"))
    return results


def run_benches(root, env, dry_run, deadline, log, save):
    ebb = os.path.join(root, "bin", "ebb")
    models = os.path.join(root, "models")
    benches = {"bench_floor": ["bench", "floor", "--json", "--device", "cuda:0", "--models", models],
               "bench_release": ["bench", "release", "--json", "--device", "cuda:0", "--models", models]}
    if dry_run:  # small sizes: the step is walked, not measured
        benches["bench_floor"] += ["--size", "256"]
        benches["bench_release"] += ["--size", "64", "--iterations", "1"]
    results = {}
    for name, args in benches.items():
        budget = min(240, deadline.left() - 15)
        if budget < 20:
            results[name] = {"status": "fail", "message": "not run: the overall deadline was near"}
            continue
        r = run_step([ebb] + args, env, budget, log)
        try:
            data = json.loads(r["stdout"])
        except ValueError:
            results[name] = {"status": "fail", "message": ("timed out" if r["timed_out"] else f"exit {r['rc']}") +
                             ": " + tail(r["stderr"], 800), "seconds": r["seconds"]}
            say(f"{name}: fail")
            continue
        goals = data.get("goals", {})
        # Each goal is {"value", "limit", "op", "met"}; met is null when it was not measured.
        unmet = [g for g, goal in goals.items() if not (goal.get("met") if isinstance(goal, dict) else goal)]
        if dry_run:
            status, message = "skip", f"dry run: ran on {data.get('device')}, goals not judged"
        elif data.get("device") != "cuda:0":
            status, message = "fail", f"ran on {data.get('device')}, not cuda:0: {tail(r['stderr'], 600)}"
        else:
            status = "fail" if unmet else "pass"
            message = ("goals not met: " + ", ".join(unmet)) if unmet else ""
        results[name] = {"status": status, "message": message, "seconds": r["seconds"], "result": data}
        save(results)
        say(f"{name}: {status}" + (f" ({message})" if message else ""))
    return results


# --- the whole -----------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--from", dest="sources", action="append", default=[], help="a folder with parts (repeatable)")
    ap.add_argument("--stash", default=os.environ.get("EBB_GPU_STASH", "/tmp/ebb-gpu"))
    ap.add_argument("--out", default=os.environ.get("OUT") or os.path.join(os.getcwd(), "gpu-out"))
    ap.add_argument("--dry-run", action="store_true", help="no GPU here: walk every step that needs none")
    ap.add_argument("--deadline", type=float, default=420, help="seconds for everything after the reassembly")
    ap.add_argument("--checks", default="", help="comma-separated checks to run (default: all)")
    args = ap.parse_args()
    started = time.monotonic()
    os.makedirs(args.out, exist_ok=True)
    log = Log(os.path.join(args.out, "gpu-check.log"))
    report = {"format": 1, "mode": "dry-run" if args.dry_run else "gpu", "state": None,
              "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    report_path = os.path.join(args.out, "gpu-report.json")

    def save():
        report["seconds"] = round(time.monotonic() - started, 2)
        with open(report_path + ".tmp", "w") as f:
            json.dump(report, f, indent=1)
        os.replace(report_path + ".tmp", report_path)

    def finish(code, verdict):
        report["verdict"] = verdict
        save()
        say(f"{verdict} -> {report_path} (exit {code})")
        return code

    def saving(key):
        def save_part(results):
            report[key] = results
            report["verdict"] = "unfinished: the run stopped here"
            save()
        return save_part

    try:
        manifest = load_manifest(args.sources, args.stash)
        report["bundle"] = {"id": manifest["bundle"], "commit": manifest.get("commit"),
                            "parts": len(manifest["parts"]), "stand_in": manifest.get("stand_in")}
        prepare_stash(args.stash, manifest)
        taken, refused = take_parts(args.sources, args.stash, manifest)
        have = stashed_parts(args.stash, manifest)
        missing = [p["index"] for p in manifest["parts"] if p["index"] not in have]
        report["parts"] = {"taken_now": taken, "refused": refused, "have": have, "missing": missing}
        say(f"bundle {manifest['bundle'][:12]}: took part(s) {taken or 'none'}; "
            f"have {have} of {len(manifest['parts'])}")
        if refused:
            report["state"] = "corrupt part"
            for r in refused:
                say(f"REFUSED part {r['part']} ({r['file']}): {r['bytes']} bytes, sha256 {r['sha256']}; "
                    f"expected {r['expected_bytes']} bytes, sha256 {r['expected_sha256']}")
            return finish(EXIT_CORRUPT, "corrupt part refused: send it again")
        if missing:
            report["state"] = "incomplete"
            report["next"] = [f"carry-{i}" for i in missing]
            return finish(EXIT_INCOMPLETE, f"incomplete: call again carrying carry-{missing[0]}")
        if manifest.get("stand_in") and not args.dry_run:
            report["state"] = "stand-in bundle"
            return finish(EXIT_CORRUPT, "this bundle holds a stand-in for the CUDA provider (a test bundle): "
                                        "build the real one with make gpu-bundle")
        root, unpacked = unpack(args.stash, manifest, log)
        report["unpack"] = unpacked
        with open(os.path.join(root, "BUNDLE.json")) as f:
            info = json.load(f)
        report["bundle"].update({"ebb_version": info["ebb_version"], "ort_version": info["ort_version"],
                                 "provider_sha256": info["provider"]["sha256"]})
        say("bundle reassembled and verified" + (" (unpacked before)" if unpacked["reused"] else ""))
    except Bundle as e:
        report["state"] = "corrupt bundle"
        report["error"] = str(e)
        say(f"ERROR: {e}")
        return finish(EXIT_CORRUPT, "corrupt bundle")

    report["state"] = "complete"
    deadline = Deadline(args.deadline)
    env_report, path = machine(root, info, args.stash, log)
    report["machine"] = env_report
    report["closure"] = closure(root, path, info, log)
    say(f"glibc {env_report['glibc']['machine']} (needs {info['glibc_needed']}); "
        f"CUDA libraries missing: {env_report['cuda_libraries_missing'] or 'none'}; "
        f"libstdc++: {env_report['libstdcxx']['uses']}")
    env = {"LD_LIBRARY_PATH": ":".join(path), "EBB_CACHE_DIR": os.path.join(args.stash, "cache")}
    steps = {}
    # ebb --version: the ORT it loaded and whether the CUDA provider library loads (with the loader's error).
    version = run_step([os.path.join(root, "bin", "ebb"), "--version"], env, 60, log)
    steps["ebb_version"] = {"status": "pass" if version["rc"] == 0 else "fail",
                            "output": tail(version["stdout"] + version["stderr"])}
    if not env_report["glibc"]["ok"]:
        steps["glibc"] = {"status": "fail", "message": f"glibc {env_report['glibc']['machine']} is older than "
                                                       f"{info['glibc_needed']}"}
    if report["closure"]["unresolved_not_cuda"]:
        steps["closure"] = {"status": "fail", "message": "libraries that nothing resolves: " +
                            json.dumps(report["closure"]["unresolved_not_cuda"])}
    if not args.dry_run and (env_report["cuda_libraries_missing"] or report["closure"]["unresolved"]):
        steps["cuda_libraries"] = {"status": "fail", "message": "not found: " +
                                   ", ".join(env_report["cuda_libraries_missing"]) + " " +
                                   json.dumps(report["closure"]["unresolved"])}
    only = [c for c in args.checks.split(",") if c]
    report["steps"] = steps
    report["checks"] = run_checks(root, env, args.dry_run, deadline, only, log, saving("checks"))
    report["benches"] = run_benches(root, env, args.dry_run, deadline, log, saving("benches"))
    if shutil.which("nvidia-smi"):
        after = run_step(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader"], {}, 30, log)
        env_report["nvidia_smi_memory_used_at_end"] = after["stdout"].strip()
    statuses = ([c["status"] for c in report["checks"]] + [b["status"] for b in report["benches"].values()] +
                [s["status"] for s in steps.values()])
    report["summary"] = {s: statuses.count(s) for s in ("pass", "fail", "skip")}
    failed = [c["check"] for c in report["checks"] if c["status"] == "fail"]
    failed += [n for n, b in report["benches"].items() if b["status"] == "fail"]
    failed += [n for n, s in steps.items() if s["status"] == "fail"]
    report["failed"] = failed
    for c in report["checks"]:
        unmet = [g for g, ok in c.get("goals", {}).items() if not ok]
        if unmet and c["status"] == "fail":
            say(f"  {c['check']}: goals not met: {', '.join(unmet)}")
    if failed:
        return finish(EXIT_FAILED, "FAILED: " + ", ".join(failed))
    return finish(EXIT_OK, "dry run: every step walked" if args.dry_run else "PASSED: every CUDA check")


if __name__ == "__main__":
    sys.exit(main())
