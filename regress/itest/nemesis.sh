#!/usr/bin/env bash
# The fault harness, short (bench/nemesis/run --check): 3 durable servers in network
# namespaces, the read-atomicity checker with a ledger and pgbench TPC-B through two
# PostgreSQL frontends, while one fault of each kind is injected (SIGKILL + restart,
# SIGSTOP/SIGCONT, a server cut off, a latency spike, packet loss, a partition migration).
#  1. clean: every fault injected, 0 fractured reads, 0 acknowledged commits lost, TPC-B
#     balances agree on both frontends, nothing left prepared after the termination timeout,
#     no request past the bound derived from ramp.timeout_ms (the harness's own checks);
#  2. the harness catches an injected bug: rampd --test-ack-before-durable (PREPAREs answered
#     before they are on disk; the disk made slow with RAMP_TEST_LOG_DELAY_MS) loses
#     acknowledged commits at a SIGKILL, and the harness must report them. The same run
#     without the bug (same slow disk, same kills) must lose nothing;
#  3. a client that skips RAMP's second round (commits staggered between servers) must give
#     fractured reads, and the harness must report them.
# The unavailability figure is printed, not asserted (no timing thresholds in tests).
# Skips (exit 0, "SKIPPED: reason") where network namespaces cannot be made.
. "$(dirname "$0")/lib.sh"

export BUILD_DIR
BUILD_DIR="$(cd "$(dirname "${RAMPD:-$RAMP_ROOT/build/engine/tools/rampd}")/../.." && pwd)"
HARNESS="$RAMP_ROOT/bench/nemesis/run"

# nemesis NAME [harness options]: runs the harness, prints its output, leaves its exit
# status in $status and the output in $ITEST_DIR/NAME.out.
nemesis() {
  local name="$1"
  shift
  status=0
  "$HARNESS" --check --no-build --no-record --dir "$ITEST_DIR/$name" "$@" \
    >"$ITEST_DIR/$name.out" 2>&1 || status=$?
  cat "$ITEST_DIR/$name.out"
  if grep -q '^SKIPPED:' "$ITEST_DIR/$name.out"; then
    grep -m1 '^SKIPPED:' "$ITEST_DIR/$name.out"
    exit 0
  fi
}
result() { sed -n "s/^RESULT $2 //p" "$ITEST_DIR/$1.out"; }

log "1. every kind of fault, clean servers and clients"
nemesis clean
[ "$status" = 0 ] || fail "the harness found a problem on a clean run (exit $status)"
[ "$(result clean nemesis_faults_injected)" = 6 ] || fail "not every fault was injected"
[ "$(result clean nemesis_fractured_reads)" = 0 ] || fail "fractured reads"
[ "$(result clean nemesis_lost_commits)" = 0 ] || fail "lost commits"
[ "$(result clean nemesis_prepared_left)" = 0 ] || fail "transactions left prepared"
[ "$(result clean nemesis_checker_commits)" -gt 0 ] || fail "the checker committed nothing"
[ "$(result clean nemesis_tpcb_commits)" -gt 0 ] || fail "pgbench committed nothing"
echo "unavailable after a fault healed, at most: $(result clean nemesis_max_unavailable_ms) ms (reported, not asserted)"

log "2. replies before durability: acknowledged commits lost at a SIGKILL, caught"
nemesis ack_bug --no-pgbench --faults kill --rounds 2 --bug ack-before-durable
[ "$status" = 1 ] || fail "the harness exited $status with the injected bug, expected 1"
lost="$(result ack_bug nemesis_lost_commits)"
[ -n "$lost" ] && [ "$lost" -gt 0 ] || fail "the harness did not report the commits the bug lost"
expect_in "$ITEST_DIR/ack_bug.out" "NEMESIS CHECK FAILED: [0-9]+ acknowledged commits of the checker lost" \
  "no failure message for the lost commits"
log "   without the bug (the same slow disk and kills): nothing lost"
nemesis ack_control --no-pgbench --faults kill --rounds 2 --log-delay-ms 200
[ "$status" = 0 ] || fail "the control run without the bug failed (exit $status)"
[ "$(result ack_control nemesis_lost_commits)" = 0 ] || fail "the control run lost commits"

log "3. no RAMP round 2: fractured reads, caught"
nemesis round2_bug --no-pgbench --faults delay --rounds 1 --bug no-round2
[ "$status" = 1 ] || fail "the harness exited $status without round 2, expected 1"
fractured="$(result round2_bug nemesis_fractured_reads)"
[ -n "$fractured" ] && [ "$fractured" -gt 0 ] || fail "the harness did not report fractured reads"
log "ok: lost commits caught ($lost), fractured reads caught ($fractured)"
