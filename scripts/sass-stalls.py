#!/usr/bin/env python3
"""Digest of the per-instruction CSV that scripts/linear-profile.sh exports (ncu --page source
--print-source sass --csv): for the last kernel in the file, the instructions holding the most
warp stall samples, each with its main stall reasons and execution count, and the share of all
samples. Usage: sass-stalls.py FILE.csv [top]"""
import csv, sys

path = sys.argv[1]
top = int(sys.argv[2]) if len(sys.argv) > 2 else 25
blocks, current = [], None
with open(path, newline="") as f:
    for row in csv.reader(f):
        if row and row[0] == "Kernel Name":
            current = {"name": row[1], "rows": [], "header": None}
            blocks.append(current)
        elif current is not None and current["header"] is None:
            current["header"] = row
        elif current is not None and row:
            current["rows"].append(dict(zip(current["header"], row)))
if not blocks:
    sys.exit(f"{path}: no kernel")
block = blocks[-1]
rows = block["rows"]


def number(text):
    try:
        return float(text)
    except ValueError:
        return 0.0


samples = [number(r.get("Warp Stall Sampling (All Samples)", "0")) for r in rows]
total = sum(samples) or 1.0
reasons = [h for h in block["header"] if h.startswith("stall_") and "Not Issued" not in h]
print(f"{block['name'][:110]}\n{len(rows)} instructions, {total:.0f} samples")
order = sorted(range(len(rows)), key=lambda i: -samples[i])[:top]
for i in sorted(order):
    r = rows[i]
    parts = sorted(((number(r[h]), h[6:]) for h in reasons), reverse=True)[:3]
    why = ", ".join(f"{name} {value / max(samples[i], 1):.0%}" for value, name in parts if value)
    print(f"{i:5d} {samples[i] / total:6.1%} x{number(r['Instructions Executed']):>7.0f}  "
          f"{r['Source'].strip()[:58]:58s} {why}")
