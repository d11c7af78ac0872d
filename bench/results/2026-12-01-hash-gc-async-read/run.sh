#!/usr/bin/env bash
# Issue #44: the hash engine's garbage collection reading its victim on the worker's queue
# (4c72f23) against reading it synchronously on the worker's thread (a9cb3b0): puts' tail
# under sustained overwrites, randfill of 4 KiB values on a raw volume (a loop device with
# direct I/O over a file written whole beforehand), one client at queue depth 64 and 64
# synchronous clients, builds alternating.
# Usage (root, from the repository root):
#   BEFORE=/path/to/shale-a9cb3b0 AFTER=/path/to/shale-4c72f23 \
#     bash bench/results/2026-12-01-hash-gc-async-read/run.sh [REPEATS]
set -euo pipefail
out=$(dirname "$0")
repeats=${1:-5}
before=${BEFORE:?the build before}
after=${AFTER:?the build after}
num=${NUM:-150000}
backing=${BACKING:-/tmp/shale-gc-loop.img}
dd if=/dev/zero of="$backing" bs=1M count=3072 oflag=direct status=none
loop=$(losetup --direct-io=on -f --show "$backing")
trap 'losetup -d "$loop"; rm -f "$backing"' EXIT
log="$out/runs.txt"
: > "$log"
for rep in $(seq 1 "$repeats"); do
  for client in qd64 sync64; do
    for build in before after; do
      bin=$before
      [ "$build" = after ] && bin=$after
      args=(--threads_per_instance 1 --queue_depth 64)
      [ "$client" = sync64 ] && args=(--threads_per_instance 64)
      # Every byte a run can reach zeroed, so each run starts from the same device.
      dd if=/dev/zero of="$loop" bs=1M count=2048 oflag=direct status=none
      echo "## rep $rep client $client build $build" >> "$log"
      "$bin" kvbench --engine hash --paths "$loop" --num "$num" "${args[@]}" \
        --workloads randfill 2>&1 | grep -E '^randfill +(:|put latency)|^# hash' >> "$log"
    done
  done
done
python3 - "$log" <<'PY' | tee "$out/summary.md"
import re, statistics, sys
from collections import defaultdict
runs = defaultdict(list)
key = None
for line in open(sys.argv[1]):
    m = re.match(r"## rep \d+ client (\w+) build (\w+)", line)
    if m:
        key = (m[1], m[2]); continue
    m = re.match(r"randfill +: +[\d.]+ micros/op (\d+) ops/sec", line)
    if m:
        runs[key].append({"ops": int(m[1])}); continue
    m = re.match(r"randfill +put latency micros : p50 ([\d.]+) p99 ([\d.]+) p99.9 ([\d.]+) max ([\d.]+)", line)
    if m:
        runs[key][-1].update(p50=float(m[1]), p99=float(m[2]), p999=float(m[3]), max=float(m[4]))
med = lambda rs, f: statistics.median(r[f] for r in rs)
print("| client | build | ops/s | put p50 / p99 / p99.9 / max us | runs |")
print("|---|---|---:|---|---:|")
for client in ("qd64", "sync64"):
    for build in ("before", "after"):
        rs = runs[(client, build)]
        print(f"| {client} | {build} | {med(rs, 'ops'):,.0f} | {med(rs, 'p50'):,.0f} / {med(rs, 'p99'):,.0f} / "
              f"{med(rs, 'p999'):,.0f} / {med(rs, 'max'):,.0f} | {len(rs)} |")
    b, a = runs[(client, "before")], runs[(client, "after")]
    print(f"| {client} | after / before | {med(a, 'ops') / med(b, 'ops'):.2f}x | "
          f"{med(a, 'p50') / med(b, 'p50'):.2f}x / {med(a, 'p99') / med(b, 'p99'):.2f}x / "
          f"{med(a, 'p999') / med(b, 'p999'):.2f}x / {med(a, 'max') / med(b, 'max'):.2f}x | |")
PY
