#!/usr/bin/env bash
# Scaling with cores, for a machine with more of them than the 2-core development machine
# (issue #45 part 5: every engine and RocksDB 11.8.1 by thread count in one script that fits
# a lent machine's 15 minutes; earlier, issues #15 and #11). Parts (PARTS), each alternating
# engines within a repeat, medians in the tables:
#   sync   fillsync (every write durable, 1 KB values) on SYNC_THREADS threads: RocksDB
#          (release db_bench), shale with its WAL pipeline (the default), shale with plain
#          group commit (--wal_loggers=0);
#   fill   fillrandom (WAL on, unsynced, 1 KB values) on FILL_THREADS threads: RocksDB and
#          shale;
#   table  the table engine, YCSB C, B and A on TABLE_THREADS client threads, memory as the
#          device (the store in /dev/shm), LATTE's rows, loaded once (issue #45's targets are
#          its own throughput at 16 threads against 2);
#   kv     `shale kvbench --engine hash` on 1, then each of KV_VOLUMES volumes at once (one
#          instance per volume, pinned to CPU i, started together), randfill then YCSB C, 4 KB
#          values, on volume files in SCRATCH and, where the machine's tmpfs takes O_DIRECT, in
#          /dev/shm too (memory as the device: what is left is the engine's own CPU scaling).
# Every median also goes to $OUT/scaling.csv (part,variant,threads,ops_per_s), and
# bench/lib/scaling_chart.py draws one SVG per part from it ($OUT/chart-PART.svg: ops/s
# against threads or volumes, a line per engine). Every run reports its tail as the client
# sees it (`--histogram` for shale bench and db_bench; shale ycsb and kvbench print theirs):
# bench/lib/tails.py reads each run's p50, p99, p99.9 and max per operation type into
# $OUT/tails.csv, and bench/lib/scaling_tails.py puts their medians in the summary's tail
# tables, beside the throughput tables.
# Runs are timed (--duration) where the tool takes it, so a faster machine does more work in
# the same time. Every engine runs on the same file system (SCRATCH), chosen as the first of
# the candidates that takes O_DIRECT writes and is not tmpfs (nor an overlay, where another
# one will do); the machine, the file system and a 4 KiB O_DSYNC write's latency on it are
# recorded first. The defaults (one repeat, 4 s a run, every part) take about 7 minutes on
# 16 cores beside RocksDB's build; RocksDB is built (or found in its cache) only when the
# sync or fill part runs.
#
# Usage: bench/scaling.sh
#        PARTS="table kv" TABLE_OPS=20000 DURATION=1 bench/scaling.sh   (a smoke test, no RocksDB)
# Environment: SHALE (binary; default: cargo build --release), SHALE_BUILDS ("NAME=BINARY ..."
#   to compare several builds of shale side by side, each with its own column; default
#   "shale=$SHALE", which also runs shale-loggers0 in the fillsync table), DB_BENCH (default: the release
#   build of bench/compare/build_rocksdb.sh), SCRATCH (default: the first usable of /var/tmp,
#   /tmp, /root), OUT (default bench/results/<UTC date>-scaling), REPEATS (1), DURATION (4 s a
#   run), SYNC_THREADS and FILL_THREADS ("1 2 4 8 16 32 64"), TABLE_THREADS ("1 2 4 8 16 32
#   64"), TABLE_RECORDS (200000), TABLE_OPS (operations a table run, 400000), KV_VOLUMES
#   ("4 16"), KV_NUM (20000 records per volume), KV_REPEATS (REPEATS), KV_MEDIA ("tmpfs":
#   where the kvbench volumes lie, "disk tmpfs" for both), PARTS ("sync fill table kv").
set -uo pipefail
cd "$(dirname "$0")/.."

REPEATS=${REPEATS:-1}
DURATION=${DURATION:-4}
SYNC_THREADS=${SYNC_THREADS:-1 2 4 8 16 32 64}
FILL_THREADS=${FILL_THREADS:-1 2 4 8 16 32 64}
TABLE_THREADS=${TABLE_THREADS:-1 2 4 8 16 32 64}
TABLE_RECORDS=${TABLE_RECORDS:-200000}
TABLE_OPS=${TABLE_OPS:-400000}
KV_VOLUMES=${KV_VOLUMES:-4 16}
KV_NUM=${KV_NUM:-20000}
KV_REPEATS=${KV_REPEATS:-$REPEATS}
KV_MEDIA=${KV_MEDIA:-tmpfs}
PARTS=${PARTS:-sync fill table kv}
OUT=${OUT:-bench/results/$(date -u +%Y-%m-%d)-scaling}
if [ -z "${SHALE:-}" ]; then
  cargo build --release -p shale-cli >&2 || exit 1
  SHALE=${CARGO_TARGET_DIR:-target}/release/shale
fi
case " $PARTS " in
  *" sync "* | *" fill "*) DB_BENCH=${DB_BENCH:-$(bench/compare/build_rocksdb.sh | tail -2 | head -1)} ;;
  *) DB_BENCH=${DB_BENCH:-none} ;;
esac
SHALE_BUILDS=${SHALE_BUILDS:-shale=$SHALE}
declare -A BIN=()
BUILD_NAMES=()
for b in $SHALE_BUILDS; do
  BIN[${b%%=*}]=${b#*=}
  BUILD_NAMES+=("${b%%=*}")
done
SYNC_VARIANTS=(rocksdb "${BUILD_NAMES[@]}")
[ ${#BUILD_NAMES[@]} = 1 ] && SYNC_VARIANTS+=("${BUILD_NAMES[0]}-loggers0")
# Each process's output goes to $OUT/raw/, which git ignores; $OUT keeps the summary.
mkdir -p "$OUT/raw"
SUMMARY="$OUT/README.md"
CSV="$OUT/scaling.csv"
echo "part,variant,threads,ops_per_s" >"$CSV"
TAILS="$OUT/tails.csv"
echo "part,variant,threads,repeat,label,op,p50_us,p99_us,p999_us,max_us,ops" >"$TAILS"
# part variant threads repeat log: the log's tail rows (one per benchmark and operation type;
# kvbench's per-instance rows, labelled NAME[i], left out for its total) into $TAILS. A run
# that printed none (it failed) adds none: its cell in the tail tables reads "-".
record_tails() {
  python3 bench/lib/tails.py --csv "$5" | awk -F, '$1 !~ /\[/' | sed "s|^|$1,$2,$3,$4,|" >>"$TAILS"
}

# The scratch file system: O_DIRECT must work, and tmpfs or an overlay would not be a device.
usable() { # dir, file systems refused -> 0 when it is none of them and takes O_DIRECT writes
  local d=$1 refused=$2 fs
  mkdir -p "$d" 2>/dev/null || return 1
  fs=$(findmnt -n -o FSTYPE -T "$d" 2>/dev/null)
  case " $refused " in *" ${fs:-none} "*) return 1 ;; esac
  dd if=/dev/zero of="$d/.odirect-probe" bs=1M count=8 oflag=direct status=none 2>/dev/null
  local rc=$?
  rm -f "$d/.odirect-probe"
  return $rc
}
if [ -z "${SCRATCH:-}" ]; then
  # An overlay passes O_DIRECT to the file system below it: second choice, and recorded.
  for refused in "tmpfs ramfs overlay none" "tmpfs ramfs none"; do
    for c in /var/tmp /tmp /root "$PWD/.scratch"; do
      if usable "$c" "$refused"; then SCRATCH=$c; break 2; fi
    done
  done
fi
[ -n "${SCRATCH:-}" ] || { echo "no file system here takes O_DIRECT writes" >&2; exit 1; }
work=$(mktemp -d "$SCRATCH/shale-scaling.XXXXXX")
shm=""
if [ -d /dev/shm ] && dd if=/dev/zero of=/dev/shm/.odirect-probe bs=1M count=1 oflag=direct status=none 2>/dev/null; then
  shm=$(mktemp -d /dev/shm/shale-scaling.XXXXXX)
fi
rm -f /dev/shm/.odirect-probe
# The table engine's store as in LATTE's memory runs (it needs no O_DIRECT there).
shm_table=/dev/shm/shale-scaling-table.$$
trap 'rm -rf "$work" ${shm:+"$shm"} "$shm_table"' EXIT

{
  echo "# Scaling run, $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo
  echo "- shale: $("$SHALE" --version 2>&1 | head -1) ($(git rev-parse --short HEAD 2>/dev/null || echo unknown)); builds compared: $SHALE_BUILDS"
  echo "- yardstick: $([ "$DB_BENCH" = none ] && echo "none (no sync or fill part)" || "$DB_BENCH" --version 2>&1 | head -1)"
  echo "- machine: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo), kernel $(uname -r)"
  echo "- scratch: $SCRATCH on $(findmnt -n -o SOURCE,FSTYPE -T "$SCRATCH" | tr -s ' ')"
  echo "- 4 KiB O_DIRECT|O_DSYNC writes at depth 1 there: $(dd if=/dev/zero of="$work/.dsync" bs=4k count=4000 oflag=direct,dsync 2>&1 | tail -1)"
  echo "- tmpfs volumes for kvbench: ${shm:-none (tmpfs here refuses O_DIRECT)}"
  echo "- each run $DURATION s, medians of $REPEATS alternating runs"
} | tee "$SUMMARY"
rm -f "$work/.dsync"

median() { sort -n | awk '{a[NR] = $1} END {if (NR == 0) print "-"; else print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
per() { awk -v a="$1" -v n="$2" 'BEGIN {if (a != "-") printf "%.0f", a / n; else print "-"}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b + 0 > 0 && a != "-") printf "%.2f", a / b; else print "-"}'; }
ops_of() { # bench name, log -> ops/s from the db_bench-style result line
  awk -v b="$1" '$1 == b {for (i = 1; i <= NF; i++) if ($(i + 1) == "ops/sec") print $i}' "$2" | tail -1
}

dbrun() { # variant bench threads repeat -> ops/s
  local v=$1 b=$2 t=$3 r=$4 log="$OUT/raw/$2-$1-t$3-r$4.txt"
  rm -rf "$work/db"
  local common=(--benchmarks="$b" --num=100000000 --writes=100000000 --duration="$DURATION"
    --threads="$t" --value_size=1024 --db="$work/db" --histogram=1)
  case $v in
    rocksdb) timeout $((DURATION * 6 + 60)) "$DB_BENCH" "${common[@]}" --compression_type=none >"$log" 2>&1 ;;
    *-loggers0) timeout $((DURATION * 6 + 60)) "${BIN[${v%-loggers0}]}" bench "${common[@]}" --wal_loggers=0 --statistics >"$log" 2>&1 ;;
    *) timeout $((DURATION * 6 + 60)) "${BIN[$v]}" bench "${common[@]}" --statistics >"$log" 2>&1 ;;
  esac
  echo "rc=$?" >>"$log"
  rm -rf "$work/db"
  record_tails "$b" "$v" "$t" "$r" "$log"
  ops_of "$b" "$log"
}

threads_table() { # bench "threads" variants...
  local b=$1 threads=$2
  shift 2
  local variants=("$@") v t r
  echo | tee -a "$SUMMARY"
  echo "## $b, 1 KB values, ops/s" | tee -a "$SUMMARY"
  echo | tee -a "$SUMMARY"
  local head="| threads |" rule="|---|"
  for v in "${variants[@]}"; do head+=" $v |"; rule+="---|"; done
  for v in "${variants[@]:1}"; do head+=" $v / ${variants[0]} |"; rule+="---|"; done
  echo "$head" | tee -a "$SUMMARY"
  echo "$rule" | tee -a "$SUMMARY"
  for t in $threads; do
    declare -A got=()
    for r in $(seq 1 "$REPEATS"); do
      for v in "${variants[@]}"; do
        local ops
        ops=$(dbrun "$v" "$b" "$t" "$r")
        echo "$b threads $t repeat $r $v: ${ops:-failed} ops/s" >&2
        got[$v]="${got[$v]:-} ${ops:-}"
      done
    done
    local line="| $t |" base
    declare -A med=()
    for v in "${variants[@]}"; do
      med[$v]=$(echo "${got[$v]:-}" | tr ' ' '\n' | grep . | median)
      line+=" ${med[$v]} |"
      echo "$b,$v,$t,${med[$v]}" >>"$CSV"
    done
    base=${med[${variants[0]}]}
    for v in "${variants[@]:1}"; do line+=" $(ratio "${med[$v]}" "$base") |"; done
    echo "$line" | tee -a "$SUMMARY"
    unset got med
  done
}

kv_part() { # medium dir
  local medium=$1 dir=$2 n r w
  echo | tee -a "$SUMMARY"
  echo "## kvbench, hash engine, volumes on $medium: total ops/s of N volumes against N x one volume's" | tee -a "$SUMMARY"
  echo | tee -a "$SUMMARY"
  echo "\`shale kvbench --engine hash --num $KV_NUM --operations 100000000 --value_size 4096 --queue_depth 8 --pin --duration $DURATION --workloads randfill,ycsb-c\`" | tee -a "$SUMMARY"
  echo | tee -a "$SUMMARY"
  echo "| volumes | randfill ops/s | per volume | share of N x one | ycsb-c ops/s | per volume | share of N x one |" | tee -a "$SUMMARY"
  echo "|---|---|---|---|---|---|---|" | tee -a "$SUMMARY"
  local csv="$OUT/raw/kv-$medium.csv" one_fill="" one_read=""
  for n in 1 $KV_VOLUMES; do
    [ "$n" -le "$(nproc)" ] || continue
    declare -A got=()
    for r in $(seq 1 "$KV_REPEATS"); do
      local paths=()
      for i in $(seq 1 "$n"); do paths+=("$dir/v$i"); done
      rm -rf "$dir"/v*
      timeout $((DURATION * 10 + 120)) "$SHALE" kvbench --engine hash --paths "$(IFS=,; echo "${paths[*]}")" \
        --num "$KV_NUM" --operations 100000000 --value_size 4096 --queue_depth 8 --pin --duration "$DURATION" \
        --workloads randfill,ycsb-c --csv "$csv" --run "n$n-r$r" >"$OUT/raw/kv-$medium-n$n-r$r.txt" 2>&1
      echo "rc=$?" >>"$OUT/raw/kv-$medium-n$n-r$r.txt"
      record_tails "kv-$medium" hash "$n" "$r" "$OUT/raw/kv-$medium-n$n-r$r.txt"
      rm -rf "$dir"/v*
      for w in randfill ycsb-c; do
        # The run's total row: all instances' operations over the slowest one's time.
        local ops
        ops=$(awk -F, -v run="n$n-r$r" -v w="$w" '$2 == run && $3 == w && $4 == "total" {printf "%.0f", $14}' "$csv")
        echo "kvbench $medium volumes $n repeat $r $w: ${ops:-failed} ops/s" >&2
        got[$w]="${got[$w]:-} ${ops:-}"
      done
    done
    local fill read
    fill=$(echo "${got[randfill]:-}" | tr ' ' '\n' | grep . | median)
    read=$(echo "${got[ycsb-c]:-}" | tr ' ' '\n' | grep . | median)
    if [ "$n" = 1 ]; then one_fill=$fill; one_read=$read; fi
    echo "kv-$medium,hash randfill,$n,$fill" >>"$CSV"
    echo "kv-$medium,hash ycsb-c,$n,$read" >>"$CSV"
    echo "| $n | $fill | $(per "$fill" "$n") | $(ratio "$fill" "$(awk -v a="$one_fill" -v n="$n" 'BEGIN {print a * n}')") | $read | $(per "$read" "$n") | $(ratio "$read" "$(awk -v a="$one_read" -v n="$n" 'BEGIN {print a * n}')") |" | tee -a "$SUMMARY"
    unset got
  done
}

table_part() {
  local t="$shm_table" wl th r
  echo | tee -a "$SUMMARY"
  echo "## table engine, YCSB on memory as the device ($TABLE_RECORDS rows, $TABLE_OPS operations a run), ops/s" | tee -a "$SUMMARY"
  echo | tee -a "$SUMMARY"
  rm -rf "$t"
  timeout 600 "$SHALE" ycsb --engine table --phase load --db "$t" --records "$TABLE_RECORDS" \
    --threads 8 >"$OUT/raw/table-load.txt" 2>&1
  echo "| threads | C | B | A | C / C at 2 | B / B at 2 | A / A at 2 |" | tee -a "$SUMMARY"
  echo "|---|---|---|---|---|---|---|" | tee -a "$SUMMARY"
  declare -A med=() two=()
  for th in $TABLE_THREADS; do
    for wl in c b a; do
      local got=""
      for r in $(seq 1 "$REPEATS"); do
        local log="$OUT/raw/table-$wl-t$th-r$r.txt" ops
        timeout 600 "$SHALE" ycsb --engine table --phase run --use_existing_db --db "$t" \
          --workload "$wl" --records "$TABLE_RECORDS" --operations "$TABLE_OPS" --threads "$th" \
          >"$log" 2>&1
        echo "rc=$?" >>"$log"
        record_tails table "$(echo "$wl" | tr a-z A-Z)" "$th" "$r" "$log"
        ops=$(awk -F', ' '/^\[OVERALL\], Throughput/ {printf "%.0f", $3}' "$log")
        echo "table $wl threads $th repeat $r: ${ops:-failed} ops/s" >&2
        got+=" ${ops:-}"
      done
      med[$wl]=$(echo "$got" | tr ' ' '\n' | grep . | median)
      [ "$th" = 2 ] && two[$wl]=${med[$wl]}
      echo "table,ycsb-$wl,$th,${med[$wl]}" >>"$CSV"
    done
    echo "| $th | ${med[c]} | ${med[b]} | ${med[a]} | $(ratio "${med[c]}" "${two[c]:-}") | $(ratio "${med[b]}" "${two[b]:-}") | $(ratio "${med[a]}" "${two[a]:-}") |" | tee -a "$SUMMARY"
  done
  rm -rf "$t"
}

for part in $PARTS; do
  case $part in
    sync) threads_table fillsync "$SYNC_THREADS" "${SYNC_VARIANTS[@]}" ;;
    fill) threads_table fillrandom "$FILL_THREADS" rocksdb "${BUILD_NAMES[@]}" ;;
    table) table_part ;;
    kv)
      for medium in $KV_MEDIA; do
        case $medium in
          disk) kv_part disk "$work" ;;
          tmpfs) if [ -n "$shm" ]; then kv_part tmpfs "$shm"; else echo "kvbench on tmpfs skipped: tmpfs here refuses O_DIRECT" | tee -a "$SUMMARY"; fi ;;
          *) echo "unknown KV_MEDIA entry: $medium (disk or tmpfs)" >&2; exit 2 ;;
        esac
      done
      ;;
  esac
done
python3 bench/lib/scaling_tails.py "$TAILS" | tee -a "$SUMMARY"
python3 bench/lib/scaling_chart.py "$CSV" "$OUT" | tee -a "$SUMMARY"
echo | tee -a "$SUMMARY"
echo "finished $(date -u '+%H:%M:%S UTC')" | tee -a "$SUMMARY"
