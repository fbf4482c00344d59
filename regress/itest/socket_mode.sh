#!/usr/bin/env bash
# A restarted server admits PostgreSQL at once (issue 15, item 3): rampd sets its shm socket's
# mode and group itself (--shm-socket-mode, --shm-socket-group) on every start, so nobody has
# to chmod the socket after a restart. Without them, a backend that may not open the socket
# gets a clear error: SQLSTATE 08006 with a hint naming the options, not XX000.
#  1. node 1 restarted with the umask's mode (no write bit for others): 08006 and the hint.
#  2. node 1 restarted with --shm-socket-mode 0660 --shm-socket-group postgres: PostgreSQL
#     (running as postgres) reads and writes through it, and rampctl as postgres connects.
. "$(dirname "$0")/lib.sh"

id postgres >/dev/null 2>&1 && [ "$(id -u)" = 0 ] || {
  echo "SKIP: needs root and a postgres user (the socket must be one postgres cannot open)"
  exit 0
}

cluster_start
pg_start pg --set ramp.connect_timeout_ms=2000
psql_in pg <<'SQL'
CREATE TABLE s (id int, v text) USING ramp;
INSERT INTO s SELECT g, 'v' || g FROM generate_series(1, 300) g;
SQL
rampd="${RAMPD:-$RAMP_ROOT/build/engine/tools/rampd}"
rampctl="$(dirname "$rampd")/rampctl"

# restart_node1 [rampd options]: node 1 killed and started again with the arguments
# ramp-cluster.sh gave it plus these, and nothing done to its socket afterwards.
restart_node1() {
  local line endpoints=() args readies
  node_kill 1
  line="$(sed -n 2p "$CLUSTER/cluster.conf")"
  read -r -a endpoints <<<"${line#node }"
  args=(--cluster "$CLUSTER/cluster.conf" --node 1 --token-file "$CLUSTER/token"
        --memory-mb 256 --workers 2 "$@")
  for e in "${endpoints[@]}"; do args+=(--listen "$e"); done
  readies="$(grep -c " INFO: ready$" "$CLUSTER/node1.log" || true)"
  rm -f "$CLUSTER/node1.sock"
  (umask 022; nohup "$rampd" "${args[@]}" >>"$CLUSTER/node1.log" 2>&1 &
   echo $! >"$CLUSTER/node1.pid")
  for _ in $(seq 200); do
    [ "$(grep -c " INFO: ready$" "$CLUSTER/node1.log" || true)" -gt "$readies" ] && return 0
    sleep 0.05
  done
  fail "node 1 did not restart"
}

query='DO $$
DECLARE hint text;
BEGIN
  PERFORM count(*) FROM s;
  RAISE NOTICE '"'"'scan ok'"'"';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS hint = PG_EXCEPTION_HINT;
  RAISE NOTICE '"'"'SQLSTATE %: % HINT: %'"'"', SQLSTATE, SQLERRM, hint;
END $$;'

log "1. restarted without a socket mode: the socket is 0755, postgres may not connect"
restart_node1
[ "$(stat -c %a "$CLUSTER/node1.sock")" = 755 ] ||
  fail "expected mode 755 from umask 022, got $(stat -c %a "$CLUSTER/node1.sock")"
out="$ITEST_DIR/denied.out"
psql_in pg -c "$query" >"$out" 2>&1 || true
expect_in "$out" "SQLSTATE 08006: cannot reach the ramp cluster" \
  "a refused connection did not give SQLSTATE 08006"
expect_in "$out" "HINT: .*--shm-socket-mode" "the error's hint does not name --shm-socket-mode"

log "2. restarted with --shm-socket-mode 0660 --shm-socket-group postgres"
restart_node1 --shm-socket-mode 0660 --shm-socket-group postgres
[ "$(stat -c '%a %G' "$CLUSTER/node1.sock")" = "660 postgres" ] ||
  fail "socket is $(stat -c '%a %G' "$CLUSTER/node1.sock"), expected 660 postgres"
out="$ITEST_DIR/admitted.out"
psql_in pg -c "$query" >"$out" 2>&1 || true
expect_in "$out" "scan ok" "PostgreSQL could not scan through the restarted node"
psql_in pg -c "INSERT INTO s SELECT g, 'w' FROM generate_series(301, 400) g" ||
  fail "PostgreSQL could not write through the restarted node"
# (The cluster keeps no data directory: node 1's share of the first 300 rows died with it.)
[ "$(psql_in pg -c "SELECT count(*) FROM s WHERE id > 300")" = 100 ] ||
  fail "expected the 100 rows written after the restart"
runuser -u postgres -- "$rampctl" --node "shm://$CLUSTER/node1.sock" \
  --token-file "$CLUSTER/token.postgres" status >"$ITEST_DIR/ctl.out" 2>&1 ||
  { cat "$ITEST_DIR/ctl.out" >&2; fail "rampctl as postgres could not connect"; }
log "ok"
