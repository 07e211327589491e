#!/usr/bin/env bash
# Nsight Compute on the own depthwise, small-o and small-c kernels (device machine, after
# scripts/device.sh built): duration, occupancy, warp stalls and the top stall locations of one
# launch per row; the full report in DIR/ncu-conv.txt (default ./out), a digest on stdout.
# Usage: bash scripts/conv-profile.sh [--out DIR] [row ...]   (rows: the names below; default all)
set -uo pipefail
source "$(dirname "$0")/lib.sh"
take_out_option "$@"
set -- "${rest[@]+"${rest[@]}"}"
bin=build-device/gemmkit
log=$out_dir/ncu-conv.txt
: >"$log"
profile() {
  local name=$1 kernel=$2
  shift 2
  echo "== $name" | tee -a "$log"
  timeout 120 ncu --clock-control none -s 1 -c 1 -k regex:"$kernel" --section SpeedOfLight \
    --section LaunchStats --section Occupancy --section WarpStateStats --section SourceCounters --section MemoryWorkloadAnalysis \
    --metrics gpu__time_duration.sum,regex:smsp__average_warps_issue_stalled_.*_per_issue_active.ratio \
    env GEMMKIT_LOG=1 "$bin" conv "$@" --device cuda:0 --reps 2 --replays 1 \
    --no-cold --no-peers >>"$log" 2>&1
  awk -v n="== $name" '$0 == n {f = 1} f' "$log" | grep -E "gpu__time_duration|Registers Per|Achieved Occupancy|Theoretical Occupancy|Block Size|Grid Size|Warp Cycles Per Issued|Stall|Memory Throughput|DRAM Throughput|L2 Hit" | head -16
  # The largest stall reasons (cycles per issued instruction) and the configuration line.
  awk -v n="== $name" '$0 == n {f = 1} f' "$log" | grep -E "issue_stalled" | awk '{print $NF, $1}' |
    sort -gr | head -6
  awk -v n="== $name" '$0 == n {f = 1} f' "$log" | grep -m2 -iE "gemmkit.*(depthwise|small_o|small_c|tile)"
}
rows=("$@")
[ ${#rows[@]} -eq 0 ] && rows=(convnext-dw7x7-96 convnext-dw7x7-384 mobilenet-dw3x3-144 mobilenet-dw3x3s2-144 vae-conv-out)
for row in "${rows[@]}"; do
  case $row in
  convnext-dw7x7-96) profile $row depthwise --n 8 --in 56x56 --c 96 --o 96 --kernel 7x7 --pad 3 --groups 96 --algo depthwise ;;
  convnext-dw7x7-384) profile $row depthwise --n 8 --in 14x14 --c 384 --o 384 --kernel 7x7 --pad 3 --groups 384 --algo depthwise ;;
  mobilenet-dw3x3-144) profile $row depthwise --n 8 --in 56x56 --c 144 --o 144 --kernel 3x3 --pad 1 --groups 144 --algo depthwise ;;
  mobilenet-dw3x3s2-144) profile $row depthwise --n 8 --in 56x56 --c 144 --o 144 --kernel 3x3 --stride 2 --pad 1 --groups 144 --algo depthwise ;;
  vae-conv-out) profile $row small_o --n 1 --in 1024x1024 --c 128 --o 3 --kernel 3x3 --pad 1 --algo direct ;;
  resnet50-stem) profile $row small_c --n 8 --in 224x224 --c 3 --o 64 --kernel 7x7 --stride 2 --pad 3 --algo implicit ;;
  resnext50-g32) profile $row small_c --n 8 --in 56x56 --c 256 --o 256 --kernel 3x3 --pad 1 --groups 32 --algo auto ;;
  vae-conv-in) profile $row small_c --n 1 --in 1024x1024 --c 3 --o 128 --kernel 3x3 --pad 1 --bias --algo implicit ;;
  *) echo "unknown row $row" ;;
  esac
done
