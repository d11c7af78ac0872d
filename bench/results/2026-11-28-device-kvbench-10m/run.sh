#!/usr/bin/env bash
# Issue #11: one volume, 4 KiB values, 10M operations per workload (randfill over 10M keys,
# then YCSB C, 10M reads), one engine per call (E=hash|rocksdb), on /dev/shm of the
# 16-core machine. hash: shale kvbench --engine hash; rocksdb: RocksDB 11.8.1 release through
# shale-compare kvbench, WAL synced per write (hash stores are durable per store).
set -u
cd "$(dirname "$0")/.."
O=${OUT:-/tmp/out}; mkdir -p "$O"
e=${E:?E=hash|rocksdb}
exec > >(tee "$O/log-$e.txt") 2>&1
case $e in
  hash) gunzip -c .devrun/shale.gz > /tmp/shale && chmod +x /tmp/shale ;;
  rocksdb) gunzip -c .devrun/sc.gz > /tmp/sc && chmod +x /tmp/sc ;;
esac
echo "== $(date -u +%T) $(nproc) CPUs; $(df -h /dev/shm | tail -1)"
D=/dev/shm/kv10; rm -rf $D; mkdir -p $D
F=(--num 10000000 --operations 10000000 --key_size 16 --value_size 4096
   --workloads randfill,ycsb-c --threads_per_instance 1 --pin --duration ${DUR:-260}
   --csv "$O/runs-$e.csv")
case $e in
  hash) cmd=(/tmp/shale kvbench --engine hash --queue_depth 32 --paths $D/v "${F[@]}") ;;
  rocksdb) cmd=(/tmp/sc kvbench --paths $D/db --sync "${F[@]}") ;;
esac
echo "# ${cmd[*]}" > "$O/$e.txt"
timeout ${LIMIT:-560} "${cmd[@]}" >> "$O/$e.txt" 2>&1
echo "$e rc=$? at $(date -u +%T)"
grep -E "^[a-z-]+ +(:|cpu|write amp)" "$O/$e.txt"
du -sh $D; rm -rf $D
