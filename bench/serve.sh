#!/usr/bin/env bash
# shale serve against Redis 7 (issue #13 part 1's benchmark), and three shale serve instances
# behind twemproxy (part 2's scale-out), all on this machine's loopback.
#
# 1. For each fsync policy in POLICIES (everysec, always), REPEATS times, alternating: Redis
#    (redis-server, appendonly yes, the same appendfsync, no RDB snapshots) and shale serve
#    (the same appendfsync), each on a fresh directory, driven by redis-benchmark with
#    CLIENTS clients: SET, GET, MSET (10 keys), INCR, N requests each, unpipelined and
#    pipelined PIPELINE deep. Medians of requests per second, p50, p99, p99.9 and max as
#    redis-benchmark's clients see them (bench/lib/tails.py reads its output: p99.9 is its
#    percentile distribution's first step at or above 99.9%), and the ratio.
# 2. Scale-out: three shale serve instances (appendfsync always) behind twemproxy
#    (nutcracker) with ketama consistent hashing; redis-benchmark SET and GET through the
#    proxy; then KEYS keys written through the proxy, one instance SIGKILLed, every key read
#    back through the proxy (what clients see: values from the live shards, errors for the
#    dead one's keys), the instance restarted on its store, and every key read again.
#
# Root is needed to install the Debian packages (redis-server, redis-tools, nutcracker);
# without root and without them, the script says so and exits 0. Kvrocks is not in
# Debian's archive and cannot be fetched here, so it is not compared.
#
# Usage: bench/serve.sh
# Environment: N=100000 CLIENTS=50 PIPELINE=16 REPEATS=3 POLICIES="everysec always"
#   KEYS=3000 OUT=bench/results/<date>-serve
#   SCALEOUT=0: skip part 2 (twemproxy)
#   SHALE_BIN=path: measure that shale binary (an earlier build, for a before/after
#   comparison) instead of building this tree's
#   SHALE_ARGS="--flag value ...": more flags for shale serve (e.g. --background_cpu_priority idle)
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-100000}
CLIENTS=${CLIENTS:-50}
PIPELINE=${PIPELINE:-16}
REPEATS=${REPEATS:-3}
POLICIES=${POLICIES:-everysec always}
KEYS=${KEYS:-3000}
OUT=${OUT:-bench/results/$(date -u +%Y-%m-%d)-serve}

need=()
for bin in redis-server redis-benchmark redis-cli nutcracker; do
  command -v "$bin" >/dev/null || need+=("$bin")
done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "skipped: ${need[*]} missing and not root to install redis-server redis-tools nutcracker" >&2
    exit 0
  fi
  apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server redis-tools nutcracker >&2
fi

if [ -n "${SHALE_BIN:-}" ]; then
  SHALE=$(realpath "$SHALE_BIN")
else
  cargo build --release -p shale-cli >&2
  SHALE=$(realpath "${CARGO_TARGET_DIR:-target}")/release/shale
fi
# Each process's output goes to $OUT/raw/, which git ignores; $OUT keeps the summary.
mkdir -p "$OUT/raw"
scratch=$(mktemp -d /var/tmp/shale-serve-bench.XXXXXX)
pids=()
cleanup() {
  for p in "${pids[@]:-}"; do [ -n "$p" ] && kill -9 "$p" 2>/dev/null || true; done
  rm -rf "$scratch"
}
trap cleanup EXIT

wait_port() { # port: waits up to 20 s for a server to answer PING
  for _ in $(seq 200); do
    redis-cli -p "$1" ping >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "nothing answers on port $1" >&2
  return 1
}

start_server() { # engine policy port dir -> pid on stdout
  local engine=$1 policy=$2 port=$3 dir=$4
  mkdir -p "$dir"
  case $engine in
    redis)
      redis-server --port "$port" --bind 127.0.0.1 --appendonly yes --appendfsync "$policy" \
        --save "" --dir "$dir" --daemonize no --logfile "$dir/redis.log" >/dev/null 2>&1 &
      ;;
    shale)
      # shellcheck disable=SC2086 # SHALE_ARGS is a list of flags
      "$SHALE" serve --db "$dir/store" --port "$port" --appendfsync "$policy" ${SHALE_ARGS:-} \
        >"$dir/shale.log" 2>&1 &
      ;;
  esac
  echo $!
  disown
}

echo "engine,policy,pipeline,repeat,test,rps,p50_ms,p99_ms,p999_ms,max_ms" >"$OUT/runs.csv"
port=6390
for policy in $POLICIES; do
  for r in $(seq "$REPEATS"); do
    for engine in redis shale; do
      port=$((port + 1))
      dir=$scratch/$engine-$policy-$r
      pid=$(start_server "$engine" "$policy" "$port" "$dir")
      pids+=("$pid")
      wait_port "$port"
      for pipe in 1 "$PIPELINE"; do
        raw=$OUT/raw/$engine-$policy-P$pipe-r$r.txt
        # The default output, not --csv: it has the percentile distribution p99.9 comes from.
        redis-benchmark -h 127.0.0.1 -p "$port" -c "$CLIENTS" -n "$N" -P "$pipe" -r 100000 \
          -t set,get,mset,incr >"$raw" 2>/dev/null
        rows=$(python3 bench/lib/tails.py --redis-benchmark "$raw")
        # test,rps,p50_ms,p99_ms,p999_ms,max_ms
        while IFS=, read -r test rps p50 p99 p999 max; do
          echo "$engine,$policy,$pipe,$r,$test,$rps,$p50,$p99,$p999,$max" >>"$OUT/runs.csv"
        done <<<"$rows"
        echo "$engine appendfsync=$policy -P $pipe repeat $r: $(cut -d, -f1,2 <<<"$rows" | tr '\n' ' ')" >&2
      done
      kill -TERM "$pid" 2>/dev/null || true
      wait "$pid" 2>/dev/null || true
    done
  done
done

# The summary: medians per (policy, pipeline, test, engine), and shale / Redis.
python3 - "$OUT/runs.csv" >"$OUT/summary.md" <<'EOF'
import csv, statistics, sys
from collections import defaultdict
rows = list(csv.DictReader(open(sys.argv[1])))
med = defaultdict(list)
for r in rows:
    med[(r["policy"], r["pipeline"], r["test"], r["engine"])].append(
        tuple(float(r[k]) for k in ("rps", "p50_ms", "p99_ms", "p999_ms", "max_ms")))
# Each latency cell is p50 / p99 / p99.9 / max in ms, each the median over the repeats.
print("| appendfsync | pipeline | test | Redis req/s | shale req/s | shale / Redis "
      "| Redis p50 / p99 / p99.9 / max ms | shale p50 / p99 / p99.9 / max ms |")
print("|---|---:|---|---:|---:|---:|---:|---:|")
def tail(runs):
    return " / ".join(f"{statistics.median(x[k] for x in runs):.3f}" for k in (1, 2, 3, 4))
for (policy, pipe, test, engine) in sorted(med):
    if engine != "redis":
        continue
    red = med[(policy, pipe, test, "redis")]
    sha = med.get((policy, pipe, test, "shale"))
    if not sha:
        continue
    rr = statistics.median(x[0] for x in red)
    sr = statistics.median(x[0] for x in sha)
    print(f"| {policy} | {pipe} | {test.split()[0]} | {rr:,.0f} | {sr:,.0f} | {sr / rr:.2f} | "
          f"{tail(red)} | {tail(sha)} |")
EOF
cat "$OUT/summary.md"

# 2. Scale-out behind twemproxy.
if [ "${SCALEOUT:-1}" = 0 ]; then
  echo "results in $OUT (part 2, twemproxy, skipped: SCALEOUT=0)" >&2
  exit 0
fi
echo "== three shale serve instances behind twemproxy" >&2
ports=(6401 6402 6403)
declare -A spid
for p in "${ports[@]}"; do
  spid[$p]=$(start_server shale always "$p" "$scratch/shard-$p")
  pids+=("${spid[$p]}")
  wait_port "$p"
done
cat >"$scratch/nutcracker.yml" <<EOF
shale:
  listen: 127.0.0.1:22121
  hash: murmur
  distribution: ketama
  redis: true
  auto_eject_hosts: false
  timeout: 2000
  servers:
   - 127.0.0.1:6401:1
   - 127.0.0.1:6402:1
   - 127.0.0.1:6403:1
EOF
nutcracker -c "$scratch/nutcracker.yml" -o "$scratch/nutcracker.log" &
pids+=($!)
disown
wait_port 22121
{
  echo
  echo "## Three shale serve instances behind twemproxy (ketama, murmur), appendfsync always"
  echo
  echo "| pipeline | test | req/s | p50 ms | p99 ms | p99.9 ms | max ms |"
  echo "|---:|---|---:|---:|---:|---:|---:|"
  for pipe in 1 "$PIPELINE"; do
    raw=$OUT/raw/twemproxy-P$pipe.txt
    redis-benchmark -h 127.0.0.1 -p 22121 -c "$CLIENTS" -n "$N" -P "$pipe" -r 100000 \
      -t set,get >"$raw" 2>/dev/null
    python3 bench/lib/tails.py --redis-benchmark "$raw" |
      while IFS=, read -r test rps p50 p99 p999 max; do
        echo "| $pipe | $test | $rps | $p50 | $p99 | $p999 | $max |"
      done
  done
} >>"$OUT/summary.md"
for i in $(seq "$KEYS"); do echo "SET proxied:$i value-$i"; done | redis-cli -p 22121 >/dev/null
read_all() { # -> "ok N, errors N, missing N" (redis-cli prints an error reply as "ERR ...")
  local out ok err
  out=$(for i in $(seq "$KEYS"); do echo "GET proxied:$i"; done | redis-cli -p 22121 2>&1)
  ok=$(grep -c '^value-' <<<"$out" || true)
  err=$(grep -c 'ERR' <<<"$out" || true)
  echo "ok $ok, errors $err, missing $((KEYS - ok - err))"
}
before=$(read_all)
victim=6402
kill -9 "${spid[$victim]}"
sleep 0.5
during=$(read_all)
spid[$victim]=$(start_server shale always "$victim" "$scratch/shard-$victim")
pids+=("${spid[$victim]}")
wait_port "$victim"
after=$(read_all)
{
  echo
  echo "$KEYS keys written through the proxy, then read back through it:"
  echo
  echo "- all three instances up: $before"
  echo "- instance :$victim SIGKILLed: $during (twemproxy answers \"ERR Connection refused\" for the keys it hashes to the dead instance, auto_eject_hosts off; the others' keys are served)"
  echo "- instance :$victim restarted on its store: $after"
} >>"$OUT/summary.md"
tail -12 "$OUT/summary.md"
echo "results in $OUT" >&2
