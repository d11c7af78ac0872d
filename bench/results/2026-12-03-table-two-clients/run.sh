#!/usr/bin/env bash
# The table engine at two client threads, builds alternating (shale alone): first, is the
# fall of bench/latte.sh's figures from 2026-11-28 (643b256) to 2026-12-03 the engine's or the
# disk's (runs-643b256.txt); then the commit's write rounds beside earlier device flushes
# against the build before (runs-overlap.txt). Each run a fresh store in a temporary directory
# of the disk with its undo log in emulated persistent memory (/dev/shm, as bench/latte.sh
# has it), every operation durable (--sync), LATTE's row shape (five 50-byte fields), a cache
# of CACHE bytes (64 MiB by default): the load and workload A in one process, then B on the
# loaded store in another.
# Usage (root, from the repository root):
#   LOG=runs-overlap.txt CACHE=8388608 RECORDS=100000 OPS=20000 \
#   BUILDS="base=/tmp/shale-943425c overlap=target/release/shale" \
#     bash bench/results/2026-12-03-table-two-clients/run.sh [REPEATS]
set -euo pipefail
out=$(dirname "$0")
repeats=${1:-3}
builds=${BUILDS:?label=path pairs}
records=${RECORDS:-300000}
ops=${OPS:-30000}
scratch=${SCRATCH:-/work/tmp-table-two}
log="$out/${LOG:-runs.txt}"
: > "$log"
common=(--engine table --sync --threads 2 --records "$records" --operations "$ops"
  --fieldcount 5 --fieldlength 50 --cache_size "${CACHE:-67108864}")
for rep in $(seq 1 "$repeats"); do
  for pair in $builds; do
    label=${pair%%=*}
    bin=${pair#*=}
    rm -rf "$scratch" && mkdir -p "$scratch"
    pmem=/dev/shm/shale-two-clients-$$.pmem
    rm -f "$pmem"
    echo "## rep $rep build $label" >> "$log"
    "$bin" ycsb "${common[@]}" --db "$scratch/store" --pmem_path "$pmem" --workload a \
      --phase both 2>&1 | grep -E "Throughput|latency micros" >> "$log"
    "$bin" ycsb "${common[@]}" --db "$scratch/store" --pmem_path "$pmem" --workload b \
      --phase run --use_existing_db 2>&1 | grep -E "Throughput|latency micros" >> "$log"
    rm -rf "$scratch" "$pmem"
  done
done
cat "$log"
