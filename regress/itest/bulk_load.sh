#!/usr/bin/env bash
# Bulk loads that commit ahead of their transaction (ramp.write_ahead_rows, DESIGN §5
# "Writes ahead of the commit"): a COPY into a table its transaction created or truncated
# sends its rows to the cluster in PUTs of their own while it runs. Checked here:
#  1. the rows really go ahead (the keyspace holds keys before COMMIT); a reader whose
#     statement started in the middle of the load (it waits for the TRUNCATE's lock) sees
#     none of it or all of it, never the part written ahead before it started; after COMMIT
#     every row is there exactly once;
#  2. ROLLBACK of such a load leaves nothing on the cluster (its keyspace holds no key) and
#     the table as it was;
#  3. later changes in the same transaction to rows already written ahead (DELETE, UPDATE,
#     ROLLBACK TO SAVEPOINT, a TRUNCATE of the table created in the transaction) end as
#     they do on heap;
#  4. a backend killed in the middle of a load leaves nothing visible, and nothing on the
#     cluster after ramp.collect_garbage().
. "$(dirname "$0")/lib.sh"

cluster_start
pg_start a
N=20000
gen() {  # gen FROM TO: COPY rows (id, text) from a program
  echo "COPY $3 FROM PROGRAM 'seq $1 $2 | awk ''{ print \$1 \"\\t\" \"row-\" \$1 }''';"
}
psql_in a -c "CREATE TABLE t (id int, v text) USING ramp"
psql_in a -c "INSERT INTO t SELECT g, 'old' FROM generate_series(1, 100) g"
keys_of() { psql_in a -c "SELECT coalesce(sum(keys), 0) FROM ramp._partitions() WHERE keyspace = $1"; }

session_open s1 a
session_open s2 a
session_send s1 "SET ramp.write_ahead_rows = 1000;"

log "1. a load into a truncated table goes ahead; a concurrent reader sees all or nothing"
session_send s1 "BEGIN; TRUNCATE t; $(gen 1 $N t)"
session_send s1 "SELECT 'KS=' || ramp.keyspace_of('t');"
session_wait s1
ks=$(sed -n 's/^KS=//p' "$(session_last s1)")
[ -n "$ks" ] || fail "no keyspace for t: $(cat "$(session_last s1)")"
ahead=$(keys_of "$ks")
[ "$ahead" -ge $((N / 2)) ] || fail "only $ahead of $N rows went to the cluster before COMMIT (no write ahead)"
# The reader's statement starts now, between two loads of the transaction (it waits for the
# TRUNCATE's lock): the rows written ahead so far are older than its snapshot, the next ones
# newer. It must see none of the transaction (it started before the commit) or all of it.
session_send s2 "SELECT 'SEEN=' || count(*) || ',' || count(DISTINCT id) || ',' || count(*) FILTER (WHERE v = 'old') FROM t;"
sleep 0.5
session_send s1 "$(gen $((N + 1)) $((2 * N)) t)"
session_send s1 "COMMIT;"
session_wait s1
session_wait s2
expect_not_in "$(session_last s1)" "ERROR" "the load failed"
seen=$(sed -n 's/^SEEN=//p' "$(session_last s2)")
[ "$seen" = "0,0,0" ] || [ "$seen" = "$((2 * N)),$((2 * N)),0" ] ||
  fail "a concurrent reader saw $seen (rows, distinct ids, old rows): neither none nor all $((2 * N)) rows of the load"
got=$(psql_in a -c "SELECT count(*) || ',' || count(DISTINCT id) || ',' || sum(id) FROM t")
[ "$got" = "$((2 * N)),$((2 * N)),$((N * (2 * N + 1)))" ] || fail "after COMMIT t holds $got (rows, distinct, sum), expected all $((2 * N)) rows once"

log "2. a rolled-back load leaves nothing"
session_send s1 "BEGIN; TRUNCATE t; $(gen 1 $N t)"
session_send s1 "SELECT 'KS=' || ramp.keyspace_of('t');"
session_wait s1
ks2=$(sed -n 's/^KS=//p' "$(session_last s1)")
ahead=$(keys_of "$ks2")
[ "$ahead" -ge $((N / 2)) ] || fail "only $ahead rows went ahead before ROLLBACK"
session_send s1 "ROLLBACK;"
session_wait s1
left=$(keys_of "$ks2")
[ "$left" = 0 ] || fail "$left keys of the rolled-back load are still on the cluster"
got=$(psql_in a -c "SELECT count(*) || ',' || sum(id) FROM t")
[ "$got" = "$((2 * N)),$((N * (2 * N + 1)))" ] || fail "after the ROLLBACK t holds $got, expected the $((2 * N)) committed rows"

log "3. changes to rows written ahead, in the same transaction, end as on heap"
script() {  # script AM
  cat <<SQL
BEGIN;
CREATE TABLE u_$1 (id int, v text) USING $1;
$(gen 1 5000 "u_$1")
SAVEPOINT s;
DELETE FROM u_$1 WHERE id <= 1000;
UPDATE u_$1 SET v = 'sub' WHERE id BETWEEN 1001 AND 2000;
ROLLBACK TO SAVEPOINT s;
DELETE FROM u_$1 WHERE id % 10 = 0;
UPDATE u_$1 SET v = 'top' WHERE id % 10 = 1;
SAVEPOINT s2;
$(gen 5001 8000 "u_$1")
DELETE FROM u_$1 WHERE id % 10 = 2;
RELEASE SAVEPOINT s2;
$(gen 8001 12000 "u_$1")
SAVEPOINT s3;
DELETE FROM u_$1 WHERE id > 10000;
ROLLBACK TO SAVEPOINT s3;
COMMIT;
BEGIN;
CREATE TABLE w_$1 (id int, v text) USING $1;
$(gen 1 5000 "w_$1")
TRUNCATE w_$1;
$(gen 1 300 "w_$1")
COMMIT;
SQL
}
session_send s1 "$(script heap)"
session_send s1 "$(script ramp)"
session_wait s1
expect_not_in "$(session_last s1)" "ERROR" "the loads of part 3 failed"
digest() { psql_in a -c "SELECT count(*) || ':' || md5(string_agg(id || '=' || v, ',' ORDER BY id)) FROM $1"; }
[ "$(digest u_ramp)" = "$(digest u_heap)" ] ||
  fail "u: ramp holds $(digest u_ramp), heap $(digest u_heap) (rows written ahead then changed)"
[ "$(digest w_ramp)" = "$(digest w_heap)" ] ||
  fail "w: ramp holds $(digest w_ramp), heap $(digest w_heap) (TRUNCATE after rows went ahead)"

log "4. a backend killed in the middle of a load leaves nothing"
session_send s2 "SET ramp.write_ahead_rows = 1000; BEGIN; CREATE TABLE k (id int, v text) USING ramp; $(gen 1 $N k)"
session_send s2 "SELECT 'KS=' || ramp.keyspace_of('k'); SELECT 'PID=' || pg_backend_pid();"
session_wait s2
ks3=$(sed -n 's/^KS=//p' "$(session_last s2)")
pid=$(sed -n 's/^PID=//p' "$(session_last s2)")
[ "$(keys_of "$ks3")" -gt 0 ] || fail "nothing of k went ahead"
kill -9 "$pid"
for _ in $(seq 100); do psql_in a -c "SELECT 1" >/dev/null 2>&1 && break; sleep 0.1; done
[ "$(psql_in a -c "SELECT count(*) FROM pg_class WHERE relname = 'k'")" = 0 ] || fail "k exists after its creator was killed"
# collect_garbage leaves registrations younger than 2 s alone (their relation may be
# committing): ask a few times.
for _ in $(seq 20); do
  psql_in a -c "SELECT ramp.collect_garbage()" >/dev/null
  left=$(keys_of "$ks3")
  [ "$left" = 0 ] && break
  sleep 0.5
done
[ "$left" = 0 ] || fail "$left keys of the killed load stay on the cluster after ramp.collect_garbage()"
log "OK"
