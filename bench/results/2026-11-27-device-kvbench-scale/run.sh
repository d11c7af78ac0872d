#!/usr/bin/env bash
# Issue #11: one volume, 4 KiB values, a few million operations per engine, hash against
# RocksDB 11.8.1 (shale-compare kvbench, WAL synced per write) and shale-lsm (synced), one
# after the other, each on /dev/shm, on the 16-core machine. Each workload capped at 25 s.
set -u
cd "$(dirname "$0")/.."
O=${OUT:-/tmp/out}; mkdir -p "$O"
exec > >(tee "$O/log.txt") 2>&1
gunzip -c .devrun/shale.gz > /tmp/shale && chmod +x /tmp/shale
gunzip -c .devrun/sc.gz > /tmp/sc && chmod +x /tmp/sc
echo "== $(date -u +%T) $(nproc) CPUs"
D=/dev/shm/kv2; rm -rf $D; mkdir -p $D
F=(--num ${NUM:-2000000} --operations ${NUM:-2000000} --key_size 16 --value_size 4096
   --workloads seqfill,randfill,ycsb-a,ycsb-c --threads_per_instance 1 --pin --duration ${DUR:-25}
   --csv "$O/runs.csv")
for e in hash rocksdb lsm; do
  echo "== $e at $(date -u +%T)"
  rm -rf $D/*
  case $e in
    hash) cmd=(/tmp/shale kvbench --engine hash --queue_depth 32 --paths $D/v "${F[@]}") ;;
    rocksdb) cmd=(/tmp/sc kvbench --paths $D/db --sync "${F[@]}") ;;
    lsm) cmd=(/tmp/shale kvbench --engine lsm --paths $D/l --sync "${F[@]}") ;;
  esac
  echo "# ${cmd[*]}" > "$O/$e.txt"
  timeout ${LIMIT:-125} "${cmd[@]}" >> "$O/$e.txt" 2>&1
  echo "$e rc=$?"
  grep -E "^[a-z-]+ +(:|cpu|write amp)" "$O/$e.txt"
done
rm -rf $D
