#!/usr/bin/env bash
# The whole thread sweep of bench/scaling.sh (every engine and RocksDB 11.8.1, 1 to 64
# threads, one repeat of 3 s a run) on the lent 16-core machine, right after
# ../2026-11-30-device-16core/run.sh on the same machine and binaries (.devrun/, shale at
# 0e302cd, db_bench 11.8.1 release): 368 s of the lease.
export LD_LIBRARY_PATH=$PWD/.devrun
for b in shale db_bench; do
  [ -x .devrun/$b ] || { gunzip -c .devrun/$b.gz >.devrun/$b; chmod +x .devrun/$b; }
done
SHALE=$PWD/.devrun/shale DB_BENCH=$PWD/.devrun/db_bench DURATION=3 KV_VOLUMES="4 8 16" \
  OUT=$OUT/sweep timeout 410 bash bench/scaling.sh
