#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer run of the CPU backend and the API boundary:
# builds a CPU-only configuration with clang into build-sanitize/ (UBSan fatal), runs the host
# tests under it, then the libFuzzer target of the public API for a bounded time from its
# checked-in corpus (tests/fuzz/README.md). Any sanitizer report, any exception other than
# gemmkit::Error, or any wrong answer fails the run.
#   GEMMKIT_FUZZ_SECONDS   length of the fuzz run (default 120; 0 skips it)
#   GEMMKIT_SANITIZE_TESTS GoogleTest filter of the host tests to run (default: all of them)
# scripts/test.sh runs it last; GEMMKIT_SANITIZE=0 skips it there.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
clang_version=14
if ! { command -v clang++ || command -v "clang++-$clang_version"; } >/dev/null ||
    ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  echo "installing: clang-$clang_version libclang-rt-$clang_version-dev"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd=sudo
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq \
    "clang-$clang_version" "libclang-rt-$clang_version-dev" >/dev/null
fi
cxx=$(command -v clang++ || command -v "clang++-$clang_version")
jobs=$(nproc 2>/dev/null || echo 2)
flags="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGEMMKIT_CUDA=OFF \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_CXX_FLAGS="$flags -fsanitize=fuzzer-no-link" \
  -DGEMMKIT_BUILD_TOOLS=OFF -DGEMMKIT_BUILD_FUZZ=ON >/dev/null
cmake --build build-sanitize -j "$jobs" --target gemmkit_tests gemmkit_fuzz_api

# allocator_may_return_null: an allocation too large for the sanitizer's allocator throws
# std::bad_alloc, as it would without it (the backend turns that into a gemmkit::Error).
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allocator_may_return_null=1:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Few threads: the sanitizers slow every thread, and two cores are the usual CI machine.
export GEMMKIT_NUM_THREADS=${GEMMKIT_NUM_THREADS:-2}
build-sanitize/tests/gemmkit_tests --gtest_brief=1 --gtest_filter="${GEMMKIT_SANITIZE_TESTS:-*}"

seconds=${GEMMKIT_FUZZ_SECONDS:-120}
if [ "$seconds" -gt 0 ]; then
  bash tests/fuzz/run.sh build-sanitize/tests/fuzz/gemmkit_fuzz_api "$seconds"
fi
