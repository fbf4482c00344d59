#!/usr/bin/env bash
# Two PostgreSQL servers (separate data directories and ports) on one rampd cluster.
#  1. Both run the same DDL (a requirement: the second server attaches, through the cluster's
#     keyspace catalog, to the keyspaces the first registered under the same database, schema
#     and relation names). Rows and ramp_hash entries written by one are seen by the other.
#  2. Read atomicity across servers: frontend a commits transactions that each rewrite all
#     N rows of one group (spread over the partitions) with one new tag, while frontend b
#     looks groups up through the ramp_hash index and checks that it sees all N rows with one
#     tag (never a mix of two transactions, never missing or duplicated rows). Commits reach
#     one server 3 ms before the others (ramp.debug_commit_delay_us), which keeps the window
#     in which a transaction is committed at some partitions only wide open.
#  3. The same with the lookups' consistency check switched off
#     (ramp.debug_unchecked_lookups) must find fractured reads: proof that the checker in 2
#     can fail.
. "$(dirname "$0")/lib.sh"

cluster_start
pg_start a --set ramp.debug_commit_delay_us=3000 --set shared_preload_libraries=pg_ramp
pg_start b

ddl="
CREATE TABLE shared_items (id int, grp int, tag int, note text) USING ramp;
CREATE INDEX shared_items_grp ON shared_items USING ramp_hash (grp);
CREATE TABLE atom (id int, grp int, tag int, pad text) USING ramp;
CREATE INDEX atom_grp ON atom USING ramp_hash (grp);"
psql_in a -c "$ddl"
psql_in b -c "$ddl"

log "1. the same keyspaces; writes of one server are seen by the other"
for rel in shared_items shared_items_grp atom atom_grp; do
  ka="$(psql_in a -c "SELECT ramp.keyspace_of('$rel')")"
  kb="$(psql_in b -c "SELECT ramp.keyspace_of('$rel')")"
  [ -n "$ka" ] && [ "$ka" = "$kb" ] || fail "$rel: keyspace $ka on a, $kb on b"
done
psql_in a -c "INSERT INTO shared_items SELECT g, g % 10, 0, 'from a' FROM generate_series(1, 500) g"
psql_in b -c "INSERT INTO shared_items SELECT g, g % 10, 0, 'from b' FROM generate_series(501, 800) g"
for side in a b; do
  got="$(psql_in "$side" -c "SELECT count(*), count(*) FILTER (WHERE note = 'from a'),
                                    count(*) FILTER (WHERE note = 'from b') FROM shared_items")"
  [ "$got" = "800|500|300" ] || fail "$side sees $got rows (total|from a|from b), expected 800|500|300"
  got="$(psql_in "$side" -c "SET enable_seqscan = off; SET enable_bitmapscan = off;
                             SELECT count(*), count(DISTINCT note) FROM shared_items WHERE grp = 3")"
  [ "$(echo "$got" | tail -1)" = "80|2" ] || fail "$side: index lookup of grp 3 gave $got, expected 80|2"
done
# Updates and deletes on one side, through the index on the other; and a write-write
# conflict across servers.
psql_in b -c "UPDATE shared_items SET grp = 42 WHERE id % 100 = 1; DELETE FROM shared_items WHERE id % 100 = 2"
got="$(psql_in a -c "SET enable_seqscan = off; SELECT count(*) FROM shared_items WHERE grp = 42" | tail -1)"
[ "$got" = 8 ] || fail "a sees $got rows of grp 42 updated by b, expected 8"
got="$(psql_in a -c "SELECT count(*) FROM shared_items")"
[ "$got" = 792 ] || fail "a sees $got rows after b deleted 8, expected 792"
# b's UPDATE waits for a's row lock; a's UPDATE gave the row a new row id (the table has a
# ramp_hash index): b follows it there, as heap follows the ctid chain (the old row's
# tombstone names the new row id), and applies its change on top (row_locks.sh, section 8).
session_open s a
session_send s "BEGIN; UPDATE shared_items SET tag = 1 WHERE id = 7;"
session_wait s
psql_in b -v VERBOSITY=verbose -c "UPDATE shared_items SET tag = 2 WHERE id = 7 RETURNING 'followed'" >"$ITEST_DIR/b_update.out" 2>&1 &
b_update=$!
itest_background+=("$b_update")
sleep 0.7
kill -0 "$b_update" 2>/dev/null || fail "b's UPDATE of a row a holds did not wait: $(cat "$ITEST_DIR/b_update.out")"
session_send s "COMMIT;"
session_wait s
expect_not_in "$(session_last s)" "ERROR" "a's COMMIT failed"
wait "$b_update" || true
expect_not_in "$ITEST_DIR/b_update.out" "ERROR" "b's UPDATE waiting for a row a moved failed"
expect_in "$ITEST_DIR/b_update.out" "^followed$" "b's UPDATE did not follow the row a moved to its new row id"
got="$(psql_in a -c "SELECT string_agg(tag::text, ',') FROM shared_items WHERE id = 7")"
[ "$got" = 2 ] || fail "row 7 has tag(s) '$got' after a's and b's UPDATEs, expected 2"
session_close s

log "2. read atomicity: a rewrites groups, b reads them through the index"
groups=4 rows=12
psql_in a -c "INSERT INTO atom SELECT g, (g % $groups) + 1, 0, repeat('p', 100)
                FROM generate_series(1, $groups * $rows) g"
writer() {  # writer <transactions>: each rewrites one group with a new tag
  psql_in a -c "DO \$\$
  BEGIN
    FOR i IN 1..$1 LOOP
      UPDATE atom SET tag = i WHERE grp = (i % $groups) + 1;
      COMMIT;
    END LOOP;
  END \$\$;"
}
reader() {  # reader <lookups> [settings]: prints reads|fractured|distinct tags seen
  psql_in b -c "SET enable_seqscan = off; $2" -c "DO \$\$
  DECLARE
    fractured int := 0;
    tags int[] := '{}';
    r record;
  BEGIN
    FOR i IN 1..$1 LOOP
      SELECT count(*) AS n, count(DISTINCT tag) AS d, min(tag) AS t INTO r
        FROM atom WHERE grp = (i % $groups) + 1;
      IF r.n <> $rows OR r.d <> 1 THEN
        fractured := fractured + 1;
        IF fractured <= 5 THEN
          RAISE WARNING 'fractured read of grp %: % rows, % tags', (i % $groups) + 1, r.n, r.d;
        END IF;
      ELSIF NOT r.t = ANY (tags) THEN
        tags := tags || r.t;
      END IF;
    END LOOP;
    RAISE NOTICE 'result %|%|%', $1, fractured, cardinality(tags);
  END \$\$;" 2>&1
}
check_run() {  # check_run <label> <reader settings> <expect fractured: zero|some>
  writer 300 >"$ITEST_DIR/writer_$1.out" 2>&1 &
  local wpid=$!
  itest_background+=("$wpid")
  reader 3000 "$2" >"$ITEST_DIR/reader_$1.out" 2>&1 &
  local rpid=$!
  itest_background+=("$rpid")
  wait "$rpid" || fail "the reader ($1) failed: $(cat "$ITEST_DIR/reader_$1.out")"
  wait "$wpid" || fail "the writer ($1) failed: $(cat "$ITEST_DIR/writer_$1.out")"
  local result
  result="$(sed -n 's/.*NOTICE:  result //p' "$ITEST_DIR/reader_$1.out")"
  [ -n "$result" ] || fail "no result from the reader ($1): $(cat "$ITEST_DIR/reader_$1.out")"
  IFS='|' read -r reads fractured tags <<<"$result"
  log "$1: $reads lookups, $fractured fractured, $tags distinct tags seen"
  [ "$tags" -ge 3 ] || fail "$1: the reader saw only $tags tag(s): reader and writer did not overlap"
  case "$3" in
    zero) [ "$fractured" = 0 ] || { cat "$ITEST_DIR/reader_$1.out" >&2; fail "$1: fractured reads"; } ;;
    some) [ "$fractured" -gt 0 ] || fail "$1: no fractured read found with the check off" ;;
  esac
}
check_run checked "" zero
log "3. the same with the lookups' consistency check off must find fractured reads"
check_run unchecked "SET ramp.debug_unchecked_lookups = on;" some
log "two_frontends: ok"
