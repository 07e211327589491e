#!/usr/bin/env python3
"""Per-row comparison of two builds' `gemmkit bench --json` runs of one suite (scripts/ab.sh).

usage: ab-compare.py [--cold] THIS.json... -- OTHER.json...
Each side's time of a row is its fastest run (the passes of ab.sh): the warm-L2 median, or with
--cold the cold-L2 one (rows timed without it are left out); a row is flagged when this build is
more than 5% slower than the other, or when either side's check failed or the kernels differ."""
import json
import math
import sys


def fastest(paths, key="median_us"):
    rows = {}
    for path in paths:
        with open(path) as f:
            data = json.load(f)
        for suite in data["suites"]:
            for r in suite["rows"]:
                g = r.get("gemmkit", {})
                us = g.get(key)
                ok = bool(g.get("ran")) and g.get("check", {}).get("passed", False)
                us = us if isinstance(us, (int, float)) and not math.isnan(us) else math.inf
                best_us, all_ok, kernel = rows.get(r["name"], (math.inf, True, ""))
                if us < best_us:
                    best_us, kernel = us, r.get("gemmkit_kernel", "")
                rows[r["name"]] = (best_us, all_ok and ok, kernel)
    return rows


def main(argv):
    key = "median_us"
    if argv and argv[0] == "--cold":
        key, argv = "cold_median_us", argv[1:]
    if "--" not in argv:
        sys.exit(__doc__)
    split = argv.index("--")
    this, other = fastest(argv[:split], key), fastest(argv[split + 1:], key)
    flagged, logs = 0, []
    for name, (us, ok, kernel) in this.items():
        if name not in other:
            print(f"{name}: only in this build")
            flagged += 1
            continue
        o_us, o_ok, o_kernel = other[name]
        if key == "cold_median_us" and ok and o_ok and math.isinf(us) and math.isinf(o_us):
            continue  # ran and passed, timed warm only, on both sides
        ratio = us / o_us if o_us > 0 else math.inf
        mark = ""
        if not (ok and o_ok):
            mark = " CHECK FAILED"
        elif ratio > 1.05:
            mark = " SLOWER"
        elif kernel != o_kernel:
            mark = " other kernel"
        flagged += bool(mark)
        print(f"{name}: {us:.2f} us ({kernel}) against {o_us:.2f} us ({o_kernel}): {ratio:.3f}x{mark}")
        logs.append(math.log(ratio) if 0 < ratio < math.inf else 0.0)
    if logs:
        print(f"geometric mean {math.exp(sum(logs) / len(logs)):.3f}x over {len(logs)} rows; "
              f"{flagged} flagged")


if __name__ == "__main__":
    main(sys.argv[1:])
