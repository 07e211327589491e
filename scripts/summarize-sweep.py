#!/usr/bin/env python3
"""Prints one line per suite row: gemmkit median microseconds under each sweep setting (JSON
files written by scripts/linear-sweep.sh into a folder), with the kernel of the auto setting.
Usage: summarize-sweep.py [FOLDER (default out)]"""
import glob, json, os, sys

folder = sys.argv[1] if len(sys.argv) > 1 else "out"
runs = {}
for path in sorted(glob.glob(os.path.join(folder, "sweep-*.json"))):
    tag = os.path.basename(path)[6:-5]
    try:
        rows = json.load(open(path))["suites"][0]["rows"]
    except Exception:
        continue
    runs[tag] = {r["name"]: r for r in rows}
tags = sorted(runs)
print("row".ljust(26) + "".join(t.replace("pdl", "").replace("ring", "r")[:16].rjust(17) for t in tags))
names = list(next(iter(runs.values())).keys()) if runs else []
for name in names:
    cells = []
    for t in tags:
        r = runs[t].get(name)
        ok = r and r.get("gemmkit", {}).get("ran") and r["gemmkit"].get("check", {}).get("passed")
        cells.append(f'{r["gemmkit"]["median_us"]:.2f}' if ok else "-")
    print(name[:25].ljust(26) + "".join(c.rjust(17) for c in cells))
