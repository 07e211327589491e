#!/usr/bin/env python3
"""Markdown tables for docs/perf.md from `gemmkit bench --json` files.

usage: perf-table.py linear PDL_ON.json PDL_OFF.json PEERS.csv
       perf-table.py linear-one BENCH.json PEERS.csv pdl|nopdl
       perf-table.py conv BENCH.json [BENCH.json ...] PEERS.csv
       perf-table.py conv-pair DISPATCH.json OWN.json [DISPATCH.json OWN.json ...] PEERS.csv
Linear: gemmkit (PDL on/off, warm and cold L2) against cuBLASLt timed in the same run and the
tinygemm2 figures of the peers file (PDL against PDL, non-PDL against non-PDL).
Conv: gemmkit against cuDNN timed in the same run, count-weighted totals, fraction of the floor.
Conv-pair: the dispatcher (own paths + cuDNN) and the own paths only (GEMMKIT_CONV_CUDNN=0) of the
same suite side by side, each against the cuDNN peer of its own run.
"""
import csv, json, math, sys


def rows_of(path):
    data = json.load(open(path))
    out = {}
    for suite in data["suites"]:
        for r in suite["rows"]:
            out[(suite["suite"].split("/")[-1], r["name"])] = r
    return out


def peer(r, name):
    for p in r.get("peers", []):
        if p["name"] == name and p.get("ran"):
            return p
    return None


def best_peer(r, names):
    found = [p for p in (peer(r, n) for n in names) if p and p.get("check", {}).get("passed", True)]
    return min(found, key=lambda p: p["median_us"]) if found else None


def gmean(values):
    values = [v for v in values if v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def read_peers(path):
    lines = [l for l in open(path) if not l.startswith("#")]
    return list(csv.DictReader(lines))


def linear(on_path, off_path, peers_path):
    on, off = rows_of(on_path), rows_of(off_path)
    tiny = {(int(p["n"]), int(p["m"]), int(p["k"])): p for p in read_peers(peers_path)}
    print("| row | n×m×k | kernel | PDL µs | no-PDL µs | cold µs | cuBLASLt µs | vs cuBLASLt | tinygemm2 PDL / no-PDL µs | vs tinygemm2 (PDL, no-PDL) | floor |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    small_blas, small_tg_pdl, small_tg = [], [], []
    for key, r in on.items():
        g, g_off = r["gemmkit"], off[key]["gemmkit"]
        blas = peer(r, "cublaslt")
        blas_us = blas["median_us"] if blas else float("nan")
        t = tiny.get((r["n"], r["m"], r["k"]))
        ratio_blas = g["median_us"] / blas_us
        if r["n"] <= 128:
            small_blas.append(ratio_blas)
        tg_cells, tg_ratio = "", ""
        if t:
            tg_cells = f'{float(t["tinygemm2_s16_pdl"]):.2f} / {min(float(t["tinygemm2_s4"]), float(t["tinygemm2_s16"])):.2f}'
            rp = g["median_us"] / float(t["tinygemm2_s16_pdl"])
            rn = g_off["median_us"] / min(float(t["tinygemm2_s4"]), float(t["tinygemm2_s16"]))
            tg_ratio = f"{rp:.2f}×, {rn:.2f}×"
            if r["n"] <= 128:
                small_tg_pdl.append(rp)
                small_tg.append(rn)
        kernel = r["gemmkit_kernel"].replace("cuda.linear.", "")
        print(f'| {r["name"]} | {r["n"]}×{r["m"]}×{r["k"]} | {kernel} | {g["median_us"]:.2f} | {g_off["median_us"]:.2f} | '
              f'{g["cold_median_us"]:.2f} | {blas_us:.2f} | {ratio_blas:.2f}× | {tg_cells} | {tg_ratio} | {100 * g["floor_fraction"]:.0f}% |')
    print()
    print(f"Rows with n ≤ 128: geometric mean {gmean(small_blas):.2f}× cuBLASLt; against tinygemm2 "
          f"(rows it was measured on) {gmean(small_tg_pdl):.2f}× with PDL, {gmean(small_tg):.2f}× without.")


def linear_one(path, peers_path, mode):
    rows = rows_of(path)
    tiny = {(int(p["n"]), int(p["m"]), int(p["k"])): p for p in read_peers(peers_path)}
    column = "tinygemm2_s16_pdl" if mode == "pdl" else None
    print("| row | n×m×k | kernel | gemmkit µs | cold µs | cuBLASLt µs | vs cuBLASLt | tinygemm2 µs | vs tinygemm2 | floor |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    small_blas, small_tg = [], []
    for r in rows.values():
        g = r["gemmkit"]
        blas = peer(r, "cublaslt")
        ratio = g["median_us"] / blas["median_us"]
        t = tiny.get((r["n"], r["m"], r["k"]))
        tg = ""
        tg_ratio = ""
        if t:
            tg_us = float(t[column]) if column else min(float(t["tinygemm2_s4"]), float(t["tinygemm2_s16"]))
            tg = f"{tg_us:.2f}"
            tg_ratio = f"{g['median_us'] / tg_us:.2f}×"
            if r["n"] <= 128:
                small_tg.append(g["median_us"] / tg_us)
        if r["n"] <= 128:
            small_blas.append(ratio)
        kernel = r["gemmkit_kernel"].replace("cuda.linear.", "")
        print(f'| {r["name"]} | {r["n"]}×{r["m"]}×{r["k"]} | {kernel} | {g["median_us"]:.2f} | {g["cold_median_us"]:.2f} | '
              f'{blas["median_us"]:.2f} | {ratio:.2f}× | {tg} | {tg_ratio} | {100 * g["floor_fraction"]:.0f}% |')
    print()
    print(f"Rows with n ≤ 128: geometric mean {gmean(small_blas):.2f}× cuBLASLt, {gmean(small_tg):.2f}× tinygemm2 "
          f"({'PDL' if column else 'best non-PDL'} figures, on the rows the peers file has).")


def conv(paths, peers_path):
    figures = {(p["suite"], p["name"]): p for p in read_peers(peers_path)}
    for path in paths:
        rows = rows_of(path)
        suite = next(iter(rows))[0] if rows else path
        print(f"### {suite}\n")
        print("| row | count | kernel | gemmkit µs | cuDNN µs (same run, faster API) | gemmkit / cuDNN | cuDNN µs (peers file) | floor µs | floor / gemmkit |")
        print("|---|---|---|---|---|---|---|---|---|")
        total_g = total_c = total_f = 0.0
        for (s, name), r in rows.items():
            g = r.get("gemmkit", {})
            if not g.get("ran"):
                print(f'| {name} | {r.get("count", 1)} | not run: {g.get("note", "")} | | | | | | |')
                continue
            c = best_peer(r, ["cudnn", "cudnn_graph"])
            c_us = c["median_us"] if c else float("nan")
            count = r.get("count", 1)
            if c:  # totals over the rows both ran
                total_g += count * g["median_us"]
                total_c += count * c_us
                total_f += count * r["floor_us"]
            ref = figures.get((s, name), {}).get("cudnn_us", "")
            print(f'| {name} | {count} | {r["gemmkit_kernel"].replace("cuda.conv.", "")} | {g["median_us"]:.1f} | {c_us:.1f} | '
                  f'{g["median_us"] / c_us:.2f}× | {ref} | {r["floor_us"]:.1f} | {100 * g["floor_fraction"]:.0f}% |')
        print(f"\nCount-weighted totals over the rows cuDNN ran: gemmkit {total_g:.0f} µs, cuDNN {total_c:.0f} µs "
              f"({total_g / total_c if total_c else float('nan'):.2f}×), floor {total_f:.0f} µs.\n")


def conv_pair(pairs, peers_path):
    for dispatch_path, own_path in pairs:
        dispatch, own = rows_of(dispatch_path), rows_of(own_path)
        suite = next(iter(dispatch))[0] if dispatch else dispatch_path
        print(f"### {suite}\n")
        print("| row | count | dispatcher kernel | dispatcher µs | vs cuDNN | own kernel | own µs | vs cuDNN | cuDNN µs | floor µs | floor / own |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        totals = {"d": 0.0, "dc": 0.0, "o": 0.0, "oc": 0.0, "f": 0.0}
        over = []
        for key, r in dispatch.items():
            o = own.get(key)
            g, h = r.get("gemmkit", {}), (o or {}).get("gemmkit", {})
            if not g.get("ran") or not h.get("ran"):
                print(f'| {key[1]} | {r.get("count", 1)} | not run | | | | | | | | |')
                continue
            c = best_peer(r, ["cudnn", "cudnn_graph"])
            c_own = best_peer(o, ["cudnn", "cudnn_graph"])
            count = r.get("count", 1)
            d_ratio = g["median_us"] / c["median_us"] if c else float("nan")
            o_ratio = h["median_us"] / c_own["median_us"] if c_own else float("nan")
            if c and c_own:
                totals["d"] += count * g["median_us"]
                totals["dc"] += count * c["median_us"]
                totals["o"] += count * h["median_us"]
                totals["oc"] += count * c_own["median_us"]
                totals["f"] += count * r["floor_us"]
            if c and d_ratio > 1.05:
                over.append(f"{key[1]} ({d_ratio:.2f}×)")
            c_cell = f'{c["median_us"]:.1f}' if c else "n/a"
            print(f'| {key[1]} | {count} | {r["gemmkit_kernel"].replace("cuda.conv.", "")} | {g["median_us"]:.1f} | {d_ratio:.2f}× | '
                  f'{o["gemmkit_kernel"].replace("cuda.conv.", "")} | {h["median_us"]:.1f} | {o_ratio:.2f}× | {c_cell} | '
                  f'{r["floor_us"]:.1f} | {100 * h["floor_fraction"]:.0f}% |')
        print(f"\nCount-weighted totals over the rows cuDNN ran: dispatcher {totals['d']:.0f} µs against cuDNN "
              f"{totals['dc']:.0f} µs ({totals['d'] / totals['dc']:.2f}×); own paths {totals['o']:.0f} µs against "
              f"{totals['oc']:.0f} µs ({totals['o'] / totals['oc']:.2f}×); floor {totals['f']:.0f} µs. "
              f"Dispatcher rows more than 5% slower than cuDNN: {', '.join(over) if over else 'none'}.\n")


if __name__ == "__main__":
    if sys.argv[1] == "linear":
        linear(*sys.argv[2:5])
    elif sys.argv[1] == "linear-one":
        linear_one(*sys.argv[2:5])
    elif sys.argv[1] == "conv-pair":
        files = sys.argv[2:-1]
        conv_pair(list(zip(files[0::2], files[1::2])), sys.argv[-1])
    else:
        conv(sys.argv[2:-1], sys.argv[-1])
