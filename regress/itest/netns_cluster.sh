#!/usr/bin/env bash
# Servers on several hosts: a cluster started by scripts/netns-cluster.sh, each rampd in its
# own network namespace on a private bridge, clients in another namespace reaching every
# server through a ramp_netproxy that adds 0.5 ms each way (1 ms per round trip).
#  1. the layout: every rampd up, in its own namespace, at its own address; the proxies add
#     the configured delay between namespaces (ping through a proxy vs direct);
#  2. read atomicity over tcp across namespaces: ramp_check commits and sees 0 fractured reads;
#  3. a client with the wrong token is refused by the servers, one without a token refuses
#     to connect off loopback;
#  4. the same check without RAMP's second round must report fractured reads (proof that 2
#     can fail);
#  5. a PostgreSQL frontend in a namespace of its own writes and reads rows (when the
#     extension is installed: run_regress.sh installs it);
#  6. stop leaves nothing behind (namespaces, processes) and can be repeated.
# Skips (exit 0, "SKIPPED: reason") where network namespaces cannot be made.
. "$(dirname "$0")/lib.sh"

netns_setup

netns_cleanup() {
  local status=$?
  "$NETNS" stop "$NC" >/dev/null 2>&1 || true
  (exit "$status")
  itest_cleanup
}
trap netns_cleanup EXIT

in_client() { "$NETNS" exec "$NC" client "$@"; }

frontends=0
pg_share="$(pg_config --sharedir 2>/dev/null || true)"
[ -n "$pg_share" ] && [ -f "$pg_share/extension/pg_ramp.control" ] && frontends=1

log "1. 3 servers in namespaces, 0.5 ms ± 50 us each way, $frontends frontend(s)"
"$NETNS" start "$NC" --nodes 3 --frontends "$frontends" --delay-us 500 --jitter-us 50 \
  --memory-mb 256 --workers 1
prefix="$(sed -n 's/^prefix=//p' "$NC/netns.env")"
"$NETNS" status "$NC" >"$ITEST_DIR/status"
cat "$ITEST_DIR/status"
expect_not_in "$ITEST_DIR/status" "DOWN" "a server or proxy is down"
for i in 0 1 2; do
  ns="$(ip netns identify "$(cat "$NC/node$i.pid")")"
  [ "$ns" = "$prefix-n$i" ] || fail "rampd $i runs in namespace '$ns', expected $prefix-n$i"
  expect_in "$NC/cluster.conf" "^node tcp://10\.213\.0\.$((10 + i)):7401$" "cluster.conf misses node $i"
done
# The delay between namespaces: an echo server in n0, a proxy in front of it, pings from the
# client namespace.
"$NETNS" exec "$NC" n0 "$tools/ramp_netproxy" --echo 10.213.0.10:9000 &
"$NETNS" exec "$NC" n0 "$tools/ramp_netproxy" --listen 10.213.0.10:9001 --to 10.213.0.10:9000 \
  --delay-us 500 &
sleep 0.3
in_client "$tools/ramp_netproxy" --ping 10.213.0.10:9000 --count 300 >"$ITEST_DIR/ping_direct"
in_client "$tools/ramp_netproxy" --ping 10.213.0.10:9001 --count 300 >"$ITEST_DIR/ping_proxy"
cat "$ITEST_DIR/ping_direct" "$ITEST_DIR/ping_proxy"
p50() { sed -n 's/.* p50 \([0-9]*\) .*/\1/p' "$1"; }
added=$(($(p50 "$ITEST_DIR/ping_proxy") - $(p50 "$ITEST_DIR/ping_direct")))
echo "RESULT netns_proxy_added_rtt_us_p50 $added (configured 1000)"
[ "$added" -ge 1000 ] && [ "$added" -le 4000 ] ||
  fail "the proxy added $added us to the median round trip, configured 1000"

log "2. read atomicity over tcp from the client namespace, through the proxies"
status=0
in_client "$tools/ramp_check" --nodes "$(cat "$NC/nodes.tcp")" --token-file "$NC/token" \
  --read-path rpc --duration-ms 4000 --writers 2 --readers 2 >"$ITEST_DIR/check" 2>&1 || status=$?
cat "$ITEST_DIR/check"
[ "$status" = 0 ] || fail "ramp_check exited with $status"
expect_in "$ITEST_DIR/check" ", 0 fractured" "fractured reads across namespaces"
commits="$(sed -n 's/^ramp_check: \([0-9]*\) commits.*/\1/p' "$ITEST_DIR/check")"
[ "${commits:-0}" -gt 0 ] || fail "no commits"

log "3. no token, wrong token"
(umask 077; head -c 24 /dev/urandom | base64 >"$ITEST_DIR/wrong.token")
status=0
in_client "$tools/ramp_check" --nodes "$(cat "$NC/nodes.tcp")" --token-file "$ITEST_DIR/wrong.token" \
  --read-path rpc --duration-ms 500 >"$ITEST_DIR/wrong" 2>&1 || status=$?
cat "$ITEST_DIR/wrong"
[ "$status" = 2 ] || fail "a client with the wrong token: exit $status, expected 2"
expect_in "$ITEST_DIR/wrong" "refused this client's cluster token" "the wrong token was not refused"
cat "$NC"/node*.log >"$ITEST_DIR/servers.log"
expect_in "$ITEST_DIR/servers.log" "rejected.*token mismatch" "no server logged the refusal"
status=0
in_client "$tools/ramp_check" --nodes "$(cat "$NC/nodes.tcp")" --read-path rpc --duration-ms 500 \
  >"$ITEST_DIR/none" 2>&1 || status=$?
cat "$ITEST_DIR/none"
[ "$status" = 2 ] || fail "a client without a token: exit $status, expected 2"
expect_in "$ITEST_DIR/none" "no cluster token" "a client without a token connected"

log "4. without round 2 the checker must see fractured reads"
status=0
in_client "$tools/ramp_check" --nodes "$(cat "$NC/nodes.tcp")" --token-file "$NC/token" \
  --read-path rpc --duration-ms 3000 --no-round2 --commit-delay-us 3000 \
  >"$ITEST_DIR/bug" 2>&1 || status=$?
cat "$ITEST_DIR/bug"
[ "$status" = 1 ] || fail "ramp_check --no-round2 exited with $status, expected 1 (fractured reads)"
expect_not_in "$ITEST_DIR/bug" ", 0 fractured" "the checker missed the injected bug"

if [ "$frontends" = 1 ]; then
  log "5. a PostgreSQL frontend in its own namespace"
  ns="$(ip netns identify "$(head -1 "$NC/pg0/pgdata/postmaster.pid")")"
  [ "$ns" = "$prefix-pg0" ] || fail "PostgreSQL runs in namespace '$ns', expected $prefix-pg0"
  pg() { "$PG_INSTANCE" psql "$NC/pg0" -X -q -At "$@"; }
  pg -c "CREATE DATABASE itest"
  pg -d itest -c "CREATE EXTENSION pg_ramp" -c "SHOW ramp.nodes" -c "SHOW ramp.transport"
  pg -d itest -c "CREATE TABLE t (id int, v text) USING ramp" \
    -c "INSERT INTO t SELECT g, 'v' || g FROM generate_series(1, 2000) g"
  got="$(pg -d itest -c "SELECT count(*), count(DISTINCT v) FROM t")"
  [ "$got" = "2000|2000" ] || fail "the frontend read back $got rows, expected 2000|2000"
else
  log "5. skipped: the extension is not installed (run through regress/run_regress.sh)"
fi

log "6. stop: nothing left behind"
pids="$(cat "$NC"/node*.pid "$NC"/proxy*.pid)"
"$NETNS" stop "$NC"
left="$(ip netns list | awk '{print $1}' | grep "^$prefix-" || true)"
[ -z "$left" ] || fail "namespaces left after stop: $left"
for p in $pids; do
  state="$(awk '/^State:/ {print $2}' "/proc/$p/status" 2>/dev/null || true)"
  [ -z "$state" ] || [ "$state" = Z ] || fail "process $p still running after stop"
done
[ ! -f "$NC/pg0/pgdata/postmaster.pid" ] || fail "PostgreSQL still running after stop"
"$NETNS" stop "$NC" || fail "a second stop failed"
log "ok"
