#!/usr/bin/env bash
# The test command: installs what is missing, builds, and runs every test through CTest.
# GPU tests run when a GPU is usable and are skipped, with the reason, otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
ctest --test-dir build --output-on-failure -j "$(nproc 2>/dev/null || echo 2)" "$@"
bash scripts/test-python.sh  # the PyTorch package: builds it, runs its tests
[ "${GEMMKIT_SANITIZE:-1}" = 0 ] || bash scripts/test-sanitize.sh  # ASan + UBSan tests and fuzzing
