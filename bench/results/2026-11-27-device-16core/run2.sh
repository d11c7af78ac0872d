#!/usr/bin/env bash
# Second device run: why one hash volume runs faster than each of N (topology, SMT siblings,
# busy neighbours), and the table engine's affinity modes and threads with memory as the device.
set -u
trap 'kill "${SPIN[@]}" 2>/dev/null' EXIT
cd "$(dirname "$0")/.."
START=$(date +%s)
DEADLINE=$((START + ${BUDGET:-330}))
left() { echo $((DEADLINE - $(date +%s))); }
for b in shale; do [ -x .devrun/$b ] || { gunzip -c .devrun/$b.gz > .devrun/$b && chmod +x .devrun/$b; }; done
SHALE=$PWD/.devrun/shale
R=${OUT:-/tmp/out}/r
mkdir -p "$R"
exec > >(tee -a "${OUT:-/tmp/out}/log.txt") 2>&1
DUR=${KV_DURATION:-4}
NUM=${KV_NUM:-20000}

echo "== topology $(date -u +%T)"
lscpu | grep -E 'Model name|Socket|Core|Thread|NUMA|MHz|L3'
lscpu -e=CPU,CORE,SOCKET,NODE 2>/dev/null | head -20
for c in /sys/devices/system/cpu/cpu[0-9]*; do printf '%s:%s ' "${c##*cpu}" "$(cat $c/topology/thread_siblings_list)"; done; echo
# One CPU per physical core, and the first CPU's sibling (if any).
cores=$(for c in /sys/devices/system/cpu/cpu[0-9]*; do cut -d, -f1 < $c/topology/thread_siblings_list | cut -d- -f1; done | sort -nu | tr '\n' ',' | sed 's/,$//')
sib=$(cut -d, -f2 < /sys/devices/system/cpu/cpu0/topology/thread_siblings_list | cut -d- -f2)
echo "one CPU per core: $cores; cpu0's siblings: $(cat /sys/devices/system/cpu/cpu0/topology/thread_siblings_list)"

shm=$(mktemp -d /dev/shm/kv.XXXXXX)
kv() { # name cpulist n
  local name=$1 cpus=$2 n=$3 paths=() i
  [ "$(left)" -gt 20 ] || { echo "kv $name: out of time"; return; }
  for i in $(seq 1 "$n"); do paths+=("$shm/v$i"); done
  rm -rf "$shm"/v*
  timeout 60 taskset -c "$cpus" "$SHALE" kvbench --engine hash --paths "$(IFS=,; echo "${paths[*]}")" \
    --num "$NUM" --operations 100000000 --value_size 4096 --queue_depth 8 --pin --duration "$DUR" \
    --workloads randfill,ycsb-c --csv "$R/kv.csv" --run "$name" >"$R/kv-$name.txt" 2>&1
  rm -rf "$shm"/v*
  awk -F, -v run="$name" '$2 == run && $4 == "total" {printf "kv %s (cpus %s): %s %.0f ops/s\n", run, "'"$cpus"'", $3, $14}' "$R/kv.csv"
}
SPIN=()
spin() { # cpus... -> a busy loop on each
  local c
  for c in "$@"; do taskset -c "$c" sh -c 'while :; do :; done' & SPIN+=($!); done
}
unspin() { kill "${SPIN[@]}" 2>/dev/null; wait "${SPIN[@]}" 2>/dev/null; SPIN=(); }
first=${cores%%,*}
cores8=$(echo "$cores" | cut -d, -f1-8)
cores2=$(echo "$cores" | cut -d, -f1-2)
for r in 1 2; do
  kv "one-alone-r$r" 0 1
  spin $(seq 1 $(($(nproc) - 1))); kv "one-others-busy-r$r" 0 1; unspin
  if [ -n "$sib" ] && [ "$sib" != 0 ]; then
    spin "$sib"; kv "one-sibling-busy-r$r" 0 1; unspin
    kv "two-siblings-r$r" "0,$sib" 2
  fi
  kv "two-cores-r$r" "$cores2" 2
  kv "eight-cores-r$r" "$cores8" 8
  kv "sixteen-r$r" "0-$(($(nproc) - 1))" 16
done
rm -rf "$shm"

echo "== latte affinity on /dev/shm $(date -u +%T), $(left) s left"
if [ "$(left)" -gt 90 ]; then
  SHALE=$SHALE THREADS=8 QUEUES="1 2 4 8" REPEATS=2 RECORDS=${AFF_RECORDS:-20000} SCRATCH=/dev/shm \
    OUT=$R/latte-affinity-shm timeout $(($(left) - 40)) bash bench/latte_affinity.sh
fi

echo "== table threads on /dev/shm $(date -u +%T), $(left) s left"
d=$(mktemp -d /dev/shm/tt.XXXXXX)
for t in 2 16; do
  rm -rf "$d"/*
  for w in load a b d; do
    [ "$(left)" -gt 10 ] || { echo "table-threads: out of time"; break 2; }
    if [ $w = load ]; then ph=(--phase load); else ph=(--phase run --use_existing_db --workload $w); fi
    timeout 40 "$SHALE" ycsb --engine table "${ph[@]}" --db "$d/db" --pmem_path "$d/undo.pmem" \
      --records ${TT_RECORDS:-100000} --operations ${TT_OPS:-50000} --threads $t \
      --cache_size 67108864 --statistics >"$R/table-shm-t$t-$w.txt" 2>&1
    echo "rc=$?" >>"$R/table-shm-t$t-$w.txt"
    awk -F', ' -v t=$t -v w=$w '/^\[OVERALL\], Throughput/ { o = $3 }
      /^\[(INSERT|UPDATE|READ)\], 50thPercentileLatency/ { p = p " " $1 " p50 " $3 }
      END { printf "table on shm threads %s %s: %s ops/s%s\n", t, w, o, p }' "$R/table-shm-t$t-$w.txt"
  done
done
rm -rf "$d"
echo "== done at $(date -u +%T), $(( $(date +%s) - START )) s"
tar -czf "${OUT:-/tmp/out}/results2.tgz" -C "$R" .
