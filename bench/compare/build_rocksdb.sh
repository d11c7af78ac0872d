#!/usr/bin/env bash
# Builds the yardstick: db_bench of RocksDB 11.8.1 in release mode (DEBUG_LEVEL=0: -O2,
# NDEBUG, no assertions), from the source that the crate librocksdb-sys 0.19.0+11.8.1 ships,
# and caches it. Prints the path of db_bench on its last line.
#
# Usage: bench/compare/build_rocksdb.sh        (CACHE=dir to choose where it is kept)
# Idempotent: a cached db_bench is reused. The first build takes 30-60 minutes on 2 cores.
set -euo pipefail

VERSION=11.8.1
CRATE=librocksdb-sys
CRATE_VERSION=0.19.0+$VERSION
CACHE=${CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/shale-bench/rocksdb-$VERSION}
DB_BENCH=$CACHE/db_bench

if [ -x "$DB_BENCH" ] && "$DB_BENCH" --version 2>/dev/null | grep -q "$VERSION"; then
  echo "cached: $("$DB_BENCH" --version)" >&2
  echo "$DB_BENCH"
  exit 0
fi

# Build tools and gflags (db_bench's flag parser); no compression library: the comparison
# runs without compression, and db_bench then builds without them.
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
make -C "$src/rocksdb" DEBUG_LEVEL=0 PORTABLE=1 USE_RTTI=1 DISABLE_WARNING_AS_ERROR=1 AUTO_CLEAN=1 -j"$(nproc)" db_bench >"$CACHE/build.log" 2>&1 || {
  tail -30 "$CACHE/build.log" >&2
  echo "db_bench build failed; the full log is $CACHE/build.log" >&2
  exit 1
}
cp "$src/rocksdb/db_bench" "$DB_BENCH"
"$DB_BENCH" --version >&2
echo "$DB_BENCH"
