#!/usr/bin/env bash
# Columns of summary.txt: ops/s, p99, p99.9 write us, stall us (all, memtable, L0 slowdown), p50 write us, longest write us.
# hdd class: the L0-count pace (412b849's engine) against 24c1650's (debt, and slower as L0 grows).
cd /work/main
for r in 1 2; do
  for v in slow2 l0count; do
    out=/work/exp/hdd-ab/$v-r$r; rm -rf $out; mkdir -p $out
    OUT=$out SUITES=fillrandom DEVICES=hdd CONFIGS=shale-adoc DURATION=300 SHALE=/work/bin/shale-$v CACHE=/work/rocksdb-11.8.1 bash bench/adoc.sh > $out.log 2>&1
    echo "$v r$r: $(cut -d, -f7,10,11,12,13,14,30,31 $out/runs.csv | tail -1)"
  done
done
