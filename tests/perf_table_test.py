#!/usr/bin/env python3
"""CTest: scripts/perf-table.py regenerates the marked blocks of a page from `gemmkit bench
--json` files (a linear run with PDL on and off, a conv run with the dispatcher and own paths)
and leaves the text around them and the blocks without figures as they are."""
import json, os, subprocess, sys, tempfile

script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "perf-table.py")


def measurement(us, cold=None, floor_fraction=0.5, passed=True):
    return {"ran": True, "median_us": us, "cold_median_us": cold or us * 1.1,
            "floor_fraction": floor_fraction, "check": {"ran": True, "passed": passed}}


def peer(name, us):
    return dict(measurement(us), name=name)


def write(path, suite, rows):
    with open(path, "w") as f:
        json.dump({"command": "bench", "suites": [{"suite": "bench/suites/" + suite, "rows": rows}]}, f)


with tempfile.TemporaryDirectory() as d:
    # The default (batch-invariant) runs the large batch in the family, batch invariance off in
    # cuBLASLt.
    linear = lambda us, big_kernel="wgmma.n128.s6", big_us=10.2: [
        {"name": "seed-tiny", "n": 1, "m": 128, "k": 720, "count": 1, "floor_us": 0.04,
         "gemmkit_kernel": "cuda.linear.ring8.t1x1", "gemmkit": measurement(us, 1.5, 0.03),
         "peers": [peer("cublaslt", 3.2)]},
        {"name": "big", "n": 512, "m": 128, "k": 2880, "count": 1, "floor_us": 0.9,
         "gemmkit_kernel": "cuda.linear." + big_kernel, "gemmkit": measurement(big_us),
         "peers": [peer("cublaslt", 6.8)]}]
    write(f"{d}/bench-linear-decode.json", "linear-decode.csv", linear(1.6))
    write(f"{d}/bench-linear-decode-nopdl.json", "linear-decode.csv", linear(2.4))
    write(f"{d}/bench-linear-decode-invariance-off.json", "linear-decode.csv",
          linear(1.6, "cublaslt", 6.8))
    conv = lambda kernel, us: [
        {"name": "conv_out", "count": 2, "floor_us": 68.7, "gemmkit_kernel": "cuda.conv." + kernel,
         "gemmkit": measurement(us, floor_fraction=68.7 / us),
         "peers": [peer("cudnn", 320.0), peer("cudnn_graph", 313.0)]}]
    write(f"{d}/bench-conv-models.json", "conv-models.csv", conv("small_o", 127.0))
    write(f"{d}/bench-conv-models-own.json", "conv-models.csv", conv("small_o", 128.0))
    with open(f"{d}/gpu.txt", "w") as f:
        f.write("name, driver_version, clocks.sm [MHz], clocks.mem [MHz]\nNVIDIA H200, 580.159.04, 1980 MHz, 3201 MHz\n"
                "0123456789abcdef0123456789abcdef01234567\n")
    page = f"{d}/perf.md"
    with open(page, "w") as f:
        f.write("# Performance\n<!-- perf-table: header -->\nold header\n<!-- /perf-table -->\ntext kept\n"
                "<!-- perf-table: linear linear-decode -->\nold\n<!-- /perf-table -->\n"
                "<!-- perf-table: conv-pair conv-models -->\n<!-- /perf-table -->\n"

                "<!-- perf-table: conv-pair conv-flux2-vae-2048 -->\nkept table\n<!-- /perf-table -->\nend\n")
    subprocess.run([sys.executable, script, "update", page, d], check=True)
    text = open(page).read()
    print(text)
    expect = [
        "Measured at commit `0123456` on one NVIDIA H200, driver 580.159.04.",
        "text kept",
        # tinygemm2 of bench/peers/h200-tinygemm2.csv: seed-tiny 1.273 µs with PDL, 2.212 without (2.40 / 2.212 = 1.085).
        "| seed-tiny | 1×128×720 | ring8.t1x1 | 1.60 | 2.40 | 1.50 | 3.20 | 0.50× | 1.27 / 2.21 | 1.26×, 1.08× | 3% | ring8.t1x1 | 1.60 | 0.50× |",
        "| big | 512×128×2880 | wgmma.n128.s6 | 10.20 | 10.20 |",
        "| 1.50× |",
        "| cublaslt | 6.80 | 1.00× |",
        "Rows with n ≤ 128: geometric mean 0.50× cuBLASLt; against tinygemm2 1.26× with PDL, 1.08× without; all rows 0.87× cuBLASLt (1 of 2 rows above 1.1×); batch invariance off 0.71× cuBLASLt.",
        "| conv_out | 2 | small_o | 127.0 | 0.41× | small_o | 128.0 | 0.41× | 313.0 | 68.7 | 54% |",
        "dispatcher 254 µs against cuDNN 626 µs (0.41×)",
        "kept table",
        "end",
    ]
    missing = [e for e in expect if e not in text]
    for gone in ("old header", "\nold\n"):
        if gone in text:
            missing.append("not replaced: " + gone.strip())
    # A run whose tree differed from its commit says so; --commit names the commit outright.
    with open(f"{d}/gpu.txt", "a") as f:
        f.write("changed:  M src/api/conv.cpp\n")
    subprocess.run([sys.executable, script, "update", page, d], check=True)
    if "Measured at commit `0123456` with local changes on one NVIDIA H200" not in open(page).read():
        missing.append("the header of a run with local changes")
    subprocess.run([sys.executable, script, "update", page, d, "--commit", "89abcde"], check=True)
    if "Measured at commit `89abcde` on one NVIDIA H200" not in open(page).read():
        missing.append("the header with --commit")
    if missing:
        print("perf-table test: missing from the page:\n  " + "\n  ".join(missing))
        sys.exit(1)
    print("perf-table test: ok")
