"""gemmkit.linear against F.linear on the CPU backend."""

import pytest
import torch
import torch.nn.functional as F

import gemmkit
from conftest import DTYPES, assert_close_to, empty_batch


def reference(x, w, bias, out_dtype):
    out = F.linear(x.double(), w.double(), None if bias is None else bias.double())
    return out.to(out_dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n,m,k", [(1, 8, 16), (5, 33, 40), (64, 128, 96)])
@pytest.mark.parametrize("with_bias", [False, True])
def test_matches_f_linear(dtype, n, m, k, with_bias):
    torch.manual_seed(n * 1000 + m + k)
    x = torch.randn(n, k).to(dtype)
    w = torch.randn(m, k).to(dtype)
    bias = torch.randn(m).to(dtype) if with_bias else None
    out = gemmkit.linear(x, w, bias)
    assert out.dtype == dtype and out.shape == (n, m)
    assert_close_to(out, reference(x, w, bias, dtype), dtype)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_f32_out_for_router_logits(dtype):
    x = torch.randn(8, 288).to(dtype)
    w = torch.randn(128, 288).to(dtype)
    bias = torch.randn(128).to(dtype)
    out = gemmkit.linear(x, w, bias, out_dtype=torch.float32)
    assert out.dtype == torch.float32
    assert_close_to(out, reference(x, w, bias, torch.float32), torch.float32)


def test_leading_dims_flattened_without_copy():
    x = torch.randn(2, 3, 4, 16)
    w = torch.randn(8, 16)
    out = gemmkit.linear(x, w)
    assert out.shape == (2, 3, 4, 8)
    assert_close_to(out, reference(x, w, None, torch.float32), torch.float32)
    # A row-strided view (every other row of a larger buffer) still collapses: no copy needed.
    base = torch.randn(6, 2, 16)
    view = base[:, 0, :]
    assert_close_to(gemmkit.linear(view, w), reference(view, w, None, torch.float32),
                    torch.float32)


def test_non_collapsible_leading_dims_are_copied():
    x = torch.randn(4, 3, 16).transpose(0, 1)  # leading dims (3, 4) with strides (16, 48)
    w = torch.randn(8, 16)
    assert_close_to(gemmkit.linear(x, w), reference(x, w, None, torch.float32), torch.float32)


def test_one_dim_input():
    x = torch.randn(16)
    w = torch.randn(8, 16)
    out = gemmkit.linear(x, w)
    assert out.shape == (8,)
    assert_close_to(out, reference(x, w, None, torch.float32), torch.float32)


def test_strided_inputs():
    x = torch.randn(5, 32)[:, ::2]  # [5, 16], k stride 2
    w = torch.randn(16, 8).t()  # [8, 16], strides (1, 8)
    assert_close_to(gemmkit.linear(x, w), reference(x, w, None, torch.float32), torch.float32)


def test_out_argument():
    x = torch.randn(3, 16)
    w = torch.randn(8, 16)
    out = torch.empty(3, 8)
    result = gemmkit.linear(x, w, out=out)
    assert result is out
    assert_close_to(out, reference(x, w, None, torch.float32), torch.float32)
    # A column slice of a wider buffer: rows strided, written in place.
    wide = torch.zeros(3, 12)
    gemmkit.linear(x, w, out=wide[:, 2:10])
    assert_close_to(wide[:, 2:10], reference(x, w, None, torch.float32), torch.float32)
    assert wide[:, :2].abs().max() == 0 and wide[:, 10:].abs().max() == 0


def test_kernel_and_pdl_options():
    x = torch.randn(3, 16)
    w = torch.randn(8, 16)
    out = gemmkit.linear(x, w, kernel="reference", pdl=False)
    assert_close_to(out, reference(x, w, None, torch.float32), torch.float32)


@empty_batch
@pytest.mark.parametrize("dtype", DTYPES)
def test_empty_batch(dtype):
    x = torch.empty(0, 16, dtype=dtype)
    w = torch.randn(8, 16).to(dtype)
    bias = torch.randn(8).to(dtype)
    out = gemmkit.linear(x, w, bias)
    assert out.shape == (0, 8) and out.dtype == dtype
    out3 = gemmkit.linear(torch.empty(2, 0, 16, dtype=dtype), w, bias, out_dtype=torch.float32)
    assert out3.shape == (2, 0, 8) and out3.dtype == torch.float32


ERRORS = [
    # (description, call, words the message must contain)
    ("k mismatch", lambda: gemmkit.linear(torch.randn(2, 16), torch.randn(8, 15)),
     ["gemmkit::linear", "w"]),
    ("dtype mismatch", lambda: gemmkit.linear(torch.randn(2, 16), torch.randn(8, 16).half()),
     ["gemmkit::linear", "w"]),
    ("unsupported dtype", lambda: gemmkit.linear(torch.randn(2, 16).double(),
                                                 torch.randn(8, 16).double()),
     ["gemmkit::linear", "x", "torch.float64"]),
    ("integer dtype", lambda: gemmkit.linear(torch.ones(2, 16, dtype=torch.int32),
                                             torch.ones(8, 16, dtype=torch.int32)),
     ["gemmkit::linear", "x", "dtype"]),
    ("bias shape", lambda: gemmkit.linear(torch.randn(2, 16), torch.randn(8, 16),
                                          torch.randn(7)),
     ["gemmkit::linear", "bias"]),
    ("w rank", lambda: gemmkit.linear(torch.randn(2, 16), torch.randn(8, 16, 1)),
     ["gemmkit::linear", "w"]),
    ("out shape", lambda: gemmkit.linear(torch.randn(2, 16), torch.randn(8, 16),
                                         out=torch.empty(2, 7)),
     ["gemmkit::linear", "out"]),
    ("out aliasing x", lambda: (lambda buf: gemmkit.linear(buf[:, :8], torch.randn(8, 8),
                                                           out=buf[:, 4:12]))(
        torch.randn(2, 16)),
     ["gemmkit::linear", "out"]),
    ("out dtype", lambda: gemmkit.linear(torch.randn(2, 16), torch.randn(8, 16),
                                         out_dtype=torch.float16),
     ["gemmkit::linear", "out"]),
    ("unknown kernel", lambda: gemmkit.linear(torch.randn(2, 16), torch.randn(8, 16),
                                              kernel="no-such-kernel"),
     ["gemmkit::linear", "no-such-kernel"]),
    ("zero-dim x", lambda: gemmkit.linear(torch.tensor(1.0), torch.randn(8, 1)),
     ["gemmkit::linear", "x"]),
]


@pytest.mark.parametrize("description,call,words", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors_raise_gemmkit_error_with_its_message(description, call, words):
    with pytest.raises(gemmkit.Error) as info:
        call()
    message = str(info.value)
    for word in words:
        assert word in message, f"{description}: {word!r} not in {message!r}"
    assert isinstance(info.value, RuntimeError)


def test_raw_op_raises_runtime_error_with_the_same_message():
    with pytest.raises(RuntimeError, match=r"^gemmkit::linear: w .*k = 16"):
        torch.ops.gemmkit.linear(torch.randn(2, 16), torch.randn(8, 15))


def test_pdl_value_checked():
    with pytest.raises(RuntimeError, match="pdl 5"):
        torch.ops.gemmkit.linear(torch.randn(2, 16), torch.randn(8, 16), None, None, "", 5)


def test_batch_invariant_option():
    x = torch.randn(3, 16)
    w = torch.randn(8, 16)
    expected = reference(x, w, None, torch.float32)
    for value in (None, True, False):
        assert_close_to(gemmkit.linear(x, w, batch_invariant=value), expected, torch.float32)
        out = torch.empty(3, 8)
        gemmkit.linear(x, w, out=out, batch_invariant=value)
        assert_close_to(out, expected, torch.float32)
    with pytest.raises(RuntimeError, match="batch_invariant 2: must be -1"):
        torch.ops.gemmkit.linear(x, w, batch_invariant=2)
    with pytest.raises(RuntimeError, match="batch_invariant -3"):
        torch.ops.gemmkit.linear_out(x, w, None, torch.empty(3, 8), batch_invariant=-3)


@pytest.mark.parametrize("shape", [(3, 16), (2, 3, 16), (2, 0, 16), (0, 16), (16,),
                                   (1,) * 19 + (16,)], ids=str)
@pytest.mark.parametrize("out_dtype", [None, torch.float32])
def test_allocated_output_is_a_contiguous_tensor_like_new_empty(shape, out_dtype):
    torch.manual_seed(len(shape))
    x = torch.randn(shape).bfloat16()
    w = torch.randn(8, 16).bfloat16()
    out = torch.ops.gemmkit.linear(x, w, None, out_dtype)
    expected = x.new_empty((*shape[:-1], 8), dtype=out_dtype or x.dtype)
    assert out.shape == expected.shape and out.stride() == expected.stride()
    assert out.dtype == expected.dtype and out.device == expected.device
    assert not out.requires_grad
    assert_close_to(out, reference(x, w, None, out.dtype), out.dtype)


def test_allocated_output_of_an_x_whose_leading_dims_do_not_collapse():
    x = torch.randn(4, 3, 16).transpose(0, 1)  # (3, 4, 16), rows not one stride apart
    w = torch.randn(8, 16)
    out = torch.ops.gemmkit.linear(x, w)
    assert out.shape == (3, 4, 8) and out.is_contiguous()
    assert_close_to(out, reference(x, w, None, torch.float32), torch.float32)


def test_op_with_inputs_that_require_grad_runs_and_refuses_backward():
    x = torch.randn(2, 16)
    w = torch.randn(8, 16, requires_grad=True)
    out = torch.ops.gemmkit.linear(x, w)
    assert out.requires_grad
    assert_close_to(out.detach(), reference(x, w.detach(), None, torch.float32), torch.float32)
    with pytest.raises(RuntimeError, match="no backward"):
        out.sum().backward()
    with torch.no_grad():
        assert not torch.ops.gemmkit.linear(x, w).requires_grad
    with pytest.raises(RuntimeError, match=r"^gemmkit::linear: w .*k = 16"):
        torch.ops.gemmkit.linear(x, torch.randn(8, 15, requires_grad=True))


def test_repeated_calls_keep_no_memory():
    resource = pytest.importorskip("resource")
    x, w, out = torch.randn(0, 16), torch.randn(8, 16), torch.empty(0, 8)
    for _ in range(10000):
        torch.ops.gemmkit.linear_out(x, w, None, out, "", -1, None)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(200000):  # a leak of one small string per call would be ~10 MB
        torch.ops.gemmkit.linear_out(x, w, None, out, "", -1, None)
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 4096, f"{grown_kib} KiB more resident after 200000 calls"
