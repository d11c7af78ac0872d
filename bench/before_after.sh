#!/usr/bin/env bash
# Before and after a change of shared code (issue #43: "measure, before and after, in one run,
# alternating"): two builds of the `shale` binary run the same workloads, one after the other,
# REPEATS times, and the medians and their ratio (after / before) go into one table.
#
# Workloads, each in a temporary store of its own (the binaries' defaults otherwise):
#   - the db_bench suite: fillseq, fillrandom, overwrite, readrandom, readseq, seekrandom on
#     NUM keys (`shale bench`);
#   - fillsync with 16 and 32 threads, SYNC_NUM writes each (`shale bench --benchmarks=fillsync`);
#   - the hash engine: randfill then YCSB C, B and A on NUM keys (`shale kvbench --engine hash`),
#     throughput and read p99;
#   - the table engine: YCSB load of TABLE_RECORDS rows then workload B, TABLE_OPS operations
#     (`shale ycsb --engine table`).
#
# Variables: PARTS (default "dbbench fillsync hash table": which of the workloads above run; a
# change to one engine's code may be measured on its part alone, saying so), NUM (default 200000), SYNC_NUM (2000), TABLE_RECORDS (20000), TABLE_OPS (20000),
# REPEATS (3), OUT (bench/results/<UTC date>-before-after). Output in OUT: raw/ (each run's
# output; ignored by git), runs.csv (one row per figure and run), summary.md (the medians, the
# ratios, and the run-to-run spread of each side: a ratio inside the spread is no change).
#
# Usage: bench/before_after.sh BEFORE_BINARY AFTER_BINARY
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -ne 2 ] || [ ! -x "$1" ] || [ ! -x "$2" ]; then
    echo "usage: bench/before_after.sh BEFORE_BINARY AFTER_BINARY (two built shale binaries)" >&2
    exit 2
fi
BEFORE=$(realpath "$1")
AFTER=$(realpath "$2")
NUM=${NUM:-200000}
SYNC_NUM=${SYNC_NUM:-2000}
TABLE_RECORDS=${TABLE_RECORDS:-20000}
TABLE_OPS=${TABLE_OPS:-20000}
REPEATS=${REPEATS:-3}
PARTS=${PARTS:-dbbench fillsync hash table}
for part in $PARTS; do
    case $part in
        dbbench | fillsync | hash | table) ;;
        *)
            echo "PARTS: unknown part '$part' (dbbench, fillsync, hash, table)" >&2
            exit 2
            ;;
    esac
done
OUT=${OUT:-bench/results/$(date -u +%Y-%m-%d)-before-after}
mkdir -p "$OUT/raw"
csv="$OUT/runs.csv"
echo "side,run,figure,value" > "$csv"

# Appends the figures of one run's output to the CSV: db_bench-style "name : ... N ops/sec"
# lines, the tail lines ("name [op] latency micros : p50 .. p99 X"), YCSB's OVERALL throughputs.
record() {
    local side=$1 run=$2 prefix=$3 file=$4
    python3 - "$side" "$run" "$prefix" "$file" >> "$csv" <<'EOF'
import re, sys
side, run, prefix, path = sys.argv[1:]
overall = 0
for line in open(path, errors="replace"):
    m = re.match(r"^(\S+)\s+:\s+[\d.]+ micros/op (\d+) ops/sec", line)
    if m and "[" not in m.group(1):
        print(f"{side},{run},{prefix}{m.group(1)} ops/s,{m.group(2)}")
    # The tail line, "name [op] latency micros : p50 X p99 Y ..." (older builds print no op).
    m = re.match(r"^(\S+)(?:\s+([A-Za-z-]+))?\s+latency micros : p50 [\d.]+ p99 ([\d.]+)", line)
    if m and "[" not in m.group(1):
        name = m.group(1) + (" " + m.group(2) if m.group(2) else "")
        print(f"{side},{run},{prefix}{name} p99 us,{m.group(3)}")
    m = re.match(r"^\[OVERALL\], Throughput\(ops/sec\), ([\d.]+)", line)
    if m:
        print(f"{side},{run},{prefix}{'load' if overall == 0 else 'run'} ops/s,{m.group(1)}")
        overall += 1
EOF
}

run_side() {
    local side=$1 bin=$2 run=$3 raw="$OUT/raw/$1-$3"
    echo "== $side, run $run" >&2
    if has_part dbbench; then
        "$bin" bench --num="$NUM" \
            --benchmarks=fillseq,fillrandom,overwrite,readrandom,readseq,seekrandom \
            > "$raw-dbbench.txt" 2>&1
        record "$side" "$run" "" "$raw-dbbench.txt"
    fi
    if has_part fillsync; then
        for t in 16 32; do
            "$bin" bench --num="$SYNC_NUM" --threads="$t" --benchmarks=fillsync \
                > "$raw-fillsync-$t.txt" 2>&1
            record "$side" "$run" "${t} threads " "$raw-fillsync-$t.txt"
        done
    fi
    if has_part hash; then
        "$bin" kvbench --engine hash --num "$NUM" --workloads randfill,ycsb-c,ycsb-b,ycsb-a \
            > "$raw-kvbench.txt" 2>&1
        record "$side" "$run" "hash " "$raw-kvbench.txt"
    fi
    if has_part table; then
        "$bin" ycsb --engine table --records="$TABLE_RECORDS" --operations="$TABLE_OPS" \
            --workload=b > "$raw-table.txt" 2>&1
        record "$side" "$run" "table B " "$raw-table.txt"
    fi
}

has_part() {
    [[ " $PARTS " == *" $1 "* ]]
}

for run in $(seq 1 "$REPEATS"); do
    # Alternating, each side first in turn, so a drift of the machine falls on both.
    if [ $((run % 2)) -eq 1 ]; then
        run_side before "$BEFORE" "$run"
        run_side after "$AFTER" "$run"
    else
        run_side after "$AFTER" "$run"
        run_side before "$BEFORE" "$run"
    fi
done

python3 - "$csv" "$BEFORE" "$AFTER" "$REPEATS" "$PARTS" > "$OUT/summary.md" <<'EOF'
import csv, statistics, sys
path, before, after, repeats, parts = sys.argv[1:]
rows = list(csv.DictReader(open(path)))
figures = []
vals = {}
for r in rows:
    if r["figure"] not in figures:
        figures.append(r["figure"])
    vals.setdefault((r["side"], r["figure"]), []).append(float(r["value"]))
print(f"# Before and after\n\nbefore: `{before}`  \nafter: `{after}`  \nparts: {parts}  \n{repeats} runs each, alternating; "
      "medians; spread = (max - min) / median of each side.\n")
print("| figure | before | after | after / before | spread before | spread after |")
print("|---|---|---|---|---|---|")
for f in figures:
    b, a = vals.get(("before", f), []), vals.get(("after", f), [])
    if not b or not a:
        continue
    mb, ma = statistics.median(b), statistics.median(a)
    sb = (max(b) - min(b)) / mb if mb else 0
    sa = (max(a) - min(a)) / ma if ma else 0
    ratio = ma / mb if mb else float("nan")
    print(f"| {f} | {mb:,.1f} | {ma:,.1f} | {ratio:.2f} | {sb:.0%} | {sa:.0%} |")
EOF
cat "$OUT/summary.md"
