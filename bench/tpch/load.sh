#!/usr/bin/env bash
# Loads TPC-H data into one schema of a PostgreSQL database:
#   creates the schema and the tables of schema.sql (optionally with a default table access
#   method), loads every table with COPY ... FROM STDIN piped from tpch_dbgen, optionally creates
#   the indexes of indexes.sql, runs ANALYZE, and prints the time of each step.
#
# usage: load.sh -d <conninfo> -s <scale factor> -n <schema> [-a <access method>]
#                [--no-indexes] [--vacuum] [-g <tpch_dbgen>] [-j <generator threads>]
#   -d   libpq connection string or database name given to psql -d (PGHOST etc. also apply)
#   -a   SET default_table_access_method for CREATE TABLE (e.g. ramp); default: the server's
#   --no-indexes  skip indexes.sql (Q17 and Q20 then scan lineitem once per outer row)
#   --vacuum      VACUUM ANALYZE instead of ANALYZE (sets heap visibility/hint bits up front)
#   -g   the generator binary; default $TPCH_DBGEN, else build/bench/tpch/tpch_dbgen
#
# Output: one line per step, "load <schema>.<step> <rows> rows <seconds> s", then a total.
# An existing schema is kept; its TPC-H tables are dropped and recreated.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)

conn= sf= schema= am= indexes=1 vacuum=0 threads=
dbgen=${TPCH_DBGEN:-$repo/build/bench/tpch/tpch_dbgen}
usage() { sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }
while [ $# -gt 0 ]; do
  case "$1" in
    -d) conn=$2; shift 2 ;;
    -s) sf=$2; shift 2 ;;
    -n) schema=$2; shift 2 ;;
    -a) am=$2; shift 2 ;;
    -g) dbgen=$2; shift 2 ;;
    -j) threads=$2; shift 2 ;;
    --no-indexes) indexes=0; shift ;;
    --vacuum) vacuum=1; shift ;;
    -h|--help) usage ;;
    *) echo "load.sh: unknown argument $1" >&2; usage ;;
  esac
done
[ -n "$conn" ] && [ -n "$sf" ] && [ -n "$schema" ] || usage
[[ "$schema" =~ ^[a-z_][a-z0-9_]*$ ]] || { echo "load.sh: schema must match [a-z_][a-z0-9_]*" >&2; exit 2; }
[ -z "$am" ] || [[ "$am" =~ ^[a-z_][a-z0-9_]*$ ]] || { echo "load.sh: bad access method" >&2; exit 2; }
[ -x "$dbgen" ] || { echo "load.sh: no generator at $dbgen (build it, or pass -g)" >&2; exit 1; }

psql_cmd=(psql -X -q -v ON_ERROR_STOP=1 -d "$conn")
copy_cmd=(psql -X -v ON_ERROR_STOP=1 -d "$conn")  # not quiet: prints "COPY <rows>"
session=(-c "SET client_min_messages = warning" -c "SET search_path = $schema")
[ -z "$am" ] || session+=(-c "SET default_table_access_method = $am")
gen_args=(-s "$sf")
[ -z "$threads" ] || gen_args+=(-j "$threads")

now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
report() { printf 'load %-20s %10s rows %8s s\n' "$schema.$1" "$2" "$3"; }

total_start=$(now)
"${psql_cmd[@]}" -c "CREATE SCHEMA IF NOT EXISTS $schema"
t0=$(now)
"${psql_cmd[@]}" "${session[@]}" -f "$here/schema.sql"
report create - "$(elapsed "$t0" "$(now)")"

# Ramp tables: a transaction's writes are held in the backend until COMMIT, and the client
# takes at most ~1 M writes per transaction; large tables are loaded in COPYs of
# $chunk_rows rows (one transaction each). Heap tables take one COPY per table.
chunk_rows=500000
for table in region nation supplier part partsupp customer orders lineitem; do
  t0=$(now)
  if [ -n "$am" ]; then
    out=$("$dbgen" "${gen_args[@]}" -T "$table" --stdout |
          split -l "$chunk_rows" --filter="$(printf '%q ' "${copy_cmd[@]}") -c 'COPY $schema.$table FROM STDIN'" -)
    rows=$(echo "$out" | awk '/^COPY / { n += $2 } END { print n + 0 }')
  else
    out=$("$dbgen" "${gen_args[@]}" -T "$table" --stdout |
          "${copy_cmd[@]}" -c "COPY $schema.$table FROM STDIN")
    rows=${out#COPY }
  fi
  report "$table" "$rows" "$(elapsed "$t0" "$(now)")"
done

if [ "$indexes" = 1 ]; then
  t0=$(now)
  "${psql_cmd[@]}" "${session[@]}" -f "$here/indexes.sql"
  report indexes - "$(elapsed "$t0" "$(now)")"
fi

t0=$(now)
if [ "$vacuum" = 1 ]; then
  step=vacuum_analyze
  for table in region nation supplier part partsupp customer orders lineitem; do
    "${psql_cmd[@]}" -c "VACUUM (ANALYZE) $schema.$table"
  done
else
  step=analyze
  "${psql_cmd[@]}" -c "ANALYZE $schema.region, $schema.nation, $schema.supplier, $schema.part,
    $schema.partsupp, $schema.customer, $schema.orders, $schema.lineitem"
fi
report "$step" - "$(elapsed "$t0" "$(now)")"
report total - "$(elapsed "$total_start" "$(now)")"
