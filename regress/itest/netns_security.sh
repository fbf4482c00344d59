#!/usr/bin/env bash
# Security and membership across network namespaces (issue 15, items 5 and 6): a 2-node
# cluster from scripts/netns-cluster.sh (each rampd in its own namespace, clients in another,
# through the latency proxies), checked from a peer's side:
#  1. rampctl status from the client namespace: every server advertises its proxy address,
#     all run one cluster file, and the reachability matrix is all ok;
#  2. the token handshake puts no token on the wire: tcpdump inside node 0's namespace while
#     clients and servers authenticate finds no trace of the token; the same capture of a
#     peer sending the token in clear does find it (the capture sees payload bytes);
#  3. a peer without the token is refused and logged with its address (10.213.0.200);
#  4. one-sided access outside a registered region is refused over tcp across namespaces
#     (ramp_region_probe: reads past the end or at an overflowing offset, a write, a forged
#     key; a read inside completes, the control);
#  5. rampd refuses to listen on the namespace's address without a token;
#  6. a node added to the cluster file advertising an address nobody can reach: the running
#     servers take it (SIGHUP) and rampctl status names both ends of the failure.
# Skips (exit 0, "SKIPPED: reason") where network namespaces cannot be made; step 2 skips
# itself without tcpdump.
. "$(dirname "$0")/lib.sh"

netns_setup

capture_pid=""
netns_cleanup() {
  local status=$?
  [ -z "$capture_pid" ] || kill "$capture_pid" 2>/dev/null || true
  "$NETNS" stop "$NC" >/dev/null 2>&1 || true
  (exit "$status")
  itest_cleanup
}
trap netns_cleanup EXIT

in_client() { "$NETNS" exec "$NC" client "$@"; }
rampctl() { in_client "$tools/rampctl" --node "$(cut -d, -f1 "$NC/nodes.tcp")" "$@"; }

log "1. 2 servers in namespaces; rampctl status from the client namespace"
"$NETNS" start "$NC" --nodes 2 --delay-us 100 --memory-mb 128 --workers 1 >/dev/null
rampctl --token-file "$NC/token" status >"$ITEST_DIR/status" || {
  cat "$ITEST_DIR/status"
  fail "rampctl status failed on a healthy cluster"
}
cat "$ITEST_DIR/status"
for i in 0 1; do
  expect_in "$ITEST_DIR/status" "^$i +up .* tcp://10\.213\.0\.$((10 + i)):7401$" \
    "node $i does not show its advertised address"
done
expect_in "$ITEST_DIR/status" "^0 +[0-9.]+ms +[0-9.]+ms" "node 0 does not reach both nodes"
expect_in "$ITEST_DIR/status" "^1 +[0-9.]+ms +[0-9.]+ms" "node 1 does not reach both nodes"
expect_not_in "$ITEST_DIR/status" "FAILED|different cluster files" "a probe failed"
# Each node heard at start that its peer reaches its advertised address (the peer's probe
# runs in the background: under load its answer can come after rampctl's).
for _ in $(seq 1 100); do
  grep -q "node 0 (tcp://10\.213\.0\.10:7401) reaches this node" "$NC/node1.log" && break
  sleep 0.1
done
expect_in "$NC/node1.log" "node 0 \(tcp://10\.213\.0\.10:7401\) reaches this node at tcp://10\.213\.0\.11:7401" \
  "node 1 did not check its advertised address with node 0"

token="$(tr -d ' \t\r\n' <"$NC/token")"
log "2. no token on the wire"
if ! command -v tcpdump >/dev/null; then
  echo "step 2 SKIPPED: no tcpdump (apt-get install tcpdump)"
else
  # capture FILE: tcpdump on every interface of node 0's namespace (clients reach the proxy
  # over eth0, the proxy reaches rampd over lo), ports 7400 and 7401.
  capture() {
    "$NETNS" exec "$NC" n0 tcpdump -i any -U --immediate-mode -s 0 -w "$1" 'tcp port 7400 or tcp port 7401' \
      2>"$1.err" &
    capture_pid=$!
    for _ in $(seq 100); do grep -q "listening on" "$1.err" 2>/dev/null && return 0; sleep 0.05; done
    fail "tcpdump did not start: $(cat "$1.err")"
  }
  capture_end() {
    sleep 0.3
    kill -INT "$capture_pid"
    wait "$capture_pid" || true
    capture_pid=""
  }
  capture "$ITEST_DIR/auth.pcap"
  # Clients authenticating from the client namespace (through the proxy and directly), and
  # servers authenticating to each other (the probes of rampctl status).
  rampctl --token-file "$NC/token" status >/dev/null
  in_client "$tools/ramp_check" --nodes "$(cat "$NC/nodes.tcp")" --token-file "$NC/token" \
    --read-path rpc --duration-ms 500 --writers 1 --readers 1 >/dev/null
  in_client "$tools/ramp_region_probe" --node "$(cut -d, -f1 "$NC/nodes.direct")" \
    --token-file "$NC/token" >/dev/null
  capture_end
  packets="$(tcpdump -r "$ITEST_DIR/auth.pcap" 2>/dev/null | wc -l)"
  echo "captured $packets packets of handshakes and traffic"
  [ "$packets" -gt 50 ] || fail "the capture holds only $packets packets"
  if grep -aqF "$token" "$ITEST_DIR/auth.pcap" || grep -aqF "${token:0:12}" "$ITEST_DIR/auth.pcap"; then
    fail "the cluster token is on the wire"
  fi
  # The control: the token sent in clear is seen by the same capture.
  capture "$ITEST_DIR/clear.pcap"
  in_client bash -c "printf 'plain %s\n' '$token' >/dev/tcp/10.213.0.10/7400" || true
  capture_end
  grep -aqF "$token" "$ITEST_DIR/clear.pcap" || fail "the capture cannot see a token sent in clear"
  echo "the token is not in $packets captured packets; a token sent in clear is"
fi

log "3. a peer without the token is refused and logged with its address"
(umask 077; head -c 24 /dev/urandom | base64 >"$ITEST_DIR/wrong.token")
status=0
in_client "$tools/rampctl" --node "$(cut -d, -f1 "$NC/nodes.direct")" --token-file "$ITEST_DIR/wrong.token" \
  status >"$ITEST_DIR/wrong" 2>&1 || status=$?
cat "$ITEST_DIR/wrong"
[ "$status" != 0 ] || fail "a client with the wrong token got a status"
expect_in "$ITEST_DIR/wrong" "refused this client's cluster token" "the wrong token was not refused"
expect_in "$NC/node0.log" "rejected a connection: PermissionDenied: peer tcp://10\.213\.0\.200:[0-9]+ rejected: cluster token mismatch" \
  "node 0 did not log the refused peer with its address"

log "4. one-sided access outside the registered region, over tcp across namespaces"
status=0
in_client "$tools/ramp_region_probe" --node "$(cut -d, -f1 "$NC/nodes.tcp")" \
  --token-file "$NC/token" >"$ITEST_DIR/region" 2>&1 || status=$?
cat "$ITEST_DIR/region"
[ "$status" = 0 ] || fail "ramp_region_probe exited with $status"
expect_in "$ITEST_DIR/region" "^inside +completed" "the control read inside the region failed"
# Refused by the server's region check (not by a connection that broke).
expect_in "$ITEST_DIR/region" "^past-end +refused: .* outside its " "a read past the end was not refused"
expect_in "$ITEST_DIR/region" "^far-offset +refused: .* outside its " "a read at 2^63 was not refused"
expect_in "$ITEST_DIR/region" "^write +refused: .* does not grant write access" "a write was not refused"
expect_in "$ITEST_DIR/region" "^forged-key +refused: .* wrong key" "a forged key was not refused"

log "5. rampd refuses the namespace's address without a token"
status=0
"$NETNS" exec "$NC" n0 "$RAMP_ROOT/build/engine/tools/rampd" --listen tcp://10.213.0.10:7500 \
  --memory-mb 16 >"$ITEST_DIR/notoken" 2>&1 || status=$?
cat "$ITEST_DIR/notoken"
[ "$status" = 2 ] || fail "rampd without a token on 10.213.0.10: exit $status, expected 2"
expect_in "$ITEST_DIR/notoken" "refusing to listen on tcp://10\.213\.0\.10:7500 without --token-file" \
  "rampd did not say why it refused"

log "6. a node added with an address nobody reaches"
{ echo "homes 2"; cat "$NC/cluster.conf"; echo "node tcp://10.213.0.12:7401"; } >"$NC/cluster.conf.new"
mv "$NC/cluster.conf.new" "$NC/cluster.conf"
for i in 0 1; do kill -HUP "$(cat "$NC/node$i.pid")"; done
for i in 0 1; do
  for _ in $(seq 100); do grep -q "applied (SIGHUP)" "$NC/node$i.log" && break; sleep 0.05; done
  expect_in "$NC/node$i.log" "node 2 added at tcp://10\.213\.0\.12:7401" "node $i did not take the new node"
done
status=0
rampctl --token-file "$NC/token" --timeout-ms 3000 status >"$ITEST_DIR/status2" 2>&1 || status=$?
cat "$ITEST_DIR/status2"
[ "$status" = 1 ] || fail "rampctl status with an unreachable node: exit $status, expected 1"
expect_in "$ITEST_DIR/status2" "^2 +DOWN" "node 2 not shown down"
for i in 0 1; do
  expect_in "$ITEST_DIR/status2" \
    "node 2 advertises tcp://10\.213\.0\.12:7401 but node $i \(tcp://10\.213\.0\.$((10 + i)):7401\) cannot reach it: " \
    "the failure from node $i does not name both ends"
done

"$NETNS" stop "$NC"
log "ok"
