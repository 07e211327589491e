"""gemmkit's ops with the argument semantics of torch.nn.functional.

Thin wrappers over torch.ops.gemmkit: argument normalization and the op call, nothing else on the
hot path. Convolutions take torch-shaped tensors (x (n, c, spatial...), weight in torch's own
layout) and hand gemmkit permuted views of them:

- x is read without a copy when its memory is channels-last (NHWC); any other memory is copied
  into channels-last first (one read and one write of x).
- a convolution weight (o, c / groups, kernel...) is read without a copy when its memory is
  channels-last (o, kernel..., c / groups), else copied into that layout on every call (one read
  and one write of the weight: a few microseconds for a VAE-sized layer on an H200).
  gemmkit.nn's modules keep their weights channels-last, so they never copy.
- a transposed-convolution weight (c, o / groups, kernel...) is handed over as the view
  (o, kernel..., c) with one group: gemmkit reads it in place when its memory is channels-last
  (c, kernel..., o), the layout cuDNN's backward-data takes, and otherwise converts it on the GPU
  itself. With more groups it is regrouped into (o, kernel..., c / groups) by one copy per call.

The output is channels-last memory, as F.conv*d returns for channels-last input.
"""

from __future__ import annotations

from typing import Optional, Sequence, Union

import torch

from . import _shapes

IntOrSeq = Union[int, Sequence[int]]


class Error(RuntimeError):
    """An argument broke one of gemmkit's rules; the message (gemmkit's own) names the argument,
    its value and the rule."""


_linear = torch.ops.gemmkit.linear.default
_linear_out = torch.ops.gemmkit.linear_out.default
_conv_general = torch.ops.gemmkit.conv_general.default
_conv_general_out = torch.ops.gemmkit.conv_general_out.default


def _reraise(error: RuntimeError):
    message = str(error)
    if message.startswith("gemmkit"):
        raise Error(message) from None
    raise error


def linear(
    x: torch.Tensor,
    w: torch.Tensor,
    bias: Optional[torch.Tensor] = None,
    *,
    out_dtype: Optional[torch.dtype] = None,
    out: Optional[torch.Tensor] = None,
    kernel: Optional[str] = None,
    pdl: Optional[bool] = None,
    workspace: Optional[torch.Tensor] = None,
    batch_invariant: Optional[bool] = None,
) -> torch.Tensor:
    """``F.linear(x, w, bias)``: x [..., k], w [m, k], bias [m] -> [..., m], fp32 accumulation.

    x's leading dims are flattened without a copy where their strides allow. ``out_dtype=
    torch.float32`` gives f32 out of 16-bit inputs (router logits). ``out`` receives the result
    ([..., m], its leading dims collapsible). ``kernel`` forces a kernel (``gemmkit info`` lists
    them), ``pdl`` switches programmatic dependent launch, ``workspace`` is a CUDA byte buffer for
    the cuBLASLt path, ``batch_invariant=False`` lets ``auto`` take cuBLASLt where it is faster
    (outside the batch-invariance contract; see LinearOptions in gemmkit.h).
    """
    # The op call and nothing else: the switches are mapped inline (-1: GEMMKIT_LINEAR_PDL,
    # GEMMKIT_LINEAR_BATCH_INVARIANT).
    pdl_value = -1 if pdl is None else int(bool(pdl))
    invariant = -1 if batch_invariant is None else int(bool(batch_invariant))
    try:
        if out is None:
            return _linear(x, w, bias, out_dtype, kernel or "", pdl_value, workspace, invariant)
        _linear_out(x, w, bias, out, kernel or "", pdl_value, workspace, invariant)
        return out
    except RuntimeError as error:
        _reraise(error)


def conv_general(
    x: torch.Tensor,
    w: torch.Tensor,
    bias: Optional[torch.Tensor] = None,
    *,
    stride: IntOrSeq = (),
    padding_lo: IntOrSeq = (),
    padding_hi: IntOrSeq = (),
    kernel_dilation: IntOrSeq = (),
    input_dilation: IntOrSeq = (),
    groups: int = 1,
    flip: bool = False,
    out: Optional[torch.Tensor] = None,
    out_dtype: Optional[torch.dtype] = None,
) -> torch.Tensor:
    """gemmkit::conv with its C++ semantics: x (n, spatial..., c) NHWC, w (o, kernel...,
    c / groups) OHWI, out (n, out_spatial..., o). Parameters: one int, or one per spatial dim."""
    params = (
        _as_list(stride), _as_list(padding_lo), _as_list(padding_hi),
        _as_list(kernel_dilation), _as_list(input_dilation), groups, flip,
    )
    try:
        if out is None:
            return _conv_general(x, w, bias, *params, out_dtype)
        _conv_general_out(x, w, bias, *params, out)
        return out
    except RuntimeError as error:
        _reraise(error)


def _as_list(value: IntOrSeq):
    if isinstance(value, (int, torch.SymInt)):
        return [value]
    return list(value)


def _channels_last_view(t: torch.Tensor) -> torch.Tensor:
    """(d0, d1, rest...) viewed as (d0, rest..., d1); a copy when that view is not contiguous."""
    view = t.permute(0, *range(2, t.dim()), 1)
    return view if view.is_contiguous() else view.contiguous()


def _from_channels_last(t: torch.Tensor) -> torch.Tensor:
    """(n, spatial..., o) viewed as (n, o, spatial...)."""
    return t.permute(0, t.dim() - 1, *range(1, t.dim() - 1))


def _conv_padding(padding, weight: torch.Tensor, stride, dilation, spatial: int):
    if isinstance(padding, str):
        if padding == "valid":
            return [0] * spatial, [0] * spatial
        if padding != "same":
            raise ValueError(f"padding {padding!r}: must be 'same', 'valid', an int or a tuple")
        if any(s != 1 for s in _shapes.expand("stride", stride, 1, spatial)):
            raise ValueError("padding='same' is not supported for strided convolutions")
        dil = _shapes.expand("dilation", dilation, 1, spatial)
        total = [dil[d] * (weight.shape[2 + d] - 1) for d in range(spatial)]
        lo = [t // 2 for t in total]
        return lo, [t - l for t, l in zip(total, lo)]
    pad = _shapes.expand("padding", padding, 0, spatial)
    return pad, pad


def _conv_nd(spatial, x, weight, bias, stride, padding, dilation, groups):
    unbatched = x.dim() == spatial + 1
    if unbatched:
        x = x.unsqueeze(0)
    lo, hi = _conv_padding(padding, weight, stride, dilation, spatial)
    try:
        out = _conv_general(
            _channels_last_view(x), _channels_last_view(weight), bias, _as_list(stride), lo, hi,
            _as_list(dilation), [1], groups, False, None,
        )
    except RuntimeError as error:
        _reraise(error)
    y = _from_channels_last(out)
    return y.squeeze(0) if unbatched else y


def conv1d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """``F.conv1d``: x (n, c, l) or (c, l), weight (o, c / groups, k)."""
    return _conv_nd(1, x, weight, bias, stride, padding, dilation, groups)


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """``F.conv2d``: x (n, c, h, w) or (c, h, w), weight (o, c / groups, kh, kw)."""
    return _conv_nd(2, x, weight, bias, stride, padding, dilation, groups)


def conv3d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """``F.conv3d``: x (n, c, d, h, w) or (c, d, h, w), weight (o, c / groups, kd, kh, kw)."""
    return _conv_nd(3, x, weight, bias, stride, padding, dilation, groups)


def _transpose_weight(weight: torch.Tensor, groups: int, spatial: int) -> torch.Tensor:
    """torch's (c, o / groups, kernel...) as gemmkit's (o, kernel..., c / groups)."""
    kernel_dims = range(2, 2 + spatial)
    if groups == 1:
        return weight.permute(1, *kernel_dims, 0)
    c, o_per_group = weight.shape[0], weight.shape[1]
    kernel = weight.shape[2:]
    grouped = weight.reshape(groups, c // groups, o_per_group, *kernel)
    regrouped = grouped.permute(0, 2, *range(3, 3 + spatial), 1)
    return regrouped.reshape(groups * o_per_group, *kernel, c // groups)


def _conv_transpose_nd(spatial, x, weight, bias, stride, padding, output_padding, groups, dilation):
    unbatched = x.dim() == spatial + 1
    if unbatched:
        x = x.unsqueeze(0)
    if groups < 1 or weight.dim() != spatial + 2 or weight.shape[0] % groups != 0:
        raise Error(
            f"gemmkit::conv_transpose: weight shape {list(weight.shape)} with groups {groups}: "
            f"must be (c, o / groups, kernel...) with groups >= 1 dividing c"
        )
    s, lo, hi, kd, idl = _shapes.conv_transpose_params(
        list(weight.shape[2:]), stride, padding, output_padding, dilation
    )
    try:
        out = _conv_general(
            _channels_last_view(x), _transpose_weight(weight, groups, spatial), bias, s, lo, hi,
            kd, idl, groups, True, None,
        )
    except RuntimeError as error:
        _reraise(error)
    y = _from_channels_last(out)
    return y.squeeze(0) if unbatched else y


def conv_transpose1d(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """``F.conv_transpose1d``: x (n, c, l) or (c, l), weight (c, o / groups, k)."""
    return _conv_transpose_nd(1, x, weight, bias, stride, padding, output_padding, groups,
                              dilation)


def conv_transpose2d(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """``F.conv_transpose2d``: x (n, c, h, w) or (c, h, w), weight (c, o / groups, kh, kw)."""
    return _conv_transpose_nd(2, x, weight, bias, stride, padding, output_padding, groups,
                              dilation)


def conv_transpose3d(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """``F.conv_transpose3d``: x (n, c, d, h, w) or (c, d, h, w), weight (c, o / groups, k...)."""
    return _conv_transpose_nd(3, x, weight, bias, stride, padding, output_padding, groups,
                              dilation)


def conv_output_shape(x_shape, w_shape, *, stride=(), padding_lo=(), padding_hi=(),
                      kernel_dilation=(), input_dilation=(), groups=1):
    """gemmkit::conv_output_shape (the C++ one), for shapes (n, spatial..., c) and (o, kernel...,
    c / groups)."""
    try:
        shape = torch.ops.gemmkit.conv_output_shape(
            list(x_shape), list(w_shape), _as_list(stride), _as_list(padding_lo),
            _as_list(padding_hi), _as_list(kernel_dilation), _as_list(input_dilation), groups,
        )
    except RuntimeError as error:
        _reraise(error)
    return [int(v) for v in shape.tolist()]


def build_info() -> str:
    """gemmkit's build description (version, backends, CUDA architectures)."""
    return bytes(torch.ops.gemmkit.build_info().tolist()).decode()


def built_with_cuda() -> bool:
    """Whether the loaded extension has gemmkit's CUDA backend."""
    return "backends: cpu, cuda" in build_info()
