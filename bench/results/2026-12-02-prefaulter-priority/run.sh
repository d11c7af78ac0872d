#!/bin/bash
# shale serve builds and flags against Redis 7, alternating within each repeat, redis-benchmark
# with 50 clients and 100,000 requests a test (as bench/serve.sh), one fresh server each.
# CONFIGS: one line per entry, "name|binary|flags"; the name "redis" runs redis-server.
# Environment: REPEATS=3 PIPES=1 TESTS=set,get,mset,incr POLICY=everysec N=100000 OUT=dir
# The 2026-12-02 pass (BENCHMARKS-history.md, "where unpipelined serve requests wait, and the
# memtable prefaulter at the stores' background priority"):
#   CONFIGS='redis||
#   old-low|<f682c91>|
#   new-low|<8a2104c>|
#   old-idle|<f682c91>|--background_cpu_priority idle
#   new-idle|<8a2104c>|--background_cpu_priority idle' REPEATS=6 OUT=... run.sh
# write-buffer-runs.csv: CONFIGS of 8a2104c with --write_buffer_size 64, 16 and 8 MiB,
#   PIPES="1 16" REPEATS=3.
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
OUT=${OUT:-$here/out}; mkdir -p "$OUT"
REPEATS=${REPEATS:-3}; PIPES=${PIPES:-1}; TESTS=${TESTS:-set,get,mset,incr}
echo "config,pipe,repeat,test,rps,p50,p99,p999,max" > $OUT/runs.csv
port=6700
for r in $(seq $REPEATS); do
  while IFS='|' read -r name bin args; do
    [ -z "$name" ] && continue
    port=$((port+1)); d=$(mktemp -d /var/tmp/alt.XXXX)
    if [ "$name" = redis ]; then
      redis-server --port $port --bind 127.0.0.1 --appendonly yes --appendfsync ${POLICY:-everysec} --save "" --dir $d --daemonize no --logfile $d/redis.log >/dev/null 2>&1 &
    else
      $bin serve --db $d/store --port $port --appendfsync ${POLICY:-everysec} $args > $d/log 2>&1 &
    fi
    pid=$!
    for i in $(seq 200); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.1; done
    for pipe in $PIPES; do
      redis-benchmark -p $port -c 50 -n ${N:-100000} -P $pipe -r 100000 -t $TESTS > $OUT/raw-$name-$pipe-$r.txt 2>/dev/null
      python3 $root/bench/lib/tails.py --redis-benchmark $OUT/raw-$name-$pipe-$r.txt | while IFS=, read -r t rps p50 p99 p999 max; do
        echo "$name,$pipe,$r,${t%% *},$rps,$p50,$p99,$p999,$max" >> $OUT/runs.csv; done
    done
    kill $pid; wait $pid 2>/dev/null; rm -rf $d
  done <<< "$CONFIGS"
done
python3 $here/summary.py $OUT/runs.csv
