#!/usr/bin/env bash
# ADOC's evaluation (issue #10, part 4): shale with and without its tuner against RocksDB 11.8.1
# (the release build of bench/compare/build_rocksdb.sh) on four emulated devices, in one run,
# alternating, REPEATS times. Configurations (CONFIGS, in the order each point runs them):
#   rocksdb-default    RocksDB's defaults: 2 background jobs, 64 MiB write buffer
#   rocksdb-ratelimit  the same with its auto-tuned rate limiter at the device's bandwidth
#                      (--rate_limiter_bytes_per_sec=<device> --rate_limiter_auto_tuned=true)
#   rocksdb-large      a large fixed setting like SILK-O's (--max_background_jobs=8
#                      --write_buffer_size=536870912)
#   shale-off          shale at its defaults with the tuner off (--tuner=off)
#   shale-adoc-t       ADOC-T, the tuner turns threads only (--tuner=adoc-t)
#   shale-adoc-b       ADOC-B, the tuner turns the batch (memtable size) only (--tuner=adoc-b)
#   shale-adoc         ADOC, both (--tuner=adoc)
# Workloads: fillrandom with 16-byte keys and 1000-byte values for DURATION seconds (300: the
# issue asks for at least 5 minutes, long enough for the LSM to reach several levels and a
# steady state) on every device of DEVICES; YCSB load, then the workloads of YCSB_WORKLOADS on
# that store (1 KB records: 10 fields of 100 bytes) on the devices of YCSB_DEVICES. Root is
# needed (loop devices, mkfs, mount, the kernel's throttles, memory cgroups); without it the
# script says so and exits 0.
#
# The devices: ADOC's paper measures a hard disk (210 MB/s), a SATA SSD (490), persistent
# memory (2300) and an NVMe SSD (2700). This machine's disk does about 2.1 GB/s of sequential
# O_DIRECT writes, below the NVMe figure, so all four are scaled by one factor, SCALE (0.75:
# 158, 368, 1725 and 2025 MB/s), which keeps them in the paper's proportions and puts the
# fastest within the disk. The script measures the disk first (fio, 3 s of 1 MiB O_DIRECT
# writes at depth 16 in SCRATCH) and warns, in setup.md too, where the scaled NVMe figure is
# above the measurement (the factor stays, so that sessions compare; set SCALE to choose).
# Each device is a throttle on two loop devices (`losetup --direct-io=on`) over sparse files in
# SCRATCH: RocksDB's, with ext4 on it (lazy initialisation off), and shale's, raw (its volume
# over the whole device). Both get the same limit, reads and writes alike, through cgroup v1's
# root blkio group (bench/lib/devices.sh; direct and buffered I/O, writeback included), set
# anew for each device in turn and removed on exit. Only bandwidth is emulated: no IOPS limit
# (the paper characterises its devices by bandwidth), and no device's latency (a hard disk's
# seeks cost nothing here). Every process starts on emptied devices (RocksDB's directory removed
# and the file system trimmed; shale's device discarded whole); after each one `sync` writes
# back what a buffered engine left dirty, so the kernel's count of bytes written to the device
# (/sys/block/loopN/stat) is the process's own.
#
# What each process reports (bench/compare's `shale-compare adoc-record`, one row of runs.csv
# each): throughput; stall time by kind; p50, p99, p99.9 and max write latency as the client
# sees it, and a YCSB phase's read latency the same way (`--histogram`: db_bench's own block
# for RocksDB; YCSB's report and its tail lines, crates/ycsb/src/latency.rs); write
# amplification by the engines' own counters (`--statistics`) and by the kernel's count; peak memory, RSS and page cache, of a cgroup v1 memory group made for the
# process (as bench/compare's cgroup.rs does), and peak RSS (GNU time); where the bytes went,
# level by level: shale's fill ends with its `stats` benchmark (raw/*.stdout), RocksDB's
# compaction stats are in its LOG. Per second (ADOC's
# timelines): shale writes its own (`shale bench --timeline FILE.csv`: ops, p99 write latency,
# threads, batch, memtables, L0 files, pending compaction bytes, stalls by kind, the tuner's
# answer); RocksDB's comes from its progress lines (`--stats_interval_seconds=1`) and the stats
# it dumps into its info LOG every second (`--stats_dump_period_sec=1`: stall micros, stall
# counts by kind, L0 files, pending compaction bytes). RocksDB counts stall time only as a
# total, so its split by kind is an estimate (see bench/compare/src/adoc_series.rs). The LOG is
# kept filtered to those lines and gzipped. `shale ycsb --statistics` prints the store's
# stall counters after its report, which give shale's YCSB stall time (a shale binary whose
# `ycsb --help` names no --statistics leaves it unknown, its stall targets n/a).
#
# Mind RocksDB's page cache: its defaults write through the page cache, and on this 24 GiB
# machine the kernel lets gigabytes of dirty pages wait before it throttles the writer, so a
# slow device binds RocksDB only after its dirty pages reach the kernel's limit: seconds into a
# run, which is one reason for the long runs. ROCKSDB_DIRECT=1 adds
# --use_direct_io_for_flush_and_compaction=true to every RocksDB configuration (shale writes
# SSTs and its WAL with O_DIRECT either way). The page cache RocksDB fills counts in its peak
# memory, as in the dbbench suite.
#
# Output in OUT (default bench/results/<UTC date>-adoc): raw/ (ignored by git; each process's stdout, stderr,
# GNU time's figure, timeline CSV, RocksDB's filtered LOG), runs.csv, charts/ (one SVG per
# fillrandom run and one per device with its runs side by side on one scale; ignored by git:
# `git add -f` the ones BENCHMARKS.md shows), setup.md and
# summary.md (setup.md, then per-device tables, the YCSB tables and the issue's targets with
# met/MISSED verdicts), rewritten after every process so an interrupted run keeps what it
# measured. Exits 1 if a process failed (summary.md lists it).
#
# Usage: bench/adoc.sh              (root; everything; about three hours: it prints its estimate)
#        DURATION=5 DEVICES=sata YCSB_RECORDS=20000 YCSB_OPS=20000 bench/adoc.sh   (a smoke test)
#        PLAN_ONLY=1 bench/adoc.sh  (print the plan and the estimate, run nothing; no root needed)
#        bench/adoc.sh cleanup      (after a SIGKILL, with no run under way: tear down what a
#                                    killed run left in SCRATCH: processes in its memory groups,
#                                    mounts, throttles, loop devices, files)
# Environment (defaults): SCRATCH=/var/tmp REPEATS=1 SUITES="fillrandom ycsb" SCALE (0.75, see
#   above) CONFIGS (the seven above) SEED=1 WRITE_BUFFER=67108864 CACHE_SIZE=33554432
#   LARGE_JOBS=8 LARGE_WRITE_BUFFER=536870912 ROCKSDB_DIRECT=0 TUNER_WINDOW_MS (shale's
#   --tuner_window_ms; its default when unset) SHALE_CPU_PRIORITY (shale's
#   --background_cpu_priority for every shale configuration: normal, low or idle; the engine's
#   default, normal, when unset)
#   fillrandom: DEVICES="hdd sata pm nvme" DURATION=300 NUM=10000000 (key space: 10 GB of
#               entries, bounding the store) KEY_SIZE=16 VALUE_SIZE=1000
#   ycsb:       YCSB_DEVICES="sata nvme" YCSB_WORKLOADS="A B C F D" (YCSB's recommended order:
#               D's inserts last) YCSB_RECORDS=500000 YCSB_OPS=500000 YCSB_THREADS=2
#               YCSB_ASSUMED_OPS=40000 (ops/s the estimate assumes)
#   DEVICE_BYTES (each loop device's size, sparse; from NUM) OUT DB_BENCH SHALE (a shale binary
#   to run instead of building this tree's) PLAN_ONLY=0
# At these defaults: fillrandom 4 devices x 7 configurations x (300 s + about 30 s of sync and
# reset) = 2.6 h; YCSB 2 devices x 7 configurations x 6 phases = about 20 minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

# Loop devices, throttles, teardown, fio's figures (shared with bench/tiered.sh).
. bench/lib/devices.sh

SCRATCH=${SCRATCH:-/var/tmp}
MEMCG=/sys/fs/cgroup/memory

# Kills process $1 and its descendants, children first (GNU time does not pass a signal on to
# the engine it runs).
kill_tree() {
  local p
  for p in $(ps -o pid= --ppid "$1" 2>/dev/null); do kill_tree "$p"; done
  kill -9 "$1" 2>/dev/null || true
}

# Removes memory group $1 after killing what is left in it; its page cache is emptied first
# (a group with charged pages cannot be removed).
remove_memcg() {
  local p
  [ -d "$1" ] || return 0
  while read -r p; do kill -9 "$p" 2>/dev/null || true; done <"$1/cgroup.procs" 2>/dev/null || true
  echo 0 >"$1/memory.force_empty" 2>/dev/null || true
  rmdir "$1" 2>/dev/null || { sleep 1; rmdir "$1"; } || echo "adoc.sh: could not remove $1" >&2
}

if [ "${1:-}" = cleanup ]; then
  [ "$(id -u)" -eq 0 ] || { echo "adoc.sh cleanup: needs root" >&2; exit 1; }
  for g in "$MEMCG"/shale-adoc-*; do
    [ -d "$g" ] || continue
    echo "removing $g" >&2
    remove_memcg "$g"
  done
  for d in "$SCRATCH"/shale-adoc.*; do
    [ -d "$d" ] || continue
    echo "tearing down $d" >&2
    teardown_dir "$d"
  done
  exit 0
fi
[ $# -eq 0 ] || { echo "usage: bench/adoc.sh [cleanup] (see the header for the environment)" >&2; exit 2; }

REPEATS=${REPEATS:-1}
SUITES=${SUITES:-fillrandom ycsb}
CONFIGS=${CONFIGS:-rocksdb-default shale-off rocksdb-ratelimit shale-adoc rocksdb-large shale-adoc-t shale-adoc-b}
SEED=${SEED:-1}
WRITE_BUFFER=${WRITE_BUFFER:-67108864}
CACHE_SIZE=${CACHE_SIZE:-33554432}
LARGE_JOBS=${LARGE_JOBS:-8}
LARGE_WRITE_BUFFER=${LARGE_WRITE_BUFFER:-536870912}
ROCKSDB_DIRECT=${ROCKSDB_DIRECT:-0}
TUNER_WINDOW_MS=${TUNER_WINDOW_MS:-}
SHALE_CPU_PRIORITY=${SHALE_CPU_PRIORITY:-}
DEVICES=${DEVICES:-hdd sata pm nvme}
DURATION=${DURATION:-300}
NUM=${NUM:-10000000}
KEY_SIZE=${KEY_SIZE:-16}
VALUE_SIZE=${VALUE_SIZE:-1000}
YCSB_DEVICES=${YCSB_DEVICES:-sata nvme}
YCSB_WORKLOADS=${YCSB_WORKLOADS:-A B C F D}
YCSB_RECORDS=${YCSB_RECORDS:-500000}
YCSB_OPS=${YCSB_OPS:-500000}
YCSB_THREADS=${YCSB_THREADS:-2}
YCSB_ASSUMED_OPS=${YCSB_ASSUMED_OPS:-40000}
PLAN_ONLY=${PLAN_ONLY:-0}
OUT=${OUT:-bench/results/$(date -u +%Y-%m-%d)-adoc}
# Seconds a fillrandom process costs beyond its duration: the open, the sync of what RocksDB
# left dirty at a slow device's speed, the reset of the devices. For the estimate only.
FILL_OVERHEAD=30
# Seconds each YCSB process costs beyond its phase (start, open, sync).
YCSB_OVERHEAD=4

# The paper's devices, MB/s (10^6 bytes).
paper_mbps() {
  case $1 in
    hdd) echo 210 ;;
    sata) echo 490 ;;
    pm) echo 2300 ;;
    nvme) echo 2700 ;;
    *) return 1 ;;
  esac
}
for d in $DEVICES $YCSB_DEVICES; do
  paper_mbps "$d" >/dev/null || { echo "unknown device $d (hdd, sata, pm, nvme)" >&2; exit 2; }
done
for s in $SUITES; do
  case $s in fillrandom | ycsb) ;; *) echo "unknown suite $s (fillrandom, ycsb)" >&2; exit 2 ;; esac
done
for c in $CONFIGS; do
  case $c in rocksdb-default | rocksdb-ratelimit | rocksdb-large | shale-off | shale-adoc-t | shale-adoc-b | shale-adoc) ;;
    *) echo "unknown config $c" >&2; exit 2 ;; esac
done
suite_on() { case " $SUITES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
words() { wc -w <<<"$1"; }

# ---- The plan and its estimate, before anything is built or touched.

n_configs=$(words "$CONFIGS")
fill_runs=0 fill_s=0 ycsb_procs=0 ycsb_s=0
if suite_on fillrandom; then
  fill_runs=$(($(words "$DEVICES") * n_configs * REPEATS))
  fill_s=$((fill_runs * (DURATION + FILL_OVERHEAD)))
fi
if suite_on ycsb; then
  phases=$((1 + $(words "$YCSB_WORKLOADS")))
  ycsb_procs=$(($(words "$YCSB_DEVICES") * n_configs * REPEATS * phases))
  per_phase=$(((YCSB_RECORDS > YCSB_OPS ? YCSB_RECORDS : YCSB_OPS) / YCSB_ASSUMED_OPS + YCSB_OVERHEAD))
  ycsb_s=$((ycsb_procs * per_phase))
fi
hm() { printf '%dh%02dm' $(($1 / 3600)) $((($1 % 3600) / 60)); }
estimate="fillrandom: $fill_runs processes x ($DURATION s + about $FILL_OVERHEAD s) = $(hm "$fill_s"); YCSB: $ycsb_procs processes, about $(hm "$ycsb_s") at an assumed $YCSB_ASSUMED_OPS ops/s; in all about $(hm $((fill_s + ycsb_s))) plus setup"
echo "bench/adoc.sh: $estimate" >&2
if [ "$PLAN_ONLY" = 1 ]; then
  echo "plan: devices (fillrandom) $DEVICES; (YCSB) $YCSB_DEVICES; configurations $CONFIGS; repeats $REPEATS; suites $SUITES" >&2
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "bench/adoc.sh: skipped: it needs root to make loop devices and file systems, mount them, throttle them (cgroup v1 blkio) and measure memory (cgroup v1 memory); run it as root" >&2
  exit 0
fi
if [ ! -w "$BLKIO/blkio.throttle.write_bps_device" ]; then
  echo "bench/adoc.sh: skipped: no writable cgroup v1 blkio controller at $BLKIO (the devices' throttles need it)" >&2
  exit 0
fi
memcg_ok=1
if [ ! -w "$MEMCG/cgroup.procs" ]; then
  memcg_ok=0
  echo "bench/adoc.sh: warning: no writable cgroup v1 memory controller at $MEMCG: peak memory will be missing" >&2
fi
if [ -e "$OUT/runs.csv" ]; then
  echo "$OUT already holds a run (runs.csv); choose another OUT or move it away" >&2
  exit 2
fi

# ---- Tools: the yardstick, shale, the harness (records, RocksDB's YCSB, the summary), fio,
# mkfs, GNU time.

built=$(bench/compare/build_rocksdb.sh | tail -2)
DB_BENCH=${DB_BENCH:-$(echo "$built" | head -1)}
export ROCKSDB_LIB_DIR=${ROCKSDB_LIB_DIR:-$(echo "$built" | tail -1)} ROCKSDB_STATIC=1
missing=()
command -v fio >/dev/null || missing+=(fio)
command -v mkfs.ext4 >/dev/null || missing+=(e2fsprogs)
command -v blkdiscard >/dev/null || missing+=(util-linux)
[ -x /usr/bin/time ] || missing+=(time)
command -v gzip >/dev/null || missing+=(gzip)
dpkg -s libclang-dev >/dev/null 2>&1 || missing+=(libclang-dev) # the rocksdb crate's bindgen
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
fi
[ -n "${SHALE:-}" ] || cargo build --release -q -p shale-cli
cargo build --release -q --manifest-path bench/compare/Cargo.toml
SHALE=${SHALE:-${CARGO_TARGET_DIR:-target}/release/shale}
HARNESS=${CARGO_TARGET_DIR:-bench/compare/target}/release/shale-compare

# What this shale takes: the tuner and the timeline are issue #10's (parts 2 and 3). Without
# --tuner only shale-off runs (the build's one behaviour), noted in the summary.
has_flag() { "$SHALE" "$1" --help 2>/dev/null | grep -q -- "--$2"; }
bench_tuner=0 bench_timeline=0 ycsb_tuner=0 ycsb_statistics=()
has_flag bench tuner && bench_tuner=1
has_flag bench timeline && bench_timeline=1
has_flag ycsb tuner && ycsb_tuner=1
has_flag ycsb statistics && ycsb_statistics=(--statistics)

mkdir -p "$OUT/raw" "$SCRATCH"
# Canonical, so that it matches the backing-file paths losetup lists at teardown.
work=$(readlink -f "$(mktemp -d "$SCRATCH/shale-adoc.XXXXXX")")
bg_pid=
memcg=
memcg_seq=0
shale_hold=

# Stops the process under way (it holds files on the devices), removes its memory group, lets
# go of shale's device, then tears down the devices.
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  if [ -n "$bg_pid" ]; then
    kill_tree "$bg_pid"
    wait "$bg_pid" 2>/dev/null || true
  fi
  [ -n "$memcg" ] && remove_memcg "$memcg"
  [ -n "$shale_hold" ] && exec {shale_hold}<&-
  teardown_dir "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Runs a command as run_child does, in a memory group of its own (made here, removed after),
# under GNU time; sets peak_memory (the group's memory.max_usage_in_bytes: RSS and page cache)
# and peak_rss (bytes). Output goes to PREFIX.stdout and .stderr. Returns the command's status.
measured() { # prefix command...
  local prefix=$1 rc=0
  shift
  peak_memory='' peak_rss=''
  memcg=
  if [ "$memcg_ok" = 1 ]; then
    memcg_seq=$((memcg_seq + 1))
    memcg=$MEMCG/shale-adoc-$$-$memcg_seq
    mkdir "$memcg"
  fi
  (
    # Writing 0 to cgroup.procs moves the writer, this subshell, into the group before it
    # becomes GNU time and the engine: everything they map or cache is charged there.
    if [ -n "$memcg" ]; then echo 0 >"$memcg/cgroup.procs"; fi
    exec /usr/bin/time -f %M -o "$prefix.time" "$@"
  ) >"$prefix.stdout" 2>"$prefix.stderr" &
  bg_pid=$!
  wait "$bg_pid" || rc=$?
  bg_pid=
  if [ -n "$memcg" ]; then
    peak_memory=$(cat "$memcg/memory.max_usage_in_bytes" 2>/dev/null || true)
    remove_memcg "$memcg"
    memcg=
  fi
  # GNU time's last line is the peak RSS in KiB (a line about the exit status may precede it).
  local kib
  kib=$(tail -1 "$prefix.time" 2>/dev/null || true)
  case $kib in '' | *[!0-9]*) ;; *) peak_rss=$((kib * 1024)) ;; esac
  return "$rc"
}

# ---- The disk, the scale, the devices.

echo "measuring the disk under $SCRATCH (fio, 3 s)" >&2
fio_run "$OUT/raw/fio-disk-seqwrite.txt" --name=seqwrite --filename="$work/fio.dat" --rw=write \
  --bs=1M --iodepth=16 --ioengine=libaio --direct=1 --size=1G --runtime=3 --time_based
rm -f "$work/fio.dat"
disk_bps=$(terse_write_bps "$OUT/raw/fio-disk-seqwrite.txt")
# One factor for every run, so that runs of different sessions compare: the fastest device's
# figure may exceed a disk measured slower (3 s of fio, beside whatever else the machine does),
# and that point is then bound by the disk as much as by its throttle. setup.md says so.
SCALE=${SCALE:-0.75}
scale_note=
if case " $DEVICES $YCSB_DEVICES " in *" nvme "*) true ;; *) false ;; esac \
  && [ "$(awk -v m=2700 -v s="$SCALE" 'BEGIN {printf "%d", m * 1e6 * s}')" -gt "$disk_bps" ]; then
  scale_note="**the scaled NVMe figure is above what fio measured on this disk: that point is bound by the disk as well as by its throttle (SCALE=$(awk -v b="$disk_bps" 'BEGIN {printf "%.2f", int(b / 2700e6 * 100) / 100}') would fit it)**"
  echo "bench/adoc.sh: warning: ${scale_note//\*/}" >&2
fi
device_bps() { awk -v m="$(paper_mbps "$1")" -v s="$SCALE" 'BEGIN {printf "%d", m * 1e6 * s}'; }
for d in $DEVICES $YCSB_DEVICES; do
  [ "$(device_bps "$d")" -gt 0 ] || { echo "SCALE=$SCALE leaves $d no bandwidth" >&2; exit 2; }
done

# Each device holds one store at a time. fillrandom's store is bounded by its key space (NUM
# entries); compaction and RocksDB's obsolete files until deleted need room beside it.
entry=$((KEY_SIZE + VALUE_SIZE))
data=0
suite_on fillrandom && data=$((NUM * entry))
suite_on ycsb && [ $((YCSB_RECORDS * 1140)) -gt "$data" ] && data=$((YCSB_RECORDS * 1140))
DEVICE_BYTES=${DEVICE_BYTES:-$(((3 * data + (4 << 30) + (1 << 30) - 1) >> 30 << 30))}
# Both devices are sparse, and only one holds a store at a time, but what a device's file
# holds is not always given back between runs: shale's device is discarded whole after each
# run, while a 300 s fill writes all of it (its slots are reused anywhere on the volume), and
# RocksDB's file system, trimmed after each run, was seen keeping 20 GB of a 33 GiB file
# (fstrim skips block groups it trimmed before). So the disk must hold shale's whole device
# beside RocksDB's store and compaction's room (twice the data) and the WAL: a run on less
# failed for want of space here.
need=$((DEVICE_BYTES + 2 * data + (2 << 30)))
avail=$(df --output=avail -B1 "$SCRATCH" | tail -1 | tr -d ' ')
if [ "$avail" -lt "$need" ]; then
  echo "bench/adoc.sh: $SCRATCH has $((avail >> 30)) GiB free; the stores need about $((need >> 30)) GiB (lower NUM or YCSB_RECORDS, or choose another SCRATCH)" >&2
  exit 1
fi

echo "devices: two of $((DEVICE_BYTES >> 30)) GiB (sparse); scale $SCALE" >&2
ROCKS_DEV=$(loop_dev rocksdb "$DEVICE_BYTES")
SHALE_DEV=$(loop_dev shale "$DEVICE_BYTES")
MNT=$work/mnt
# The file system first, throttles after: mkfs writes its inode tables at the disk's speed.
make_ext4 "$ROCKS_DEV" "$MNT"
# Held open for the session: Linux drops a block device's page cache at its last close, while
# RocksDB's files keep theirs from one process to the next (one per YCSB phase).
exec {shale_hold}<"$SHALE_DEV"

set_device() { # name: both loop devices throttled to its bandwidth
  local bps
  bps=$(device_bps "$1")
  throttle_device "$ROCKS_DEV" "$bps" 0
  throttle_device "$SHALE_DEV" "$bps" 0
}

# Empties both devices: RocksDB's directory goes and its file system is trimmed (the loop
# device punches the freed ranges out of its file); shale's device is discarded whole (shale
# refuses a device holding data rather than erase it). Then ext4 commits the removal now, not
# in the next run's count.
reset_devices() {
  rm -rf "$MNT/db"
  fstrim "$MNT"
  forget_shale_store "$SHALE_DEV"
  blkdiscard "$SHALE_DEV"
  sync
}

CSV=$OUT/runs.csv
failures=0

summarize() {
  { cat "$OUT/setup.md"; echo; "$HARNESS" adoc-summary --csv "$CSV"; } >"$OUT/summary.md.tmp" \
    && mv "$OUT/summary.md.tmp" "$OUT/summary.md"
}

# Appends the process's row to runs.csv (the harness reads its output) and rewrites summary.md.
record() { # device config workload repeat prefix status device-bytes [adoc-record flags...]
  local dev=$1 cfg=$2 workload=$3 rep=$4 prefix=$5 status=$6 bytes=$7 line
  shift 7
  line=$("$HARNESS" adoc-record --csv "$CSV" --engine "${cfg%%-*}" --config "$cfg" --device "$dev" \
    --device-bps "$(device_bps "$dev")" --workload "$workload" --repeat "$rep" --output "$prefix" \
    --key-size "$KEY_SIZE" --value-size "$VALUE_SIZE" --device-bytes "$bytes" --status "$status" \
    ${peak_memory:+--peak-memory "$peak_memory"} ${peak_rss:+--peak-rss "$peak_rss"} "$@") \
    || { echo "  $dev $workload $cfg r$rep: adoc-record failed" >&2; failures=$((failures + 1)); return 0; }
  case $line in *,ok,*) ;; *) failures=$((failures + 1)) ;; esac
  echo "  $dev $workload $cfg r$rep: $(echo "$line" | cut -d, -f7) ops/s, stall $(echo "$line" | cut -d, -f12) us ($(echo "$line" | cut -d, -f28))" >&2
  summarize
}

# RocksDB's settings in configuration $1 on device $2: db_bench's flags (`rflags`), the
# harness's YCSB flags (`yflags`), and its background jobs and write buffer (`jobs`, `wb`).
rocksdb_settings() { # config device
  jobs=2 wb=$WRITE_BUFFER
  [ "$1" = rocksdb-large ] && jobs=$LARGE_JOBS wb=$LARGE_WRITE_BUFFER
  rflags=(--max_background_jobs="$jobs" --write_buffer_size="$wb")
  yflags=(--background-jobs "$jobs" --write-buffer-size "$wb")
  if [ "$1" = rocksdb-ratelimit ]; then
    rflags+=(--rate_limiter_bytes_per_sec="$(device_bps "$2")" --rate_limiter_auto_tuned=true)
    yflags+=(--rate-limiter-bytes-per-sec "$(device_bps "$2")" --rate-limiter-auto-tuned)
  fi
  [ "$ROCKSDB_DIRECT" = 1 ] && rflags+=(--use_direct_io_for_flush_and_compaction=true)
  return 0
}

# shale's tuner flags in configuration $1, for a tool that takes them ($2: 1 or 0).
shale_tuner_flags() { # config takes-tuner
  sflags=()
  if [ "$2" = 1 ]; then
    sflags=(--tuner="${1#shale-}")
    [ -n "$TUNER_WINDOW_MS" ] && sflags+=(--tuner_window_ms="$TUNER_WINDOW_MS")
  fi
  [ -n "$SHALE_CPU_PRIORITY" ] && sflags+=(--background_cpu_priority="$SHALE_CPU_PRIORITY")
  return 0
}

# Whether configuration $1 can run in suite $2 with this shale; else `why`.
runnable() { # config suite
  why=
  case $1 in rocksdb-* | shale-off) return 0 ;; esac
  if [ "$2" = fillrandom ] && [ "$bench_tuner" = 0 ]; then why="shale bench has no --tuner yet"; fi
  if [ "$2" = ycsb ] && [ "$ycsb_tuner" = 0 ]; then why="shale ycsb has no --tuner yet"; fi
  [ -z "$why" ]
}

# The lines of RocksDB's info LOG the series is built from (bench/compare/src/adoc_series.rs)
# and its stall warnings; the whole LOG is about 600 lines a second.
LOG_LINES='DUMPING STATS|^Uptime\(secs\)|^(Cumulative|Interval) stall:|^Write Stall \(count\)|^ +(L[0-9]+|Sum) +[0-9]+/[0-9]+ |^Estimated pending compaction bytes|STATISTICS:|^rocksdb\.stall\.micros COUNT|Stalling writes|Stopping writes'

fill_run() { # device config repeat
  local dev=$1 cfg=$2 rep=$3 status=ok before after
  local prefix=$OUT/raw/$1-fillrandom-$2-r$3
  local common=(--benchmarks=fillrandom --num="$NUM" --duration="$DURATION" --key_size="$KEY_SIZE"
    --value_size="$VALUE_SIZE" --compression_type=none --bloom_bits=10
    --level_compaction_dynamic_level_bytes=true --cache_size="$CACHE_SIZE" --seed="$SEED"
    --histogram=1 --statistics=1)
  reset_devices
  if [ "${cfg%%-*}" = rocksdb ]; then
    rocksdb_settings "$cfg" "$dev"
    before=$(device_write_bytes "$ROCKS_DEV")
    measured "$prefix" "$DB_BENCH" "${common[@]}" "${rflags[@]}" --db="$MNT/db" \
      --stats_interval_seconds=1 --stats_dump_period_sec=1 || status="failed (exit $?)"
    sync
    after=$(device_write_bytes "$ROCKS_DEV")
    grep -E "$LOG_LINES" "$MNT/db/LOG" >"$prefix.LOG" 2>/dev/null || true
    record "$dev" "$cfg" fillrandom "$rep" "$prefix" "$status" $((after - before)) \
      --log "$prefix.LOG" --timeline "$prefix.timeline.csv" --background-jobs "$jobs" \
      --write-buffer-size "$wb"
    gzip -f "$prefix.LOG"
  else
    shale_tuner_flags "$cfg" "$bench_tuner"
    local timeline=()
    [ "$bench_timeline" = 1 ] && timeline=(--timeline="$prefix.timeline.csv")
    before=$(device_write_bytes "$SHALE_DEV")
    # `stats` after the fill: where the bytes went, level by level (Stats::level_io), beside
    # RocksDB's compaction stats in its LOG.
    measured "$prefix" "$SHALE" bench "${common[@]/#--benchmarks=fillrandom/--benchmarks=fillrandom,stats}" \
      --write_buffer_size="$WRITE_BUFFER" \
      --db="$SHALE_DEV" "${sflags[@]}" "${timeline[@]}" || status="failed (exit $?)"
    sync
    after=$(device_write_bytes "$SHALE_DEV")
    record "$dev" "$cfg" fillrandom "$rep" "$prefix" "$status" $((after - before)) \
      ${timeline:+--timeline "$prefix.timeline.csv"}
  fi
}

ycsb_phase() { # device config repeat phase(load|run) workload label
  local dev=$1 cfg=$2 rep=$3 status=ok before after
  local prefix=$OUT/raw/$1-ycsb-$6-$2-r$3
  local common=(--workload "$5" --phase "$4" --records "$YCSB_RECORDS" --operations "$YCSB_OPS"
    --threads "$YCSB_THREADS" --seed "$SEED")
  if [ "${cfg%%-*}" = rocksdb ]; then
    rocksdb_settings "$cfg" "$dev"
    before=$(device_write_bytes "$ROCKS_DEV")
    measured "$prefix" "$HARNESS" adoc-ycsb "${common[@]}" --db "$MNT/db" \
      --cache-size "$CACHE_SIZE" "${yflags[@]}" || status="failed (exit $?)"
    sync
    after=$(device_write_bytes "$ROCKS_DEV")
  else
    shale_tuner_flags "$cfg" "$ycsb_tuner"
    local existing=()
    [ "$4" = run ] && existing=(--use_existing_db)
    before=$(device_write_bytes "$SHALE_DEV")
    measured "$prefix" "$SHALE" ycsb "${common[@]}" --db "$SHALE_DEV" "${existing[@]}" \
      --cache_size "$CACHE_SIZE" --write_buffer_size "$WRITE_BUFFER" --compression_type none \
      --bloom_bits 10 "${sflags[@]}" "${ycsb_statistics[@]}" || status="failed (exit $?)"
    sync
    after=$(device_write_bytes "$SHALE_DEV")
  fi
  record "$dev" "$cfg" "ycsb-$6" "$rep" "$prefix" "$status" $((after - before))
  [ "$status" = ok ]
}

# Load, then each workload on that store, one process per phase; E, if asked for, on a store
# loaded afresh (as tiered.sh). A failed phase ends this configuration's sequence.
ycsb_run() { # device config repeat
  local w lower first=1 first_w
  reset_devices
  first_w=${YCSB_WORKLOADS%% *}
  ycsb_phase "$1" "$2" "$3" load "${first_w,,}" load || return 0
  for w in $YCSB_WORKLOADS; do
    lower=${w,,}
    if [ "$lower" = e ] && [ $first = 0 ]; then
      reset_devices
      ycsb_phase "$1" "$2" "$3" load e reload || return 0
    fi
    first=0
    ycsb_phase "$1" "$2" "$3" run "$lower" "${w^^}" || return 0
  done
}

# ---- setup.md: what ran on what.

{
  echo "# ADOC's evaluation on emulated devices (bench/adoc.sh, issue #10)"
  echo
  echo "- $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) CPUs ($(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo)), $(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo) RAM, Linux $(uname -r)."
  echo "- yardstick: $("$DB_BENCH" --version 2>&1 | head -1) (release build, $DB_BENCH; YCSB through the rocksdb crate linked to the same build, \`shale-compare adoc-ycsb\`); shale $(git describe --always --dirty)."
  echo "- This disk (fio, O_DIRECT 1 MiB sequential writes at depth 16, 3 s): $((disk_bps / 1000000)) MB/s. Device bandwidths are the paper's times $SCALE, reads and writes alike, no IOPS limit${scale_note:+; $scale_note}:"
  echo
  echo "| device | paper, MB/s | here, MB/s |"
  echo "|---|---:|---:|"
  for d in hdd sata pm nvme; do
    case " $DEVICES $YCSB_DEVICES " in *" $d "*) echo "| $d | $(paper_mbps "$d") | $(($(device_bps "$d") / 1000000)) |" ;; esac
  done
  echo
  echo "- Each device: two loop devices (--direct-io=on) over sparse files of $((DEVICE_BYTES >> 30)) GiB in $SCRATCH, throttled alike through the cgroup v1 root blkio group: RocksDB on ext4 over one, shale on the other, raw. Only bandwidth is emulated, not latency."
  echo "- Configurations, in turn at each point: $CONFIGS. RocksDB: --max_background_jobs=2 --write_buffer_size=$WRITE_BUFFER (default), plus --rate_limiter_bytes_per_sec=<device> --rate_limiter_auto_tuned=true (ratelimit), or --max_background_jobs=$LARGE_JOBS --write_buffer_size=$LARGE_WRITE_BUFFER (large)$([ "$ROCKSDB_DIRECT" = 1 ] && echo ", all with --use_direct_io_for_flush_and_compaction=true"). shale: --write_buffer_size=$WRITE_BUFFER --tuner=off|adoc-t|adoc-b|adoc${TUNER_WINDOW_MS:+ --tuner_window_ms=$TUNER_WINDOW_MS}${SHALE_CPU_PRIORITY:+ --background_cpu_priority=$SHALE_CPU_PRIORITY}. Repeats: $REPEATS."
  if suite_on fillrandom; then
    echo "- fillrandom on $DEVICES: --duration=$DURATION, key space --num=$NUM, $KEY_SIZE-byte keys, $VALUE_SIZE-byte values, no compression, bloom 10 bits, dynamic level sizing, --cache_size=$CACHE_SIZE, --seed=$SEED, --histogram --statistics; RocksDB also --stats_interval_seconds=1 --stats_dump_period_sec=1 (its per-second series), shale --timeline."
  fi
  if suite_on ycsb; then
    echo "- YCSB on $YCSB_DEVICES: load, then $YCSB_WORKLOADS on that store, $YCSB_RECORDS records of 10 x 100-byte fields, $YCSB_OPS operations, $YCSB_THREADS threads, seed $SEED, one process per phase (RocksDB: shale-compare adoc-ycsb; shale: shale ycsb), $((CACHE_SIZE >> 20)) MiB block cache, writes not synced."
  fi
  [ "$bench_tuner" = 0 ] && echo "- **\`shale bench --help\` names no --tuner: only shale-off ran for fillrandom (issue #10, part 2).**"
  [ "$bench_timeline" = 0 ] && echo "- **\`shale bench --help\` names no --timeline: shale's runs have no per-second series or chart (issue #10, part 3).**"
  suite_on ycsb && [ "$ycsb_tuner" = 0 ] && echo "- **\`shale ycsb --help\` names no --tuner: only shale-off ran for YCSB.**"
  [ "$memcg_ok" = 0 ] && echo "- **No writable memory cgroup: peak memory is missing.**"
  echo "- Estimate before the run: $estimate."
  echo "- Reproduce: \`REPEATS=$REPEATS SUITES=\"$SUITES\" DEVICES=\"$DEVICES\" YCSB_DEVICES=\"$YCSB_DEVICES\" DURATION=$DURATION NUM=$NUM YCSB_RECORDS=$YCSB_RECORDS YCSB_OPS=$YCSB_OPS SCALE=$SCALE bench/adoc.sh\`"
  echo
  echo '```'
  losetup -l | awk -v w="$work/" 'NR == 1 || index($0, w)'
  echo '```'
} >"$OUT/setup.md"

# ---- The runs: each repeat, each device, each configuration in turn.

for r in $(seq 1 "$REPEATS"); do
  if suite_on fillrandom; then
    for d in $DEVICES; do
      set_device "$d"
      echo "repeat $r: fillrandom on $d ($(($(device_bps "$d") / 1000000)) MB/s)" >&2
      for c in $CONFIGS; do
        if runnable "$c" fillrandom; then fill_run "$d" "$c" "$r"; else echo "  $c: skipped: $why" >&2; fi
      done
    done
  fi
  if suite_on ycsb; then
    for d in $YCSB_DEVICES; do
      set_device "$d"
      echo "repeat $r: YCSB on $d ($(($(device_bps "$d") / 1000000)) MB/s)" >&2
      for c in $CONFIGS; do
        if runnable "$c" ycsb; then ycsb_run "$d" "$c" "$r"; else echo "  $c: skipped: $why" >&2; fi
      done
    done
  fi
done

[ -f "$CSV" ] || { echo "nothing ran" >&2; exit 1; }
echo "results in $OUT (summary.md, runs.csv, charts/, raw/)" >&2
[ "$failures" -eq 0 ] || { echo "$failures processes failed; summary.md lists them" >&2; exit 1; }
