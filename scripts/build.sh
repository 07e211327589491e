#!/usr/bin/env bash
# Configures and builds gemmkit into build/ (Release; the CUDA backend when nvcc is found).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release ${GEMMKIT_CMAKE_ARGS:-} >/dev/null
cmake --build build -j "$jobs"
