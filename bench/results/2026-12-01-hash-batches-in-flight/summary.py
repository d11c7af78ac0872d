#!/usr/bin/env python3
"""Medians per (threads, where, workload, batches_in_flight) of run.sh's runs.txt: ops/s, the
worker hand-off wait per operation, and the client's p99 per operation type."""
import re
import statistics
import sys
from collections import defaultdict

runs = defaultdict(list)
key = None
workload = None
row = None
for line in open(sys.argv[1]):
    m = re.match(r"## rep (\d+) threads (\d+) where (\w+) batches_in_flight (\d+)", line)
    if m:
        key = (int(m[2]), m[3], int(m[4]))
        continue
    m = re.match(r"^(randfill|ycsb-a) +: +[\d.]+ micros/op (\d+) ops/sec", line)
    if m:
        workload = m[1]
        row = {"ops": int(m[2]), "p99": {}}
        runs[key + (workload,)].append(row)
        continue
    m = re.match(r"^(randfill|ycsb-a) +(\w+) latency micros : p50 ([\d.]+) p99 ([\d.]+)", line)
    if m and row is not None:
        row["p99"][m[2]] = float(m[4])
        continue
    m = re.search(r"worker hand-off +: .* waited ([\d.]+) us/op", line)
    if m and row is not None:
        row["wait"] = float(m[1])

def med(xs):
    return statistics.median(xs) if xs else float("nan")

print("| threads | volume | workload | ops/s, 1 in flight | ops/s, 2 | ratio | hand-off wait us/op, 1 -> 2 | p99 us, 1 -> 2 | runs |")
print("|---:|---|---|---:|---:|---:|---|---|---:|")
for threads in (64, 16):
    for where in ("loop", "file"):
        for w in ("randfill", "ycsb-a"):
            a = runs.get((threads, where, 1, w), [])
            b = runs.get((threads, where, 2, w), [])
            if not a or not b:
                continue
            oa, ob = med([r["ops"] for r in a]), med([r["ops"] for r in b])
            wa, wb = med([r.get("wait", 0) for r in a]), med([r.get("wait", 0) for r in b])
            ops = sorted(set(a[0]["p99"]) | set(b[0]["p99"]))
            p99 = "; ".join(
                f"{op} {med([r['p99'][op] for r in a if op in r['p99']]):,.0f} -> "
                f"{med([r['p99'][op] for r in b if op in r['p99']]):,.0f}"
                for op in ops
            )
            print(f"| {threads} | {where} | {w} | {oa:,.0f} | {ob:,.0f} | {ob / oa:.2f} | "
                  f"{wa:,.0f} -> {wb:,.0f} ({wb / wa:.2f}x) | {p99} | {len(a)}+{len(b)} |")
