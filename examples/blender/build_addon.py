"""Packages the ebb Upscale add-on with the bundled upscaler (and, for Blender 4.2+, ebb's wheels).

    /usr/bin/python3 examples/blender/build_addon.py --out dist                     # legacy add-on zip
    /usr/bin/python3 examples/blender/build_addon.py --out dist --extension \\
        --wheel build/python/dist/ebb-0.1.0-py3-none-linux_x86_64.whl \\
        --wheel build-windows/ebb-0.1.0-py3-none-win_amd64.whl                     # Blender 4.2+ extension

The legacy zip holds the folder ebb_upscale/ (Edit > Preferences > Add-ons > Install...). The extension
zip holds the same files at its root with blender_manifest.toml, and the wheels under wheels/, one per
platform (ebb's wheel is py3-none-<platform>: it serves every Blender's Python, 3.10 to 3.13); the
manifest's `wheels` lists them and `platforms` names the platforms they cover, and Blender installs the one
for its platform into its own Python when it installs the extension. Only the standard library is used.
"""
import argparse
import os
import pathlib
import re
import shutil
import zipfile

HERE = pathlib.Path(__file__).resolve().parent
SOURCE = HERE / "ebb_upscale"
REPO = HERE.parents[1]
MODEL = REPO / "models" / "waifu2x_scale2x"
NAME = "ebb_upscale"


# A wheel's platform tag -> Blender's platform name (blender_manifest.toml `platforms`).
PLATFORMS = {"linux_x86_64": "linux-x64", "win_amd64": "windows-x64", "macosx_11_0_arm64": "macos-arm64"}


def wheel_platform(wheel: pathlib.Path) -> str:
    tag = wheel.name[:-len(".whl")].split("-")[-1]
    if tag not in PLATFORMS:
        raise SystemExit(f"build_addon: {wheel.name}: platform '{tag}' is not one Blender names ({sorted(PLATFORMS)})")
    return PLATFORMS[tag]


def stage(target: pathlib.Path, wheels: "list[pathlib.Path]" = ()) -> pathlib.Path:
    """The add-on folder as it is installed: the sources, models/waifu2x_scale2x, wheels/ (if any)."""
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(SOURCE, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copytree(MODEL, target / "models" / MODEL.name)
    if wheels:
        (target / "wheels").mkdir()
        for wheel in wheels:
            shutil.copy2(wheel, target / "wheels" / wheel.name)
        platforms = sorted({wheel_platform(w) for w in wheels})
        listed = ", ".join(f'"./wheels/{w.name}"' for w in wheels)
        manifest = target / "blender_manifest.toml"
        text = re.sub(r'^wheels = \[.*\]$', f"wheels = [{listed}]", manifest.read_text(), flags=re.M)
        text = re.sub(r'^platforms = \[.*\]$', "platforms = [" + ", ".join(f'"{p}"' for p in platforms) + "]",
                      text, flags=re.M)
        manifest.write_text(text)
    return target


def build_zip(staged: pathlib.Path, out: pathlib.Path, extension: bool) -> pathlib.Path:
    version = re.search(r'^version = "(.*)"$', (staged / "blender_manifest.toml").read_text(), re.M).group(1)
    out.mkdir(parents=True, exist_ok=True)
    target = out / f"{NAME}-{version}{'-extension' if extension else ''}.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(staged.rglob("*")):
            if path.is_file():
                relative = path.relative_to(staged)
                z.write(path, str(relative) if extension else os.path.join(NAME, str(relative)))
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description="package the ebb Upscale Blender add-on")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("dist"))
    parser.add_argument("--wheel", type=pathlib.Path, action="append", default=[],
                        help="an ebb wheel (one per platform; repeat), put under wheels/ (Blender 4.2+)")
    parser.add_argument("--extension", action="store_true", help="the Blender 4.2+ extension layout")
    parser.add_argument("--stage-only", action="store_true", help="only the folder <out>/ebb_upscale")
    args = parser.parse_args()
    if args.extension and not args.wheel:
        parser.error("an extension carries ebb as wheels: pass --wheel (once per platform)")
    staged = stage(args.out / NAME if args.stage_only else args.out / f".{NAME}-stage", args.wheel)
    if args.stage_only:
        print(staged)
        return
    print(build_zip(staged, args.out, args.extension))
    shutil.rmtree(staged)


if __name__ == "__main__":
    main()
