#!/usr/bin/env bash
# Adding a node to a running cluster without restarting anything (issue 15 item 5):
#  1. 3 servers and a PostgreSQL; one backend (a psql session kept open) writes a table;
#  2. node 3 is added at the end of cluster.conf ("homes 3" keeps every partition's home):
#     the running servers take it on SIGHUP, then node 3 starts;
#  3. the same backend moves 4 of the table's partitions to node 3 (ramp.migrate_partition),
#     reads every row back, writes more (some land on node 3) and reads them: its client
#     learned of node 3 by itself, PostgreSQL was not restarted;
#  4. rampctl status: 4 nodes up, one cluster file, every server reaches every node;
#  5. a change that would renumber the nodes (node 1's line deleted) is refused by every
#     server with the reason, and nothing changes.
. "$(dirname "$0")/lib.sh"

tools="$(dirname "${RAMPD:-$RAMP_ROOT/build/engine/tools/rampd}")"
rampctl() { "$tools/rampctl" --node "$(cut -d, -f1 "$CLUSTER/nodes.tcp")" --token-file "$CLUSTER/token" "$@"; }

log "1. 3 servers, PostgreSQL, one backend writes"
cluster_start --memory-mb 256 --workers 1
pg_start pg
session_open s pg
session_send s "CREATE TABLE t (id int, v text) USING ramp;"
session_send s "INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 3000) g;"
session_send s "SELECT count(*), sum(id) FROM t;"
session_wait s
expect_in "$(session_last s)" "^3000\|4501500$" "the backend did not read its 3000 rows"

log "2. node 3 added to cluster.conf; the running servers take it on SIGHUP"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')"
node3="node tcp://127.0.0.1:$port shm://$CLUSTER/node3.sock"
{ echo "homes 3"; cat "$CLUSTER/cluster.conf"; echo "$node3"; } >"$CLUSTER/cluster.conf.new"
mv "$CLUSTER/cluster.conf.new" "$CLUSTER/cluster.conf"
for i in 0 1 2; do kill -HUP "$(node_pid "$i")"; done
for i in 0 1 2; do
  for _ in $(seq 100); do grep -q "applied (SIGHUP)" "$CLUSTER/node$i.log" && break; sleep 0.05; done
  expect_in "$CLUSTER/node$i.log" "cluster file: node 3 added at tcp://127.0.0.1:$port" \
    "node $i did not take node 3"
done
nohup "${RAMPD:-$RAMP_ROOT/build/engine/tools/rampd}" --listen "tcp://127.0.0.1:$port" \
  --listen "shm://$CLUSTER/node3.sock" --cluster "$CLUSTER/cluster.conf" --node 3 \
  --token-file "$CLUSTER/token" --memory-mb 256 --workers 1 --shm-socket-mode 0666 \
  >>"$CLUSTER/node3.log" 2>&1 &
echo $! >"$CLUSTER/node3.pid"
for _ in $(seq 200); do grep -q " INFO: ready$" "$CLUSTER/node3.log" && break; sleep 0.05; done
expect_in "$CLUSTER/node3.log" " INFO: ready$" "node 3 did not start"

log "3. the same backend moves partitions to node 3, reads and writes there"
session_send s "SELECT ramp.migrate_partition('t', b, 3) FROM generate_series(0, 3) b;"
session_send s "SELECT count(*), sum(id) FROM t;"
session_send s "INSERT INTO t SELECT g, 'w' || g FROM generate_series(3001, 3500) g;"
session_send s "SELECT count(*), sum(id) FROM t WHERE id > 3000;"
session_send s "SELECT count(*) FROM ramp.partitions() p WHERE p.keyspace = ramp.keyspace_of('t') AND p.owner = 3;"
session_wait s
cat "$(session_last s)"
expect_not_in "$(session_last s)" "ERROR" "the backend failed after node 3 was added"
expect_in "$(session_last s)" "^3000\|4501500$" "the backend did not read every row after the moves"
expect_in "$(session_last s)" "^500\|1625250$" "the backend did not read its new rows"
expect_in "$(session_last s)" "^4$" "node 3 does not own the 4 moved partitions"
session_close s
got="$(psql_in pg -c "SELECT count(*) FROM t")"
[ "$got" = 3500 ] || fail "a new backend counts $got rows, expected 3500"

log "4. rampctl status: 4 nodes, one file, a full reachability matrix"
rampctl status >"$ITEST_DIR/status" || { cat "$ITEST_DIR/status"; fail "rampctl status failed"; }
cat "$ITEST_DIR/status"
expect_in "$ITEST_DIR/status" "^3 +up .* tcp://127\.0\.0\.1:$port," "node 3 not listed with its address"
for i in 0 1 2 3; do
  expect_in "$ITEST_DIR/status" "^$i( +[0-9.]+ms){4} *$" "node $i does not reach every node"
done

log "5. deleting node 1's line (renumbering) is refused"
cp "$CLUSTER/cluster.conf" "$ITEST_DIR/good.conf"
awk '/^node / && ++n == 2 { next } { print }' "$ITEST_DIR/good.conf" >"$CLUSTER/cluster.conf.new"
grep -c "^node " "$CLUSTER/cluster.conf.new" | grep -qx 3 || fail "could not delete node 1's line"
mv "$CLUSTER/cluster.conf.new" "$CLUSTER/cluster.conf"
for i in 0 1 2 3; do kill -HUP "$(node_pid "$i")"; done
for i in 0 1 2 3; do
  for _ in $(seq 100); do grep -q "not applied (SIGHUP)" "$CLUSTER/node$i.log" && break; sleep 0.05; done
  expect_in "$CLUSTER/node$i.log" "not applied \(SIGHUP\), keeping the one in use: .*which is node 2's: nodes are numbered by their line" \
    "node $i did not refuse the renumbering"
done
rampctl status --no-probe >"$ITEST_DIR/status2" || { cat "$ITEST_DIR/status2"; fail "the cluster changed"; }
expect_not_in "$ITEST_DIR/status2" "different cluster files|DOWN" "a refused file changed a server"
log "ok"
