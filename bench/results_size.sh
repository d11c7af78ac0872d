#!/usr/bin/env bash
# What git keeps of bench/results, per run directory, against the cap (BENCHMARKS.md, "What
# bench/results keeps"): the files git tracks or would add (summaries: markdown, CSV, small
# text and SVG), not the ignored raw/ and charts/ folders. Prints every run directory over
# CAP_BYTES and the total; exits 1 if a directory that is not tracked yet is over the cap
# (a new run to trim before `git add`). The current ADOC evaluation's overview charts, added
# with `git add -f`, are the known exception.
# Usage: bench/results_size.sh            Environment: CAP_BYTES (204800)
set -uo pipefail
cd "$(dirname "$0")/.."
CAP_BYTES=${CAP_BYTES:-204800}
over_new=0
total=0
for d in bench/results/*/; do
  bytes=$(git ls-files -z --cached --others --exclude-standard -- "$d" | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
  bytes=${bytes:-0}
  total=$((total + bytes))
  if [ "$bytes" -gt "$CAP_BYTES" ]; then
    if [ -z "$(git ls-files -- "$d" | head -1)" ]; then
      echo "over the cap, not tracked yet: $d $bytes bytes" >&2
      over_new=1
    else
      echo "over the cap: $d $bytes bytes"
    fi
  fi
done
echo "bench/results kept in git: $total bytes (cap $CAP_BYTES bytes a run directory)"
exit "$over_new"
