#!/usr/bin/env bash
# shale bench against RocksDB 7.8.3's own db_bench (Debian's rocksdb-tools), alternating
# A B A B A B on the same machine, in two RocksDB modes: buffered I/O (what users run) and
# direct I/O with the same block-cache size as shale. Prints every run's result lines; the
# medians and ratios go into BENCHMARKS.md.
# Usage: bench/lsm_vs_rocksdb.sh [NUM]   (default 100000 keys)
set -euo pipefail
cd "$(dirname "$0")/.."
NUM=${1:-100000}
command -v db_bench >/dev/null || { apt-get update -q && apt-get install -y -q rocksdb-tools; }
cargo build --release -q -p shale-cli
SHALE=target/release/shale
DIR=$(mktemp -d -p "$PWD/target" lsmbench.XXXXXX)
# RocksDB 7.8.3 sizes levels statically by default, shale dynamically (RocksDB's default
# from 8.4): name the sizing (static, as in the runs BENCHMARKS.md reports) and the
# background jobs, so that both run the same shape.
COMMON="--benchmarks=fillseq,fillrandom,readrandom --num=$NUM --key_size=16 --value_size=100 \
 --compression_type=none --bloom_bits=10 --cache_size=8388608 --write_buffer_size=1048576 \
 --target_file_size_base=1048576 --max_bytes_for_level_base=4194304 \
 --level_compaction_dynamic_level_bytes=false --max_background_jobs=2"
DIRECT="--use_direct_reads=true --use_direct_io_for_flush_and_compaction=true"
for mode in buffered direct; do
  extra=""; [ $mode = direct ] && extra=$DIRECT
  for i in 1 2 3; do
    rm -rf "$DIR"/*
    echo "== rocksdb $mode run $i (load $(cut -d' ' -f1 /proc/loadavg))"
    db_bench $COMMON $extra --db="$DIR/rocksdb" 2>&1 | grep -E "^(fillseq|fillrandom|readrandom) "
    echo "== shale run $i (load $(cut -d' ' -f1 /proc/loadavg))"
    $SHALE bench $COMMON --db="$DIR/shale" 2>/dev/null | grep -E "^(fillseq|fillrandom|readrandom) "
  done
done
rm -rf "$DIR"
