#!/usr/bin/env python3
"""Compares PostgreSQL's regression results on heap (pg_ramp installed) with the same
schedule run with default_table_access_method = ramp, test by test.

The comparison is of lines as a multiset: the order of rows of a query without ORDER BY is
each access method's own. Lines of plans, costs and storage details (toast tables, ctid,
block counts) are left out: they differ by design. What remains are rows one side has and
the other has not, and errors. Usage: compare.py HEAP_RESULTS RAMP_RESULTS REPORT."""
import collections
import os
import re
import sys

IGNORED = re.compile(
    r'(->|Scan|Sort Key|Hash Cond|Filter:|Recheck Cond|Index Cond|TID Cond|QUERY PLAN|^-+$|'
    r'Heap Blocks|Join Filter|Merge Cond|Workers|Gather|Materialize|Memoize|Access method|'
    r'Presorted|Sort Method|Rows Removed|Join|Nested Loop|Aggregate|Append|Result|Limit|'
    r'^ *Sort$|^ *Hash$|Unique|SetOp|InitPlan|SubPlan|Output:|Group Key|Hash Key|One-Time|'
    r'Partial|Finalize|Incremental Sort|rows\)$|row\)$|Buckets|Batches|Hits:|Subplans Removed|'
    r'explain_|ctid|toast|relfilenode|pg_relation_size|QUERY|\(\d+,\d+\))')
CRASH = re.compile(r'server closed the connection|terminating connection|connection to server was lost')


def lines(path):
    with open(path, errors='replace') as f:
        return [l for l in f.read().split('\n') if not IGNORED.search(l)]


def main():
    heap_dir, ramp_dir, report = sys.argv[1:4]
    differing = []
    crashes = 0
    for name in sorted(os.listdir(heap_dir)):
        ramp_path = os.path.join(ramp_dir, name)
        if not os.path.exists(ramp_path):
            differing.append((name, -1, [], []))
            continue
        with open(ramp_path, errors='replace') as f:
            crashes += len(CRASH.findall(f.read()))
        heap, ramp = collections.Counter(lines(os.path.join(heap_dir, name))), collections.Counter(lines(ramp_path))
        only_heap, only_ramp = heap - ramp, ramp - heap
        n = sum(only_heap.values()) + sum(only_ramp.values())
        if n:
            differing.append((name, n, sorted(only_heap.items())[:12], sorted(only_ramp.items())[:12]))
    differing.sort(key=lambda d: -d[1])
    with open(report, 'w') as out:
        for name, n, h, r in differing:
            out.write(f'{name}: {"missing on ramp" if n < 0 else f"{n} lines differ"}\n')
            for line, count in h:
                out.write(f'  heap x{count}: {line[:160]}\n')
            for line, count in r:
                out.write(f'  ramp x{count}: {line[:160]}\n')
    errors = 0
    for name in os.listdir(ramp_dir):
        with open(os.path.join(ramp_dir, name), errors='replace') as f:
            ramp_errors = collections.Counter(l for l in f if l.startswith('ERROR:'))
        heap_path = os.path.join(heap_dir, name)
        heap_errors = collections.Counter()
        if os.path.exists(heap_path):
            with open(heap_path, errors='replace') as f:
                heap_errors = collections.Counter(l for l in f if l.startswith('ERROR:'))
        errors += sum((ramp_errors - heap_errors).values())
    print(f'RESULT pgregress_tests_differing {len(differing)}')
    print(f'RESULT pgregress_ramp_only_errors {errors}')
    print(f'RESULT pgregress_ramp_crashes {crashes}')


if __name__ == '__main__':
    main()
