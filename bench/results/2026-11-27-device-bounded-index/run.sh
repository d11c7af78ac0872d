#!/usr/bin/env bash
# Issue #11: the bounded index's resident memory from 1M to 20M keys (100 B values), on the
# 16-core machine, each N its own process on its own CPU and its own tmpfs volume, all at once.
set -u
cd "$(dirname "$0")/.."
START=$(date +%s)
FINAL=${OUT:-/tmp/out}; OUTD=/tmp/r; mkdir -p "$OUTD" "$FINAL"
exec > >(tee "$FINAL/log.txt") 2>&1
gunzip -c .devrun/shale.gz > /tmp/shale && chmod +x /tmp/shale
echo "== $(date -u +%T) $(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo), $(free -g | sed -n 2p)"
df -h /dev/shm | tail -1
/tmp/shale --version
D=/dev/shm/kv; rm -rf $D; mkdir -p $D
cpu=1
pids=()
for spec in bounded:1000000 bounded:2000000 bounded:5000000 bounded:10000000 bounded:20000000 in-memory:1000000 in-memory:5000000 in-memory:20000000; do
  mode=${spec%%:*}; n=${spec##*:}
  name=$mode-$n
  ( taskset -c $cpu timeout ${LIMIT:-520} /tmp/shale kvbench --engine hash --paths $D/$name --num $n \
      --key_size 16 --value_size 100 --workloads seqfill,ycsb-c --operations 200000 --queue_depth 32 \
      --pin --index $mode --index_cache_bytes 16777216 > "$OUTD/$name.txt" 2>&1
    echo "$name rc=$? at $(( $(date +%s) - START )) s" >> "$OUTD/done.txt" ) &
  pids+=($!)
  cpu=$((cpu + 1))
done
# Every 10 s: each process's RSS and its volume's size (the fill's progress).
( while true; do
    t=$(( $(date +%s) - START ))
    for p in $(pgrep -f "/tmp/shale kvbench"); do
      path=$(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | sed -n 's/.*--paths \([^ ]*\).*/\1/p')
      rss=$(awk '/VmRSS/ {print $2}' /proc/$p/status 2>/dev/null)
      size=$(du -sk "$path" 2>/dev/null | cut -f1)
      echo "$t $(basename "$path") rss_kib=$rss volume_kib=$size"
    done >> "$OUTD/samples.txt"
    sleep 10
  done ) &
sampler=$!
for p in "${pids[@]}"; do wait "$p"; done
kill $sampler
cat "$OUTD/done.txt"
grep -h "seqfill  \|ycsb-c  \|# hash" "$OUTD"/*-*.txt | head -60
rm -rf $D
tar czf "$FINAL/r.tgz" -C /tmp r
