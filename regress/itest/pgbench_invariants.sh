#!/usr/bin/env bash
# pgbench's TPC-B-like script on ramp tables (pgbench's own DDL under
# default_table_access_method = ramp), 4 concurrent clients hammering 2 branches, then the
# invariants TPC-B keeps when every transaction is all-or-nothing:
#   sum(abalance) = sum(tbalance) = sum(bbalance) = sum(history.delta),
#   one row per key in accounts, tellers and branches, count(history) = committed transactions.
# A half-applied transaction (an UPDATE lost, a row doubled by concurrent UPDATEs, a commit
# seen at one partition only) breaks one of them. pgbench runs without --max-tries: as on
# heap, concurrent UPDATEs of a row wait for each other (row locks on the cluster) instead
# of failing, so no transaction may fail.
# Proof that the check can fail: the same invariants are checked after one UPDATE outside
# pgbench's transactions (a "half transaction" made on purpose), which must be caught.
. "$(dirname "$0")/lib.sh"

cluster_start
pg_start a --set shared_preload_libraries=pg_ramp
psql_in a -c "ALTER DATABASE itest SET default_table_access_method = ramp"
pgbench_on a -i -q -s 2 > "$ITEST_DIR/init.out" 2>&1 || { cat "$ITEST_DIR/init.out"; fail "pgbench -i failed"; }
got="$(psql_in a -c "SELECT string_agg(DISTINCT a.amname, ',') FROM pg_class c JOIN pg_am a ON a.oid = c.relam
                      WHERE c.relname IN ('pgbench_accounts', 'pgbench_branches', 'pgbench_tellers', 'pgbench_history')")"
[ "$got" = ramp ] || fail "pgbench's tables are not ramp tables (access methods: $got)"

check_invariants() { tpcb_violation a 2; }  # prints the violation, or nothing

log "pgbench TPC-B, 4 clients, 2 branches, 2000 transactions"
pgbench_on a -c 4 -j 2 -t 500 --verbose-errors > "$ITEST_DIR/run.out" 2>&1 || true
grep -E "processed|failed|retried|aborted|error" "$ITEST_DIR/run.out" | head -8
failed="$(awk '/number of failed transactions/ { print $5 }' "$ITEST_DIR/run.out")"
[ "$failed" = 0 ] || { cat "$ITEST_DIR/run.out"; fail "pgbench reports ${failed:-no count of} failed transactions, expected 0"; }
processed="$(awk '/number of transactions actually processed/ { split($6, a, "/"); print a[1] }' "$ITEST_DIR/run.out")"
[ "$processed" = 2000 ] || { cat "$ITEST_DIR/run.out"; fail "pgbench committed ${processed:-no} transactions of 2000"; }
violation="$(check_invariants)"
[ -z "$violation" ] || fail "TPC-B invariant broken after concurrent pgbench: $violation"
history="$(psql_in a -c "SELECT count(*) FROM pgbench_history")"
[ "$history" = "$processed" ] ||
  fail "pgbench reports $processed committed transactions, pgbench_history has $history rows"
log "invariants hold ($processed transactions committed)"

log "the check catches a half-applied transaction"
psql_in a -c "UPDATE pgbench_tellers SET tbalance = tbalance + 1 WHERE tid = 1"
violation="$(check_invariants)"
[ "$violation" = "sum(tbalance) <> sum(delta)" ] ||
  fail "a teller updated without its branch, account and history went unnoticed ($violation)"
log "caught: $violation"
