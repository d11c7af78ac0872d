#!/usr/bin/env bash
# KVSB (issue #11 part 4): shale-hash, shale-lsm and RocksDB 11.8.1 (the release build of
# bench/compare/build_rocksdb.sh, through the rocksdb crate) on the same workloads, alternating,
# REPEATS times, on one volume and then on VOLUMES_MANY volumes at once (one instance each,
# pinned to CPU i mod ncpu, started together): seqfill, randfill, zipffill, then YCSB A to D,
# KEY_SIZE-byte keys and VALUE_SIZE-byte values. `shale kvbench` runs the shale engines,
# `shale-compare kvbench` RocksDB; both print the same lines and append to one CSV, and
# `shale-compare kvbench-summary` makes the tables (medians, ratios, the issue's targets met
# or missed).
#
# The volumes. As root, each is a loop device (`losetup --direct-io=on`) over a sparse file in
# SCRATCH, one set per engine: shale's engines on the raw device (their volume over the whole
# device), RocksDB on ext4 over a device of its own. All of them sit on this machine's one
# disk; each loop device has its own count of sectors written (/sys/block/loopN/stat), which
# is the host write amplification's numerator for every engine alike. THROTTLE_BPS and
# THROTTLE_IOPS (default 0: none) throttle each device through cgroup v1's root blkio group, to
# make independent device-like volumes where the disk is faster than the sum of them; unset,
# the volumes share the disk. Each process starts on emptied devices (shale's discarded whole,
# RocksDB's file system emptied and trimmed), and `sync` runs after it. Each process is ended
# after PROCESS_TIMEOUT seconds (a hang is a failure, listed in setup.md). Without root, the
# volumes are directories in SCRATCH (device bytes then come from each engine's own counters,
# and the output says so).
#
# Variables: NUM (records per instance and operations per fill, default 40000), OPERATIONS
# (per YCSB workload, default NUM), KEY_SIZE (16), VALUE_SIZE (4096), WORKLOADS (all seven),
# REPEATS (3), VOLUMES_MANY (2; 0 to skip), THREADS (per instance, 1), QUEUE_DEPTH (hash, 1),
# DURATION (seconds cap per workload, none), SYNC (1: RocksDB and shale-lsm sync every write,
# the hash engine's durability; default 0, WAL on unsynced), ENGINES ("hash lsm rocksdb"), SCRATCH
# (/var/tmp), PROCESS_TIMEOUT (seconds, 1800), OUT (bench/results/<UTC date>-kvbench), CACHE
# (where bench/compare/build_rocksdb.sh keeps the yardstick; built there when missing),
# MEMORY_LIMIT (bytes, default 0: none; as root, each process in a cgroup v1 memory group of
# that limit, RSS and page cache together, the group's peak in the process's log: the memory
# regime where the data outgrows what the engines may cache).
#
# Output in OUT: raw/ (each process's output; ignored by git), runs.csv (a row per instance and a total per
# workload and process), setup.md and summary.md (setup.md, then the tables), kvbench.svg (the
# ratios to RocksDB of throughput and CPU time per operation on one volume, targets marked).
#
# Usage: bench/kvbench.sh          (see above for the environment)
#        bench/kvbench.sh cleanup  (tear down what a killed run left in SCRATCH)
set -euo pipefail
cd "$(dirname "$0")/.."

SCRATCH=${SCRATCH:-/var/tmp}
is_root=0
[ "$(id -u)" -eq 0 ] && is_root=1
# Loop devices, throttles, teardown, a shale store's WAL tail (shared with bench/tiered.sh
# and bench/adoc.sh; the devices need root, forget_shale_store does not).
. bench/lib/devices.sh

# Waits for process $1 at most $2 seconds, then ends it (status 124, as timeout's).
wait_bounded() { # pid seconds
  local pid=$1 left=$2
  while kill -0 "$pid" 2>/dev/null; do
    if [ "$left" -le 0 ]; then
      kill "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
      return 124
    fi
    sleep 1
    left=$((left - 1))
  done
  wait "$pid"
}

if [ "${1:-}" = cleanup ]; then
  [ $is_root = 1 ] || { echo "kvbench.sh cleanup: needs root" >&2; exit 1; }
  for d in "$SCRATCH"/shale-kvbench.*; do
    [ -d "$d" ] || continue
    echo "tearing down $d" >&2
    teardown_dir "$d"
  done
  exit 0
fi
[ $# -eq 0 ] || { echo "usage: bench/kvbench.sh [cleanup] (see the header for the environment)" >&2; exit 2; }

NUM=${NUM:-40000}
OPERATIONS=${OPERATIONS:-$NUM}
KEY_SIZE=${KEY_SIZE:-16}
VALUE_SIZE=${VALUE_SIZE:-4096}
WORKLOADS=${WORKLOADS:-seqfill,randfill,zipffill,ycsb-a,ycsb-b,ycsb-c,ycsb-d}
REPEATS=${REPEATS:-3}
MEMORY_LIMIT=${MEMORY_LIMIT:-0}
MEMCG=/sys/fs/cgroup/memory
VOLUMES_MANY=${VOLUMES_MANY:-2}
THREADS=${THREADS:-1}
QUEUE_DEPTH=${QUEUE_DEPTH:-1}
ENGINES=${ENGINES:-hash lsm rocksdb}
THROTTLE_BPS=${THROTTLE_BPS:-0}
THROTTLE_IOPS=${THROTTLE_IOPS:-0}
PROCESS_TIMEOUT=${PROCESS_TIMEOUT:-1800}
OUT=${OUT:-bench/results/$(date -u +%Y-%m-%d)-kvbench}
CACHE=${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shale-bench/rocksdb-11.8.1}

for e in $ENGINES; do
  case $e in hash | lsm | rocksdb) ;; *) echo "unknown engine $e (hash, lsm, rocksdb)" >&2; exit 2 ;; esac
done
if [ -e "$OUT/runs.csv" ]; then
  echo "$OUT already holds a run (runs.csv); choose another OUT or move it away" >&2
  exit 2
fi
if [ $is_root = 0 ]; then
  echo "bench/kvbench.sh: not root: no loop devices; the volumes are directories in $SCRATCH and device bytes come from each engine's own counters" >&2
fi

# ---- Tools. The yardstick whenever ENGINES names it: built once by
# bench/compare/build_rocksdb.sh (an hour; then cached in CACHE), as bench/compare.sh does, so
# a run never leaves RocksDB out silently. ENGINES="hash lsm" runs the shale engines alone.
cargo build --release -q -p shale-cli
SHALE=${CARGO_TARGET_DIR:-target}/release/shale
HARNESS=${CARGO_TARGET_DIR:-bench/compare/target}/release/shale-compare

if [[ " $ENGINES " == *" rocksdb "* ]]; then
  if ! built=$(CACHE=$CACHE bench/compare/build_rocksdb.sh | tail -2); then
    echo "bench/kvbench.sh: the RocksDB build failed (bench/compare/build_rocksdb.sh); ENGINES=\"hash lsm\" runs without it" >&2
    exit 1
  fi
  export ROCKSDB_LIB_DIR=$(echo "$built" | tail -1) ROCKSDB_STATIC=1
  ln -sfn "$ROCKSDB_LIB_DIR" bench/compare/rocksdb-lib
  # libclang, for the rocksdb crate's bindgen (as bench/compare.sh installs it).
  if ! dpkg -s libclang-dev >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -q >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q libclang-dev >&2
  fi
  cargo build --release -q --manifest-path bench/compare/Cargo.toml
fi
summarise() {
  if [ -x "$HARNESS" ]; then
    { cat "$OUT/setup.md"; echo; "$HARNESS" kvbench-summary --csv "$OUT/runs.csv" --chart "$OUT/kvbench.svg"
      echo; echo '![ratios to RocksDB](kvbench.svg)'; } >"$OUT/summary.md"
  else
    { cat "$OUT/setup.md"; echo; echo "(no shale-compare build: the tables need it; runs.csv holds every figure)"; } >"$OUT/summary.md"
  fi
}

if [ "$MEMORY_LIMIT" != 0 ] && ! [ -w "$MEMCG/cgroup.procs" ]; then
  echo "bench/kvbench.sh: MEMORY_LIMIT needs a writable cgroup v1 memory controller at $MEMCG (root)" >&2
  exit 1
fi
mkdir -p "$OUT/raw" "$SCRATCH"
work=$(mktemp -d "$SCRATCH/shale-kvbench.XXXXXX")
work=$(readlink -f "$work")
bg_pid=
memcg=
cleanup() {
  local rc=$?
  # Every step runs, whatever fails before it.
  set +e
  if [ -n "$bg_pid" ]; then
    kill "$bg_pid" 2>/dev/null
    wait "$bg_pid" 2>/dev/null
  fi
  if [ -n "$memcg" ]; then
    while read -r p; do kill -9 "$p" 2>/dev/null; done <"$memcg/cgroup.procs"
    rmdir "$memcg"
  fi
  if [ $is_root = 1 ]; then
    teardown_dir "$work"
  else
    # The lsm engine's WAL tails in /dev/shm go with their stores.
    for f in "$work"/*/volume.shale; do [ -f "$f" ] && forget_shale_store "$f"; done
    rm -rf "$work"
  fi
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ "$MEMORY_LIMIT" != 0 ]; then
  memcg=$MEMCG/shale-kvbench-$$
  mkdir "$memcg"
  echo "$MEMORY_LIMIT" >"$memcg/memory.limit_in_bytes"
fi

# ---- Volumes: per engine and instance, a loop device (root) or a directory.
# Bytes each volume may need: the hash engine's log only grows (no GC yet), and a 4 KiB value
# takes two 4 KiB pages, so every put costs up to 2 pages beyond its value; 3 fills and YCSB's
# writes (A: half of OPERATIONS, B and D: 5%), twice over for room.
writes=$((3 * NUM + OPERATIONS * 6 / 10 + 1000))
VOLUME_BYTES=${VOLUME_BYTES:-$(((writes * (KEY_SIZE + VALUE_SIZE + 8192) * 2 / 1048576 + 1024) * 1048576))}
max_volumes=1
[ "$VOLUMES_MANY" -gt 1 ] && max_volumes=$VOLUMES_MANY
declare -A path
for e in $ENGINES; do
  for ((i = 0; i < max_volumes; i++)); do
    if [ $is_root = 1 ]; then
      dev=$(loop_dev "$e-$i" "$VOLUME_BYTES")
      if [ "$THROTTLE_BPS" != 0 ] || [ "$THROTTLE_IOPS" != 0 ]; then
        throttle_device "$dev" "$THROTTLE_BPS" "$THROTTLE_IOPS"
      fi
      if [ "$e" = rocksdb ]; then
        make_ext4 "$dev" "$work/mnt-$i"
        path[$e-$i]=$work/mnt-$i/db
      else
        path[$e-$i]=$dev
      fi
    else
      path[$e-$i]=$work/$e-$i
    fi
  done
done

# Empties a volume before a process.
empty_volume() { # engine index
  local p=${path[$1-$2]}
  if [ "$1" = rocksdb ]; then
    rm -rf "$p"
    if [ $is_root = 1 ]; then fstrim "$(dirname "$p")" 2>/dev/null || true; fi
  elif [ $is_root = 1 ]; then
    forget_shale_store "$p" 2>/dev/null || true
    blkdiscard "$p" 2>/dev/null || dd if=/dev/zero of="$p" bs=8192 count=1 oflag=direct status=none
  fi
  # A directory of a shale engine is emptied by `shale kvbench` itself (volume and WAL tail).
}

{
  echo "# KVSB setup ($(date -u +%FT%TZ))"
  echo
  echo "- machine: $(nproc) CPUs ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo); disk: $(lsblk -dno NAME,SIZE "$(findmnt -no SOURCE /)" 2>/dev/null | tr -s " ")"
  echo "- shale: $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (with uncommitted changes)')"
  echo "- engines: $ENGINES"
  echo "- volumes: $([ $is_root = 1 ] && echo "loop devices (--direct-io=on) over sparse files of $VOLUME_BYTES bytes in $SCRATCH; shale on the raw devices, RocksDB on ext4; throttle ${THROTTLE_BPS} B/s, ${THROTTLE_IOPS} IOPS (0: none)" || echo "directories in $SCRATCH (not root)")"
  echo "- flags: --num $NUM --operations $OPERATIONS --key_size $KEY_SIZE --value_size $VALUE_SIZE --workloads $WORKLOADS --threads_per_instance $THREADS --pin, hash --queue_depth $QUEUE_DEPTH${DURATION:+, --duration $DURATION}; RocksDB and shale-lsm: 64 MiB memtable, 32 MiB block cache, 10 bloom bits, no compression, WAL on, $([ "${SYNC:-0}" = 1 ] && echo "every write synced (SYNC=1)" || echo "unsynced writes"); the hash engine: every store durable"
  echo "- repeats: $REPEATS, engines alternating; volumes: 1$([ "$VOLUMES_MANY" -gt 1 ] && echo " and $VOLUMES_MANY")"
  echo "- memory: $([ "$MEMORY_LIMIT" != 0 ] && echo "each process in a cgroup v1 memory group of $MEMORY_LIMIT bytes (RSS and page cache)" || echo "no limit")"
} >"$OUT/setup.md"

failed=0
counts=1
[ "$VOLUMES_MANY" -gt 1 ] && counts="1 $VOLUMES_MANY"
for n in $counts; do
  for ((r = 1; r <= REPEATS; r++)); do
    for e in $ENGINES; do
      paths=
      for ((i = 0; i < n; i++)); do
        empty_volume "$e" "$i"
        paths=${paths:+$paths,}${path[$e-$i]}
      done
      flags=(--paths "$paths" --num "$NUM" --operations "$OPERATIONS" --key_size "$KEY_SIZE"
        --value_size "$VALUE_SIZE" --workloads "$WORKLOADS" --threads_per_instance "$THREADS"
        --pin --csv "$OUT/runs.csv" --run "$r" ${DURATION:+--duration "$DURATION"})
      synced=()
      [ "${SYNC:-0}" = 1 ] && [ "$e" != hash ] && synced=(--sync)
      log=$OUT/raw/$e-$n-volumes-run$r.txt
      echo "kvbench: $e, $n volume(s), run $r" >&2
      case $e in
        rocksdb) cmd=("$HARNESS" kvbench "${flags[@]}" "${synced[@]}") ;;
        hash) cmd=("$SHALE" kvbench --engine hash --queue_depth "$QUEUE_DEPTH" "${flags[@]}") ;;
        lsm) cmd=("$SHALE" kvbench --engine lsm "${flags[@]}" "${synced[@]}") ;;
      esac
      echo "# ${cmd[*]}" >"$log"
      if [ -n "$memcg" ]; then
        # The page cache the last process left charged to the group goes first (each run
        # starts from an empty volume anyway), and the peak restarts.
        echo 0 >"$memcg/memory.force_empty" 2>/dev/null || true
        echo 0 >"$memcg/memory.max_usage_in_bytes"
        # Writing 0 to cgroup.procs moves this subshell into the group before it becomes
        # the process.
        (echo 0 >"$memcg/cgroup.procs" && exec "${cmd[@]}") >>"$log" 2>&1 &
      else
        "${cmd[@]}" >>"$log" 2>&1 &
      fi
      bg_pid=$!
      rc=0
      wait_bounded "$bg_pid" "$PROCESS_TIMEOUT" || rc=$?
      bg_pid=
      if [ -n "$memcg" ]; then
        echo "# memory cgroup: peak $(cat "$memcg/memory.max_usage_in_bytes") bytes of RSS and page cache, limit $MEMORY_LIMIT" >>"$log"
      fi
      if [ $rc -ne 0 ]; then
        echo "kvbench: $e, $n volume(s), run $r FAILED (status $rc): see $log" >&2
        echo "- FAILED: $e, $n volume(s), run $r (status $rc, $log)" >>"$OUT/setup.md"
        failed=1
      fi
      sync
      summarise
    done
  done
done
summarise
echo "results in $OUT" >&2
exit $failed
