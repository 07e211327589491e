#!/usr/bin/env bash
# The main job: installs what is missing, builds, and runs `gemmkit run` (the FLUX.2 VAE decoder
# convolutions and the MoE-router linear sweep; on the GPU when one is usable, else a small
# version on the CPU). Extra arguments go to `gemmkit run`. The suites ship in bench/suites.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh gemmkit_cli
exec build/gemmkit run "$@"
