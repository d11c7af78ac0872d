#!/usr/bin/env bash
# Before and after "a freed WAL group given back on a release thread" (BENCHMARKS-history.md, 2026-12-02):
# `shale bench --benchmarks fillsync,stats` at 1 and 16 threads on a fresh store in /var/tmp,
# builds alternating within each repeat. One line per run:
#   build threads repeat ops/s p50 p99 p99.9 max (us) wal_bytes_allocated_at_end
#
#   BUILDS="before=/path/shale after=/path/shale" REPEATS=3 bash run.sh > runs.txt
set -euo pipefail
REPEATS=${REPEATS:-3}
for r in $(seq "$REPEATS"); do
  for threads in 16 1; do
    num=$([ "$threads" = 16 ] && echo 100000 || echo 30000)
    for b in $BUILDS; do
      name=${b%%=*}; bin=${b#*=}
      db=$(mktemp -d /var/tmp/wal-release.XXXXXX)
      out=$("$bin" bench --benchmarks fillsync,stats --num "$num" --threads "$threads" --histogram --statistics \
        --db "$db/store" 2>/dev/null)
      rate=$(grep -m1 '^fillsync ' <<<"$out" | awk '{print $5}')
      tail=$(grep -m1 'fillsync .*write latency micros' <<<"$out" |
        sed -E 's/.*p50 ([0-9.]+) p99 ([0-9.]+) p99.9 ([0-9.]+) max ([0-9.]+).*/\1 \2 \3 \4/')
      wal=$(grep -m1 'shale.wal.bytes.allocated' <<<"$out" | grep -oE '[0-9]+$' || echo -)
      echo "$name $threads $r $rate $tail $wal"
      rm -rf "$db"
    done
  done
done
