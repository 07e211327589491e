#!/usr/bin/env bash
# CTest: install the built gemmkit into a scratch prefix and build + run a consumer through
# find_package; then build the same consumer with gemmkit as a subdirectory (CPU backend only,
# to keep CI short).
# usage: check.sh SOURCE_DIR BUILD_DIR SCRATCH_DIR
set -euo pipefail
source_dir=$1 build_dir=$2 scratch=$3
rm -rf "$scratch" && mkdir -p "$scratch"
cmake --install "$build_dir" --prefix "$scratch/prefix" >/dev/null
cmake -S "$source_dir/tests/consumer" -B "$scratch/package" -G Ninja \
  -DCMAKE_PREFIX_PATH="$scratch/prefix" >/dev/null
cmake --build "$scratch/package" >/dev/null
"$scratch/package/consumer"
cmake -S "$source_dir/tests/consumer" -B "$scratch/subdirectory" -G Ninja \
  -DGEMMKIT_CONSUMER_MODE=subdirectory -DGEMMKIT_SOURCE="$source_dir" -DGEMMKIT_CUDA=OFF >/dev/null
cmake --build "$scratch/subdirectory" >/dev/null
"$scratch/subdirectory/consumer"
