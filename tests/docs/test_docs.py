"""docs_test: the README's and docs/*.md's checked examples, run and compared (tests/docs/doccheck.py says how).

One test per page, its checked blocks in page order; then self-tests proving that an edited
documented output, an edited command and a lost marker are caught. Run by ctest (`make test`):
EBB_SOURCE_DIR is the checkout, EBB_BUILD_DIR its build folder.
"""
import os
import pathlib
import shutil
import subprocess

import pytest

import doccheck

SOURCE = pathlib.Path(os.environ.get("EBB_SOURCE_DIR", pathlib.Path(__file__).resolve().parents[2]))
BUILD = pathlib.Path(os.environ.get("EBB_BUILD_DIR", SOURCE / "build"))
PAGES = [SOURCE / "README.md"] + sorted((SOURCE / "docs").glob("*.md"))


@pytest.fixture(scope="session")
def server():
    ctx = doccheck.Context(SOURCE, BUILD, doccheck.tempdir("ebb-doc-server-"))
    process = doccheck.start_server(ctx)
    yield ctx
    process.terminate()
    process.wait(timeout=30)
    shutil.rmtree(ctx.scratch, ignore_errors=True)


def check_page(page, server_ctx, text=None):
    """Every checked block of a page, in order; the list of what differs."""
    blocks = [b for b in doccheck.parse(page, text) if b.checked]
    ctx = doccheck.Context(SOURCE, BUILD, doccheck.tempdir("ebb-doc-"))
    if any(b.has("server") or b.has("startup") for b in blocks):
        ctx.http_port, ctx.grpc_port, ctx.startup = server_ctx.http_port, server_ctx.grpc_port, server_ctx.startup
    try:
        doccheck.write_files(blocks, ctx)
        return [p for p in (doccheck.check(b, ctx) for b in blocks) if p]
    finally:
        shutil.rmtree(ctx.scratch, ignore_errors=True)


def pages_with_checks():
    return [p for p in PAGES if any(b.checked for b in doccheck.parse(p))]


@pytest.mark.parametrize("page", pages_with_checks(), ids=lambda p: p.name)
def test_checked_examples_print_what_the_docs_show(page, request):
    needs_server = any(b.checked and (b.has("server") or b.has("startup")) for b in doccheck.parse(page))
    ctx = request.getfixturevalue("server") if needs_server else None
    problems = check_page(page, ctx)
    assert not problems, "\n\n".join(problems)


def test_the_readme_and_the_way_in_pages_have_checked_examples():
    for name in ["README.md", "cli.md", "cpp.md", "python.md", "server-api.md"]:
        page = SOURCE / name if name == "README.md" else SOURCE / "docs" / name
        assert any(b.checked for b in doccheck.parse(page)), f"{name} has no checked example"


# --- self-tests: the check can fail -------------------------------------------------------------

README = (SOURCE / "README.md").read_text()
VERSION_BLOCK = "$ build/ebb --version\nebb 0.1.0\n"


def readme_with_only(version_block):
    """The README with its `ebb --version` block's commands replaced by `version_block` and every other
    check marker removed (no server, seconds)."""
    assert VERSION_BLOCK in README, "the README's checked `ebb --version` block moved: update this self-test"
    lines = README.split("\n")
    start = README[: README.index(VERSION_BLOCK)].count("\n")  # the line of "$ build/ebb --version"
    fence = max(i for i in range(start) if lines[i].startswith("```"))
    kept = "\n".join(line if (i == fence - 1 or not doccheck.MARKER.match(line.strip())) else "" for i, line in
                     enumerate(lines))
    return kept.replace(VERSION_BLOCK, version_block, 1)


def test_an_edited_documented_output_fails():
    assert not check_page(SOURCE / "README.md", None, readme_with_only(VERSION_BLOCK))
    problems = check_page(SOURCE / "README.md", None, readme_with_only("$ build/ebb --version\nebb 0.1.1\n"))
    assert len(problems) == 1 and "-ebb 0.1.1" in problems[0] and "+ebb 0.1.0" in problems[0], problems


def test_a_failing_command_and_a_missing_line_fail():
    problems = check_page(SOURCE / "README.md", None, readme_with_only("$ build/ebb --no-such-flag\nebb 0.1.0\n"))
    assert len(problems) == 1 and "(exit status " in problems[0], problems
    silent = "$ build/ebb --no-such-flag > /dev/null 2>&1\n$ build/ebb --version\nebb 0.1.0\n"
    problems = check_page(SOURCE / "README.md", None, readme_with_only(silent))
    assert len(problems) == 1 and "without output" in problems[0], problems
    assert len(check_page(SOURCE / "README.md", None, readme_with_only("$ build/ebb --version\n"))) == 1


def test_the_patterns():
    assert doccheck.compare(["a 1.5 MiB", "b"], "a 2.25 MiB\nb", [doccheck.NUMBER]) is None
    assert doccheck.compare(["a 1.5 MiB"], "a 2.25 GiB", [doccheck.NUMBER]) is not None  # the unit is text
    assert doccheck.compare(["x", "...", "z"], "x\ny1\ny2\nz", []) is None
    assert doccheck.compare(["x", "...", "z"], "x\nz", []) is None
    assert doccheck.compare(["x", "...", "z"], "x\ny", []) is not None
    assert doccheck.compare(["exact 1"], "exact 2", []) is not None
    blocks = doccheck.parse(pathlib.Path("t.md"), "<!-- check: vary /RSS +\\S+/ numbers -->\n```console\n$ x\n```\n")
    assert blocks[0].checked and blocks[0].vary == ["RSS +\\S+", doccheck.NUMBER]
    unmarked = doccheck.parse(pathlib.Path("t.md"), "```console\n$ x\n```\n")
    assert not unmarked[0].checked
    assert doccheck.split_console("$ a \\\n  b\nout\n$ c") == [("a \\\n  b", ["out"]), ("c", [])]
    assert doccheck.split_console("$ a '1\n> 2'\nout\n> more out") == [("a '1\n2'", ["out", "> more out"])]


def test_every_marker_is_on_a_block():
    for page in PAGES:
        lines = page.read_text().split("\n")
        for i, line in enumerate(lines):
            if doccheck.MARKER.match(line.strip()):
                assert i + 1 < len(lines) and doccheck.FENCE.match(lines[i + 1]), \
                    f"{page.name}:{i + 1}: a check marker not right before a fenced block"


def test_ebb_is_built():
    assert subprocess.run([str(BUILD / "ebb"), "--version"], capture_output=True).returncode == 0


# --- links between the pages ---------------------------------------------------------------------

# Pages that other issues are writing at the same time (the Windows port, the performance work): a link to
# one of them is checked once it exists.
LANDING_ELSEWHERE = {"docs/windows.md", "docs/performance.md"}
LINK = __import__("re").compile(r"\]\(([^)\s]+)\)")


def slug(heading):
    """GitHub's anchor for a heading: lower case, punctuation but '-' and '_' dropped, spaces as '-'."""
    import re
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page):
    import re
    seen, found, fence = {}, set(), False
    for line in page.read_text().split("\n"):
        if line.lstrip().startswith("```"):
            fence = not fence
        if fence:
            continue
        if m := re.match(r"^#{1,6} (.*)$", line):
            a = slug(m.group(1))
            n = seen.get(a, 0)
            seen[a] = n + 1
            found.add(a if n == 0 else f"{a}-{n}")
    return found


def test_every_link_between_the_pages_resolves():
    problems = []
    for page in PAGES + [SOURCE / "examples" / "blender" / "README.md"]:
        text, fence = [], False
        for line in page.read_text().split("\n"):
            if line.lstrip().startswith("```"):
                fence = not fence
            elif not fence:
                text.append(line)
        for target in LINK.findall("\n".join(text)):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            if not file.exists():
                if str(file.relative_to(SOURCE)) not in LANDING_ELSEWHERE:
                    problems.append(f"{page.relative_to(SOURCE)}: {target}: no such file")
                continue
            if anchor and file.suffix == ".md" and anchor not in anchors(file):
                problems.append(f"{page.relative_to(SOURCE)}: {target}: no heading with that anchor")
    assert not problems, "\n".join(problems)


def test_long_pages_start_with_a_table_of_contents():
    for page in PAGES:
        lines = page.read_text().split("\n")
        if len(lines) < 150:
            continue
        head = "\n".join(lines[:40])
        assert "](#" in head, f"{page.relative_to(SOURCE)} has {len(lines)} lines and no table of contents at its top"


def test_the_readme_is_a_front_page():
    lines = README.split("\n")
    assert len(lines) <= 301, f"README.md has {len(lines) - 1} lines (at most 300: move detail into docs/)"
    first_screen = "\n".join(lines[:60])
    for way in ["#http-curl", "#grpc", "#python-in-process", "#c-with-cmake", "#c)", "#java", "#blender", "#windows"]:
        assert way in first_screen, f"{way} is not reachable from the README's first screen"
