#!/usr/bin/env bash
# A throwaway PostgreSQL 15 for benchmarks and the demo, run as an unprivileged user
# (PostgreSQL refuses root).
#
#   scripts/pg-instance.sh start DIR [--port P] [--ramp-cluster CLUSTER_DIR] [--set name=value]...
#   scripts/pg-instance.sh stop DIR
#   scripts/pg-instance.sh psql DIR [psql args...]
#
# DIR gets the data directory (DIR/pgdata), the socket directory (DIR/sock), DIR/port and the
# log (DIR/postgres.log). With --ramp-cluster, ramp.nodes and ramp.token_file point at a
# cluster started by scripts/ramp-cluster.sh. PG_USER (default postgres when root) runs it.
set -euo pipefail

pg_bin="$(pg_config --bindir)"
usage() { sed -n '2,12p' "$0" >&2; exit 2; }
[ $# -ge 2 ] || usage
cmd="$1"
dir="$(mkdir -p "$2" && cd "$2" && pwd)"
shift 2

run_as=()
user="$(id -un)"
if [ "$(id -u)" = 0 ]; then
  user="${PG_USER:-postgres}"
  run_as=(runuser -u "$user" --)
fi

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

case "$cmd" in
  start)
    port="" cluster="" settings=()
    while [ $# -gt 0 ]; do
      case "$1" in
        --port) port="$2"; shift 2 ;;
        --ramp-cluster) cluster="$(cd "$2" && pwd)"; shift 2 ;;
        --set) settings+=("$2"); shift 2 ;;
        *) usage ;;
      esac
    done
    [ -n "$port" ] || port="$(free_port)"
    mkdir -p "$dir/sock"
    chown "$user" "$dir" "$dir/sock"
    if [ ! -f "$dir/pgdata/PG_VERSION" ]; then
      "${run_as[@]}" "$pg_bin/initdb" -D "$dir/pgdata" -U postgres --no-sync -E UTF8 \
        --locale=C > "$dir/initdb.log" 2>&1 || { cat "$dir/initdb.log" >&2; exit 1; }
    fi
    {
      echo "# written by scripts/pg-instance.sh"
      echo "listen_addresses = ''"
      echo "port = $port"
      echo "unix_socket_directories = '$dir/sock'"
      echo "shared_buffers = '1GB'"
      echo "work_mem = '64MB'"
      echo "maintenance_work_mem = '512MB'"
      echo "max_wal_size = '4GB'"
      echo "fsync = on"
      echo "synchronous_commit = on"
      echo "max_parallel_workers_per_gather = 2"
      echo "shared_preload_libraries = ''"
      if [ -n "$cluster" ]; then
        echo "ramp.nodes = '$(cat "$cluster/nodes.shm")'"
        echo "ramp.token_file = '$cluster/token.postgres'"
      fi
      for s in "${settings[@]}"; do echo "${s%%=*} = '${s#*=}'"; done
    } > "$dir/pgdata/postgresql.auto.conf"
    chown "$user" "$dir/pgdata/postgresql.auto.conf"
    echo "$port" > "$dir/port"
    "${run_as[@]}" "$pg_bin/pg_ctl" -D "$dir/pgdata" -l "$dir/postgres.log" -w -t 60 start > /dev/null
    echo "pg-instance: PostgreSQL on port $port (socket $dir/sock)"
    ;;
  stop)
    if [ -f "$dir/pgdata/postmaster.pid" ]; then
      "${run_as[@]}" "$pg_bin/pg_ctl" -D "$dir/pgdata" -m fast -w -t 60 stop > /dev/null || true
    fi
    ;;
  psql)
    exec "${run_as[@]}" "$pg_bin/psql" -X -h "$dir/sock" -p "$(cat "$dir/port")" -U postgres "$@"
    ;;
  *) usage ;;
esac
