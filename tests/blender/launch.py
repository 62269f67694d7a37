"""Real Blender, headless, for the add-on's tests (examples/blender/): one Blender process per test file.

    /usr/bin/python3 tests/blender/launch.py tests/blender/in_blender/test_addon.py [pytest args]

stages the add-on (examples/blender/build_addon.py: the sources and the bundled model) into a scratch
Blender user folder (BLENDER_USER_SCRIPTS/addons; BLENDER_USER_CONFIG beside it, so the machine's own
Blender settings are never read or written), then runs pytest on the file inside
`blender -b --factory-startup --python-exit-code 1 --python-use-system-env`: the tests call bpy directly.
ebb comes from the build tree (PYTHONPATH, which Blender reads with --python-use-system-env); the
installed-wheel route is tests/blender/test_install.py's.

ctest sets EBB_BLENDER, PYTHONPATH, EBB_BINARY, EBB_MODELS_DIR, EBB_CACHE_DIR (tests/CMakeLists.txt).
"""
import os
import pathlib
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BLENDER = os.environ.get("EBB_BLENDER", "blender")
sys.path.insert(0, str(ROOT / "examples" / "blender"))
import build_addon  # noqa: E402  (the add-on's own packager)

# Blender's flags for every test run: no window, no user settings, a failing script fails the process.
HEADLESS = ["-b", "--factory-startup", "--python-exit-code", "1"]
# Runs pytest inside Blender; a failure raises, so --python-exit-code makes Blender exit 1.
PYTEST_IN_BLENDER = (
    "import sys, pytest\n"
    "code = pytest.main(sys.argv[sys.argv.index('--') + 1:])\n"
    "if code != 0:\n"
    "    raise RuntimeError(f'pytest exit code {code}')\n")


def user_folder(scratch: pathlib.Path) -> dict:
    """Environment for a Blender whose user folders (scripts, config) are under `scratch`."""
    (scratch / "scripts" / "addons").mkdir(parents=True, exist_ok=True)
    (scratch / "config").mkdir(parents=True, exist_ok=True)
    return {"BLENDER_USER_SCRIPTS": str(scratch / "scripts"), "BLENDER_USER_CONFIG": str(scratch / "config"),
            "PYTHONDONTWRITEBYTECODE": "1"}


def run_blender(args: list, env: dict, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([BLENDER, *args], env=env, capture_output=True, text=True, timeout=timeout)


def main() -> int:
    test_file, *pytest_args = sys.argv[1:]
    with tempfile.TemporaryDirectory(prefix="ebb-blender-") as scratch:
        env = dict(os.environ, **user_folder(pathlib.Path(scratch)))
        build_addon.stage(pathlib.Path(scratch) / "scripts" / "addons" / build_addon.NAME)
        command = [BLENDER, *HEADLESS, "--python-use-system-env", "--python-expr", PYTEST_IN_BLENDER, "--",
                   str(pathlib.Path(test_file).resolve()), "-p", "no:cacheprovider", "-q", "-rs",
                   "--basetemp", str(pathlib.Path(scratch) / "pytest"), *pytest_args]
        return subprocess.run(command, env=env, cwd=scratch).returncode


if __name__ == "__main__":
    sys.exit(main())
