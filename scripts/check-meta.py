#!/usr/bin/env python3
"""Checks META.json against the PGXN meta spec 1.0.0 (required keys, semantic versions,
known licenses) and against the tree (the files it names exist, the control file's
default_version matches). Exit status 1 with a list of problems otherwise."""
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEMVER = re.compile(r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+)?$")
LICENSES = {"agpl_3", "apache_1_1", "apache_2_0", "artistic_1", "artistic_2", "bsd",
            "freebsd", "gfdl_1_2", "gfdl_1_3", "gpl_1", "gpl_2", "gpl_3", "lgpl_2_1",
            "lgpl_3_0", "mit", "mozilla_1_0", "mozilla_1_1", "openssl", "perl_5",
            "postgresql", "qpl_1_0", "ssleay", "sun", "zlib", "open_source",
            "restricted", "unrestricted", "unknown"}
STATUSES = {"stable", "testing", "unstable"}


def check(path):
    problems = []
    try:
        with open(path) as f:
            meta = json.load(f)
    except (OSError, ValueError) as e:
        return [f"{path}: not readable JSON: {e}"]
    for key in ("name", "abstract", "version", "maintainer", "license", "provides", "meta-spec"):
        if key not in meta:
            problems.append(f"missing required key '{key}'")
    if problems:
        return problems
    if not re.match(r"^[A-Za-z0-9_-]{2,}$", meta["name"]):
        problems.append(f"name '{meta['name']}' is not a valid distribution name")
    if not SEMVER.match(meta["version"]):
        problems.append(f"version '{meta['version']}' is not a semantic version")
    if meta["meta-spec"].get("version") != "1.0.0":
        problems.append("meta-spec.version must be 1.0.0")
    lic = meta["license"]
    names = [lic] if isinstance(lic, str) else list(lic) if isinstance(lic, (list, dict)) else []
    if not names or any(n not in LICENSES for n in names if isinstance(lic, (str, list))):
        problems.append(f"license {lic!r} is not a PGXN license name")
    maint = meta["maintainer"]
    if not (isinstance(maint, str) and maint) and not (isinstance(maint, list) and maint):
        problems.append("maintainer must be a string or a non-empty list")
    if meta.get("release_status", "stable") not in STATUSES:
        problems.append(f"release_status must be one of {sorted(STATUSES)}")
    if not isinstance(meta["provides"], dict) or not meta["provides"]:
        problems.append("provides must name at least one extension")
    else:
        for ext, p in meta["provides"].items():
            for key in ("file", "version"):
                if key not in p:
                    problems.append(f"provides.{ext} lacks '{key}'")
            if "version" in p and not SEMVER.match(p["version"]):
                problems.append(f"provides.{ext}.version '{p['version']}' is not semantic")
            for key in ("file", "docfile"):
                if key in p and not os.path.exists(os.path.join(ROOT, p[key])):
                    problems.append(f"provides.{ext}.{key} names a missing file {p[key]}")
            control = os.path.join(ROOT, "extension", f"{ext}.control")
            if os.path.exists(control):
                m = re.search(r"default_version\s*=\s*'([^']+)'", open(control).read())
                if m and "version" in p and not p["version"].startswith(m.group(1)):
                    problems.append(f"provides.{ext}.version {p['version']} does not match "
                                    f"{ext}.control default_version {m.group(1)}")
    return problems


if __name__ == "__main__":
    path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "META.json")
    found = check(path)
    for p in found:
        print(f"META.json: {p}", file=sys.stderr)
    if found:
        sys.exit(1)
    print("META.json: valid PGXN meta-spec 1.0.0")
