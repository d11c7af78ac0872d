#!/usr/bin/env bash
# Issue #11: the hash engine's write amplification at 10M puts of 4 KiB on one volume
# (randfill over 10M keys, every store durable), after checkpoint_log_ratio (871d19b) and batch tails carried (6082025);
# same flags as bench/results/2026-11-28-device-kvbench-10m/run.sh.
set -u
O=${OUT:-/tmp/out}; mkdir -p "$O"
gunzip -c .devrun/shale.gz > /tmp/shale && chmod +x /tmp/shale   # shale built at 6082025, stripped
echo "== $(date -u +%T) $(nproc) CPUs; $(df -h /dev/shm | tail -1)"
D=/dev/shm/kv10; rm -rf $D; mkdir -p $D
cmd=(/tmp/shale kvbench --engine hash --queue_depth 32 --paths $D/v --num 10000000
     --operations 10000000 --key_size 16 --value_size 4096 --workloads randfill
     --threads_per_instance 1 --pin --duration 260 --csv "$O/runs-hash.csv")
echo "# ${cmd[*]}" > "$O/hash.txt"
timeout 400 "${cmd[@]}" >> "$O/hash.txt" 2>&1
echo "rc=$? at $(date -u +%T)"
cat "$O/hash.txt"
rm -rf $D
