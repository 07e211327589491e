#!/usr/bin/env bash
# Installs what building gemmkit needs on a Debian/Ubuntu machine, skipping what is present:
# a C++17 compiler, CMake, Ninja, GoogleTest and dlpack headers. The CUDA toolkit is optional
# and never installed here (without nvcc the CPU backend alone is built).
set -euo pipefail
missing=()
command -v cmake >/dev/null || missing+=(cmake)
command -v ninja >/dev/null || missing+=(ninja-build)
command -v g++ >/dev/null || missing+=(g++)
[ -f /usr/include/dlpack/dlpack.h ] || missing+=(libdlpack-dev)
[ -d /usr/src/googletest ] || [ -f /usr/include/gtest/gtest.h ] || missing+=(googletest libgtest-dev)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -ne 0 ] && sudo_cmd=sudo
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
fi
