#!/usr/bin/env bash
# Zeros written ahead of the WAL's sync appends in the background (zeros-ahead.patch on
# d3bfb72, reverted: BENCHMARKS-history.md) against the build before (zeros in the append's
# path), shale alone, builds alternating, REPEATS rounds:
# 1. db_bench's fillsync (every write synced, 100-byte values, WRITES a thread) at THREADS
#    threads, on the disk's file system: throughput and the write tail.
# 2. shale serve under `appendfsync always`: redis-benchmark, 50 clients, SET, INCR and MSET
#    of 10 keys, unpipelined and 16 deep, 100,000 requests a test, a fresh store each build
#    and repeat (redis-benchmark's tail as bench/lib/tails.py reads it).
#
# Usage: BUILDS="before=path after=path" REPEATS=3 bash run.sh > runs.txt
# Then: python3 summary.py runs.txt
set -euo pipefail
cd "$(dirname "$0")/../../.."
REPEATS=${REPEATS:-3}
THREADS=${THREADS:-1 16}
NUM=${NUM:-5000000}
WRITES=${WRITES:-5000}
DIR=${DIR:-/var/tmp}
for r in $(seq "$REPEATS"); do
  for spec in $BUILDS; do
    label=${spec%%=*} bin=${spec#*=}
    for t in $THREADS; do
      d=$(mktemp -d "$DIR/zeros-ahead.XXXXXX")
      # WRITES writes per thread over --num/1000 keys (db_bench's fillsync).
      out=$("$bin" bench --db "$d/s" --benchmarks fillsync --threads "$t" --num "$NUM" \
        --writes "$WRITES" --value_size 100 --histogram 2>&1)
      rate=$(awk '/^fillsync +:/ {print $5; exit}' <<<"$out")
      tail=$(awk '/write latency micros/ {sub(/.*micros : /, ""); print; exit}' <<<"$out")
      echo "fillsync $label threads=$t repeat=$r ops_per_sec=$rate $tail"
      rm -rf "$d"
    done
    d=$(mktemp -d "$DIR/zeros-ahead.XXXXXX")
    port=$((7200 + r))
    "$bin" serve --db "$d/store" --port "$port" --appendfsync always >"$d/log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
    for pipe in 1 16; do
      redis-benchmark -h 127.0.0.1 -p "$port" -c 50 -n 100000 -P "$pipe" -r 100000 \
        -t set,incr,mset >"$d/out.txt" 2>/dev/null
      python3 bench/lib/tails.py --redis-benchmark "$d/out.txt" |
        while IFS=, read -r test rps p50 p99 p999 max; do
          echo "serve $label pipe=$pipe repeat=$r test=${test%% *} rps=$rps p50=$p50 p99=$p99 p999=$p999 max=$max"
        done
    done
    kill -9 "$pid"
    wait "$pid" 2>/dev/null || true
    rm -rf "$d"
  done
done
