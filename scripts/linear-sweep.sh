#!/usr/bin/env bash
# Crossover sweep for the linear dispatch (device machine): the decode suite under each forced
# ring depth and cluster bound, PDL on and off. Run after scripts/device.sh has built.
set -uo pipefail
OUT=${OUT:-$PWD/out}
bin=build-device/gemmkit
for pdl in 1 0; do
  for cluster in 8 1; do
    for kernel in auto ring4 ring8 ring16; do
      tag="pdl$pdl-c$cluster-$kernel"
      GEMMKIT_LINEAR_PDL=$pdl GEMMKIT_LINEAR_MAX_CLUSTER=$cluster GEMMKIT_LINEAR_KERNEL=$kernel \
        timeout 60 "$bin" bench --suite .deps/suites/linear-decode.csv --device cuda:0 \
        --json "$OUT/sweep-$tag.json" >"$OUT/sweep-$tag.txt" 2>/dev/null
    done
  done
done
python3 scripts/summarize-sweep.py "$OUT"
