"""torch.library.opcheck of every op and torch.compile(fullgraph=True) of modules that use them."""

import pytest
import torch

import gemmkit
from gemmkit import _shapes


def linear_samples():
    yield (torch.randn(3, 16), torch.randn(8, 16), None, None, "", -1, None)
    yield (torch.randn(2, 3, 16).bfloat16(), torch.randn(8, 16).bfloat16(),
           torch.randn(8).bfloat16(), torch.float32, "", -1, None)


def conv_samples():
    yield (torch.randn(2, 7, 6, 4), torch.randn(6, 3, 3, 2), torch.randn(6), [2, 1], [1, 0],
           [1, 2], [1], [1], 2, False, None)
    yield (torch.randn(1, 5, 4).half(), torch.randn(3, 2, 4).half(), None, [1], [1], [1], [2],
           [2], 1, True, torch.float32)


@pytest.mark.parametrize("sample", list(linear_samples()))
def test_opcheck_linear(sample):
    torch.library.opcheck(torch.ops.gemmkit.linear.default, sample)


@pytest.mark.parametrize("sample", list(linear_samples()))
def test_opcheck_linear_out(sample):
    x, w, bias, out_dtype = sample[:4]
    out = torch.empty(*x.shape[:-1], w.shape[0], dtype=out_dtype or x.dtype)
    torch.library.opcheck(torch.ops.gemmkit.linear_out.default, (x, w, bias, out, "", -1, None))


@pytest.mark.parametrize("sample", list(conv_samples()))
def test_opcheck_conv_general(sample):
    torch.library.opcheck(torch.ops.gemmkit.conv_general.default, sample)


@pytest.mark.parametrize("sample", list(conv_samples()))
def test_opcheck_conv_general_out(sample):
    x, w = sample[0], sample[1]
    shape = _shapes.conv_output_shape(x.shape, w.shape, *sample[3:9])
    out = torch.empty(shape, dtype=sample[10] or x.dtype)
    torch.library.opcheck(torch.ops.gemmkit.conv_general_out.default, (*sample[:10], out))


def test_opcheck_conv_output_shape():
    torch.library.opcheck(torch.ops.gemmkit.conv_output_shape.default,
                          ([1, 8, 8, 4], [3, 3, 3, 4], [1], [1], [1], [1], [1], 1))


def test_opcheck_build_info():
    # The size of the output is data-dependent: only the schema and fake registration apply.
    torch.library.opcheck(torch.ops.gemmkit.build_info.default, (),
                          test_utils=("test_schema", "test_autograd_registration"))


class Block(torch.nn.Module):
    """A small decoder-style block: every conv and linear through gemmkit."""

    def __init__(self):
        super().__init__()
        self.conv_in = gemmkit.nn.Conv2d(4, 8, 3, padding=1)
        self.norm = torch.nn.GroupNorm(2, 8)
        self.down = gemmkit.nn.Conv2d(8, 8, 3, stride=2, padding=1, groups=2)
        self.up = gemmkit.nn.ConvTranspose2d(8, 4, 4, stride=2, padding=1)
        self.conv1d = gemmkit.nn.Conv1d(4, 4, 3, padding=1)
        self.proj = gemmkit.nn.Linear(4, 6)

    def forward(self, x):
        h = torch.nn.functional.silu(self.norm(self.conv_in(x)))
        h = self.up(self.down(h))
        n, c, hh, ww = h.shape
        h = self.conv1d(h.reshape(n, c, hh * ww))
        return self.proj(h.transpose(1, 2))


def router(x, w):
    return gemmkit.linear(x, w, out_dtype=torch.float32)


@pytest.mark.parametrize("dynamic", [False, True])
def test_fullgraph_compile_matches_eager(dynamic):
    torch.manual_seed(0)
    block = Block().eval()
    x = torch.randn(2, 4, 8, 8)
    with torch.no_grad():
        eager = block(x)
        compiled = torch.compile(block, fullgraph=True, backend="aot_eager", dynamic=dynamic)
        assert torch.equal(compiled(x), eager)
        x2 = torch.randn(3, 4, 8, 8)
        assert torch.equal(compiled(x2), block(x2))


def test_fullgraph_compile_of_router_logits_and_out_variants():
    x = torch.randn(5, 32).bfloat16()
    w = torch.randn(16, 32).bfloat16()

    def with_out(x, w):
        out = torch.empty(x.shape[0], w.shape[0])
        gemmkit.linear(x, w, out=out.bfloat16())
        y = torch.empty(x.shape[0], w.shape[0], dtype=torch.float32)
        gemmkit.linear(x, w, out_dtype=None, out=y.bfloat16())
        return gemmkit.linear(x, w, out_dtype=torch.float32) + 1

    compiled = torch.compile(router, fullgraph=True, backend="aot_eager")
    assert torch.equal(compiled(x, w), router(x, w))
    compiled_out = torch.compile(with_out, fullgraph=True, backend="aot_eager")
    assert torch.equal(compiled_out(x, w), with_out(x, w))


def test_fullgraph_compile_of_conv_general_out():
    def f(x, w):
        out = torch.empty(x.shape[0], x.shape[1], x.shape[2], w.shape[0])
        gemmkit.conv_general(x, w, padding_lo=1, padding_hi=1, out=out)
        return out * 2

    x = torch.randn(2, 6, 6, 4)
    w = torch.randn(3, 3, 3, 4)
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager", dynamic=True)
    assert torch.equal(compiled(x, w), f(x, w))
