#!/usr/bin/env bash
# The ad hoc comparisons of builds behind "shale serve sends its replies after the ready
# connections ran" (BENCHMARKS-history.md, 2026-12-02): each build (and Redis, as `redis`)
# serves a fresh store in /var/tmp, redis-benchmark runs one test list against it, and one CSV
# row per test is printed. Builds alternate within each repeat.
#
#   BUILDS="before=/path/shale after=/path/shale redis=" REPEATS=2 POLICY=everysec \
#     PIPE=16 TESTS=get,incr N=400000 CLIENTS=50 bash run.sh > runs.csv
#
# Columns: build,engine,policy,pipeline,test,rps,p50_ms,p99_ms,p999_ms,max_ms
set -euo pipefail
cd "$(dirname "$0")/../../.."
POLICY=${POLICY:-everysec}; PIPE=${PIPE:-1}; TESTS=${TESTS:-mset,incr}; N=${N:-100000}
CLIENTS=${CLIENTS:-50}; REPEATS=${REPEATS:-2}; PORT=${PORT:-6499}
for r in $(seq "$REPEATS"); do
  for b in $BUILDS; do
    name=${b%%=*}; bin=${b#*=}
    dir=$(mktemp -d /var/tmp/serve-send-batching.XXXXXX)
    if [ "$name" = redis ]; then
      engine=redis
      redis-server --port "$PORT" --bind 127.0.0.1 --appendonly yes --appendfsync "$POLICY" \
        --save "" --dir "$dir" --daemonize no --logfile "$dir/redis.log" >/dev/null 2>&1 &
    else
      engine=shale
      "$bin" serve --db "$dir/store" --port "$PORT" --appendfsync "$POLICY" >"$dir/shale.log" 2>&1 &
    fi
    pid=$!
    for _ in $(seq 200); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
    redis-benchmark -h 127.0.0.1 -p "$PORT" -c "$CLIENTS" -n "$N" -P "$PIPE" -r 100000 \
      -t "$TESTS" >"$dir/out.txt" 2>/dev/null
    python3 bench/lib/tails.py --redis-benchmark "$dir/out.txt" |
      sed "s/^/$name,$engine,$POLICY,P$PIPE,/"
    kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
  done
done
