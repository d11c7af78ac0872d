#!/usr/bin/env bash
# mimalloc's purge delay under a memory limit below 1 GiB, tried and not kept: 4779e59's tool
# (BEFORE: mimalloc v3's own delay, a second) against an experimental build of the same tree
# whose main() set the delay to 10 ms (`mi_option_set`, option 15) where `MemoryLimit::Host`
# was below 1 GiB (AFTER; not committed: BENCHMARKS-history.md, "the write buffer within the
# memory limit"), each tool at its defaults in fresh memory cgroups, alternating.
# Usage: BEFORE=<shale> AFTER=<shale> bash bench/results/2026-12-03-purge-delay/run.sh
set -euo pipefail
cd "$(dirname "$0")/../../.."
OUT=bench/results/2026-12-03-purge-delay
for round in 1 2; do
  for side in before after; do
    bin=$BEFORE; [ $side = after ] && bin=$AFTER
    OUT=$OUT/$side-128-$round SHALE=$bin LIMITS=128 TOOLS="bench ycsb" bash bench/memory_limits.sh
    OUT=$OUT/$side-512-$round SHALE=$bin LIMITS=512 TOOLS="bench ycsb" bash bench/memory_limits.sh
  done
done
for f in "$OUT"/*/raw/*.log; do
  printf '%s ' "${f#"$OUT"/}"
  grep -E '^(fillrandom|overwrite|readrandom) +:|^\[OVERALL\], Throughput|^# exit' "$f" |
    sed -E 's/ +: +[0-9.]+ micros\/op ([0-9]+) ops\/sec.*/ \1/; s/\[OVERALL\], Throughput\(ops\/sec\), ([0-9]+).*/ycsb \1/' | tr '\n' ' '
  echo
done | tee "$OUT/summary.txt"
