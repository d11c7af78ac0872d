#!/usr/bin/env bash
# A 16-core baseline for issue #45, before its changes, of shale alone (for a lent machine
# that has no RocksDB build: the ratios against RocksDB come from bench/scaling.sh):
#   1. the table engine, YCSB C, B and A at 1, 2, 4, 8 and 16 client threads, memory as the
#      device (the store in /dev/shm), LATTE's 505-byte rows, loaded once;
#   2. the lsm engine, fillrandom (1 KB values, unsynced) at 1, 4, 16 and 32 threads, and
#      fillsync at 16 and 64 threads, on the disk (timed runs, --duration);
#   3. the hash engine, `kvbench --engine hash` on 1 and 8 volumes in /dev/shm (randfill then
#      YCSB C, 4 KB values), one instance per volume, pinned.
#   4. with CONTENTION=1 (the default), the contention profile (`--contention`, issue #45 part
#      1) of each engine on its widest runs: the table engine's B and A at 16 threads, lsm
#      fillrandom at 32 and fillsync at 64 threads, hash on 8 volumes; short runs, after the
#      timed ones, so the profile's clock reads cost the throughput figures nothing.
# Each line it prints is one run's result line; everything goes to $OUT/log.txt too.
#
# Usage: SHALE=target/release/shale OUT=dir bench/scaling_baseline.sh
# Environment: RECORDS (table rows, 200000), OPS (table operations a run, 400000), DURATION
#   (lsm seconds a run, 5), SCRATCH (the lsm store's directory, /var/tmp), CONTENTION (1; 0
#   skips part 4).
set -uo pipefail
S=${SHALE:-${CARGO_TARGET_DIR:-target}/release/shale}
OUT=${OUT:-bench/results/$(date -u +%F)-scaling-baseline}
RECORDS=${RECORDS:-200000}
OPS=${OPS:-400000}
DURATION=${DURATION:-5}
SCRATCH=${SCRATCH:-/var/tmp}
mkdir -p "$OUT"
exec > >(tee "$OUT/log.txt") 2>&1
echo "# $(nproc) cores, $(uname -r), $(date -u +%FT%TZ), shale $($S --version)"

T=/dev/shm/shale-scaling-table
rm -rf "$T"
echo "# table: load $RECORDS records"
$S ycsb --engine table --phase load --db "$T" --records "$RECORDS" --threads 8 \
  | grep -E '^\[OVERALL\], Throughput'
for wl in c b a; do
  for th in 1 2 4 8 16; do
    r=$($S ycsb --engine table --phase run --use_existing_db --db "$T" --workload "$wl" \
      --records "$RECORDS" --operations "$OPS" --threads "$th" \
      | grep -E '^\[OVERALL\], Throughput' | awk -F', ' '{print $3}')
    echo "table workload $wl threads $th: $r ops/s"
  done
done
if [ "${CONTENTION:-1}" != 0 ]; then
  for wl in b a; do
    echo "# table workload $wl, 16 threads, contention profile"
    $S ycsb --engine table --phase run --use_existing_db --db "$T" --workload "$wl" \
      --records "$RECORDS" --operations "$((OPS / 4))" --threads 16 --contention \
      | grep -E '^(\[OVERALL\], Throughput|contention )'
  done
fi
rm -rf "$T"

D=$SCRATCH/shale-scaling-lsm
for th in 1 4 16 32; do
  rm -rf "$D"
  $S bench --db="$D" --benchmarks=fillrandom --threads="$th" --duration="$DURATION" \
    --num=100000000 --value_size=1000 2>/dev/null | grep -E '^fillrandom' \
    | sed "s/^/lsm threads $th: /"
done
for th in 16 64; do
  rm -rf "$D"
  $S bench --db="$D" --benchmarks=fillsync --threads="$th" --duration="$DURATION" \
    --num=100000000 --value_size=1000 2>/dev/null | grep -E '^fillsync' \
    | sed "s/^/lsm threads $th: /"
done
if [ "${CONTENTION:-1}" != 0 ]; then
  for run in "fillrandom 32" "fillsync 64"; do
    set -- $run
    rm -rf "$D"
    echo "# lsm $1, $2 threads, contention profile"
    $S bench --db="$D" --benchmarks="$1" --threads="$2" --duration=2 --num=100000000 \
      --value_size=1000 --contention 2>/dev/null | grep -E "^($1 +:|contention )"
  done
fi
rm -rf "$D"

for n in 1 8; do
  paths=$(for i in $(seq 1 "$n"); do printf '/dev/shm/shale-scaling-kv%s,' "$i"; done)
  paths=${paths%,}
  $S kvbench --engine hash --paths "$paths" --num 200000 --value_size 4096 \
    --workloads randfill,ycsb-c --pin 2>/dev/null | grep -E '^(randfill|ycsb-c) +:' \
    | sed "s/^/hash volumes $n: /"
  rm -rf /dev/shm/shale-scaling-kv*
done
if [ "${CONTENTION:-1}" != 0 ]; then
  paths=$(for i in $(seq 1 8); do printf '/dev/shm/shale-scaling-kv%s,' "$i"; done)
  echo "# hash, 8 volumes, contention profile"
  $S kvbench --engine hash --paths "${paths%,}" --num 50000 --value_size 4096 \
    --workloads randfill,ycsb-c --pin --contention 2>/dev/null \
    | grep -E '^(randfill|ycsb-c) +:|^contention '
  rm -rf /dev/shm/shale-scaling-kv*
fi
echo "# done $(date -u +%FT%TZ)"
