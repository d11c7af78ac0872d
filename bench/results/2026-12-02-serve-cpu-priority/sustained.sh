#!/usr/bin/env bash
# Sustained writes through shale serve (everysec): redis-benchmark SET of 256-byte values over
# 10M keys, 16 deep, 50 clients, N requests; the background threads at normal and low,
# alternating, twice. One line per run: priority repeat test,rps,p50,p99,p99.9,max (ms) store size
#   N=8000000 bash sustained.sh /path/shale > sustained.txt
set -euo pipefail
BIN=$1; shift
for r in 1 2; do
  for prio in normal low; do
    d=$(mktemp -d /var/tmp/sust.XXXX)
    "$BIN" serve --db "$d/store" --port 6499 --appendfsync everysec --background_cpu_priority $prio >"$d/log" 2>&1 &
    pid=$!
    for i in $(seq 50); do redis-cli -p 6499 ping >/dev/null 2>&1 && break; sleep 0.1; done
    out=$(redis-benchmark -p 6499 -t set -n ${N:-3000000} -r 10000000 -d 256 -P 16 -c 50 2>/dev/null)
    rows=$(python3 /work/main/bench/lib/tails.py --redis-benchmark <(echo "$out"))
    kill -TERM $pid; wait $pid || true
    echo "$prio $r $rows $(du -sh $d | cut -f1)"
    rm -rf "$d"
  done
done
