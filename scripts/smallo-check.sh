#!/usr/bin/env bash
# The small-o taps kernel on a GPU machine, run from the repository root after
# `cmake --build build-device` (scripts/device.sh builds it):
#   1. the GPU convolution tests (GpuConv*, the same-bits instantiations */GpuConv*SameBits.*), then the kernel-variant test again with
#      GEMMKIT_CONV_SMALL_O=mma and =cuda (the same cases on the tensor-core region kernel and the
#      CUDA-core kernel);
#   2. FLUX.2 VAE conv_out (1 x S x S x 128 -> 3 channels, 3x3, pad 1, bf16, S = 256, 1024,
#      2048) through the CLI (--check against the reference, CUDA-graph timing, cuDNN as the
#      peer) under auto (the taps kernel's TMA form at 1024 and 2048, its register form at 256)
#      and with each form forced (GEMMKIT_CONV_SMALL_O=taps, =tma) and the region kernel (=mma).
# Targets (H200, graph replays): 2x faster than cuDNN, i.e. <= 14 / 157 / 595 us.
# Usage: bash scripts/smallo-check.sh [--out DIR] [build dir (default build-device)]; logs under
# DIR (default ./out).
set -uo pipefail
source "$(dirname "$0")/lib.sh"
take_out_option "$@"
set -- "${rest[@]+"${rest[@]}"}"
bin=${1:-build-device}
use_python_cudnn
failed=0

run_tests() {  # name, then the environment assignments for the run
  local name=$1 filter=$2
  shift 2
  local log=$out_dir/smallo-tests-$name.log
  env "$@" timeout "${GEMMKIT_GPU_TIMEOUT:-900}" "$bin/tests/gemmkit_gpu_tests" \
    --gtest_filter="$filter" >"$log" 2>&1
  local status=$?
  [ $status -eq 0 ] || failed=1
  echo "== gpu tests ($name, $filter): status $status"
  grep -E "^\[  (PASSED|FAILED|SKIPPED) |Failure|differs" "$log" | head -20
}
run_tests default 'GpuConv*:*/GpuConv*SameBits.*'
run_tests small-o-mma 'GpuConv.DepthwiseAndSmallOKernelVariants:*/GpuConvSmallOSameBits.*:*/GpuConvDepthwiseSameBits.*' GEMMKIT_CONV_SMALL_O=mma
run_tests small-o-cuda 'GpuConv.DepthwiseAndSmallOKernelVariants:*/GpuConvSmallOSameBits.*:*/GpuConvDepthwiseSameBits.*' GEMMKIT_CONV_SMALL_O=cuda

for size in 256 1024 2048; do
  for variant in auto taps tma mma; do
    log=$out_dir/smallo-conv-out-$size-$variant.log
    GEMMKIT_CONV_SMALL_O=$variant timeout "${GEMMKIT_BENCH_TIMEOUT:-300}" "$bin/gemmkit" conv \
      --n 1 --in "${size}x${size}" --c 128 --o 3 --kernel 3x3 --pad 1 --algo direct \
      --device cuda:0 --check $([ $variant = auto ] || echo --no-peers) >"$log" 2>&1
    status=$?
    [ $status -eq 0 ] || failed=1
    echo "== conv_out ${size}x${size} c128 -> 3, small-o $variant: status $status"
    grep -E "^(kernel|time|peer|check|floor) " "$log" | cut -c1-400
  done
done
exit $failed
