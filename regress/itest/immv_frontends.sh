#!/usr/bin/env bash
# Materialized views (ramp.create_immv) maintained by two PostgreSQL servers on one cluster.
#  1. Both servers create the same table and view; the second attaches to the view's log
#     (it does not fill it again): both see the same view.
#  2. Both write concurrently (moves between groups, inserts, deletes, in transactions),
#     while a reader on server b compares, in single statements, the view with its base
#     table (ramp.verify_immv, and the totals). Read atomicity of view and base: 0
#     disagreements (a statement that would see a commit half done fails with 40001 instead).
#     Afterwards the views equal a recomputation on both servers.
#  3. pg_dump and restore of a database with a view: the catalog, log, view and triggers come
#     back, and later writes keep the view equal to a recomputation.
#  4. The same as 2 with the view deltas committed in a RAMP PUT of their own, after the base
#     rows (ramp.debug_immv_separate_put_ms, a test switch): the reader must see
#     disagreements, proof that it can fail.
. "$(dirname "$0")/lib.sh"

cluster_start
pg_start a
pg_start b

ddl="CREATE TABLE acct (id int, branch int, balance int) USING ramp;"
psql_in a -c "$ddl"
psql_in b -c "$ddl"
psql_in a -c "INSERT INTO acct SELECT g, g % 10, 100 FROM generate_series(1, 400) g"
views="SELECT ramp.create_immv('totals',
         'SELECT branch, count(*) AS n, sum(balance) AS total FROM acct GROUP BY branch');
       SELECT ramp.create_immv('tops', 'SELECT branch, max(balance) AS top FROM acct GROUP BY branch');"

log "1. the second server attaches to the views the first one filled"
psql_in a -c "$views" >/dev/null
psql_in b -c "$views" >/dev/null
for side in a b; do
  got="$(psql_in "$side" -c "SELECT sum(n), sum(total) FROM totals")"
  [ "$got" = "400|40000" ] || fail "$side: totals give $got, expected 400|40000 (filled twice?)"
done

# writer_script <server> <transactions> <seed>: transactions of that server on its own ids
# (a: odd, b: even), so that they conflict only through the views.
writer_script() {
  local side="$1" n="$2" parity=1
  [ "$side" = b ] && parity=0
  RANDOM="$3"
  for i in $(seq "$n"); do
    local id=$(((RANDOM % 200) * 2 + parity)) new=$((1000 + i * 2 + parity))
    echo "BEGIN;"
    echo "UPDATE acct SET balance = balance + $((RANDOM % 50)), branch = $((RANDOM % 10)) WHERE id = $id;"
    echo "INSERT INTO acct VALUES ($new, $((RANDOM % 10)), $((RANDOM % 300)));"
    echo "DELETE FROM acct WHERE id = $(((RANDOM % 200) * 2 + parity + 400));"
    echo "COMMIT;"
  done
}
# reader_script <statements>: each statement compares view and base in one snapshot.
reader_script() {
  for _ in $(seq "$1"); do
    echo "SELECT 'check', (SELECT count(*) FROM ramp.verify_immv('totals'))
                 + (SELECT count(*) FROM ramp.verify_immv('tops')),
                 (SELECT sum(total) FROM totals) - (SELECT sum(balance) FROM acct),
                 (SELECT sum(balance) FROM acct),
                 (SELECT string_agg(side || ' ' || row_data::text, '; ')
                    FROM (SELECT * FROM ramp.verify_immv('totals') UNION ALL
                          SELECT * FROM ramp.verify_immv('tops')) d);"
  done
}

# run <label> <writer settings> <expect disagreements: zero|some>
run() {
  writer_script a 150 11 >"$ITEST_DIR/writer_a_$1.sql"
  writer_script b 150 12 >"$ITEST_DIR/writer_b_$1.sql"
  reader_script 600 >"$ITEST_DIR/reader_$1.sql"
  psql_in a -v VERBOSITY=verbose -c "$2" -f "$ITEST_DIR/writer_a_$1.sql" >"$ITEST_DIR/writer_a_$1.out" 2>&1 &
  local wa=$!
  psql_in b -v VERBOSITY=verbose -c "$2" -f "$ITEST_DIR/writer_b_$1.sql" >"$ITEST_DIR/writer_b_$1.out" 2>&1 &
  local wb=$!
  itest_background+=("$wa" "$wb")
  # Probe scans (the tables are small): one snapshot and the RAMP bounds of the statement
  # for every table it scans; a statement that would see a commit half way fails with 40001.
  psql_in b -v VERBOSITY=verbose -c "SET ramp.scan_method = probe" -f "$ITEST_DIR/reader_$1.sql" >"$ITEST_DIR/reader_$1.out" 2>&1 &
  local r=$!
  itest_background+=("$r")
  wait "$wa" || fail "writer a ($1) failed"
  wait "$wb" || fail "writer b ($1) failed"
  wait "$r" || fail "the reader ($1) failed: $(tail "$ITEST_DIR/reader_$1.out")"
  local checks disagreements states conflicts reader_conflicts
  checks="$(grep -c '^check|' "$ITEST_DIR/reader_$1.out" || true)"
  disagreements="$(awk -F'|' '$1 == "check" && ($2 != 0 || $3 != 0)' "$ITEST_DIR/reader_$1.out" | wc -l)"
  states="$(awk -F'|' '$1 == "check" { print $4 }' "$ITEST_DIR/reader_$1.out" | sort -u | wc -l)"
  conflicts="$(cat "$ITEST_DIR/writer_a_$1.out" "$ITEST_DIR/writer_b_$1.out" | grep -c 40001 || true)"
  reader_conflicts="$(grep -c 'ERROR:  40001' "$ITEST_DIR/reader_$1.out" || true)"
  log "$1: $checks checks, $disagreements disagreements, $states states of the base seen," \
      "$reader_conflicts checks and $conflicts writer transactions failed with 40001"
  if [ "$3" = some ]; then
    # Deltas committed apart from their base rows: readers see the gap, and a delta PUT that
    # fails after its base rows committed leaves the view wrong for good (refreshed after).
    [ "$disagreements" -gt 0 ] || fail "$1: no disagreement seen with the deltas in a separate PUT"
    return 0
  fi
  [ "$states" -ge 3 ] || fail "$1: the reader saw $states state(s): reader and writers did not overlap"
  [ $((checks + reader_conflicts)) = 600 ] || fail "$1: the reader ran $checks checks and $reader_conflicts failed with 40001, expected 600"
  # 40001 (and, for writers, 25P02: the statements after a row lock's 40001 in the same
  # transaction block) are expected; nothing else is.
  expect_not_in "$ITEST_DIR/reader_$1.out" "ERROR:  +[^4]|ERROR:  +4[^0]" "the reader ($1) got errors"
  expect_not_in "$ITEST_DIR/writer_a_$1.out" "ERROR:  +([^24]|2[^5]|25[^P]|4[^0])" "writer a ($1): unexpected errors"
  expect_not_in "$ITEST_DIR/writer_b_$1.out" "ERROR:  +([^24]|2[^5]|25[^P]|4[^0])" "writer b ($1): unexpected errors"
  [ "$disagreements" = 0 ] || { awk -F'|' '$1 == "check" && ($2 != 0 || $3 != 0)' "$ITEST_DIR/reader_$1.out" | head >&2; fail "$1: view and base disagreed"; }
  for side in a b; do
    got="$(psql_in "$side" -c "SELECT (SELECT count(*) FROM ramp.verify_immv('totals')) +
                                      (SELECT count(*) FROM ramp.verify_immv('tops'))")"
    [ "$got" = 0 ] || fail "$1: after the writers, $got rows of the views differ from a recomputation on $side"
  done
  [ "$(psql_in a -c "SELECT * FROM totals ORDER BY 1")" = "$(psql_in b -c "SELECT * FROM totals ORDER BY 1")" ] ||
    fail "$1: the two servers show different views"
}

log "2. two servers write, a reader compares view and base in one statement"
run atomic "SET client_min_messages = error;" zero
log "3. pg_dump and restore keep a view and its maintenance"
psql_r() { "$PG_INSTANCE" psql "$ITEST_DIR/a" -X -q -At -d r "$@"; }
psql_in a -c "CREATE DATABASE r"
psql_r -c "CREATE EXTENSION pg_ramp" -c "CREATE TABLE t (id int, g int) USING ramp" \
       -c "INSERT INTO t SELECT i, i % 3 FROM generate_series(1, 30) i" \
       -c "SELECT ramp.create_immv('v', 'SELECT g, count(*) AS n, max(id) AS top FROM t GROUP BY g')" >/dev/null
"$(pg_config --bindir)/pg_dump" -h "$ITEST_DIR/a/sock" -p "$(cat "$ITEST_DIR/a/port")" -U postgres r \
  >"$ITEST_DIR/r.sql"
psql_in a -c "DROP DATABASE r"
psql_in a -c "CREATE DATABASE r"
psql_r -f "$ITEST_DIR/r.sql" >"$ITEST_DIR/restore.out" 2>&1
expect_not_in "$ITEST_DIR/restore.out" "ERROR" "the restore failed"
psql_r -c "INSERT INTO t VALUES (100, 1)" -c "DELETE FROM t WHERE id = 30" -c "UPDATE t SET g = 2 WHERE id = 1"
got="$(psql_r -c "SELECT (SELECT count(*) FROM ramp.immvs), (SELECT count(*) FROM ramp.verify_immv('v')),
                         (SELECT sum(n) FROM v), (SELECT top FROM v WHERE g = 1)")"
[ "$got" = "1|0|30|100" ] || fail "after restore and writes: $got (catalog rows|differing|rows|max of group 1), expected 1|0|30|100"

log "4. the same with the view deltas in a separate PUT must show disagreements"
run separate_put "SET client_min_messages = error; SET ramp.debug_immv_separate_put_ms = 20;" some
log "immv_frontends: ok"
