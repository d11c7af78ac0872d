#!/usr/bin/env bash
# Recovery time after a kill with a large WAL (issue #15: "recovery time after a kill with 1 GB
# of WAL", target: no longer than RocksDB's). For each engine, alternating, REPEATS times:
#   1. fill: db_bench's fillrandom of WAL_BYTES of 1 KB values with a write buffer larger than
#      the data, so every write stays in the WAL (nothing flushed), then readrandom until
#      killed; the harness SIGKILLs the process as soon as fillrandom's result line appears;
#   2. reopen: a process that opens the store (replaying the WAL, and flushing what it
#      replayed, as both engines do at open by default) and reads READS random keys; its wall
#      time, from exec to exit, is the recovery time. At least 60% of the reads must find
#      their key (fillrandom writes about 63% of its key space: keys repeat).
# RocksDB 11.8.1 is the release build of bench/compare/build_rocksdb.sh. Both stores live on
# the same file system (SCRATCH, default beside the repository on the disk under test).
#
# Usage: bench/recovery_time.sh
# Environment: WAL_BYTES=1073741824 VALUE_SIZE=1024 REPEATS=3 READS=10000 SCRATCH=/var/tmp
#   OUT=bench/results/<date>-recovery-time
set -euo pipefail
cd "$(dirname "$0")/.."

WAL_BYTES=${WAL_BYTES:-1073741824}
VALUE_SIZE=${VALUE_SIZE:-1024}
REPEATS=${REPEATS:-3}
READS=${READS:-10000}
OUT=${OUT:-bench/results/$(date -u +%Y-%m-%d)-recovery-time}
DB_BENCH=${DB_BENCH:-$(bench/compare/build_rocksdb.sh | tail -2 | head -1)}
cargo build --release -p shale-cli >&2
SHALE=${CARGO_TARGET_DIR:-target}/release/shale
# Each process's output goes to $OUT/raw/, which git ignores; $OUT keeps the summary.
mkdir -p "$OUT/raw"
scratch=$(mktemp -d "${SCRATCH:-/var/tmp}/shale-recovery.XXXXXX")
trap 'rm -rf "$scratch"' EXIT

# Entries of 16 B keys and VALUE_SIZE values that make WAL_BYTES of records.
NUM=$((WAL_BYTES / (16 + VALUE_SIZE)))
# A write buffer that holds all of them (shale's largest is 2 GiB).
WRITE_BUFFER=$((WAL_BYTES * 3 / 2))
[ "$WRITE_BUFFER" -gt 2147483648 ] && WRITE_BUFFER=2147483648
common=(--num="$NUM" --value_size="$VALUE_SIZE" --write_buffer_size="$WRITE_BUFFER"
  --compression_type=none --threads=1)

engine_cmd() { # engine -> sets the array `cmd` to the engine's command
  case $1 in
    rocksdb) cmd=("$DB_BENCH") ;;
    shale) cmd=("$SHALE" bench) ;;
  esac
}

fill_and_kill() { # engine log
  local engine=$1 log=$2
  rm -rf "$scratch/db"
  local cmd
  engine_cmd "$engine"
  # The binary itself in the background (not a function's subshell), so the kill reaches it.
  "${cmd[@]}" "${common[@]}" --db="$scratch/db" --benchmarks=fillrandom,readrandom \
    --reads=1000000000 >"$log" 2>&1 &
  local pid=$!
  until grep -q '^fillrandom' "$log" 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || { echo "$engine: the fill ended before it was killed (see $log)" >&2; exit 1; }
    sleep 0.05
  done
  kill -9 "$pid"
  wait "$pid" 2>/dev/null || true
}

reopen() { # engine log -> prints seconds
  local engine=$1 log=$2 start end
  local cmd
  engine_cmd "$engine"
  start=$(date +%s.%N)
  "${cmd[@]}" "${common[@]}" --db="$scratch/db" --use_existing_db=1 \
    --benchmarks=readrandom --reads="$READS" >"$log" 2>&1
  end=$(date +%s.%N)
  local found
  found=$(awk '/^readrandom/ {for (i = 1; i < NF; i++) if ($(i + 1) == "of") {print $i; exit}}' "$log" | tr -d '(')
  # fillrandom draws its keys with repeats: about 1 - 1/e (63%) of the key space is written.
  if [ -z "$found" ] || [ $((found * 100)) -lt $((READS * 60)) ]; then
    echo "$engine: ${found:-no} of $READS keys found after the reopen, under 60% (see $log)" >&2
    exit 1
  fi
  awk -v s="$start" -v e="$end" 'BEGIN {printf "%.3f", e - s}'
}

median() { sort -n | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

{
  echo "yardstick: $("$DB_BENCH" --version 2>&1 | head -1); shale $(git rev-parse --short HEAD)"
  echo "recovery after SIGKILL with $NUM entries of $VALUE_SIZE-byte values in the WAL (about $((WAL_BYTES >> 20)) MiB), write buffer $WRITE_BUFFER bytes, $READS random reads after the open; medians of $REPEATS alternating runs, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
} | tee "$OUT/README.md"
declare -A times=()
for r in $(seq 1 "$REPEATS"); do
  for engine in rocksdb shale; do
    fill_and_kill "$engine" "$OUT/raw/$engine-fill-r$r.txt"
    du -sh "$scratch/db" >"$OUT/raw/$engine-du-r$r.txt"
    t=$(reopen "$engine" "$OUT/raw/$engine-reopen-r$r.txt")
    echo "repeat $r $engine: recovery $t s ($(cut -f1 "$OUT/raw/$engine-du-r$r.txt") on disk before)" >&2
    times[$engine]="${times[$engine]:-} $t"
  done
done
r=$(echo "${times[rocksdb]}" | tr ' ' '\n' | grep . | median)
s=$(echo "${times[shale]}" | tr ' ' '\n' | grep . | median)
{
  echo "| engine | recovery, s (each run) | median, s |"
  echo "|---|---|---|"
  echo "| RocksDB 11.8.1 |${times[rocksdb]} | $r |"
  echo "| shale |${times[shale]} | $s |"
  echo
  echo "shale / RocksDB recovery time: $(awk -v a="$s" -v b="$r" 'BEGIN {printf "%.2f", a / b}') (target: at most 1.00)"
} | tee -a "$OUT/README.md"
