#!/usr/bin/env python3
"""Checks that docs/ARCHITECTURE.md still matches the code.

Every `path:Function` hop (also `path:Class::Method`, `path:dispatch::Name(...)`) must name
an existing file that defines or declares that function (its last name followed by `(`), and
every other backticked repository path must exist (`{a,b}` alternatives and `*` globs are
expanded). Run by `make check`; `--self-test` proves it fails on a broken hop and a missing
file.

  scripts/check-architecture.py [DOC]     (default: docs/ARCHITECTURE.md)
"""
import glob
import os
import re
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOP_DIRS = ("base/", "transport/", "engine/", "extension/", "scripts/", "sql/", "regress/",
            "bench/", "docs/")
CODE = re.compile(r"`([^`]+)`")
HOP = re.compile(r"^([\w./{},*-]+\.(?:cpp|hpp|h|c|sh|py)):([A-Za-z_][\w:~]*)")


def expand(path):
    """Expands one level of {a,b} alternatives and globs into existing paths."""
    m = re.search(r"\{([^{}]*)\}", path)
    if m:
        out = []
        for alt in m.group(1).split(","):
            out.extend(expand(path[:m.start()] + alt + path[m.end():]))
        return out
    if "*" in path:
        return glob.glob(os.path.join(ROOT, path))
    full = os.path.join(ROOT, path)
    return [full] if os.path.exists(full) else []


def check(doc):
    errors = []
    text = open(doc, encoding="utf-8").read()
    for lineno, line in enumerate(text.splitlines(), 1):
        for code in CODE.findall(line):
            code = code.strip()
            hop = HOP.match(code)
            if hop:
                path, name = hop.group(1), hop.group(2).split("::")[-1]
                files = expand(path)
                if not files:
                    errors.append(f"{doc}:{lineno}: no file {path}")
                    continue
                pattern = re.compile(r"\b" + re.escape(name) + r"\s*\(")
                if not any(pattern.search(open(f, encoding="utf-8").read()) for f in files):
                    errors.append(f"{doc}:{lineno}: {path} has no function {name}")
                continue
            first = code.split()[0].rstrip(",")
            if first.startswith(TOP_DIRS) and "/" in first and not expand(first.split(":")[0]):
                errors.append(f"{doc}:{lineno}: no such path {first}")
    return errors


def self_test():
    bad = ("`engine/src/client/commit.cpp:NoSuchFunctionAnywhere` and "
           "`engine/src/no_such_file.cpp` and `extension/xact/xact.cpp:PreCommit`\n")
    with tempfile.NamedTemporaryFile("w", suffix=".md", delete=False) as f:
        f.write(bad)
        name = f.name
    try:
        errors = check(name)
    finally:
        os.unlink(name)
    want = ["has no function NoSuchFunctionAnywhere", "no such path engine/src/no_such_file.cpp"]
    missing = [w for w in want if not any(w in e for e in errors)]
    if missing or len(errors) != len(want):
        print("check-architecture self-test FAILED:", errors, file=sys.stderr)
        return 1
    print("check-architecture self-test: a broken hop and a missing file are caught")
    return 0


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    doc = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "docs", "ARCHITECTURE.md")
    errors = check(doc)
    for e in errors:
        print(e, file=sys.stderr)
    if errors:
        print(f"check-architecture: {len(errors)} hop(s) or path(s) do not match the code",
              file=sys.stderr)
        return 1
    print(f"check-architecture: every hop and path of {os.path.relpath(doc, ROOT)} matches the code")
    return 0


if __name__ == "__main__":
    sys.exit(main())
