#!/usr/bin/env bash
# A local pg_ramp cluster for tests, benchmarks and the demo: N rampd processes on loopback
# (tcp + shm), with a cluster file and a token, in one directory.
#
#   scripts/ramp-cluster.sh start DIR [--nodes N] [--data] [--memory-mb M] [--workers W] [-- extra rampd args]
#   scripts/ramp-cluster.sh stop DIR
#   scripts/ramp-cluster.sh status DIR
#
# After start, DIR holds: cluster.conf, token (mode 600), token.postgres (the same, owned by
# the postgres user when it exists: ramp.token_file for a PostgreSQL running as postgres),
# nodes.tcp and nodes.shm (comma-separated endpoint lists, what ramp.nodes wants),
# node<i>.log, node<i>.pid, and data<i>/ with --data.
# RAMPD (default: build/engine/tools/rampd, else rampd on PATH) is the binary.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
rampd="${RAMPD:-$root/build/engine/tools/rampd}"
[ -x "$rampd" ] || rampd="$(command -v rampd || true)"

usage() { sed -n '2,14p' "$0" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd="$1"
dir="$2"
shift 2

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

stop_cluster() {
  local pids=()
  for f in "$dir"/node*.pid; do
    [ -f "$f" ] || continue
    pids+=("$(cat "$f")")
  done
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
    kill -KILL "$p" 2>/dev/null || true
  done
  rm -f "$dir"/node*.pid
}

case "$cmd" in
  start)
    nodes=3 data=0 memory=512 workers=2 extra=()
    while [ $# -gt 0 ]; do
      case "$1" in
        --nodes) nodes="$2"; shift 2 ;;
        --data) data=1; shift ;;
        --memory-mb) memory="$2"; shift 2 ;;
        --workers) workers="$2"; shift 2 ;;
        --) shift; extra=("$@"); break ;;
        *) usage ;;
      esac
    done
    [ -x "$rampd" ] || { echo "ramp-cluster: no rampd binary (build first: make)" >&2; exit 1; }
    mkdir -p "$dir"
    chmod 755 "$dir"
    [ -f "$dir/token" ] || (umask 077; head -c 24 /dev/urandom | base64 > "$dir/token")
    chmod 600 "$dir/token"
    if id postgres >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
      install -m 600 -o postgres "$dir/token" "$dir/token.postgres"
    fi
    : > "$dir/cluster.conf"
    tcp_list="" shm_list=""
    declare -a tcp shm
    for i in $(seq 0 $((nodes - 1))); do
      tcp[$i]="tcp://127.0.0.1:$(free_port)"
      shm[$i]="shm://$dir/node$i.sock"
      echo "node ${tcp[$i]} ${shm[$i]}" >> "$dir/cluster.conf"
      tcp_list="${tcp_list:+$tcp_list,}${tcp[$i]}"
      shm_list="${shm_list:+$shm_list,}${shm[$i]}"
    done
    echo "$tcp_list" > "$dir/nodes.tcp"
    echo "$shm_list" > "$dir/nodes.shm"
    for i in $(seq 0 $((nodes - 1))); do
      args=(--listen "${tcp[$i]}" --listen "${shm[$i]}" --cluster "$dir/cluster.conf" --node "$i"
            --token-file "$dir/token" --memory-mb "$memory" --workers "$workers")
      [ "$data" = 1 ] && args+=(--data "$dir/data$i")
      nohup "$rampd" "${args[@]}" "${extra[@]}" >> "$dir/node$i.log" 2>&1 &
      echo $! > "$dir/node$i.pid"
    done
    # Ready when every node logged "ready" (count lines: a restarted node appends).
    for i in $(seq 0 $((nodes - 1))); do
      for _ in $(seq 300); do
        grep -q " INFO: ready$" "$dir/node$i.log" 2>/dev/null && break
        if ! kill -0 "$(cat "$dir/node$i.pid")" 2>/dev/null; then
          echo "ramp-cluster: node $i exited:" >&2; tail -5 "$dir/node$i.log" >&2; stop_cluster; exit 1
        fi
        sleep 0.05
      done
      grep -q " INFO: ready$" "$dir/node$i.log" || { echo "ramp-cluster: node $i not ready" >&2; stop_cluster; exit 1; }
    done
    # Sockets must be reachable by PostgreSQL's user too.
    chmod 666 "$dir"/node*.sock 2>/dev/null || true
    echo "ramp-cluster: $nodes nodes up in $dir (ramp.nodes = '$shm_list')"
    ;;
  stop)
    stop_cluster
    ;;
  status)
    for f in "$dir"/node*.pid; do
      [ -f "$f" ] || continue
      p=$(cat "$f")
      if kill -0 "$p" 2>/dev/null; then echo "$(basename "$f" .pid): up (pid $p)"; else echo "$(basename "$f" .pid): DOWN"; fi
    done
    ;;
  *) usage ;;
esac
