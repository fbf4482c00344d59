#!/usr/bin/env bash
# make demo: the main job on a fresh machine (DESIGN §3). Builds everything, starts a local
# cluster of 3 rampd (durable, with data directories) and a throwaway PostgreSQL, loads TPC-H
# at a small scale into ramp tables (and heap tables, to check the answers), runs the 22
# queries, a short pgbench while partitions of pgbench_accounts move between the servers, the
# read-atomicity checker (its partitions moving too), TPC-B on tables with foreign keys (row
# locks follow their updates), a RAMP-maintained materialized view,
# shows that a dropped and re-created database starts empty (rampctl keyspaces) and that
# temporary tables stay local, and prints a report.
#   scripts/demo.sh [--sf SF] [--keep]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
sf=0.1 keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --sf) sf="$2"; shift 2 ;;
    --keep) keep=1; shift ;;
    *) sed -n '2,8p' "$0" >&2; exit 2 ;;
  esac
done

step() { printf '\n== %s\n' "$*"; }
step "building (Release) and installing the extension"
make -C "$root" --no-print-directory all extension-install 2>&1 | grep -E "^(make|cmake|install-deps).*(rror|Installing)|error" || true

work="$(mktemp -d /tmp/ramp-demo.XXXXXX)"
chmod 755 "$work"
cleanup() {
  "$root/scripts/pg-instance.sh" stop "$work/pg" >/dev/null 2>&1 || true
  "$root/scripts/ramp-cluster.sh" stop "$work/cluster" >/dev/null 2>&1 || true
  if [ "$keep" = 1 ]; then echo "demo: kept $work"; else rm -rf "$work"; fi
}
trap cleanup EXIT

step "starting 3 rampd partition servers (tcp + shm, durable) and PostgreSQL"
"$root/scripts/ramp-cluster.sh" start "$work/cluster" --nodes 3 --data --memory-mb 1024
"$root/scripts/pg-instance.sh" start "$work/pg" --ramp-cluster "$work/cluster" \
  --set shared_preload_libraries=pg_ramp
pg() { "$root/scripts/pg-instance.sh" psql "$work/pg" -v ON_ERROR_STOP=1 "$@"; }
pg -q -c "CREATE DATABASE demo"
pg -q -d demo -c "CREATE EXTENSION pg_ramp"
dsn="host=$work/pg/sock port=$(cat "$work/pg/port") user=postgres dbname=demo"
tcp_seed="$(cut -d, -f1 "$work/cluster/nodes.tcp")"
bin="$root/build/engine/tools"

step "loading TPC-H SF $sf into heap tables (the reference) and ramp tables"
"$root/bench/tpch/load.sh" -d "$dsn" -s "$sf" -n heap
"$root/bench/tpch/load.sh" -d "$dsn" -s "$sf" -n ramp -a ramp

step "the 22 TPC-H queries on ramp tables, checked against heap"
tpch_out="$work/tpch.out"
tpch_status=0
python3 "$root/bench/tpch/compare.py" --dsn "$dsn" --sf "$sf" --runs 1 \
  --schema-a heap --schema-b ramp | tee "$tpch_out" || tpch_status=1

step "pgbench on ramp tables (scale 1, 10 s select-only, 10 s TPC-B)"
pg -q -c "CREATE DATABASE bench"
pg -q -d bench -c "CREATE EXTENSION pg_ramp"
pg -q -c "ALTER DATABASE bench SET default_table_access_method = ramp"
pgbench_in() {  # pgbench_in DATABASE [pgbench args]
  local db="$1"
  shift
  runuser -u postgres -- "$(pg_config --bindir)/pgbench" -h "$work/pg/sock" \
    -p "$(cat "$work/pg/port")" -U postgres "$@" "$db"
}
pgb() { pgbench_in bench "$@"; }
pgb -i -q -s 1 2>&1 | tail -1
# pgbench exits non-zero when a client gives up; the report says what it measured anyway.
cache_before=$(pg -X -q -At -d bench -c "SELECT lookups, hits FROM ramp.address_cache()")
select_tps=$({ pgb -S -c 4 -j 2 -T 10 2>&1 || true; } | awk '/^tps = / { print $3; exit }')
# The backends share one address cache (pg_ramp is preloaded): most point reads are one-sided.
one_sided=$(pg -X -q -At -d bench -c "SELECT lookups, hits FROM ramp.address_cache()" |
  awk -F'|' -v b="$cache_before" '{ split(b, x, "|"); n = $1 - x[1]; h = $2 - x[2];
    printf "%.0f %% of %d point reads", (n > 0 ? 100 * h / n : 0), n }')
# Partitions of pgbench_accounts move to another server while TPC-B runs (live migration).
move_partitions() {
  sleep 2
  for b in 0 1 2 3; do
    pg -X -q -At -d bench -c "SELECT ramp.migrate_partition('pgbench_accounts', $b,
      (SELECT (owner + 1) % 3 FROM ramp.partitions() WHERE relation = 'pgbench_accounts'::regclass AND bucket = $b))" >/dev/null || echo "move of bucket $b failed"
  done
}
owners_before=$(pg -X -q -At -d bench -c "SELECT string_agg(owner::text, ',' ORDER BY bucket) FROM ramp.partitions() WHERE relation = 'pgbench_accounts'::regclass AND bucket < 4")
move_partitions > "$work/moves.out" 2>&1 &
mover=$!
tpcb_out=$({ pgb -c 4 -j 2 -T 10 --verbose-errors 2>&1 || true; })
wait "$mover" || true
cat "$work/moves.out"
# A transaction that failed says why (pgbench --verbose-errors).
echo "$tpcb_out" | grep -E "got an error|aborted" | head -n 5 || true
owners_after=$(pg -X -q -At -d bench -c "SELECT string_agg(owner::text, ',' ORDER BY bucket) FROM ramp.partitions() WHERE relation = 'pgbench_accounts'::regclass AND bucket < 4")
echo "owners of pgbench_accounts buckets 0-3: before $owners_before, after $owners_after (moved during TPC-B)"
pg -d bench -c "SELECT relation, bucket, source, target, phase, bytes_copied, bytes_total FROM ramp.migrations ORDER BY started LIMIT 4" | sed 's/^/  /' || true
tpcb_tps=$(echo "$tpcb_out" | awk '/^tps = / { print $3; exit }')
tpcb_failed=$(echo "$tpcb_out" | awk '/number of failed transactions/ { print $5, $6; exit }')
echo "select-only: ${select_tps:-?} tps; TPC-B: ${tpcb_tps:-?} tps (failed: ${tpcb_failed:-?}; concurrent updates wait on row locks)"
step "TPC-B invariants on ramp tables (every transaction all-or-nothing)"
pgb_sql() { "$root/scripts/pg-instance.sh" psql "$work/pg" -X -q -At -d bench -c "$1"; }
invariants=$(pgb_sql "SELECT (SELECT sum(abalance) FROM pgbench_accounts) = (SELECT coalesce(sum(delta), 0) FROM pgbench_history)
                         AND (SELECT sum(tbalance) FROM pgbench_tellers) = (SELECT coalesce(sum(delta), 0) FROM pgbench_history)
                         AND (SELECT sum(bbalance) FROM pgbench_branches) = (SELECT coalesce(sum(delta), 0) FROM pgbench_history)")
echo "sum(abalance) = sum(tbalance) = sum(bbalance) = sum(delta): $invariants"

step "TPC-B on tables with foreign keys (pgbench -i --foreign-keys, 4 clients, 10 s): row locks, no 40001"
pg -q -c "CREATE DATABASE bench_fk"
pg -q -d bench_fk -c "CREATE EXTENSION pg_ramp"
pg -q -c "ALTER DATABASE bench_fk SET default_table_access_method = ramp"
pgbench_in bench_fk -i -q -s 1 --foreign-keys 2>&1 | tail -1
fk_out=$({ pgbench_in bench_fk -c 4 -j 2 -T 10 2>&1 || true; })
fk_tps=$(echo "$fk_out" | awk '/^tps = / { print $3; exit }')
fk_failed=$(echo "$fk_out" | awk '/number of failed transactions/ { print $5, $6; exit }')
fk_invariants=$("$root/scripts/pg-instance.sh" psql "$work/pg" -X -q -At -d bench_fk -c "SELECT (SELECT sum(abalance) FROM pgbench_accounts) = (SELECT coalesce(sum(delta), 0) FROM pgbench_history)
                         AND (SELECT sum(bbalance) FROM pgbench_branches) = (SELECT coalesce(sum(delta), 0) FROM pgbench_history)")
echo "TPC-B with foreign keys: ${fk_tps:-?} tps (failed: ${fk_failed:-?}); balances agree: ${fk_invariants:-?}"

step "read-atomicity checker: writers and readers on groups spread over the 3 servers, their partitions moving (5 s)"
check_out=$("$bin/ramp_check" --nodes "$(cat "$work/cluster/nodes.shm")" --token-file "$work/cluster/token" --duration-ms 5000 --migrate 2>&1) || true
echo "$check_out"

step "RAMP-maintained materialized views: over pgbench_accounts, and a join of tellers and branches; writes; verify"
pgb_sql "SELECT ramp.create_immv('branch_totals', 'SELECT bid, count(*) AS accounts, sum(abalance) AS balance, max(abalance) AS top FROM pgbench_accounts GROUP BY bid')" >/dev/null
{ pgb -c 2 -j 2 -T 5 2>&1 || true; } | awk '/^tps = / { print "TPC-B with the view: " $3 " tps" }'
pg -d bench -c "SELECT * FROM branch_totals ORDER BY bid" | sed 's/^/  /'
immv_diff=$(pgb_sql "SELECT count(*) FROM ramp.verify_immv('branch_totals')")
immv_agrees=$(pgb_sql "SELECT (SELECT sum(balance) FROM branch_totals) = (SELECT sum(abalance) FROM pgbench_accounts)")
echo "rows where the view and a recomputation differ: ${immv_diff:-?}; view total = table total in one statement: ${immv_agrees:-?}"
# Every TPC-B transaction writes both tables of this join view: a backend learns it and takes
# its turn from its first write on (its first such transaction may meet a deadlock, 40P01).
pgb_sql "SELECT ramp.create_immv('branch_tellers', 'SELECT b.bid, count(*) AS tellers, sum(t.tbalance) AS teller_balance FROM pgbench_tellers t JOIN pgbench_branches b ON t.bid = b.bid GROUP BY b.bid')" >/dev/null
{ pgb -c 2 -j 2 -T 5 2>&1 || true; } | awk '/^tps = / { tps = $3 } /number of failed transactions/ { failed = $5 " " $6 }
  END { print "TPC-B with a join view of tellers and branches as well: " tps " tps, failed: " failed }'
join_diff=$(pgb_sql "SELECT count(*) FROM ramp.verify_immv('branch_tellers')")
echo "rows where the join view and a recomputation differ: ${join_diff:-?}"

step "keyspaces: a dropped database's rows never come back; temporary tables stay local"
pg -q -c "CREATE DATABASE scratch"
pg -q -d scratch -c "CREATE EXTENSION pg_ramp" -c "CREATE TABLE t (id int, v text) USING ramp" \
  -c "INSERT INTO t SELECT g, 'old' FROM generate_series(1, 100) g"
pg -q -c "DROP DATABASE scratch"
pg -q -c "CREATE DATABASE scratch"
recreated=$(pg -X -q -At -d scratch -c "CREATE EXTENSION pg_ramp" \
  -c "CREATE TABLE t (id int, v text) USING ramp" -c "SELECT count(*) FROM t")
removed=$(pg -X -q -At -d demo -c "SELECT ramp.collect_garbage()")
temp_rows=$(pg -X -q -At -d bench -c "CREATE TEMP TABLE scratch_tmp AS SELECT g FROM generate_series(1, 1000) g" \
  -c "SELECT count(*) || ' rows, ' || (SELECT count(*) FROM ramp.keyspaces k JOIN pg_class c ON c.oid = k.relid WHERE c.relname = 'scratch_tmp') || ' keyspaces' FROM scratch_tmp")
echo "re-created table: ${recreated:-?} old rows; ramp.collect_garbage() removed ${removed:-?} keyspace(s) of the dropped database"
echo "temporary table under default_table_access_method = ramp: ${temp_rows:-?} (a local heap table)"
"$bin/rampctl" --node "$tcp_seed" --token-file "$work/cluster/token" keyspaces | head -8 | sed 's/^/  /'

step "report"
echo "cluster:"
"$bin/rampctl" --node "$tcp_seed" --token-file "$work/cluster/token" status | sed 's/^/  /'
echo
echo "partitions of the ramp schema (from SQL: ramp.partitions()):"
pg -d demo -c "SELECT owner, count(*) AS partitions, sum(keys) AS rows, pg_size_pretty(sum(bytes)::bigint) AS bytes FROM ramp.partitions() GROUP BY owner ORDER BY owner" | sed 's/^/  /'
echo "TPC-H SF $sf on ramp tables:"
grep -E "^total|RESULT .*total_time" "$tpch_out" | sed 's/^/  /'
if [ "$tpch_status" = 0 ]; then echo "  all 22 queries returned exactly the heap result"; else echo "  SOME QUERIES DIFFER (see above)"; fi
echo "pgbench on ramp tables: select-only ${select_tps:-?} tps (one-sided GET*: ${one_sided:-?}), TPC-B ${tpcb_tps:-?} tps (failed ${tpcb_failed:-?}); TPC-B balances agree: ${invariants:-?}"
echo "live migration: pgbench_accounts buckets 0-3 owned by $owners_before before TPC-B, by $owners_after after"
echo "TPC-B on tables with foreign keys: ${fk_tps:-?} tps (failed ${fk_failed:-?}); balances agree: ${fk_invariants:-?}"
echo "materialized views branch_totals / branch_tellers (join): ${immv_diff:-?} / ${join_diff:-?} rows differ from a recomputation"
echo "read atomicity: $(echo "$check_out" | grep '^ramp_check:' | sed 's/^ramp_check: //' | paste -sd ';' -)"
echo "keyspaces: a re-created database's table saw ${recreated:-?} old rows"
[ "$tpch_status" = 0 ] && [ "$invariants" = t ] && [ "$fk_invariants" = t ] && [ "$recreated" = 0 ] && [ "$immv_diff" = 0 ] &&
  [ "$join_diff" = 0 ] &&
  [ "$immv_agrees" = t ] && [ "$owners_before" != "$owners_after" ]
