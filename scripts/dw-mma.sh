#!/usr/bin/env bash
# One device call (carry [".deps"]) for the tensor-core depthwise variant (conv_depthwise_mma.cuh):
# builds, runs the depthwise GPU tests and the parameter matrix, the three sanitizers on
# GpuConvSanitize.DepthwiseMma, then times the conv-models depthwise rows (and a batch-1 112²
# ConvNeXt layer) under auto, the tensor-core variant forced (=mma) and the staged one (=staged),
# cuDNN as the peer once per row, two passes. Targets (2x cuDNN): dw7x7-96 <= 11.7 us,
# dw7x7-384 <= 5.8, dw3x3-144 <= 4.1. Output: $OUT/summary.txt, $OUT/logs.tgz, $OUT/dw.txt.
# Settings: GEMMKIT_GPU_FILTER, GEMMKIT_DW_PASSES ("1 2"), GEMMKIT_DW_BENCH=1 (conv-models too).
set -u
GEMMKIT_GPU_FILTER=${GEMMKIT_GPU_FILTER:-'GpuConv.Depthwise*:GpuConv.ParameterMatrix*:GpuConvSanitize.Depthwise*'} \
  GEMMKIT_GPU_TIMEOUT=240 GEMMKIT_SANITIZE_FILTER='GpuConvSanitize.DepthwiseMma' \
  GEMMKIT_SANITIZE_TIMEOUT=100 bash scripts/device.sh test >"$OUT/device.txt" 2>&1
grep -A24 "==== summary" "$OUT/device.txt"
cr=$(python3 -c "import nvidia.cudnn as m; print(m.__path__[0])" 2>/dev/null || true)
export LD_LIBRARY_PATH=${cr:+$cr/lib:}${LD_LIBRARY_PATH:-}
rows=("dw7x7-96|--n 8 --in 56x56 --c 96 --o 96 --kernel 7x7 --pad 3 --groups 96"
  "dw7x7-384|--n 8 --in 14x14 --c 384 --o 384 --kernel 7x7 --pad 3 --groups 384"
  "dw3x3-144|--n 8 --in 56x56 --c 144 --o 144 --kernel 3x3 --pad 1 --groups 144"
  "dw7x7-96-b1-112|--n 1 --in 112x112 --c 96 --o 96 --kernel 7x7 --pad 3 --groups 96"
  "dw7x7-768-7|--n 8 --in 7x7 --c 768 --o 768 --kernel 7x7 --pad 3 --groups 768")
for pass in ${GEMMKIT_DW_PASSES:-1 2}; do
  for row in "${rows[@]}"; do
    name=${row%%|*}
    read -r -a args <<<"${row#*|}"
    for variant in auto mma staged; do
      peers=--no-peers
      [ "$pass$variant" = 1auto ] && peers=
      r=$(GEMMKIT_LOG=1 GEMMKIT_CONV_DEPTHWISE=$variant timeout 60 \
        build-device/gemmkit conv "${args[@]}" --algo depthwise --device cuda:0 --check $peers 2>&1 |
        grep -E "^(time|peer|check|error)|variant=" |
        sed -E 's/.*(variant=[a-z]+).*(tensor-core variant: [^;]*|staged variant: [^;]*|blocked variant: [^;]*).*/\1 \2/; s/; CUDA graph.*//' |
        sort -u | cut -c1-110 | tr '\n' '|')
      echo "$pass $name $variant $r"
    done
  done
done | tee "$OUT/dw.txt"
if [ "${GEMMKIT_DW_BENCH:-0}" = 1 ]; then
  mkdir -p "$OUT/bench"
  OUT=$OUT/bench GEMMKIT_BENCH_SUITES=conv-models bash scripts/device.sh bench >"$OUT/bench.txt" 2>&1
  grep -A6 "==== summary" "$OUT/bench.txt"
fi
