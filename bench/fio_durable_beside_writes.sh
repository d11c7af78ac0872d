#!/usr/bin/env bash
# What a stream of large writes does to durable writes on the same disk, with fio alone (no
# shale): one job of 8 KiB O_DIRECT writes with `--sync=dsync` at depth 1 (a WAL's synced
# appends), first alone, then beside a second job of 1 MiB O_DIRECT writes at depth D (an SST
# being written), 10 s each. Prints the durable writes' rate and p50 / p99 / p99.9 / max
# latency, and the large writes' bandwidth, per D. BENCHMARKS-history.md, "durable writes
# beside background writes", records a run.
# Usage: bench/fio_durable_beside_writes.sh [DIR]   (default /var/tmp; two files, deleted after)
# Environment: DEPTHS="1 2 4 8" SECONDS_EACH=10
# Installs fio with apt-get if it is missing.
set -euo pipefail
DIR=${1:-/var/tmp}
DEPTHS=${DEPTHS:-1 2 4 8}
SECONDS_EACH=${SECONDS_EACH:-10}
command -v fio >/dev/null || { apt-get update -q && apt-get install -y -q fio; }
wal=$DIR/fio-durable-wal.dat
bg=$DIR/fio-durable-bg.dat
trap 'rm -f "$wal" "$bg"' EXIT
for depth in 0 $DEPTHS; do
  args=(--name=wal --filename="$wal" --size=64M --rw=write --bs=8k --direct=1
        --ioengine=io_uring --sync=dsync --runtime="$SECONDS_EACH" --time_based)
  if [ "$depth" -gt 0 ]; then
    args+=(--name=bg --filename="$bg" --size=2G --rw=write --bs=1M --direct=1
           --ioengine=io_uring --iodepth="$depth" --runtime="$SECONDS_EACH" --time_based)
  fi
  fio --output-format=json "${args[@]}" | DEPTH=$depth python3 -c '
import json, os, sys
j = json.load(sys.stdin)
w = j["jobs"][0]["write"]
p = w["clat_ns"]["percentile"]
bg = [x for x in j["jobs"] if x["jobname"] == "bg"]
bw = bg[0]["write"]["bw"] / 1024 if bg else 0
lat = [p["50.000000"], p["99.000000"], p["99.900000"], w["clat_ns"]["max"]]
print("background depth %s: durable writes/s %.0f, p50 / p99 / p99.9 / max us %s; "
      "background MiB/s %.0f" % (os.environ["DEPTH"], w["iops"],
      " / ".join("%.0f" % (ns / 1000) for ns in lat), bw))
'
done
