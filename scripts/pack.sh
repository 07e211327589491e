#!/usr/bin/env bash
# Builds the CLI, the GPU test binary and the microbenchmarks (gemmkit_chain_latency,
# gemmkit_tma_throughput, gemmkit_load_latency) here (CUDA backend, build/) and packs them,
# stripped, into build-packed.tar.xz (about 20 MB), which `device.sh unpack` unfolds into
# build-device/ on a GPU machine in place of its build stage (a build there takes ~100 s of
# GPU-machine time; unpacking a few). The binaries need the GPU machine's CUDA 13 runtime
# libraries (cuBLASLt) and, for the cuDNN path, cuDNN 9 (the Python package nvidia-cudnn, as
# device.sh finds it); glibc 2.34 or newer.
# Usage: bash scripts/pack.sh   (GEMMKIT_CMAKE_ARGS as for build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH=/usr/local/cuda/bin:$PATH
command -v nvcc >/dev/null || { echo "pack.sh: nvcc not found (the CUDA backend is needed)" >&2; exit 1; }
micro=(gemmkit_chain_latency gemmkit_tma_throughput gemmkit_load_latency)  # bench/micro/
GEMMKIT_CMAKE_ARGS="-DGEMMKIT_CUDA=ON ${GEMMKIT_CMAKE_ARGS:-}" bash scripts/build.sh gemmkit_cli gemmkit_gpu_tests "${micro[@]}"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/tests"
cp build/gemmkit "$stage/gemmkit"
cp build/tests/gemmkit_gpu_tests "$stage/tests/gemmkit_gpu_tests"
for tool in "${micro[@]}"; do cp "build/$tool" "$stage/$tool"; done
(cd "$stage" && strip gemmkit tests/gemmkit_gpu_tests "${micro[@]}")
# The commit and the files changed on top of it, as device.sh's build stage records them.
{ git rev-parse HEAD && git status --porcelain --untracked-files=no | sed 's/^/changed: /'; } \
  >"$stage/packed.txt" 2>/dev/null || true
tar -C "$stage" -cJf build-packed.tar.xz gemmkit "${micro[@]}" tests packed.txt
echo "pack.sh: build-packed.tar.xz ($(du -h build-packed.tar.xz | cut -f1)) from $(head -1 "$stage/packed.txt")"
