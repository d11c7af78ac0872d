#!/usr/bin/env bash
# Issue #45 part 4: the hash engine's batches written side by side (HashOptions::
# batches_in_flight) against one at a time, same build, alternating runs: 64 and 16 client
# threads, randfill then YCSB A, on a raw volume (a loop device with direct I/O over a file
# written whole beforehand) and on a volume file in a temporary directory of the disk.
# Usage (root, from the repository root, after cargo build --release -p shale-cli):
#   bash bench/results/2026-12-01-hash-batches-in-flight/run.sh [REPEATS]
set -euo pipefail
out=$(dirname "$0")
repeats=${1:-5}
shale=${SHALE_BIN:-target/release/shale}
backing=${BACKING:-/tmp/shale-bif-loop.img}
dd if=/dev/zero of="$backing" bs=1M count=3072 oflag=direct status=none
loop=$(losetup --direct-io=on -f --show "$backing")
trap 'losetup -d "$loop"; rm -f "$backing"' EXIT
log="$out/runs.txt"
: > "$log"
for rep in $(seq 1 "$repeats"); do
  for threads in 64 16; do
    for where in loop file; do
      for bif in 1 2; do
        paths=()
        if [ "$where" = loop ]; then
          # A blank device each run: every byte a run can reach zeroed (the store spans
          # well under 1 GiB), so each run starts from the same device. (With only the
          # header zeroed, one run of e9c732d stopped with a false corruption report: the
          # store read the previous run's pages as its own, fixed in 48069a2.)
          dd if=/dev/zero of="$loop" bs=1M count=1024 oflag=direct status=none
          paths=(--paths "$loop")
        fi
        echo "## rep $rep threads $threads where $where batches_in_flight $bif" >> "$log"
        "$shale" kvbench --engine hash "${paths[@]}" --num 60000 --threads_per_instance "$threads" \
          --batches_in_flight "$bif" --workloads randfill,ycsb-a --contention 2>&1 \
          | grep -E '^(randfill|ycsb-a) +:|latency micros|worker hand-off|^# hash' >> "$log"
      done
    done
  done
done
python3 "$out/summary.py" "$log" | tee "$out/summary.md"
