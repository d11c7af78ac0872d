#!/usr/bin/env bash
# Issue #44 (the tail) and #45 part 4: the hash engine's put tail at 64 and 16 client
# threads, builds against the one before, alternating runs: randfill then YCSB A, on a raw
# volume (a loop device with direct I/O over a file written whole beforehand) and on a volume
# file in a temporary directory of the disk. The builds are given as label=path pairs, the
# first the baseline. Two passes, each writing runs-PASS.txt and summary-PASS.md:
#   pass 1: base: d6c79e9 (before); pace: the page cache advice warming a sealed segment one
#     chunk at a time (d40d924); new: that, and collection's victim scanned a slice a turn
#     (815597f).
#   pass 2: base; scan: 815597f (pass 1's new); chunk: that, and the victim read a chunk at
#     a time (94e3781).
# Usage (root, from the repository root):
#   PASS=1 BUILDS="base=/tmp/shale-base pace=/tmp/shale-pace new=/tmp/shale-new" \
#     bash bench/results/2026-12-01-hash-gc-tail/run.sh [REPEATS]
#   PASS=2 BUILDS="base=/tmp/shale-base scan=/tmp/shale-new chunk=target/release/shale" \
#     bash bench/results/2026-12-01-hash-gc-tail/run.sh [REPEATS]
set -euo pipefail
out=$(dirname "$0")
repeats=${1:-4}
builds=${BUILDS:?label=path pairs, the first the baseline}
num=${NUM:-150000}
backing=${BACKING:-/tmp/shale-gc-tail-loop.img}
dd if=/dev/zero of="$backing" bs=1M count=3072 oflag=direct status=none
loop=$(losetup --direct-io=on -f --show "$backing")
trap 'losetup -d "$loop"; rm -f "$backing"' EXIT
pass=${PASS:?1 or 2}
log="$out/runs-$pass.txt"
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
python3 "$out/summary.py" "$log" | tee "$out/summary-$pass.md"
