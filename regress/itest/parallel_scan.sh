#!/usr/bin/env bash
# Page scans are read-atomic with the rest of their statement, and parallel page scans as a
# whole: every page scan of a statement, and every participant (leader and workers) of a
# parallel one, reads whole partitions at the statement's snapshot. Writers move units from
# random rows of a 60 000-row ramp table to random rows of a 40 000-row one (both read by
# page scans; an UPDATE gives the row a new row id, in another partition) while a reader
# checks, in one statement, that the two sums add up to 0 and the first table has 60 000
# rows: with 2 workers per scan (the leader not participating, so that the partitions are
# shared between processes), then serially.
# Every row exactly once: parallel scans of pt count its rows, their distinct ids and the sum
# of the ids while the writers run (a partition handed out twice, or one never, changes
# them: shown by handing partition 3 out in place of 2).
# Proof that the check can fail: with ramp.debug_scan_own_snapshots every scan (and every
# participant of a parallel one) draws a snapshot of its own, and the same reader, with serial
# scans, must catch a wrong result. (With parallel scans the switch was caught once in 200
# statements, by a count: too rare to be a test.)
. "$(dirname "$0")/lib.sh"

cluster_start
pg_start a --set max_worker_processes=8 --set max_parallel_workers=8
psql_in a -c "CREATE TABLE pt (id int PRIMARY KEY, v bigint NOT NULL) USING ramp"
psql_in a -c "INSERT INTO pt SELECT g, 0 FROM generate_series(1, 60000) g"
psql_in a -c "CREATE TABLE pt2 (id int PRIMARY KEY, v bigint NOT NULL) USING ramp"
psql_in a -c "INSERT INTO pt2 SELECT g, 0 FROM generate_series(1, 40000) g"
cat > "$ITEST_DIR/move.sql" <<'SQL'
\set a random(1, 60000)
\set b random(1, 40000)
BEGIN;
UPDATE pt SET v = v - 1 WHERE id = :a;
UPDATE pt2 SET v = v + 1 WHERE id = :b;
END;
SQL
chmod 644 "$ITEST_DIR/move.sql"
parallel="SET max_parallel_workers_per_gather = 2; SET parallel_setup_cost = 0;
  SET parallel_tuple_cost = 0; SET min_parallel_table_scan_size = 0;
  SET parallel_leader_participation = off;"
plan="$(psql_in a -c "$parallel EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT sum(v), count(*) FROM pt")"
echo "$plan" | grep -q "Parallel Seq Scan on pt" || { echo "$plan"; fail "no parallel scan of pt"; }
echo "$plan" | grep -q "Workers Launched: 2" || { echo "$plan"; fail "the parallel scan launched no 2 workers"; }

# reads N SETTINGS: N checks while writers run; prints the first bad result.
reads() {
  local n="$1" settings="$2"
  pgbench_on a -n -c 2 -j 2 -T 600 --max-tries=1000 -f "$ITEST_DIR/move.sql" > "$ITEST_DIR/writers.out" 2>&1 &
  local writers=$!
  itest_background+=("$writers")
  sleep 1
  local bad=""
  for _ in $(seq 1 "$n"); do
    got="$(psql_in a -c "$settings SELECT (SELECT sum(v) FROM pt) + (SELECT sum(v) FROM pt2),
                                          (SELECT count(*) FROM pt)")"
    if [ "$got" != "0|60000" ]; then bad="$got"; break; fi
  done
  kill "$writers" 2>/dev/null || true
  wait "$writers" 2>/dev/null || true
  echo "$bad"
}

log "30 statements of two parallel page scans while 2 writers move units between the tables"
bad="$(reads 30 "$parallel")"
[ -z "$bad" ] || fail "a statement saw sum(pt) + sum(pt2) | count(pt) = $bad, expected 0|60000"
moved="$(psql_in a -c "SELECT count(*) FROM pt2 WHERE v <> 0")"
[ "$moved" -gt 0 ] || fail "the writers changed no row"
log "every statement saw 0|60000 ($moved rows of pt2 changed)"

log "every row exactly once: 10 parallel scans of pt (count, distinct ids, their sum) while writers run"
once="SELECT count(*), count(DISTINCT id), sum(id) FROM pt"
plan="$(psql_in a -c "$parallel EXPLAIN (COSTS OFF) $once")"
echo "$plan" | grep -q "Parallel Seq Scan on pt" || { echo "$plan"; fail "no parallel scan of pt for $once"; }
# reads_once N: N parallel scans of pt while writers run; prints the first bad result.
reads_once() {
  pgbench_on a -n -c 2 -j 2 -T 600 --max-tries=1000 -f "$ITEST_DIR/move.sql" > "$ITEST_DIR/writers.out" 2>&1 &
  local writers=$!
  itest_background+=("$writers")
  sleep 1
  local got="" bad=""
  for _ in $(seq 1 "$1"); do
    got="$(psql_in a -c "$parallel $once")"
    if [ "$got" != "60000|60000|1800030000" ]; then bad="$got"; break; fi
  done
  kill "$writers" 2>/dev/null || true
  wait "$writers" 2>/dev/null || true
  echo "$bad"
}
bad="$(reads_once 10)"
[ -z "$bad" ] || fail "a parallel scan saw count | distinct ids | sum(id) = $bad, expected 60000|60000|1800030000"
log "every parallel scan returned each of the 60000 rows once"

log "30 statements of two serial page scans"
bad="$(reads 30 "SET max_parallel_workers_per_gather = 0; SET ramp.scan_method = pages;")"
[ -z "$bad" ] || fail "a statement saw sum(pt) + sum(pt2) | count(pt) = $bad, expected 0|60000"
log "every statement saw 0|60000"

log "the check catches scans reading at snapshots of their own"
bad="$(reads 100 "SET max_parallel_workers_per_gather = 0; SET ramp.scan_method = pages;
                  SET ramp.debug_scan_own_snapshots = on;")"
[ -n "$bad" ] || fail "100 statements with scans at separate snapshots all saw 0|60000: the check cannot fail"
log "caught: sum(pt) + sum(pt2) | count(pt) = $bad"
