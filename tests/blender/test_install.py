"""The installed-wheel route, as a Blender user takes it (examples/blender/README.md), into a scratch user folder:

1. ebb's wheel, py3-none-linux_x86_64 (`make wheel`, the build's target ebb_wheel; libebb.so.1 and ONNX Runtime
   inside it);
2. the add-on's zip (examples/blender/build_addon.py);
3. `pip install --no-deps --target <user scripts>/modules <wheel>` with Blender's Python (Debian's Blender runs
   on /usr/bin/python3), then in Blender: Preferences > Add-ons > Install (addon_install), enable, save the
   preferences;
4. Blender started again, as a user would (no --factory-startup, no PYTHONPATH, no --python-use-system-env):
   the add-on is enabled from the saved preferences, `import ebb` finds the wheel's copy in the user folder
   with ONNX Runtime beside it, and an image is upscaled.

The Blender 4.2+ extension form (build_addon.py --extension): Debian has no Blender 4.2 to install it into, so
its zip is checked as Blender reads it (blender_manifest.toml's `wheels` and `platforms`, the wheels under
wheels/), and the wheel it carries is installed the way Blender installs an extension's wheels (into a
site-packages folder of Blender's Python) and runs a model in CPython 3.13, the Python of Blender 5.1.

Run by ctest with /usr/bin/python3 -m pytest (plain Python; Blender is started as a child process)."""
import json
import os
import pathlib
import shutil
import subprocess
import tomllib
import zipfile

import pytest

import launch

ROOT = launch.ROOT
BUILD = pathlib.Path(os.environ.get("EBB_BUILD_DIR", ROOT / "build"))
BLENDER_PYTHON = "/usr/bin/python3"  # the interpreter Debian's Blender embeds (libpython3.11)

INSTALL = r"""
import sys, bpy
zip_path = sys.argv[sys.argv.index("--") + 1]
assert bpy.ops.preferences.addon_install(filepath=zip_path) == {'FINISHED'}
assert bpy.ops.preferences.addon_enable(module="ebb_upscale") == {'FINISHED'}
assert bpy.ops.wm.save_userpref() == {'FINISHED'}
"""

USE = r"""
import json, sys, bpy, numpy as np
assert "ebb_upscale" in bpy.context.preferences.addons, "the add-on is not enabled after a restart"
import ebb
image = bpy.data.images.new("photo", 160, 120, alpha=True)
image.pixels.foreach_set(np.random.default_rng(7).random(160 * 120 * 4, dtype=np.float32))
result = bpy.ops.ebb.upscale_image(image="photo")
with open("/proc/self/maps") as maps:
    ort = sorted({line.split()[-1] for line in maps if "libonnxruntime.so" in line})
print("RESULT " + json.dumps({"op": sorted(result), "size": list(bpy.data.images["photo_2x"].size),
                              "ebb": ebb.__file__, "version": ebb.__version__, "ort": ort,
                              "scripts": bpy.utils.script_path_user()}))
"""


def test_wheel_into_blenders_user_folder_then_the_addon_zip(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    env.update(EBB_BUILD_DIR=str(BUILD), PIP_NO_INDEX="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    dist = tmp_path / "dist"
    whl = _wheel()
    addon_zip = subprocess.run([BLENDER_PYTHON, str(ROOT / "examples" / "blender" / "build_addon.py"), "--out",
                                str(dist)], capture_output=True, text=True, check=True).stdout.strip()

    env.update(launch.user_folder(tmp_path / "user"))
    modules = tmp_path / "user" / "scripts" / "modules"
    pip = subprocess.run([BLENDER_PYTHON, "-m", "pip", "install", "--no-deps", "--target", str(modules), str(whl)],
                         env=env, cwd=tmp_path, capture_output=True, text=True)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    install = launch.run_blender(["-b", "--python-exit-code", "1", "--python-expr", INSTALL, "--", addon_zip], env)
    assert install.returncode == 0, install.stdout + install.stderr
    assert (tmp_path / "user" / "scripts" / "addons" / "ebb_upscale" / "models" / "waifu2x_scale2x").is_dir()

    use = launch.run_blender(["-b", "--python-exit-code", "1", "--python-expr", USE], env)
    assert use.returncode == 0, use.stdout + use.stderr
    assert "Traceback" not in use.stdout + use.stderr
    (line,) = [l for l in use.stdout.splitlines() if l.startswith("RESULT ")]
    got = json.loads(line[len("RESULT "):])
    assert got["op"] == ["FINISHED"] and got["size"] == [320, 240]
    assert got["scripts"] == str(tmp_path / "user" / "scripts")
    assert pathlib.Path(got["ebb"]).parent == modules / "ebb"
    assert got["version"] == "0.1.0"
    # ONNX Runtime is the wheel's copy beside the extension, not the checkout's.
    assert got["ort"] == [str(modules / "ebb" / "libonnxruntime.so.1")]


def _wheel() -> pathlib.Path:
    wheels = sorted((BUILD / "python" / "dist").glob("ebb-*-py3-none-linux_x86_64.whl"))
    assert wheels, "no wheel in build/python/dist: build the target ebb_wheel (make wheel)"
    return wheels[-1].resolve()


CHECK_313 = r"""
import array, sys
import ebb
assert ebb.__file__.startswith(sys.argv[2]), ebb.__file__
s = ebb.Runtime().load(sys.argv[1])
out = s.run({"x": memoryview(array.array("f", [0.25] * 3 * 8 * 8)).cast("B").cast("f", (1, 3, 8, 8))})["y"]
print(sys.version_info[:2], out.shape)
"""


def test_the_extension_zip_carries_the_wheel_for_every_blender_python(tmp_path):
    whl = _wheel()
    out = subprocess.run([BLENDER_PYTHON, str(ROOT / "examples" / "blender" / "build_addon.py"), "--out",
                          str(tmp_path), "--extension", "--wheel", str(whl)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    extension = pathlib.Path(out.stdout.strip())
    assert extension.name == "ebb_upscale-0.1.0-extension.zip"
    with zipfile.ZipFile(extension) as z:
        names = set(z.namelist())
        manifest = tomllib.loads(z.read("blender_manifest.toml").decode())
        z.extract(f"wheels/{whl.name}", tmp_path / "x")
    assert {"__init__.py", "engine.py", "models/waifu2x_scale2x/model.onnx", f"wheels/{whl.name}"} <= names
    assert manifest["wheels"] == [f"./wheels/{whl.name}"] and manifest["platforms"] == ["linux-x64"]
    assert manifest["blender_version_min"] == "4.2.0" and manifest["id"] == "ebb_upscale"

    # Blender installs an extension's wheels into a site-packages folder of its own Python: here 3.13's.
    pyenv = shutil.which("pyenv") or os.path.expanduser("~/.pyenv/bin/pyenv")
    prefix = subprocess.run([pyenv, "prefix", "3.13.0"], capture_output=True, text=True) \
        if os.path.exists(pyenv) else None
    if prefix is None or prefix.returncode != 0:
        pytest.skip("CPython 3.13 (Blender 5.1's Python) is not installed in pyenv here")
    site = tmp_path / "site-packages"
    pip = subprocess.run([BLENDER_PYTHON, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(site),
                          str(tmp_path / "x" / "wheels" / whl.name)], capture_output=True, text=True)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONHOME", "EBB_LIBRARY")}
    env["PYTHONPATH"] = str(site)
    run = subprocess.run([str(pathlib.Path(prefix.stdout.strip()) / "bin" / "python"), "-c", CHECK_313,
                          str(ROOT / "models" / "convnet" / "model.onnx"), str(site)], env=env, capture_output=True,
                         text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.startswith("(3, 13) (1,")
