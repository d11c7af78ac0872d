#!/usr/bin/env bash
# Sync writes by thread count (issue #15, the parallel WAL): db_bench's fillsync with 1 KB
# values on 1, 8, 16 and 32 threads, RocksDB 11.8.1 (release build, bench/compare/
# build_rocksdb.sh) against shale with its WAL pipeline (the default), without it
# (--wal_loggers=0: plain group commit) and through the async API (--async). Runs alternate
# engine by engine within each repeat; the table gives medians of the ops/s and each shale
# variant's ratio to RocksDB's median. Both engines run on the same file system, here.
#
# Usage: bench/fillsync_threads.sh
# Environment: THREADS="1 8 16 32" REPEATS=3 VALUE_SIZE=1024 WRITES=160000 (total per run,
#   split over the threads; at most 20000 per thread) OUT=bench/results/<date>-fillsync-threads
set -euo pipefail
cd "$(dirname "$0")/.."

THREADS=${THREADS:-1 8 16 32}
REPEATS=${REPEATS:-3}
VALUE_SIZE=${VALUE_SIZE:-1024}
WRITES=${WRITES:-160000}
OUT=${OUT:-bench/results/$(date -u +%Y-%m-%d)-fillsync-threads}
DB_BENCH=${DB_BENCH:-$(bench/compare/build_rocksdb.sh | tail -2 | head -1)}
cargo build --release -p shale-cli >&2
SHALE=${CARGO_TARGET_DIR:-target}/release/shale
# Each process's output goes to $OUT/raw/, which git ignores; $OUT keeps the summary.
mkdir -p "$OUT/raw"
scratch=$(mktemp -d "${TMPDIR:-/var/tmp}/shale-fillsync.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

variants=(rocksdb shale shale-loggers0 shale-async)
run() { # variant threads repeat -> prints ops/s
  local v=$1 t=$2 r=$3 per=$((WRITES / $2)) log
  [ "$per" -gt 20000 ] && per=20000
  log="$OUT/raw/$v-t$t-r$r.txt"
  rm -rf "$scratch/db"
  local common=(--benchmarks=fillsync --num=1000000 --writes=$per --threads="$t"
    --value_size="$VALUE_SIZE" --db="$scratch/db")
  case $v in
    rocksdb) "$DB_BENCH" "${common[@]}" --compression_type=none >"$log" 2>&1 ;;
    shale) "$SHALE" bench "${common[@]}" --statistics >"$log" 2>&1 ;;
    shale-loggers0) "$SHALE" bench "${common[@]}" --wal_loggers=0 --statistics >"$log" 2>&1 ;;
    shale-async) "$SHALE" bench "${common[@]}" --async --statistics >"$log" 2>&1 ;;
  esac
  awk '/^fillsync/ {for (i = 1; i <= NF; i++) if ($(i + 1) == "ops/sec") print $i}' "$log"
}

median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

echo "yardstick: $("$DB_BENCH" --version 2>&1 | head -1); shale $(git rev-parse --short HEAD)" | tee "$OUT/README.md"
echo "fillsync, $VALUE_SIZE-byte values, $WRITES writes a run split over the threads (at most 20000 each), medians of $REPEATS alternating runs, $(date -u '+%Y-%m-%d %H:%M UTC')" | tee -a "$OUT/README.md"
echo >>"$OUT/README.md"
printf '| threads | %s |\n' "$(IFS='|'; echo "${variants[*]}" | sed 's/|/ | /g') | shale/rocksdb | loggers0/rocksdb | async/rocksdb" >>"$OUT/README.md"
echo "|---|---|---|---|---|---|---|---|" >>"$OUT/README.md"
for t in $THREADS; do
  declare -A got=()
  for r in $(seq 1 "$REPEATS"); do
    for v in "${variants[@]}"; do
      ops=$(run "$v" "$t" "$r")
      echo "threads $t repeat $r $v: $ops ops/s" >&2
      got[$v]="${got[$v]:-} $ops"
    done
  done
  declare -A med=()
  for v in "${variants[@]}"; do med[$v]=$(echo "${got[$v]}" | tr ' ' '\n' | grep . | median); done
  ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
  printf '| %s | %s | %s | %s | %s | %s | %s | %s |\n' "$t" "${med[rocksdb]}" "${med[shale]}" \
    "${med[shale-loggers0]}" "${med[shale-async]}" "$(ratio "${med[shale]}" "${med[rocksdb]}")" \
    "$(ratio "${med[shale-loggers0]}" "${med[rocksdb]}")" "$(ratio "${med[shale-async]}" "${med[rocksdb]}")" \
    | tee -a "$OUT/README.md"
  unset got med
done
