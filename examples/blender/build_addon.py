"""Packages the ebb Upscale add-on with the bundled upscaler (and, for Blender 4.2+, ebb's wheel).

    /usr/bin/python3 examples/blender/build_addon.py --out dist                     # legacy add-on zip
    /usr/bin/python3 examples/blender/build_addon.py --out dist --wheel dist/ebb-0.1.0-cp311-*.whl \\
        --extension                                                                # Blender 4.2+ extension

The legacy zip holds the folder ebb_upscale/ (Edit > Preferences > Add-ons > Install...). The extension
zip holds the same files at its root with blender_manifest.toml, and the wheel under wheels/ (Blender
installs it into its own Python when it installs the extension). Only the standard library is used.
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


def stage(target: pathlib.Path, wheel: "pathlib.Path | None" = None) -> pathlib.Path:
    """The add-on folder as it is installed: the sources, models/waifu2x_scale2x, wheels/ (if any)."""
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(SOURCE, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    shutil.copytree(MODEL, target / "models" / MODEL.name)
    if wheel is not None:
        (target / "wheels").mkdir()
        shutil.copy2(wheel, target / "wheels" / wheel.name)
        manifest = target / "blender_manifest.toml"
        text = manifest.read_text()
        manifest.write_text(re.sub(r'^wheels = \[.*\]$', f'wheels = ["./wheels/{wheel.name}"]', text, flags=re.M))
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
    parser.add_argument("--wheel", type=pathlib.Path, help="ebb's wheel, put under wheels/ (Blender 4.2+)")
    parser.add_argument("--extension", action="store_true", help="the Blender 4.2+ extension layout")
    parser.add_argument("--stage-only", action="store_true", help="only the folder <out>/ebb_upscale")
    args = parser.parse_args()
    if args.extension and args.wheel is None:
        parser.error("an extension carries ebb as a wheel: pass --wheel")
    staged = stage(args.out / NAME if args.stage_only else args.out / f".{NAME}-stage", args.wheel)
    if args.stage_only:
        print(staged)
        return
    print(build_zip(staged, args.out, args.extension))
    shutil.rmtree(staged)


if __name__ == "__main__":
    main()
