#!/usr/bin/env bash
# Nsight Compute on the own depthwise and small-o kernels (device machine, after
# scripts/device.sh built): duration, occupancy, warp stalls and the top stall locations of one
# launch per row; the full report in $OUT/ncu-conv.txt, a digest on stdout.
set -uo pipefail
OUT=${OUT:-$PWD/out}
bin=build-device/gemmkit
log=$OUT/ncu-conv.txt
: >"$log"
profile() {
  local name=$1 kernel=$2
  shift 2
  echo "== $name" | tee -a "$log"
  timeout 120 ncu --clock-control none -s 1 -c 1 -k regex:"$kernel" --section SpeedOfLight \
    --section LaunchStats --section Occupancy --section WarpStateStats --section SourceCounters --section MemoryWorkloadAnalysis \
    --metrics gpu__time_duration.sum "$bin" conv "$@" --device cuda:0 --reps 2 --replays 1 \
    --no-cold --no-peers >>"$log" 2>&1
  awk -v n="== $name" '$0 == n {f = 1} f' "$log" | grep -E "gpu__time_duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Size|Grid Size|Warp Cycles Per Issued|Stall|Memory Throughput|DRAM Throughput|L2 Hit" | head -16
}
profile convnext-dw7x7-96 depthwise --n 8 --in 56x56 --c 96 --o 96 --kernel 7x7 --pad 3 --groups 96 --algo depthwise
profile mobilenet-dw3x3-144 depthwise --n 8 --in 56x56 --c 144 --o 144 --kernel 3x3 --pad 1 --groups 144 --algo depthwise
profile vae-conv-out small_o --n 1 --in 1024x1024 --c 128 --o 3 --kernel 3x3 --pad 1 --algo direct
