#!/usr/bin/env bash
# One device run (16 cores) for issue #45's 16-core targets on the current engine:
#   1. bench/scaling.sh: lsm fillsync (1, 16, 64 threads) and fillrandom (1, 16, 32) against
#      RocksDB 11.8.1, the table engine's YCSB C, B, A at 2 and 16 threads (memory as the
#      device), the hash engine on 1 and 8 tmpfs volumes; medians of two alternating runs;
#   2. the hash engine on 1 and 8 volumes again with the eight CPUs the volumes do not use
#      kept busy by spinners (the target's "beside busy CPUs");
#   3. each engine's contention profile (`--contention`) on its widest run.
# Every part is bounded by a deadline (BUDGET seconds from the start), so the run fits the
# lent machine's time. Binaries travel gzipped in .devrun/ (stripped release builds of shale
# and of RocksDB 11.8.1's db_bench, with db_bench's libgflags), which git ignores.
# Everything comes back in $OUT: log.txt, the scaling summary, and results.tgz (every raw log).
set -u
cd "$(dirname "$0")/../../.."
START=$(date +%s)
DEADLINE=$((START + ${BUDGET:-500}))
left() { echo $((DEADLINE - $(date +%s))); }
export LD_LIBRARY_PATH=$PWD/.devrun${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
for b in shale db_bench; do
  [ -x .devrun/$b ] || { gunzip -c .devrun/$b.gz >.devrun/$b && chmod +x .devrun/$b; }
done
SHALE=$PWD/.devrun/shale
DB_BENCH=$PWD/.devrun/db_bench
O=${OUT:-/tmp/out}
R=$O/r
mkdir -p "$R"
exec > >(tee -a "$O/log.txt") 2>&1
S=${SCALE:-1} # 1 on the device; a local dry run makes everything smaller

echo "== machine $(date -u +%T): $(nproc) CPUs, $(uname -r), $(grep -m1 'model name' /proc/cpuinfo)"
df -h /var/tmp /dev/shm | tail -2
"$SHALE" --version
"$DB_BENCH" --version 2>&1 | head -1

part() { # name min_seconds -> 0 when there is time for it
  local l
  l=$(left)
  if [ "$l" -lt "$2" ]; then
    echo "== $1 skipped: $l s left, needs $2"
    return 1
  fi
  echo "== $1 at $(date -u +%T), $l s left"
}

if part scaling 200; then
  SHALE=$SHALE DB_BENCH=$DB_BENCH REPEATS=2 KV_REPEATS=2 DURATION=${DURATION:-4} \
    SYNC_THREADS="${SYNC_THREADS:-1 16 64}" FILL_THREADS="${FILL_THREADS:-1 16 32}" \
    TABLE_THREADS="${TABLE_THREADS:-2 16}" TABLE_RECORDS=$((200000 / S)) TABLE_OPS=$((400000 / S)) \
    KV_VOLUMES="${KV_VOLUMES:-8}" KV_NUM=$((20000 / S)) KV_MEDIA=tmpfs \
    PARTS="${PARTS:-sync fill table kv}" OUT=$R/scaling \
    timeout $(($(left) - 120)) bash bench/scaling.sh
  echo "scaling.sh rc=$?"
fi

# The hash engine with the CPUs beside its volumes busy: instance i runs on CPU i (--pin), so
# spinners take CPUs 8..N-1 for both the one-volume and the eight-volume run.
if part kv-busy 60 && [ "$(nproc)" -ge 16 ]; then
  spin=()
  for c in $(seq 8 $(($(nproc) - 1))); do
    taskset -c "$c" sh -c 'while :; do :; done' &
    spin+=($!)
  done
  for r in 1 2; do
    for n in 1 8; do
      paths=$(for i in $(seq 1 "$n"); do printf '/dev/shm/shale-busy-kv%s,' "$i"; done)
      rm -rf /dev/shm/shale-busy-kv*
      timeout 60 "$SHALE" kvbench --engine hash --paths "${paths%,}" --num $((20000 / S)) \
        --operations 100000000 --value_size 4096 --queue_depth 8 --pin --duration 4 \
        --workloads randfill,ycsb-c --csv "$R/kv-busy.csv" --run "busy-n$n-r$r" \
        >"$R/kv-busy-n$n-r$r.txt" 2>&1
      echo "rc=$?" >>"$R/kv-busy-n$n-r$r.txt"
      awk -F, -v run="busy-n$n-r$r" '$2 == run && $4 == "total" && $3 != "session" {printf "kv busy %s %s: %.0f ops/s\n", run, $3, $14}' "$R/kv-busy.csv"
    done
  done
  rm -rf /dev/shm/shale-busy-kv*
  kill "${spin[@]}" 2>/dev/null
  wait "${spin[@]}" 2>/dev/null
fi

if part contention-table 40; then
  T=/dev/shm/shale-contention-table
  rm -rf "$T"
  timeout 120 "$SHALE" ycsb --engine table --phase load --db "$T" --records $((200000 / S)) \
    --threads 8 >"$R/contention-table-load.txt" 2>&1
  for wl in b a; do
    echo "# table workload $wl, 16 threads, contention profile"
    timeout 60 "$SHALE" ycsb --engine table --phase run --use_existing_db --db "$T" --workload "$wl" \
      --records $((200000 / S)) --operations $((100000 / S)) --threads 16 --contention \
      >"$R/contention-table-$wl.txt" 2>&1
    grep -E '^(\[OVERALL\], Throughput|contention )' "$R/contention-table-$wl.txt"
  done
  rm -rf "$T"
fi

if part contention-lsm 30; then
  D=/var/tmp/shale-contention-lsm
  for run in "fillrandom 32" "fillsync 64"; do
    set -- $run
    rm -rf "$D"
    echo "# lsm $1, $2 threads, contention profile"
    timeout 60 "$SHALE" bench --db="$D" --benchmarks="$1" --threads="$2" --duration=2 \
      --num=100000000 --value_size=1024 --contention >"$R/contention-lsm-$1.txt" 2>&1
    grep -E "^($1 +:|contention )" "$R/contention-lsm-$1.txt"
  done
  rm -rf "$D"
fi

if part contention-hash 25; then
  paths=$(for i in $(seq 1 8); do printf '/dev/shm/shale-contention-kv%s,' "$i"; done)
  echo "# hash, 8 volumes, contention profile"
  timeout 60 "$SHALE" kvbench --engine hash --paths "${paths%,}" --num $((50000 / S)) \
    --value_size 4096 --workloads randfill,ycsb-c --pin --contention \
    >"$R/contention-hash.txt" 2>&1
  grep -E '^(randfill|ycsb-c) +:|^contention ' "$R/contention-hash.txt"
  rm -rf /dev/shm/shale-contention-kv*
fi

cp "$R/scaling/README.md" "$O/scaling.md" 2>/dev/null
cp "$R/scaling/scaling.csv" "$O/scaling.csv" 2>/dev/null
tar -czf "$O/results.tgz" -C "$O" r
echo "== done $(date -u +%T), $(left) s left"
