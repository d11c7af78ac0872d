#!/bin/bash
# quick.sh <engine> <threads> <pipe> <test> [policy]  -> prints rps
engine=$1; threads=$2; pipe=$3; test=$4; policy=${5:-everysec}
port=$((7000 + RANDOM % 1000)); dir=$(mktemp -d /work/svtmp.XXXX)
if [ $engine = redis ]; then
  redis-server --port $port --bind 127.0.0.1 --appendonly yes --appendfsync $policy --save "" --dir $dir --daemonize no --logfile $dir/r.log >/dev/null 2>&1 &
else
  ${SHALE_BIN:-/work/main/target/release/shale} serve --db $dir/store --port $port --appendfsync $policy --threads $threads > $dir/s.log 2>&1 &
fi
pid=$!
for i in $(seq 100); do redis-cli -p $port ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-benchmark -h 127.0.0.1 -p $port -c 50 -n ${N:-300000} -P $pipe -r 100000 -t $test --csv 2>/dev/null | tail -n +2 | tr -d '"' | cut -d, -f1,2,7
kill -TERM $pid; wait $pid 2>/dev/null; rm -rf $dir
