#!/usr/bin/env bash
# shale serve with its store's background threads at each CPU priority, against Redis in the
# same pass (BENCHMARKS-history.md, 2026-12-02): bench/serve.sh once per priority per repeat,
# priorities alternating, each pass with its own Redis run; then one table of medians over
# the repeats, each shale variant against the Redis runs of the same passes.
#
#   SHALE_BIN=/path/shale PRIORITIES="normal idle" REPEATS=3 bash run.sh   (from the repository root)
#   FIRST=4: number the repeats from 4 (a second pass beside the first one's folders)
set -euo pipefail
here=$(dirname "$0")
REPEATS=${REPEATS:-3}
FIRST=${FIRST:-1}
PRIORITIES=${PRIORITIES:-normal idle}
for r in $(seq "$FIRST" $((FIRST + REPEATS - 1))); do
  for prio in $PRIORITIES; do
    SHALE_ARGS="--background_cpu_priority $prio" SCALEOUT=0 REPEATS=1 OUT="$here/$prio-r$r" \
      bash bench/serve.sh >/dev/null
  done
done
python3 - "$here" $PRIORITIES <<'PY' >"$here/summary.md"
import csv, glob, statistics, sys
from collections import defaultdict
here, prios = sys.argv[1], sys.argv[2:]
med = defaultdict(list)
for prio in prios:
    for f in sorted(glob.glob(f"{here}/{prio}-r*/runs.csv")):
        for row in csv.DictReader(open(f)):
            engine = "redis" if row["engine"] == "redis" else f"shale-{prio}"
            med[(row["policy"], row["pipeline"], row["test"].split()[0], engine)].append(
                tuple(float(row[k]) for k in ("rps", "p50_ms", "p99_ms", "p999_ms", "max_ms")))
def m(runs, k):
    return statistics.median(x[k] for x in runs)
cols = " | ".join(f"{p} req/s | {p} p99 ms | {p} p99 / Redis" for p in prios)
print(f"| appendfsync | pipeline | test | Redis req/s | Redis p99 ms | {cols} |")
print("|---|---:|---|" + "---:|" * (2 + 3 * len(prios)))
for key in sorted(k for k in med if k[3] == "redis"):
    red = med[key]
    cells = []
    for p in prios:
        sha = med.get(key[:3] + (f"shale-{p}",))
        if not sha:
            cells.append("- | - | -")
            continue
        cells.append(f"{m(sha, 0):,.0f} | {m(sha, 2):.3f} | {m(sha, 2) / m(red, 2):.2f}")
    print(f"| {key[0]} | {key[1]} | {key[2]} | {m(red, 0):,.0f} | {m(red, 2):.3f} | " + " | ".join(cells) + " |")
PY
cat "$here/summary.md"
