#!/usr/bin/env bash
# Tiered storage on emulated devices (issue #15, part 4): shale and RocksDB 11.8.1 (the release
# build of bench/compare/build_rocksdb.sh) on a slow "capacity" device and a fast one, both
# seen by both engines the same way, in one run, alternating, REPEATS times:
#   rocksdb-capacity  RocksDB, everything on the capacity device
#   rocksdb-wal-fast  RocksDB, its WAL on the fast device (db_bench's --wal_dir), the rest on
#                     the capacity device
#   rocksdb-fast      RocksDB, everything on the fast device
#   shale-capacity    shale, one volume on the capacity device
#   shale-tiered      shale, a fast volume of TIER_PERCENT (10) % of the data on the fast device
#                     and a capacity volume on the capacity device (--capacity_path)
#   shale-fast        shale, one volume on the fast device
# Workloads: all-write (db_bench's fillrandom and fillsync, VALUE_SIZE = 1 KB values, THREADS
# 1 8 16 32, each bounded by --duration=DURATION for both tools), YCSB A, B, F and E (1 KB
# records; one process per phase, E on a store loaded afresh), and recovery time after a kill
# with WAL_BYTES of WAL (bench/recovery_time.sh's method). Root is needed (loop devices, mkfs,
# mount, the kernel's throttles); without it the script says so and exits 0.
#
# The devices. Both are loop devices (`losetup --direct-io=on`) over sparse files in SCRATCH,
# so both engines reach both tiers through the same block layer onto the same disk, and the
# tiers differ only in the throttle. That also gives each device its own count of sectors
# written (/sys/block/loopN/stat, field 7), from which the fast device's share of each run's
# bytes is taken. The fast device is not throttled: it is this machine's disk behind a loop.
# The capacity device is throttled by the kernel through cgroup v1's root blkio group
# (blkio.throttle.{read,write}_{bps,iops}_device: direct and buffered I/O, writeback
# included), set here and removed on exit ("MAJ:MIN 0"). Its limits, CAP_BPS and CAP_IOPS
# (reads and writes alike), default to the issue's SATA-class 500 MB/s and 50K IOPS. A
# throttle only makes a device slower if the disk beneath is faster than it: the script first
# measures this disk with fio (3 s each, O_DIRECT on a file in SCRATCH: 1 MiB sequential writes
# at depth 16, 4 KiB random reads at depth 64), and where the disk does not reach twice a SATA
# figure, that limit becomes the disk's own figure / CAP_RATIO (6: a 3 GB/s NVMe drive against
# a 500 MB/s SATA one), "the same ratios to this machine's disk". On the machine DESIGN.md
# describes (about 2.7-3 GB/s, 87-145K IOPS) the SATA figures stand. Setting both CAP_BPS and
# CAP_IOPS skips the measurement. What a throttle cannot emulate: latency. A lone sync write
# takes the disk's own time on either device; the capacity device is slower only where a
# workload asks for more bandwidth or IOPS than its limits (so fillsync on few threads barely
# tells the tiers apart). And what the loop adds: a flush of a loop device is an fsync of its
# backing file, so synced writes cost more on both tiers than on the disk itself (4 KiB
# O_DSYNC writes at depth 1: 7.6K/s on a written file of this disk, 2.2-5.4K/s through a loop
# device in trials; setup.md has this run's figures), more where the write lands in a hole of
# the sparse backing file (the host file system allocates, and the fsync commits its
# journal), and more for an engine that issues more flushes per write (RocksDB's fsync on
# ext4 also commits that ext4's journal). Both engines pay it on both tiers.
#
# Each engine gets its own devices, alike in size, loop settings and throttle: shale runs on
# raw loop devices (its volume over the whole device, no file system: what shale is for),
# RocksDB on ext4 over loop devices of its own (a device cannot be mounted and raw at once,
# and a mkfs per run would cost more than the runs). The ext4 file systems are made with lazy
# initialisation off, so no background zeroing spends the throttle during a run. Every
# process starts on emptied devices: RocksDB's directories removed and the file systems
# trimmed (the loop device punches the freed ranges out of its file), shale's devices
# discarded whole (blkdiscard), so no run reads or overwrites what an earlier one left.
# After each process the script runs `sync`, so that the bytes a buffered engine left dirty
# are written back, and counted, before the next one starts. shale's raw devices are held
# open for the whole session, since Linux drops a block device's page cache at its last
# close: RocksDB's files keep their cached pages from one process to the next (one per YCSB
# phase, the reopen after a kill), and so does shale's device.
#
# Mind the duration: RocksDB writes its WAL (unsynced in fillrandom and YCSB) through the page
# cache, and the kernel writes dirty pages back only after 30 s or past its dirty threshold
# (gigabytes on this machine), so in runs of seconds most of RocksDB's WAL is deleted, after
# its memtable's flush, before it ever reaches a device. shale's unsynced records stay in its
# WAL tail (/dev/shm) and reach the device only when a sync write or a full tail needs them
# (docs/lsm.md, "Deferred groups"; until 2026-11-26 every WAL page was written with O_DIRECT).
# The fast-share table shows it (RocksDB's fillrandom writes less than its WAL).
# Longer runs (DURATION=60 and more) measure the steady state, at the cost of time.
#
# shale-tiered's fast device holds the volume's fixed areas (header, version log, and the WAL
# area, which shale sizes from the write buffer: measured by laying out a probe volume with the
# same write buffer and reading where `shale inspect` puts its slots) plus TIER_PERCENT % of
# the data: NUM x (16 + VALUE_SIZE) for all-write (the whole key space: a duration-bounded run
# writes keys from it), YCSB_RECORDS x 1140 for YCSB, WAL_BYTES for recovery; it is resized
# for each suite. Until `shale bench` and `shale ycsb` take --capacity_path (issue #15, part
# 1), shale-tiered is skipped with a note in the summary.
#
# Output in OUT (default bench/results/<UTC date>-tiered): raw/ (every process's output, fio's; ignored by git),
# runs.csv (one row per process: engine, config, workload, threads, repeat, ops/s, P99, seconds,
# bytes written on the fast and capacity devices, fast share, status, log), setup.md (machine,
# disk, throttles, devices, flags) and summary.md (setup.md, then median tables per workload,
# the issue's targets with verdicts, the fast share), rewritten after every process so an
# interrupted run keeps what it measured. Exits 1 if a run failed (summary.md lists it).
#
# Usage: bench/tiered.sh              (root; all suites; about 40 minutes on 2 cores)
#        SUITES="write" THREADS="16" bench/tiered.sh
#        bench/tiered.sh cleanup      (after a SIGKILL, with no run under way: tear down what a
#                                      killed run left in SCRATCH: mounts, throttles, loop
#                                      devices, files)
# Environment (defaults): SCRATCH=/var/tmp REPEATS=3 SUITES="write ycsb recovery"
#   CONFIGS="rocksdb-capacity rocksdb-wal-fast rocksdb-fast shale-capacity shale-tiered shale-fast"
#   VALUE_SIZE=1024 WRITE_BUFFER=67108864 SEED=1 TIER_PERCENT=10
#   write:    WRITE_BENCHES="fillrandom fillsync" THREADS="1 8 16 32" NUM=1000000 (key space;
#             fillsync writes NUM/1000 keys, as db_bench) DURATION=8 (seconds per run)
#   ycsb:     YCSB_WORKLOADS="A B F E" YCSB_RECORDS=200000 YCSB_OPS=200000 YCSB_THREADS=2
#   recovery: WAL_BYTES=1073741824 READS=10000 RECOVERY_DROP_CACHES=0 (1: sync and drop the
#             page cache between the kill and the reopen, a cold start)
#   devices:  CAP_BPS CAP_IOPS (see above) CAP_RATIO=6 DEVICE_BYTES (each device's size,
#             sparse; default from the sizes above) VERIFY_DEVICES=1 (fio on both devices
#             before the runs, 2 s each, into setup.md)
#   OUT DB_BENCH SHALE (a shale binary to run instead of building this tree's)
# At these defaults: write 8 points x 6 placements x 3 repeats x about 11 s, YCSB and recovery
# about 6 minutes each.
set -euo pipefail
cd "$(dirname "$0")/.."

# Loop devices, throttles, teardown, fio's figures (shared with bench/adoc.sh).
. bench/lib/devices.sh

SCRATCH=${SCRATCH:-/var/tmp}

if [ "${1:-}" = cleanup ]; then
  [ "$(id -u)" -eq 0 ] || { echo "tiered.sh cleanup: needs root" >&2; exit 1; }
  for d in "$SCRATCH"/shale-tiered.*; do
    [ -d "$d" ] || continue
    echo "tearing down $d" >&2
    teardown_dir "$d"
  done
  exit 0
fi
[ $# -eq 0 ] || { echo "usage: bench/tiered.sh [cleanup] (see the header for the environment)" >&2; exit 2; }

if [ "$(id -u)" -ne 0 ]; then
  echo "bench/tiered.sh: skipped: it needs root to make loop devices and file systems, mount them and throttle them (cgroup v1 blkio); run it as root" >&2
  exit 0
fi
if [ ! -w "$BLKIO/blkio.throttle.write_bps_device" ]; then
  echo "bench/tiered.sh: skipped: no writable cgroup v1 blkio controller at $BLKIO (the capacity device's throttle needs it)" >&2
  exit 0
fi

REPEATS=${REPEATS:-3}
SUITES=${SUITES:-write ycsb recovery}
CONFIGS=${CONFIGS:-rocksdb-capacity rocksdb-wal-fast rocksdb-fast shale-capacity shale-tiered shale-fast}
VALUE_SIZE=${VALUE_SIZE:-1024}
WRITE_BUFFER=${WRITE_BUFFER:-67108864}
SEED=${SEED:-1}
TIER_PERCENT=${TIER_PERCENT:-10}
WRITE_BENCHES=${WRITE_BENCHES:-fillrandom fillsync}
THREADS=${THREADS:-1 8 16 32}
NUM=${NUM:-1000000}
DURATION=${DURATION:-8}
YCSB_WORKLOADS=${YCSB_WORKLOADS:-A B F E}
YCSB_RECORDS=${YCSB_RECORDS:-200000}
YCSB_OPS=${YCSB_OPS:-200000}
YCSB_THREADS=${YCSB_THREADS:-2}
WAL_BYTES=${WAL_BYTES:-1073741824}
READS=${READS:-10000}
RECOVERY_DROP_CACHES=${RECOVERY_DROP_CACHES:-0}
CAP_RATIO=${CAP_RATIO:-6}
VERIFY_DEVICES=${VERIFY_DEVICES:-1}
# The issue's SATA-class capacity device.
SATA_BPS=500000000
SATA_IOPS=50000
# Bytes of one YCSB record as the driver stores it (10 fields of 100 bytes with their names:
# bench/compare's record_bytes()).
YCSB_RECORD_BYTES=1140
# Both engines' block cache, 32 MiB: their default, and the ycsb suite's.
CACHE_SIZE=33554432
OUT=${OUT:-bench/results/$(date -u +%Y-%m-%d)-tiered}

for s in $SUITES; do
  case $s in write | ycsb | recovery) ;; *) echo "unknown suite $s (write, ycsb, recovery)" >&2; exit 2 ;; esac
done
for c in $CONFIGS; do
  case $c in rocksdb-capacity | rocksdb-wal-fast | rocksdb-fast | shale-capacity | shale-tiered | shale-fast) ;;
    *) echo "unknown config $c" >&2; exit 2 ;; esac
done
# Medians mix nothing: one run's rows per CSV.
if [ -e "$OUT/runs.csv" ]; then
  echo "$OUT already holds a run (runs.csv); choose another OUT or move it away" >&2
  exit 2
fi

# ---- Tools: the yardstick, shale, the harness (RocksDB's YCSB and the summary), fio, mkfs.

built=$(bench/compare/build_rocksdb.sh | tail -2)
DB_BENCH=${DB_BENCH:-$(echo "$built" | head -1)}
export ROCKSDB_LIB_DIR=${ROCKSDB_LIB_DIR:-$(echo "$built" | tail -1)} ROCKSDB_STATIC=1
missing=()
command -v fio >/dev/null || missing+=(fio)
command -v mkfs.ext4 >/dev/null || missing+=(e2fsprogs)
command -v blkdiscard >/dev/null || missing+=(util-linux)
dpkg -s libclang-dev >/dev/null 2>&1 || missing+=(libclang-dev) # the rocksdb crate's bindgen
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
fi
[ -n "${SHALE:-}" ] || cargo build --release -q -p shale-cli
cargo build --release -q --manifest-path bench/compare/Cargo.toml
SHALE=${SHALE:-${CARGO_TARGET_DIR:-target}/release/shale}
HARNESS=${CARGO_TARGET_DIR:-bench/compare/target}/release/shale-compare

# Whether shale can run tiered yet: part 1 of the issue adds --capacity_path to both tools.
tiered_bench=0 tiered_ycsb=0
"$SHALE" bench --help 2>/dev/null | grep -q -- --capacity_path && tiered_bench=1
"$SHALE" ycsb --help 2>/dev/null | grep -q -- --capacity_path && tiered_ycsb=1

mkdir -p "$OUT/raw" "$SCRATCH"
# Canonical, so that it matches the backing-file paths losetup lists at teardown.
work=$(readlink -f "$(mktemp -d "$SCRATCH/shale-tiered.XXXXXX")")
bg_pid=
holds=()

# Stops the process under way (it holds files on the devices), lets go of shale's devices,
# then tears down the devices.
cleanup() {
  local rc=$? fd
  trap - EXIT INT TERM
  if [ -n "$bg_pid" ]; then
    kill -9 "$bg_pid" 2>/dev/null || true
    wait "$bg_pid" 2>/dev/null || true
  fi
  for fd in "${holds[@]}"; do exec {fd}<&-; done
  teardown_dir "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# ---- The devices.

throttle() { # device: the capacity device's limits
  throttle_device "$1" "$CAP_BPS" "$CAP_IOPS"
}

# The bytes before a volume's slots when laid out with write buffer $1: header, version log
# and the WAL area shale derives from the write buffer. A probe store, laid out and closed.
volume_overhead() {
  local d=$work/probe off
  rm -rf "$d"
  "$SHALE" bench --db="$d" --benchmarks=fillseq --num=1 --write_buffer_size="$1" >/dev/null 2>&1
  off=$("$SHALE" inspect "$d" | awk '$1 == "slots" && $4 == "each" {print $2}')
  rm -rf "$d"
  [ -n "$off" ] || { echo "tiered.sh: could not read a probe volume's layout" >&2; return 1; }
  echo "$off"
}

recovery_wb=$((WAL_BYTES * 3 / 2))
[ "$recovery_wb" -gt 2147483648 ] && recovery_wb=2147483648
overhead_write=$(volume_overhead "$WRITE_BUFFER")
overhead_recovery=$overhead_write
case " $SUITES " in *" recovery "*) overhead_recovery=$(volume_overhead "$recovery_wb") ;; esac
write_data=$((NUM * (16 + VALUE_SIZE)))
ycsb_data=$((YCSB_RECORDS * YCSB_RECORD_BYTES))
tier_bytes() { # overhead data -> the fast volume's device: its slots (1 MiB each) hold the share
  echo $(($1 + (($2 * TIER_PERCENT / 100 + (1 << 20) - 1) >> 20 << 20)))
}
if [ -z "${DEVICE_BYTES:-}" ]; then
  # Room for the data several times over (compaction's inputs and outputs, RocksDB's obsolete
  # files until deleted), the WAL area, 2 GiB more; sparse, so only what is written is used.
  need=0
  for s in $SUITES; do
    case $s in
      write) n=$((overhead_write + 8 * write_data)) ;;
      ycsb) n=$((overhead_write + 8 * ycsb_data)) ;;
      recovery) n=$((overhead_recovery + 4 * WAL_BYTES)) ;;
    esac
    [ "$n" -gt "$need" ] && need=$n
  done
  DEVICE_BYTES=$((((need + (2 << 30)) + (1 << 30) - 1) >> 30 << 30))
fi

disk_note=
if [ -z "${CAP_BPS:-}" ] || [ -z "${CAP_IOPS:-}" ]; then
  echo "measuring the disk under $SCRATCH (fio, 6 s)" >&2
  fio_run "$OUT/raw/fio-disk-seqwrite.txt" --name=seqwrite --filename="$work/fio.dat" --rw=write \
    --bs=1M --iodepth=16 --ioengine=libaio --direct=1 --size=1G --runtime=3 --time_based
  fio_run "$OUT/raw/fio-disk-randread.txt" --name=randread --filename="$work/fio.dat" --rw=randread \
    --bs=4k --iodepth=64 --ioengine=libaio --direct=1 --size=1G --runtime=3 --time_based
  rm -f "$work/fio.dat"
  disk_bps=$(terse_write_bps "$OUT/raw/fio-disk-seqwrite.txt")
  disk_iops=$(terse_read_iops "$OUT/raw/fio-disk-randread.txt")
  disk_note="this disk (fio, O_DIRECT, 3 s each): $((disk_bps / 1000000)) MB/s of 1 MiB sequential writes at depth 16, $disk_iops random 4 KiB reads/s at depth 64"
  if [ -z "${CAP_BPS:-}" ]; then
    CAP_BPS=$SATA_BPS
    [ "$disk_bps" -lt $((2 * SATA_BPS)) ] && CAP_BPS=$((disk_bps / CAP_RATIO))
  fi
  if [ -z "${CAP_IOPS:-}" ]; then
    CAP_IOPS=$SATA_IOPS
    [ "$disk_iops" -lt $((2 * SATA_IOPS)) ] && CAP_IOPS=$((disk_iops / CAP_RATIO))
  fi
fi

echo "devices: $((DEVICE_BYTES >> 30)) GiB each (sparse), capacity throttled to $CAP_BPS B/s and $CAP_IOPS IOPS" >&2
CAP_ROCKS=$(loop_dev cap-rocksdb "$DEVICE_BYTES")
FAST_ROCKS=$(loop_dev fast-rocksdb "$DEVICE_BYTES")
CAP_SHALE=$(loop_dev cap-shale "$DEVICE_BYTES")
FAST_SHALE=$(loop_dev fast-shale "$DEVICE_BYTES")
TIER=$(loop_dev tier-shale "$(tier_bytes "$overhead_write" "$write_data")")
MNT_CAP=$work/mnt-cap
MNT_FAST=$work/mnt-fast
# File systems first, throttles after: mkfs writes its inode tables at the disk's speed.
make_ext4 "$CAP_ROCKS" "$MNT_CAP"
make_ext4 "$FAST_ROCKS" "$MNT_FAST"
throttle "$CAP_ROCKS"
throttle "$CAP_SHALE"
# The script keeps shale's raw devices open for the whole session. Linux drops a block
# device's page cache when its last opener closes it, so without this every shale process
# (one per YCSB phase, the reopen after a kill) would start with nothing cached, where
# RocksDB's files keep their pages in the page cache across processes: shale's YCSB A after
# a reopen ran at a quarter of its speed (reads of 130-170 us at P95) until the device was
# held open. A plain open claims nothing, so shale still opens the device as it likes.
for d in "$CAP_SHALE" "$FAST_SHALE" "$TIER"; do
  exec {fd}<"$d"
  holds+=("$fd")
done
FAST_DEVS=("$FAST_ROCKS" "$FAST_SHALE" "$TIER")
CAP_DEVS=("$CAP_ROCKS" "$CAP_SHALE")

resize_tier() { # bytes
  blkdiscard "$TIER"
  truncate -s "$1" "$work/tier-shale.img"
  losetup -c "$TIER"
}

verify_note=
if [ "$VERIFY_DEVICES" = 1 ]; then
  # The throttle at work: the same fio jobs on the raw capacity and fast devices; and what a
  # loop device does to a synced write (its flush becomes an fsync of the backing file),
  # beside the same job on a file of the disk itself, written whole first (a write into a
  # hole or an unwritten extent would make each sync commit the file system's journal too).
  dsync=(--name=dsync --rw=write --bs=4k --iodepth=1 --ioengine=psync --direct=1 --sync=dsync
    --size=256M --runtime=2 --time_based)
  dd if=/dev/zero of="$work/fio.dat" bs=1M count=256 oflag=direct status=none
  fio_run "$OUT/raw/fio-disk-dsync.txt" "${dsync[@]}" --filename="$work/fio.dat"
  rm -f "$work/fio.dat"
  verify_note="- O_DSYNC 4 KiB writes at depth 1 (fio, 2 s): $(terse_write_iops "$OUT/raw/fio-disk-dsync.txt")/s on a file of the disk"
  for d in cap:"$CAP_SHALE" fast:"$FAST_SHALE"; do
    name=${d%%:*} dev=${d#*:}
    fio_run "$OUT/raw/fio-$name-seqwrite.txt" --name=seqwrite --filename="$dev" --rw=write --bs=1M \
      --iodepth=16 --ioengine=libaio --direct=1 --size=1G --runtime=2 --time_based
    fio_run "$OUT/raw/fio-$name-randwrite.txt" --name=randwrite --filename="$dev" --rw=randwrite \
      --bs=4k --iodepth=64 --ioengine=libaio --direct=1 --size=1G --runtime=2 --time_based
    fio_run "$OUT/raw/fio-$name-dsync.txt" "${dsync[@]}" --filename="$dev"
    verify_note="$verify_note
- $name device through the loop (fio, 2 s each): $(($(terse_write_bps "$OUT/raw/fio-$name-seqwrite.txt") / 1000000)) MB/s of 1 MiB sequential writes at depth 16, $(terse_write_iops "$OUT/raw/fio-$name-randwrite.txt") random 4 KiB writes/s at depth 64, $(terse_write_iops "$OUT/raw/fio-$name-dsync.txt") O_DSYNC 4 KiB writes/s at depth 1"
    blkdiscard "$dev"
  done
fi

# Empties every device: RocksDB's directories go and the file systems are trimmed; shale's
# devices are discarded whole (shale refuses a device holding data rather than erase it).
reset_devices() {
  rm -rf "$MNT_CAP/db" "$MNT_FAST/db" "$MNT_FAST/wal"
  fstrim "$MNT_CAP"
  fstrim "$MNT_FAST"
  local d
  for d in "$CAP_SHALE" "$FAST_SHALE" "$TIER"; do
    forget_shale_store "$d"
    blkdiscard "$d"
  done
  # ext4 commits the removal to its journal within seconds: now, not in the next run's count.
  sync
}

# Bytes written so far on the fast devices and on the capacity devices: "fast capacity".
io_bytes() {
  local f=0 c=0 d
  for d in "${FAST_DEVS[@]}"; do f=$((f + $(awk '{print $7}' "/sys/block/${d#/dev/}/stat"))); done
  for d in "${CAP_DEVS[@]}"; do c=$((c + $(awk '{print $7}' "/sys/block/${d#/dev/}/stat"))); done
  echo "$((f * 512)) $((c * 512))"
}

# Where placement $1 puts things: sets `engine` (rocksdb or shale), `db` (RocksDB's store
# directory or shale's volume device), `wal` (RocksDB's WAL directory, if apart), `cap`
# (shale's capacity volume, if tiered), and whether suite $2 can run it (`runnable`, else
# `why`).
place() { # config suite
  runnable=1 why=
  case $1 in
    rocksdb-*) engine=rocksdb ;;
    shale-*) engine=shale ;;
  esac
  case $1 in
    rocksdb-capacity) db=$MNT_CAP/db wal='' cap='' ;;
    rocksdb-wal-fast) db=$MNT_CAP/db wal=$MNT_FAST/wal cap='' ;;
    rocksdb-fast) db=$MNT_FAST/db wal='' cap='' ;;
    shale-capacity) db=$CAP_SHALE wal='' cap='' ;;
    shale-tiered) db=$TIER wal='' cap=$CAP_SHALE ;;
    shale-fast) db=$FAST_SHALE wal='' cap='' ;;
  esac
  if [ "$1" = shale-tiered ]; then
    if [ "$2" = ycsb ] && [ "$tiered_ycsb" = 0 ]; then
      runnable=0 why="shale ycsb has no --capacity_path yet"
    elif [ "$2" != ycsb ] && [ "$tiered_bench" = 0 ]; then
      runnable=0 why="shale bench has no --capacity_path yet"
    fi
  fi
}

# db_bench's flags for placement (after `place`): the store, and RocksDB's WAL directory or
# shale's capacity volume.
placement_flags() {
  flags=(--db="$db")
  [ -n "$wal" ] && flags+=(--wal_dir="$wal")
  [ -n "$cap" ] && flags+=(--capacity_path="$cap")
  return 0
}

CSV=$OUT/runs.csv
echo "engine,config,workload,threads,repeat,ops_per_sec,p99_us,seconds,fast_bytes,capacity_bytes,fast_share,status,log,tail_us" >"$CSV"
failures=0

record() { # config workload threads repeat ops p99 seconds before after status log
  local fast=$(($(echo "$9" | cut -d' ' -f1) - $(echo "$8" | cut -d' ' -f1)))
  local tail_us
  tail_us=$(tails_of "${11}")
  local capb=$(($(echo "$9" | cut -d' ' -f2) - $(echo "$8" | cut -d' ' -f2)))
  local share
  share=$(awk -v f="$fast" -v c="$capb" 'BEGIN {if (f + c > 0) printf "%.4f", f / (f + c)}')
  echo "$engine,$1,$2,$3,$4,$5,$6,$7,$fast,$capb,$share,${10},${11#"$OUT"/},$tail_us" >>"$CSV"
  [ "${10}" = ok ] || failures=$((failures + 1))
  echo "  $1 $2 t$3 r$4: ${5:+$5 ops/s}${7:+$7 s} fast share ${share:-none} (${10})" >&2
  summarize
}

summarize() {
  { cat "$OUT/setup.md"; echo; "$HARNESS" tiered-summary --csv "$CSV"; } >"$OUT/summary.md.tmp" \
    && mv "$OUT/summary.md.tmp" "$OUT/summary.md"
}

dbbench_ops() { # log benchmark
  awk -v b="$2" '$1 == b {for (i = 1; i < NF; i++) if ($(i + 1) == "ops/sec") {print $i; exit}}' "$1"
}
dbbench_p99() { # log benchmark: the P99 of the percentiles after the benchmark's result line
  awk -v b="$2" '$1 == b {seen = 1} seen && $1 == "Percentiles:" {for (i = 1; i < NF; i++) if ($i == "P99:") {print $(i + 1); exit}}' "$1"
}
tails_of() { # log: OP:p50/p99/p99.9/max (microseconds) for each operation type the log's tail
  # lines or db_bench --histogram blocks report (bench/lib/tails.py), space-separated
  [ -f "$1" ] || return 0
  python3 bench/lib/tails.py --csv "$1" |
    awk -F, '{printf "%s%s:%s/%s/%s/%s", sep, $2, $3, $4, $5, $6; sep = " "}'
}
ycsb_ops() { awk -F', ' '$1 == "[OVERALL]" && $2 == "Throughput(ops/sec)" {printf "%.0f", $3}' "$1"; }
ycsb_p99() { # log: OP:us for each operation of the phase
  awk -F', ' '$2 == "99thPercentileLatency(us)" && $1 !~ /FAILED/ {gsub(/[][]/, "", $1); printf "%s%s:%s", sep, $1, $3; sep = " "}' "$1"
}

# ---- The suites.

write_run() { # config benchmark threads repeat
  local log=$OUT/raw/$2-t$3-$1-r$4.txt status=ok before after ops p99
  reset_devices
  placement_flags
  local common=(--benchmarks="$2" --num="$NUM" --duration="$DURATION" --threads="$3" --key_size=16
    --value_size="$VALUE_SIZE" --compression_type=none --bloom_bits=10
    --level_compaction_dynamic_level_bytes=true --write_buffer_size="$WRITE_BUFFER"
    --cache_size="$CACHE_SIZE" --seed="$SEED" --histogram=1 --statistics=1 "${flags[@]}")
  before=$(io_bytes)
  if [ "$engine" = rocksdb ]; then
    run_child "$log" "$DB_BENCH" "${common[@]}" || status="failed (exit $?)"
  else
    run_child "$log" "$SHALE" bench "${common[@]}" || status="failed (exit $?)"
  fi
  sync
  after=$(io_bytes)
  ops=$(dbbench_ops "$log" "$2")
  p99=$(dbbench_p99 "$log" "$2")
  [ "$status" = ok ] && [ -z "$ops" ] && status="failed (no result line)"
  record "$1" "$2" "$3" "$4" "$ops" "$p99" "" "$before" "$after" "$status" "$log"
}

ycsb_phase() { # config repeat phase(load|run) workload label
  local log=$OUT/raw/ycsb-$5-$1-r$2.txt status=ok before after ops
  local common=(--workload "$4" --phase "$3" --records "$YCSB_RECORDS" --operations "$YCSB_OPS"
    --threads "$YCSB_THREADS" --seed "$SEED")
  before=$(io_bytes)
  if [ "$engine" = rocksdb ]; then
    run_child "$log" "$HARNESS" tiered-ycsb "${common[@]}" --db "$db" ${wal:+--wal-dir "$wal"} \
      --cache-size "$CACHE_SIZE" --write-buffer-size "$WRITE_BUFFER" || status="failed (exit $?)"
  else
    local existing=()
    [ "$3" = run ] && existing=(--use_existing_db)
    run_child "$log" "$SHALE" ycsb "${common[@]}" --db "$db" ${cap:+--capacity_path "$cap"} \
      "${existing[@]}" --cache_size "$CACHE_SIZE" --write_buffer_size "$WRITE_BUFFER" \
      --compression_type none --bloom_bits 10 || status="failed (exit $?)"
  fi
  sync
  after=$(io_bytes)
  ops=$(ycsb_ops "$log")
  [ "$status" = ok ] && [ -z "$ops" ] && status="failed (no report)"
  record "$1" "ycsb-$5" "$YCSB_THREADS" "$2" "$ops" "$(ycsb_p99 "$log")" "" "$before" "$after" "$status" "$log"
  [ "$status" = ok ]
}

# Load, the workloads in order on that store, E on a store loaded afresh (YCSB's recommended
# order, as the harness's ycsb suite). A failed phase ends this placement's sequence.
ycsb_run() { # config repeat
  local w first=1 lower first_w
  reset_devices
  first_w=${YCSB_WORKLOADS%% *}
  ycsb_phase "$1" "$2" load "${first_w,,}" load || return 0
  for w in $YCSB_WORKLOADS; do
    lower=${w,,}
    if [ "$lower" = e ] && [ $first = 0 ]; then
      reset_devices
      ycsb_phase "$1" "$2" load e reload || return 0
    fi
    first=0
    ycsb_phase "$1" "$2" run "$lower" "${w^^}" || return 0
  done
}

# bench/recovery_time.sh's method on each placement: fillrandom of WAL_BYTES of entries with a
# write buffer that holds them all (nothing flushed), SIGKILL at its result line, then a timed
# reopen that replays the WAL and reads READS random keys (at least 60% must be found).
recovery_run() { # config repeat
  local fill_log=$OUT/raw/recovery-fill-$1-r$2.txt log=$OUT/raw/recovery-$1-r$2.txt
  local status=ok before after start end found secs
  local num=$((WAL_BYTES / (16 + VALUE_SIZE)))
  local tool=("$DB_BENCH")
  [ "$engine" = shale ] && tool=("$SHALE" bench)
  placement_flags
  local common=(--num="$num" --value_size="$VALUE_SIZE" --write_buffer_size="$recovery_wb"
    --compression_type=none --threads=1 --seed="$SEED" "${flags[@]}")
  reset_devices
  before=$(io_bytes)
  "${tool[@]}" "${common[@]}" --benchmarks=fillrandom,readrandom --reads=1000000000 >"$fill_log" 2>&1 &
  bg_pid=$!
  until grep -q '^fillrandom' "$fill_log" 2>/dev/null; do
    if ! kill -0 "$bg_pid" 2>/dev/null; then status="failed (the fill ended before the kill)"; break; fi
    sleep 0.05
  done
  kill -9 "$bg_pid" 2>/dev/null || true
  wait "$bg_pid" 2>/dev/null || true
  bg_pid=
  sync
  after=$(io_bytes)
  record "$1" recovery-fill 1 "$2" "$(dbbench_ops "$fill_log" fillrandom)" "$(dbbench_p99 "$fill_log" fillrandom)" "" \
    "$before" "$after" "$status" "$fill_log"
  [ "$status" = ok ] || return 0
  if [ "$RECOVERY_DROP_CACHES" = 1 ]; then
    echo 3 >/proc/sys/vm/drop_caches
  fi
  before=$(io_bytes)
  start=$(date +%s.%N)
  run_child "$log" "${tool[@]}" "${common[@]}" --use_existing_db=1 --benchmarks=readrandom \
    --reads="$READS" || status="failed (exit $?)"
  end=$(date +%s.%N)
  sync
  after=$(io_bytes)
  secs=$(awk -v s="$start" -v e="$end" 'BEGIN {printf "%.3f", e - s}')
  found=$(awk '/^readrandom/ {for (i = 1; i < NF; i++) if ($(i + 1) == "of") {print $i; exit}}' "$log" | tr -d '(')
  # fillrandom draws its keys with repeats: about 1 - 1/e (63%) of the key space is written.
  if [ "$status" = ok ] && { [ -z "$found" ] || [ $((found * 100)) -lt $((READS * 60)) ]; }; then
    status="failed (${found:-no} of $READS keys found)"
  fi
  record "$1" recovery 1 "$2" "" "" "$secs" "$before" "$after" "$status" "$log"
}

# ---- setup.md: what ran on what.

{
  echo "# Tiered storage on emulated devices (bench/tiered.sh)"
  echo
  echo "- $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) CPUs ($(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)), $(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo) RAM, Linux $(uname -r)."
  echo "- yardstick: $("$DB_BENCH" --version 2>&1 | head -1) (release build, $DB_BENCH; YCSB through the rocksdb crate linked to the same build); shale $(git describe --always --dirty)."
  echo "- Capacity device: throttled to $CAP_BPS bytes/s and $CAP_IOPS IOPS, reads and writes alike (cgroup v1 root blkio group). Fast device: unthrottled. Both loop devices (--direct-io=on) over sparse files of $((DEVICE_BYTES >> 20)) MiB in $SCRATCH; RocksDB on ext4 over its own pair, shale on raw ones; shale-tiered's fast volume on a device of its own (see below)."
  [ -n "$disk_note" ] && echo "- Throttle chosen from $disk_note: the SATA figures (500 MB/s, 50K IOPS) where the disk reaches twice them, else the disk's / $CAP_RATIO."
  [ -n "$verify_note" ] && echo "$verify_note" | sed '/^$/d'
  echo "- Repeats: $REPEATS, alternating placements within each point: $CONFIGS."
  case " $SUITES " in *" write "*)
    echo "- all-write: $WRITE_BENCHES on threads $THREADS, --duration=$DURATION, key space --num=$NUM (fillsync: NUM/1000 keys), $VALUE_SIZE-byte values, 16-byte keys, --write_buffer_size=$WRITE_BUFFER, --cache_size=$CACHE_SIZE, no compression, bloom 10 bits, dynamic level sizing, --seed=$SEED, --histogram --statistics; shale-tiered's fast device $(($(tier_bytes "$overhead_write" "$write_data") >> 20)) MiB ($((overhead_write >> 20)) MiB of header, version log and WAL area + $TIER_PERCENT% of $((write_data >> 20)) MiB)." ;;
  esac
  case " $SUITES " in *" ycsb "*)
    echo "- YCSB: load, $YCSB_WORKLOADS (E on a fresh load), $YCSB_RECORDS records of 10 x 100-byte fields, $YCSB_OPS operations, $YCSB_THREADS threads, seed $SEED, one process per phase (RocksDB: shale-compare tiered-ycsb; shale: shale ycsb), $((CACHE_SIZE >> 20)) MiB block cache, $((WRITE_BUFFER >> 20)) MiB memtable, writes not synced; shale-tiered's fast device $(($(tier_bytes "$overhead_write" "$ycsb_data") >> 20)) MiB." ;;
  esac
  case " $SUITES " in *" recovery "*)
    echo "- Recovery: fillrandom of $((WAL_BYTES / (16 + VALUE_SIZE))) entries ($((WAL_BYTES >> 20)) MiB of WAL) with --write_buffer_size=$recovery_wb, SIGKILL at its result line, sync$([ "$RECOVERY_DROP_CACHES" = 1 ] && echo ", page cache dropped"), then the timed reopen with $READS random reads; shale-tiered's fast device $(($(tier_bytes "$overhead_recovery" "$WAL_BYTES") >> 20)) MiB." ;;
  esac
  if case " $CONFIGS " in *" shale-tiered "*) true ;; *) false ;; esac; then
    [ "$tiered_bench" = 0 ] && echo "- **shale-tiered skipped for all-write and recovery: \`shale bench --help\` names no --capacity_path yet (issue #15, part 1).**"
    [ "$tiered_ycsb" = 0 ] && echo "- **shale-tiered skipped for YCSB: \`shale ycsb --help\` names no --capacity_path yet (issue #15, part 1).**"
  fi
  echo "- Reproduce: \`REPEATS=$REPEATS SUITES=\"$SUITES\" NUM=$NUM DURATION=$DURATION THREADS=\"$THREADS\" YCSB_RECORDS=$YCSB_RECORDS YCSB_OPS=$YCSB_OPS WAL_BYTES=$WAL_BYTES CAP_BPS=$CAP_BPS CAP_IOPS=$CAP_IOPS bench/tiered.sh\`"
  echo
  echo '```'
  losetup -l | awk -v w="$work/" 'NR == 1 || index($0, w)'
  echo '```'
} >"$OUT/setup.md"
summarize

# ---- The runs: for each repeat, each suite's points, each placement in turn.

for r in $(seq 1 "$REPEATS"); do
  for s in $SUITES; do
    case $s in
      write) resize_tier "$(tier_bytes "$overhead_write" "$write_data")" ;;
      ycsb) resize_tier "$(tier_bytes "$overhead_write" "$ycsb_data")" ;;
      recovery) resize_tier "$(tier_bytes "$overhead_recovery" "$WAL_BYTES")" ;;
    esac
    case $s in
      write)
        for b in $WRITE_BENCHES; do
          for t in $THREADS; do
            echo "repeat $r: $b, $t threads" >&2
            for c in $CONFIGS; do
              place "$c" write
              if [ "$runnable" = 1 ]; then write_run "$c" "$b" "$t" "$r"; else echo "  $c: skipped: $why" >&2; fi
            done
          done
        done ;;
      ycsb)
        echo "repeat $r: YCSB" >&2
        for c in $CONFIGS; do
          place "$c" ycsb
          if [ "$runnable" = 1 ]; then ycsb_run "$c" "$r"; else echo "  $c: skipped: $why" >&2; fi
        done ;;
      recovery)
        echo "repeat $r: recovery" >&2
        for c in $CONFIGS; do
          place "$c" recovery
          if [ "$runnable" = 1 ]; then recovery_run "$c" "$r"; else echo "  $c: skipped: $why" >&2; fi
        done ;;
    esac
  done
done

echo "results in $OUT (summary.md, runs.csv, raw/)" >&2
[ "$failures" -eq 0 ] || { echo "$failures runs failed; summary.md lists them" >&2; exit 1; }
