#!/usr/bin/env bash
# Configures and builds gemmkit into build/ (Release; the CUDA backend when nvcc is found).
# Usage: bash scripts/build.sh [TARGET ...]   (default: every target; run.sh builds gemmkit_cli)
# GEMMKIT_CMAKE_ARGS adds CMake arguments, e.g. GEMMKIT_CMAKE_ARGS=-DGEMMKIT_CUDA=OFF.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release ${GEMMKIT_CMAKE_ARGS:-} >/dev/null
targets=()
for target in "$@"; do targets+=(--target "$target"); done
cmake --build build -j "$jobs" "${targets[@]+"${targets[@]}"}"
