#!/usr/bin/env bash
# Third device run: (1) the table engine by client threads with memory as the device, the
# build before (83ada67) against the striped lock table, one-hold cached reads and schemas
# outside the store's mutex; (2) hash-engine volumes on independent RAM block devices
# (brd, else null_blk, else loop devices over tmpfs files), one volume alone and under a
# busy machine, then 2 to 16.
set -u
cd "$(dirname "$0")/.."
trap 'kill "${SPIN[@]}" 2>/dev/null' EXIT
START=$(date +%s)
DEADLINE=$((START + ${BUDGET:-240}))
left() { echo $((DEADLINE - $(date +%s))); }
for b in shale shale-new; do [ -x .devrun/$b ] || { gunzip -c .devrun/$b.gz > .devrun/$b && chmod +x .devrun/$b; }; done
R=${OUT:-/tmp/out}/r
mkdir -p "$R"
exec > >(tee -a "${OUT:-/tmp/out}/log.txt") 2>&1
echo "== start $(date -u +%T), $(nproc) CPUs"

echo "== table threads on /dev/shm, old against new"
d=$(mktemp -d /dev/shm/tt.XXXXXX)
for r in 1 2; do
  for b in shale shale-new; do
    for t in ${TT_THREADS:-2 16}; do
      rm -rf "$d"/*
      for w in load a b c; do
        [ "$(left)" -gt 130 ] || { echo "table: out of time"; break 4; }
        if [ $w = load ]; then ph=(--phase load); ops=0; else ph=(--phase run --use_existing_db --workload $w); fi
        case $w in a) ops=${TT_OPS:-60000} ;; b) ops=$((${TT_OPS:-60000} * 2)) ;; c) ops=$((${TT_OPS:-60000} * 4)) ;; esac
        timeout 40 .devrun/$b ycsb --engine table "${ph[@]}" --db "$d/db" --pmem_path "$d/undo.pmem" \
          --records ${TT_RECORDS:-100000} --operations $ops --threads $t \
          --cache_size 67108864 --statistics >"$R/table-$b-t$t-$w-r$r.txt" 2>&1
        awk -F', ' -v b=$b -v t=$t -v w=$w -v r=$r '/^\[OVERALL\], Throughput/ { o = $3 }
          /^\[(INSERT|UPDATE|READ)\], 50thPercentileLatency/ { p = p " " $1 " p50 " $3 }
          END { printf "table %s r%s threads %s %s: %.0f ops/s%s\n", b, r, t, w, o, p }' "$R/table-$b-t$t-$w-r$r.txt"
      done
    done
  done
done
rm -rf "$d"

echo "== RAM block devices $(date -u +%T), $(left) s left"
N=$(nproc)
kind=none; devs=()
if modprobe brd rd_nr=$N rd_size=1048576 2>/dev/null && [ -b /dev/ram0 ]; then
  kind=brd; for i in $(seq 0 $((N - 1))); do devs+=(/dev/ram$i); done
elif modprobe null_blk nr_devices=$N memory_backed=1 gb=1 2>/dev/null && [ -b /dev/nullb0 ]; then
  kind=null_blk; for i in $(seq 0 $((N - 1))); do devs+=(/dev/nullb$i); done
else
  kind=loop-over-tmpfs; mkdir -p /dev/shm/lo
  for i in $(seq 0 $((N - 1))); do
    truncate -s 1G /dev/shm/lo/f$i
    devs+=("$(losetup --direct-io=on --find --show /dev/shm/lo/f$i 2>/dev/null || losetup --find --show /dev/shm/lo/f$i)")
  done
fi
echo "devices: $kind: ${devs[*]}"
SPIN=()
spin() { local c; for c in "$@"; do taskset -c "$c" sh -c 'while :; do :; done' & SPIN+=($!); done; }
unspin() { kill "${SPIN[@]}" 2>/dev/null; wait "${SPIN[@]}" 2>/dev/null; SPIN=(); }
kv() { # name cpulist n
  local name=$1 cpus=$2 n=$3
  [ "$(left)" -gt 15 ] || { echo "kv $name: out of time"; return; }
  local paths dv; paths=$(IFS=,; echo "${devs[*]:0:$n}")
  # Emptied devices: discarded where they can be, their first 8 KiB zeroed (shale opens
  # no device that holds data).
  for dv in "${devs[@]:0:$n}"; do
    blkdiscard -f "$dv" 2>/dev/null
    dd if=/dev/zero of="$dv" bs=8k count=1 oflag=direct conv=notrunc status=none
  done
  timeout 60 taskset -c "$cpus" .devrun/shale-new kvbench --engine hash --paths "$paths" \
    --num ${KV_NUM:-20000} --operations 100000000 --value_size 4096 --queue_depth 8 --pin --duration ${KV_DURATION:-4} \
    --workloads randfill,ycsb-c --csv "$R/kv.csv" --run "$name" >"$R/kv-$name.txt" 2>&1
  echo "rc=$?" >>"$R/kv-$name.txt"
  awk -F, -v run="$name" '$2 == run && $4 == "total" && $3 != "session" {printf "kv %s: %s %.0f ops/s\n", run, $3, $14}' "$R/kv.csv"
}
if [ ${#devs[@]} -ge "$N" ] && [ -n "${devs[0]}" ]; then
  for r in 1 2; do
    kv "one-alone-r$r" 0 1
    spin $(seq 1 $((N - 1))); kv "one-others-busy-r$r" 0 1; unspin
    for n in 2 4 8 16; do [ "$n" -le "$N" ] && kv "n$n-r$r" "0-$((N - 1))" $n; done
  done
else
  echo "no RAM block devices here"
fi
[ "$kind" = loop-over-tmpfs ] && { for dv in "${devs[@]}"; do losetup -d "$dv" 2>/dev/null; done; rm -rf /dev/shm/lo; }
echo "== done at $(date -u +%T), $(( $(date +%s) - START )) s"
tar -czf "${OUT:-/tmp/out}/results3.tgz" -C "$R" .
