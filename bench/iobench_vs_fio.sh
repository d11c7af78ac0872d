#!/usr/bin/env bash
# shale iobench against fio on one file, alternating A B A B A B, 20 s each, for
#   (a) 1 MiB sequential writes at QD32 and (b) 4 KiB random reads at QD32.
# Usage: bench/iobench_vs_fio.sh [FILE]   (default target/io2g.dat, deleted afterwards)
# Installs fio with apt-get if it is missing. Prints every run's result line; BENCHMARKS.md
# records the medians and the ratio shale/fio.
set -euo pipefail
cd "$(dirname "$0")/.."
F=${1:-target/io2g.dat}
command -v fio >/dev/null || { apt-get update -q && apt-get install -y -q fio; }
cargo build --release -q -p shale-cli
B=${CARGO_TARGET_DIR:-target}/release/shale
# A new file is pre-filled by iobench, so reads hit written extents.
$B iobench --path "$F" --size 2g --pattern randread --block_size 4k --queue_depth 32 --seconds 5 >/dev/null
for w in seqwrite randread; do
  if [ $w = seqwrite ]; then rw=write; bs=1M; sbs=1m; else rw=randread; bs=4k; sbs=4k; fi
  for i in 1 2 3; do
    echo "== $w run $i: fio (load $(cut -d' ' -f1 /proc/loadavg))"
    fio --name=$w --filename="$F" --size=2G --ioengine=io_uring --direct=1 --rw=$rw --bs=$bs \
        --iodepth=32 --runtime=20 --time_based | grep -E "IOPS=|WRITE:|READ:"
    echo "== $w run $i: shale (load $(cut -d' ' -f1 /proc/loadavg))"
    $B iobench --path "$F" --size 2g --pattern $w --block_size $sbs --queue_depth 32 \
        --seconds 20 --poll blocking
  done
done
rm -f "$F"
