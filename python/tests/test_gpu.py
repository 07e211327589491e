"""The ops on CUDA tensors: numerics, CUDA graphs, streams, inductor, batch invariance, host cost.

Skipped, with the reason, where the extension has no CUDA backend or torch sees no GPU.
"""

import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

import gemmkit
from conftest import DTYPES, assert_close_to, empty_batch, requires_cuda, to_channels_last

pytestmark = requires_cuda
HERE = os.path.dirname(os.path.abspath(__file__))


def run_python(code: str, timeout: int = 600) -> subprocess.CompletedProcess:
    """Runs `code` in a fresh process (no earlier gemmkit call warmed anything up)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, env=os.environ.copy(), timeout=timeout)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 8, 64, 300, 1024])  # the family, then cuBLASLt above n = 256
@pytest.mark.parametrize("with_bias", [False, True])
def test_linear_matches_f_linear(dtype, n, with_bias):
    torch.manual_seed(n)
    x = torch.randn(n, 2880, device="cuda").to(dtype)
    w = torch.randn(128, 2880, device="cuda").to(dtype)
    bias = torch.randn(128, device="cuda").to(dtype) if with_bias else None
    ref = F.linear(x.double(), w.double(), None if bias is None else bias.double())
    assert_close_to(gemmkit.linear(x, w, bias), ref, dtype)
    if dtype != torch.float32:
        out = gemmkit.linear(x, w, bias, out_dtype=torch.float32)
        assert out.dtype == torch.float32
        assert_close_to(out, ref, torch.float32 if n <= 256 else dtype)


CONV_CASES = [  # (spatial, c, o, size, kernel, stride, padding, dilation, groups)
    (2, 128, 64, (32, 32), 3, 1, 1, 1, 1),
    (2, 64, 64, (17, 23), 3, 2, 1, 1, 1),
    (2, 64, 64, (16, 16), 3, 1, 1, 1, 64),
    (2, 32, 8, (20, 20), 3, 1, 2, 2, 1),
    (2, 64, 128, (16, 16), 1, 1, 0, 1, 1),
    (1, 64, 64, (40,), 4, 1, 3, 1, 64),
    (3, 32, 32, (4, 8, 8), 3, 1, 1, 1, 1),
    (2, 48, 48, (12, 12), 3, 1, 1, 1, 4),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("case", CONV_CASES)
@pytest.mark.parametrize("channels_last", [True, False])
def test_conv_matches_torch(dtype, case, channels_last):
    spatial, c, o, size, kernel, stride, padding, dilation, groups = case
    torch.manual_seed(c + o)
    x = torch.randn(2, c, *size, device="cuda").to(dtype)
    w = torch.randn(o, c // groups, *([kernel] * spatial), device="cuda").to(dtype)
    bias = torch.randn(o, device="cuda").to(dtype)
    if channels_last:
        x = to_channels_last(x)
    ours = {1: gemmkit.conv1d, 2: gemmkit.conv2d, 3: gemmkit.conv3d}[spatial]
    theirs = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[spatial]
    out = ours(x, w, bias, stride, padding, dilation, groups)
    ref = theirs(x.double(), w.double(), bias.double(), stride, padding, dilation, groups)
    assert_close_to(out, ref, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("groups", [1, 2])
def test_conv_transpose_matches_torch(dtype, groups):
    torch.manual_seed(groups)
    x = torch.randn(2, 64, 16, 16, device="cuda").to(dtype)
    w = torch.randn(64, 32 // groups, 4, 4, device="cuda").to(dtype)
    bias = torch.randn(32, device="cuda").to(dtype)
    out = gemmkit.conv_transpose2d(x, w, bias, stride=2, padding=1, groups=groups)
    ref = F.conv_transpose2d(x.double(), w.double(), bias.double(), stride=2, padding=1,
                             groups=groups)
    assert_close_to(out, ref, dtype)


def test_first_call_inside_capture_with_no_warm_up():
    # A fresh process: the very first gemmkit calls are captured (torch's default capture mode,
    # "global", fails any cudaMalloc made during the capture).
    result = run_python("""
        import torch, torch.nn.functional as F, gemmkit
        torch.manual_seed(0)
        x_small = torch.randn(8, 2880, device="cuda", dtype=torch.bfloat16)
        x_large = torch.randn(512, 2880, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(128, 2880, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(128, device="cuda", dtype=torch.bfloat16)
        xc = torch.randn(1, 64, 32, 32, device="cuda", dtype=torch.bfloat16).to(
            memory_format=torch.channels_last)
        wc = torch.randn(64, 64, 3, 3, device="cuda", dtype=torch.bfloat16).to(
            memory_format=torch.channels_last)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            small = gemmkit.linear(x_small, w, b, out_dtype=torch.float32)
            large = gemmkit.linear(x_large, w, b, out_dtype=torch.float32)  # cuBLASLt path
            conv = gemmkit.conv2d(xc, wc, padding=1)
        for step in range(3):
            for t in (x_small, x_large, xc):
                t.copy_(torch.randn_like(t))
            graph.replay()
            torch.cuda.synchronize()
            assert torch.equal(small, gemmkit.linear(x_small, w, b, out_dtype=torch.float32))
            assert torch.equal(large, gemmkit.linear(x_large, w, b, out_dtype=torch.float32))
            ref = F.conv2d(xc.float(), wc.float(), padding=1)
            assert (conv.float() - ref).abs().max().item() <= 2e-2 * ref.abs().max().item()
        print("ok")
    """)
    assert result.returncode == 0 and result.stdout.strip().endswith("ok"), result.stderr[-4000:]


def test_side_streams_and_current_stream():
    torch.manual_seed(1)
    w = torch.randn(128, 2880, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(128, device="cuda", dtype=torch.bfloat16)
    xs = [torch.randn(n, 2880, device="cuda", dtype=torch.bfloat16) for n in (8, 512, 8, 512)]
    expected = [gemmkit.linear(x, w, b, out_dtype=torch.float32) for x in xs]
    torch.cuda.synchronize()
    streams = [torch.cuda.Stream() for _ in xs]
    outs = []
    for _ in range(5):
        outs.clear()
        for x, stream in zip(xs, streams):
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                outs.append(gemmkit.linear(x, w, b, out_dtype=torch.float32))
        torch.cuda.synchronize()
        for got, want in zip(outs, expected):
            assert torch.equal(got, want)


def test_caller_supplied_workspace():
    x = torch.randn(512, 2880, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(128, 2880, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(128, device="cuda", dtype=torch.bfloat16)
    workspace = torch.empty(48 << 20, dtype=torch.uint8, device="cuda")
    expected = gemmkit.linear(x, w, b, out_dtype=torch.float32)
    got = gemmkit.linear(x, w, b, out_dtype=torch.float32, workspace=workspace)
    assert torch.equal(got, expected)
    with pytest.raises(gemmkit.Error, match="workspace"):
        gemmkit.linear(x, w, b, out_dtype=torch.float32,
                       workspace=torch.empty(16, dtype=torch.uint8, device="cuda"))
    with pytest.raises(gemmkit.Error, match="workspace"):
        gemmkit.linear(x, w, b, workspace=torch.empty(64, dtype=torch.uint8))


def test_batch_invariance_through_the_op():
    torch.manual_seed(2)
    w = torch.randn(128, 2880, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(128, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(256, 2880, device="cuda", dtype=torch.bfloat16)
    singles = torch.cat([gemmkit.linear(x[i:i + 1], w, b, out_dtype=torch.float32)
                         for i in range(x.shape[0])])
    for n in (2, 8, 16, 33, 64, 128, 256):
        assert torch.equal(gemmkit.linear(x[:n], w, b, out_dtype=torch.float32), singles[:n]), n


def test_device_mismatch_is_a_gemmkit_error():
    with pytest.raises(gemmkit.Error, match="gemmkit::linear"):
        gemmkit.linear(torch.randn(2, 16, device="cuda"), torch.randn(8, 16))


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA devices")
def test_device_guard_on_another_device():
    x = torch.randn(8, 256, device="cuda:1", dtype=torch.bfloat16)
    w = torch.randn(64, 256, device="cuda:1", dtype=torch.bfloat16)
    with torch.cuda.device(0):
        out = gemmkit.linear(x, w)
    assert out.device == x.device
    assert_close_to(out, F.linear(x.double(), w.double()), torch.bfloat16)


@empty_batch
def test_empty_batch_on_cuda():
    w = torch.randn(128, 2880, device="cuda", dtype=torch.bfloat16)
    out = gemmkit.linear(torch.empty(0, 2880, device="cuda", dtype=torch.bfloat16), w)
    assert out.shape == (0, 128)
    conv = gemmkit.conv2d(torch.empty(0, 8, 5, 5, device="cuda"), torch.randn(4, 8, 3, 3,
                                                                              device="cuda"))
    assert conv.shape == (0, 4, 3, 3)


def test_inductor_fullgraph_matches_eager():
    from test_compile import Block
    torch.manual_seed(3)
    block = Block().cuda().eval()
    x = torch.randn(2, 4, 16, 16, device="cuda")
    with torch.no_grad():
        eager = block(x)
        compiled = torch.compile(block, fullgraph=True)
        got = compiled(x)
    assert_close_to(got, eager, torch.float32)


def test_opcheck_on_cuda():
    x = torch.randn(8, 256, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(64, 256, device="cuda", dtype=torch.bfloat16)
    torch.library.opcheck(torch.ops.gemmkit.linear.default,
                          (x, w, None, torch.float32, "", -1, None))
    xc = torch.randn(1, 9, 9, 16, device="cuda", dtype=torch.bfloat16)
    wc = torch.randn(8, 3, 3, 16, device="cuda", dtype=torch.bfloat16)
    torch.library.opcheck(torch.ops.gemmkit.conv_general.default,
                          (xc, wc, None, [1], [1], [1], [1], [1], 1, False, None))


def test_host_cost_benchmark_runs():
    script = os.path.join(HERE, "..", "benchmarks", "host_cost.py")
    result = subprocess.run([sys.executable, script, "--calls", "2000", "--repeats", "3"],
                            capture_output=True, text=True, timeout=600)
    print(result.stdout)
    assert result.returncode == 0, result.stderr[-4000:]
    assert "torch.ops.gemmkit.linear" in result.stdout
