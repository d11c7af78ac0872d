#!/usr/bin/env bash
# shale iobench against fio on one file, alternating A B A B A B, 20 s each, for
#   (a) 1 MiB sequential writes at QD32 and (b) 4 KiB random reads at QD32.
# Usage: bench/iobench_vs_fio.sh [FILE]   (default target/io2g.dat, deleted afterwards)
# Installs fio with apt-get if it is missing. Prints every run's result line, both tools in
# one shape (IOPS, MB/s, and each request's latency from submission to completion: p50, p99,
# p99.9, max; fio's from its JSON, `--lat_percentiles`), then the medians and the ratios
# shale/fio; BENCHMARKS.md records them.
set -euo pipefail
cd "$(dirname "$0")/.."
F=${1:-target/io2g.dat}
command -v fio >/dev/null || { apt-get update -q && apt-get install -y -q fio; }
cargo build --release -q -p shale-cli
B=${CARGO_TARGET_DIR:-target}/release/shale
log=$(mktemp)
# A new file is pre-filled by iobench, so reads hit written extents.
$B iobench --path "$F" --size 2g --pattern randread --block_size 4k --queue_depth 32 --seconds 5 >/dev/null
for w in seqwrite randread; do
  if [ $w = seqwrite ]; then rw=write; bs=1M; sbs=1m; else rw=randread; bs=4k; sbs=4k; fi
  for i in 1 2 3; do
    echo "== $w run $i: fio (load $(cut -d' ' -f1 /proc/loadavg))"
    fio --name=$w --filename="$F" --size=2G --ioengine=io_uring --direct=1 --rw=$rw --bs=$bs \
        --iodepth=32 --runtime=20 --time_based --lat_percentiles=1 --output-format=json |
      python3 -c '
import json, sys
job = json.load(sys.stdin)["jobs"][0]
side = job["write"] if job["write"]["io_bytes"] else job["read"]
lat = side["lat_ns"]
pct = lat["percentile"]
us = [round(x / 1000) for x in (pct["50.000000"], pct["99.000000"], pct["99.900000"], lat["max"])]
iops, mbs = side["iops"], side["bw_bytes"] / 1e6
print("fio %s: %.0f IOPS, %.1f MB/s, p50 %d us, p99 %d us, p99.9 %d us, max %d us"
      % (sys.argv[1], iops, mbs, *us))
' "$w" | tee -a "$log"
    echo "== $w run $i: shale (load $(cut -d' ' -f1 /proc/loadavg))"
    $B iobench --path "$F" --size 2g --pattern $w --block_size $sbs --queue_depth 32 --overwrite \
        --seconds 20 --poll blocking | sed 's/^/shale /' | tee -a "$log"
  done
done
rm -f "$F"
# Medians of each figure per tool and pattern, and shale / fio.
python3 - "$log" <<'PY'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    m = re.match(r"(fio|shale) (\w+): (\d+) IOPS, ([\d.]+) MB/s, p50 (\d+) us, p99 (\d+) us, "
                 r"p99.9 (\d+) us, max (\d+) us", line)
    if m:
        runs.setdefault((m[2], m[1]), []).append([float(x) for x in m.groups()[2:]])
print("\nmedians: IOPS, MB/s, p50 / p99 / p99.9 / max us; ratio shale / fio of IOPS")
for pattern in sorted({p for p, _ in runs}):
    med = {}
    for tool in ("fio", "shale"):
        rows = runs.get((pattern, tool), [])
        if rows:
            med[tool] = [statistics.median(r[i] for r in rows) for i in range(6)]
            f = med[tool]
            print(f"{pattern} {tool}: {f[0]:.0f} IOPS, {f[1]:.1f} MB/s, "
                  f"{f[2]:.0f} / {f[3]:.0f} / {f[4]:.0f} / {f[5]:.0f} us ({len(rows)} runs)")
    if len(med) == 2:
        print(f"{pattern} shale / fio: {med['shale'][0] / med['fio'][0]:.2f}x IOPS, "
              f"p99 {med['shale'][3] / med['fio'][3]:.2f}x")
PY
rm -f "$log"
