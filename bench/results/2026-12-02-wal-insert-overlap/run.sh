#!/usr/bin/env bash
# A sync group's memtable inserts while its WAL pages are in flight (the WAL append begun,
# then finished before the group's turn; overlap.patch on c5c7079, reverted: history) against
# the build before, shale alone: one synchronous writer, every write synced, batches of
# BATCHES entries of 100-byte values (3,000 writes each), on the disk's file system (DIR);
# builds alternating, REPEATS rounds.
#
# Usage: BUILDS="before=path after=path" REPEATS=5 bash run.sh > runs.txt
# Then: python3 summary.py runs.txt
set -euo pipefail
REPEATS=${REPEATS:-5}
BATCHES=${BATCHES:-100 10 1}
DIR=${DIR:-/var/tmp}
for r in $(seq "$REPEATS"); do
  for spec in $BUILDS; do
    label=${spec%%=*} bin=${spec#*=}
    for bs in $BATCHES; do
      d=$(mktemp -d "$DIR/wal-overlap.XXXXXX")
      out=$("$bin" bench --db "$d/s" --benchmarks fillrandom --sync --batch_size "$bs" \
        --num $((bs * 3000)) --value_size 100 --histogram 2>&1)
      rate=$(grep -E '^fillrandom ' <<<"$out" | head -1 | awk '{print $5}')
      tail=$(grep -E 'write latency micros' <<<"$out" | head -1 | sed 's/.*micros : //')
      echo "$label batch=$bs repeat=$r ops_per_sec=$rate $tail"
      rm -rf "$d"
    done
  done
done
