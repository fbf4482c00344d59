#!/usr/bin/env bash
# pgbench's TPC-B-like script on ramp tables while partitions of pgbench_accounts and
# pgbench_branches move back and forth between the three servers (ramp.migrate_partition from
# a second session), then TPC-B's invariants: sum(abalance) = sum(tbalance) = sum(bbalance) =
# sum(history.delta), one row per key, and count(history) = the transactions pgbench saw
# commit (none lost across a move). Migrations must really happen (counted) and every one
# must finish (done) or the test fails.
. "$(dirname "$0")/lib.sh"

cluster_start
pg_start a --set shared_preload_libraries=pg_ramp
psql_in a -c "ALTER DATABASE itest SET default_table_access_method = ramp"
pgbench_on a -i -q -s 1 > "$ITEST_DIR/init.out" 2>&1 || { cat "$ITEST_DIR/init.out"; fail "pgbench -i failed"; }

log "pgbench TPC-B, 4 clients, while partitions of pgbench_accounts and pgbench_branches move"
pgbench_on a -c 4 -j 2 -t 300 --max-tries=100 > "$ITEST_DIR/run.out" 2>&1 &
bench=$!
moves=0
while kill -0 "$bench" 2>/dev/null; do
  for rel in pgbench_accounts pgbench_branches; do
    # A bucket of the relation that has data, to the next node.
    target="$(psql_in a -c "SELECT bucket || ' ' || (owner + 1) % 3 FROM ramp.partitions()
                             WHERE relation = '$rel'::regclass AND keys > 0
                             ORDER BY random() LIMIT 1")"
    [ -n "$target" ] || continue
    read -r bucket node <<<"$target"
    if ! out="$(psql_in a -c "SELECT ramp.migrate_partition('$rel', $bucket, $node)" 2>&1)"; then
      fail "moving bucket $bucket of $rel to node $node: $out"
    fi
    moves=$((moves + 1))
  done
done
wait "$bench" || true
grep -E "processed|failed|retried|aborted|error" "$ITEST_DIR/run.out" | head -8
processed="$(awk '/number of transactions actually processed/ { split($6, a, "/"); print a[1] }' "$ITEST_DIR/run.out")"
[ -n "$processed" ] && [ "$processed" -gt 0 ] || { cat "$ITEST_DIR/run.out"; fail "pgbench committed nothing"; }
[ "$moves" -ge 4 ] || fail "only $moves migrations happened during pgbench"
unfinished="$(psql_in a -c "SELECT count(*) FROM ramp.migrations WHERE phase <> 'done'")"
[ "$unfinished" = 0 ] || fail "$unfinished migrations did not finish: $(psql_in a -c "TABLE ramp.migrations")"
violation="$(tpcb_violation a 1)"
[ -z "$violation" ] || fail "TPC-B invariant broken while partitions moved: $violation"
history="$(psql_in a -c "SELECT count(*) FROM pgbench_history")"
[ "$history" = "$processed" ] ||
  fail "pgbench reports $processed committed transactions, pgbench_history has $history rows"
log "invariants hold: $processed transactions committed during $moves migrations"
