#!/usr/bin/env bash
# shale-adoc fillrandom on ADOC's SATA class by hand (bench/adoc.sh's device and flags):
# a 33 GiB sparse file in /var/tmp on a loop device (--direct-io=on), throttled to
# 367.5 MB/s reads and writes (cgroup v1 blkio), 300 s; before (yield: c30725f's lsm) and
# after (room: 0c9b82a, the flush room rule), alternating.
set -u
O=/work/exp/room/out; mkdir -p $O
img=/var/tmp/room.img
for r in ${RUNS:-1}; do
  for b in ${BUILDS:-yield room}; do
    rm -f $img; truncate -s 33G $img
    dev=$(losetup --direct-io=on --show -f $img)
    mm=$(cat /sys/block/${dev#/dev/}/dev)
    for f in read_bps write_bps; do echo "$mm 367500000" > /sys/fs/cgroup/blkio/blkio.throttle.${f}_device; done
    /work/bin/shale-$b bench --benchmarks=fillrandom,stats --num=10000000 --duration=300 --key_size=16 \
      --value_size=1000 --compression_type=none --bloom_bits=10 --level_compaction_dynamic_level_bytes=true \
      --cache_size=33554432 --seed=1 --histogram=1 --statistics=1 --write_buffer_size=67108864 \
      --db=$dev --tuner=adoc --timeline=$O/$b-r$r.timeline.csv > $O/$b-r$r.txt 2>&1
    for f in read_bps write_bps; do echo "$mm 0" > /sys/fs/cgroup/blkio/blkio.throttle.${f}_device; done
    losetup -d $dev; rm -f $img
    echo "$b r$r: $(grep -E '^fillrandom +:' $O/$b-r$r.txt | head -1)"
    grep -iE "waited.for.room|retried.for.room|deferred.for.room|stall.micros|l0.slowdown|memtable" $O/$b-r$r.txt | head -12
    grep -E "fillrandom.*latency|P99.9|Percentiles" $O/$b-r$r.txt | head -3
  done
done
