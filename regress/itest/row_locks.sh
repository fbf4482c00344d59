#!/usr/bin/env bash
# Row locks on the cluster (write intents, DESIGN §5), as heap behaves:
#  1. a second UPDATE of a row waits for the first transaction, then applies its change on
#     top of the committed version, re-checking its WHERE clause (EvalPlanQual); REPEATABLE
#     READ fails with 40001 instead; readers never wait;
#  2. a deadlock gives 40P01 to one transaction and the other commits, within one server and
#     between two PostgreSQL servers;
#  3. lock_timeout, statement_timeout and pg_cancel_backend end a wait, and the backend goes on;
#  4. the holder's backend is killed (SIGKILL, on the other server): its intents expire and
#     the waiter goes on;
#  5. SELECT FOR UPDATE blocks; NOWAIT fails with 55P03; SKIP LOCKED skips the row;
#  6. a row lock held while its partition moves to another server still makes the next
#     writer wait (the intents move with the partition, DESIGN §7);
#  7. the same as 1 on tables with foreign keys (their row triggers), referencing and
#     referenced side: the second writer follows the update instead of failing with 40001;
#  8. a row the holder deleted: a waiting UPDATE, DELETE or FOR UPDATE skips it (heap's
#     TM_Deleted), REPEATABLE READ fails with 40001; a row an UPDATE moved to a new row id
#     (an indexed column changed) is followed there (the old row's tombstone names it) and
#     its WHERE clause re-checked, as heap follows the ctid chain;
#  9. no update lost: 4 clients add 1 to 3 rows that every update moves to a new row id, as
#     fast as they can; the sum is the number of updates that succeeded.
# "Waits" is checked as "has not finished after a while, and finishes once the holder ends".
. "$(dirname "$0")/lib.sh"

cluster_start
pg_start a --set deadlock_timeout=200ms
pg_start b --set deadlock_timeout=200ms
# No local index: a btree on one server would not know the rows the other wrote.
ddl="CREATE TABLE acct (id int, bal int) USING ramp;"
psql_in a -c "$ddl"
psql_in b -c "$ddl"
psql_in a -c "INSERT INTO acct SELECT g, 0 FROM generate_series(1, 20) g"
bal() { psql_in a -c "SELECT bal FROM acct WHERE id = $1"; }

# still_running NAME: what was sent to the session has not finished after a while.
pending=0
still_running() {
  pending=$((pending + 1))
  session_send "$1" "\\echo PENDING_$pending"
  sleep 0.7
  if grep -qx "PENDING_$pending" "$ITEST_DIR/$1.out"; then
    cat "$ITEST_DIR/$1.out" >&2
    fail "$2"
  fi
}
backend_of() { psql_in "$1" -c "SELECT pid FROM pg_stat_activity WHERE query LIKE '$2' AND pid <> pg_backend_pid()"; }

session_open s1 a
session_open s2 a
session_open s3 b

log "1. a second writer waits, then applies its change on top"
session_send s1 "BEGIN; UPDATE acct SET bal = bal + 1 WHERE id = 1; UPDATE acct SET bal = 5 WHERE id = 2;"
session_wait s1
session_send s2 "UPDATE acct SET bal = bal + 10 WHERE id = 1;"
session_send s2 "UPDATE acct SET bal = bal + 10 WHERE id = 2 AND bal = 0 RETURNING 'requalified';"
still_running s2 "the second UPDATE of row 1 did not wait for the first transaction"
[ "$(bal 1)" = 0 ] || fail "a reader saw row 1 at $(bal 1) before the holder committed"
session_send s1 "COMMIT;"
session_wait s1
session_wait s2
expect_not_in "$(session_last s2)" "ERROR" "the waiting UPDATEs failed"
expect_not_in "$(session_last s2)" "requalified" "the second UPDATE of row 2 ignored the new value (no re-check of its WHERE clause)"
[ "$(bal 1)" = 11 ] || fail "row 1 is $(bal 1) after +1 and +10, expected 11 (an update was lost)"
[ "$(bal 2)" = 5 ] || fail "row 2 is $(bal 2), expected 5 (the re-checked WHERE clause no longer matched)"
log "   across servers: b waits for a"
session_send s1 "BEGIN; UPDATE acct SET bal = bal + 1 WHERE id = 3;"
session_wait s1
session_send s3 "UPDATE acct SET bal = bal + 100 WHERE id = 3;"
still_running s3 "an UPDATE on server b did not wait for a's transaction"
session_send s1 "COMMIT;"
session_wait s1
session_wait s3
[ "$(bal 3)" = 101 ] || fail "row 3 is $(bal 3) after +1 on a and +100 on b, expected 101"
log "   REPEATABLE READ fails with 40001"
session_send s1 "BEGIN; UPDATE acct SET bal = bal + 1 WHERE id = 4;"
session_wait s1
session_send s2 "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1; UPDATE acct SET bal = bal + 10 WHERE id = 4;"
still_running s2 "a REPEATABLE READ UPDATE did not wait"
session_send s1 "COMMIT;"
session_wait s1
session_send s2 "ROLLBACK;"
session_wait s2
expect_in "$(session_last s2)" "ERROR: +40001: could not serialize access due to concurrent update" \
  "REPEATABLE READ did not fail with 40001 after waiting for a concurrent update"
[ "$(bal 4)" = 1 ] || fail "row 4 is $(bal 4), expected 1"

log "2. deadlocks: one side gets 40P01, the other commits"
deadlock() {  # deadlock OTHER_SESSION ROW_A ROW_B
  local other="$1" x="$2" y="$3"
  session_send s1 "BEGIN; UPDATE acct SET bal = bal + 1 WHERE id = $x;"
  session_wait s1
  session_send "$other" "BEGIN; UPDATE acct SET bal = bal + 1 WHERE id = $y;"
  session_wait "$other"
  session_send s1 "UPDATE acct SET bal = bal + 1 WHERE id = $y;"
  still_running s1 "row $y held by the other session: no wait"
  session_send "$other" "UPDATE acct SET bal = bal + 1 WHERE id = $x;"
  session_wait "$other"
  # The younger transaction (the other session's) gives way.
  expect_in "$(session_last "$other")" "ERROR: +40P01: deadlock detected" "no 40P01 for the deadlock"
  session_send "$other" "ROLLBACK;"
  session_wait "$other"
  session_send s1 "COMMIT;"
  session_wait s1
  expect_not_in "$(session_last s1)" "ERROR" "the survivor of the deadlock failed"
  [ "$(bal "$x")|$(bal "$y")" = "1|1" ] || fail "rows $x,$y are $(bal "$x"),$(bal "$y") after the deadlock, expected 1,1"
}
deadlock s2 5 6
log "   between two PostgreSQL servers"
deadlock s3 7 8

log "3. lock_timeout, statement_timeout, pg_cancel_backend end a wait; the backend goes on"
session_send s1 "BEGIN; UPDATE acct SET bal = bal + 1 WHERE id = 9;"
session_wait s1
session_send s2 "SET lock_timeout = '300ms'; UPDATE acct SET bal = bal + 10 WHERE id = 9; RESET lock_timeout;"
session_wait s2
expect_in "$(session_last s2)" "ERROR: +55P03: canceling statement due to lock timeout" "lock_timeout did not end the wait"
session_send s2 "SET statement_timeout = '300ms'; UPDATE acct SET bal = bal + 10 WHERE id = 9; RESET statement_timeout;"
session_wait s2
expect_in "$(session_last s2)" "ERROR: +57014: canceling statement due to statement timeout" "statement_timeout did not end the wait"
session_send s2 "UPDATE acct SET bal = bal + 10 WHERE id = 9;"
still_running s2 "no wait before pg_cancel_backend"
[ "$(psql_in a -c "SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity WHERE query LIKE 'UPDATE acct SET bal = bal + 10 WHERE id = 9%'")" = 1 ] ||
  fail "no waiting backend to cancel"
session_wait s2
expect_in "$(session_last s2)" "ERROR: +57014: canceling statement due to user request" "pg_cancel_backend did not end the wait"
session_send s2 "UPDATE acct SET bal = bal + 10 WHERE id = 10; SELECT 'usable ' || bal FROM acct WHERE id = 10;"
session_wait s2
expect_in "$(session_last s2)" "^usable 10$" "the backend is not usable after its wait was cancelled"
session_send s1 "COMMIT;"
session_wait s1
[ "$(bal 9)" = 1 ] || fail "row 9 is $(bal 9), expected 1 (only the holder's change)"

log "4. the holder's backend is killed: the waiter goes on"
session_send s3 "BEGIN; UPDATE acct SET bal = bal + 1 WHERE id = 11;"
session_wait s3
session_send s2 "UPDATE acct SET bal = bal + 10 WHERE id = 11;"
still_running s2 "no wait for the row held on server b"
holder="$(backend_of b 'UPDATE acct SET bal = bal + 1 WHERE id = 11%')"
[ -n "$holder" ] || fail "the holder's backend on b not found"
kill -KILL "$holder"
session_wait s2
expect_not_in "$(session_last s2)" "ERROR" "the waiter failed after the holder was killed"
[ "$(bal 11)" = 10 ] || fail "row 11 is $(bal 11), expected 10 (the killed holder's change must not commit)"
session_close s3
# The kill made b restart its backends (crash recovery): wait until it takes connections.
for _ in $(seq 1 120); do psql_in b -c "SELECT 1" >/dev/null 2>&1 && break; sleep 0.5; done

log "5. FOR UPDATE blocks; NOWAIT fails; SKIP LOCKED skips"
session_send s1 "BEGIN; SELECT id FROM acct WHERE id = 12 FOR UPDATE;"
session_wait s1
session_send s2 "SELECT id FROM acct WHERE id = 12 FOR SHARE NOWAIT;"
session_send s2 "SELECT 'skip ' || string_agg(id::text, ',') FROM (SELECT id FROM acct WHERE id IN (12, 13) ORDER BY id FOR UPDATE SKIP LOCKED) s;"
session_send s2 "SELECT 'read ' || bal FROM acct WHERE id = 12;"
session_wait s2
expect_in "$(session_last s2)" "ERROR: +55P03: could not obtain lock on row in relation \"acct\"" "NOWAIT did not fail with 55P03"
expect_in "$(session_last s2)" "^skip 13$" "SKIP LOCKED did not skip the locked row"
expect_in "$(session_last s2)" "^read 0$" "a plain reader did not read the locked row"
session_send s2 "BEGIN; SELECT 'locked ' || bal FROM acct WHERE id = 12 FOR UPDATE;"
still_running s2 "SELECT FOR UPDATE did not wait for the row locked FOR UPDATE"
session_send s1 "UPDATE acct SET bal = 7 WHERE id = 12; COMMIT;"
session_wait s1
session_send s2 "COMMIT;"
session_wait s2
expect_in "$(session_last s2)" "^locked 7$" "FOR UPDATE did not return the newest version after the wait"

log "6. a row lock moves with its partition"
# The waiter is on server b: within one server PostgreSQL's own lock would order them.
psql_in a -c "CREATE TABLE mv (id int, bal int) USING ramp; INSERT INTO mv VALUES (1, 0)"
psql_in b -c "CREATE TABLE mv (id int, bal int) USING ramp"
session_open s4 b
session_send s1 "BEGIN; SELECT id FROM mv WHERE id = 1 FOR UPDATE;"
session_wait s1
# Every bucket of mv that holds something moves (the row's, and any other key of the table).
moves="$(psql_in a -c "SELECT bucket || ' ' || (owner + 1) % 3 FROM ramp.partitions()
                       WHERE relation = 'mv'::regclass AND keys > 0")"
[ -n "$moves" ] || fail "the partitions of mv's row not found"
while read -r bucket node; do
  out="$(psql_in a -c "SELECT ramp.migrate_partition('mv', $bucket, $node)" 2>&1)" ||
    fail "moving bucket $bucket of mv to node $node: $out"
done <<<"$moves"
session_send s4 "UPDATE mv SET bal = bal + 10 WHERE id = 1;"
still_running s4 "an UPDATE of a row locked before its partition moved did not wait"
session_send s1 "UPDATE mv SET bal = bal + 1 WHERE id = 1; COMMIT;"
session_wait s1
session_wait s4
expect_not_in "$(session_last s4)" "ERROR" "the UPDATE waiting across the move failed"
session_close s4
mv_bal="$(psql_in a -c "SELECT bal FROM mv WHERE id = 1")"
[ "$mv_bal" = 11 ] || fail "mv's row is $mv_bal after +1 and +10 across a move, expected 11"

log "7. tables with foreign keys: a second writer follows the update"
# On server a only: the primary key's btree is local to it.
psql_in a -c "CREATE TABLE fkp (id int PRIMARY KEY, bal int) USING ramp;
              CREATE TABLE fkc (id int, pid int REFERENCES fkp, bal int) USING ramp;
              INSERT INTO fkp VALUES (1, 0), (2, 0); INSERT INTO fkc VALUES (1, 1, 0)"
session_send s1 "BEGIN; UPDATE fkp SET bal = bal + 1 WHERE id = 1; UPDATE fkc SET bal = bal + 1 WHERE id = 1;"
session_wait s1
session_send s2 "UPDATE fkp SET bal = bal + 10 WHERE id = 1; UPDATE fkc SET bal = bal + 10 WHERE id = 1;"
still_running s2 "an UPDATE of a referenced row did not wait for the first transaction"
session_send s1 "COMMIT;"
session_wait s1
session_wait s2
expect_not_in "$(session_last s2)" "ERROR" "the waiting UPDATEs of tables with foreign keys failed"
fk_bal="$(psql_in a -c "SELECT p.bal || ' ' || c.bal FROM fkp p, fkc c WHERE p.id = 1 AND c.id = 1")"
[ "$fk_bal" = "11 11" ] || fail "referenced and referencing rows are '$fk_bal' after +1 and +10, expected '11 11'"
# The key is still checked when the referencing column changes (that update moves the row).
psql_in a -c "UPDATE fkc SET pid = 3 WHERE id = 1" >"$ITEST_DIR/fk_missing.out" 2>&1 &&
  fail "an UPDATE to a missing key was accepted"
expect_in "$ITEST_DIR/fk_missing.out" "violates foreign key constraint" "no foreign-key error for a missing key"

log "8. a row the holder deleted is skipped by the waiters; a moved one is followed"
psql_in a -c "CREATE TABLE gone (id int, bal int) USING ramp; CREATE INDEX ON gone (bal);
              INSERT INTO gone SELECT g, 0 FROM generate_series(1, 4) g"
waits_for_delete() {  # waits_for_delete ID STATEMENT: the statement waits for a DELETE of row ID
  session_send s1 "BEGIN; DELETE FROM gone WHERE id = $1;"
  session_wait s1
  session_send s2 "$2"
  still_running s2 "a writer of row $1 being deleted did not wait: $2"
  session_send s1 "COMMIT;"
  session_wait s1
  session_wait s2
  expect_not_in "$(session_last s2)" "ERROR" "a writer waiting for a row deleted meanwhile failed (heap skips it): $2"
  expect_not_in "$(session_last s2)" "again" "a row deleted meanwhile was written or locked again: $2"
}
waits_for_delete 1 "UPDATE gone SET id = id WHERE id = 1 RETURNING 'again';"
waits_for_delete 2 "DELETE FROM gone WHERE id = 2 RETURNING 'again';"
waits_for_delete 3 "SELECT 'again' FROM gone WHERE id = 3 FOR UPDATE;"
session_send s1 "BEGIN; DELETE FROM gone WHERE id = 4;"
session_wait s1
session_send s2 "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1; UPDATE gone SET bal = 1 WHERE id = 4;"
still_running s2 "a REPEATABLE READ UPDATE of a row being deleted did not wait"
session_send s1 "COMMIT;"
session_wait s1
session_send s2 "ROLLBACK;"
session_wait s2
expect_in "$(session_last s2)" "ERROR: +40001: could not serialize access due to concurrent delete" \
  "REPEATABLE READ did not fail with 40001 for a row deleted meanwhile"
psql_in a -c "INSERT INTO gone VALUES (5, 0), (6, 0), (7, 0), (8, 0)"
follows_move() {  # follows_move ID STATEMENT: the statement waits for an UPDATE moving row ID
  session_send s1 "BEGIN; UPDATE gone SET bal = bal + 1 WHERE id = $1;"  # bal is indexed: a new row id
  session_wait s1
  session_send s2 "$2"
  still_running s2 "a writer of row $1 being moved did not wait: $2"
  session_send s1 "COMMIT;"
  session_wait s1
  session_wait s2
  expect_not_in "$(session_last s2)" "ERROR" "a writer waiting for a row moved to a new row id failed: $2"
}
follows_move 5 "UPDATE gone SET bal = bal + 10 WHERE id = 5;"
follows_move 6 "UPDATE gone SET bal = bal + 10 WHERE id = 6 AND bal = 0 RETURNING 'requalified';"
expect_not_in "$(session_last s2)" "requalified" "the WHERE clause was not re-checked on the moved row"
follows_move 7 "DELETE FROM gone WHERE id = 7;"
follows_move 8 "SELECT 'locked ' || bal FROM gone WHERE id = 8 FOR UPDATE;"
expect_in "$(session_last s2)" "^locked 1$" "FOR UPDATE did not return the moved row's newest version"
gone="$(psql_in a -c "SELECT string_agg(id || ':' || bal, ',' ORDER BY id) FROM gone")"
[ "$gone" = "5:11,6:1,8:1" ] || fail "gone holds '$gone' after updates that followed moved rows, expected '5:11,6:1,8:1'"
# The index finds the rows at their new row ids.
gone="$(psql_in a -c "SET enable_seqscan = off; SELECT string_agg(id::text, ',' ORDER BY id) FROM gone WHERE bal = 1")"
[ "$gone" = "6,8" ] || fail "the index on bal finds '$gone' for bal = 1, expected '6,8'"
session_send s1 "BEGIN; UPDATE gone SET bal = bal + 1 WHERE id = 5;"
session_wait s1
session_send s2 "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1; UPDATE gone SET bal = 0 WHERE id = 5;"
still_running s2 "a REPEATABLE READ UPDATE of a row being moved did not wait"
session_send s1 "COMMIT;"
session_wait s1
session_send s2 "ROLLBACK;"
session_wait s2
expect_in "$(session_last s2)" "ERROR: +40001: could not serialize access due to concurrent update" \
  "REPEATABLE READ did not fail with 40001 for a row moved meanwhile"

log "9. no update is lost when every update moves the row"
psql_in a -c "CREATE TABLE hot (id int, bal int) USING ramp; CREATE INDEX ON hot (bal);
              INSERT INTO hot SELECT g, 0 FROM generate_series(1, 3) g"
printf '%s\n' '\set i random(1, 3)' 'UPDATE hot SET bal = bal + 1 WHERE id = :i;' >"$ITEST_DIR/hot.sql"
chmod 644 "$ITEST_DIR/hot.sql"
pgbench_on a -n -c 4 -t 150 -f "$ITEST_DIR/hot.sql" >"$ITEST_DIR/hot.out" 2>&1 || true
done_updates="$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' "$ITEST_DIR/hot.out")"
[ -n "$done_updates" ] || { cat "$ITEST_DIR/hot.out" >&2; fail "pgbench on the moving rows did not run"; }
hot_sum="$(psql_in a -c "SELECT sum(bal) FROM hot")"
[ "$hot_sum" = "$done_updates" ] ||
  fail "$done_updates updates of moving rows succeeded but the rows add up to $hot_sum (updates lost)"
session_close s1
session_close s2
log "row_locks: ok"
