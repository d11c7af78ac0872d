#!/usr/bin/env bash
# A shale serve deployment with Redis Sentinel (issue #46, deliverable 5): three `shale serve`
# instances (one master, two replicas following it with --replicaof) and three Redis Sentinels
# (Debian's redis-sentinel, Redis 7.0) monitoring them, quorum 2, all on this machine. It
# installs what it uses, starts it, tells how to connect, and tears it down.
#
# Usage:
#   scripts/sentinel.sh up     [options]   install what is missing, start, wait until ready
#   scripts/sentinel.sh status [options]   each process: running or not, its role (exit 1
#                                          when one is not running)
#   scripts/sentinel.sh down   [options]   stop every process (data kept; --purge removes it)
#
# Options (each with an environment variable; the defaults after =):
#   --dir DIR               SHALE_DEPLOY_DIR=./shale-deployment  every process's data and logs
#   --ports A,B,C           SHALE_PORTS=6400,6401,6402   the shale instances; A starts as master
#   --sentinel-ports X,Y,Z  SENTINEL_PORTS=26400,26401,26402
#   --bind ADDR             SHALE_BIND=127.0.0.1   the address every process listens on
#   --name NAME             SENTINEL_MASTER_NAME=shale   the master's name in Sentinel
#   --down-after MS         SENTINEL_DOWN_AFTER=5000   Sentinel's down-after-milliseconds
#   --failover-timeout MS   SENTINEL_FAILOVER_TIMEOUT=60000
#   --shale PATH            SHALE_BIN=the `shale` on PATH, else this tree's, built with cargo
#   --purge                 (down only) remove DIR after stopping
#
# What DIR holds (`up` makes it; it refuses a DIR that already holds a deployment, running or
# stopped, so that it never starts a second one over the first or a master over data that a
# failover made stale):
#   DIR/deployment              the settings `up` used, which `status` and `down` read
#   DIR/shale-PORT/store        the instance's store;  serve.log, its output;  pid
#   DIR/sentinel-PORT/          sentinel.conf (Sentinel rewrites it), sentinel.log, pid
#
# Installing: where redis-sentinel or redis-cli is missing, as root it runs
# `apt-get install redis-sentinel redis-tools` (as test.sh and bench/replication.sh do); not as
# root, it fails saying what to install. It never skips.
#
# No password: a shale replica's link sends no AUTH yet (docs/serve.md, "Sentinel"), so the
# instances run without one. With a --bind other than loopback they serve every client that
# reaches them (--protected-mode no): use a private network only.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)

usage() {
  sed -n '/^# Usage:/,/^# What DIR holds/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}

[ $# -ge 1 ] || usage
action=$1
shift
case $action in up | down | status) ;; *) usage ;; esac

dir=${SHALE_DEPLOY_DIR:-./shale-deployment}
ports=${SHALE_PORTS:-6400,6401,6402}
sentinel_ports=${SENTINEL_PORTS:-26400,26401,26402}
bind=${SHALE_BIND:-127.0.0.1}
name=${SENTINEL_MASTER_NAME:-shale}
down_after=${SENTINEL_DOWN_AFTER:-5000}
failover_timeout=${SENTINEL_FAILOVER_TIMEOUT:-60000}
shale=${SHALE_BIN:-}
purge=0
while [ $# -gt 0 ]; do
  case $1 in
    --purge | -h | --help) ;;
    *) [ $# -ge 2 ] || { echo "sentinel.sh: $1 needs a value" >&2; usage; } ;;
  esac
  case $1 in
    --dir) dir=$2; shift 2 ;;
    --ports) ports=$2; shift 2 ;;
    --sentinel-ports) sentinel_ports=$2; shift 2 ;;
    --bind) bind=$2; shift 2 ;;
    --name) name=$2; shift 2 ;;
    --down-after) down_after=$2; shift 2 ;;
    --failover-timeout) failover_timeout=$2; shift 2 ;;
    --shale) shale=$2; shift 2 ;;
    --purge) purge=1; shift ;;
    -h | --help) usage ;;
    *) echo "sentinel.sh: unknown option $1" >&2; usage ;;
  esac
done

fail() {
  echo "sentinel.sh $action: $*" >&2
  exit 1
}

# Whether a process runs (a zombie, dead but not yet reaped by whoever adopted it, does not).
is_running() { # pid
  kill -0 "$1" 2>/dev/null && [ "$(awk '{ print $3 }' "/proc/$1/stat" 2>/dev/null)" != Z ]
}

# The pid in a pid file, if that process still runs.
running_pid() { # pidfile
  local pid
  [ -f "$1" ] || return 1
  pid=$(cat "$1")
  [ -n "$pid" ] && is_running "$pid" && echo "$pid"
}

# Whether something accepts connections on a port of $bind.
port_taken() { # port
  (exec 3<>"/dev/tcp/$bind/$1") 2>/dev/null
}

# Polls a command every 100 ms for up to $2 seconds.
wait_for() { # what seconds command...
  local what=$1 tries=$(($2 * 10))
  shift 2
  for _ in $(seq "$tries"); do
    "$@" >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "sentinel.sh $action: $what: not within $((tries / 10)) s" >&2
  return 1
}

# The deployment's settings, as `up` wrote them.
load_deployment() {
  [ -f "$dir/deployment" ] || fail "$dir holds no deployment (no $dir/deployment; give --dir)"
  # shellcheck source=/dev/null
  . "$dir/deployment"
}

# Stops the processes of the deployment in $dir: the Sentinels first (so that none fails the
# master over while it stops), then the replicas and the master, each with SIGTERM (shale
# serve then finishes its requests and closes its store), SIGKILL after 30 s.
stop_all() {
  local f pid
  for f in "$dir"/sentinel-*/pid "$dir"/shale-*/pid; do
    pid=$(running_pid "$f") || { rm -f "$f"; continue; }
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 300); do
      is_running "$pid" || break
      sleep 0.1
    done
    if is_running "$pid"; then
      echo "sentinel.sh: $f: pid $pid still runs 30 s after SIGTERM: SIGKILL" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
    rm -f "$f"
  done
}

# A field of redis-cli's flat output of Sentinel's listings: the lines after each line `$2`.
field_count() { # output field value: how many times `field` is followed by `value`
  awk -v f="$2" -v v="$3" 'prev == f && $0 == v { n++ } { prev = $0 } END { print n + 0 }' <<<"$1"
}

# Whether the Sentinel on port $1 sees the master's two replicas online and the two other
# Sentinels: only then can it take part in a failover (a replica it has not read INFO from
# recently is never promoted).
sentinel_ready() { # port
  local replicas sentinels
  replicas=$(redis-cli -h "$bind" -p "$1" SENTINEL REPLICAS "$name" 2>/dev/null | tr -d '\r')
  sentinels=$(redis-cli -h "$bind" -p "$1" SENTINEL SENTINELS "$name" 2>/dev/null | tr -d '\r')
  [ "$(field_count "$replicas" flags slave)" = 2 ] \
    && [ "$(field_count "$replicas" master-link-status ok)" = 2 ] \
    && [ "$(grep -c '^runid$' <<<"$sentinels")" = 2 ]
}

master_sees_replicas() { # port
  [ "$(redis-cli -h "$bind" -p "$1" INFO replication | tr -d '\r' \
    | grep -c '^slave[0-9]*:.*state=online')" = 2 ]
}

case $action in
status)
  load_deployment
  status=0
  for p in $SHALE_PORTS_LIST; do
    if pid=$(running_pid "$dir/shale-$p/pid"); then
      role=$(redis-cli -h "$BIND" -p "$p" INFO replication 2>/dev/null | tr -d '\r' \
        | awk -F: '/^role:/ { r = $2 } /^master_port:/ { m = " of " $2 }
                   /^master_link_status:/ { l = ", link " $2 } END { print r m l }')
      echo "shale serve $BIND:$p: pid $pid, ${role:-not answering}"
    else
      echo "shale serve $BIND:$p: not running"
      status=1
    fi
  done
  for p in $SENTINEL_PORTS_LIST; do
    if pid=$(running_pid "$dir/sentinel-$p/pid"); then
      master=$(redis-cli -h "$BIND" -p "$p" SENTINEL get-master-addr-by-name "$NAME" 2>/dev/null \
        | tr -d '\r' | paste -sd: -)
      echo "redis-sentinel $BIND:$p: pid $pid, master $NAME at ${master:-unknown}"
    else
      echo "redis-sentinel $BIND:$p: not running"
      status=1
    fi
  done
  exit $status
  ;;
down)
  load_deployment
  stop_all
  echo "stopped the deployment in $dir"
  if [ "$purge" = 1 ]; then
    rm -rf "$dir"
    echo "removed $dir"
  fi
  exit 0
  ;;
esac

# up.
IFS=, read -r -a shale_ports <<<"$ports"
IFS=, read -r -a sentinel_list <<<"$sentinel_ports"
[ ${#shale_ports[@]} = 3 ] || fail "--ports $ports: give three ports, comma-separated"
[ ${#sentinel_list[@]} = 3 ] || fail "--sentinel-ports $sentinel_ports: give three ports, comma-separated"
for p in "${shale_ports[@]}" "${sentinel_list[@]}"; do
  [[ $p =~ ^[0-9]+$ ]] && [ "$p" -ge 1 ] && [ "$p" -le 65535 ] || fail "port $p is not in 1..=65535"
done
[ "$(printf '%s\n' "${shale_ports[@]}" "${sentinel_list[@]}" | sort -u | wc -l)" = 6 ] \
  || fail "--ports $ports and --sentinel-ports $sentinel_ports: six different ports are needed"
[[ $down_after =~ ^[0-9]+$ ]] || fail "--down-after $down_after: milliseconds, a number"
[[ $failover_timeout =~ ^[0-9]+$ ]] || fail "--failover-timeout $failover_timeout: milliseconds, a number"

if [ -e "$dir/deployment" ]; then
  live=()
  for f in "$dir"/shale-*/pid "$dir"/sentinel-*/pid; do
    pid=$(running_pid "$f") && live+=("$pid")
  done
  if [ ${#live[@]} -gt 0 ]; then
    fail "a deployment is running in $dir (pids ${live[*]}): stop it first with" \
      "\`scripts/sentinel.sh down --dir $dir\`"
  fi
  fail "$dir holds a stopped deployment's data (after a failover its first master may be" \
    "stale): remove it with \`scripts/sentinel.sh down --dir $dir --purge\` or give another --dir"
fi
for p in "${shale_ports[@]}" "${sentinel_list[@]}"; do
  ! port_taken "$p" || fail "port $p of $bind is in use by another process"
done

need=()
for bin in redis-sentinel redis-cli; do
  command -v "$bin" >/dev/null || need+=("$bin")
done
if [ ${#need[@]} -gt 0 ]; then
  [ "$(id -u)" = 0 ] || fail "${need[*]} missing: install Debian's redis-sentinel and redis-tools" \
    "(apt-get install redis-sentinel redis-tools), or run this as root to have it installed"
  echo "installing redis-sentinel redis-tools (apt-get)" >&2
  apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-sentinel redis-tools >&2
fi

if [ -z "$shale" ]; then
  if command -v shale >/dev/null; then
    shale=$(command -v shale)
  else
    echo "building shale (cargo build --release -p shale-cli)" >&2
    (cd "$repo" && cargo build --release -p shale-cli >&2)
    shale=$(cd "$repo" && realpath "${CARGO_TARGET_DIR:-target}")/release/shale
  fi
fi
[ -x "$shale" ] || fail "--shale $shale: not an executable"
shale=$(realpath "$shale")

mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
protected=()
case $bind in 127.* | ::1 | localhost) ;; *) protected=(--protected-mode no) ;; esac
cat >"$dir/deployment" <<EOF
# Written by scripts/sentinel.sh up; read by its status and down.
SHALE_PORTS_LIST="${shale_ports[*]}"
SENTINEL_PORTS_LIST="${sentinel_list[*]}"
BIND=$bind
NAME=$name
EOF

# From here a failure stops what was started; the data stays for a look at the logs.
started_ok=0
on_exit() {
  if [ "$started_ok" != 1 ]; then
    echo "sentinel.sh up: failed; stopping what it started (logs in $dir/*/)" >&2
    stop_all
  fi
}
trap on_exit EXIT

start_shale() { # port [serve flags...]
  local p=$1
  shift
  mkdir -p "$dir/shale-$p"
  setsid "$shale" serve --db "$dir/shale-$p/store" --port "$p" --bind "$bind" \
    "${protected[@]}" "$@" </dev/null >"$dir/shale-$p/serve.log" 2>&1 &
  echo $! >"$dir/shale-$p/pid"
  wait_for "shale serve on port $p answering PING ($dir/shale-$p/serve.log)" 30 \
    redis-cli -h "$bind" -p "$p" PING
}

master=${shale_ports[0]}
start_shale "$master"
start_shale "${shale_ports[1]}" --replicaof "$bind" "$master"
start_shale "${shale_ports[2]}" --replicaof "$bind" "$master"
wait_for "the master listing both replicas online" 60 master_sees_replicas "$master"

for p in "${sentinel_list[@]}"; do
  mkdir -p "$dir/sentinel-$p"
  cat >"$dir/sentinel-$p/sentinel.conf" <<EOF
port $p
bind $bind
daemonize no
logfile $dir/sentinel-$p/sentinel.log
dir $dir/sentinel-$p
sentinel monitor $name $bind $master 2
sentinel down-after-milliseconds $name $down_after
sentinel failover-timeout $name $failover_timeout
sentinel parallel-syncs $name 1
EOF
  setsid redis-sentinel "$dir/sentinel-$p/sentinel.conf" </dev/null >/dev/null 2>&1 &
  echo $! >"$dir/sentinel-$p/pid"
done
for p in "${sentinel_list[@]}"; do
  wait_for "redis-sentinel on port $p seeing both replicas and the two other Sentinels" \
    60 sentinel_ready "$p"
done
started_ok=1

cat <<EOF
shale serve deployment up in $dir:
  master   $bind:$master (redis-cli -h $bind -p $master)
  replicas $bind:${shale_ports[1]} $bind:${shale_ports[2]} (read-only)
  Sentinels $bind:${sentinel_list[0]} $bind:${sentinel_list[1]} $bind:${sentinel_list[2]}, master name "$name", quorum 2
Clients ask a Sentinel where the master is (it moves on a failover):
  redis-cli -h $bind -p ${sentinel_list[0]} SENTINEL get-master-addr-by-name $name
A write confirmed on a replica: on one connection, SET k v then WAIT 1 1000 (answered 1):
  printf 'SET k v\\nWAIT 1 1000\\n' | redis-cli -h $bind -p $master
State: scripts/sentinel.sh status --dir $dir
Stop:  scripts/sentinel.sh down --dir $dir [--purge]
EOF
