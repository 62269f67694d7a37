#!/usr/bin/env python3
"""RSS after every page of `ebb bench ocr --json`'s page-by-page run, for ebb and plain ORT with and
without its arena, as one SVG line chart (docs/benchmarks.md shows it).

Usage: tools/plot_ocr_rss.py BENCH_OCR.json OUT.svg

Plain SVG text, written here because the chart is three polylines and Debian's matplotlib would be a
dependency of the docs alone (docs/dependencies.md)."""
import json
import sys
from xml.sax.saxutils import escape

SERIES = [("ebb", "ebb", "#1f77b4"), ("ort_arena", "ORT, arena on (RapidOCR as made)", "#d62728"),
          ("ort_noarena", "ORT, arena off (RapidOCR's default)", "#2ca02c")]
W, H, LEFT, RIGHT, TOP, BOTTOM = 760, 380, 70, 20, 40, 60


def main(src, out):
    bench = json.load(open(src))
    figures = bench["figures"]
    lines = {key: figures[key]["page_rss_after_each_mib"] for key, _, _ in SERIES}
    pages = max(len(v) for v in lines.values())
    highest = max(max(v) for v in lines.values())
    step = next(n for n in (10, 20, 50, 100, 200, 250, 500, 1000, 2000, 5000) if highest / n <= 6)
    top = step * (int(highest // step) + 1)
    x = lambda i: LEFT + (W - LEFT - RIGHT) * (i / max(1, pages - 1))
    y = lambda mib: TOP + (H - TOP - BOTTOM) * (1 - mib / top)
    svg = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-family="sans-serif" font-size="12">',
           f'<rect width="{W}" height="{H}" fill="white"/>',
           f'<text x="{W / 2}" y="22" text-anchor="middle" font-size="14">RSS after each page, page by page '
           f'({pages} pages, one call each)</text>']
    for k in range(int(top // step) + 1):  # y grid and labels
        mib = k * step
        svg.append(f'<line x1="{LEFT}" x2="{W - RIGHT}" y1="{y(mib):.1f}" y2="{y(mib):.1f}" stroke="#ddd"/>')
        svg.append(f'<text x="{LEFT - 6}" y="{y(mib) + 4:.1f}" text-anchor="end">{mib:.0f}</text>')
    for i in range(0, pages, max(1, pages // 10)):
        svg.append(f'<text x="{x(i):.1f}" y="{H - BOTTOM + 16}" text-anchor="middle">{i + 1}</text>')
    svg.append(f'<text x="{(LEFT + W - RIGHT) / 2}" y="{H - BOTTOM + 34}" text-anchor="middle">page</text>')
    svg.append(f'<text x="16" y="{(TOP + H - BOTTOM) / 2}" transform="rotate(-90 16 {(TOP + H - BOTTOM) / 2})" '
               'text-anchor="middle">RSS (MiB)</text>')
    for n, (key, label, colour) in enumerate(SERIES):
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in enumerate(lines[key]))
        svg.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{points}"/>')
        lx = LEFT + 10 + n * 230
        svg.append(f'<line x1="{lx}" x2="{lx + 20}" y1="{H - 12}" y2="{H - 12}" stroke="{colour}" stroke-width="2"/>')
        svg.append(f'<text x="{lx + 26}" y="{H - 8}">{escape(label)}</text>')
    svg.append("</svg>")
    with open(out, "w") as f:
        f.write("\n".join(svg) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
