#!/usr/bin/env bash
# One device run (16 cores): #11 kv scaling with pinned workers, #12 affinity modes and
# thread counts, #15's fillrandom on the landed build. Every part bounded by a deadline.
set -u
cd "$(dirname "$0")/.."
START=$(date +%s)
DEADLINE=$((START + ${BUDGET:-470}))
left() { echo $((DEADLINE - $(date +%s))); }
export LD_LIBRARY_PATH=$PWD/.devrun${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for b in shale db_bench; do [ -x .devrun/$b ] || { gunzip -c .devrun/$b.gz > .devrun/$b && chmod +x .devrun/$b; }; done
SHALE=$PWD/.devrun/shale
DB_BENCH=$PWD/.devrun/db_bench
R=${OUT:-/tmp/out}/r
mkdir -p "$R"
LOG=${OUT:-/tmp/out}/log.txt
exec > >(tee -a "$LOG") 2>&1
S=${SCALE:-1}   # 1 on the device; a local dry run sets smaller sizes through the variables below

echo "== machine $(date -u +%T): $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo)"
df -h /var/tmp /dev/shm | tail -2
"$SHALE" --version; "$DB_BENCH" --version 2>&1 | head -1

part() { # name min_seconds -> 0 when there is time for it
  local l; l=$(left)
  if [ "$l" -lt "$2" ]; then echo "== $1 skipped: $l s left, needs $2"; return 1; fi
  echo "== $1 at $(date -u +%T), $l s left"
}

if part kv-tmpfs 150; then
  SHALE=$SHALE DB_BENCH=$DB_BENCH PARTS=kv KV_MEDIA=tmpfs KV_VOLUMES="${KV_VOLUMES:-2 4 8 16}" \
    KV_REPEATS=2 DURATION=${KV_DURATION:-4} KV_NUM=${KV_NUM:-20000} OUT=$R/kv-tmpfs \
    timeout $(($(left) - 20)) bench/scaling.sh
fi

if part latte-affinity 100; then
  SHALE=$SHALE THREADS=${AFF_THREADS:-8} QUEUES="${AFF_QUEUES:-1 2 4 8}" REPEATS=2 \
    RECORDS=${AFF_RECORDS:-20000} SCRATCH=/var/tmp OUT=$R/latte-affinity \
    timeout $(($(left) - 20)) bash bench/latte_affinity.sh
fi

# The table engine by client threads: load, then A, B, D, each operation a durable transaction.
if part table-threads 80; then
  d=$(mktemp -d /var/tmp/shale-tt.XXXXXX)
  for t in ${TT_THREADS:-2 16}; do
    rm -rf "$d"/*
    for w in load a b d; do
      [ "$(left)" -gt 25 ] || { echo "table-threads: out of time"; break 2; }
      if [ $w = load ]; then ph=(--phase load); else ph=(--phase run --use_existing_db --workload $w); fi
      timeout 60 "$SHALE" ycsb --engine table "${ph[@]}" --db "$d/db" --pmem_path "$d/undo.pmem" \
        --records ${TT_RECORDS:-100000} --operations ${TT_OPS:-50000} --threads $t \
        --cache_size 67108864 --statistics >"$R/table-t$t-$w.txt" 2>&1
      echo "rc=$?" >>"$R/table-t$t-$w.txt"
      awk -F', ' -v t=$t -v w=$w '/^\[OVERALL\], Throughput/ { o = $3 }
        /^\[(INSERT|UPDATE|READ)\], 50thPercentileLatency/ { p = p " " $1 " p50 " $3 }
        END { printf "table threads %s %s: %s ops/s%s\n", t, w, o, p }' "$R/table-t$t-$w.txt"
    done
  done
  rm -rf "$d"
fi

if part kv-disk 70; then
  SHALE=$SHALE DB_BENCH=$DB_BENCH PARTS=kv KV_MEDIA=disk KV_VOLUMES="${KV_VOLUMES:-2 4 8 16}" \
    KV_REPEATS=1 DURATION=${KV_DURATION:-4} KV_NUM=${KV_NUM:-20000} OUT=$R/kv-disk \
    timeout $(($(left) - 10)) bench/scaling.sh
fi

if part fill 45; then
  SHALE=$SHALE DB_BENCH=$DB_BENCH PARTS=fill FILL_THREADS="${FILL_THREADS:-16 32}" REPEATS=1 \
    DURATION=${KV_DURATION:-4} OUT=$R/fill timeout $(($(left) - 5)) bench/scaling.sh
fi

echo "== done at $(date -u +%T), $(( $(date +%s) - START )) s"
tar -czf "${OUT:-/tmp/out}/results.tgz" -C "$R" .
