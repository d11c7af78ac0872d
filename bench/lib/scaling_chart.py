#!/usr/bin/env python3
"""Charts of bench/scaling.sh: one SVG per part of its CSV (part,variant,threads,ops_per_s),
ops/s against threads (or volumes) on a log2 axis, a line per variant. Plain SVG 1.1 written
by hand (no plotting library on a bare machine); prints a markdown line per chart written.

Usage: scaling_chart.py CSV OUT_DIR
"""

import csv
import math
import sys
from collections import defaultdict

WIDTH, HEIGHT = 760, 400
LEFT, RIGHT, TOP, BOTTOM = 80, 200, 40, 60
# Colour-blind-safe (Okabe and Ito), as bench/compare's charts.
COLOURS = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00"]


def nice_max(v):
    """A round axis maximum at or above v: 1, 2 or 5 times a power of ten."""
    if not v > 0:
        return 1.0
    mag = 10 ** math.floor(math.log10(v))
    for m in (1, 2, 5, 10):
        if m * mag >= v:
            return m * mag
    return 10 * mag


def esc(s):
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def chart(part, lines):
    xs = sorted({x for pts in lines.values() for x, _ in pts})
    ymax = nice_max(max((y for pts in lines.values() for _, y in pts), default=1))
    lo, hi = math.log2(min(xs)), math.log2(max(xs))
    span = (hi - lo) or 1.0
    pw, ph = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x):
        return LEFT + (math.log2(x) - lo) / span * pw

    def py(y):
        return TOP + ph - y / ymax * ph

    axis = "volumes" if part.startswith("kv-") else "threads"
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
        f'<text x="{LEFT}" y="24" font-size="15">{esc(part)}: ops/s by {axis}</text>',
    ]
    for i in range(6):
        y = ymax * i / 5
        out.append(f'<line x1="{LEFT}" y1="{py(y):.1f}" x2="{LEFT + pw}" y2="{py(y):.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{LEFT - 8}" y="{py(y) + 4:.1f}" text-anchor="end">{y:,.0f}</text>')
    for x in xs:
        out.append(f'<text x="{px(x):.1f}" y="{TOP + ph + 18}" text-anchor="middle">{x:g}</text>')
    out.append(f'<text x="{LEFT + pw / 2}" y="{HEIGHT - 12}" text-anchor="middle">{axis}</text>')
    for i, (name, pts) in enumerate(sorted(lines.items())):
        colour = COLOURS[i % len(COLOURS)]
        pts = sorted(pts)
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        out.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for x, y in pts:
            out.append(f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{colour}"/>')
        ly = TOP + 16 + 18 * i
        out.append(f'<line x1="{LEFT + pw + 16}" y1="{ly - 4}" x2="{LEFT + pw + 40}" y2="{ly - 4}" stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{LEFT + pw + 46}" y="{ly}">{esc(name)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    parts = defaultdict(lambda: defaultdict(list))
    with open(sys.argv[1], newline="") as f:
        for row in csv.DictReader(f):
            try:
                x, y = float(row["threads"]), float(row["ops_per_s"])
            except ValueError:
                continue  # a run that failed: "-" in its median
            parts[row["part"]][row["variant"]].append((x, y))
    for part, lines in sorted(parts.items()):
        name = f"chart-{part}.svg"
        with open(f"{sys.argv[2]}/{name}", "w") as f:
            f.write(chart(part, lines))
        print(f"- chart: [{name}]({name})")


if __name__ == "__main__":
    main()
