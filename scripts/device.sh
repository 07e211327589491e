#!/usr/bin/env bash
# One call on the lent GPU machine: build with nvcc, run the host and GPU tests, the sanitizers
# on the small GPU tests, and the benchmarks; logs and JSON under $OUT.
#
# Needs, carried from the developer machine (scripts/prepare-device.sh makes them):
#   .deps/googletest       GoogleTest sources (the device has no package manager)
#   .deps/include/dlpack   dlpack.h
#   .deps/suites           a copy of ../shared/suites (shared/ does not travel)
# Usage (device tool): bash scripts/device.sh [all|test|bench]   carry: [".deps"]
# Settings: GEMMKIT_GPU_FILTER (gtest filter of the GPU tests), GEMMKIT_SANITIZE=0 (skip
# compute-sanitizer), GEMMKIT_SANITIZE_FILTER (gtest filter run under each sanitizer tool; default
# the tests sized for the sanitizers, *Sanitize*: the conv kernel-variant tests ran past 200 s
# under memcheck), GEMMKIT_RACECHECK_FILTER (the same for racecheck alone, the slowest tool),
# GEMMKIT_BENCH_SUITES (suite names),
# GEMMKIT_BUILD_TARGET (one target), GEMMKIT_GPU_TIMEOUT / GEMMKIT_BENCH_TIMEOUT /
# GEMMKIT_SANITIZE_TIMEOUT (seconds),
# GEMMKIT_BENCH_OWN=0 (conv suites: skip the second, own-paths-only run).
set -uo pipefail
what=${1:-all}
final_out=${OUT:-$PWD/out}
# Logs go to a folder that is packed into one archive at the end (the device tool returns at
# most 8 files); summary.txt repeats the verdict lines, printed last.
OUT=$final_out/logs
mkdir -p "$OUT"
summary=$final_out/summary.txt
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
finish() {
  tar -C "$final_out" -czf "$final_out/logs.tgz" logs && rm -rf "$OUT"
  echo "==== summary"
  cat "$summary"
}
trap finish EXIT
root=$PWD
cudnn_root=$(python3 -c "import nvidia.cudnn as m; print(m.__path__[0])" 2>/dev/null || true)
export LD_LIBRARY_PATH=${cudnn_root:+$cudnn_root/lib:}${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
git rev-parse HEAD 2>/dev/null | tee -a "$OUT/gpu.txt"

start=$SECONDS
cmake -S . -B build-device -G Ninja -DCMAKE_BUILD_TYPE=Release -DGEMMKIT_CUDA=ON \
  -DGEMMKIT_GTEST_SOURCE_DIR="$root/.deps/googletest" \
  -DGEMMKIT_DLPACK_INCLUDE_DIR="$root/.deps/include" \
  ${cudnn_root:+-DGEMMKIT_CUDNN_ROOT=$cudnn_root} >"$OUT/build.log" 2>&1 &&
  cmake --build build-device -j16 ${GEMMKIT_BUILD_TARGET:+--target $GEMMKIT_BUILD_TARGET} >>"$OUT/build.log" 2>&1
status=$?
note "build: status $status in $((SECONDS - start)) s"
if [ $status -ne 0 ]; then tail -40 "$OUT/build.log"; exit 1; fi
grep -E "warning|spill" "$OUT/build.log" | grep -v "0 bytes spill" | head -20

bin=build-device
if [ "$what" = all ] || [ "$what" = test ]; then
  start=$SECONDS
  "$bin/tests/gemmkit_tests" --gtest_brief=1 >"$OUT/host-tests.log" 2>&1
  note "host tests: status $? in $((SECONDS - start)) s: $(tail -3 "$OUT/host-tests.log" | tr '\n' ' ')"
  start=$SECONDS
  timeout ${GEMMKIT_GPU_TIMEOUT:-300} "$bin/tests/gemmkit_gpu_tests" --gtest_filter="${GEMMKIT_GPU_FILTER:-*}" >"$OUT/gpu-tests.log" 2>&1
  note "gpu tests: status $? in $((SECONDS - start)) s"
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|differs|error" "$OUT/gpu-tests.log" | head -40 | tee -a "$summary"
  grep -E "calls$" "$OUT/gpu-tests.log" | head
  if [ "${GEMMKIT_SANITIZE:-1}" = 1 ]; then
    sanitize_filter=${GEMMKIT_SANITIZE_FILTER:-'*Sanitize*'}
    for tool in memcheck racecheck synccheck; do
      start=$SECONDS
      filter=$sanitize_filter
      [ $tool = racecheck ] && filter=${GEMMKIT_RACECHECK_FILTER:-$sanitize_filter}
      # racecheck reports hazards inside cuDNN's own sm90 dgrad kernel (not ours to mend), and with
      # a kernel-name filter it fails internally on cuDNN's kernels: the cuDNN-path tests stay out
      # of racecheck; gemmkit's kernels of that path have their own test (GpuConvSanitize.*).
      if [ $tool = racecheck ]; then
        if [[ $filter == *-* ]]; then filter="$filter:GpuConvCudnn*"; else filter="$filter:-GpuConvCudnn*"; fi
      fi
      # Racecheck also runs with cuDNN out of auto (GEMMKIT_CONV_CUDNN=0): auto may time cuDNN's
      # engines as candidates, and racecheck crawls through them (a small depthwise test ran past
      # 240 s with them in the race).
      cudnn_in_auto=1
      [ $tool = racecheck ] && cudnn_in_auto=0
      # Racecheck does not follow the st.async hand-off of the linear async fold (it never finished
      # on it): it checks the barrier fold, the same kernels with the hand-off through a cluster
      # barrier phase; memcheck and synccheck check both.
      fold=async
      [ $tool = racecheck ] && fold=barrier
      GEMMKIT_LINEAR_FOLD=$fold GEMMKIT_CONV_CUDNN=$cudnn_in_auto timeout ${GEMMKIT_SANITIZE_TIMEOUT:-240} compute-sanitizer --tool $tool --error-exitcode 9 \
        "$bin/tests/gemmkit_gpu_tests" --gtest_filter="$filter" >"$OUT/sanitize-$tool.log" 2>&1
      note "compute-sanitizer $tool: status $? in $((SECONDS - start)) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/sanitize-$tool.log" | tail -1)"
    done
  fi
fi
if [ "$what" = all ] || [ "$what" = bench ]; then
  for suite in ${GEMMKIT_BENCH_SUITES:-linear-decode conv-models conv-flux2-vae-1024}; do
    start=$SECONDS
    # Linear rows: graphs of 200 calls, as the peer figures of ../shared/peers/h200-linear.csv.
    reps=()
    [[ $suite == linear-* ]] && reps=(--reps 200)
    timeout ${GEMMKIT_BENCH_TIMEOUT:-240} "$bin/gemmkit" bench --suite ".deps/suites/$suite.csv" --device cuda:0 \
      "${reps[@]}" --json "$OUT/bench-$suite.json" >"$OUT/bench-$suite.txt" 2>"$OUT/bench-$suite.err"
    note "bench $suite: status $? in $((SECONDS - start)) s: $(grep -E '^total' "$OUT/bench-$suite.txt" | tr -s ' ' | cut -c1-200)"
    cat "$OUT/bench-$suite.txt"
    if [[ $suite == conv-* ]] && [ "${GEMMKIT_BENCH_OWN:-1}" = 1 ]; then
      # The same suite with cuDNN out of the dispatcher: gemmkit's own paths only.
      start=$SECONDS
      GEMMKIT_CONV_CUDNN=0 timeout ${GEMMKIT_BENCH_TIMEOUT:-240} "$bin/gemmkit" bench \
        --suite ".deps/suites/$suite.csv" --device cuda:0 --json "$OUT/bench-$suite-own.json" \
        >"$OUT/bench-$suite-own.txt" 2>"$OUT/bench-$suite-own.err"
      note "bench $suite, own paths: status $? in $((SECONDS - start)) s: $(grep -E '^total' "$OUT/bench-$suite-own.txt" | tr -s ' ' | cut -c1-200)"
    fi
  done
  if [[ " ${GEMMKIT_BENCH_SUITES:-linear-decode} " == *" linear-decode "* ]]; then
    # The same suite with programmatic dependent launch off (the default run has it on).
    GEMMKIT_LINEAR_PDL=0 timeout 120 "$bin/gemmkit" bench --suite .deps/suites/linear-decode.csv \
      --device cuda:0 --reps 200 --json "$OUT/bench-linear-decode-nopdl.json" >"$OUT/bench-linear-decode-nopdl.txt" 2>&1
    note "bench linear-decode, PDL off: status $?: $(grep -E '^total' "$OUT/bench-linear-decode-nopdl.txt" | tr -s ' ' | cut -c1-200)"
  fi
fi
