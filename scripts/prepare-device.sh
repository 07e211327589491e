#!/usr/bin/env bash
# Fills .deps/ (git-ignored) with what scripts/device.sh needs on the GPU machine, which has no
# package manager: GoogleTest sources, dlpack.h and a copy of the shared suites.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deps/include
[ -d /usr/src/googletest ] || { apt-get update -qq && apt-get install -y -qq googletest; }
[ -f /usr/include/dlpack/dlpack.h ] || { apt-get update -qq && apt-get install -y -qq libdlpack-dev; }
rm -rf .deps/googletest .deps/suites
cp -r /usr/src/googletest .deps/googletest
cp -r /usr/include/dlpack .deps/include/
cp -r ../shared/suites .deps/suites
du -sh .deps
