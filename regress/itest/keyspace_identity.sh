#!/usr/bin/env bash
# Keyspace identity (issue 12, item 1): a table incarnation's keyspace is never reused by
# another incarnation, while PostgreSQL servers running the same DDL still share a table.
#  1. A re-created database sees none of the old database's rows (table scan and ramp_hash).
#  2. The dropped database's keyspaces are removed: by ramp.collect_garbage() from another
#     database, and by the DROP DATABASE hook when the library is loaded (preloaded).
#  3. pg_dump, DROP DATABASE, CREATE DATABASE, restore: the rows come back once.
#  4. Two servers running the same DDL share the table (through the cluster's catalog);
#     a re-created table on one server gets a new keyspace and the other attaches to it.
#  5. rampctl keyspaces lists the catalog with sizes and unregistered keyspaces (orphans of
#     pg_ramp before the catalog); rampctl drop-keyspace removes one, refusing a live one
#     without --force; ids are decimal as in SQL.
. "$(dirname "$0")/lib.sh"

cluster_start
pg_start a
pg_start b
bindir="$(pg_config --bindir)"
rampctl="$(dirname "${RAMPD:-$RAMP_ROOT/build/engine/tools/rampd}")/rampctl"
ctl() { "$rampctl" --node "$(cat "$CLUSTER/nodes.shm" | cut -d, -f1)" --token-file "$CLUSTER/token" "$@"; }
psql_db() {  # psql_db INSTANCE DB [psql args]
  local name="$1" db="$2"
  shift 2
  "$PG_INSTANCE" psql "$ITEST_DIR/$name" -X -q -At -v ON_ERROR_STOP=1 -d "$db" "$@"
}
ddl="CREATE EXTENSION pg_ramp;
CREATE TABLE t (id int, v text) USING ramp;
CREATE INDEX t_id ON t USING ramp_hash (id);"

log "1. a re-created database does not see the old rows"
psql_in a -c "CREATE DATABASE d"
psql_db a d -c "$ddl" -c "INSERT INTO t VALUES (1, 'old'), (2, 'old')"
old_ks="$(psql_db a d -c "SELECT ramp.keyspace_of('t')")"
old_oid="$(psql_in a -c "SELECT oid FROM pg_database WHERE datname = 'd'")"
psql_in a -c "DROP DATABASE d"
psql_in a -c "CREATE DATABASE d"
psql_db a d -c "$ddl"
new_ks="$(psql_db a d -c "SELECT ramp.keyspace_of('t')")"
[ "$old_ks" != "$new_ks" ] || fail "the re-created table got the old keyspace $old_ks"
got="$(psql_db a d -c "SELECT count(*) FROM t")"
[ "$got" = 0 ] || fail "the re-created database sees $got old rows"
got="$(psql_db a d -c "SET enable_seqscan = off; SET enable_bitmapscan = off" \
         -c "SELECT count(*) FROM t WHERE id = 1")"
[ "$got" = 0 ] || fail "the re-created database sees $got old rows through ramp_hash"
psql_db a d -c "INSERT INTO t VALUES (1, 'new')"
got="$(psql_db a d -c "SET enable_seqscan = off; SET enable_bitmapscan = off" \
         -c "SELECT string_agg(v, ',') FROM t WHERE id = 1")"
[ "$got" = new ] || fail "lookup in the re-created table gave '$got', expected 'new'"

log "2. the dropped database's keyspaces are removed"
got="$(psql_in a -c "SELECT count(*) FROM ramp.cluster_keyspaces()
                      WHERE database_oid = $old_oid AND state = 'live'")"
[ "$got" = 2 ] || fail "the cluster's catalog has $got live keyspaces of the dropped database, expected 2"
got="$(psql_in a -c "SELECT ramp.collect_garbage()")"
[ "$got" = 2 ] || fail "ramp.collect_garbage() removed $got keyspaces, expected 2 (table and index)"
got="$(psql_in a -c "SELECT count(*) FROM ramp.cluster_keyspaces()
                      WHERE database_oid = $old_oid AND state = 'live'")"
[ "$got" = 0 ] || fail "$got keyspaces of the dropped database are still live"
got="$(psql_in a -c "SELECT count(*) FROM ramp.partitions() WHERE keyspace = $old_ks")"
[ "$got" = 0 ] || fail "the dropped database's table still has $got partitions"
got="$(psql_in a -c "SELECT ramp.collect_garbage()")"
[ "$got" = 0 ] || fail "a second ramp.collect_garbage() reports $got removed keyspaces"
# With the library loaded in the backend that drops the database (as when preloaded), the
# DROP DATABASE hook removes them at once.
psql_in a -c "CREATE DATABASE d2"
psql_db a d2 -c "$ddl" -c "INSERT INTO t VALUES (1, 'x')"
d2_oid="$(psql_in a -c "SELECT oid FROM pg_database WHERE datname = 'd2'")"
psql_in a -c "LOAD 'pg_ramp'" -c "DROP DATABASE d2"
got="$(psql_in a -c "SELECT string_agg(state, ',') FROM ramp.cluster_keyspaces() WHERE database_oid = $d2_oid")"
[ "$got" = "dropped,dropped" ] || fail "after DROP DATABASE with the library loaded: states '$got'"
got="$(psql_in a -c "SELECT ramp.collect_garbage()")"
[ "$got" = 0 ] || fail "ramp.collect_garbage() removed $got keyspaces after the hook removed them"

# DROP EXTENSION: the keyspaces stay registered to the database; ramp.collect_garbage()
# after a new CREATE EXTENSION removes them (entries younger than 2 s are left alone).
psql_db a d -c "DROP EXTENSION pg_ramp CASCADE" -c "CREATE EXTENSION pg_ramp"
sleep 2.5
got="$(psql_db a d -c "SELECT ramp.collect_garbage()")"
[ "$got" = 2 ] || fail "ramp.collect_garbage() after DROP EXTENSION removed $got keyspaces, expected 2"
got="$(psql_db a d -c "SELECT count(*) FROM ramp.cluster_keyspaces() WHERE keyspace = $new_ks AND state = 'dropped'")"
[ "$got" = 1 ] || fail "the keyspace of the table dropped with the extension is not marked dropped"
# A rolled-back CREATE TABLE leaves no live registration.
psql_in a -c "BEGIN" -c "CREATE TABLE never (id int) USING ramp" -c "ROLLBACK"
got="$(psql_in a -c "SELECT string_agg(state, ',') FROM ramp.cluster_keyspaces() WHERE relation = 'never'")"
[ "$got" = dropped ] || fail "a rolled-back CREATE TABLE left the registration '$got'"

log "3. dump and restore do not double the rows"
psql_in a -c "CREATE DATABASE r"
psql_db a r -c "$ddl" -c "INSERT INTO t VALUES (1, '100'), (2, '200')"
"$bindir/pg_dump" -h "$ITEST_DIR/a/sock" -p "$(cat "$ITEST_DIR/a/port")" -U postgres r \
  >"$ITEST_DIR/r.sql"
psql_in a -c "DROP DATABASE r"
psql_in a -c "CREATE DATABASE r"
psql_db a r -f "$ITEST_DIR/r.sql" >/dev/null
got="$(psql_db a r -c "SELECT count(*), sum(v::int) FROM t")"
[ "$got" = "2|300" ] || fail "after restore: $got (count|sum), expected 2|300"
got="$(psql_db a r -c "SET enable_seqscan = off; SET enable_bitmapscan = off" \
         -c "SELECT count(*) FROM t WHERE id = 2")"
[ "$got" = 1 ] || fail "after restore the index finds $got rows of id 2, expected 1"

log "4. two servers with the same DDL share the table"
psql_in a -c "CREATE TABLE s (id int) USING ramp"
psql_in b -c "CREATE TABLE s (id int) USING ramp"
ka="$(psql_in a -c "SELECT ramp.keyspace_of('s')")"
kb="$(psql_in b -c "SELECT ramp.keyspace_of('s')")"
[ -n "$ka" ] && [ "$ka" = "$kb" ] || fail "s: keyspace $ka on a, $kb on b"
psql_in a -c "INSERT INTO s VALUES (1)"
psql_in b -c "INSERT INTO s VALUES (2)"
got="$(psql_in b -c "SELECT count(*) FROM s")"
[ "$got" = 2 ] || fail "b sees $got rows of the shared table, expected 2"
# a re-creates it: a new keyspace; b, running the same DDL, attaches to the new one.
psql_in a -c "DROP TABLE s" -c "CREATE TABLE s (id int) USING ramp"
psql_in b -c "DROP TABLE s" -c "CREATE TABLE s (id int) USING ramp"
ka2="$(psql_in a -c "SELECT ramp.keyspace_of('s')")"
kb2="$(psql_in b -c "SELECT ramp.keyspace_of('s')")"
[ "$ka2" != "$ka" ] && [ "$ka2" = "$kb2" ] || fail "re-created s: $ka2 on a, $kb2 on b (old $ka)"
got="$(psql_in b -c "SELECT count(*) FROM s")"
[ "$got" = 0 ] || fail "the re-created shared table has $got old rows"
# TRUNCATE on the server that attached: a keyspace of its own (DDL is not coordinated).
psql_in b -c "INSERT INTO s VALUES (1)" -c "TRUNCATE s" -c "INSERT INTO s VALUES (2)"
kb3="$(psql_in b -c "SELECT ramp.keyspace_of('s')")"
[ "$kb3" != "$kb2" ] || fail "TRUNCATE on b kept the keyspace $kb2"
got="$(psql_in b -c "SELECT string_agg(id::text, ',') FROM s")"
[ "$got" = 2 ] || fail "after TRUNCATE on b: rows '$got', expected 2"

log "5. rampctl keyspaces and drop-keyspace"
ctl keyspaces >"$ITEST_DIR/keyspaces.txt"
d_ks="$(psql_db a d -c "CREATE TABLE t2 (id int) USING ramp" -c "SELECT ramp.keyspace_of('t2')")"
expect_in "$ITEST_DIR/keyspaces.txt" "^$new_ks +dropped +t +d +public +t " "rampctl keyspaces does not list d.public.t ($new_ks)"
expect_in "$ITEST_DIR/keyspaces.txt" "^$old_ks +dropped +t +d +public +t " "rampctl keyspaces does not list the dropped $old_ks"
ctl partitions >"$ITEST_DIR/partitions.txt"
r_ks="$(psql_db a r -c "SELECT ramp.keyspace_of('t')")"
expect_in "$ITEST_DIR/partitions.txt" "^$r_ks " "rampctl partitions does not show keyspace $r_ks in decimal"
got="$(psql_db a r -c "SELECT count(*) FROM ramp.partitions() WHERE keyspace = $r_ks AND relation = 't'::regclass")"
[ "$got" -gt 0 ] || fail "ramp.partitions() does not show keyspace $r_ks of r.t"
# An orphan as pg_ramp left them before the catalog: data in a keyspace nobody registered.
psql_in a -c "SET ramp.nodes = ''" -c "CREATE TABLE orphan (id int) USING ramp"
orphan="$(psql_in a -c "SELECT ramp.keyspace_of('orphan')")"
psql_in a -c "INSERT INTO orphan VALUES (1), (2)"
ctl keyspaces >"$ITEST_DIR/keyspaces.txt"
expect_in "$ITEST_DIR/keyspaces.txt" "^$orphan +unregistered " "rampctl keyspaces does not list the unregistered $orphan"
ctl keyspaces >"$ITEST_DIR/keyspaces.txt"
expect_in "$ITEST_DIR/keyspaces.txt" "^$d_ks +live +t +d +public +t2 " "rampctl keyspaces does not list the live d.public.t2 ($d_ks)"
if ctl drop-keyspace "$d_ks" >"$ITEST_DIR/drop.txt" 2>&1; then
  fail "rampctl drop-keyspace removed a live keyspace without --force"
fi
expect_in "$ITEST_DIR/drop.txt" "is live" "rampctl drop-keyspace of a live keyspace: no clear error"
ctl drop-keyspace "$orphan" >/dev/null
ctl keyspaces >"$ITEST_DIR/keyspaces.txt"
expect_not_in "$ITEST_DIR/keyspaces.txt" "^$orphan " "rampctl drop-keyspace left $orphan"
got="$(psql_in a -c "SELECT count(*) FROM orphan")"
[ "$got" = 0 ] || fail "the dropped keyspace still has $got rows"
log "OK"
