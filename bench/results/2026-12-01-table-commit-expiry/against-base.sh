#!/usr/bin/env bash
# The 2-core target of issue #45 for the table engine, in one run: the baseline
# (5b3c8fc, before part 2) against the one-change commit without the store lock (4e13654), YCSB A, B, C at 64
# threads, memory as the device, 50,000 rows and operations, alternating, three repeats.
set -u
O=/work/exp/commitbase/out; mkdir -p $O
L=/dev/shm/tbl-load
rm -rf $L
/work/bin/shale-5b3c8fc ycsb --engine table --records 50000 --operations 1 --threads 64 --workload a --phase load --db $L > $O/load.txt 2>&1
for r in 1 2 3; do
  for w in a b c; do
    for b in 5b3c8fc commit; do
      D=/dev/shm/tbl-run; rm -rf $D; cp -r $L $D
      f=$O/$b-$w-64-r$r.txt
      /work/bin/shale-$b ycsb --engine table --records 50000 --operations 50000 --threads 64 --workload $w --phase run --use_existing_db --db $D --contention > $f 2>&1
      ops=$(awk -F', ' '/^\[OVERALL\], Throughput/ {printf "%.0f", $3}' $f)
      wait=$(awk '/^contention table: store mutex/ {for(i=1;i<=NF;i++) if ($i=="waited") {w+=$(i+1)}} END {printf "%.1f", w}' $f)
      all=$(awk '/^contention / {for(i=1;i<=NF;i++) if ($i=="waited") {w+=$(i+1)}} END {printf "%.1f", w}' $f)
      p99=$(awk -F', ' '/99thPercentileLatency/ {printf "%s:%s ", $1, $3}' $f)
      echo "$b $w 64 r$r ops=$ops storewait=$wait allwait=$all $p99"
    done
  done
done
rm -rf /dev/shm/tbl-run $L
