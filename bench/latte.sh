#!/usr/bin/env bash
# Issue #12's comparison: shale's table engine (LATTE) against MariaDB 10.11's InnoDB and
# MyRocks, in LATTE's row layout (a 255-byte key and five 50-byte columns, 505 bytes a row),
# through the same YCSB driver and generators (the crate shale-ycsb): load, then A, B, C, D,
# E, F on the one loaded table, every operation its own durable transaction.
#
# What it does:
# 1. Installs Debian's mariadb-server and mariadb-plugin-rocksdb with apt where missing
#    (services are not started: a policy-rc.d that denies them is put in place for the
#    install only where the image has none), builds the harness in release.
# 2. For each repeat, for each engine in turn (table, innodb, myrocks): a fresh scratch
#    directory under $SCRATCH; for MariaDB a private mariadbd (its own data directory, unix
#    socket, no networking; not the system service) initialised with mariadb-install-db and
#    started with the engine's durable settings and a cache of $CACHE_SIZE bytes:
#      InnoDB:  innodb_flush_log_at_trx_commit=1, innodb_buffer_pool_size=$CACHE_SIZE
#      MyRocks: plugin ha_rocksdb, rocksdb_flush_log_at_trx_commit=1,
#               rocksdb_block_cache_size=$CACHE_SIZE (InnoDB's pool left at 16 MiB, unused)
#    then `shale-compare latte-engine` runs the phases (one connection per client thread,
#    prepared statements over the socket), the server is shut down and the scratch removed.
#    shale's table engine runs in the harness's process with a block cache of $CACHE_SIZE
#    and its undo log in emulated persistent memory, asked for (UndoLogPlace::Pmem): a file
#    in /dev/shm, as LATTE emulates it (the engine's default is the volume without DAX).
# 3. `shale-compare latte-summary` writes latte.md and latte.csv (medians, the issue's
#    targets met or MISSED) into $OUT, beside raw/ (every process's output; ignored by git).
#
# Usage: bench/latte.sh
# Environment: RECORDS=1000000 OPS=1000000 THREADS=2 REPEATS=3 CACHE_SIZE=67108864
#              WORKLOADS=A,B,C,D,E,F ENGINES=table,innodb,myrocks
#              OUT=bench/results/<UTC date>-latte SCRATCH=/work/tmp-latte
set -euo pipefail
cd "$(dirname "$0")/.."

RECORDS=${RECORDS:-1000000}
OPS=${OPS:-1000000}
THREADS=${THREADS:-2}
REPEATS=${REPEATS:-3}
CACHE_SIZE=${CACHE_SIZE:-67108864}
WORKLOADS=${WORKLOADS:-A,B,C,D,E,F}
ENGINES=${ENGINES:-table,innodb,myrocks}
OUT=${OUT:-bench/results/$(date -u +%F)-latte}
SCRATCH=${SCRATCH:-/work/tmp-latte}
command="RECORDS=$RECORDS OPS=$OPS THREADS=$THREADS REPEATS=$REPEATS CACHE_SIZE=$CACHE_SIZE WORKLOADS=$WORKLOADS ENGINES=$ENGINES bench/latte.sh"
echo "latte: $command"

# 1. MariaDB from Debian, without starting its service.
missing=()
for pkg in mariadb-server mariadb-plugin-rocksdb; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
  policy=/usr/sbin/policy-rc.d
  own_policy=
  if [ ! -e $policy ]; then
    printf '#!/bin/sh\nexit 101\n' >$policy && chmod +x $policy && own_policy=1
  fi
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
  [ -n "$own_policy" ] && rm -f $policy
fi
MARIADB_VERSION=$(mariadbd --version)

# The harness, linked to the cached release build of RocksDB (bench/compare.sh's).
export ROCKSDB_LIB_DIR=${ROCKSDB_LIB_DIR:-$(bench/compare/build_rocksdb.sh | tail -1)} ROCKSDB_STATIC=1
cargo build --release -q --manifest-path bench/compare/Cargo.toml
HARNESS=${CARGO_TARGET_DIR:-bench/compare/target}/release/shale-compare

mkdir -p "$OUT/raw" "$SCRATCH"
server_pid=
stop_server() {
  if [ -n "$server_pid" ]; then
    mariadb-admin --no-defaults --socket="$SCRATCH/server/mysqld.sock" -uroot shutdown 2>/dev/null ||
      kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=
  fi
}
cleanup() {
  stop_server
  rm -rf "$SCRATCH/server" "$SCRATCH/table"
  rm -f /dev/shm/shale-latte-$$.pmem
}
trap cleanup EXIT

# Starts a private mariadbd for engine $1 in $SCRATCH/server.
start_server() {
  local d=$SCRATCH/server
  rm -rf "$d" && mkdir -p "$d/data"
  mariadb-install-db --no-defaults --user=root --datadir="$d/data" \
    --auth-root-authentication-method=normal --skip-test-db >"$d/install.log" 2>&1
  {
    echo "[mariadbd]"
    echo "datadir=$d/data"
    echo "socket=$d/mysqld.sock"
    echo "pid-file=$d/mysqld.pid"
    echo "log-error=$d/error.log"
    echo "user=root"
    echo "skip-networking"
    echo "skip-log-bin"
    if [ "$1" = innodb ]; then
      echo "innodb_flush_log_at_trx_commit=1"
      echo "innodb_buffer_pool_size=$CACHE_SIZE"
    else
      echo "plugin_load_add=ha_rocksdb"
      echo "rocksdb_flush_log_at_trx_commit=1"
      echo "rocksdb_block_cache_size=$CACHE_SIZE"
      echo "innodb_buffer_pool_size=16777216"
    fi
  } >"$d/my.cnf"
  mariadbd --defaults-file="$d/my.cnf" &
  server_pid=$!
  for _ in $(seq 1 120); do
    mariadb-admin --no-defaults --socket="$d/mysqld.sock" -uroot ping >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  echo "latte: mariadbd for $1 did not start; its log:" >&2
  tail -20 "$d/error.log" >&2
  return 1
}

# The settings each server ran with, as the server reports them (for the report).
server_settings() {
  mariadb --no-defaults --socket="$SCRATCH/server/mysqld.sock" -uroot -N -e \
    "SHOW VARIABLES WHERE Variable_name IN ('innodb_flush_log_at_trx_commit', \
     'innodb_buffer_pool_size', 'innodb_doublewrite', 'innodb_flush_method', \
     'innodb_log_file_size', 'rocksdb_flush_log_at_trx_commit', 'rocksdb_block_cache_size', \
     'log_bin')" | awk '{printf "%s%s=%s", (NR > 1 ? ", " : ""), $1, $2}'
}

failures=0
settings_innodb= settings_myrocks=
IFS=, read -r -a engines <<<"$ENGINES"
for r in $(seq 1 "$REPEATS"); do
  for e in "${engines[@]}"; do
    echo "latte: run $r $e ($(date -u +%T))"
    log=$OUT/raw/latte-$e-$r
    flags=(latte-engine --engine "$e" --records "$RECORDS" --operations "$OPS"
      --threads "$THREADS" --workloads "$WORKLOADS" --cache-size "$CACHE_SIZE")
    case $e in
      table)
        rm -rf "$SCRATCH/table" && mkdir -p "$SCRATCH/table"
        flags+=(--dir "$SCRATCH/table/store" --pmem-path /dev/shm/shale-latte-$$.pmem) ;;
      innodb | myrocks)
        start_server "$e"
        s=$(server_settings)
        [ "$e" = innodb ] && settings_innodb=$s || settings_myrocks=$s
        flags+=(--socket "$SCRATCH/server/mysqld.sock" --datadir "$SCRATCH/server/data"
          --server-pid "$server_pid") ;;
      *) echo "unknown engine $e (table, innodb, myrocks)" >&2; exit 2 ;;
    esac
    if ! "$HARNESS" "${flags[@]}" >"$log.stdout" 2>"$log.stderr"; then
      echo "latte: FAILED: run $r $e: $(tail -1 "$log.stderr")" >&2
      failures=$((failures + 1))
    fi
    stop_server
    rm -rf "$SCRATCH/server" "$SCRATCH/table"
    rm -f /dev/shm/shale-latte-$$.pmem
  done
done

servers="MariaDB: $MARIADB_VERSION. InnoDB server: ${settings_innodb:-not run}. MyRocks server: ${settings_myrocks:-not run}."
"$HARNESS" latte-summary --out "$OUT" --records "$RECORDS" --operations "$OPS" \
  --threads "$THREADS" --cache-size "$CACHE_SIZE" --workloads "$WORKLOADS" \
  --command "$command" --servers "$servers"
echo "results in $OUT ($failures failed runs)"
[ "$failures" -eq 0 ]
