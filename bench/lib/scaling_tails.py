#!/usr/bin/env python3
"""The tail tables of bench/scaling.sh: p50 / p99 / p99.9 / max per part, thread count (or
volume count), variant and operation type, medians over the repeats, from the tails CSV the
script writes (part,variant,threads,repeat,label,op,p50_us,p99_us,p999_us,max_us,ops: one row
per run and operation type, as bench/lib/tails.py reads each run's output).

Each percentile is the median of that percentile over the repeats (not the percentile of the
runs merged, which no run's output holds); with one repeat it is that run's.

Usage: scaling_tails.py TAILS_CSV   (markdown on stdout; nothing when the CSV has no rows)
"""

import csv
import statistics
import sys
from collections import defaultdict

FIELDS = ("p50_us", "p99_us", "p999_us", "max_us")
TITLES = {
    "fillsync": "fillsync, write latency",
    "fillrandom": "fillrandom, write latency",
    "table": "table engine, YCSB on memory as the device",
    "kv-tmpfs": "kvbench, hash engine, volumes on tmpfs (all instances together)",
    "kv-disk": "kvbench, hash engine, volumes on the disk (all instances together)",
}


def fmt(us):
    return f"{us:,.0f}" if us >= 100 else f"{us:.1f}"


def tables(rows):
    # part -> (variant, op) -> threads -> [(p50, p99, p999, max) per repeat]
    parts = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
    for r in rows:
        figures = tuple(float(r[f]) for f in FIELDS)
        parts[r["part"]][(r["variant"], r["op"].lower())][int(r["threads"])].append(figures)
    out = []
    for part, columns in parts.items():
        unit = "volumes" if part.startswith("kv-") else "threads"
        out.append("")
        out.append(f"## Tails: {TITLES.get(part, part)}, p50 / p99 / p99.9 / max us")
        out.append("")
        keys = list(columns)
        out.append(f"| {unit} | " + " | ".join(f"{v} {op}" for v, op in keys) + " |")
        out.append("|---|" + "---|" * len(keys))
        counts = sorted({t for c in columns.values() for t in c})
        for t in counts:
            cells = []
            for k in keys:
                runs = columns[k].get(t)
                if not runs:
                    cells.append("-")
                    continue
                med = [statistics.median(run[i] for run in runs) for i in range(4)]
                cells.append(" / ".join(fmt(x) for x in med))
            out.append(f"| {t} | " + " | ".join(cells) + " |")
    return out


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with open(sys.argv[1], newline="") as f:
        rows = list(csv.DictReader(f))
    print("\n".join(tables(rows)))


if __name__ == "__main__":
    main()
