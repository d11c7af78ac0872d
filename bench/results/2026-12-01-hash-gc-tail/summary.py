#!/usr/bin/env python3
"""Medians per (threads, where, workload, build) of run.sh's runs.txt: ops/s, the worker
hand-off wait per operation and the client's p99 and p99.9 per operation type, each build
against the first (the baseline)."""
import re
import statistics
import sys
from collections import defaultdict

runs = defaultdict(list)
builds = []
key = None
row = None
for line in open(sys.argv[1]):
    m = re.match(r"## rep (\d+) threads (\d+) where (\w+) build (\w+)", line)
    if m:
        key = (int(m[2]), m[3], m[4])
        if m[4] not in builds:
            builds.append(m[4])
        continue
    m = re.match(r"^(randfill|ycsb-a) +: +[\d.]+ micros/op (\d+) ops/sec", line)
    if m:
        row = {"ops": int(m[2]), "p99": {}, "p999": {}}
        runs[key + (m[1],)].append(row)
        continue
    m = re.match(
        r"^(randfill|ycsb-a) +(\w+) latency micros : p50 ([\d.]+) p99 ([\d.]+) p99.9 ([\d.]+)",
        line)
    if m and row is not None:
        row["p99"][m[2]] = float(m[4])
        row["p999"][m[2]] = float(m[5])
        continue
    m = re.search(r"worker hand-off +: .* waited ([\d.]+) us/op", line)
    if m and row is not None:
        row["wait"] = float(m[1])


def med(xs):
    return statistics.median(xs) if xs else float("nan")


base = builds[0]
print(f"Each build against {base}: medians of the runs (n), ops/s and the worker hand-off "
      "wait per operation (us), p99 / p99.9 of each operation (us).\n")
print("| threads | volume | workload | build | ops/s | vs " + base + " | wait us/op | vs "
      + base + " | p99 / p99.9 us | runs |")
print("|---:|---|---|---|---:|---:|---:|---:|---|---:|")
for threads in (64, 16):
    for where in ("loop", "file"):
        for w in ("randfill", "ycsb-a"):
            a = runs.get((threads, where, base, w), [])
            if not a:
                continue
            oa = med([r["ops"] for r in a])
            wa = med([r.get("wait", 0) for r in a])
            for b in builds:
                rs = runs.get((threads, where, b, w), [])
                if not rs:
                    continue
                ob = med([r["ops"] for r in rs])
                wb = med([r.get("wait", 0) for r in rs])
                p99 = "; ".join(
                    f"{op} {med([r['p99'][op] for r in rs if op in r['p99']]):,.0f}"
                    f" / {med([r['p999'][op] for r in rs if op in r['p999']]):,.0f}"
                    for op in sorted(rs[0]["p99"])
                )
                print(f"| {threads} | {where} | {w} | {b} | {ob:,.0f} | {ob / oa:.2f}x | "
                      f"{wb:,.0f} | {wb / wa:.2f}x | {p99} | {len(rs)} |")
