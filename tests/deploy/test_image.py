"""The container image's staging root (deploy/image/stage.sh on the build tree): its layout, the
runtime library closure of the staged ebb (`ldd` finds ONNX Runtime inside the staging root and every
other library in a Debian package that deploy/image/runtime-packages.txt lists), the staged
entrypoint serving the bundled models, and the Dockerfile's consistency with what was staged.

Containers cannot run on the machines this project is built on (docs/deploy.md), so the image itself
is not built here; this is what stands in for it. Run by ctest with EBB_SOURCE_DIR, EBB_BUILD_DIR and
EBB_MODELS_DIR in the environment.
"""

import fnmatch
import json
import os
import re
import shlex
import subprocess
import sys

import pytest
import yaml

sys.path.insert(0, os.path.dirname(__file__))
import serve_util  # noqa: E402

SOURCE = os.path.realpath(os.environ["EBB_SOURCE_DIR"])
BUILD = os.path.realpath(os.environ["EBB_BUILD_DIR"])
DOCKERFILE = os.path.join(SOURCE, "deploy/image/Dockerfile")
PACKAGES_FILE = os.path.join(SOURCE, "deploy/image/runtime-packages.txt")
PREFIX = "/opt/ebb"  # the image's install prefix (CMakeLists.txt "Install", the Dockerfile)


def clean_env(tmp):
    """No LD_LIBRARY_PATH (only the staged RUNPATH and the system's paths count), a private cache."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_LIBRARY_PATH", "LD_PRELOAD")}
    env["EBB_CACHE_DIR"] = os.path.join(tmp, "cache")
    return env


@pytest.fixture(scope="module")
def staged(tmp_path_factory):
    """The staging root: deploy/image/stage.sh --build-dir on the tree ctest built."""
    root = str(tmp_path_factory.mktemp("staging"))
    run = subprocess.run(["bash", os.path.join(SOURCE, "deploy/image/stage.sh"), "--build-dir", BUILD, root],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    return root


def in_root(root, image_path):
    """Where a path of the image is in the staging root."""
    assert image_path.startswith("/"), image_path
    return os.path.join(root, image_path.lstrip("/"))


def ldd(path, tmp):
    """{soname: resolved path or None} of `ldd path`, plus the loader (key: its path)."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True, env=clean_env(tmp), check=True).stdout
    libs = {}
    for line in out.splitlines():
        if m := re.match(r"\s*(\S+) => (not found|(/\S+))", line):
            libs[m.group(1)] = m.group(3)
        elif m := re.match(r"\s*(/\S+) \(0x", line):
            libs[m.group(1)] = m.group(1)
    return libs


def spellings(path):
    """A library path as dpkg may know it: as given, its link's target, each with and without the
    merged-/usr prefix."""
    out = []
    for c in [path, os.path.realpath(path)]:
        out.append(c)
        if c.startswith("/usr/lib/"):
            out.append(c[len("/usr"):])
        elif c.startswith(("/lib/", "/lib64/")):
            out.append("/usr" + c)
    return out


def packages_of(paths):
    """{path: the Debian packages owning it}, from one `dpkg -S` call."""
    asked = sorted({c for p in paths for c in spellings(p)})
    run = subprocess.run(["dpkg", "-S", *asked], capture_output=True, text=True)
    owners = {}
    for line in run.stdout.splitlines():
        packages, _, owned = line.partition(": ")
        owners[owned] = {p.strip().split(":")[0] for p in packages.split(",")}
    result = {}
    for p in paths:
        found = [owners[c] for c in spellings(p) if c in owners]
        assert found, f"no Debian package owns {p}"
        result[p] = found[0]
    return result


def listed_packages(path):
    with open(path) as f:
        lines = [line.strip() for line in f if line.strip()]
    assert lines == sorted(set(lines)), f"{path}: not sorted and unique"
    return set(lines)


# --- Layout ------------------------------------------------------------------------------------


def test_layout(staged):
    prefix = in_root(staged, PREFIX)
    for exe in ["bin/ebb", "bin/ebb-healthcheck"]:
        assert os.access(os.path.join(prefix, exe), os.X_OK), exe
    for lib in ["libonnxruntime.so", "libonnxruntime.so.1", "libonnxruntime_providers_shared.so"]:
        assert os.path.isfile(os.path.join(prefix, "lib", lib)), lib
    # The soname link stays a link inside lib/, not a copy and not a path into the source tree.
    link = os.path.join(prefix, "lib", "libonnxruntime.so.1")
    assert os.path.islink(link) and os.readlink(link) == "libonnxruntime.so"
    assert os.path.isfile(os.path.join(prefix, "share/doc/onnxruntime/LICENSE"))
    for model in ["tiny", "mixed", "convnet"]:
        assert os.path.isfile(os.path.join(prefix, "models", model, "model.onnx")), model
    assert os.path.isfile(os.path.join(prefix, "share/ebb/runtime-packages.txt"))
    # Nothing else at the top of the root: the image gets /opt/ebb and only that.
    assert sorted(os.listdir(staged)) == ["opt"] and os.listdir(os.path.join(staged, "opt")) == ["ebb"]


def test_runpath_points_inside_the_image(staged):
    out = subprocess.run(["readelf", "-d", in_root(staged, PREFIX + "/bin/ebb")], capture_output=True, text=True,
                         check=True).stdout
    paths = re.findall(r"\((?:RUNPATH|RPATH)\)\s+Library (?:runpath|rpath): \[(.*)\]", out)
    assert paths == ["$ORIGIN/../lib"], out


def test_no_path_of_the_build_machine_in_the_staged_binary(staged, tmp_path):
    ebb = in_root(staged, PREFIX + "/bin/ebb")
    with open(ebb, "rb") as f:
        data = f.read()
    for path in {SOURCE, BUILD}:
        assert path.encode() not in data, f"{ebb} holds {path}"
    # Where it looks for ONNX Runtime's CUDA provider: beside the staged libonnxruntime.
    version = subprocess.run([ebb, "--version"], capture_output=True, text=True, env=clean_env(str(tmp_path)),
                             cwd=str(tmp_path), timeout=60)
    assert version.returncode == 0, version.stderr
    assert f"{os.path.dirname(ebb)}/../lib/libonnxruntime_providers_cuda.so" in version.stdout, version.stdout


# --- The library closure -------------------------------------------------------------------------


def test_ldd_finds_everything_in_the_staged_root_or_debian_packages(staged, tmp_path):
    prefix = os.path.realpath(in_root(staged, PREFIX))
    elves = [os.path.join(prefix, "bin/ebb"), os.path.join(prefix, "lib/libonnxruntime.so"),
             os.path.join(prefix, "lib/libonnxruntime_providers_shared.so")]
    system_libs = set()
    for elf in elves:
        libs = ldd(elf, str(tmp_path))
        missing = [name for name, path in libs.items() if path is None]
        assert not missing, f"{elf}: not found: {missing}"
        for name, path in libs.items():
            real = os.path.realpath(path)
            assert not real.startswith((SOURCE + "/", BUILD + "/")), f"{elf}: {name} from the source tree: {real}"
            if not real.startswith(prefix + "/"):
                system_libs.add(path)
        if elf.endswith("/bin/ebb"):
            for ort in ["libonnxruntime.so.1"]:
                assert os.path.realpath(libs[ort]).startswith(prefix + "/lib/"), f"{ort} from {libs[ort]}"
    needed_packages = set().union(*packages_of(sorted(system_libs)).values())
    listed = listed_packages(PACKAGES_FILE)
    assert needed_packages - listed == set(), f"needed but not in {PACKAGES_FILE}"
    assert listed - needed_packages == set(), f"listed in {PACKAGES_FILE} but no staged library needs them"
    assert listed_packages(os.path.join(prefix, "share/ebb/runtime-packages.txt")) == listed


# --- The entrypoint ------------------------------------------------------------------------------


def dockerfile():
    """(instructions as (keyword, argument) in order, joined over line continuations)."""
    with open(DOCKERFILE) as f:
        text = re.sub(r"\\\n", " ", f.read())
    instructions = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            keyword, _, argument = line.partition(" ")
            instructions.append((keyword.upper(), argument.strip()))
    return instructions


def exec_form(argument):
    value = json.loads(argument)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), argument
    return value


def one(instructions, keyword):
    found = [a for k, a in instructions if k == keyword]
    assert len(found) == 1, f"{keyword}: {found}"
    return found[0]


def test_staged_entrypoint_serves_the_bundled_models(staged, tmp_path):
    """The image's ENTRYPOINT and CMD, run from the staging root: paths of the image mapped into it,
    ports to free ones, everything else as the Dockerfile says."""
    instructions = dockerfile()
    entrypoint = exec_form(one(instructions, "ENTRYPOINT"))
    cmd = exec_form(one(instructions, "CMD"))
    assert entrypoint[0].startswith(PREFIX + "/") and entrypoint[1:] == ["serve"]
    http_port, grpc_port = serve_util.free_port(), serve_util.free_port()
    ports = {cmd[cmd.index("--port") + 1]: str(http_port), cmd[cmd.index("--grpc-port") + 1]: str(grpc_port)}
    args = [ports.get(a, in_root(staged, a) if a.startswith(PREFIX + "/") else a) for a in cmd]
    command = [in_root(staged, entrypoint[0])] + entrypoint[1:] + args
    server = serve_util.Server(command, http_port, env=clean_env(str(tmp_path)), cwd=str(tmp_path))
    try:
        server.wait_live()
        server.wait_ready()
        models = in_root(staged, PREFIX + "/models")
        serve_util.infer_tiny_http(http_port, "tiny", os.path.join(models, "tiny", "model.onnx"))
        # The libraries as the process really mapped them, those it opened at run time included:
        # ONNX Runtime's the staged copy, every other one from a listed package.
        with open(f"/proc/{server.proc.pid}/maps") as f:
            mapped = {line.split()[-1] for line in f if re.search(r"\.so[.\d]*$", line.split()[-1])}
        ort = {p for p in mapped if "libonnxruntime" in p}
        assert ort and all(p.startswith(os.path.realpath(staged) + "/") for p in ort), ort
        system = sorted(p for p in mapped if not p.startswith(os.path.realpath(staged) + "/"))
        unlisted = {p: pk for p, pk in packages_of(system).items() if not pk & listed_packages(PACKAGES_FILE)}
        assert not unlisted, f"mapped, from packages not in {PACKAGES_FILE}: {unlisted}"
        # The image's health check against it, and against a port nothing listens on.
        healthcheck = in_root(staged, exec_form(one(instructions, "HEALTHCHECK").split("CMD", 1)[1])[0])
        env = clean_env(str(tmp_path))
        assert subprocess.run([healthcheck], env={**env, "EBB_HEALTH_PORT": str(http_port)}, timeout=30).returncode == 0
        closed = serve_util.free_port()
        assert subprocess.run([healthcheck], env={**env, "EBB_HEALTH_PORT": str(closed)}, timeout=30).returncode == 1
    finally:
        assert server.stop() == 0, server.output()


# --- The Dockerfile ----------------------------------------------------------------------------------


def test_dockerfile_matches_the_staged_root(staged):
    instructions = dockerfile()
    froms = [a for k, a in instructions if k == "FROM"]
    assert froms == ["debian:12 AS build", "debian:12-slim"], froms
    build_stage = instructions[:[i for i, (k, _) in enumerate(instructions) if k == "FROM"][1]]
    runtime_stage = instructions[len(build_stage):]
    build_runs = " ".join(a for k, a in build_stage if k == "RUN")
    assert "scripts/setup.sh" in build_runs and "deploy/image/stage.sh /staging" in build_runs, build_runs
    # COPY --from=build: the staged prefix, to the same place in the image.
    copies = [shlex.split(a) for k, a in runtime_stage if k == "COPY"]
    staged_copies = [c for c in copies if c[0] == "--from=build"]
    assert staged_copies == [["--from=build", "/staging" + PREFIX, PREFIX]], staged_copies
    assert os.path.isdir(in_root(staged, PREFIX))
    # The runtime packages: exactly the file test_ldd_... verified, and nothing else installed.
    context_copies = [c for c in copies if c[0] != "--from=build"]
    assert context_copies == [["deploy/image/runtime-packages.txt", "/tmp/runtime-packages.txt"]], context_copies
    runs = [a for k, a in runtime_stage if k == "RUN"]
    assert len(runs) == 1 and "xargs -a /tmp/runtime-packages.txt apt-get install" in runs[0], runs
    assert re.findall(r"apt-get install", runs[0]) == ["apt-get install"], runs[0]
    # A user that is not root, made in the image, and the entrypoint and health check staged.
    user = one(runtime_stage, "USER")
    assert user.split(":")[0] not in ("0", "root"), user
    assert f"--uid {user.split(':')[0]}" in runs[0], runs[0]
    for path in [exec_form(one(runtime_stage, "ENTRYPOINT"))[0],
                 exec_form(one(runtime_stage, "HEALTHCHECK").split("CMD", 1)[1])[0]]:
        assert os.access(in_root(staged, path), os.X_OK), path
    # The ports the manifests and CMD use are the ones the image declares.
    exposed = set(one(runtime_stage, "EXPOSE").split())
    cmd = exec_form(one(runtime_stage, "CMD"))
    assert {cmd[cmd.index("--port") + 1], cmd[cmd.index("--grpc-port") + 1]} <= exposed
    for f in ["kserve/cluster-serving-runtime.yaml", "modelmesh/serving-runtime.yaml"]:
        with open(os.path.join(SOURCE, "deploy", f)) as y:
            container = yaml.safe_load(y)["spec"]["containers"][0]
        assert container["command"] == exec_form(one(runtime_stage, "ENTRYPOINT")), f
        args = container["args"]
        ports = {args[args.index("--port") + 1], args[args.index("--grpc-port") + 1]}
        assert ports <= exposed, (f, ports, exposed)


def test_dockerignore_keeps_what_the_build_stage_needs():
    with open(os.path.join(SOURCE, ".dockerignore")) as f:
        patterns = [line.strip() for line in f if line.strip() and not line.startswith("#")]
    needed = ["scripts/setup.sh", "deploy/image/stage.sh", "deploy/image/runtime-packages.txt",
              "deploy/image/ebb-healthcheck", "CMakeLists.txt", "tests/CMakeLists.txt", "src/runtime/runtime.cc",
              "cli/main.cc", "server/grpc/proto/grpc_service.proto", "tools/make_test_models.py", "models/tiny"]
    for path in needed:
        assert os.path.exists(os.path.join(SOURCE, path)), path
        parts = path.split("/")
        prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
        hits = [p for p in patterns for q in prefixes if fnmatch.fnmatch(q, p.lstrip("/"))]
        assert not hits, f".dockerignore leaves out {path} ({hits})"
