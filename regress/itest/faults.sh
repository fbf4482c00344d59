#!/usr/bin/env bash
# The error boundary against real servers: a rampd killed in the middle of a query gives a
# clear ERROR (SQLSTATE 08006 with a hint) and the backend stays usable (statements whose
# partitions are on live servers work while the node is down; everything works once it is
# back); a server that stops answering (SIGSTOP) leaves a statement waiting that
# statement_timeout and pg_cancel_backend() cancel, and ramp.timeout_ms turns into 08006.
. "$(dirname "$0")/lib.sh"

cluster_start
pg_start pg --set ramp.connect_timeout_ms=2000
psql_in pg <<'SQL'
CREATE TABLE f (id int, k int, v text) USING ramp;
INSERT INTO f SELECT g, g, 'v' || g FROM generate_series(1, 3000) g;
CREATE INDEX f_k ON f USING ramp_hash (k);
SQL
session_open s pg
session_send s "SET enable_seqscan = off; SET enable_bitmapscan = off;"
session_send s "SELECT 'pid', pg_backend_pid();"
session_wait s
backend="$(awk -F'|' '$1 == "pid" { print $2 }' "$(session_last s)")"
[ -n "$backend" ] || fail "no backend pid"

log "1. a node killed in the middle of a query"
# ~3000 index lookups over every partition, slowed down so that the kill lands inside.
session_send s "SELECT count(v) FROM generate_series(1, 3000) g, LATERAL (SELECT v, pg_sleep(0.002) AS z FROM f WHERE k = g) x;"
sleep 1.5
node_kill 1
session_wait s 60
out="$(session_last s)"
expect_in "$out" "ERROR: +08006:" "the query did not fail with SQLSTATE 08006"
expect_in "$out" "^HINT: .*ramp" "the error has no hint"
kill -0 "$backend" 2>/dev/null || fail "the backend is gone"

log "2. the same backend while the node is down"
session_send s "SELECT 'usable', 1;"
session_wait s
expect_in "$(session_last s)" "^usable\|1$" "SELECT 1 failed after the error"
# Lookups whose index and row partitions are on live servers work; the others fail with
# 08006 (caught per lookup).
session_send s "DO \$\$
DECLARE ok int := 0; bad int := 0;
BEGIN
  FOR i IN 1..90 LOOP
    BEGIN
      PERFORM v FROM f WHERE k = i;
      ok := ok + 1;
    EXCEPTION WHEN connection_failure THEN
      bad := bad + 1;
    END;
  END LOOP;
  RAISE NOTICE 'lookups ok=% failed=%', ok, bad;
END \$\$;"
session_wait s 120
out="$(session_last s)"
expect_in "$out" "lookups ok=[1-9][0-9]* failed=[1-9]" \
  "expected some lookups to work and some to fail while node 1 is down"
# A write that needs the dead node fails at COMMIT, cleanly.
session_send s "INSERT INTO f SELECT g, g, 'lost' FROM generate_series(5001, 5100) g;"
session_wait s 60
expect_in "$(session_last s)" "ERROR: +08006:" "a write to the dead node did not fail with 08006"

log "3. the node is back: the same backend works again"
node_restart 1
session_send s "INSERT INTO f VALUES (6000, 6000, 'after restart');"
session_send s "SELECT 'found', v FROM f WHERE k = 6000;"
session_send s "SELECT 'count', count(*) > 0 FROM f;"
session_wait s 60
out="$(session_last s)"
expect_not_in "$out" "ERROR" "statements failed after the node came back"
expect_in "$out" "^found\|after restart$" "the row written after the restart is not there"
expect_in "$out" "^count\|t$" "count(*) failed after the restart"
expect_not_in "$out" "lost" "rows of the failed write are visible"

log "4. a server that stops answering: statement_timeout"
session_send s "SET ramp.timeout_ms = 600000; SET statement_timeout = '1s';"
session_wait s
node_stop 2
session_send s "SELECT count(*) FROM f WHERE k BETWEEN 1 AND 100;"
session_send s "SELECT count(v) FROM f;"
session_wait s 60
out="$(session_last s)"
expect_in "$out" "ERROR: +57014: canceling statement due to statement timeout" \
  "statement_timeout did not cancel a statement waiting on a stopped server"
session_send s "RESET statement_timeout; SELECT 'usable', 2;"
session_wait s
expect_in "$(session_last s)" "^usable\|2$" "the backend is not usable after the timeout"

log "5. ... and pg_cancel_backend()"
# The statement may reconnect to the stopped server: a long connect timeout keeps it waiting
# until the cancel arrives, however slowly the polling below runs on a loaded machine.
session_send s "SET ramp.connect_timeout_ms = 600000;"
session_wait s
session_send s "SELECT count(v) FROM f;"
for _ in $(seq 100); do
  state="$(psql_in pg -c "SELECT state FROM pg_stat_activity WHERE pid = $backend")"
  [ "$state" = active ] && break
  sleep 0.1
done
[ "$state" = active ] || fail "the statement did not start"
sleep 0.5
[ "$(psql_in pg -c "SELECT pg_cancel_backend($backend)")" = t ] || fail "pg_cancel_backend failed"
session_wait s 60
expect_in "$(session_last s)" "ERROR: +57014: canceling statement due to user request" \
  "pg_cancel_backend did not cancel a statement waiting on a stopped server"
session_send s "RESET ramp.connect_timeout_ms;"
session_wait s

log "6. ... and ramp.timeout_ms"
session_send s "SET ramp.timeout_ms = 1500; SELECT count(v) FROM f;"
session_wait s 60
out="$(session_last s)"
expect_in "$out" "ERROR: +08006:" "ramp.timeout_ms did not end the wait with 08006"
expect_in "$out" "^HINT: " "the timeout error has no hint"

log "7. the server answers again: the backend works"
node_cont 2
session_send s "RESET ramp.timeout_ms; SELECT 'count', count(*) FROM f;"
session_wait s 60
out="$(session_last s)"
expect_not_in "$out" "ERROR" "statements failed after SIGCONT"
expect_in "$out" "^count\|[0-9]+$" "count(*) failed after SIGCONT"
kill -0 "$backend" 2>/dev/null || fail "the backend is gone"

log "8. a server stops in the middle of a scan run by a function"
# The function's scan lives in SPI's memory, which a transaction block frees only after the
# transaction's abort callbacks: the client the scan reads through must outlive it (the
# backend crashed when the error's reconnect freed the client at the abort callback).
psql_in pg -c "CREATE TABLE big (id int, v text) USING ramp;
  INSERT INTO big SELECT g, repeat('x', 200) FROM generate_series(1, 100000) g;" >/dev/null
session_send s "SET ramp.timeout_ms = 1500; BEGIN; DO \$\$ BEGIN PERFORM count(*) FROM big
  WHERE id % 1000 <> 0 OR pg_sleep(0.1) IS NOT NULL; END \$\$; ROLLBACK;"
sleep 2
node_stop 2
session_wait s 60
expect_in "$(session_last s)" "ERROR: +08006:" "a scan in a function did not fail with 08006"
kill -0 "$backend" 2>/dev/null || fail "the backend crashed after an error in a function's scan"
node_cont 2
session_send s "RESET ramp.timeout_ms; SELECT 'count', count(*) FROM f;"
session_wait s 60
expect_in "$(session_last s)" "^count\|[0-9]+$" "count(*) failed after the function's error"
expect_not_in "$ITEST_DIR/pg/postgres.log" "terminated by signal|PANIC" "a backend crashed"
session_close s
log "faults: ok"
