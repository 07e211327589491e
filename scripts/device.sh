#!/usr/bin/env bash
# Build, tests, sanitizers and benchmarks on a GPU machine in one command: builds with nvcc into
# build-device/, runs the host tests, the GPU tests, compute-sanitizer on the tests sized for it
# and the benchmark suites of bench/suites; logs and JSON go under --out DIR (default ./out).
#
# Usage: bash scripts/device.sh [--out DIR] [all|test|bench|STAGE...]
#   all = build host gpu sanitize bench; test = build host gpu sanitize; bench = build bench;
#   or name the stages (build, unpack, host, gpu, sanitize, python, bench). `unpack` replaces
#   `build` where the CLI and the GPU tests were built elsewhere (scripts/pack.sh: copy
#   build-packed.tar.xz along with the checkout); host and python need `build`. A stage is a function stage_NAME
#   below: to add one, write the function and add its name to the lists of `all` (and `test`).
# Needs (a machine without a package manager: scripts/prepare-device.sh fills .deps/ beforehand,
# copy it along with the checkout):
#   .deps/googletest       GoogleTest sources
#   .deps/include/dlpack   dlpack.h
# Output: DIR/summary.txt (one verdict line per stage, printed last), DIR/logs.tgz (every log,
# gpu.txt with the GPU and commit, bench-*.json for scripts/perf-table.py).
# Settings: GEMMKIT_GPU_FILTER (gtest filter of the GPU tests), GEMMKIT_SANITIZE=0 (skip
# compute-sanitizer), GEMMKIT_SANITIZE_FILTER (gtest filter run under each sanitizer tool; default
# the tests sized for the sanitizers, *Sanitize*: the conv kernel-variant tests ran past 200 s
# under memcheck), GEMMKIT_RACECHECK_FILTER (the same for racecheck alone, the slowest tool),
# GEMMKIT_BENCH_SUITES (suite names), GEMMKIT_BUILD_TARGET (one target),
# GEMMKIT_GPU_TIMEOUT / GEMMKIT_BENCH_TIMEOUT / GEMMKIT_SANITIZE_TIMEOUT (seconds),
# GEMMKIT_BENCH_OWN=0 (conv suites: skip the second, own-paths-only run).
set -uo pipefail
source "$(dirname "$0")/lib.sh"
take_out_option "$@"
set -- "${rest[@]+"${rest[@]}"}"
cd "$(dirname "$0")/.."
case ${1:-all} in
all) stages="build host gpu sanitize python bench" ;;
test) stages="build host gpu sanitize python" ;;
bench) stages="build bench" ;;
*) stages="$*" ;;
esac
# Logs go to a folder that is packed into one archive at the end, so that the results are a few
# files; summary.txt repeats the verdict lines.
logs=$out_dir/logs
mkdir -p "$logs"
summary=$out_dir/summary.txt
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
finish() {
  tar -C "$out_dir" -czf "$out_dir/logs.tgz" logs && rm -rf "$logs"
  echo "==== summary"
  cat "$summary"
}
trap finish EXIT
root=$PWD
bin=build-device
use_python_cudnn

# The GPU, its driver and clocks into gpu.txt (first lines; the commit follows).
record_gpu() {
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv | tee "$logs/gpu.txt"
}

stage_build() {
  record_gpu
  # The commit, and whether the tree differs from it (files changed on top of it are listed).
  { git rev-parse HEAD && git status --porcelain --untracked-files=no | sed 's/^/changed: /'; } \
    2>/dev/null | tee -a "$logs/gpu.txt"
  local start=$SECONDS
  # The torch extension (python/) is built too where torch imports; C++ that is loaded beside torch
  # is compiled by GEMMKIT_DEVICE_CXX (default /usr/bin/c++ where it exists), for every target.
  local python_args=() cxx=${GEMMKIT_DEVICE_CXX:-}
  [ -z "$cxx" ] && [ -x /usr/bin/c++ ] && cxx=/usr/bin/c++
  python3 -c "import torch" 2>/dev/null &&
    python_args=(-DGEMMKIT_BUILD_PYTHON=ON "-DPython_EXECUTABLE=$(command -v python3)")
  cmake -S . -B "$bin" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGEMMKIT_CUDA=ON \
    ${cxx:+-DCMAKE_CXX_COMPILER=$cxx -DCMAKE_CUDA_HOST_COMPILER=$cxx} "${python_args[@]+"${python_args[@]}"}" \
    -DGEMMKIT_GTEST_SOURCE_DIR="$root/.deps/googletest" \
    -DGEMMKIT_DLPACK_INCLUDE_DIR="$root/.deps/include" \
    ${cudnn_root:+-DGEMMKIT_CUDNN_ROOT=$cudnn_root} >"$logs/build.log" 2>&1 &&
    cmake --build "$bin" -j16 ${GEMMKIT_BUILD_TARGET:+--target $GEMMKIT_BUILD_TARGET} >>"$logs/build.log" 2>&1
  local status=$?
  note "build: status $status in $((SECONDS - start)) s"
  if [ $status -ne 0 ]; then tail -40 "$logs/build.log"; exit 1; fi
  grep -E "warning|spill" "$logs/build.log" | grep -v "0 bytes spill" | head -20 || true
}

# The binaries scripts/pack.sh built elsewhere, into $bin, in place of stage_build; the CUDA
# toolkit's library folders go on LD_LIBRARY_PATH (cuBLASLt), and the CLI must start.
stage_unpack() {
  local start=$SECONDS archive=$root/build-packed.tar.xz toolkit
  [ -f "$archive" ] || { note "unpack: no build-packed.tar.xz (run scripts/pack.sh where nvcc is)"; exit 1; }
  record_gpu
  mkdir -p "$bin" && tar -C "$bin" -xJf "$archive"
  sed 's/^/packed: /' "$bin/packed.txt" | tee -a "$logs/gpu.txt"
  toolkit=$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")
  export LD_LIBRARY_PATH=$toolkit/lib64:$toolkit/lib:${LD_LIBRARY_PATH:-}
  if ! "$bin/gemmkit" info >"$logs/unpack.log" 2>&1; then
    note "unpack: the packed CLI does not start here: $(tail -2 "$logs/unpack.log" | tr '\n' ' ')"
    exit 1
  fi
  note "unpack: $(head -1 "$bin/packed.txt") in $((SECONDS - start)) s"
}

stage_host() {
  local start=$SECONDS
  "$bin/tests/gemmkit_tests" --gtest_brief=1 >"$logs/host-tests.log" 2>&1
  note "host tests: status $? in $((SECONDS - start)) s: $(tail -3 "$logs/host-tests.log" | tr '\n' ' ')"
}

stage_gpu() {
  local start=$SECONDS
  timeout ${GEMMKIT_GPU_TIMEOUT:-300} "$bin/tests/gemmkit_gpu_tests" --gtest_filter="${GEMMKIT_GPU_FILTER:-*}" >"$logs/gpu-tests.log" 2>&1
  note "gpu tests: status $? in $((SECONDS - start)) s"
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|differs|error" "$logs/gpu-tests.log" | head -40 | tee -a "$summary"
  grep -E "calls$" "$logs/gpu-tests.log" | head
}

stage_sanitize() {
  [ "${GEMMKIT_SANITIZE:-1}" = 1 ] || { note "compute-sanitizer: skipped (GEMMKIT_SANITIZE=0)"; return; }
  local sanitize_filter=${GEMMKIT_SANITIZE_FILTER:-'*Sanitize*'} tool start filter cudnn_in_auto fold
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
      "$bin/tests/gemmkit_gpu_tests" --gtest_filter="$filter" >"$logs/sanitize-$tool.log" 2>&1
    note "compute-sanitizer $tool: status $? in $((SECONDS - start)) s: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$logs/sanitize-$tool.log" | tail -1)"
  done
}

# The torch package's tests on CUDA tensors (and CPU ones) against the extension of the build, then
# its host-cost benchmark and the examples (figures for docs/perf.md).
stage_python() {
  local library=$root/$bin/python/_gemmkit_ops.so start=$SECONDS
  [ -f "$library" ] || { note "python: skipped (no torch extension in $bin: torch does not import)"; return; }
  export GEMMKIT_TORCH_LIBRARY=$library PYTHONPATH=$root/python${PYTHONPATH:+:$PYTHONPATH}
  { readelf -d "$library" | grep -E "NEEDED|RPATH|RUNPATH"; env | grep -E "FLAGS=" || true; } >"$logs/python-linkage.txt" 2>&1
  timeout ${GEMMKIT_PYTHON_TIMEOUT:-300} python3 -m pytest -q -rs -p no:cacheprovider python/tests \
    >"$logs/python-tests.log" 2>&1
  note "python tests: status $? in $((SECONDS - start)) s: $(tail -1 "$logs/python-tests.log")"
  grep -E "^(FAILED|ERROR)" "$logs/python-tests.log" | head -20 | tee -a "$summary"
  [ "${GEMMKIT_PYTHON_BENCH:-1}" = 1 ] || return 0
  {
    timeout 120 python3 python/benchmarks/host_cost.py
    timeout 120 "$bin/gemmkit" linear --n 8 --m 128 --k 2880 --bias --out-dtype f32 --device cuda:0 \
      --host-cost 20000 --no-cold
    timeout 120 python3 python/examples/router_logits.py
    for size in 1024 2048; do timeout 180 python3 python/examples/flux2_vae_decoder.py --size $size --graph; done
  } >"$logs/python-bench.txt" 2>&1
  note "python benchmarks: status $? in $((SECONDS - start)) s"
  cat "$logs/python-bench.txt"
}

# bench_suite NAME TAG [gemmkit bench arguments]: one suite into bench-TAG.{json,txt,err}.
bench_suite() {
  local suite=$1 tag=$2 start=$SECONDS
  shift 2
  timeout ${GEMMKIT_BENCH_TIMEOUT:-240} "$bin/gemmkit" bench --suite "bench/suites/$suite.csv" \
    --device cuda:0 "$@" --json "$logs/bench-$tag.json" >"$logs/bench-$tag.txt" 2>"$logs/bench-$tag.err"
  note "bench $tag: status $? in $((SECONDS - start)) s: $(grep -E '^total' "$logs/bench-$tag.txt" | tr -s ' ' | cut -c1-200)"
}

stage_bench() {
  local suite
  for suite in ${GEMMKIT_BENCH_SUITES:-linear-decode conv-models conv-flux2-vae-1024}; do
    if [[ $suite == linear-* ]]; then
      # Linear rows, then the same suite with programmatic dependent launch off (the default has
      # it on). linear-decode: graphs of 200 calls, as the peer figures of bench/peers/ were
      # taken; the larger layers of linear-dense keep the default 20.
      local reps=()
      [ "$suite" = linear-decode ] && reps=(--reps 200)
      bench_suite "$suite" "$suite" "${reps[@]+"${reps[@]}"}"
      cat "$logs/bench-$suite.txt"
      GEMMKIT_LINEAR_PDL=0 bench_suite "$suite" "$suite-nopdl" "${reps[@]+"${reps[@]}"}"
      # Batch invariance off: auto may take cuBLASLt where it measured faster.
      GEMMKIT_LINEAR_BATCH_INVARIANT=0 bench_suite "$suite" "$suite-invariance-off" \
        "${reps[@]+"${reps[@]}"}"
      cat "$logs/bench-$suite-invariance-off.txt"
    else
      bench_suite "$suite" "$suite"
      cat "$logs/bench-$suite.txt"
      # The same suite with cuDNN out of the dispatcher: gemmkit's own paths only.
      [ "${GEMMKIT_BENCH_OWN:-1}" = 1 ] && GEMMKIT_CONV_CUDNN=0 bench_suite "$suite" "$suite-own"
    fi
  done
}

for stage in $stages; do
  if ! declare -F "stage_$stage" >/dev/null; then
    note "unknown stage '$stage' (stages: build unpack host gpu sanitize python bench)"
    exit 2
  fi
  "stage_$stage"
done
