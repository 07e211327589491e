#!/usr/bin/env bash
# Crossover sweep for the linear dispatch (device machine, after scripts/device.sh built): the
# decode suite under each forced kernel, cluster bound and PDL setting; one table (a column per
# setting, µs per row) on stdout and in DIR/sweep.txt (--out DIR, default ./out). Graphs of 200 calls, as the benchmark
# times the suite (graphs of 20 put seed-mid 0.3 us faster than the benchmark then measured).
# Settings (space-separated lists): GEMMKIT_SWEEP_KERNELS (default "auto ring4 ring8 ring16"),
# GEMMKIT_SWEEP_CLUSTERS ("16 1"), GEMMKIT_SWEEP_PDL ("1 0"), GEMMKIT_SWEEP_PRODUCERS (ring
# producer warps, "4": the library's default).
# Usage: bash scripts/linear-sweep.sh [--out DIR]
set -uo pipefail
source "$(dirname "$0")/lib.sh"
take_out_option "$@"
bin=build-device/gemmkit
runs=$(mktemp -d)
for pdl in ${GEMMKIT_SWEEP_PDL:-1 0}; do
  for cluster in ${GEMMKIT_SWEEP_CLUSTERS:-16 1}; do
    for producers in ${GEMMKIT_SWEEP_PRODUCERS:-4}; do
      for kernel in ${GEMMKIT_SWEEP_KERNELS:-auto ring4 ring8 ring16}; do
        tag="pdl$pdl-c$cluster-$kernel"
        [ "$producers" = 4 ] || tag="pdl$pdl-c$cluster-p$producers-$kernel"
        GEMMKIT_LINEAR_PDL=$pdl GEMMKIT_LINEAR_MAX_CLUSTER=$cluster GEMMKIT_LINEAR_KERNEL=$kernel \
          GEMMKIT_LINEAR_PRODUCERS=$producers timeout 60 "$bin" bench \
          --suite bench/suites/linear-decode.csv --device cuda:0 --reps 200 \
          --json "$runs/sweep-$tag.json" >/dev/null 2>&1
      done
    done
  done
done
python3 scripts/summarize-sweep.py "$runs" | tee "$out_dir/sweep.txt"
rm -rf "$runs"
