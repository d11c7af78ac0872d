#!/usr/bin/env bash
# shale against RocksDB and fjall, on this machine, in one session. The yardstick is RocksDB
# 11.8.1 built in release mode (NDEBUG, -O2) from the source the crate librocksdb-sys
# 0.19.0+11.8.1 ships: bench/compare/build_rocksdb.sh builds it once and caches db_bench (the
# dbbench and timeline suites) and librocksdb.a, which the rocksdb crate 0.25 links for the
# ycsb suite. Debian's rocksdb-tools 7.8.3 is NOT used: it is built with assertions on. Builds
# `shale` and the harness in release, runs the suites and writes markdown tables, SVG charts,
# CSVs to bench/results/<UTC date>/ (or $OUT), and every run's raw output to its raw/,
# which git ignores (BENCHMARKS.md, "What bench/results keeps").
#
# Usage: bench/compare.sh [dbbench] [timeline] [ycsb]      (no argument: all three)
# Sizes (environment):
#   NUM=1000000 REPEATS=3 BENCHMARKS=fillseq,...   dbbench (see shale-compare dbbench --help)
#   READS=N MULTIREAD_BATCH=16                      dbbench: operations of each read benchmark
#                                                   (default NUM), keys per multireadrandom op
#   MEMORY_LIMIT=BYTES                              dbbench: each process in a memory cgroup of
#                                                   that size, page cache included (0: unbounded)
#   CACHE_SIZE=1073741824 MODES=buffered,direct     dbbench: block cache; RocksDB's read modes
#   DIRECT_READS=1                                  dbbench: shale reads with O_DIRECT (regime d)
#   TIMELINE_SECONDS=600 TIMELINE_MODE=buffered     timeline
#   YCSB_RECORDS=1000000 YCSB_OPS=1000000 YCSB_THREADS=2 YCSB_REPEATS=3   ycsb
#   YCSB_CACHE_SIZE=BYTES (default 32 MiB, every engine's default) YCSB_MEMORY_LIMIT=BYTES
#   YCSB_WORKLOADS=A,B,C,F,D,E YCSB_ENGINES=rocksdb,shale,fjall
#   YCSB_SHALE_IDLE_IO=1                            ycsb: shale's compactions read in the idle
#                                                   I/O class (Options::idle_compaction_io)
#   OUT=bench/results/<date>                        where the files go
# The issue #4 suite is the default; bench/compare/README.md says what each figure means.
set -euo pipefail
cd "$(dirname "$0")/.."

suites=("$@")
[ ${#suites[@]} -eq 0 ] && suites=(dbbench timeline ycsb)
for s in "${suites[@]}"; do
  case $s in dbbench | timeline | ycsb) ;; *) echo "unknown suite $s (dbbench, timeline, ycsb)" >&2; exit 2 ;; esac
done

# The yardstick, built once, then cached: db_bench (dbbench and timeline) and librocksdb.a
# (ycsb, through bench/compare/rocksdb-lib, which the repository's .cargo/config.toml names).
built=$(bench/compare/build_rocksdb.sh | tail -2)
DB_BENCH=${DB_BENCH:-$(echo "$built" | head -1)}
export ROCKSDB_LIB_DIR=${ROCKSDB_LIB_DIR:-$(echo "$built" | tail -1)} ROCKSDB_STATIC=1
echo "yardstick: $("$DB_BENCH" --version 2>&1 | head -1) ($DB_BENCH, release build)"

# libclang, for the rocksdb crate's bindgen; fio, for the device's limit beside readrandom16.
for pkg in libclang-dev fio; do
  if ! dpkg -s "$pkg" >/dev/null 2>&1; then
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$pkg"
  fi
done

cargo build --release -q -p shale-cli
cargo build --release -q --manifest-path bench/compare/Cargo.toml
root_target=${CARGO_TARGET_DIR:-target}
harness_target=${CARGO_TARGET_DIR:-bench/compare/target}
SHALE=$root_target/release/shale
HARNESS=$harness_target/release/shale-compare

OUT=${OUT:-bench/results/$(date -u +%F)}
WORK=$root_target/compare-work
mkdir -p "$OUT" "$WORK"
for s in "${suites[@]}"; do
  case $s in
    dbbench)
      "$HARNESS" dbbench --shale "$SHALE" --db-bench "$DB_BENCH" --work-dir "$WORK" --out "$OUT" \
        --num "${NUM:-1000000}" --repeats "${REPEATS:-3}" \
        --memory-limit "${MEMORY_LIMIT:-0}" --cache-size "${CACHE_SIZE:-1073741824}" \
        --modes "${MODES:-buffered,direct}" ${DIRECT_READS:+--direct-reads} \
        ${READS:+--reads "$READS"} --multiread-batch "${MULTIREAD_BATCH:-16}" \
        ${BENCHMARKS:+--benchmarks "$BENCHMARKS"} ;;
    timeline)
      "$HARNESS" timeline --shale "$SHALE" --db-bench "$DB_BENCH" --work-dir "$WORK" --out "$OUT" \
        --seconds "${TIMELINE_SECONDS:-600}" --mode "${TIMELINE_MODE:-buffered}" ;;
    ycsb)
      "$HARNESS" ycsb --shale "$SHALE" --work-dir "$WORK" --out "$OUT" \
        --records "${YCSB_RECORDS:-1000000}" --operations "${YCSB_OPS:-1000000}" \
        --threads "${YCSB_THREADS:-2}" --repeats "${YCSB_REPEATS:-3}" \
        --cache-size "${YCSB_CACHE_SIZE:-33554432}" --memory-limit "${YCSB_MEMORY_LIMIT:-0}" \
        --workloads "${YCSB_WORKLOADS:-A,B,C,F,D,E}" --engines "${YCSB_ENGINES:-rocksdb,shale,fjall}" \
        ${YCSB_SHALE_IDLE_IO:+--shale-idle-compaction-io} ;;
  esac
done
rmdir "$WORK" 2>/dev/null || true
echo "results in $OUT"
