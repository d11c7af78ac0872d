#!/usr/bin/env bash
# shale serve's replication (issue #46): its cost to the master, a replica's lag under load,
# and Sentinel's failover time, all on this machine's loopback, with the processes this
# script starts and tears down.
#
# a. Overhead. REPEATS times, alternating: a shale serve master (appendfsync everysec) alone,
#    with one shale serve replica attached (--replicaof, everysec), and with one redis-server 7
#    replica attached (appendonly yes, appendfsync everysec, no RDB snapshots), each on fresh
#    directories; once the replica is online, redis-benchmark -t set -c CLIENTS -n N -r KEYS
#    against the master. Medians of requests per second, p50, p99, p99.9 and max as
#    redis-benchmark's clients see them (bench/lib/tails.py reads its output), and the ratios
#    to the master alone. Targets: p99 at most +10%, throughput at most -10%.
# b. Lag. REPEATS times, each on a fresh master and shale replica: bench/lib/paced_set.py
#    sends LAG_RATE SET/s (the issue's 100k) for LAG_SECONDS over 10 pipelining connections,
#    and then redis-benchmark -t set -c CLIENTS -n LAG_N -r KEYS -P LAG_PIPELINE drives the
#    master as fast as it goes (the rate reached is reported); meanwhile bench/lib/repl_lag.py
#    samples the replica's slave_repl_offset and the master's master_repl_offset every 100 ms:
#    the max and median lag in bytes, the max of each half of the load (a lag that grows
#    without bound shows there), and the time from the load's end until the replica has the
#    master's last byte. Target: the replica keeps up at LAG_RATE (the rate reached, and the
#    replica within a second of the master when the load ends).
# c. Failover. REPEATS times: a master, a shale replica and three redis-sentinel (quorum 2,
#    down-after-milliseconds DOWN_AFTER, failover-timeout 10 s); once every Sentinel lists the
#    replica with its link ok and the two other Sentinels, redis-benchmark SETs from 20 clients
#    for 2 s (FAILOVER_LOAD=0: none), then SIGKILL of the master; the time from the kill to the first
#    Sentinel's +switch-master (its log's millisecond timestamp), with +sdown, +odown and
#    +promoted-slave beside it, and the time until every Sentinel's `SENTINEL
#    get-master-addr-by-name` names the replica (polled every 50 ms). Target: within
#    DOWN_AFTER + 5 s.
#
# Root is needed to install the Debian packages (redis-server, redis-tools, redis-sentinel);
# without root and without them, the script says so and exits 0. Every process it starts is
# killed on exit (trap), whatever the exit.
#
# Usage: bench/replication.sh
# Environment: N=100000 LAG_N=2000000 CLIENTS=50 KEYS=100000 LAG_PIPELINE=16 REPEATS=3
#   LAG_RATE=100000 LAG_SECONDS=10
#   DOWN_AFTER=1000 FAILOVER_LOAD=1 PARTS="overhead lag failover"
#   OUT=bench/results/<date>-replication PORT_BASE=6500
#   SHALE_BIN=path: measure that shale binary instead of building this tree's
#   PIN=1: in part a, the master and redis-benchmark on CPU 0 and the replica on CPU 1
#   (taskset), the master alone on CPU 0 too: the replica with a core of its own, as on a
#   machine of its own, so that its CPU does not come out of the master's
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-100000}
LAG_N=${LAG_N:-2000000}
CLIENTS=${CLIENTS:-50}
KEYS=${KEYS:-100000}
LAG_PIPELINE=${LAG_PIPELINE:-16}
LAG_RATE=${LAG_RATE:-100000}
LAG_SECONDS=${LAG_SECONDS:-10}
REPEATS=${REPEATS:-3}
DOWN_AFTER=${DOWN_AFTER:-1000}
FAILOVER_LOAD=${FAILOVER_LOAD:-1}
PARTS=${PARTS:-overhead lag failover}
OUT=${OUT:-bench/results/$(date -u +%Y-%m-%d)-replication}
port=${PORT_BASE:-6500}
pin_master=()
pin_replica=()
if [ "${PIN:-0}" = 1 ]; then
  pin_master=(taskset -c 0)
  pin_replica=(taskset -c 1)
fi
pin=() # the CPU list the next start_shale or start_redis_replica runs its process on

need=()
for bin in redis-server redis-benchmark redis-cli redis-sentinel; do
  command -v "$bin" >/dev/null || need+=("$bin")
done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "skipped: ${need[*]} missing and not root to install redis-server redis-tools redis-sentinel" >&2
    exit 0
  fi
  apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server redis-tools redis-sentinel >&2
fi

if [ -n "${SHALE_BIN:-}" ]; then
  SHALE=$(realpath "$SHALE_BIN")
else
  cargo build --release -p shale-cli >&2
  SHALE=$(realpath "${CARGO_TARGET_DIR:-target}")/release/shale
fi
# Each process's output goes to $OUT/raw/, which git ignores; $OUT keeps the summary and CSVs.
mkdir -p "$OUT/raw"
scratch=$(mktemp -d /var/tmp/shale-repl-bench.XXXXXX)
pids=()
cleanup() {
  # Killed and reaped with stderr closed: the shell reports each killed job otherwise.
  for p in "${pids[@]:-}"; do
    [ -n "$p" ] && { kill -9 "$p" && wait "$p"; } 2>/dev/null || true
  done
  rm -rf "$scratch"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

next_port() { port=$((port + 1)); }

wait_port() { # port: waits up to 20 s for a server to answer PING
  for _ in $(seq 200); do
    redis-cli -p "$1" ping >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "nothing answers on port $1" >&2
  return 1
}

# The started process's pid goes to $started (not through $(...): a process started in a
# command substitution's subshell would keep the substitution waiting on its output).
start_shale() { # port dir [serve flags...]
  local p=$1 dir=$2
  shift 2
  mkdir -p "$dir"
  "${pin[@]}" "$SHALE" serve --db "$dir/store" --port "$p" --appendfsync everysec "$@" \
    >"$dir/shale.log" 2>&1 &
  started=$!
  pids+=("$started")
}

start_redis_replica() { # port dir master_port
  mkdir -p "$2"
  "${pin[@]}" redis-server --port "$1" --bind 127.0.0.1 --appendonly yes --appendfsync everysec \
    --save "" --dir "$2" --daemonize no --logfile "$2/redis.log" \
    --replicaof 127.0.0.1 "$3" >/dev/null 2>&1 &
  started=$!
  pids+=("$started")
}

stop() { # pid...: SIGKILL, and reaped
  for p in "$@"; do
    { kill -9 "$p" && wait "$p"; } 2>/dev/null || true
  done
}

TICKS=$(getconf CLK_TCK)
cpu_ticks() { # pid: its user and system CPU time so far, in clock ticks (0 without a pid)
  if [ -n "$1" ]; then awk '{print $14 + $15}' "/proc/$1/stat"; else echo 0; fi
}

wait_online() { # master_port: waits up to 60 s until its replica is online and caught up
  local info
  for _ in $(seq 600); do
    info=$(redis-cli -p "$1" info replication 2>/dev/null | tr -d '\r')
    if grep -q '^slave0:.*state=online' <<<"$info"; then
      return 0
    fi
    sleep 0.1
  done
  echo "the replica of port $1 never came online: $info" >&2
  return 1
}

# a. The master's SET throughput and tail without a replica, with a shale one, with a Redis one.
if [[ " $PARTS " == *" overhead "* ]]; then
  echo "replica,repeat,rps,p50_ms,p99_ms,p999_ms,max_ms,master_cpu_s,replica_cpu_s" \
    >"$OUT/overhead.csv"
  for r in $(seq "$REPEATS"); do
    for replica in none shale redis; do
      next_port
      mport=$port
      pin=("${pin_master[@]}")
      start_shale "$mport" "$scratch/a-$replica-$r/master"
      master=$started
      pin=()
      wait_port "$mport"
      rpid=
      if [ "$replica" != none ]; then
        next_port
        pin=("${pin_replica[@]}")
        if [ "$replica" = shale ]; then
          start_shale "$port" "$scratch/a-$replica-$r/replica" --replicaof 127.0.0.1 "$mport"
        else
          start_redis_replica "$port" "$scratch/a-$replica-$r/replica" "$mport"
        fi
        rpid=$started
        pin=()
        wait_port "$port"
        wait_online "$mport"
      fi
      raw=$OUT/raw/overhead-$replica-r$r.txt
      # The CPU time master and replica spent during the load: where a replica's cost goes
      # on a machine whose cores the benchmark, the master and the replica share.
      m0=$(cpu_ticks "$master")
      r0=$(cpu_ticks "$rpid")
      # The default output, not --csv: it has the percentile distribution p99.9 comes from.
      "${pin_master[@]}" redis-benchmark -h 127.0.0.1 -p "$mport" -c "$CLIENTS" -n "$N" \
        -r "$KEYS" -t set >"$raw" 2>/dev/null
      m1=$(cpu_ticks "$master")
      r1=$(cpu_ticks "$rpid")
      row=$(python3 bench/lib/tails.py --redis-benchmark "$raw" | grep '^SET,')
      cpu=$(awk -v t="$TICKS" -v a="$((m1 - m0))" -v b="$((r1 - r0))" \
        'BEGIN { printf "%.2f,%.2f", a / t, b / t }')
      echo "$replica,$r,${row#SET,},$cpu" >>"$OUT/overhead.csv"
      echo "overhead: replica $replica repeat $r: $row" >&2
      if [ -n "$rpid" ]; then
        redis-cli -p "$mport" info replication >"$OUT/raw/overhead-$replica-r$r-info.txt" || true
        stop "$rpid"
      fi
      stop "$master"
    done
  done
fi

# b. A shale replica's lag behind a master, at LAG_RATE SET/s and driven as fast as it goes.
if [[ " $PARTS " == *" lag "* ]]; then
  echo "load,repeat,sets,rps,samples,max_lag_bytes,median_lag_bytes,first_half_max_bytes,second_half_max_bytes,load_s,end_offset,catch_up_s" \
    >"$OUT/lag.csv"
  for r in $(seq "$REPEATS"); do
    for load in paced max; do
      next_port
      mport=$port
      start_shale "$mport" "$scratch/b-$load-$r/master"
      master=$started
      wait_port "$mport"
      next_port
      start_shale "$port" "$scratch/b-$load-$r/replica" --replicaof 127.0.0.1 "$mport"
      replica=$started
      wait_port "$port"
      wait_online "$mport"
      raw=$OUT/raw/lag-$load-r$r.txt
      if [ "$load" = paced ]; then
        cmd="exec python3 bench/lib/paced_set.py $mport $LAG_RATE $LAG_SECONDS 10 $KEYS >$raw"
      else
        cmd="exec redis-benchmark -h 127.0.0.1 -p $mport -c $CLIENTS -n $LAG_N -r $KEYS \
          -P $LAG_PIPELINE -t set >$raw 2>/dev/null"
      fi
      line=$(python3 bench/lib/repl_lag.py "$mport" "$port" "$OUT/raw/lag-$load-r$r-samples.csv" \
        -- sh -c "$cmd")
      if [ "$load" = paced ]; then
        # sent,replies,errors,seconds,achieved_rate
        IFS=, read -r sets _ _ _ rps <"$raw"
      else
        sets=$LAG_N
        rps=$(python3 bench/lib/tails.py --redis-benchmark "$raw" | grep '^SET,' | cut -d, -f2)
      fi
      echo "$load,$r,$sets,$rps,$line" >>"$OUT/lag.csv"
      echo "lag: $load repeat $r: $rps SET/s; samples,max,median,halves' max,load_s,end_offset,catch_up_s: $line" >&2
      stop "$replica" "$master"
    done
  done
fi

# c. Sentinel's failover of a killed master to its shale replica.
sentinel_log_ms() { # log event: the first line's timestamp with that event, in ms since the epoch
  local line
  line=$(grep -m1 -- " $2 " "$1" || true)
  [ -n "$line" ] || return 0
  # "1234:X 29 Nov 2026 07:40:01.123 # +switch-master ...": the local time, to the millisecond.
  date -d "$(awk '{print $2, $3, $4, $5}' <<<"$line")" +%s%3N
}

if [[ " $PARTS " == *" failover "* ]]; then
  echo "repeat,down_after_ms,sdown_ms,odown_ms,promoted_ms,switch_master_ms,all_sentinels_ms,new_role" \
    >"$OUT/failover.csv"
  for r in $(seq "$REPEATS"); do
    dir=$scratch/c-$r
    next_port
    mport=$port
    start_shale "$mport" "$dir/master"
    master=$started
    wait_port "$mport"
    next_port
    rport=$port
    start_shale "$rport" "$dir/replica" --replicaof 127.0.0.1 "$mport"
    replica=$started
    wait_port "$rport"
    wait_online "$mport"
    sports=()
    spids=()
    for _ in 1 2 3; do
      next_port
      sports+=("$port")
      # Sentinel rewrites its configuration file: each has its own.
      cat >"$dir/sentinel-$port.conf" <<EOF
port $port
bind 127.0.0.1
daemonize no
logfile $dir/sentinel-$port.log
dir $dir
sentinel monitor shale 127.0.0.1 $mport 2
sentinel down-after-milliseconds shale $DOWN_AFTER
sentinel failover-timeout shale 10000
sentinel parallel-syncs shale 1
EOF
      redis-sentinel "$dir/sentinel-$port.conf" >/dev/null 2>&1 &
      spids+=($!)
      pids+=($!)
    done
    # Each Sentinel must know the replica (from the master's INFO, every 10 s), have its link
    # ok, and have heard the two others on the master's __sentinel__:hello.
    for sp in "${sports[@]}"; do
      wait_port "$sp"
      ready=
      for _ in $(seq 600); do
        replicas=$(redis-cli -p "$sp" sentinel replicas shale 2>/dev/null || true)
        peers=$(redis-cli -p "$sp" sentinel sentinels shale 2>/dev/null | grep -c '^name$' || true)
        if grep -A1 '^master-link-status$' <<<"$replicas" | grep -qx ok &&
          grep -A1 '^flags$' <<<"$replicas" | grep -qx slave && [ "$peers" = 2 ]; then
          ready=1
          break
        fi
        sleep 0.1
      done
      if [ -z "$ready" ]; then
        echo "Sentinel $sp never saw the replica online and two other Sentinels" >&2
        exit 1
      fi
    done
    load=
    if [ "$FAILOVER_LOAD" = 1 ]; then
      redis-benchmark -h 127.0.0.1 -p "$mport" -c 20 -n 100000000 -r "$KEYS" -t set -q \
        >/dev/null 2>&1 &
      load=$!
      pids+=("$load")
      sleep 2
    fi
    killed_ms=$(date +%s%3N)
    # Reaped at once, stderr closed: the shell reports a killed job otherwise.
    { kill -9 "$master" && wait "$master"; } 2>/dev/null || true
    # Every Sentinel names the replica: polled every 50 ms, for at most 60 s.
    all_ms=
    for _ in $(seq 1200); do
      named=0
      for sp in "${sports[@]}"; do
        addr=$(redis-cli -p "$sp" sentinel get-master-addr-by-name shale 2>/dev/null | tr '\n' ' ')
        [ "$addr" = "127.0.0.1 $rport " ] && named=$((named + 1))
      done
      if [ "$named" = 3 ]; then
        all_ms=$(($(date +%s%3N) - killed_ms))
        break
      fi
      sleep 0.05
    done
    [ -n "$load" ] && stop "$load"
    # Each event's first time in any Sentinel's log (the leader's, for the failover's steps).
    first() { # event
      local best= t
      for sp in "${sports[@]}"; do
        t=$(sentinel_log_ms "$dir/sentinel-$sp.log" "$1")
        [ -n "$t" ] && { [ -z "$best" ] || [ "$t" -lt "$best" ]; } && best=$t
      done
      [ -n "$best" ] && echo $((best - killed_ms)) || echo never
    }
    # The promoted replica must say so (and is left out of the figures otherwise).
    role=$(redis-cli -p "$rport" info replication 2>/dev/null | tr -d '\r' | grep '^role:' || true)
    row="$r,$DOWN_AFTER,$(first "+sdown master"),$(first "+odown master"),$(first +promoted-slave),$(first +switch-master),${all_ms:-never},${role#role:}"
    echo "$row" >>"$OUT/failover.csv"
    echo "failover: repeat $r: $row" >&2
    redis-cli -p "$rport" info replication >"$OUT/raw/failover-r$r-new-master-info.txt" || true
    for sp in "${sports[@]}"; do cp "$dir/sentinel-$sp.log" "$OUT/raw/failover-r$r-sentinel-$sp.log"; done
    stop "${spids[@]}" "$replica"
  done
fi

# The summary: medians over the repeats, ratios and verdicts.
# Only the parts this run measured: a CSV another run left in $OUT is not summed up with them.
python3 - "$OUT" "$DOWN_AFTER" "$N" "$LAG_N" "$CLIENTS" "$KEYS" "$LAG_PIPELINE" "$PARTS" \
  "$LAG_RATE" "$LAG_SECONDS" "${PIN:-0}" \
  >"$OUT/summary.md" <<'EOF'
import csv, os, statistics, sys
out, down_after = sys.argv[1], int(sys.argv[2])
n, lag_n, clients, keys, pipeline = sys.argv[3:8]
parts = sys.argv[8].split()
lag_rate, lag_seconds, pinned = sys.argv[9:11] + [sys.argv[11] == "1"]
med = statistics.median
def rows(name):
    path = os.path.join(out, name + ".csv")
    return list(csv.DictReader(open(path))) if name in parts and os.path.exists(path) else []

ov = rows("overhead")
if ov:
    print(f"## a. The master's SET with and without a replica (redis-benchmark -t set -c {clients} "
          f"-n {n} -r {keys}, appendfsync everysec)\n")
    if pinned:
        print("PIN=1: the master and redis-benchmark on CPU 0, the replica on CPU 1.\n")
    print("| replica | runs req/s | req/s | p50 / p99 / p99.9 / max ms | req/s vs none | p99 vs none "
          "| CPU us per SET: master / replica |")
    print("|---|---|---:|---:|---:|---:|---:|")
    by = {}
    for r in ov:
        by.setdefault(r["replica"], []).append(r)
    def m(runs, k):
        return med(float(x[k]) for x in runs)
    base = by.get("none")
    for replica in ("none", "shale", "redis"):
        runs = by.get(replica)
        if not runs:
            continue
        rps, p99 = m(runs, "rps"), m(runs, "p99_ms")
        tail = " / ".join(f"{m(runs, k):.3f}" for k in ("p50_ms", "p99_ms", "p999_ms", "max_ms"))
        every = " ".join(f"{float(x['rps']):,.0f}" for x in runs)
        if base and replica != "none":
            d_rps = rps / m(base, "rps") - 1
            d_p99 = p99 / m(base, "p99_ms") - 1
            vs = (f"{d_rps:+.1%} ({'met' if d_rps >= -0.10 else 'missed'})",
                  f"{d_p99:+.1%} ({'met' if d_p99 <= 0.10 else 'missed'})")
        else:
            vs = ("-", "-")
        cpu = " / ".join(f"{m(runs, k) / int(n) * 1e6:.1f}" for k in ("master_cpu_s", "replica_cpu_s"))
        print(f"| {replica} | {every} | {rps:,.0f} | {tail} | {vs[0]} | {vs[1]} | {cpu} |")
    print("\nEvery run's p99 (ms): " + "; ".join(
        f"{k} " + " ".join(x["p99_ms"] for x in v) for k, v in by.items()))
    print()

lag = rows("lag")
if lag:
    print(f"## b. A shale replica's lag under load (INFO replication every 100 ms)\n")
    print(f"paced: bench/lib/paced_set.py at {lag_rate} SET/s for {lag_seconds} s, 10 connections; "
          f"max: redis-benchmark -t set -c {clients} -n {lag_n} -r {keys} -P {pipeline}. The lag "
          f"in SETs is the lag in bytes over the stream's bytes per SET.\n")
    print("| load | repeat | SET/s reached | samples | max lag bytes (SETs) | median lag bytes | max lag, first / second half of the load | catch-up after the load s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in lag:
        per = int(r["end_offset"]) / int(r["sets"])
        print(f"| {r['load']} | {r['repeat']} | {float(r['rps']):,.0f} | {r['samples']} | "
              f"{int(r['max_lag_bytes']):,} ({int(r['max_lag_bytes']) / per:,.0f}) | "
              f"{int(float(r['median_lag_bytes'])):,} | {int(r['first_half_max_bytes']):,} / "
              f"{int(r['second_half_max_bytes']):,} | {r['catch_up_s']} |")
    for load in ("paced", "max"):
        runs = [r for r in lag if r["load"] == load]
        if not runs:
            continue
        ok = [float(r["catch_up_s"]) for r in runs if r["catch_up_s"] != "never"]
        rps = med(float(r["rps"]) for r in runs)
        line = (f"\n{load}: medians {rps:,.0f} SET/s, max lag "
                f"{med(int(r['max_lag_bytes']) for r in runs):,.0f} bytes, median lag "
                f"{med(float(r['median_lag_bytes']) for r in runs):,.0f} bytes, catch-up "
                + (f"{med(ok):.3f} s" if len(ok) == len(runs) else f"never in {len(runs) - len(ok)} runs"))
        if load == "paced":
            # Keeping up: the master took the rate, and at the load's end the replica was less
            # than a second behind it, in every run.
            kept = (all(float(r["rps"]) >= 0.95 * float(lag_rate) for r in runs)
                    and len(ok) == len(runs) and max(ok) < 1.0)
            line += (f". Keeps up at {lag_rate} SET/s (every run: the rate reached within 5%, "
                     f"caught up within 1 s of the load's end): {'met' if kept else 'missed'}")
        print(line + ".")
    print()

fo = rows("failover")
if fo:
    print(f"## c. Sentinel's failover of a SIGKILLed master (three Sentinels, quorum 2, "
          f"down-after {down_after} ms)\n")
    print("| repeat | +sdown ms | +odown ms | +promoted-slave ms | +switch-master ms | every Sentinel names the replica ms | the replica's role after | within down-after + 5 s |")
    print("|---:|---:|---:|---:|---:|---:|---|---|")
    limit = down_after + 5000
    sw = []
    for r in fo:
        s = r["switch_master_ms"]
        if r["new_role"] != "master":
            s = "never"
        within = "missed" if s == "never" else ("met" if int(s) <= limit else "missed")
        if s != "never":
            sw.append(int(s))
        print(f"| {r['repeat']} | {r['sdown_ms']} | {r['odown_ms']} | {r['promoted_ms']} | {s} | "
              f"{r['all_sentinels_ms']} | {r['new_role']} | {within} |")
    if sw:
        print(f"\n+switch-master after the kill: median {med(sw):,.0f} ms, max {max(sw):,} ms "
              f"(target {limit:,} ms: {'met' if len(sw) == len(fo) and max(sw) <= limit else 'missed'}).")
EOF
cat "$OUT/summary.md"
echo "results in $OUT" >&2
