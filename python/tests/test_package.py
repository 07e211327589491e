"""The package as installed: import orders, the extension's linkage and symbol visibility."""

import os
import shutil
import subprocess
import sys

import pytest

import gemmkit
from gemmkit import _library


def run_python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=os.environ.copy(), timeout=300)


@pytest.mark.parametrize("order", ["torch first", "gemmkit first"])
def test_imports_in_both_orders(order):
    imports = "import torch; import gemmkit" if order == "torch first" else \
        "import gemmkit; import torch"
    code = (imports + "\nx = torch.randn(2, 8)\nw = torch.randn(4, 8)\n"
            "assert torch.allclose(gemmkit.linear(x, w), x @ w.t(), atol=1e-5)\n"
            "assert hasattr(torch.ops.gemmkit, 'conv_general')\nprint('ok')")
    result = run_python(code)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr


def readelf(*args: str) -> str:
    return subprocess.run(["readelf", *args, _library.library_path()], capture_output=True,
                          text=True, check=True).stdout


@pytest.mark.skipif(shutil.which("readelf") is None, reason="readelf (binutils) is not installed")
def test_uses_the_shared_libstdcxx_and_has_no_rpath():
    dynamic = readelf("-d")
    needed = [line.split("[")[1].rstrip("]") for line in dynamic.splitlines() if "(NEEDED)" in line]
    assert not any("gemmkit" in name for name in needed), needed
    assert "(RPATH)" not in dynamic and "(RUNPATH)" not in dynamic
    # The C++ runtime is the process's (the one torch loaded), never a copy inside the module:
    # its entry points are undefined here. Whether libstdc++.so.6 is listed as needed depends on
    # the toolchain (the symbols also resolve through libtorch's own needs).
    runtime = {"__cxa_throw", "__cxa_begin_catch", "_ZSt9terminatev", "__cxa_allocate_exception"}
    defined, undefined = set(), set()
    for line in readelf("-s", "-W").splitlines():
        fields = line.split()
        if len(fields) >= 8 and fields[7].split("@")[0] in runtime:
            (undefined if fields[6] == "UND" else defined).add(fields[7].split("@")[0])
    assert not defined, f"a copy of the C++ runtime is linked into the module: {sorted(defined)}"
    assert undefined, "the module throws no C++ exception through the shared runtime?"


@pytest.mark.skipif(shutil.which("readelf") is None, reason="readelf (binutils) is not installed")
def test_exports_no_gemmkit_or_cuda_runtime_symbols():
    exported = []
    for line in readelf("--dyn-syms", "-W").splitlines():
        fields = line.split()
        # Num: Value Size Type Bind Vis Ndx Name: defined (Ndx not UND), global or weak.
        if len(fields) >= 8 and fields[6] != "UND" and fields[4] in ("GLOBAL", "WEAK"):
            exported.append(fields[7])
    leaked = [s for s in exported if "gemmkit" in s or s.startswith(("cuda", "cublas", "cudnn"))]
    assert not leaked, leaked[:20]


def test_build_info_names_the_backends():
    info = gemmkit.build_info()
    assert "backends: cpu" in info
    assert gemmkit.built_with_cuda() == ("cuda" in info.split("backends:")[1].splitlines()[0])


def test_missing_extension_is_a_clear_import_error():
    env = os.environ.copy()
    env["GEMMKIT_TORCH_LIBRARY"] = "/nonexistent/_gemmkit_ops.so"
    result = subprocess.run([sys.executable, "-c", "import gemmkit"], capture_output=True,
                            text=True, env=env, timeout=300)
    assert result.returncode != 0
    assert "ImportError" in result.stderr and "/nonexistent/_gemmkit_ops.so" in result.stderr
