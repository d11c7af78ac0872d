"""Medians per (build, batch) of run.sh's lines: ops/s (entries), p50, p99, p99.9 of a write."""
import re
import statistics
import sys
from collections import defaultdict

runs = defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"(\S+) batch=(\d+) repeat=\d+ ops_per_sec=(\S+) p50 (\S+) p99 (\S+) p99.9 (\S+)", line)
    if m:
        label, batch = m.group(1), int(m.group(2))
        runs[(batch, label)].append(tuple(float(m.group(i)) for i in range(3, 7)))
print("| batch | build | runs | entries/s | write p50 us | p99 us | p99.9 us |")
print("|---:|---|---:|---:|---:|---:|---:|")
for (batch, label), rs in sorted(runs.items(), key=lambda kv: (-kv[0][0], kv[0][1])):
    med = [statistics.median(r[i] for r in rs) for i in range(4)]
    print(f"| {batch} | {label} | {len(rs)} | {med[0]:,.0f} | {med[1]:.0f} | {med[2]:.0f} | {med[3]:.0f} |")
