"""java_docs_test: every ```java block of a page compiles as shown, and runs.

A block is compiled exactly as the page shows it, with nothing added but a class around it: its leading
`import` lines stay imports, the rest becomes the body of one method (a block that declares a class is
compiled as it is). Each block is compiled with javac against ebb.jar, then run from the checkout's root
with the jar's natives, so the models the page names are the bundled ones.

    java_snippets.py PAGE --javac JAVAC --java JAVA --jar EBB_JAR [--jvm-arg ARG]...
"""
from __future__ import annotations

import argparse
import pathlib
import re
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^```(\w*)\s*$")


def java_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, text) of every ```java block."""
    blocks, lines, i = [], text.split("\n"), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        lang, start, i = m.group(1), i + 1, i + 1
        while i < len(lines) and not lines[i].startswith("```"):
            i += 1
        if lang == "java":
            blocks.append((start, "\n".join(lines[start:i])))
        i += 1
    return blocks


def as_class(name: str, block: str) -> str:
    """The block as a compilation unit named `name`: imports first, the statements in a method."""
    if re.search(r"^\s*(public\s+)?(final\s+)?class\s", block, re.M):
        return re.sub(r"class\s+\w+", f"class {name}", block, count=1)
    lines = block.split("\n")
    k = 0
    while k < len(lines) and (lines[k].startswith("import ") or not lines[k].strip()):
        k += 1
    body = "\n".join("    " + line for line in lines[k:])
    return ("\n".join(lines[:k]) + f"\n\npublic final class {name} {{\n  public static void main(String[] args) "
            f"throws Exception {{\n{body}\n  }}\n}}\n")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("page", type=pathlib.Path)
    ap.add_argument("--javac", required=True)
    ap.add_argument("--java", required=True)
    ap.add_argument("--jar", required=True)
    ap.add_argument("--root", type=pathlib.Path, default=pathlib.Path.cwd())
    ap.add_argument("--jvm-arg", action="append", default=[])
    args = ap.parse_args()
    blocks = java_blocks(args.page.read_text())
    if not blocks:
        print(f"{args.page}: no ```java block", file=sys.stderr)
        return 1
    failed = 0
    with tempfile.TemporaryDirectory() as tmp:
        for n, (line, block) in enumerate(blocks):
            name = f"Snippet{n}"
            src = pathlib.Path(tmp) / f"{name}.java"
            src.write_text(as_class(name, block))
            where = f"{args.page.name}:{line}"
            r = subprocess.run([args.javac, "-encoding", "UTF-8", "-cp", args.jar, "-d", tmp, str(src)],
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(f"{where}: the java block does not compile as shown:\n{r.stdout}{r.stderr}", file=sys.stderr)
                failed += 1
                continue
            r = subprocess.run([args.java, *args.jvm_arg, "-cp", f"{args.jar}:{tmp}", name], cwd=args.root,
                               capture_output=True, text=True, timeout=120)
            if r.returncode != 0:
                print(f"{where}: the java block compiles but fails when run:\n{r.stdout}{r.stderr}", file=sys.stderr)
                failed += 1
                continue
            print(f"{where}: compiles and runs")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
