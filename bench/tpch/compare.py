#!/usr/bin/env python3
"""Runs the 22 TPC-H queries against two sides and checks that they return the same rows.

A side is a search_path (schema) in a database reached with psql; by default both sides are in
one database (--dsn), side B may be elsewhere (--dsn-b). Each side has one psql session for the
whole run. Every query runs once untimed on each side (its rows are kept for the comparison;
this run also warms the caches), then --runs times per side with \\timing, alternating the
sides; a side's time is the median of its runs (psql's \\timing: from sending the query to
having received all rows).

Results are compared as psql prints them (unaligned, numeric values are exact). Where the
query's ORDER BY leaves ties, rows that tie on the ORDER BY columns may come in any order: the
sequence of ORDER BY values must match exactly, and each run of tied rows must hold the same
rows. When a LIMIT cuts through a run of tied rows, the rows kept from that last run may differ.

Prints a table, then per query
    RESULT tpch_sf<sf>_q<NN>_<label B>_vs_<label A> <median B / median A>
and RESULT tpch_sf<sf>_<label B>_vs_<label A>_total_time <sum of B medians / sum of A medians>.
Exits 1 when a result differs or a query fails (printing the first differing rows), else 0.

Example:
    compare.py --dsn "host=/tmp/pg port=5432 dbname=tpch" --sf 1 --schema-a heap --schema-b ramp
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
SEP = "\x1f"  # field separator: never in generated data

# Output columns (0-based) of each query's ORDER BY, and its LIMIT. Queries without ORDER BY
# return one row.
ORDER_BY = {
    1: [0, 1], 2: [0, 2, 1, 3], 3: [1, 2], 4: [0], 5: [1], 6: [], 7: [0, 1, 2], 8: [0],
    9: [0, 1], 10: [2], 11: [1], 12: [0], 13: [1, 0], 14: [], 15: [0], 16: [3, 0, 1, 2],
    17: [], 18: [4, 3], 19: [], 20: [0], 21: [1, 0], 22: [0],
}
LIMIT = {2: 100, 3: 10, 10: 20, 18: 100, 21: 100}

TIME_RE = re.compile(r"^Time: ([0-9]+(?:\.[0-9]+)?) ms")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dsn", required=True, help="psql -d argument (conninfo or database name)")
    p.add_argument("--dsn-b", help="connection for side B (default: --dsn)")
    p.add_argument("--schema-a", required=True, help="search_path of side A (e.g. heap)")
    p.add_argument("--schema-b", required=True, help="search_path of side B (e.g. ramp)")
    p.add_argument("--label-a", help="name of side A in RESULT lines (default: --schema-a)")
    p.add_argument("--label-b", help="name of side B in RESULT lines (default: --schema-b)")
    p.add_argument("--sf", required=True, help="scale factor, used in RESULT names")
    p.add_argument("--runs", type=int, default=3, help="timed runs per query and side (3)")
    p.add_argument("--queries", help="comma separated query numbers (default: 1-22)")
    p.add_argument("--query-dir", default=os.path.join(HERE, "queries"))
    p.add_argument("--out-dir", help="keep each side's result rows here (default: temporary)")
    p.add_argument("--timeout", type=float, default=0,
                   help="statement_timeout in seconds for every query (default: none)")
    p.add_argument("--setting", action="append", default=[], metavar="NAME=VALUE",
                   help="extra SET for both sides' sessions, e.g. max_parallel_workers_per_gather=0")
    p.add_argument("--psql", default="psql")
    p.add_argument("--csv", help="write query,ms_a,ms_b,ratio rows to this file")
    args = p.parse_args()
    if args.runs < 1:
        p.error("--runs must be at least 1")
    args.label_a = args.label_a or args.schema_a
    args.label_b = args.label_b or args.schema_b
    args.dsn_b = args.dsn_b or args.dsn
    if args.queries:
        args.queries = [int(q) for q in args.queries.split(",")]
    else:
        args.queries = list(range(1, 23))
    for q in args.queries:
        if q not in ORDER_BY:
            p.error("no query %d" % q)
    return args


class SessionError(Exception):
    pass


class Session:
    """A psql process kept open for one side, so catalog caches stay warm between queries and
    the two sides' runs can be interleaved. Query rows go to \\o files, timings to stdout."""

    def __init__(self, args, dsn, schema):
        self.stderr = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            [args.psql, "-X", "-q", "-A", "-t", "-F", SEP, "-P", "footer=off",
             "-v", "ON_ERROR_STOP=1", "-d", dsn],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr, text=True,
            bufsize=1)
        self.markers = 0
        setup = ["SET search_path = %s;" % schema]
        if args.timeout:
            setup.append("SET statement_timeout = %d;" % int(args.timeout * 1000))
        for setting in args.setting:
            name, _, value = setting.partition("=")
            setup.append("SET %s = %s;" % (name, value))
        setup += ["\\o /dev/null", "\\timing on"]
        self.call("\n".join(setup))

    def call(self, text):
        """Sends text to psql; returns the standard output lines it produced."""
        self.markers += 1
        marker = "__tpch_compare_%d__" % self.markers
        try:
            self.proc.stdin.write("%s\n\\echo %s\n" % (text, marker))
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise self.failure()
        lines = []
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise self.failure()
            if line.rstrip("\n") == marker:
                return lines
            lines.append(line)

    def run(self, sql, result_path=None):
        """Runs a query (its rows into result_path, else discarded); returns milliseconds."""
        text = sql if result_path is None else "\\o '%s'\n%s\n\\o /dev/null" % (result_path, sql)
        times = [float(m.group(1)) for m in map(TIME_RE.match, self.call(text)) if m]
        if len(times) != 1:
            raise SessionError("unexpected psql output (%d timings)" % len(times))
        return times[0]

    def failure(self):
        self.close()
        self.stderr.seek(0)
        text = self.stderr.read().strip()
        return SessionError(text or "psql exited with status %s" % self.proc.returncode)

    def close(self):
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        self.proc.wait()


def run_query(args, sessions, sql, paths):
    """One untimed run per side (rows kept), then --runs timed runs alternating the sides (and
    which side goes first) so that drifting background load hits both alike.
    Returns ([ms of A], [ms of B]); raises SessionError naming the side that failed."""
    times = ([], [])
    for side in (0, 1):
        sessions[side].run(sql, paths[side])
    for i in range(args.runs):
        for side in ((0, 1) if i % 2 == 0 else (1, 0)):
            times[side].append(sessions[side].run(sql))
    return times


def read_rows(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def compare(rows_a, rows_b, keys, limit):
    """Returns None when the results agree (see the module comment), else a description."""
    if rows_a == rows_b:
        return None
    split_a = [r.split(SEP) for r in rows_a]
    split_b = [r.split(SEP) for r in rows_b]

    def key(row):
        return [row[k] if k < len(row) else None for k in keys]

    for i in range(min(len(rows_a), len(rows_b))):
        if key(split_a[i]) != key(split_b[i]):
            return "row %d differs in its ORDER BY columns:\n  A: %s\n  B: %s" % (
                i + 1, show(rows_a[i]), show(rows_b[i]))
    if len(rows_a) != len(rows_b):
        i = min(len(rows_a), len(rows_b))
        extra = rows_a[i] if len(rows_a) > i else rows_b[i]
        return "row counts differ: A %d, B %d; first extra row (%s): %s" % (
            len(rows_a), len(rows_b), "A" if len(rows_a) > i else "B", show(extra))
    # Same ORDER BY values row by row: compare each run of ties as a multiset.
    n = len(rows_a)
    start = 0
    while start < n:
        end = start + 1
        while end < n and key(split_a[end]) == key(split_a[start]):
            end += 1
        run_a, run_b = sorted(rows_a[start:end]), sorted(rows_b[start:end])
        cut_by_limit = limit is not None and n == limit and end == n
        if run_a != run_b and not cut_by_limit:
            only_a = [r for r in run_a if r not in run_b]
            only_b = [r for r in run_b if r not in run_a]
            where = ("row %d" % end if end == start + 1 else
                     "rows %d-%d (tied on the ORDER BY columns)" % (start + 1, end))
            return "%s differ:\n  A only: %s\n  B only: %s" % (
                where, show(only_a[0]) if only_a else "-", show(only_b[0]) if only_b else "-")
        start = end
    return None


def show(row):
    return row.replace(SEP, " | ")


def main():
    args = parse_args()
    out_dir = args.out_dir or tempfile.mkdtemp(prefix="tpch_compare_")
    os.makedirs(out_dir, exist_ok=True)
    print("tpch compare: A = %s (%s), B = %s (%s), sf %s, %d timed runs, rows in %s" % (
        args.label_a, args.schema_a, args.label_b, args.schema_b, args.sf, args.runs, out_dir))
    print("%-5s %8s %12s %12s %8s  %s" % (
        "query", "rows", args.label_a + " ms", args.label_b + " ms", "B/A", "result"))

    failures, results, timings = [], [], []
    total_a = total_b = 0.0
    sessions = [None, None]
    for q in args.queries:
        with open(os.path.join(args.query_dir, "q%02d.sql" % q), encoding="utf-8") as f:
            sql = f.read().strip().rstrip(";") + ";"
        paths = [os.path.join(out_dir, "q%02d.%s.out" % (q, side)) for side in ("a", "b")]
        side = 0
        try:
            for side, (dsn, schema) in enumerate(((args.dsn, args.schema_a),
                                                  (args.dsn_b, args.schema_b))):
                if sessions[side] is None:
                    sessions[side] = Session(args, dsn, schema)
            times_a, times_b = run_query(args, sessions, sql, paths)
        except SessionError as e:
            # The failed psql has exited: the next query starts a new session for that side.
            failed = [i for i in (0, 1) if sessions[i] and sessions[i].proc.poll() is not None]
            for i in failed or [side]:
                sessions[i] = None
            label = "/".join((args.label_a, args.label_b)[i] for i in failed) or "?"
            failures.append("q%02d: %s: %s" % (q, label, e))
            print("%-5s %8s %12s %12s %8s  %s" % ("q%02d" % q, "-", "-", "-", "-", "ERROR"),
                  flush=True)
            continue
        rows_a, rows_b = read_rows(paths[0]), read_rows(paths[1])
        diff = compare(rows_a, rows_b, ORDER_BY[q], LIMIT.get(q))
        med_a, med_b = statistics.median(times_a), statistics.median(times_b)
        total_a += med_a
        total_b += med_b
        ratio = med_b / med_a if med_a > 0 else float("nan")
        if diff:
            status = "DIFFERENT"
            failures.append("q%02d: %s" % (q, diff))
        elif not rows_a:
            status = "same (EMPTY)"
        else:
            status = "same"
        print("%-5s %8d %12.1f %12.1f %8.3f  %s" % ("q%02d" % q, len(rows_a), med_a, med_b,
                                                   ratio, status), flush=True)
        if not diff:
            results.append((q, ratio))
        timings.append((q, med_a, med_b, ratio))
    for session in sessions:
        if session:
            session.close()
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("query,ms_%s,ms_%s,ratio\n" % (args.label_a, args.label_b))
            for q, a, b, r in timings:
                f.write("q%02d,%.1f,%.1f,%.3f\n" % (q, a, b, r))

    print("%-5s %8s %12.1f %12.1f %8.3f" % (
        "total", "", total_a, total_b, total_b / total_a if total_a > 0 else float("nan")))
    name = "tpch_sf%s" % args.sf
    vs = "%s_vs_%s" % (args.label_b, args.label_a)
    for q, ratio in results:
        print("RESULT %s_q%02d_%s %.3f" % (name, q, vs, ratio))
    if not failures and total_a > 0:
        print("RESULT %s_%s_total_time %.3f" % (name, vs, total_b / total_a))
    if failures:
        print("\n%d queries failed:" % len(failures), file=sys.stderr)
        for f in failures:
            print(f, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
