#!/usr/bin/env bash
# Nsight Compute on a few linear configurations (device machine, after scripts/device.sh built):
# kernel duration, launch statistics, speed-of-light and warp stall reasons per configuration,
# three launches each; everything goes to $OUT/ncu-linear.txt, a digest to stdout.
set -uo pipefail
OUT=${OUT:-$PWD/out}
bin=build-device/gemmkit
log=$OUT/ncu-linear.txt
: >"$log"
for cfg in "ring4 1 720" "ring4 16 720" "ring4 16 2880" "ring8 16 14336" "ring16 16 14336" \
  "reference 16 2880" "cublaslt 16 2880"; do
  set -- $cfg
  echo "== kernel $1, max cluster $2, n=1 m=128 k=$3" | tee -a "$log"
  GEMMKIT_LINEAR_KERNEL=$1 GEMMKIT_LINEAR_MAX_CLUSTER=$2 timeout 90 ncu --clock-control none \
    --cache-control none -c 3 -k regex:'linear|gemm|Kernel' --section SpeedOfLight \
    --section LaunchStats --section WarpStateStats --section SchedulerStats \
    --metrics gpu__time_duration.sum,smsp__cycles_active.avg,sm__cycles_elapsed.max \
    "$bin" linear --n 1 --m 128 --k "$3" --bias --device cuda:0 --reps 2 >>"$log" 2>&1
  grep -E "gpu__time_duration|Cluster Size|Registers Per|Stall|Warp Cycles Per Issued" "$log" |
    tail -8
done
