"""doccheck: the documentation's examples, run and compared with what the docs show.

The convention (docs/contributing.md, "Checked examples"): an HTML comment

    <!-- check -->

on the line right before a fenced block marks that block as checked; unmarked blocks are not run.
What is checked depends on the block's language:

- ```console: lines starting with "$ " are commands (a line ending in "\\" continues on the next, and
  so do lines starting with "> ", the shell's continuation prompt, as inside a quoted string);
  every other line is the output the command before it prints (stdout and stderr together). The
  commands of one block run in one bash process, one after another, from the checkout's root
  ("build/" is the build folder the test was given). A command's exit status is not compared, its
  output is; but a command that exits non-zero with no output (where the page shows none) fails.
- ```python: the block is run by Debian's /usr/bin/python3 from the checkout's root, with the build's
  Python package and gRPC stubs on PYTHONPATH; its output is the next fenced block of the page
  (the "prints" block, any language), compared the same way.
- ```cmake, ```cpp, ```c ...: not run by themselves; a checked console block runs them (see below).

Output is compared line by line, trailing blanks ignored, exactly, except:
- a line "..." in the docs (blanks around it allowed) stands for any number of lines (also none);
- `vary` patterns: `<!-- check: vary /REGEX/ /REGEX/ -->` lists regular expressions (Python syntax,
  between slashes) whose matches may differ; they are replaced by one placeholder in the docs' text
  and in the actual output before comparing, so the text around them must still match. The word
  `numbers` stands for /-?[0-9]+(?:\\.[0-9]+)?/ (every number may differ: figures of this machine).
- `server`: `<!-- check: server ... -->` runs the block against an `ebb serve` of the bundled models
  that the test starts (on free ports: 127.0.0.1:8000 and 127.0.0.1:8001 in commands and output are
  mapped to them, and back).
- `startup`: `<!-- check: startup ... -->` on a block of plain text: the lines that server printed when
  it started (repository path shown as .../models), compared with the block.
- `file PATH`: `<!-- check: file PATH -->` on any block: the block's text is written to
  "$DOC/PATH" (a scratch folder, $DOC in the commands) before the page's checked commands run, so a
  page shows a CMakeLists.txt or a program once and a later console block builds it.

A page's checked blocks run in page order; $DOC is one scratch folder per page, outside the checkout.
"""
from __future__ import annotations

import dataclasses
import difflib
import os
import pathlib
import re
import shlex
import subprocess
import tempfile
import threading

NUMBER = r"-?[0-9]+(?:\.[0-9]+)?"
MARKER = re.compile(r"^<!--\s*check(?::\s*(?P<options>.*?))?\s*-->\s*$")
FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+)(?P<lang>[\w+-]*)\s*$")
PLACEHOLDER = "\x00vary\x00"


@dataclasses.dataclass
class Block:
    page: pathlib.Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    options: str = ""
    checked: bool = False
    output: "Block | None" = None  # a python block's "prints" block

    @property
    def vary(self) -> list[str]:
        patterns = re.findall(r"/((?:[^/\\]|\\.)+)/", self.options)
        if re.search(r"(^|\s)numbers(\s|$)", re.sub(r"/((?:[^/\\]|\\.)+)/", " ", self.options)):
            patterns.append(NUMBER)
        return patterns

    def has(self, word: str) -> bool:
        return re.search(rf"(^|\s){word}(\s|$)", re.sub(r"/((?:[^/\\]|\\.)+)/", " ", self.options)) is not None

    @property
    def file(self) -> str | None:
        m = re.search(r"(?:^|\s)file\s+(\S+)", re.sub(r"/((?:[^/\\]|\\.)+)/", " ", self.options))
        return m.group(1) if m else None

    @property
    def where(self) -> str:
        return f"{self.page.name}:{self.line}"


def parse(page: pathlib.Path, text: str | None = None) -> list[Block]:
    """Every fenced block of a Markdown page, with its check marker when it has one."""
    lines = (page.read_text() if text is None else text).split("\n")
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence = len(m.group("indent")), m.group("fence")
        body = []
        j = i + 1
        while j < len(lines) and lines[j].strip() != fence:
            body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j])
            j += 1
        block = Block(page, i + 1, m.group("lang"), "\n".join(body))
        previous = lines[i - 1].strip() if i > 0 else ""
        marker = MARKER.match(previous)
        if marker:
            block.checked = True
            block.options = marker.group("options") or ""
        blocks.append(block)
        i = j + 1
    for k, block in enumerate(blocks):
        if block.checked and block.lang == "python" and not block.file:
            if k + 1 >= len(blocks):
                raise ValueError(f"{block.where}: a checked python block needs a following block with its output")
            block.output = blocks[k + 1]
    return blocks


def split_console(text: str) -> list[tuple[str, list[str]]]:
    """A console block as (command, expected output lines) pairs."""
    steps: list[tuple[str, list[str]]] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("$ "):
            command = line[2:]
            while command.endswith("\\") and i + 1 < len(lines):
                i += 1
                command = command + "\n" + lines[i]
            steps.append((command, []))
        elif line.startswith("> ") and steps and not steps[-1][1]:
            steps[-1] = (steps[-1][0] + "\n" + line[2:], [])  # the shell's continuation prompt
        elif steps:
            steps[-1][1].append(line)
        elif line.strip():
            raise ValueError(f"output before the first command: {line!r}")
        i += 1
    return steps


def normalize(lines: list[str], vary: list[str]) -> list[str]:
    out = []
    for line in lines:
        line = line.rstrip()
        for pattern in vary:
            line = re.sub(pattern, PLACEHOLDER, line)
        out.append(line)
    while out and out[-1] == "":
        out.pop()
    return out


def matches(expected: list[str], actual: list[str]) -> bool:
    """Line by line; a line '...' in `expected` matches any run of lines."""
    if not expected:
        return not actual
    if expected[0].strip() == "...":
        return any(matches(expected[1:], actual[k:]) for k in range(len(actual) + 1))
    return bool(actual) and expected[0] == actual[0] and matches(expected[1:], actual[1:])


def compare(expected_text: list[str], actual_text: str, vary: list[str]) -> str | None:
    """None when they match, else a diff of the docs against the output."""
    expected = normalize(expected_text, vary)
    actual = normalize(actual_text.split("\n"), vary)
    if matches(expected, actual):
        return None
    show = lambda lines: [line.replace(PLACEHOLDER, "<varies>") for line in lines]
    return "\n".join(difflib.unified_diff(show(expected), show(actual), "documented", "actual", lineterm=""))


@dataclasses.dataclass
class Context:
    """Where examples run: the checkout, its build folder, the scratch folder and the server's ports."""
    source: pathlib.Path
    build: pathlib.Path
    scratch: pathlib.Path
    http_port: int = 0
    grpc_port: int = 0
    startup: str = ""

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        paths = [str(self.build / "python"), str(self.build / "generated" / "python")]
        env["PYTHONPATH"] = os.pathsep.join(paths + [p for p in [env.get("PYTHONPATH")] if p])
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env["DOC"] = str(self.scratch)
        env.pop("EBB_LOG", None)
        return env

    def to_ports(self, text: str) -> str:
        if self.http_port:
            text = text.replace("127.0.0.1:8000", f"127.0.0.1:{self.http_port}")
            text = text.replace("127.0.0.1:8001", f"127.0.0.1:{self.grpc_port}")
        return text

    def from_ports(self, text: str) -> str:
        if self.http_port:
            text = text.replace(f"127.0.0.1:{self.http_port}", "127.0.0.1:8000")
            text = text.replace(f"127.0.0.1:{self.grpc_port}", "127.0.0.1:8001")
        return text

    def command(self, text: str) -> str:
        """A documented command as run here: build/ is the build folder given."""
        text = self.to_ports(text)
        if self.build.resolve() != (self.source / "build").resolve():
            text = re.sub(r"(^|[\s=:'\"(])build/", lambda m: m.group(1) + str(self.build) + "/", text)
        return text


def run_console(block: Block, ctx: Context, timeout: float = 300) -> str | None:
    """Runs a checked console block; None when every output matches, else what differs."""
    steps = split_console(block.text)
    if not steps:
        return f"{block.where}: a checked console block without a '$ ' command"
    separator = "\x1e-- ebb doccheck --\x1e"
    script = ["set -o pipefail"]
    for command, _ in steps:
        script.append(f"printf '%s\\n' {shlex.quote(separator)}")
        script.append(ctx.command(command))
        script.append(f"printf '\\n%s exit %d\\n' {shlex.quote(separator)} $?")
    result = subprocess.run(["bash", "-c", "\n".join(script)], cwd=ctx.source, env=ctx.env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, timeout=timeout)
    parts = ctx.from_ports(result.stdout).split(separator + "\n")[1:]
    problems = []
    for k, (command, expected) in enumerate(steps):
        if k >= len(parts):
            problems.append(f"$ {command}\n(not run)")
            break
        actual, rc = parts[k], None
        if m := re.search(r"\n?" + re.escape(separator) + r" exit (\d+)\n?$", actual):
            actual, rc = actual[: m.start()], int(m.group(1))
        actual = actual.rstrip("\n")
        diff = compare(expected, actual, block.vary)
        if diff:
            problems.append(f"$ {command}\n(exit status {rc})\n{diff}")
        elif rc != 0 and not any(line.strip() for line in expected):
            # A documented failure shows its message; a command that fails silently is an error.
            problems.append(f"$ {command}\nexited {rc} without output; the page shows none either")
    return f"{block.where}:\n" + "\n\n".join(problems) if problems else None


def run_python(block: Block, ctx: Context, timeout: float = 300) -> str | None:
    result = subprocess.run(["/usr/bin/python3", "-c", ctx.to_ports(block.text)], cwd=ctx.source, env=ctx.env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout)
    actual = ctx.from_ports(result.stdout).rstrip("\n")
    if result.returncode != 0:
        return f"{block.where}: the python block exited {result.returncode}; it printed:\n{actual}"
    diff = compare(block.output.text.split("\n"), actual, block.vary)
    return f"{block.where} (output at line {block.output.line}):\n{diff}" if diff else None


def run_startup(block: Block, ctx: Context) -> str | None:
    diff = compare(block.text.split("\n"), ctx.from_ports(ctx.startup).rstrip("\n"), block.vary)
    return f"{block.where} (the server's start-up lines):\n{diff}" if diff else None


def write_files(blocks: list[Block], ctx: Context) -> None:
    for block in blocks:
        if block.checked and block.file:
            path = ctx.scratch / block.file
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(block.text + "\n")


def check(block: Block, ctx: Context) -> str | None:
    """Runs one checked block (write_files first); None when it matches the docs."""
    if block.file:
        return None
    if block.has("startup"):
        return run_startup(block, ctx)
    if block.lang == "console":
        return run_console(block, ctx)
    if block.lang == "python":
        return run_python(block, ctx)
    return f"{block.where}: a checked ```{block.lang} block is neither console nor python nor a file"


def start_server(ctx: Context, timeout: float = 120) -> subprocess.Popen:
    """`ebb serve` on the bundled models, on free ports; ctx gets its ports and start-up lines."""
    server = subprocess.Popen([str(ctx.build / "ebb"), "serve", "--repository", "models", "--port", "0",
                               "--grpc-port", "-1"], cwd=ctx.source, env=ctx.env(), stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    lines = []
    for line in server.stdout:
        lines.append(line.rstrip("\n"))
        if m := re.match(r"ebb serve: http://127\.0\.0\.1:(\d+) ", line):
            ctx.http_port = int(m.group(1))
        if m := re.match(r"ebb serve: grpc 127\.0\.0\.1:(\d+)", line):
            ctx.grpc_port = int(m.group(1))
        if "/metrics | grep" in line:
            break
    else:
        raise RuntimeError("ebb serve ended before printing its hint:\n" + "\n".join(lines))
    # The rest of its output is drained, so that a full pipe never blocks it.
    threading.Thread(target=lambda: [None for _ in server.stdout], daemon=True).start()
    root = str((ctx.source / "models").resolve())
    ctx.startup = "\n".join(line.replace(root, ".../models") for line in lines)
    return server


def tempdir(prefix: str) -> pathlib.Path:
    return pathlib.Path(tempfile.mkdtemp(prefix=prefix))
