"""Shared helpers of gemmkit's Python tests."""

import functools

import pytest
import torch

import gemmkit

DTYPES = [torch.bfloat16, torch.float16, torch.float32]
# Largest error, relative to the largest reference magnitude, allowed per dtype: the result is
# rounded once to the dtype (bf16: 2^-9, f16: 2^-12 relative), plus fp32 summation differences.
TOLERANCE = {torch.bfloat16: 1e-2, torch.float16: 2e-3, torch.float32: 1e-4}


def assert_close_to(actual: torch.Tensor, reference: torch.Tensor, dtype: torch.dtype):
    assert actual.shape == reference.shape, (actual.shape, reference.shape)
    actual = actual.double().cpu()
    reference = reference.double().cpu()
    scale = max(reference.abs().max().item(), 1.0) if reference.numel() else 1.0
    error = (actual - reference).abs().max().item() if reference.numel() else 0.0
    assert error <= TOLERANCE[dtype] * scale, f"max error {error} (scale {scale}, {dtype})"


@functools.lru_cache(maxsize=None)
def empty_batches_rejected() -> str:
    """Why the linked gemmkit rejects an empty batch (n = 0), or "" when it accepts one."""
    try:
        gemmkit.linear(torch.empty(0, 8), torch.ones(4, 8))
    except gemmkit.Error as error:
        return str(error)
    return ""


def empty_batch(test):
    """Marks a test of empty batches: expected to fail (strictly) while the linked C++ library
    rejects n = 0, and run as an ordinary test once it accepts it."""
    reason = empty_batches_rejected()
    if reason:
        return pytest.mark.xfail(
            reason=f"the linked gemmkit rejects empty batches: {reason}", strict=True,
            raises=gemmkit.Error,
        )(test)
    return test


def to_channels_last(t: torch.Tensor) -> torch.Tensor:
    """The same tensor values in (n, spatial..., c) memory (channels-last for any rank)."""
    order = (0, *range(2, t.dim()), 1)
    inverse = [order.index(d) for d in range(t.dim())]
    return t.permute(order).contiguous().permute(inverse)


def cuda_skip_reason() -> str:
    if not gemmkit.built_with_cuda():
        return "gemmkit's torch extension was built without the CUDA backend"
    if not torch.cuda.is_available():
        return "no CUDA device is available to torch"
    return ""


requires_cuda = pytest.mark.skipif(bool(cuda_skip_reason()), reason=cuda_skip_reason() or "-")
