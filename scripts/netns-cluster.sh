#!/usr/bin/env bash
# A pg_ramp cluster of several "hosts" on one machine: N rampd, each in its own network
# namespace with its own address on a private bridge, optionally PostgreSQL frontends in
# namespaces of their own, and a client namespace for tools (ramp_check, rampctl, pgbench).
# Needs root (or CAP_SYS_ADMIN + CAP_NET_ADMIN): `ip netns add` must work.
#
#   scripts/netns-cluster.sh start DIR [--nodes N] [--frontends M] [--delay-us N] [--jitter-us N]
#                                      [--loss PCT] [--reset PCT] [--link I:DELAY[:JITTER[:LOSS]]]
#                                      [--no-proxy] [--data] [--memory-mb M] [--workers W]
#                                      [-- extra rampd args]
#   scripts/netns-cluster.sh stop DIR          (idempotent: removes processes and namespaces)
#   scripts/netns-cluster.sh status DIR
#   scripts/netns-cluster.sh exec DIR WHERE cmd...   (WHERE: client, n<i>, pg<j>)
#   scripts/netns-cluster.sh link DIR I [--delay-us N] [--jitter-us N] [--loss PCT] [--reset PCT]
#                                      (changes node I's link at run time, connections stay)
#   scripts/netns-cluster.sh probe             (exit 0 if namespaces can be made, else 3 + why)
#
# Layout (the subnet exists only inside the namespaces this script creates; the host's own
# interfaces and routes are never touched, and every cluster has its own bridge, so clusters
# of different DIRs do not see each other even though they use the same addresses):
#   <p>-hub   a bridge br0 (no address), one veth per namespace below plugged into it
#   <p>-n<i>  rampd i at 10.213.0.(10+i), listening on tcp://10.213.0.(10+i):7400
#   <p>-pg<j> PostgreSQL frontend j at 10.213.0.(100+j) (unix socket DIR/pg<j>/sock)
#   <p>-cl    the client namespace, 10.213.0.200
# <p> is "rn" + 6 hex digits of DIR's path hash (DIR/netns.env records it).
#
# Links: each node's link has a delay, jitter and loss (--delay-us etc. for all, --link for one
# node). They are added in user space by ramp_netproxy (engine/tools/ramp_netproxy.cpp; these
# kernels have no netem qdisc): a proxy in node i's namespace listens on 10.213.0.(10+i):7401
# and forwards to rampd's 7400, delaying every chunk in both directions by delay ± jitter
# (in order). Loss is modelled as TCP shows it to applications: a "lost" chunk arrives one
# retransmission timeout (200 ms) late; --reset PCT resets connections instead.
# cluster.conf lists the proxy endpoints (:7401), so everything that reaches node i pays link
# i's delay: clients (ramp_check, PostgreSQL) and also the other servers (termination
# protocol), as on a real network where all of a host's traffic crosses its link. A round trip
# to node i thus costs 2 × delay_i more. rampd listens on (and is reachable directly at) its
# namespace address :7400; with --no-proxy there are no proxies and cluster.conf lists :7400.
# Measured accuracy (ramp_netproxy --selftest and `netns-cluster.sh exec DIR client
# ramp_netproxy --ping ...`, 2 loaded cores): the proxy adds about 40 us of RTT by itself
# (two more TCP hops) and fires its timers 0-60 us late, so a configured RTT of 2 × D comes
# out as 2 × D + 40..150 us at the median; never less than 2 × D.
#
# After start, DIR holds (as scripts/ramp-cluster.sh): token (mode 600), token.postgres,
# cluster.conf, nodes.tcp (what clients use: the proxy endpoints), nodes.direct (rampd's own
# endpoints), node<i>.log/.pid, proxy<i>.log/.pid/.conf, data<i>/ with --data, pg<j>/ for
# frontends (`scripts/pg-instance.sh psql DIR/pg<j>` reaches them), netns.env.
# RAMPD and NETPROXY override the binaries (default: build/engine/tools/).
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
rampd="${RAMPD:-$root/build/engine/tools/rampd}"
[ -x "$rampd" ] || rampd="$(command -v rampd || true)"
netproxy="${NETPROXY:-$(dirname "${rampd:-$root/build/engine/tools/rampd}")/ramp_netproxy}"
[ -x "$netproxy" ] || netproxy="$root/build/engine/tools/ramp_netproxy"
subnet=10.213.0
rampd_port=7400
proxy_port=7401

usage() { sed -n '2,17p' "$0" >&2; exit 2; }
die() { echo "netns-cluster: $*" >&2; exit 1; }
[ $# -ge 1 ] || usage
cmd="$1"
shift

# Exit 3 with the reason when network namespaces (and a bridge in one) cannot be made.
probe() {
  command -v ip >/dev/null || { echo "netns-cluster: no 'ip' command (iproute2)" >&2; return 3; }
  local ns="rnprobe$$" err
  if ! err="$(ip netns add "$ns" 2>&1)"; then
    echo "netns-cluster: cannot create network namespaces (ip netns add: ${err:-failed});" \
      "needs root or CAP_SYS_ADMIN+CAP_NET_ADMIN" >&2
    return 3
  fi
  if ! err="$(ip -n "$ns" link add br0 type bridge 2>&1)"; then
    ip netns del "$ns" 2>/dev/null || true
    echo "netns-cluster: cannot create a bridge in a namespace: $err" >&2
    return 3
  fi
  ip netns del "$ns"
}

if [ "$cmd" = probe ]; then
  probe
  exit $?
fi
[ $# -ge 1 ] || usage
# The namespaces are named after DIR's absolute path: stop finds them even if DIR is gone.
dir="$(realpath -m "$1")"
[ "$cmd" != start ] || mkdir -p "$dir"
shift
prefix="rn$(printf '%s' "$dir" | md5sum | cut -c1-6)"
hub="$prefix-hub"

# The namespaces of this cluster that exist now.
cluster_namespaces() {
  ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^$prefix-(hub|cl|n[0-9]+|pg[0-9]+)$" || true
}

# Alive: exists and is not a zombie (a process whose parent exited is reaped by init, which
# may take a while).
alive() {
  local state
  state="$(awk '/^State:/ {print $2}' "/proc/$1/status" 2>/dev/null)" || return 1
  [ -n "$state" ] && [ "$state" != Z ]
}

stop_pid() {
  local p="$1"
  kill -TERM "$p" 2>/dev/null || return 0
  for _ in $(seq 100); do alive "$p" || return 0; sleep 0.05; done
  kill -KILL "$p" 2>/dev/null || true
}

stop_cluster() {
  local f ns p
  for f in "$dir"/pg*/pgdata/postmaster.pid; do
    [ -f "$f" ] || continue
    "$root/scripts/pg-instance.sh" stop "$(dirname "$(dirname "$f")")" >/dev/null 2>&1 || true
  done
  for f in "$dir"/proxy*.pid "$dir"/node*.pid; do
    [ -f "$f" ] || continue
    stop_pid "$(cat "$f")"
    rm -f "$f"
  done
  # Anything else still running in our namespaces (started with `exec` and left behind).
  for ns in $(cluster_namespaces); do
    for p in $(ip netns pids "$ns" 2>/dev/null); do stop_pid "$p"; done
  done
  # Deleting a namespace deletes its end of the veth, which deletes the other end; the
  # bridge goes with the hub.
  for ns in $(cluster_namespaces); do ip netns del "$ns" 2>/dev/null || true; done
  rm -f "$dir/netns.env"
}

# link_conf FILE DELAY JITTER LOSS RESET
link_conf() {
  printf 'delay_us = %s\njitter_us = %s\nloss_pct = %s\nreset_pct = %s\n' "$2" "$3" "$4" "$5" >"$1"
}

# add_ns NAME HUBPORT ADDRESS: a namespace with eth0 at ADDRESS, its peer HUBPORT on br0.
add_ns() {
  ip netns add "$1"
  ip -n "$1" link set lo up
  ip link add eth0 netns "$1" type veth peer name "$2" netns "$hub"
  ip -n "$hub" link set "$2" master br0 up
  ip -n "$1" addr add "$3/24" dev eth0
  ip -n "$1" link set eth0 up
}

# A start that fails half-way removes what it made.
start_failed() {
  local status=$?
  [ "$status" = 0 ] || stop_cluster
  exit "$status"
}

wait_ready() {  # wait_ready LOG PID WHAT
  for _ in $(seq 300); do
    grep -q " INFO: ready$" "$1" 2>/dev/null && return 0
    alive "$2" || { echo "netns-cluster: $3 exited:" >&2; tail -5 "$1" >&2; return 1; }
    sleep 0.05
  done
  echo "netns-cluster: $3 not ready" >&2
  return 1
}

case "$cmd" in
  start)
    nodes=3 frontends=0 data=0 memory=512 workers=2 proxy=1 extra=()
    delay=0 jitter=0 loss=0 reset=0 links=()
    while [ $# -gt 0 ]; do
      case "$1" in
        --nodes) nodes="$2"; shift 2 ;;
        --frontends) frontends="$2"; shift 2 ;;
        --delay-us) delay="$2"; shift 2 ;;
        --jitter-us) jitter="$2"; shift 2 ;;
        --loss) loss="$2"; shift 2 ;;
        --reset) reset="$2"; shift 2 ;;
        --link) links+=("$2"); shift 2 ;;
        --no-proxy) proxy=0; shift ;;
        --data) data=1; shift ;;
        --memory-mb) memory="$2"; shift 2 ;;
        --workers) workers="$2"; shift 2 ;;
        --) shift; extra=("$@"); break ;;
        *) usage ;;
      esac
    done
    [ "$nodes" -ge 1 ] && [ "$nodes" -le 80 ] || die "--nodes: 1 to 80"
    [ "$frontends" -ge 0 ] && [ "$frontends" -le 90 ] || die "--frontends: 0 to 90"
    [ -x "$rampd" ] || die "no rampd binary (build first: make)"
    [ "$proxy" = 0 ] || [ -x "$netproxy" ] || die "no ramp_netproxy binary (build first: make)"
    [ -z "$(cluster_namespaces)" ] || die "a cluster is running in $dir (stop it first)"
    probe || exit 3
    chmod 755 "$dir"
    [ -f "$dir/token" ] || (umask 077; head -c 24 /dev/urandom | base64 >"$dir/token")
    chmod 600 "$dir/token"
    if id postgres >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
      install -m 600 -o postgres "$dir/token" "$dir/token.postgres"
    fi
    echo "prefix=$prefix" >"$dir/netns.env"
    trap start_failed EXIT
    ip netns add "$hub"
    ip -n "$hub" link add br0 type bridge
    ip -n "$hub" link set br0 up
    add_ns "$prefix-cl" cl "$subnet.200"
    : >"$dir/cluster.conf"
    tcp_list="" direct_list=""
    for i in $(seq 0 $((nodes - 1))); do
      addr="$subnet.$((10 + i))"
      add_ns "$prefix-n$i" "n$i" "$addr"
      port=$rampd_port
      if [ "$proxy" = 1 ]; then
        port=$proxy_port
        d=$delay j=$jitter l=$loss
        for spec in "${links[@]}"; do
          IFS=: read -r li ld lj ll <<<"$spec"
          [ "$li" = "$i" ] && { d="$ld"; j="${lj:-$j}"; l="${ll:-$l}"; }
        done
        link_conf "$dir/proxy$i.conf" "$d" "$j" "$l" "$reset"
      fi
      echo "node tcp://$addr:$port" >>"$dir/cluster.conf"
      tcp_list="${tcp_list:+$tcp_list,}tcp://$addr:$port"
      direct_list="${direct_list:+$direct_list,}tcp://$addr:$rampd_port"
    done
    echo "$tcp_list" >"$dir/nodes.tcp"
    echo "$direct_list" >"$dir/nodes.direct"
    for i in $(seq 0 $((nodes - 1))); do
      addr="$subnet.$((10 + i))"
      args=(--listen "tcp://$addr:$rampd_port" --cluster "$dir/cluster.conf" --node "$i"
            --token-file "$dir/token" --memory-mb "$memory" --workers "$workers")
      [ "$data" = 1 ] && args+=(--data "$dir/data$i")
      # ip netns exec execs rampd: $! is rampd's pid.
      nohup ip netns exec "$prefix-n$i" "$rampd" "${args[@]}" "${extra[@]}" \
        >>"$dir/node$i.log" 2>&1 </dev/null &
      echo $! >"$dir/node$i.pid"
      if [ "$proxy" = 1 ]; then
        nohup ip netns exec "$prefix-n$i" "$netproxy" --listen "$addr:$proxy_port" \
          --to "$addr:$rampd_port" --config "$dir/proxy$i.conf" >>"$dir/proxy$i.log" 2>&1 </dev/null &
        echo $! >"$dir/proxy$i.pid"
      fi
    done
    for i in $(seq 0 $((nodes - 1))); do
      wait_ready "$dir/node$i.log" "$(cat "$dir/node$i.pid")" "node $i"
      if [ "$proxy" = 1 ]; then
        alive "$(cat "$dir/proxy$i.pid")" ||
          { cat "$dir/proxy$i.log" >&2; die "proxy $i exited"; }
      fi
    done
    for j in $(seq 0 $((frontends - 1))); do
      add_ns "$prefix-pg$j" "pg$j" "$subnet.$((100 + j))"
      ip netns exec "$prefix-pg$j" "$root/scripts/pg-instance.sh" start "$dir/pg$j" \
        --set "ramp.nodes=$tcp_list" --set ramp.transport=tcp \
        --set "ramp.token_file=$dir/token.postgres" >/dev/null
    done
    trap - EXIT
    echo "netns-cluster: $nodes nodes, $frontends frontends up in $dir" \
      "(ramp.nodes = '$tcp_list'; run tools with: $0 exec $dir client ...)"
    ;;
  stop)
    stop_cluster
    ;;
  status)
    [ -n "$(cluster_namespaces)" ] || { echo "netns-cluster: no cluster in $dir"; exit 1; }
    for f in "$dir"/node*.pid "$dir"/proxy*.pid; do
      [ -f "$f" ] || continue
      p=$(cat "$f")
      if alive "$p"; then echo "$(basename "$f" .pid): up (pid $p)"; else echo "$(basename "$f" .pid): DOWN"; fi
    done
    for f in "$dir"/pg*/port; do
      [ -f "$f" ] || continue
      d="$(dirname "$f")"
      if [ -f "$d/pgdata/postmaster.pid" ]; then echo "$(basename "$d"): up (port $(cat "$f"))"; else echo "$(basename "$d"): DOWN"; fi
    done
    for ns in $(cluster_namespaces); do
      echo "$ns: $(ip -n "$ns" -4 -o addr show dev eth0 2>/dev/null | awk '{print $4}')"
    done
    ;;
  exec)
    [ $# -ge 2 ] || usage
    where="$1"
    shift
    case "$where" in client) where=cl ;; esac
    [ -n "$(cluster_namespaces | grep -x "$prefix-$where")" ] || die "no namespace $prefix-$where"
    exec ip netns exec "$prefix-$where" "$@"
    ;;
  link)
    [ $# -ge 1 ] || usage
    i="$1"
    shift
    f="$dir/proxy$i.conf"
    [ -f "$f" ] && [ -f "$dir/proxy$i.pid" ] || die "node $i has no proxy"
    while [ $# -gt 0 ]; do
      case "$1" in
        --delay-us) key=delay_us ;;
        --jitter-us) key=jitter_us ;;
        --loss) key=loss_pct ;;
        --reset) key=reset_pct ;;
        *) usage ;;
      esac
      sed -i "s/^$key = .*/$key = $2/" "$f"
      shift 2
    done
    kill -HUP "$(cat "$dir/proxy$i.pid")"
    ;;
  *) usage ;;
esac
