#!/usr/bin/env bash
# Depthwise check on the GPU machine, from the repo root, after a build into build-device/
# (scripts/device.sh, or cmake --build build-device --target gemmkit_gpu_tests gemmkit_cli):
# the depthwise GPU tests (bits equal to the generic direct kernel, CPU reference), then each
# conv-models depthwise row forced onto the own depthwise kernel with --check, timed against
# cuDNN in the same run (CUDA-graph replay, warm and cold L2). GEMMKIT_LOG=1 prints the chosen
# configuration (variant, thread tile, block, grid) of every call to stderr.
# Usage: bash scripts/dw-check.sh [gtest filter]
set -uo pipefail
bin=${GEMMKIT_BIN:-build-device}
source "$(dirname "$0")/lib.sh"
use_python_cudnn
status=0

echo "== depthwise GPU tests"
"$bin/tests/gemmkit_gpu_tests" \
  --gtest_filter="${1:-GpuConv.DepthwiseAndSmallOKernelVariants:GpuConv.ParameterMatrix*}" || status=1

row() {
  local name=$1
  shift
  echo "== $name"
  local log
  log=$(mktemp)
  GEMMKIT_LOG=1 "$bin/gemmkit" conv "$@" --algo depthwise --device cuda:0 --check 2>"$log" ||
    status=1
  sort -u "$log" | head -5  # the configuration (one line per distinct call)
  rm -f "$log"
}
row convnext-dw7x7-96 --n 8 --in 56x56 --c 96 --o 96 --groups 96 --kernel 7x7 --pad 3
row convnext-dw7x7-384 --n 8 --in 14x14 --c 384 --o 384 --groups 384 --kernel 7x7 --pad 3
row mobilenet-dw3x3-144 --n 8 --in 56x56 --c 144 --o 144 --groups 144 --kernel 3x3 --pad 1
row mobilenet-dw3x3s2-144 --n 8 --in 56x56 --c 144 --o 144 --groups 144 --kernel 3x3 --stride 2 --pad 1
row mamba-causal-dw-conv1d --n 8 --in 2048 --c 8192 --o 8192 --groups 8192 --kernel 4 --pad-lo 3 --pad-hi 0
exit $status
