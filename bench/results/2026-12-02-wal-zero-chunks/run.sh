#!/usr/bin/env bash
# The WAL's zeros written before sync appends reach never-written pages, in chunks of
# ZEROS pages (4 KiB each) instead of 1,024 (BENCHMARKS-history.md, 2026-12-02): a scratch
# build reading the chunk from SHALE_ZERO_PAGES (zero-chunks.patch), `shale bench
# --benchmarks fillsync,stats` at 16 and 1 threads on a fresh store in /var/tmp, chunk sizes
# alternating within each repeat. One line per run:
#   pages threads repeat ops/s p50 p99 p99.9 max (us) wal_bytes_allocated_at_end
#
#   SHALE_BIN=/path/shale ZEROS="1024 256 64" REPEATS=3 bash run.sh > runs.txt
set -euo pipefail
REPEATS=${REPEATS:-3}
for r in $(seq "$REPEATS"); do
  for threads in 16 1; do
    num=$([ "$threads" = 16 ] && echo 100000 || echo 30000)
    for pages in $ZEROS; do
      db=$(mktemp -d /var/tmp/wal-zeros.XXXXXX)
      out=$(SHALE_ZERO_PAGES=$pages "$SHALE_BIN" bench --benchmarks fillsync,stats --num "$num" \
        --threads "$threads" --histogram --statistics --db "$db/store" 2>/dev/null)
      rate=$(grep -m1 '^fillsync ' <<<"$out" | awk '{print $5}')
      tail=$(grep -m1 'fillsync .*write latency micros' <<<"$out" |
        sed -E 's/.*p50 ([0-9.]+) p99 ([0-9.]+) p99.9 ([0-9.]+) max ([0-9.]+).*/\1 \2 \3 \4/')
      wal=$(grep -m1 'shale.wal.bytes.allocated' <<<"$out" | grep -oE '[0-9]+$' || echo -)
      echo "$pages $threads $r $rate $tail $wal"
      rm -rf "$db"
    done
  done
done
