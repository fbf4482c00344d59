#!/usr/bin/env bash
# The ramp foreign data wrapper over keyspaces written by another client (issue 12, item 5):
#  1. rampctl registers ycsb.usertable as a key-value keyspace and loads it as the YCSB
#     benchmark's loader does (keys user0..user999, 1000-byte values, 100 keys per PUT);
#     IMPORT FOREIGN SCHEMA ycsb finds it; a full scan returns each of the 1000 keys once.
#  2. key IN (...) is pushed down: EXPLAIN VERBOSE names the keys, the partitions and the
#     read path (GET*), and the read returns exactly those rows.
#  3. INSERT, UPDATE, DELETE from SQL are visible to the C++ client (rampctl kv-get) after
#     COMMIT, and not before.
#  4. A value that does not decode as the declared type: ERROR 22P02 naming column and key.
#  5. Read atomicity against a concurrent C++ writer: rampctl writes the keys a and b of
#     ycsb.pairs together, 150 times; every scan and every point read sees them equal, and
#     never a duplicate key.
. "$(dirname "$0")/lib.sh"

cluster_start
pg_start a
rampctl="$(dirname "${RAMPD:-$RAMP_ROOT/build/engine/tools/rampd}")/rampctl"
ctl() { "$rampctl" --node "$(cut -d, -f1 "$CLUSTER/nodes.shm")" --token-file "$CLUSTER/token" "$@"; }
sql() { psql_in a -v ON_ERROR_STOP=1 "$@"; }
usertable=5000001
pairs=5000002

log "1. a keyspace written by the YCSB loader, imported"
ctl kv-register "$usertable" ycsb usertable
ctl kv-load "$usertable" 1000 --value-bytes 1000
ctl kv-register "$pairs" ycsb pairs --buckets 8
ctl kv-put "$pairs" a 0 b 0 >/dev/null
sql -c "CREATE SERVER cluster FOREIGN DATA WRAPPER ramp" \
    -c "CREATE SCHEMA y" \
    -c "IMPORT FOREIGN SCHEMA ycsb FROM SERVER cluster INTO y OPTIONS (value_type 'text')"
got="$(sql -c "SELECT string_agg(relname || ':' || array_to_string(ftoptions, ','), ' ' ORDER BY relname)
               FROM pg_foreign_table JOIN pg_class ON oid = ftrelid")"
[ "$got" = "pairs:keyspace=$pairs,buckets=8 usertable:keyspace=$usertable,buckets=16" ] ||
  fail "IMPORT FOREIGN SCHEMA made: $got"
got="$(sql -c "SELECT count(*), count(DISTINCT key), min(length(value)), max(length(value)),
                      count(*) FILTER (WHERE value = repeat('v', 1000))
               FROM y.usertable")"
[ "$got" = "1000|1000|1000|1000|1000" ] || fail "a scan of the loaded usertable gave $got"

log "2. key IN (...) read as one multi-key GET*"
plan="$ITEST_DIR/plan.txt"
sql -c "EXPLAIN (VERBOSE, COSTS OFF)
        SELECT key FROM y.usertable WHERE key IN ('user1', 'user500', 'user999', 'nobody')" >"$plan"
cat "$plan"
expect_in "$plan" "Ramp Read: GET\\* multi-key read" "the read path"
expect_in "$plan" "Ramp Keys: key = ANY \\('\\{user1,user500,user999,nobody\\}'::text\\[\\]\\)" "the keys"
expect_in "$plan" "Ramp Partitions: [0-9, ]+ \\([1-4] of 16\\)" "the partitions"
expect_in "$plan" "Ramp Keyspace: $usertable, 16 partitions" "the keyspace"
got="$(sql -c "SELECT string_agg(key, ',' ORDER BY key) FROM y.usertable
               WHERE key IN ('user1', 'user500', 'user999', 'nobody')")"
[ "$got" = "user1,user500,user999" ] || fail "the point read gave $got"

log "3. writes from SQL, read by the C++ client"
session_open w a
session_send w "BEGIN;"
session_send w "UPDATE y.usertable SET value = 'from sql' WHERE key = 'user7';"
session_send w "INSERT INTO y.usertable VALUES ('sqlkey', 'inserted');"
session_send w "DELETE FROM y.usertable WHERE key = 'user8';"
session_wait w
ctl kv-get "$usertable" user7 sqlkey user8 | cut -c1-24 >"$ITEST_DIR/before.txt"
session_send w "COMMIT;"
session_wait w
session_close w
cat "$(session_last w)"
expect_not_in "$(session_last w)" "ERROR" "the COMMIT"
cat "$ITEST_DIR/before.txt"
expect_in "$ITEST_DIR/before.txt" "^user7	vvvv" "user7 before COMMIT"
expect_in "$ITEST_DIR/before.txt" "^sqlkey	\\(not found\\)" "sqlkey before COMMIT"
ctl kv-get "$usertable" user7 sqlkey user8 >"$ITEST_DIR/after.txt"
cat "$ITEST_DIR/after.txt"
expect_in "$ITEST_DIR/after.txt" "^user7	from sql$" "the UPDATE"
expect_in "$ITEST_DIR/after.txt" "^sqlkey	inserted$" "the INSERT"
expect_in "$ITEST_DIR/after.txt" "^user8	\\(not found\\)$" "the DELETE"
got="$(sql -c "SELECT count(*) FROM y.usertable")"
[ "$got" = 1000 ] || fail "after one insert and one delete the scan counts $got, expected 1000"

log "4. a value that does not decode"
sql -c "CREATE FOREIGN TABLE y.as_int (key text, value int) SERVER cluster
        OPTIONS (keyspace 'ycsb.usertable')"
err="$ITEST_DIR/decode.txt"
psql_in a -v VERBOSITY=verbose -c "SELECT value FROM y.as_int WHERE key = 'user1'" >"$err" 2>&1 || true
cat "$err"
expect_in "$err" "ERROR:  22P02: value of column \"value\" of foreign table \"as_int\" does not decode as integer" "the decode error"
expect_in "$err" "DETAIL:  Key 'user1': invalid input syntax for type integer" "the key"

log "5. reads against a concurrent writer of two keys"
(for i in $(seq 1 150); do ctl kv-put "$pairs" a "$i" b "$i" || exit 1; done) &
writer=$!
itest_background+=("$writer")
checks=0
bad=0
while kill -0 "$writer" 2>/dev/null; do
  got="$(sql -c "SELECT count(*), count(DISTINCT key), count(DISTINCT value) FROM y.pairs" \
             -c "SELECT count(*), count(DISTINCT value) FROM y.pairs WHERE key IN ('a', 'b')" | tr '\n' ' ')"
  checks=$((checks + 1))
  if [ "$got" != "2|2|1 2|1 " ]; then
    bad=$((bad + 1))
    echo "fractured or duplicated: $got"
  fi
done
wait "$writer" || fail "the writer failed"
got="$(sql -c "SELECT string_agg(key || '=' || value, ',' ORDER BY key) FROM y.pairs")"
[ "$got" = "a=150,b=150" ] || fail "after the writer the pairs are $got"
log "$checks checks during the writes, $bad bad"
[ "$bad" = 0 ] || fail "$bad of $checks reads saw the pair fractured or duplicated"
[ "$checks" -gt 0 ] || fail "no read ran during the writes"
echo "fdw ok"
