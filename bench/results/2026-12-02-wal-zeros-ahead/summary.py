"""Medians of run.sh's lines per (build, case): fillsync ops/s and write p50/p99/p99.9/max
(us), serve requests/s and p50/p99/p99.9/max (ms)."""
import re
import statistics
import sys
from collections import defaultdict

fill, serve = defaultdict(list), defaultdict(list)
for line in open(sys.argv[1]):
    m = re.match(r"fillsync (\S+) threads=(\d+) repeat=\d+ ops_per_sec=(\S+) p50 (\S+) p99 (\S+) p99.9 (\S+) max (\S+)", line)
    if m:
        fill[(int(m.group(2)), m.group(1))].append([float(m.group(i)) for i in range(3, 8)])
    m = re.match(r"serve (\S+) pipe=(\d+) repeat=\d+ test=(\S+) rps=(\S+) p50=(\S+) p99=(\S+) p999=(\S+) max=(\S+)", line)
    if m:
        serve[(int(m.group(2)), m.group(3), m.group(1))].append([float(m.group(i)) for i in range(4, 9)])


def med(rs):
    return [statistics.median(r[i] for r in rs) for i in range(5)]


print("| fillsync threads | build | runs | writes/s | p50 us | p99 us | p99.9 us | max us |")
print("|---:|---|---:|---:|---:|---:|---:|---:|")
for (t, label), rs in sorted(fill.items()):
    m = med(rs)
    print(f"| {t} | {label} | {len(rs)} | {m[0]:,.0f} | {m[1]:.0f} | {m[2]:.0f} | {m[3]:.0f} | {m[4]:,.0f} |")
print()
print("| serve, always: pipeline | test | build | runs | req/s | p50 ms | p99 ms | p99.9 ms | max ms |")
print("|---:|---|---|---:|---:|---:|---:|---:|---:|")
for (pipe, test, label), rs in sorted(serve.items()):
    m = med(rs)
    print(f"| {pipe} | {test} | {label} | {len(rs)} | {m[0]:,.0f} | {m[1]:.3f} | {m[2]:.3f} | {m[3]:.3f} | {m[4]:.3f} |")
