#!/usr/bin/env bash
# The Python package's tests (called by scripts/test.sh after the C++ tests).
#
# 1. Installs the pinned torch (and scikit-build-core, pytest) when missing.
# 2. Builds the torch extension inside the main build (build/, reusing its gemmkit library, with
#    the CUDA backend when the main build has it) and runs every pytest against it.
# 3. Builds and installs the package as a user would (`pip install ./python`; the CPU backend
#    only unless GEMMKIT_PYTHON_PIP_CUDA=1, so the CUDA kernels are not compiled twice) and runs
#    the package, linear and GPU tests against the installed copy, from outside the source tree.
#    The pip build reads CMAKE_ARGS (e.g. -DCMAKE_CXX_COMPILER=/usr/bin/c++).
# GPU tests skip, with the reason, without a GPU. Exits 0 with a SKIPPED line only when torch
# cannot be installed at all.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
torch_version=2.11.0
skbuild_version=0.11.6
pytest_version=8.3.5
python=${GEMMKIT_PYTHON:-python3}
export PIP_BREAK_SYSTEM_PACKAGES=1 PIP_DISABLE_PIP_VERSION_CHECK=1

if ! command -v "$python" >/dev/null; then
  echo "SKIPPED python tests: no $python on PATH"
  exit 0
fi
if ! "$python" -m pip --version >/dev/null 2>&1; then
  "$python" -m ensurepip --upgrade >/dev/null 2>&1 ||
    { apt-get install -y -qq python3-pip >/dev/null 2>&1 || true; }
fi
if ! "$python" -c "import torch" >/dev/null 2>&1; then
  echo "test-python: installing torch==$torch_version"
  if ! "$python" -m pip install --quiet "torch==$torch_version"; then
    echo "SKIPPED python tests: torch==$torch_version could not be installed for $python"
    exit 0
  fi
fi
"$python" -c "import scikit_build_core" >/dev/null 2>&1 ||
  "$python" -m pip install --quiet "scikit-build-core==$skbuild_version"
"$python" -c "import pytest" >/dev/null 2>&1 || "$python" -m pip install --quiet "pytest==$pytest_version"

# 2. The extension from the main build, tested in place.
[ -f build/CMakeCache.txt ] || bash scripts/build.sh
cmake -S . -B build -DGEMMKIT_BUILD_PYTHON=ON -DPython_EXECUTABLE="$(command -v "$python")" >/dev/null
cmake --build build --target gemmkit_torch -j "$(nproc 2>/dev/null || echo 2)"
GEMMKIT_TORCH_LIBRARY="$root/build/python/_gemmkit_ops.so" PYTHONPATH="$root/python" \
  "$python" -m pytest -q -rs -p no:cacheprovider python/tests

# 3. The package as pip installs it, tested from outside the tree.
cuda=OFF
[ "${GEMMKIT_PYTHON_PIP_CUDA:-0}" = 1 ] && cuda=AUTO
GEMMKIT_CUDA=$cuda "$python" -m pip install --quiet --no-build-isolation --no-deps ./python
cd "$(mktemp -d)"
"$python" -m pytest -q -rs -p no:cacheprovider --rootdir "$root/python" \
  "$root/python/tests/test_package.py" "$root/python/tests/test_linear.py" \
  "$root/python/tests/test_gpu.py"
