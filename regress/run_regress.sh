#!/usr/bin/env bash
# Runs the tests of the pg_ramp extension against real servers: the pg_regress suites on
# throwaway PostgreSQL 15 instances, then the integration tests (regress/itest/*.sh).
#
#   regress/run_regress.sh [--no-install] [--no-itest] [suite|itest ...]
#
# Suites are regress/sql/<name>.sql with regress/expected/<name>.out; integration tests are
# regress/itest/<name>.sh. Default: all of both.
#  - suites named data_* run against a real 3-node rampd cluster that this script starts
#    (scripts/ramp-cluster.sh) and stops on exit, also on failure; the test instance gets
#    ramp.nodes and ramp.token_file through its configuration file;
#  - the others (extension) need no cluster: they check packaging, settings and the errors
#    of an unreachable or silent cluster;
#  - every integration test starts its own cluster and PostgreSQL instances (it kills and
#    stops servers) and exits non-zero when the behaviour it checks breaks.
# The extension is built and installed first (make -C extension install) unless
# --no-install. pg_regress --temp-instance runs initdb, starts the server on a free port
# with a private unix socket and stops it afterwards. PostgreSQL refuses to run as root:
# as root, the run happens as user postgres (PG_USER). Exits non-zero on failure and prints
# regression.diffs; results stay in regress/results/ and regress/regression.diffs.
# Environment: PG_CONFIG (default pg_config), PG_USER, RAMP_BUILD_DIR (where the CMake
# build put the ramp libraries and rampd; default build/), KEEP=1 keeps the scratch folder.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/.." && pwd)"
pg_config="${PG_CONFIG:-pg_config}"
build_dir="${RAMP_BUILD_DIR:-$root/build}"
export RAMPD="${RAMPD:-$build_dir/engine/tools/rampd}"
install=1
itests_enabled=1
names=()
for arg in "$@"; do
  case "$arg" in
    --no-install) install=0 ;;
    --no-itest) itests_enabled=0 ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) names+=("$arg") ;;
  esac
done
plain_suites=()
data_suites=()
itests=()
if [ ${#names[@]} -eq 0 ]; then
  for f in "$here"/sql/*.sql; do names+=("$(basename "$f" .sql)"); done
  if [ "$itests_enabled" = 1 ]; then
    for f in "$here"/itest/*.sh; do
      [ "$(basename "$f")" = lib.sh ] || itests+=("$(basename "$f" .sh)")
    done
  fi
fi
for s in "${names[@]}"; do
  if [ -f "$here/sql/$s.sql" ]; then
    case "$s" in
      data_*) data_suites+=("$s") ;;
      *) plain_suites+=("$s") ;;
    esac
  elif [ "$s" != lib ] && [ -f "$here/itest/$s.sh" ]; then
    itests+=("$s")
  else
    echo "no suite $here/sql/$s.sql and no integration test $here/itest/$s.sh" >&2
    exit 2
  fi
done

if [ "$install" = 1 ]; then
  make -s -C "$root/extension" PG_CONFIG="$pg_config" RAMP_BUILD_DIR="$build_dir" -j"$(nproc)"
  make -s -C "$root/extension" PG_CONFIG="$pg_config" RAMP_BUILD_DIR="$build_dir" install \
    >/dev/null
fi
[ -x "$RAMPD" ] || { echo "no rampd at $RAMPD (build first: make)" >&2; exit 2; }

bindir="$("$pg_config" --bindir)"
pg_regress="$(dirname "$("$pg_config" --pgxs)")/../test/regress/pg_regress"
[ -x "$pg_regress" ] || { echo "pg_regress not found at $pg_regress" >&2; exit 2; }

run_as=()
user="$(id -un)"
if [ "$(id -u)" = 0 ]; then
  user="${PG_USER:-postgres}"
  run_as=(runuser -u "$user" --)
fi

work="$(mktemp -d /tmp/pg_ramp_regress.XXXXXX)"
chmod 755 "$work"
silent_pid=""
cleanup() {
  [ -n "$silent_pid" ] && kill "$silent_pid" 2>/dev/null
  [ -d "$work/cluster" ] && "$root/scripts/ramp-cluster.sh" stop "$work/cluster" >/dev/null 2>&1
  if [ "${KEEP:-0}" = 1 ]; then echo "kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
rm -rf "$here/results" "$here/regression.diffs" "$here/regression.out"
mkdir -p "$here/results"

# run_suites <name> <config file> <suite...>: one pg_regress run with its own instance.
failed=()
run_suites() {
  local name="$1" config="$2"
  shift 2
  local out="$work/out_$name"
  mkdir -p "$out/results"
  cp -r "$here/sql" "$here/expected" "$out/"
  if [ ${#run_as[@]} -gt 0 ]; then chown -R "$user" "$out" "$config"; fi
  local status=0
  (cd "$out" && "${run_as[@]}" "$pg_regress" \
      --temp-instance="$out/instance" \
      --temp-config="$config" \
      --bindir="$bindir" \
      --inputdir="$out" --outputdir="$out" \
      --dbname=ramp_regress \
      "$@") || status=$?
  cp "$out"/results/*.out "$here/results/" 2>/dev/null || true
  for f in regression.diffs regression.out; do
    [ -f "$out/$f" ] && cat "$out/$f" >>"$here/$f"
  done
  if [ "$status" != 0 ]; then
    failed+=("pg_regress ($name)")
    echo "pg_regress ($name) failed (status $status)" >&2
    [ -f "$out/regression.diffs" ] && head -c 20000 "$out/regression.diffs" >&2
    [ -f "$out/log/postmaster.log" ] && tail -n 40 "$out/log/postmaster.log" >&2
  fi
  return 0
}

if [ ${#plain_suites[@]} -gt 0 ]; then
  # A TCP server that accepts and never answers (waits and their cancellation), and a token
  # file (the client library insists on one before it connects).
  python3 "$here/silent_server.py" --seconds 900 >"$work/silent.port" &
  silent_pid=$!
  for _ in $(seq 50); do [ -s "$work/silent.port" ] && break; sleep 0.1; done
  echo "regress-token" >"$work/token"
  cat >"$work/plain.conf" <<EOF
max_prepared_transactions = 2
ramp_regress.silent_port = '$(cat "$work/silent.port")'
ramp_regress.token_file = '$work/token'
EOF
  run_suites plain "$work/plain.conf" "${plain_suites[@]}"
  kill "$silent_pid" 2>/dev/null || true
  wait "$silent_pid" 2>/dev/null || true
  silent_pid=""
fi

if [ ${#data_suites[@]} -gt 0 ]; then
  "$root/scripts/ramp-cluster.sh" start "$work/cluster" --nodes 3 --memory-mb 512 >/dev/null
  # pg_ramp preloaded: the backends share one GET* address cache (data_addresses).
  cat >"$work/data.conf" <<EOF
max_prepared_transactions = 2
shared_preload_libraries = 'pg_ramp'
ramp.nodes = '$(cat "$work/cluster/nodes.shm")'
ramp.token_file = '$work/cluster/token.postgres'
EOF
  run_suites data "$work/data.conf" "${data_suites[@]}"
  "$root/scripts/ramp-cluster.sh" stop "$work/cluster" >/dev/null
fi

for t in "${itests[@]}"; do
  echo "integration test $t ..."
  status=0
  mkdir -p "$work/itest_$t"
  RAMP_ROOT="$root" ITEST_DIR="$work/itest_$t" bash "$here/itest/$t.sh" \
    >"$here/results/itest_$t.log" 2>&1 || status=$?
  if [ "$status" != 0 ]; then
    failed+=("integration test $t")
    echo "integration test $t failed (status $status); last lines of regress/results/itest_$t.log:" >&2
    tail -n 40 "$here/results/itest_$t.log" >&2
  elif grep -q '^SKIPPED:' "$here/results/itest_$t.log"; then
    echo "integration test $t $(grep -m1 '^SKIPPED:' "$here/results/itest_$t.log")"
  else
    echo "integration test $t ok"
  fi
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "pg_ramp tests FAILED: ${failed[*]}" >&2
  exit 1
fi
echo "pg_ramp tests passed: ${plain_suites[*]} ${data_suites[*]} ${itests[*]}"
