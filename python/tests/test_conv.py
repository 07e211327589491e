"""gemmkit's convolutions against F.conv*d / F.conv_transpose*d on the CPU backend."""

import itertools
import random

import pytest
import torch
import torch.nn.functional as F

import gemmkit
from gemmkit import _shapes
from conftest import DTYPES, assert_close_to, empty_batch

CONV = {1: (gemmkit.conv1d, F.conv1d), 2: (gemmkit.conv2d, F.conv2d), 3: (gemmkit.conv3d, F.conv3d)}
CONV_T = {
    1: (gemmkit.conv_transpose1d, F.conv_transpose1d),
    2: (gemmkit.conv_transpose2d, F.conv_transpose2d),
    3: (gemmkit.conv_transpose3d, F.conv_transpose3d),
}
SIZES = {1: (13,), 2: (9, 8), 3: (5, 6, 4)}
KERNELS = {1: (3,), 2: (3, 2), 3: (2, 3, 2)}


def as_double(t):
    return None if t is None else t.double()


# (stride, padding, dilation, groups): the geometry cases every rank runs.
CASES = [(1, 0, 1, 1), (2, 1, 1, 1), (1, 2, 2, 1), (2, 1, 1, 2), (1, 1, 1, 4), (3, 0, 2, 2)]


@pytest.mark.parametrize("spatial", [1, 2, 3])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("stride,padding,dilation,groups", CASES)
@pytest.mark.parametrize("with_bias", [False, True])
def test_conv_matches_torch(spatial, dtype, stride, padding, dilation, groups, with_bias):
    torch.manual_seed(spatial * 100 + groups * 10 + stride)
    ours, theirs = CONV[spatial]
    c, o = 8, 12
    x = torch.randn(2, c, *SIZES[spatial]).to(dtype)
    w = torch.randn(o, c // groups, *KERNELS[spatial]).to(dtype)
    bias = torch.randn(o).to(dtype) if with_bias else None
    out = ours(x, w, bias, stride, padding, dilation, groups)
    ref = theirs(x.double(), w.double(), as_double(bias), stride, padding, dilation, groups)
    assert out.dtype == dtype
    assert_close_to(out, ref, dtype)


@pytest.mark.parametrize("spatial", [1, 2, 3])
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize(
    "stride,padding,output_padding,dilation,groups",
    [(1, 0, 0, 1, 1), (2, 1, 1, 1, 1), (2, 0, 0, 2, 1), (3, 1, 2, 1, 2), (1, 1, 0, 1, 4),
     (2, 2, 1, 2, 2)],
)
def test_conv_transpose_matches_torch(spatial, dtype, stride, padding, output_padding, dilation,
                                      groups):
    torch.manual_seed(spatial * 100 + groups * 10 + stride)
    ours, theirs = CONV_T[spatial]
    c, o = 8, 12
    x = torch.randn(2, c, *SIZES[spatial]).to(dtype)
    w = torch.randn(c, o // groups, *KERNELS[spatial]).to(dtype)
    bias = torch.randn(o).to(dtype)
    out = ours(x, w, bias, stride, padding, output_padding, groups, dilation)
    ref = theirs(x.double(), w.double(), bias.double(), stride, padding, output_padding, groups,
                 dilation)
    assert_close_to(out, ref, dtype)


def test_channels_last_input_and_output():
    x = torch.randn(2, 8, 9, 9).to(memory_format=torch.channels_last)
    w = torch.randn(4, 8, 3, 3).to(memory_format=torch.channels_last)
    out = gemmkit.conv2d(x, w, padding=1)
    assert out.is_contiguous(memory_format=torch.channels_last)
    assert_close_to(out, F.conv2d(x.double(), w.double(), padding=1), torch.float32)


@pytest.mark.parametrize("padding", ["same", "valid", (1, 2)])
def test_padding_forms(padding):
    x = torch.randn(1, 4, 10, 7)
    w = torch.randn(6, 4, 4, 3)
    out = gemmkit.conv2d(x, w, padding=padding, dilation=(1, 2))
    ref = F.conv2d(x.double(), w.double(), padding=padding, dilation=(1, 2))
    assert_close_to(out, ref, torch.float32)


def test_unbatched_input():
    x = torch.randn(4, 10)
    w = torch.randn(6, 4, 3)
    assert_close_to(gemmkit.conv1d(x, w), F.conv1d(x.double(), w.double()), torch.float32)
    wt = torch.randn(4, 6, 3)
    assert_close_to(gemmkit.conv_transpose1d(x, wt, stride=2),
                    F.conv_transpose1d(x.double(), wt.double(), stride=2), torch.float32)


@pytest.mark.parametrize("dtype", DTYPES)
def test_conv_general_nhwc(dtype):
    x = torch.randn(2, 7, 6, 8).to(dtype)  # NHWC
    w = torch.randn(6, 3, 3, 4).to(dtype)  # OHWI, groups 2
    out = gemmkit.conv_general(x, w, stride=[2, 1], padding_lo=[1, 0], padding_hi=[2, 1],
                               kernel_dilation=[1, 2], groups=2)
    ref = F.conv2d(F.pad(x.permute(0, 3, 1, 2).double(), (0, 1, 1, 2)),
                   w.permute(0, 3, 1, 2).double(), stride=(2, 1), dilation=(1, 2), groups=2)
    assert_close_to(out, ref.permute(0, 2, 3, 1), dtype)


def test_conv_general_input_dilation_flip_and_out():
    x = torch.randn(1, 5, 5, 3)
    w = torch.randn(2, 3, 3, 3)
    expected = gemmkit.conv_output_shape(x.shape, w.shape, padding_lo=2, padding_hi=2,
                                         input_dilation=2)
    out = torch.empty(expected)
    result = gemmkit.conv_general(x, w, padding_lo=2, padding_hi=2, input_dilation=2, flip=True,
                                  out=out)
    assert result is out
    ref = F.conv_transpose2d(x.permute(0, 3, 1, 2).double(),
                             w.permute(3, 0, 1, 2).double(), stride=2)
    assert_close_to(out, ref.permute(0, 2, 3, 1), torch.float32)


def test_f32_out_of_bf16_conv():
    x = torch.randn(1, 6, 6, 8).bfloat16()
    w = torch.randn(4, 3, 3, 8).bfloat16()
    out = gemmkit.conv_general(x, w, padding_lo=1, padding_hi=1, out_dtype=torch.float32)
    assert out.dtype == torch.float32
    ref = F.conv2d(x.permute(0, 3, 1, 2).double(), w.permute(0, 3, 1, 2).double(), padding=1)
    assert_close_to(out, ref.permute(0, 2, 3, 1), torch.float32)


@empty_batch
@pytest.mark.parametrize("spatial", [1, 2, 3])
def test_empty_batch(spatial):
    ours, _ = CONV[spatial]
    x = torch.empty(0, 4, *SIZES[spatial])
    w = torch.randn(6, 4, *KERNELS[spatial])
    out = ours(x, w, torch.randn(6), padding=1)
    assert out.shape[:2] == (0, 6)
    ours_t, _ = CONV_T[spatial]
    out_t = ours_t(x, torch.randn(4, 6, *KERNELS[spatial]), stride=2)
    assert out_t.shape[:2] == (0, 6)


CONV_ERRORS = [
    ("stride 0", lambda: gemmkit.conv2d(torch.randn(1, 4, 5, 5), torch.randn(2, 4, 3, 3),
                                        stride=0),
     ["gemmkit::conv", "params.stride"]),
    ("groups do not divide", lambda: gemmkit.conv2d(torch.randn(1, 4, 5, 5),
                                                    torch.randn(3, 2, 3, 3), groups=2),
     ["gemmkit::conv", "params.groups"]),
    ("weight channels", lambda: gemmkit.conv2d(torch.randn(1, 4, 5, 5), torch.randn(2, 3, 3, 3)),
     ["gemmkit::conv", "weight"]),
    ("empty output", lambda: gemmkit.conv2d(torch.randn(1, 4, 2, 2), torch.randn(2, 4, 3, 3)),
     ["gemmkit::conv", "spatial dim"]),
    ("bias shape", lambda: gemmkit.conv2d(torch.randn(1, 4, 5, 5), torch.randn(2, 4, 3, 3),
                                          torch.randn(3)),
     ["gemmkit::conv", "bias"]),
    ("dtype mismatch", lambda: gemmkit.conv2d(torch.randn(1, 4, 5, 5),
                                              torch.randn(2, 4, 3, 3).bfloat16()),
     ["gemmkit::conv", "weight"]),
    ("unsupported dtype", lambda: gemmkit.conv2d(torch.randn(1, 4, 5, 5).double(),
                                                 torch.randn(2, 4, 3, 3).double()),
     ["gemmkit::conv", "torch.float64"]),
    ("rank", lambda: gemmkit.conv_general(torch.randn(4, 5), torch.randn(2, 5)),
     ["gemmkit::conv", "x"]),
    ("out shape", lambda: gemmkit.conv_general(torch.randn(1, 5, 5, 4), torch.randn(2, 3, 3, 4),
                                               out=torch.empty(1, 5, 5, 2)),
     ["gemmkit::conv", "out"]),
    ("parameter entries", lambda: gemmkit.conv_general(torch.randn(1, 5, 5, 4),
                                                       torch.randn(2, 3, 3, 4),
                                                       stride=[1, 1, 1]),
     ["gemmkit::conv", "params.stride"]),
    ("output shape helper", lambda: gemmkit.conv_output_shape([1, 5, 5, 4], [2, 3, 3, 3]),
     ["gemmkit::conv_output_shape", "weight"]),
]


@pytest.mark.parametrize("description,call,words", CONV_ERRORS, ids=[e[0] for e in CONV_ERRORS])
def test_errors_raise_gemmkit_error_with_its_message(description, call, words):
    with pytest.raises(gemmkit.Error) as info:
        call()
    for word in words:
        assert word in str(info.value), f"{description}: {word!r} not in {str(info.value)!r}"


def random_geometry(rng: random.Random):
    spatial = rng.randint(1, 3)
    groups = rng.choice([1, 1, 2, 3])
    c = groups * rng.randint(1, 3)
    o = groups * rng.randint(1, 3)
    x_shape = [rng.randint(1, 3)] + [rng.randint(1, 9) for _ in range(spatial)] + [c]
    w_shape = [o] + [rng.randint(1, 4) for _ in range(spatial)] + [c // groups]
    if rng.random() < 0.05:
        w_shape[-1] += 1  # a channel mismatch: both must reject it
    params = dict(
        stride=[rng.randint(1, 3) for _ in range(spatial)],
        padding_lo=[rng.randint(-2, 3) for _ in range(spatial)],
        padding_hi=[rng.randint(-2, 3) for _ in range(spatial)],
        kernel_dilation=[rng.randint(1, 3) for _ in range(spatial)],
        input_dilation=[rng.randint(1, 3) for _ in range(spatial)],
        groups=groups,
    )
    return x_shape, w_shape, params


def test_python_shape_twin_agrees_with_the_cpp_conv_output_shape():
    rng = random.Random(7)
    agreed_valid = agreed_invalid = 0
    for _ in range(600):
        x_shape, w_shape, params = random_geometry(rng)
        try:
            expected = gemmkit.conv_output_shape(x_shape, w_shape, **params)
        except gemmkit.Error:
            expected = None
        try:
            twin = _shapes.conv_output_shape(x_shape, w_shape, **params)
        except (ValueError, RuntimeError):
            twin = None
        assert twin == expected, (x_shape, w_shape, params)
        agreed_valid += expected is not None
        agreed_invalid += expected is None
    assert agreed_valid > 100 and agreed_invalid > 20


def test_transpose_params_twin_agrees_with_the_cpp_transpose_rule():
    # gemmkit::conv_transpose_params is exercised through the shapes F.conv_transpose*d gives.
    for k, s, p, op, d in itertools.product([1, 3], [1, 2, 3], [0, 1, 2], [0, 1], [1, 2]):
        if op >= s and op >= d:
            continue
        stride, lo, hi, kd, idl = _shapes.conv_transpose_params([k], s, p, op, d)
        x = torch.randn(1, 2, 5)
        w = torch.randn(2, 3, k)
        ref = F.conv_transpose1d(x, w, stride=s, padding=p, output_padding=op, dilation=d)
        shape = _shapes.conv_output_shape([1, 5, 2], [3, k, 2], stride, lo, hi, kd, idl)
        assert shape == [1, ref.shape[2], 3]
