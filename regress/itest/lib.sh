# Shared by the integration tests of regress/itest/ (sourced, not run). Each test gets
# ITEST_DIR (a scratch folder, default: a fresh one) and RAMP_ROOT from run_regress.sh, starts
# its own rampd cluster and PostgreSQL instances there, and stops them on exit, also when it
# fails. fail() makes the test exit non-zero with a message.
set -euo pipefail

RAMP_ROOT="${RAMP_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
if [ -z "${ITEST_DIR:-}" ]; then
  ITEST_DIR="$(mktemp -d /tmp/pg_ramp_itest.XXXXXX)"
fi
chmod 755 "$ITEST_DIR"
CLUSTER="$ITEST_DIR/cluster"
PG_INSTANCE="$RAMP_ROOT/scripts/pg-instance.sh"
RAMP_CLUSTER="$RAMP_ROOT/scripts/ramp-cluster.sh"
itest_instances=()
itest_stopped_nodes=()
itest_background=()

itest_cleanup() {
  local status=$?
  for p in "${itest_background[@]}"; do kill "$p" 2>/dev/null || true; done
  # A node left stopped (SIGSTOP) would not die from SIGTERM.
  for p in "${itest_stopped_nodes[@]}"; do kill -CONT "$p" 2>/dev/null || true; done
  for i in "${itest_instances[@]}"; do "$PG_INSTANCE" stop "$ITEST_DIR/$i" >/dev/null 2>&1 || true; done
  [ -d "$CLUSTER" ] && "$RAMP_CLUSTER" stop "$CLUSTER" >/dev/null 2>&1 || true
  if [ "$status" != 0 ]; then
    for i in "${itest_instances[@]}"; do
      echo "---- last lines of $i's server log" >&2
      tail -n 20 "$ITEST_DIR/$i/postgres.log" >&2 2>/dev/null || true
    done
  fi
  exit "$status"
}
trap itest_cleanup EXIT

log() { echo "[$(date +%H:%M:%S)] $*"; }

# For the itests on scripts/netns-cluster.sh: NETNS (the script), tools (where rampd and
# its tools are), NC (the cluster's folder). Where network namespaces cannot be made, the
# itest ends here: exit 0 with "SKIPPED: <reason>".
netns_setup() {
  NETNS="$RAMP_ROOT/scripts/netns-cluster.sh"
  tools="$(dirname "${RAMPD:-$RAMP_ROOT/build/engine/tools/rampd}")"
  NC="$ITEST_DIR/netns"
  if ! reason="$("$NETNS" probe 2>&1)"; then
    echo "SKIPPED: $reason"
    exit 0
  fi
}
fail() {
  echo "FAILED: $*" >&2
  exit 1
}

# cluster_start [ramp-cluster.sh start options]
cluster_start() {
  "$RAMP_CLUSTER" start "$CLUSTER" --nodes 3 "$@" >/dev/null
}

node_pid() { cat "$CLUSTER/node$1.pid"; }

# Stops node i the hard way (SIGKILL), as a crash would.
node_kill() {
  local pid
  pid="$(node_pid "$1")"
  kill -KILL "$pid"
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
}

node_stop() {
  local pid
  pid="$(node_pid "$1")"
  kill -STOP "$pid"
  itest_stopped_nodes+=("$pid")
}
node_cont() { kill -CONT "$(node_pid "$1")"; }

# Starts node i again with the arguments ramp-cluster.sh gave it (endpoints from
# cluster.conf); waits until it logs "ready" once more.
node_restart() {
  local i="$1" line endpoints=() args readies
  line="$(sed -n "$((i + 1))p" "$CLUSTER/cluster.conf")"
  read -r -a endpoints <<<"${line#node }"
  args=(--cluster "$CLUSTER/cluster.conf" --node "$i" --token-file "$CLUSTER/token"
        --memory-mb 256 --workers 2)
  for e in "${endpoints[@]}"; do args+=(--listen "$e"); done
  readies="$(grep -c " INFO: ready$" "$CLUSTER/node$i.log" || true)"
  for e in "${endpoints[@]}"; do
    case "$e" in shm://*) rm -f "${e#shm://}" ;; esac  # a killed server leaves its socket
  done
  local rampd="${RAMPD:-$RAMP_ROOT/build/engine/tools/rampd}"
  nohup "$rampd" "${args[@]}" >>"$CLUSTER/node$i.log" 2>&1 &
  echo $! >"$CLUSTER/node$i.pid"
  for _ in $(seq 200); do
    [ "$(grep -c " INFO: ready$" "$CLUSTER/node$i.log" || true)" -gt "$readies" ] && break
    sleep 0.05
  done
  [ "$(grep -c " INFO: ready$" "$CLUSTER/node$i.log" || true)" -gt "$readies" ] ||
    fail "node $i did not restart"
  chmod 666 "$CLUSTER"/node*.sock 2>/dev/null || true
}

# pg_start NAME [--set name=value ...]: a PostgreSQL instance wired to the cluster, with a
# database "itest" that has the extension.
pg_start() {
  local name="$1"
  shift
  "$PG_INSTANCE" start "$ITEST_DIR/$name" --ramp-cluster "$CLUSTER" \
    --set shared_buffers=128MB --set max_parallel_workers_per_gather=0 "$@" >/dev/null
  itest_instances+=("$name")
  "$PG_INSTANCE" psql "$ITEST_DIR/$name" -q -c "CREATE DATABASE itest" >/dev/null
  "$PG_INSTANCE" psql "$ITEST_DIR/$name" -q -d itest -c "CREATE EXTENSION pg_ramp" >/dev/null
}

# psql_in NAME [psql args]: psql on the instance's itest database (no .psqlrc, tuples only).
psql_in() {
  local name="$1"
  shift
  "$PG_INSTANCE" psql "$ITEST_DIR/$name" -X -q -At -d itest "$@"
}

# pgbench_on NAME [pgbench args]: pgbench (as postgres) on the instance's itest database.
pgbench_on() {
  local name="$1"
  shift
  runuser -u postgres -- "$(pg_config --bindir)/pgbench" -h "$ITEST_DIR/$name/sock" \
    -p "$(cat "$ITEST_DIR/$name/port")" -U postgres "$@" itest
}

# tpcb_violation NAME SCALE: the first TPC-B invariant that pgbench's tables (scale SCALE)
# break on the instance, or nothing: one row per key, the row counts, and sum(abalance) =
# sum(tbalance) = sum(bbalance) = sum(history.delta) (a half-applied transaction breaks one).
tpcb_violation() {
  local name="$1" scale="$2"
  psql_in "$name" -c "
    SELECT CASE
      WHEN (SELECT count(*) FROM pgbench_branches) <> $scale OR
           (SELECT count(DISTINCT bid) FROM pgbench_branches) <> $scale THEN 'branches: not one row per bid'
      WHEN (SELECT count(*) FROM pgbench_tellers) <> $((scale * 10)) OR
           (SELECT count(DISTINCT tid) FROM pgbench_tellers) <> $((scale * 10)) THEN 'tellers: not one row per tid'
      WHEN (SELECT count(*) FROM pgbench_accounts) <> $((scale * 100000)) THEN 'accounts: row count changed'
      WHEN (SELECT coalesce(sum(abalance), 0) FROM pgbench_accounts) <>
           (SELECT coalesce(sum(delta), 0) FROM pgbench_history) THEN 'sum(abalance) <> sum(delta)'
      WHEN (SELECT sum(tbalance) FROM pgbench_tellers) <>
           (SELECT coalesce(sum(delta), 0) FROM pgbench_history) THEN 'sum(tbalance) <> sum(delta)'
      WHEN (SELECT sum(bbalance) FROM pgbench_branches) <>
           (SELECT coalesce(sum(delta), 0) FROM pgbench_history) THEN 'sum(bbalance) <> sum(delta)'
      ELSE '' END"
}

# expect_in FILE REGEX WHAT: the file must contain a line matching REGEX.
expect_in() {
  grep -Eq "$2" "$1" || { echo "---- $1:" >&2; cat "$1" >&2; fail "$3"; }
}
expect_not_in() {
  if grep -Eq "$2" "$1"; then echo "---- $1:" >&2; cat "$1" >&2; fail "$3"; fi
}

# Sessions: one psql connection fed statement by statement (through a FIFO), so that a test
# can act on the servers between two statements of the same backend.
#   session_open NAME INSTANCE; session_send NAME "SQL ..."; session_wait NAME [seconds]
# session_wait sends a marker and waits until psql has printed it (every statement sent
# before has finished); the output accumulates in $ITEST_DIR/NAME.out.
declare -A itest_session_fd
session_open() {
  local name="$1" instance="$2" fifo="$ITEST_DIR/$1.in"
  rm -f "$fifo"
  mkfifo "$fifo"
  chmod 666 "$fifo"
  psql_in "$instance" -v VERBOSITY=verbose <"$fifo" >"$ITEST_DIR/$name.out" 2>&1 &
  itest_background+=("$!")
  exec {itest_session_fd[$name]}>"$fifo"
  session_send "$name" "\\set VERBOSITY verbose"
}
session_send() { printf '%s\n' "$2" >&"${itest_session_fd[$1]}"; }
itest_marker=0
declare -A itest_last_mark
session_wait() {
  local name="$1" seconds="${2:-60}" mark
  itest_marker=$((itest_marker + 1))
  mark="MARK_$itest_marker"
  session_send "$name" "\\echo $mark"
  for _ in $(seq $((seconds * 20))); do
    if grep -qx "$mark" "$ITEST_DIR/$name.out"; then
      # What the statements since the previous marker printed.
      awk -v from="${itest_last_mark[$name]:-}" -v to="$mark" '
        $0 == to { exit }
        from != "" && $0 == from { started = 1; next }
        from == "" || started { print }' "$ITEST_DIR/$name.out" >"$ITEST_DIR/$name.last"
      itest_last_mark[$name]="$mark"
      return 0
    fi
    sleep 0.05
  done
  echo "---- $name.out:" >&2
  cat "$ITEST_DIR/$name.out" >&2
  fail "session $name did not get past marker $mark within $seconds s"
}
# session_last NAME: the file holding what the statements before the last session_wait printed.
session_last() { echo "$ITEST_DIR/$1.last"; }
session_close() {
  exec {itest_session_fd[$1]}>&-
}
