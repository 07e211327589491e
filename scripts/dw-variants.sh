#!/usr/bin/env bash
# The 2-D depthwise variants in one command on a GPU machine (with .deps/ from
# scripts/prepare-device.sh): builds, runs the depthwise GPU
# tests and the parameter matrix, the three sanitizers on the staged and tensor-core kernels'
# sanitizer tests, then times the conv-models depthwise rows (and ConvNeXt layers at batch 1 112²
# and 8 × 7² × 768) under each GEMMKIT_CONV_DEPTHWISE setting, cuDNN as the peer once per row.
# Targets (2x cuDNN): dw7x7-96 <= 11.7 us, dw7x7-384 <= 5.8, dw3x3-144 <= 4.1.
# Usage: bash scripts/dw-variants.sh [--out DIR]
# Output: DIR/summary.txt, DIR/logs.tgz, DIR/dw.txt (DIR default ./out).
# Settings: GEMMKIT_GPU_FILTER (default: the depthwise tests and the parameter matrix),
# GEMMKIT_SANITIZE_FILTER (default: the staged and tensor-core sanitizer tests),
# GEMMKIT_DW_SETTINGS (default "auto mma staged blocked"), GEMMKIT_DW_PASSES (default "1 2"),
# GEMMKIT_DW_PROFILE=1 (Nsight Compute digest of the staged kernel on two rows),
# GEMMKIT_DW_BENCH=1 (the conv-models suite too, under DIR/bench).
set -u
source "$(dirname "$0")/lib.sh"
take_out_option "$@"
GEMMKIT_GPU_FILTER=${GEMMKIT_GPU_FILTER:-'GpuConv.Depthwise*:GpuConv.ParameterMatrix*:GpuConvSanitize.Depthwise*:*/GpuConvDepthwiseSameBits.*'} \
  GEMMKIT_GPU_TIMEOUT=240 \
  GEMMKIT_SANITIZE_FILTER=${GEMMKIT_SANITIZE_FILTER:-'GpuConvSanitize.DepthwiseStaged:GpuConvSanitize.DepthwiseMma'} \
  GEMMKIT_SANITIZE_TIMEOUT=120 bash scripts/device.sh --out "$out_dir" test >"$out_dir/device.txt" 2>&1
grep -A24 "==== summary" "$out_dir/device.txt"
use_python_cudnn
rows=("dw7x7-96|--n 8 --in 56x56 --c 96 --o 96 --kernel 7x7 --pad 3 --groups 96"
  "dw7x7-384|--n 8 --in 14x14 --c 384 --o 384 --kernel 7x7 --pad 3 --groups 384"
  "dw3x3-144|--n 8 --in 56x56 --c 144 --o 144 --kernel 3x3 --pad 1 --groups 144"
  "dw7x7-96-b1-112|--n 1 --in 112x112 --c 96 --o 96 --kernel 7x7 --pad 3 --groups 96"
  "dw7x7-768-7|--n 8 --in 7x7 --c 768 --o 768 --kernel 7x7 --pad 3 --groups 768")
for pass in ${GEMMKIT_DW_PASSES:-1 2}; do
  for row in "${rows[@]}"; do
    name=${row%%|*}
    read -r -a args <<<"${row#*|}"
    for setting in ${GEMMKIT_DW_SETTINGS:-auto mma staged blocked}; do
      peers=--no-peers
      [ "$pass$setting" = 1auto ] && peers=
      r=$(GEMMKIT_LOG=1 GEMMKIT_CONV_DEPTHWISE=$setting timeout 60 \
        build-device/gemmkit conv "${args[@]}" --algo depthwise --device cuda:0 --check $peers 2>&1 |
        grep -E "^(time|peer|check|error)|variant=" |
        sed -E 's/.*(variant=[a-z]+).*(tensor-core variant: [^;]*|staged variant: [^;]*|blocked variant: [^;]*).*/\1 \2/; s/; CUDA graph.*//' |
        sort -u | cut -c1-110 | tr '\n' '|')
      echo "$pass $name $setting $r"
    done
  done
done | tee "$out_dir/dw.txt"
# Nsight Compute on the staged kernel of two rows: duration, issue efficiency, the largest stall
# reasons, and instructions per FMA (warp instructions / warp-level FFMA).
if [ "${GEMMKIT_DW_PROFILE:-0}" = 1 ]; then
  GEMMKIT_CONV_DEPTHWISE=staged bash scripts/conv-profile.sh --out "$out_dir" convnext-dw7x7-96 mobilenet-dw3x3-144 2>&1 |
    grep -E "^==|duration|Cycles Per Issued|Achieved Occupancy|Registers|stalled" | tee "$out_dir/ncu-digest.txt"
  for row in "--n 8 --in 56x56 --c 96 --o 96 --kernel 7x7 --pad 3 --groups 96" \
    "--n 8 --in 56x56 --c 144 --o 144 --kernel 3x3 --pad 1 --groups 144"; do
    # shellcheck disable=SC2086
    GEMMKIT_CONV_DEPTHWISE=staged timeout 100 ncu --clock-control none -s 1 -c 1 -k regex:depthwise_staged \
      --metrics smsp__inst_executed.sum,smsp__sass_thread_inst_executed_op_ffma_pred_on.sum \
      build-device/gemmkit conv $row --algo depthwise --device cuda:0 --reps 2 --replays 1 --no-cold \
      --no-peers 2>&1 | grep -E "^\s+smsp" | tee -a "$out_dir/ncu-digest.txt"
  done
fi
if [ "${GEMMKIT_DW_BENCH:-0}" = 1 ]; then
  GEMMKIT_BENCH_SUITES=conv-models bash scripts/device.sh --out "$out_dir/bench" bench >"$out_dir/bench.txt" 2>&1
  grep -A6 "==== summary" "$out_dir/bench.txt"
fi
