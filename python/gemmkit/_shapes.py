"""Pure-Python twins of gemmkit's shape rules (src/api/conv.cpp), safe on SymInts.

They give the fake (meta) kernels their output shapes under torch.compile, so they must agree
with the C++ ``gemmkit::conv_output_shape`` and ``gemmkit::conv_transpose_params``; the tests
compare them. Checks on values that may be symbolic go through ``torch._check`` (a runtime
assertion in compiled code) instead of Python comparisons (which would specialize them).
"""

from __future__ import annotations

from typing import List, Sequence, Tuple, Union

import torch

IntOrSeq = Union[int, Sequence[int]]


def expand(name: str, values: IntOrSeq, default: int, spatial: int) -> List[int]:
    """A parameter as one value per spatial dim: empty -> default, one value -> broadcast."""
    if isinstance(values, int) or isinstance(values, torch.SymInt):
        return [values] * spatial
    values = list(values)
    if len(values) == 0:
        return [default] * spatial
    if len(values) == 1:
        return values * spatial
    if len(values) != spatial:
        raise ValueError(
            f"{name} {values}: has {len(values)} entries; give 0, 1 or {spatial} "
            "(one per spatial dim)"
        )
    return values


def conv_output_shape(
    x_shape: Sequence[int],
    w_shape: Sequence[int],
    stride: IntOrSeq = (),
    padding_lo: IntOrSeq = (),
    padding_hi: IntOrSeq = (),
    kernel_dilation: IntOrSeq = (),
    input_dilation: IntOrSeq = (),
    groups: int = 1,
) -> List[int]:
    """The out shape of gemmkit.conv_general: (n, out_spatial..., o) for x (n, spatial..., c) and
    weight (o, kernel..., c / groups). An empty batch (n = 0) gives an empty output."""
    rank = len(x_shape)
    if rank < 3 or rank > 5:
        raise ValueError(
            f"x shape {list(x_shape)}: has rank {rank}; conv takes (n, spatial..., c) with "
            "1, 2 or 3 spatial dims (rank 3-5)"
        )
    if len(w_shape) != rank:
        raise ValueError(
            f"weight shape {list(w_shape)}: has rank {len(w_shape)}; must equal x's rank {rank}"
        )
    spatial = rank - 2
    s = expand("stride", stride, 1, spatial)
    lo = expand("padding_lo", padding_lo, 0, spatial)
    hi = expand("padding_hi", padding_hi, 0, spatial)
    kd = expand("kernel_dilation", kernel_dilation, 1, spatial)
    idl = expand("input_dilation", input_dilation, 1, spatial)
    n, c, o = x_shape[0], x_shape[-1], w_shape[0]
    torch._check(n >= 0, lambda: f"x shape {list(x_shape)}: the batch must be >= 0")
    if isinstance(groups, int) and groups < 1:
        raise ValueError(f"groups {groups}: must be >= 1")
    torch._check(c % groups == 0, lambda: f"groups {groups}: must divide the input channels {c}")
    torch._check(o % groups == 0, lambda: f"groups {groups}: must divide the output channels {o}")
    torch._check(
        w_shape[-1] * groups == c,
        lambda: f"weight shape {list(w_shape)}: last dim must be c / groups = {c} / {groups}",
    )
    out = [n]
    for d in range(spatial):
        size, kernel = x_shape[d + 1], w_shape[d + 1]
        padded = (size - 1) * idl[d] + 1 + lo[d] + hi[d]
        extent = (kernel - 1) * kd[d] + 1
        torch._check(
            padded >= extent,
            lambda: f"spatial dim [{d}]: the dilated, padded input size {padded} is smaller than "
            f"the dilated kernel extent {extent}; the output would be empty",
        )
        out.append((padded - extent) // s[d] + 1)
    out.append(o)
    return out


def conv_transpose_params(
    kernel_size: Sequence[int],
    stride: IntOrSeq,
    padding: IntOrSeq,
    output_padding: IntOrSeq,
    dilation: IntOrSeq,
) -> Tuple[List[int], List[int], List[int], List[int], List[int]]:
    """gemmkit::conv_transpose_params: (stride, padding_lo, padding_hi, kernel_dilation,
    input_dilation) of the conv_general (flip = True) that computes a transposed convolution."""
    spatial = len(kernel_size)
    s = expand("stride", stride, 1, spatial)
    pad = expand("padding", padding, 0, spatial)
    out_pad = expand("output_padding", output_padding, 0, spatial)
    dil = expand("dilation", dilation, 1, spatial)
    lo, hi = [], []
    for d in range(spatial):
        if out_pad[d] < 0 or (out_pad[d] >= s[d] and out_pad[d] >= dil[d]):
            raise ValueError(
                f"output_padding[{d}] {out_pad[d]}: must be >= 0 and smaller than stride "
                f"({s[d]}) or dilation ({dil[d]})"
            )
        if pad[d] < 0:
            raise ValueError(f"padding[{d}] {pad[d]}: must be >= 0")
        low = dil[d] * (kernel_size[d] - 1) - pad[d]
        lo.append(low)
        hi.append(low + out_pad[d])
    return [1] * spatial, lo, hi, dil, s
