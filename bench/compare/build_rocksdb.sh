#!/usr/bin/env bash
# Builds the yardstick: RocksDB 11.8.1 in release mode (DEBUG_LEVEL=0: -O2, NDEBUG, no
# assertions), from the source that the crate librocksdb-sys 0.19.0+11.8.1 ships, and caches
# two products of that one build:
#   - db_bench, for the dbbench and timeline suites;
#   - lib/librocksdb.a (debug info stripped) with lib/rocksdb-link-libs (the system libraries
#     it needs), which the rocksdb crate 0.25 (librocksdb-sys 0.19.0+11.8.1, the same source)
#     links for the ycsb suite when ROCKSDB_LIB_DIR=lib and ROCKSDB_STATIC=1: the same release
#     build as db_bench, and RocksDB's C++ sources compiled once, not twice.
# Prints the path of db_bench, then the library folder, on its last two lines, and points
# bench/compare/rocksdb-lib at the library folder (the repository's .cargo/config.toml gives
# that path to the rocksdb crate).
#
# Usage: bench/compare/build_rocksdb.sh        (CACHE=dir to choose where it is kept)
# Idempotent: a cached build is reused. The first build takes 30-60 minutes on 2 cores.
set -euo pipefail

VERSION=11.8.1
CRATE=librocksdb-sys
CRATE_VERSION=0.19.0+$VERSION
CACHE=${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shale-bench/rocksdb-$VERSION}
DB_BENCH=$CACHE/db_bench
LIB_DIR=$CACHE/lib
LINK=$(cd "$(dirname "$0")" && pwd)/rocksdb-lib

if [ -x "$DB_BENCH" ] && "$DB_BENCH" --version 2>/dev/null | grep -q "$VERSION" \
  && [ -f "$LIB_DIR/librocksdb.a" ] && [ -f "$LIB_DIR/rocksdb-link-libs" ]; then
  echo "cached: $("$DB_BENCH" --version)" >&2
  ln -sfn "$LIB_DIR" "$LINK"
  echo "$DB_BENCH"
  echo "$LIB_DIR"
  exit 0
fi

# Build tools and gflags (db_bench's flag parser). No compression library: the comparison
# runs with --compression_type=none, and the ROCKSDB_DISABLE_* variables below keep RocksDB's
# platform detection from linking those a machine happens to have, so the build is the same
# on every machine and the library needs nothing the rocksdb crate does not link.
missing=()
for p in build-essential libgflags-dev; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
fi

# The crate's source, through cargo (the only registry this machine reaches): a throwaway
# manifest that depends on exactly this version, fetched, never built.
crate_file=$(ls "$HOME"/.cargo/registry/cache/*/"$CRATE-$CRATE_VERSION.crate" 2>/dev/null | head -1 || true)
if [ -z "$crate_file" ]; then
  stub=$(mktemp -d)
  mkdir -p "$stub/src"
  printf '[package]\nname = "fetch-rocksdb"\nversion = "0.0.0"\nedition = "2021"\n\n[dependencies]\n%s = "=%s"\n' \
    "$CRATE" "$CRATE_VERSION" >"$stub/Cargo.toml"
  touch "$stub/src/lib.rs"
  cargo fetch -q --manifest-path "$stub/Cargo.toml"
  rm -rf "$stub"
  crate_file=$(ls "$HOME"/.cargo/registry/cache/*/"$CRATE-$CRATE_VERSION.crate" | head -1)
fi

mkdir -p "$CACHE"
src=$CACHE/src
if [ ! -f "$src/rocksdb/Makefile" ]; then
  rm -rf "$src"
  mkdir -p "$src"
  tar xzf "$crate_file" -C "$src" --strip-components=1
fi

echo "building db_bench $VERSION (release) in $src/rocksdb: this takes a while" >&2
# PORTABLE=1: no -march=native, so the binary means the same on any x86-64 machine.
# DISABLE_WARNING_AS_ERROR=1: built without snappy, 11.8.1's util/compression.cc has an unused
# parameter, which -Werror (the Makefile's default) turns into a failed build.
# AUTO_CLEAN=1: objects left by an earlier attempt with other parameters are rebuilt, not
# refused.
# static_lib: librocksdb.a, which db_bench itself links in this mode (LIB_MODE=static), so
# naming it costs nothing more. ROCKSDB_USE_IO_URING=0: RocksDB's optional liburing (async and
# multi-block reads) stays out whether or not a machine has liburing-dev, as for the libraries
# above; db_bench's --async_io is off by default anyway.
export ROCKSDB_DISABLE_SNAPPY=1 ROCKSDB_DISABLE_ZLIB=1 ROCKSDB_DISABLE_BZIP=1 \
  ROCKSDB_DISABLE_LZ4=1 ROCKSDB_DISABLE_ZSTD=1 ROCKSDB_DISABLE_JEMALLOC=1 ROCKSDB_DISABLE_TCMALLOC=1 \
  ROCKSDB_USE_IO_URING=0
make -C "$src/rocksdb" DEBUG_LEVEL=0 PORTABLE=1 USE_RTTI=1 DISABLE_WARNING_AS_ERROR=1 AUTO_CLEAN=1 -j"$(nproc)" db_bench static_lib >"$CACHE/build.log" 2>&1 || {
  tail -30 "$CACHE/build.log" >&2
  echo "RocksDB build failed; the full log is $CACHE/build.log" >&2
  exit 1
}
cp "$src/rocksdb/db_bench" "$DB_BENCH"
mkdir -p "$LIB_DIR"
# The archive carries debug info (about 1.2 GB); the ycsb harness needs none of it.
strip --strip-debug -o "$LIB_DIR/librocksdb.a" "$src/rocksdb/librocksdb.a"
# The system libraries the archive needs, from the Makefile's platform detection, one per line
# (gflags is db_bench's, not the library's).
sed -n 's/^PLATFORM_LDFLAGS=//p' "$src/rocksdb/make_config.mk" | tr ' ' '\n' \
  | sed -n 's/^-l//p' | grep -vx gflags >"$LIB_DIR/rocksdb-link-libs"
# The rocksdb crate links the archive and libstdc++ only; Rust's std brings pthread, rt and dl.
# Anything else (a library the ROCKSDB_DISABLE_* variables missed) would fail its link.
if grep -vxE 'pthread|rt|dl' "$LIB_DIR/rocksdb-link-libs"; then
  echo "librocksdb.a needs the libraries above, which the rocksdb crate does not link" >&2
  exit 1
fi
ln -sfn "$LIB_DIR" "$LINK"
"$DB_BENCH" --version >&2
echo "$DB_BENCH"
echo "$LIB_DIR"
