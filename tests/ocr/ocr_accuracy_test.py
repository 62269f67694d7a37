#!/usr/bin/python3
"""Accuracy of `ebb ocr` on rendered pages (tests/ocr/render_pages.py): 30 lines of English words,
digits and punctuation at three sizes, black on white, on a grey gradient, and turned by 180
degrees. The character error rate (edit distance over the expected characters, the page's lines
joined by newlines) must be at most 2%, 5% on the gradient. On the page turned by 180 degrees the
classifier turns each line back; the lines come in the order they stand on the turned page, the
last one first. Also: the plain output's form (each image's lines, a blank line between images).

Usage: ocr_accuracy_test.py EBB_BINARY MODELS_DIR
"""
import json
import os
import subprocess
import sys
import tempfile
import unicodedata

HERE = os.path.dirname(os.path.abspath(__file__))


def edit_distance(a, b):
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (ca != cb))
        prev = cur
    return prev[-1]


def normalise(text):
    # The recogniser's dictionary has full-width forms of some punctuation: NFKC maps them to ASCII.
    return unicodedata.normalize("NFKC", text)


def main():
    ebb, models = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["/usr/bin/python3", os.path.join(HERE, "render_pages.py"), tmp, "accuracy"], check=True)
        with open(os.path.join(tmp, "pages.json")) as f:
            pages = json.load(f)
        paths = [os.path.join(tmp, p["image"]) for p in pages]
        out = subprocess.run([ebb, "ocr", "--models", models, "--json"] + paths, check=True, capture_output=True,
                             text=True)
        results = json.loads(out.stdout)
    fixture = os.path.join(HERE, "..", "fixtures", "ocr_page.png")
    one = json.loads(subprocess.run([ebb, "ocr", "--models", models, "--json", fixture], check=True,
                                    capture_output=True, text=True).stdout)
    plain = subprocess.run([ebb, "ocr", "--models", models, fixture, fixture], check=True, capture_output=True,
                           text=True)
    assert len(results) == len(pages), results
    failures = []
    for page, result in zip(pages, results):
        lines = page["lines"][::-1] if page["rotated"] else page["lines"]
        expected = "\n".join(lines)
        got_lines = [line["text"] for line in result["lines"]]
        got = normalise("\n".join(got_lines))
        cer = edit_distance(expected, got) / len(expected)
        limit = 0.05 if page["gradient"] else 0.02
        print("%-14s lines %2d/%2d  CER %.4f (limit %.2f)" % (page["image"], len(got_lines), len(page["lines"]), cer, limit))
        if cer > limit:
            failures.append(page["image"])
            for e, g in zip(lines, got_lines):
                if e != normalise(g):
                    print("   expected %r\n   got      %r" % (e, g))
        for line in result["lines"]:
            assert 0 <= line["confidence"] <= 1, line
            assert len(line["box"]) == 4 and all(len(p) == 2 for p in line["box"]), line
    # The plain form: each image's lines, a blank line between images.
    text = "\n".join(line["text"] for line in one[0]["lines"])
    assert text and plain.stdout == text + "\n\n" + text + "\n", plain.stdout
    if failures:
        sys.exit("character error rate above its limit on: " + ", ".join(failures))
    print("ok")


if __name__ == "__main__":
    main()
