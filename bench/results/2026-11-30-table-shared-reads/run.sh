#!/usr/bin/env bash
# Table engine, 2 cores: store lock shared for cached point reads (rw) against 0e302cd.
set -u
O=/work/exp/rw/out; mkdir -p $O
L=/dev/shm/tbl-load
rm -rf $L
/work/bin/shale-0e302cd ycsb --engine table --records 50000 --operations 1 --threads 64 --workload a --phase load --db $L > $O/load.txt 2>&1
for r in 1 2 3; do
  for w in a b c; do
    for T in 64 2; do
      for b in 0e302cd rw; do
        D=/dev/shm/tbl-run; rm -rf $D; cp -r $L $D
        /work/bin/shale-$b ycsb --engine table --records 50000 --operations 50000 --threads $T --workload $w --phase run --use_existing_db --db $D --contention > $O/$b-$w-$T-r$r.txt 2>&1
        ops=$(awk -F', ' '/^\[OVERALL\], Throughput/ {printf "%.0f", $3}' $O/$b-$w-$T-r$r.txt)
        wait=$(awk '/^contention table: store mutex/ {for(i=1;i<=NF;i++) if ($i=="waited") {w+=$(i+1)}} END {printf "%.1f", w}' $O/$b-$w-$T-r$r.txt)
        echo "$b $w $T r$r ops=$ops storewait=$wait"
      done
    done
  done
done
rm -rf /dev/shm/tbl-run $L
