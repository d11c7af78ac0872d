#!/usr/bin/env bash
# Issue #45 part 4: the hash engine's worker at 64 and 16 client threads, builds against the
# one before, alternating runs: randfill then YCSB A, on a raw volume (a loop device with
# direct I/O over a file written whole beforehand) and on a volume file in a temporary
# directory of the disk. The builds are given as label=path pairs, the first the baseline:
#   base: c15e499 (before); chain: callers woken in a chain (shale_io::ticket::Answers);
#   new: that, and a batch's buffer not zeroed before its copy, the value cache's evicted
#   values freed outside its lock, confirmations reading a record's head only.
# Usage (root, from the repository root):
#   BUILDS="base=/tmp/shale-base chain=/tmp/shale-chain new=target/release/shale" \
#     bash bench/results/2026-12-01-hash-wake-chain/run.sh [REPEATS]
set -euo pipefail
out=$(dirname "$0")
repeats=${1:-5}
builds=${BUILDS:?label=path pairs, the first the baseline}
num=${NUM:-150000}
backing=${BACKING:-/tmp/shale-chain-loop.img}
dd if=/dev/zero of="$backing" bs=1M count=3072 oflag=direct status=none
loop=$(losetup --direct-io=on -f --show "$backing")
trap 'losetup -d "$loop"; rm -f "$backing"' EXIT
log="$out/runs.txt"
: > "$log"
for rep in $(seq 1 "$repeats"); do
  for threads in 64 16; do
    for where in loop file; do
      for pair in $builds; do
        label=${pair%%=*}
        bin=${pair#*=}
        paths=()
        if [ "$where" = loop ]; then
          # A blank device each run: every byte a run can reach zeroed (the store spans
          # well under 2 GiB), so each run starts from the same device.
          dd if=/dev/zero of="$loop" bs=1M count=2048 oflag=direct status=none
          paths=(--paths "$loop")
        fi
        echo "## rep $rep threads $threads where $where build $label" >> "$log"
        "$bin" kvbench --engine hash "${paths[@]}" --num "$num" --threads_per_instance "$threads" \
          --workloads randfill,ycsb-a --contention 2>&1 \
          | grep -E '^(randfill|ycsb-a) +:|latency micros|worker hand-off|^# hash' >> "$log"
      done
    done
  done
done
python3 "$out/summary.py" "$log" | tee "$out/summary.md"
