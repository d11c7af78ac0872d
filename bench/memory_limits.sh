#!/usr/bin/env bash
# bench/memory_limits.sh: each tool at its defaults in memory cgroups of several sizes: does it
# live or is it OOM-killed, how much of the group did it use, how fast did it go. A user who
# runs shale in a container sets a memory limit and nothing else; RocksDB's db_bench, at its
# own defaults, runs beside it as the yardstick.
#
# Needs root and a cgroup memory controller (v1 at /sys/fs/cgroup/memory, or v2 at
# /sys/fs/cgroup with memory in cgroup.subtree_control); fails where it has neither.
#
#   LIMITS       memory limits in MiB (default "128 256 512")
#   TOOLS        any of: bench (shale bench), db_bench (RocksDB's), ycsb (shale ycsb, the lsm
#                engine), table (shale ycsb --engine table), hash (shale kvbench --engine hash)
#                (default "bench db_bench ycsb hash")
#   NUM          keys of bench and db_bench (default 3000000; fillrandom,overwrite,readrandom,
#                200,000 reads)
#   RECORDS, OPERATIONS   YCSB's load and run A (default 2000000, 300000)
#   HASH_NUM     hash engine records of 4 KiB (default 300000; randfill, ycsb-c)
#   SHALE        the shale binary (default target/release/shale, built if missing)
#   DB_BENCH     RocksDB 11.8.1's db_bench (default ~/.cache/shale-bench/rocksdb-11.8.1/db_bench,
#                as bench/compare.sh builds it)
#   DIR          where stores go (default /var/tmp)
#   OUT          results directory (default bench/results/<date>-memory-limits): summary.md,
#                and each run's output in raw/ (not kept by git)
set -euo pipefail
cd "$(dirname "$0")/.."

LIMITS=${LIMITS:-"128 256 512"}
TOOLS=${TOOLS:-"bench db_bench ycsb hash"}
NUM=${NUM:-3000000}
RECORDS=${RECORDS:-2000000}
OPERATIONS=${OPERATIONS:-300000}
HASH_NUM=${HASH_NUM:-300000}
SHALE=${SHALE:-target/release/shale}
DB_BENCH=${DB_BENCH:-$HOME/.cache/shale-bench/rocksdb-11.8.1/db_bench}
DIR=${DIR:-/var/tmp}
OUT=${OUT:-bench/results/$(date -u +%F)-memory-limits}
mkdir -p "$OUT/raw"

die() { echo "bench/memory_limits.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (it makes memory cgroups)"
if [ -w /sys/fs/cgroup/memory/cgroup.procs ]; then
  V=1; ROOT=/sys/fs/cgroup/memory
elif grep -qw memory /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; then
  V=2; ROOT=/sys/fs/cgroup
else
  die "no writable cgroup memory controller (v1 /sys/fs/cgroup/memory or v2 /sys/fs/cgroup)"
fi
if [ ! -x "$SHALE" ]; then
  cargo build --release -q -p shale-cli
fi
case " $TOOLS " in *" db_bench "*)
  [ -x "$DB_BENCH" ] || die "no db_bench at $DB_BENCH (bench/compare.sh builds RocksDB 11.8.1 there; or leave db_bench out of TOOLS)";;
esac

# The command line of TOOL with its store under $2.
command_of() {
  local tool=$1 store=$2
  case $tool in
    bench) echo "$SHALE bench --db $store --num $NUM --benchmarks fillrandom,overwrite,readrandom --reads 200000" ;;
    db_bench) echo "$DB_BENCH --db=$store --num=$NUM --benchmarks=fillrandom,overwrite,readrandom --reads=200000 --compression_type=none" ;;
    ycsb) echo "$SHALE ycsb --db $store --workload a --phase both --records $RECORDS --operations $OPERATIONS" ;;
    table) echo "$SHALE ycsb --engine table --db $store --workload a --phase both --records $RECORDS --operations $OPERATIONS" ;;
    hash) echo "$SHALE kvbench --engine hash --paths $store --num $HASH_NUM --workloads randfill,ycsb-c --operations $HASH_NUM" ;;
    *) die "unknown tool $tool" ;;
  esac
}

# Runs TOOL in a fresh group of LIMIT MiB; prints "status|peak_mib". A process the OOM killer
# ends leaves its store's WAL tail in /dev/shm: with the store removed, `shale orphans
# --remove` removes it (and only files whose store is gone).
run_in_group() {
  local tool=$1 limit=$2 log=$3
  local g=$ROOT/shale-memory-limits-$$ store=$DIR/shale-memory-limits-$$
  rm -rf "$store"; rmdir "$g" 2>/dev/null || true
  mkdir "$g"
  if [ $V = 1 ]; then
    echo $((limit << 20)) >"$g/memory.limit_in_bytes"
  else
    echo $((limit << 20)) >"$g/memory.max"; echo 0 >"$g/memory.swap.max" 2>/dev/null || true
  fi
  local cmd rc=0 pid
  cmd=$(command_of "$tool" "$store")
  echo "# $cmd (memory cgroup v$V of $limit MiB)" >"$log"
  (echo 0 >"$g/cgroup.procs" && exec $cmd) >>"$log" 2>&1 &
  pid=$!
  # The group's peak counts the page cache, which fills any group to its limit; what the
  # kernel cannot reclaim without swap is anonymous memory and shared memory (the WAL tail
  # in /dev/shm), sampled every 0.2 s.
  local stat_keys='$1=="rss"||$1=="shmem"' held=0 peak=0
  [ $V = 2 ] && stat_keys='$1=="anon"||$1=="shmem"'
  while kill -0 $pid 2>/dev/null; do
    held=$(awk "$stat_keys"'{s+=$2} END{print s+0}' "$g/memory.stat" 2>/dev/null || echo 0)
    [ "$held" -gt "$peak" ] && peak=$held
    sleep 0.2
  done
  wait $pid || rc=$?
  peak=$((peak >> 20))
  local killed
  if [ $V = 1 ]; then
    killed=$(awk '$1=="oom_kill"{print $2}' "$g/memory.oom_control")
  else
    killed=$(awk '$1=="oom_kill"{print $2}' "$g/memory.events")
  fi
  rmdir "$g" 2>/dev/null || true
  rm -rf "$store"
  "$SHALE" orphans --remove >/dev/null 2>&1 || true
  local status="lived"
  if [ "${killed:-0}" != 0 ]; then status="OOM-killed"; elif [ $rc != 0 ]; then status="failed (exit $rc)"; fi
  echo "# exit $rc, oom_kill $killed, peak anonymous + shared memory $peak MiB" >>"$log"
  echo "$status|$peak"
}

# The first result line's throughput, as the tool prints it.
first_rate() {
  local tool=$1 log=$2
  case $tool in
    bench|db_bench) awk '/^fillrandom +:/{for(i=1;i<=NF;i++) if($(i+1)=="ops/sec") {print $i" ops/s fillrandom"; exit}}' "$log" ;;
    ycsb|table) awk -F', ' '/^\[OVERALL\], Throughput/{t[++n]=$3} END{if(n) printf "%.0f ops/s load, %.0f ops/s A\n", t[1], t[n]}' "$log" ;;
    hash) awk '/^randfill /{for(i=1;i<=NF;i++) if($(i+1)=="ops/sec") {print $i" ops/s randfill"; exit}}' "$log" ;;
  esac
}

summary=$OUT/summary.md
{
  echo "# Each tool at its defaults in a memory cgroup"
  echo
  echo "$(date -u '+%F %T') UTC, $(git rev-parse --short HEAD)$(git diff --quiet || echo -dirty), cgroup v$V, $(nproc) cores"
  echo
  echo "| tool | limit MiB | outcome | peak anonymous + shared memory MiB | throughput |"
  echo "|---|---:|---|---:|---|"
} >"$summary"
for limit in $LIMITS; do
  for tool in $TOOLS; do
    log=$OUT/raw/$tool-$limit.log
    echo "== $tool in $limit MiB" >&2
    IFS='|' read -r status peak < <(run_in_group "$tool" "$limit" "$log")
    rate=$(first_rate "$tool" "$log" || true)
    echo "| $tool | $limit | $status | $peak | ${rate:--} |" | tee -a "$summary" >&2
  done
done
echo "bench/memory_limits.sh: $summary" >&2
