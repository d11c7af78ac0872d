#!/bin/bash
# Why a serving thread leaves its CPU: `perf record -e sched:sched_switch -g` of one server
# (shale serve: BIN=path; Redis: BIN=redis) during redis-benchmark's unpipelined TEST (50
# clients, 100,000 requests, keys over 100,000) after SET, GET and INCR warmed the store.
# Then: perf report -i OUT --no-children --sort sym -g caller,2,callee --stdio
# Usage: BIN=target/release/shale TEST=mset OUT=/tmp/sw.data bash sched-switch.sh
set -u
BIN=${BIN:?}; TEST=${TEST:-mset}; OUT=${OUT:-/tmp/sw-$TEST.data}
d=$(mktemp -d /var/tmp/sw.XXXX)
if [ "$BIN" = redis ]; then
  redis-server --port 6502 --bind 127.0.0.1 --appendonly yes --appendfsync everysec --save "" \
    --dir "$d" --daemonize no --logfile "$d/redis.log" >/dev/null 2>&1 &
else
  "$BIN" serve --db "$d/store" --port 6502 --appendfsync everysec >"$d/log" 2>&1 &
fi
pid=$!
for _ in $(seq 100); do redis-cli -p 6502 ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-benchmark -p 6502 -c 50 -n 100000 -r 100000 -t set,get,incr >/dev/null
# Redis: its main thread only (-t); shale: every thread of the process.
if [ "$BIN" = redis ]; then target=(-t "$pid"); else target=(-p "$pid"); fi
perf record -e sched:sched_switch -g "${target[@]}" -o "$OUT" -- sleep 8 >/dev/null 2>&1 &
ppid=$!
sleep 0.5
redis-benchmark -p 6502 -c 50 -n 100000 -r 100000 -t "$TEST" | tail -3
kill -INT $ppid; wait $ppid
kill $pid; wait $pid; rm -rf "$d"
