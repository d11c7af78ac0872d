#!/usr/bin/env bash
# LATTE's Fig. 9 on shale's table engine (issue #12, part 4): insert throughput of the YCSB
# load (LATTE's 505-byte rows, every insert its own durable transaction) by the number of
# queue pairs, in each of the four CPU affinity modes, beside the engine's default (a queue
# per thread, no pollers). `shale ycsb --engine table --phase load --io_queues N
# --io_affinity MODE`; the modes alternate within each queue count, REPEATS times; medians.
#
# The modes (shale_io::QueuePairs; each pair's submission side is an io_uring SQPOLL kernel
# thread, its completion side a poller thread):
#   naive         nothing bound;
#   pair-binding  pair i's SQ thread and poller on CPU i;
#   separated     SQ thread on CPU 2i, poller on CPU 2i+1;
#   skew          SQ threads on CPUs 1.., every poller on CPU 0.
# Pinned threads compete with the client threads for cores: the figures mean what LATTE's
# mean only where there are cores to spare (LATTE's machine had a core per thread; run it
# on a 16-core machine with THREADS=8 or so). On fewer cores the run is a check that every
# mode works, not a measurement of the modes.
#
# Output in OUT (default bench/results/<UTC date>-latte-affinity): raw/ (each run's output; ignored by git)
# and README.md (the plan, the machine, a table of median inserts/s and insert p50/p99 by
# queue count and mode).
#
# Usage: bench/latte_affinity.sh
# Environment: QUEUES="1 2 4 8" MODES="naive pair-binding separated skew" THREADS=2
#   RECORDS=100000 REPEATS=3 POLLER=adaptive (or spin) SQ_POLL=true CACHE_SIZE=67108864
#   SCRATCH=/var/tmp (the stores' directories; not tmpfs: O_DIRECT on a real disk)
#   SHALE (a shale binary; default: this tree's, built in release) OUT
set -euo pipefail
cd "$(dirname "$0")/.."

QUEUES=${QUEUES:-1 2 4 8}
MODES=${MODES:-naive pair-binding separated skew}
THREADS=${THREADS:-2}
RECORDS=${RECORDS:-100000}
REPEATS=${REPEATS:-3}
POLLER=${POLLER:-adaptive}
SQ_POLL=${SQ_POLL:-true}
CACHE_SIZE=${CACHE_SIZE:-67108864}
SCRATCH=${SCRATCH:-/var/tmp}
OUT=${OUT:-bench/results/$(date -u +%F)-latte-affinity}
if [ -z "${SHALE:-}" ]; then
  cargo build --release -q -p shale-cli
  SHALE=${CARGO_TARGET_DIR:-target}/release/shale
fi
mkdir -p "$OUT/raw"
work=$(mktemp -d "$SCRATCH/shale-latte-affinity.XXXXXX")
trap 'rm -rf "$work"' EXIT
command="QUEUES=\"$QUEUES\" MODES=\"$MODES\" THREADS=$THREADS RECORDS=$RECORDS REPEATS=$REPEATS POLLER=$POLLER SQ_POLL=$SQ_POLL CACHE_SIZE=$CACHE_SIZE bench/latte_affinity.sh"
echo "latte_affinity: $command" >&2

# One load; prints "inserts/s p50 p99" from its report.
run_load() {
  local name=$1 queues=$2 mode=$3 log="$OUT/raw/$1.txt"
  rm -rf "$work/db" "$work/undo.pmem"
  local io=()
  [ "$queues" -gt 0 ] && io=(--io_queues "$queues" --io_affinity "$mode" --io_poller "$POLLER" --io_sq_poll "$SQ_POLL")
  "$SHALE" ycsb --engine table --phase load --db "$work/db" --undo_log pmem --pmem_path "$work/undo.pmem" \
    --records "$RECORDS" --threads "$THREADS" --cache_size "$CACHE_SIZE" "${io[@]}" \
    --statistics >"$log" 2>&1 || { echo "latte_affinity: $name failed, see $log" >&2; exit 1; }
  awk -F', ' '/^\[OVERALL\], Throughput/ { t = $3 } /^\[INSERT\], 50thPercentileLatency/ { p50 = $3 }
    /^\[INSERT\], 99thPercentileLatency/ { p99 = $3 } END { printf "%d %s %s\n", t, p50, p99 }' "$log"
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

results="$OUT/raw/results.txt"
: >"$results"
for r in $(seq 1 "$REPEATS"); do
  line=$(run_load "own-r$r" 0 -)
  echo "own 0 $r $line" >>"$results"
  echo "  r$r a queue per thread: $line" >&2
  for q in $QUEUES; do
    for m in $MODES; do
      line=$(run_load "q$q-$m-r$r" "$q" "$m")
      echo "$m $q $r $line" >>"$results"
      echo "  r$r $q pairs $m: $line" >&2
    done
  done
done

{
  echo "# LATTE's affinity modes on the table engine: YCSB load by queue pairs"
  echo
  echo "\`$command\` on shale $(git describe --always --dirty), $(date -u '+%F %H:%M UTC'); $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')); stores in $SCRATCH."
  echo "Each cell: median of $REPEATS loads of $RECORDS rows by $THREADS client threads, inserts/s (insert p50 / p99 us)."
  [ "$(nproc)" -lt 8 ] && echo "This machine has $(nproc) CPUs: pinned pollers and SQ threads share them with the clients, so this checks that every mode runs; it does not measure the modes (see the script's comment)."
  echo
  printf '| queue pairs |'
  for m in $MODES; do printf ' %s |' "$m"; done
  echo
  printf '|---:|'
  for m in $MODES; do printf -- '---:|'; done
  echo
  cell() {
    local rows
    rows=$(awk -v m="$1" -v q="$2" '$1 == m && $2 == q' "$results")
    printf '%s (%s / %s)' "$(awk '{ print $4 }' <<<"$rows" | median)" \
      "$(awk '{ print $5 }' <<<"$rows" | median)" "$(awk '{ print $6 }' <<<"$rows" | median)"
  }
  echo "| a queue per thread (no pairs) | $(cell own 0) |"
  for q in $QUEUES; do
    printf '| %s |' "$q"
    for m in $MODES; do printf ' %s |' "$(cell "$m" "$q")"; done
    echo
  done
} >"$OUT/README.md"
cat "$OUT/README.md"
