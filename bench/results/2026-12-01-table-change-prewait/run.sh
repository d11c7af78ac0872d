#!/usr/bin/env bash
# Table engine, 2 cores: a change waits for the undo log latch to be free before it takes
# the store lock ("prewait") against 4e13654 ("commit"). Memory as the
# device (/dev/shm), 50,000 rows, YCSB A, B, C, 64 and 2 client threads, 50,000
# operations, alternating, three repeats.
set -u
O=/work/exp/prewait/out; mkdir -p $O
L=/dev/shm/tbl-load
rm -rf $L
/work/bin/shale-commit ycsb --engine table --records 50000 --operations 1 --threads 64 --workload a --phase load --db $L > $O/load.txt 2>&1
run() { # build workload threads ops tag
  local b=$1 w=$2 T=$3 n=$4 tag=$5
  D=/dev/shm/tbl-run; rm -rf $D; cp -r $L $D
  /work/bin/shale-$b ycsb --engine table --records 50000 --operations $n --threads $T --workload $w --phase run --use_existing_db --db $D --contention > $O/$b-$w-$T-$n-$tag.txt 2>&1
  ops=$(awk -F', ' '/^\[OVERALL\], Throughput/ {printf "%.0f", $3}' $O/$b-$w-$T-$n-$tag.txt)
  wait=$(awk '/^contention table: store mutex/ {for(i=1;i<=NF;i++) if ($i=="waited") {w+=$(i+1)}} END {printf "%.1f", w}' $O/$b-$w-$T-$n-$tag.txt)
  all=$(awk '/^contention / {for(i=1;i<=NF;i++) if ($i=="waited") {w+=$(i+1)}} END {printf "%.1f", w}' $O/$b-$w-$T-$n-$tag.txt)
  p99=$(awk -F', ' '/99thPercentileLatency/ {printf "%s:%s ", $1, $3}' $O/$b-$w-$T-$n-$tag.txt)
  echo "$b $w $T $n $tag ops=$ops storewait=$wait allwait=$all $p99"
}
for r in 1 2 3; do
  for w in a b c; do
    for T in 64 2; do
      for b in commit prewait; do run $b $w $T 50000 r$r; done
    done
  done
done
rm -rf /dev/shm/tbl-run $L
