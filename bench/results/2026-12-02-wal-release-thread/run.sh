#!/usr/bin/env bash
# Before and after "a freed WAL group given back on a release thread" (BENCHMARKS-history.md,
# 2026-12-02): the runs of ../2026-12-02-wal-kept-group/run.sh (`shale bench --benchmarks
# fillsync,stats` at 16 and 1 threads on a fresh store in /var/tmp, builds alternating within
# each repeat), one line per run:
#   build threads repeat ops/s p50 p99 p99.9 max (us) wal_bytes_allocated_at_end
#
#   BUILDS="before=/path/shale after=/path/shale" REPEATS=5 bash run.sh > runs.txt
exec bash "$(dirname "$0")/../2026-12-02-wal-kept-group/run.sh"
