#!/usr/bin/env python3
"""The tables of docs/perf.md, from the JSON that `gemmkit bench --json` writes.

usage: perf-table.py update PERF.md DIR [--commit C] [--gpu G]
       perf-table.py linear BENCH.json [NOPDL.json] [--tinygemm2 CSV]
       perf-table.py conv-pair DISPATCH.json OWN.json [DISPATCH.json OWN.json ...]
       perf-table.py conv BENCH.json [BENCH.json ...]

update: rewrites, in place, every block of PERF.md between a line `<!-- perf-table: SPEC -->`
and the next `<!-- /perf-table -->`, from the files `scripts/device.sh bench` leaves in DIR
(bench-SUITE.json, bench-SUITE-nopdl.json, bench-SUITE-own.json, gpu.txt). SPEC is one of
  header              the commit and GPU of the run (DIR/gpu.txt, or --commit / --gpu)
  linear SUITE        gemmkit with PDL on and off, cold L2, cuBLASLt of the same run, tinygemm2
                      and, where bench-SUITE-invariance-off.json exists, gemmkit with batch
                      invariance off (GEMMKIT_LINEAR_BATCH_INVARIANT=0) against the same cuBLASLt
  conv-pair SUITE     the dispatcher (own paths + cuDNN) and own paths only, each against cuDNN
  conv SUITE          one conv run against cuDNN
The text outside the blocks is left as it is. A block whose files are missing is left as it is
too, with a note on stderr, so a partial run updates the tables it measured.

linear: gemmkit (PDL on; PDL off when NOPDL.json is given; cold L2) against cuBLASLt timed in the
same run and the tinygemm2 figures of bench/peers/h200-tinygemm2.csv (matched by row name; PDL
against PDL, no-PDL against no-PDL). conv: gemmkit against the faster cuDNN peer of the same run,
count-weighted totals, fraction of the hardware floor.
"""
import csv
import json
import math
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINYGEMM2 = os.path.join(REPO, "bench", "peers", "h200-tinygemm2.csv")
CUDNN_PEERS = ("cudnn", "cudnn_graph")


def rows_of(path):
    """{(suite file name, row name): row} of one --json file, in suite order."""
    with open(path) as f:
        data = json.load(f)
    out = {}
    for suite in data["suites"]:
        for r in suite["rows"]:
            out[(os.path.basename(suite["suite"]), r["name"])] = r
    return out


def peer(r, name):
    for p in (r or {}).get("peers", []):
        if p["name"] == name and p.get("ran"):
            return p
    return None


def best_peer(r, names):
    found = [p for p in (peer(r, n) for n in names) if p and p.get("check", {}).get("passed", True)]
    return min(found, key=lambda p: p["median_us"]) if found else None


def ran(r):
    g = (r or {}).get("gemmkit", {})
    return bool(g.get("ran")) and g.get("check", {}).get("passed", True)


def gmean(values):
    values = [v for v in values if v and v > 0 and not math.isnan(v)]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(l for l in f if not l.startswith("#")))


def kernel_name(r, prefix):
    return r.get("gemmkit_kernel", "").replace(prefix, "")


def linear_table(on_path, off_path=None, tinygemm2_path=TINYGEMM2, variant_path=None):
    on = rows_of(on_path)
    off = rows_of(off_path) if off_path else {}
    variant = rows_of(variant_path) if variant_path else {}
    tiny = {}
    if tinygemm2_path and os.path.exists(tinygemm2_path):
        tiny = {p["name"]: p for p in read_csv(tinygemm2_path) if p.get("status", "ok") == "ok"}
    lines = []
    pdl = "PDL µs" if off else "µs"
    head = ["row", "n×m×k", "kernel", pdl] + (["no-PDL µs"] if off else []) + [
        "cold µs", "cuBLASLt µs", "vs cuBLASLt", "tinygemm2 PDL / no-PDL µs",
        "vs tinygemm2 (PDL, no-PDL)", "floor"] + (
        ["invariance off: kernel", "invariance off µs", "vs cuBLASLt"] if variant else [])
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    small_blas, small_tg_pdl, small_tg = [], [], []
    all_blas, variant_blas, over = [], [], 0
    for key, r in on.items():
        name = key[1]
        shape = f'{r["n"]}×{r["m"]}×{r["k"]}'
        if not ran(r):
            lines.append(f"| {name} | {shape} | not run: {r.get('gemmkit', {}).get('note', '')} |" + " |" * (len(head) - 3))
            continue
        g = r["gemmkit"]
        g_off = off.get(key, {}).get("gemmkit") if ran(off.get(key)) else None
        blas = peer(r, "cublaslt")
        blas_us = blas["median_us"] if blas else float("nan")
        ratio_blas = g["median_us"] / blas_us
        t = tiny.get(name)
        tg_cells = tg_ratio = ""
        if t:
            t_pdl, t_nopdl = float(t["pdl_us"]), float(t["nopdl_us"])
            tg_cells = f"{t_pdl:.2f} / {t_nopdl:.2f}"
            rp = g["median_us"] / t_pdl
            rn = g_off["median_us"] / t_nopdl if g_off else float("nan")
            tg_ratio = f"{rp:.2f}×, {rn:.2f}×" if g_off else f"{rp:.2f}×, –"
            if r["n"] <= 128:
                small_tg_pdl.append(rp)
                small_tg.append(rn)
        if r["n"] <= 128:
            small_blas.append(ratio_blas)
        all_blas.append(ratio_blas)
        over += ratio_blas > 1.1
        cells = [name, shape, kernel_name(r, "cuda.linear."), f'{g["median_us"]:.2f}']
        if off:
            cells.append(f'{g_off["median_us"]:.2f}' if g_off else "–")
        cells += [f'{g["cold_median_us"]:.2f}', f"{blas_us:.2f}", f"{ratio_blas:.2f}×", tg_cells,
                  tg_ratio, f'{100 * g["floor_fraction"]:.0f}%']
        if variant:
            d = variant.get(key)
            if ran(d):
                ratio_variant = d["gemmkit"]["median_us"] / blas_us
                variant_blas.append(ratio_variant)
                cells += [kernel_name(d, "cuda.linear."), f'{d["gemmkit"]["median_us"]:.2f}',
                          f"{ratio_variant:.2f}×"]
            else:
                cells += ["not run", "–", "–"]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    summary = f"Rows with n ≤ 128: geometric mean {gmean(small_blas):.2f}× cuBLASLt"
    if small_tg_pdl:
        summary += f"; against tinygemm2 {gmean(small_tg_pdl):.2f}× with PDL"
        if off:
            summary += f", {gmean(small_tg):.2f}× without"
    summary += (f"; all rows {gmean(all_blas):.2f}× cuBLASLt ({over} of {len(all_blas)} rows "
                f"above 1.1×)")
    if variant:
        summary += f"; batch invariance off {gmean(variant_blas):.2f}× cuBLASLt"
    lines.append(summary + ".")
    return lines


def conv_table(path):
    rows = rows_of(path)
    lines = ["| row | count | kernel | gemmkit µs | cuDNN µs | gemmkit / cuDNN | floor µs | floor / gemmkit |",
             "|---|---|---|---|---|---|---|---|"]
    total_g = total_c = total_f = 0.0
    for (_, name), r in rows.items():
        count = r.get("count", 1)
        if not ran(r):
            lines.append(f'| {name} | {count} | not run: {r.get("gemmkit", {}).get("note", "")} | | | | | |')
            continue
        g = r["gemmkit"]
        c = best_peer(r, CUDNN_PEERS)
        c_us = c["median_us"] if c else float("nan")
        if c:  # totals over the rows both ran
            total_g += count * g["median_us"]
            total_c += count * c_us
            total_f += count * r["floor_us"]
        lines.append(f'| {name} | {count} | {kernel_name(r, "cuda.conv.")} | {g["median_us"]:.1f} | {c_us:.1f} | '
                     f'{g["median_us"] / c_us:.2f}× | {r["floor_us"]:.1f} | {100 * g["floor_fraction"]:.0f}% |')
    ratio = total_g / total_c if total_c else float("nan")
    lines += ["", f"Count-weighted totals over the rows cuDNN ran: gemmkit {total_g:.0f} µs, cuDNN "
                  f"{total_c:.0f} µs ({ratio:.2f}×), floor {total_f:.0f} µs."]
    return lines


def conv_pair_table(dispatch_path, own_path):
    dispatch, own = rows_of(dispatch_path), rows_of(own_path)
    lines = ["| row | count | dispatcher kernel | dispatcher µs | vs cuDNN | own kernel | own µs | vs cuDNN | cuDNN µs | floor µs | floor / own |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    totals = dict.fromkeys(("d", "dc", "o", "oc", "f"), 0.0)
    over = []
    for key, r in dispatch.items():
        o = own.get(key)
        count = r.get("count", 1)
        if not ran(r) or not ran(o):
            lines.append(f"| {key[1]} | {count} | not run | | | | | | | | |")
            continue
        g, h = r["gemmkit"], o["gemmkit"]
        c, c_own = best_peer(r, CUDNN_PEERS), best_peer(o, CUDNN_PEERS)
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
        lines.append(f'| {key[1]} | {count} | {kernel_name(r, "cuda.conv.")} | {g["median_us"]:.1f} | {d_ratio:.2f}× | '
                     f'{kernel_name(o, "cuda.conv.")} | {h["median_us"]:.1f} | {o_ratio:.2f}× | {c_cell} | '
                     f'{r["floor_us"]:.1f} | {100 * h["floor_fraction"]:.0f}% |')

    def ratio(a, b):
        return totals[a] / totals[b] if totals[b] else float("nan")

    lines += ["", f"Count-weighted totals over the rows cuDNN ran: dispatcher {totals['d']:.0f} µs against cuDNN "
                  f"{totals['dc']:.0f} µs ({ratio('d', 'dc'):.2f}×); own paths {totals['o']:.0f} µs against "
                  f"{totals['oc']:.0f} µs ({ratio('o', 'oc'):.2f}×); floor {totals['f']:.0f} µs. "
                  f"Dispatcher rows more than 5% slower than cuDNN: {', '.join(over) if over else 'none'}."]
    return lines


def header_lines(folder, commit, gpu):
    gpu_file = os.path.join(folder, "gpu.txt")
    changed = False  # the run's tree differed from the commit gpu.txt names
    if os.path.exists(gpu_file) and not (commit and gpu):
        with open(gpu_file) as f:
            text = [l.strip() for l in f if l.strip()]
        changed = not commit and any(line.startswith("changed:") for line in text)
        for line in text:
            if re.fullmatch(r"[0-9a-f]{7,40}", line):
                commit = commit or line[:7]
            elif line.startswith("changed:"):
                continue
            elif not line.startswith("name,") and "," in line:
                name, driver = (line.split(",") + ["", ""])[:2]
                gpu = gpu or f"{name.strip()}, driver {driver.strip()}"
    if not commit or not gpu:
        return None
    local = " with local changes" if changed else ""
    return [f"Measured at commit `{commit}`{local} on one {gpu}."]


def block(spec, folder, commit, gpu):
    """The lines of one generated block, or None when its files are not in `folder`."""
    words = spec.split()
    path = lambda suffix: os.path.join(folder, f"bench-{words[1]}{suffix}.json")
    if words[0] == "header":
        return header_lines(folder, commit, gpu)
    if len(words) != 2:
        raise SystemExit(f"perf-table: bad block spec '{spec}'")
    if not os.path.exists(path("")):
        return None
    if words[0] == "linear":
        nopdl = path("-nopdl")
        variant = path("-invariance-off")
        return linear_table(path(""), nopdl if os.path.exists(nopdl) else None,
                            variant_path=variant if os.path.exists(variant) else None)
    if words[0] == "conv-pair":
        return conv_pair_table(path(""), path("-own")) if os.path.exists(path("-own")) else None
    if words[0] == "conv":
        return conv_table(path(""))
    raise SystemExit(f"perf-table: unknown block kind '{words[0]}' in '{spec}'")


def update(doc, folder, commit=None, gpu=None):
    with open(doc) as f:
        lines = f.read().split("\n")
    out, i, changed = [], 0, 0
    start = re.compile(r"<!-- perf-table: (.*?) -->")
    while i < len(lines):
        m = start.fullmatch(lines[i].strip())
        out.append(lines[i])
        i += 1
        if not m:
            continue
        end = i
        while end < len(lines) and lines[end].strip() != "<!-- /perf-table -->":
            end += 1
        if end == len(lines):
            raise SystemExit(f"{doc}: block '{m.group(1)}' has no <!-- /perf-table --> line")
        new = block(m.group(1), folder, commit, gpu)
        if new is None:
            print(f"perf-table: {m.group(1)}: no figures in {folder}, block left as it is", file=sys.stderr)
            out += lines[i:end]
        else:
            out += new
            changed += 1
        i = end
    with open(doc, "w") as f:
        f.write("\n".join(out))
    print(f"perf-table: {changed} blocks of {doc} regenerated from {folder}", file=sys.stderr)


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__)
        return 0 if len(argv) >= 2 else 2
    command, args = argv[1], argv[2:]

    def take(flag):
        if flag in args:
            i = args.index(flag)
            value = args[i + 1]
            del args[i:i + 2]
            return value
        return None

    if command == "update":
        commit, gpu = take("--commit"), take("--gpu")
        update(args[0], args[1], commit, gpu)
        return 0
    if command == "linear":
        tiny = take("--tinygemm2") or TINYGEMM2
        lines = linear_table(args[0], args[1] if len(args) > 1 else None, tiny)
    elif command == "conv-pair":
        lines = []
        for d, o in zip(args[0::2], args[1::2]):
            lines += [f"### {os.path.basename(next(iter(rows_of(d)))[0])}", ""] + conv_pair_table(d, o) + [""]
    elif command == "conv":
        lines = []
        for p in args:
            lines += [f"### {os.path.basename(next(iter(rows_of(p)))[0])}", ""] + conv_table(p) + [""]
    else:
        print(__doc__, file=sys.stderr)
        return 2
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
