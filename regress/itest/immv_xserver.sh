#!/usr/bin/env bash
# Materialized views whose writers must wait for each other (ramp.create_immv: joins, EXISTS,
# outer joins wait across base tables; self-joins and nested aggregates wait for every
# writer; EXISTS waits per key), written through two PostgreSQL servers at once.
#  1. Both servers insert into, and delete from, orders and items, with keys from a small
#     range, in transactions that stay open a little after their statement (so that
#     transactions of the two servers overlap): an order and its items arrive from different
#     servers at the same time. The waits are write intents on the cluster: afterwards
#     ramp.verify_immv is empty for every view, on both servers.
#  2. The same with the waits of one PostgreSQL server (ramp.debug_immv_local_waits, a test
#     switch: lock objects and advisory locks, as before the intents): the views must differ
#     from a recomputation, proof that the test can fail.
. "$(dirname "$0")/lib.sh"

cluster_start
pg_start a
pg_start b

ddl="CREATE TABLE orders (o_id int, cust int) USING ramp;
     CREATE TABLE items (l_order int, qty int) USING ramp;"
psql_in a -c "$ddl"
psql_in b -c "$ddl"
psql_in a -c "INSERT INTO orders SELECT g, g % 4 FROM generate_series(1, 10) g" \
          -c "INSERT INTO items SELECT g, 1 FROM generate_series(1, 10) g"
names="v_join v_exists v_left v_self v_nested"
views="SELECT ramp.create_immv('v_join', 'SELECT o.cust, count(*) AS n, sum(l.qty) AS q
         FROM orders o JOIN items l ON l.l_order = o.o_id GROUP BY o.cust');
       SELECT ramp.create_immv('v_exists', 'SELECT o.cust, count(*) AS n FROM orders o
         WHERE EXISTS (SELECT 1 FROM items l WHERE l.l_order = o.o_id) GROUP BY o.cust');
       SELECT ramp.create_immv('v_left', 'SELECT o.o_id, o.cust, l.qty
         FROM orders o LEFT JOIN items l ON l.l_order = o.o_id');
       SELECT ramp.create_immv('v_self', 'SELECT a.l_order, count(*) AS n
         FROM items a JOIN items b ON b.l_order = a.l_order GROUP BY a.l_order');
       SELECT ramp.create_immv('v_nested', 'SELECT n, count(*) AS orders
         FROM (SELECT l_order, count(*) AS n FROM items GROUP BY l_order) s GROUP BY n');"
psql_in a -c "$views" >/dev/null
psql_in b -c "$views" >/dev/null

# differing <server>: "view=rows ..." of the views that differ from a recomputation, and the
# total number of differing rows last.
differing() {
  local q="" v
  for v in $names; do
    q="$q SELECT '$v', count(*) FROM ramp.verify_immv('$v') UNION ALL"
  done
  psql_in "$1" -F= -c "${q% UNION ALL}" | awk -F= '{ t += $2; if ($2 != 0) printf "%s ", $0 } END { print "total=" t }'
}

# writer_script <transactions> <seed>: each transaction inserts two rows into orders or into
# items (keys 1..12), now and then deletes a key's rows, and stays open 10 ms longer.
writer_script() {
  RANDOM="$2"
  for _ in $(seq "$1"); do
    local k1=$((RANDOM % 12 + 1)) k2=$((RANDOM % 12 + 1)) what=$((RANDOM % 10))
    echo "BEGIN;"
    if [ "$what" -lt 4 ]; then
      echo "INSERT INTO orders VALUES ($k1, $((RANDOM % 4))), ($k2, $((RANDOM % 4)));"
    elif [ "$what" -lt 8 ]; then
      echo "INSERT INTO items VALUES ($k1, $((RANDOM % 5 + 1))), ($k2, 1);"
    elif [ "$what" = 8 ]; then
      echo "DELETE FROM orders WHERE o_id = $k1;"
    else
      echo "DELETE FROM items WHERE l_order = $k1;"
    fi
    echo "SELECT pg_sleep(0.01);"
    echo "COMMIT;"
  done
}

# run <label> <settings>: both servers write at once; prints the differing rows afterwards.
run() {
  writer_script 80 21 >"$ITEST_DIR/writer_a_$1.sql"
  writer_script 80 22 >"$ITEST_DIR/writer_b_$1.sql"
  psql_in a -v VERBOSITY=verbose -c "$2" -f "$ITEST_DIR/writer_a_$1.sql" >"$ITEST_DIR/writer_a_$1.out" 2>&1 &
  local wa=$!
  psql_in b -v VERBOSITY=verbose -c "$2" -f "$ITEST_DIR/writer_b_$1.sql" >"$ITEST_DIR/writer_b_$1.out" 2>&1 &
  local wb=$!
  itest_background+=("$wa" "$wb")
  wait "$wa" || fail "writer a ($1) failed"
  wait "$wb" || fail "writer b ($1) failed"
  local failed
  failed="$(cat "$ITEST_DIR/writer_a_$1.out" "$ITEST_DIR/writer_b_$1.out" | grep -c 'ERROR:' || true)"
  log "$1: $failed writer statements failed ($(cat "$ITEST_DIR/writer_a_$1.out" "$ITEST_DIR/writer_b_$1.out" |
    grep -o 'ERROR:  [0-9A-Z]*' | sort | uniq -c | tr -s ' \n' ' '))"
  # Deadlocks (40P01) and serialization failures (40001, and 25P02 after them in the same
  # transaction block) are the expected failures; nothing else is.
  expect_not_in "$ITEST_DIR/writer_a_$1.out" "ERROR:  +([^24]|2[^5]|25[^P]|4[^0])" "writer a ($1): unexpected errors"
  expect_not_in "$ITEST_DIR/writer_b_$1.out" "ERROR:  +([^24]|2[^5]|25[^P]|4[^0])" "writer b ($1): unexpected errors"
}

log "1. two servers write orders and items at once; the views wait on the cluster's intents"
run intents "SET client_min_messages = error; SET deadlock_timeout = '100ms';"
for side in a b; do
  got="$(differing "$side")"
  log "intents: differing rows on $side: $got"
  if [ "$got" != "total=0" ]; then
    for v in $names; do psql_in "$side" -c "SELECT '$v', * FROM ramp.verify_immv('$v')" | head -20; done
    psql_in "$side" -c "SELECT 'orders', * FROM orders ORDER BY 2, 3" -c "SELECT 'items', * FROM items ORDER BY 2, 3"
    fail "intents: views differ from a recomputation on $side: $got"
  fi
done
got="$(psql_in a -c "SELECT count(*), sum(qty) FROM items")"
log "intents: items now $got (count|sum)"
[ "$(psql_in a -c "SELECT * FROM v_left ORDER BY 1, 2, 3")" = "$(psql_in b -c "SELECT * FROM v_left ORDER BY 1, 2, 3")" ] ||
  fail "intents: the two servers show different views"

log "2. the same with the waits of one PostgreSQL server must leave the views wrong"
run local_waits "SET client_min_messages = error; SET deadlock_timeout = '100ms';
                 SET ramp.debug_immv_local_waits = on;"
got="$(differing a)"
log "local_waits: differing rows: $got"
[ "$got" != "total=0" ] || fail "local_waits: no view differs with the waits of one server only"
log "immv_xserver: ok"
