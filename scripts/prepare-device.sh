#!/usr/bin/env bash
# Fills .deps/ (git-ignored) with what scripts/device.sh needs on a GPU machine that has no
# package manager: GoogleTest sources and the dlpack headers (installed here first when missing).
# Copy .deps/ along with the checkout to that machine.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deps/include
sudo_cmd=""
[ "$(id -u)" -ne 0 ] && sudo_cmd=sudo
[ -d /usr/src/googletest ] || { $sudo_cmd apt-get update -qq && $sudo_cmd apt-get install -y -qq googletest; }
[ -f /usr/include/dlpack/dlpack.h ] || { $sudo_cmd apt-get update -qq && $sudo_cmd apt-get install -y -qq libdlpack-dev; }
rm -rf .deps/googletest .deps/suites
cp -r /usr/src/googletest .deps/googletest
cp -r /usr/include/dlpack .deps/include/
du -sh .deps
