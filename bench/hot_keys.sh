#!/usr/bin/env bash
# Writes that pile versions on few keys: db_bench's fillrandom and overwrite with --writes far
# above --num (each key written about WRITES/KEYS times), shale against RocksDB 11.8.1
# (release, bench/compare/build_rocksdb.sh) run alternately, REPEATS times, each from an empty
# store. The shape of a cache or a Redis-style server's SETs (`shale serve` under
# redis-benchmark -r), where the memtable holds many versions of each key
# (docs/lsm.md, "Versions off the levels").
#
# Environment: KEYS=100000 WRITES=3000000 VALUE_SIZE=100 REPEATS=3
#   OUT=bench/results/<date>-hot-keys, BASELINE=<another shale binary> (also run, labelled
#   "baseline": a build before a change, for its before/after).
set -euo pipefail
cd "$(dirname "$0")/.."
KEYS=${KEYS:-100000}
WRITES=${WRITES:-3000000}
VALUE_SIZE=${VALUE_SIZE:-100}
REPEATS=${REPEATS:-3}
OUT=${OUT:-bench/results/$(date -u +%Y-%m-%d)-hot-keys}
DB_BENCH=${DB_BENCH:-$(bench/compare/build_rocksdb.sh | tail -2 | head -1)}
cargo build --release -p shale-cli >&2
SHALE=${CARGO_TARGET_DIR:-target}/release/shale
# Each process's output goes to $OUT/raw/, which git ignores; $OUT keeps the summary.
mkdir -p "$OUT/raw"
scratch=$(mktemp -d "${TMPDIR:-/var/tmp}/shale-hot-keys.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

variants=(rocksdb shale)
[ -n "${BASELINE:-}" ] && variants+=(baseline)
common=(--benchmarks=fillrandom,overwrite --num="$KEYS" --writes="$WRITES" --threads=1
  --key_size=16 --value_size="$VALUE_SIZE" --compression_type=none --bloom_bits=10
  --level_compaction_dynamic_level_bytes=true --seed=1)

run() { # variant repeat -> the raw log's path
  local v=$1 r=$2 log="$OUT/raw/$1-r$2.txt"
  rm -rf "$scratch/db"
  case $v in
    rocksdb) "$DB_BENCH" "${common[@]}" --db="$scratch/db" >"$log" 2>&1 ;;
    shale) "$SHALE" bench "${common[@]}" --db="$scratch/db" >"$log" 2>&1 ;;
    baseline) "$BASELINE" bench "${common[@]}" --db="$scratch/db" >"$log" 2>&1 ;;
  esac
  echo "$log"
}

# ops/s of benchmark $2 in log $1
ops() { awk -v b="$2" '$1 == b {for (i = 1; i <= NF; i++) if ($(i + 1) == "ops/sec") print $i}' "$1"; }
median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

echo "engine,repeat,benchmark,ops_per_sec" >"$OUT/runs.csv"
for r in $(seq "$REPEATS"); do
  for v in "${variants[@]}"; do
    log=$(run "$v" "$r")
    for b in fillrandom overwrite; do
      echo "$v,$r,$b,$(ops "$log" "$b")" >>"$OUT/runs.csv"
    done
    echo "$v repeat $r: $(grep -E '^(fillrandom|overwrite) ' "$log" | awk '{print $1, $5, $6}' | tr '\n' ' ')" >&2
  done
done

{
  echo "yardstick: $("$DB_BENCH" --version 2>&1 | head -1); shale $(git rev-parse --short HEAD)$([ -n "${BASELINE:-}" ] && echo "; baseline $BASELINE")"
  echo "$KEYS keys, $WRITES writes each of fillrandom and overwrite, $VALUE_SIZE-byte values, medians of $REPEATS alternating runs, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  printf '| benchmark |'; for v in "${variants[@]}"; do printf ' %s ops/s |' "$v"; done
  printf ' shale / rocksdb |'; [ -n "${BASELINE:-}" ] && printf ' shale / baseline |'; echo
  printf '|---|'; for _ in "${variants[@]}"; do printf -- '---:|'; done; printf -- '---:|'
  [ -n "${BASELINE:-}" ] && printf -- '---:|'; echo
  for b in fillrandom overwrite; do
    declare -A m=()
    for v in "${variants[@]}"; do
      m[$v]=$(awk -F, -v v="$v" -v b="$b" '$1 == v && $3 == b {print $4}' "$OUT/runs.csv" | median)
    done
    printf '| %s |' "$b"; for v in "${variants[@]}"; do printf ' %.0f |' "${m[$v]}"; done
    awk -v s="${m[shale]}" -v r="${m[rocksdb]}" 'BEGIN {printf " %.2f |", s / r}'
    [ -n "${BASELINE:-}" ] && awk -v s="${m[shale]}" -v b="${m[baseline]}" 'BEGIN {printf " %.2f |", s / b}'
    echo
  done
} | tee "$OUT/README.md"
