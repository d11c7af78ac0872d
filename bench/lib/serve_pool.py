import csv, statistics, sys
from collections import defaultdict
# Pools bench/serve.sh runs (each a folder with runs.csv) by side and prints, per test, the
# medians over every repeat of every run of a side: Redis and shale req/s and p99, and the
# p99 ratio (a mark where it is over 1.5x, issue #44's bound).
# Usage: python3 bench/lib/serve_pool.py before=DIR,DIR... after=DIR,DIR...
sides = {}
for arg in sys.argv[1:]:
    label, dirs = arg.split("=")
    med = defaultdict(list)
    for d in dirs.split(","):
        for r in csv.DictReader(open(d + "/runs.csv")):
            med[(r["policy"], r["pipeline"], r["test"].split()[0], r["engine"])].append(
                tuple(float(r[k]) for k in ("rps", "p50_ms", "p99_ms", "p999_ms", "max_ms")))
    sides[label] = med
labels = list(sides)
print("| appendfsync | pipeline | test | " + " | ".join(
    f"{l}: Redis req/s, p99 ms | {l}: shale req/s, p99 ms | {l}: p99 shale / Redis" for l in labels) + " |")
print("|---|---:|---|" + "---:|---:|---:|" * len(labels))
keys = sorted({k[:3] for k in sides[labels[0]]})
for k in keys:
    cells = []
    for l in labels:
        m = sides[l]
        red, sha = m[k + ("redis",)], m[k + ("shale",)]
        rr = statistics.median(x[0] for x in red); rp = statistics.median(x[2] for x in red)
        sr = statistics.median(x[0] for x in sha); sp = statistics.median(x[2] for x in sha)
        cells.append(f"{rr:,.0f}, {rp:.3f} | {sr:,.0f}, {sp:.3f} | {sp/rp:.2f}{' ✗' if sp/rp > 1.5 else ''}")
    print(f"| {k[0]} | {k[1]} | {k[2]} | " + " | ".join(cells) + " |")
