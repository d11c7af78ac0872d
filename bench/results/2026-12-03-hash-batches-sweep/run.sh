#!/usr/bin/env bash
# Issue #45 part 4 (2-core half): the hash engine's worker hand-off wait at 64 and 16 client
# threads against the number of batches whose durable writes may be in flight at once
# (`--batches_in_flight`, `HashOptions::batches_in_flight`, 2 by default), one build,
# variants alternating within each repeat: randfill then YCSB A, on a raw volume (a loop
# device with direct I/O, zeroed before each run) and on a volume file in a temporary
# directory of the disk. Same log format as bench/results/2026-12-01-hash-gc-tail/run.sh,
# whose summary.py makes the table (the first variant is the baseline).
# Usage (root, from the repository root):
#   VARIANTS="f2=2 f1=1 f4=4 f7=7" SHALE_BIN=target/release/shale \
#     bash bench/results/2026-12-03-hash-batches-sweep/run.sh [REPEATS]
set -euo pipefail
out=$(dirname "$0")
repeats=${1:-3}
variants=${VARIANTS:?label=batches pairs, the first the baseline}
bin=${SHALE_BIN:-target/release/shale}
num=${NUM:-150000}
threads_list=${THREADS:-64 16}
backing=${BACKING:-/tmp/shale-batches-loop.img}
dd if=/dev/zero of="$backing" bs=1M count=3072 oflag=direct status=none
loop=$(losetup --direct-io=on -f --show "$backing")
trap 'losetup -d "$loop"; rm -f "$backing"' EXIT
log="$out/runs.txt"
: > "$log"
for rep in $(seq 1 "$repeats"); do
  for threads in $threads_list; do
    for where in loop file; do
      for pair in $variants; do
        label=${pair%%=*}
        batches=${pair#*=}
        paths=()
        if [ "$where" = loop ]; then
          dd if=/dev/zero of="$loop" bs=1M count=2048 oflag=direct status=none
          paths=(--paths "$loop")
        fi
        echo "## rep $rep threads $threads where $where build $label" >> "$log"
        "$bin" kvbench --engine hash "${paths[@]}" --num "$num" --threads_per_instance "$threads" \
          --batches_in_flight "$batches" --workloads randfill,ycsb-a --contention 2>&1 \
          | grep -E '^(randfill|ycsb-a) +:|latency micros|worker hand-off|^# hash' >> "$log"
      done
    done
  done
done
python3 bench/results/2026-12-01-hash-gc-tail/summary.py "$log" | tee "$out/summary.md"
