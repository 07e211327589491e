#!/usr/bin/env bash
# Nsight Compute on a few linear configurations (device machine, after scripts/device.sh built):
# kernel duration, launch statistics and speed-of-light per configuration, three launches each.
set -uo pipefail
OUT=${OUT:-$PWD/out}
bin=build-device/gemmkit
for cfg in "ring4 16 720" "ring4 16 2880" "ring16 16 14336" "reference 16 2880" "cublaslt 16 2880"; do
  set -- $cfg
  echo "== kernel $1, max cluster $2, n=1 m=128 k=$3"
  GEMMKIT_LINEAR_KERNEL=$1 GEMMKIT_LINEAR_MAX_CLUSTER=$2 timeout 90 ncu --clock-control none \
    --cache-control none -c 3 -k regex:'linear|gemm|Kernel' --section SpeedOfLight \
    --section LaunchStats --metrics gpu__time_duration.sum \
    "$bin" linear --n 1 --m 128 --k "$3" --bias --device cuda:0 --reps 2 >"$OUT/ncu-$1-$3.txt" 2>&1
  grep -E "gpu__time_duration|Duration|Cluster Size|Dynamic Shared|Registers|Memory Throughput" \
    "$OUT/ncu-$1-$3.txt" | head -12
done
