"""Runtime.ocr from Python: a page rendered here with Debian's DejaVu Sans through Pillow
(tests/ocr/render_pages.py, run by Debian's /usr/bin/python3), its text generated with it, recognised
from its file and from an array, as `ebb ocr --json` gives it; a page without text; progress and
cancellation; the errors (a file that is not an image, a missing file, a missing pipeline, a wrong
argument)."""
import json
import os
import shutil
import subprocess
import sys
import threading
import unicodedata

import numpy as np
import pytest

import ebb
from conftest import MODELS, ROOT

RENDER = ROOT / "tests" / "ocr" / "render_pages.py"
sys.path.insert(0, str(RENDER.parent))
from ocr_accuracy_test import edit_distance  # noqa: E402  (the character error rate the OCR tests share)
DEBIAN_PYTHON = "/usr/bin/python3"
FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
# A page of four lines of words, digits and punctuation at 32 px, black on white, and its lines.
RENDER_PAGE = """
import json, random, sys
sys.path.insert(0, sys.argv[1])
import render_pages
img, lines = render_pages.render(random.Random(35), 900, 320, [32], 4)
img.save(sys.argv[2])
print(json.dumps(lines))
"""


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    """(path of the rendered page, its lines)."""
    if not (shutil.which(DEBIAN_PYTHON) and os.path.exists(FONT)):
        pytest.skip(f"rendering needs Debian's {DEBIAN_PYTHON} with python3-pil and fonts-dejavu-core ({FONT})")
    path = tmp_path_factory.mktemp("ocr") / "page.png"
    out = subprocess.run([DEBIAN_PYTHON, "-c", RENDER_PAGE, str(RENDER.parent), str(path)], check=True,
                         capture_output=True, text=True)
    lines = json.loads(out.stdout)
    assert len(lines) == 4 and all(lines)
    return str(path), lines


@pytest.fixture(scope="module")
def recognised(runtime, page):
    """Runtime.ocr of the page's file, from the checkout's models folder."""
    return runtime.ocr([page[0]], models=str(MODELS))


def test_the_page_text_is_recognised_as_ebb_ocr_json_gives_it(page, recognised):
    path, lines = page
    (result,) = recognised
    assert sorted(result) == ["image", "lines"] and result["image"] == path
    got = [unicodedata.normalize("NFKC", line["text"]) for line in result["lines"]]
    assert len(got) == len(lines), got
    # Compared without spaces: PP-OCRv4's recogniser drops the spaces between English words on such lines
    # (issue #36; the spaces are tests/ocr/ocr_accuracy_test.py's to measure). Every other character counts:
    # at most 2% of them may differ.
    expected, text = ("\n".join(lines).replace(" ", ""), "\n".join(got).replace(" ", ""))
    assert edit_distance(expected, text) <= 0.02 * len(expected), (expected, text)
    width, height = 900, 320
    tops = []
    for line in result["lines"]:
        assert sorted(line) == ["box", "confidence", "text"]
        assert 0.5 <= line["confidence"] <= 1  # lines under drop_score (0.5) are dropped
        assert len(line["box"]) == 4 and all(len(p) == 2 for p in line["box"])
        xs, ys = [p[0] for p in line["box"]], [p[1] for p in line["box"]]
        assert 0 <= min(xs) < max(xs) <= width and 0 <= min(ys) < max(ys) <= height
        (x0, y0), (x1, _), _, (_, y3) = line["box"]  # clockwise from the top left
        assert x0 < x1 and y0 < y3
        tops.append(min(ys))
    assert tops == sorted(tops)  # reading order: top to bottom


def test_arrays_and_paths_in_one_call_give_the_same_lines(runtime, page, recognised):
    path, _ = page
    image = ebb.read_image(path)
    gray = np.ascontiguousarray(image[:, :, 0])  # [H,W]: one channel
    results = runtime.ocr([image, path, gray], models=str(MODELS))
    assert [r["image"] for r in results] == [None, path, None]
    texts = [[line["text"] for line in r["lines"]] for r in results]
    assert texts[0] == texts[1] == [line["text"] for line in recognised[0]["lines"]]
    assert texts[2] == texts[0]  # black on white: gray is the same page


def test_a_page_without_text_has_no_lines_and_no_images_give_no_pages(runtime):
    white = np.full((120, 200, 3), 255, np.uint8)
    assert runtime.ocr([white], models=str(MODELS)) == [{"image": None, "lines": []}]
    assert runtime.ocr([], models=str(MODELS)) == []


def test_a_file_that_is_not_an_image_is_an_invalid_argument_naming_it(runtime, page, tmp_path):
    not_image = tmp_path / "notes.txt"
    not_image.write_text("this is text, not an image\n")
    with pytest.raises(ebb.InvalidArgument, match="notes.txt") as err:
        runtime.ocr([page[0], not_image], models=str(MODELS))
    assert isinstance(err.value, ValueError) and err.value.code == "invalid_argument"
    with pytest.raises(ebb.NotFound, match="missing.png"):
        runtime.ocr([str(tmp_path / "missing.png")], models=str(MODELS))
    with pytest.raises(ebb.NotFound, match="config.json"):
        runtime.ocr([page[0]], pipeline=str(tmp_path), models=str(MODELS))
    with pytest.raises(ebb.InvalidArgument, match="kind"):
        runtime.ocr([page[0]], pipeline="waifu2x_scale2x", models=str(MODELS))
    with pytest.raises(TypeError, match="list"):
        runtime.ocr(page[0], models=str(MODELS))
    with pytest.raises(TypeError, match="uint8"):
        runtime.ocr([np.zeros((8, 8, 3), np.float32)], models=str(MODELS))
    # The pipeline still works after the failures.
    assert runtime.ocr([page[0]], models=str(MODELS))[0]["lines"]


def test_progress_between_runs_and_cancellation(runtime, page):
    calls = []
    runtime.ocr([page[0]], models=str(MODELS), on_progress=lambda done, total: calls.append((done, total)))
    total = calls[-1][1]
    assert total >= 3 and calls == [(i, total) for i in range(1, total + 1)]  # detector, classifier, recogniser
    with pytest.raises(ebb.Cancelled, match="after 1 of"):
        runtime.ocr([page[0]], models=str(MODELS), on_progress=lambda done, total: False)
    stop = threading.Event()
    stop.set()
    with pytest.raises(ebb.Cancelled, match="after 0 of"):
        runtime.ocr([page[0]], models=str(MODELS), cancel=stop)


def test_one_pipeline_is_kept_per_folder_and_device_until_clear(runtime, page):
    runtime.ocr([page[0]], models=str(MODELS))
    loads = runtime.load_count
    runtime.ocr([page[0]], pipeline=str(MODELS / "ocr"))  # the same folder, by its path
    assert runtime.load_count == loads
    runtime.clear()
    runtime.ocr([page[0]], models=str(MODELS))
    assert runtime.load_count == loads + 3  # detector, classifier, recogniser loaded again
