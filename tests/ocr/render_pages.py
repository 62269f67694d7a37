#!/usr/bin/python3
"""Renders pages of text for ebb's OCR tests and benchmark, with the text they hold.

Each page has lines of English words, digits and punctuation drawn with Debian's DejaVu Sans
(fonts-dejavu-core) through Pillow (python3-pil), black on white or on a grey gradient, optionally
turned by 180 degrees. The expected text is generated here, with the page, never written by hand.

Usage:
  render_pages.py OUT_DIR accuracy            # the accuracy test's pages
  render_pages.py OUT_DIR bench N [SEED]      # N pages of varied sizes, 600x800 .. 2480x3508, shuffled
  render_pages.py OUT_DIR sample              # the README's page (tests/fixtures/ocr_page.png)
Writes OUT_DIR/NAME.png and OUT_DIR/pages.json: [{"image": "NAME.png", "lines": [...]}] in page order.
"""
import json
import os
import random
import sys

from PIL import Image, ImageDraw, ImageFont

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
WORDS = ("account river window garden number yellow market silver letter winter planet simple orange "
         "travel bridge forest answer summer ticket dinner camera button pocket circle finger island "
         "kitchen monday friday station library machine country picture morning evening quarter "
         "history journey weather battery engine memory budget release operation model server page "
         "text line document invoice total amount street london paris office report change value").split()
PUNCT = [",", ".", ":", ";", "!", "?", "-", "%", "/", "(", ")"]


def make_line(rng, max_chars):
    parts = []
    while True:
        kind = rng.random()
        if kind < 0.65:
            w = rng.choice(WORDS)
            if rng.random() < 0.3:
                w = w.capitalize()
        elif kind < 0.85:
            w = str(rng.randint(0, 99999))
        else:
            w = rng.choice(["(%d)" % rng.randint(1, 99), "%d%%" % rng.randint(1, 100), "%d/%d" % (rng.randint(1, 31), rng.randint(1, 12)),
                            "%d.%02d" % (rng.randint(1, 999), rng.randint(0, 99))])
        if rng.random() < 0.25:
            w += rng.choice([",", ".", ":", ";", "!", "?"])
        candidate = " ".join(parts + [w])
        if len(candidate) > max_chars:
            break
        parts.append(w)
    return " ".join(parts) if parts else rng.choice(WORDS)


def render(rng, width, height, sizes, n_lines, gradient=False, rotate=False):
    """A page with up to n_lines lines cycling through the font sizes; returns (image, lines)."""
    if gradient:
        row = bytes(int(255 - 135 * x / max(width - 1, 1)) for x in range(width))
        img = Image.frombytes("L", (width, height), row * height).convert("RGB")
    else:
        img = Image.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(img)
    fonts = {s: ImageFont.truetype(FONT, s) for s in sizes}
    margin = max(20, width // 20)
    y = margin
    lines = []
    for i in range(n_lines):
        size = sizes[i % len(sizes)]
        font = fonts[size]
        step = int(size * 1.8)
        if y + step > height - margin:
            break
        max_chars = max(8, int((width - 2 * margin) / (size * 0.62)))
        text = make_line(rng, min(max_chars, 48))
        while draw.textlength(text, font=font) > width - 2 * margin and " " in text:
            text = text.rsplit(" ", 1)[0]
        draw.text((margin, y), text, fill="black", font=font)
        lines.append(text)
        y += step
    if rotate:
        img = img.rotate(180)
    return img, lines


def main():
    out, mode = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    pages = []
    if mode == "accuracy":
        rng = random.Random(36)
        specs = [("white", False, False), ("gradient", True, False), ("rotated", False, True)]
        for name, gradient, rotate in specs:
            img, lines = render(rng, 1240, 1754, [20, 28, 40], 30, gradient, rotate)
            img.save(os.path.join(out, name + ".png"))
            pages.append({"image": name + ".png", "lines": lines, "gradient": gradient, "rotated": rotate})
    elif mode == "bench":
        n = int(sys.argv[3])
        rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 40)
        sizes = [(600, 800), (827, 1169), (1240, 1754), (1654, 2339), (2480, 3508)]
        for i in range(n):
            w, h = sizes[i % len(sizes)]
            scale = w / 1240
            font_sizes = [max(12, int(s * scale)) for s in (20, 28, 40)]
            img, lines = render(rng, w, h, font_sizes, 30, gradient=(i % 3 == 1), rotate=False)
            name = "page%02d.png" % i
            img.save(os.path.join(out, name))
            pages.append({"image": name, "lines": lines, "width": w, "height": h})
        rng.shuffle(pages)
    elif mode == "sample":
        lines = ["Invoice 2026-117: total 48.50 EUR", "ebb keeps models loaded,", "and gives their memory back."]
        img = Image.new("RGB", (640, 170), "white")
        draw = ImageDraw.Draw(img)
        font = ImageFont.truetype(FONT, 28)
        for i, text in enumerate(lines):
            draw.text((24, 20 + 48 * i), text, fill="black", font=font)
        img.save(os.path.join(out, "ocr_page.png"), optimize=True)
        pages.append({"image": "ocr_page.png", "lines": lines})
    else:
        sys.exit("mode must be accuracy, bench or sample")
    with open(os.path.join(out, "pages.json"), "w") as f:
        json.dump(pages, f, indent=1)


if __name__ == "__main__":
    main()
