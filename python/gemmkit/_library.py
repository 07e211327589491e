"""Loads the compiled extension (torch.ops.gemmkit) and registers its fake kernels."""

from __future__ import annotations

import os

import torch

from . import _shapes

_LIBRARY_NAME = "_gemmkit_ops.so"


def library_path() -> str:
    """The extension that gets loaded: GEMMKIT_TORCH_LIBRARY if set (an in-tree build), else the
    one installed beside this package."""
    override = os.environ.get("GEMMKIT_TORCH_LIBRARY", "")
    if override:
        return override
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), _LIBRARY_NAME)


def _load() -> None:
    path = library_path()
    if not os.path.exists(path):
        raise ImportError(
            f"gemmkit: the compiled extension {path} is missing: install the package with "
            "`pip install ./python`, or point GEMMKIT_TORCH_LIBRARY at a built one"
        )
    torch.ops.load_library(path)


_load()


@torch.library.register_fake("gemmkit::linear")
def _linear_fake(x, w, bias=None, out_dtype=None, variant="", pdl=-1, workspace=None):
    torch._check(x.dim() >= 1, lambda: "gemmkit::linear: x must be [..., k]")
    torch._check(w.dim() == 2, lambda: "gemmkit::linear: w must be [m, k]")
    torch._check(x.shape[-1] == w.shape[1], lambda: "gemmkit::linear: x and w disagree on k")
    return x.new_empty((*x.shape[:-1], w.shape[0]), dtype=out_dtype or x.dtype)


@torch.library.register_fake("gemmkit::linear_out")
def _linear_out_fake(x, w, bias, out, variant="", pdl=-1, workspace=None):
    return None


@torch.library.register_fake("gemmkit::conv_general")
def _conv_general_fake(
    x, weight, bias, stride, padding_lo, padding_hi, kernel_dilation, input_dilation, groups,
    flip, out_dtype=None,
):
    shape = _shapes.conv_output_shape(
        x.shape, weight.shape, stride, padding_lo, padding_hi, kernel_dilation, input_dilation,
        groups,
    )
    return x.new_empty(shape, dtype=out_dtype or x.dtype)


@torch.library.register_fake("gemmkit::conv_general_out")
def _conv_general_out_fake(
    x, weight, bias, stride, padding_lo, padding_hi, kernel_dilation, input_dilation, groups,
    flip, out,
):
    return None


@torch.library.register_fake("gemmkit::conv_output_shape")
def _conv_output_shape_fake(
    x_shape, w_shape, stride, padding_lo, padding_hi, kernel_dilation, input_dilation, groups
):
    return torch.empty(len(x_shape), dtype=torch.int64)


@torch.library.register_fake("gemmkit::build_info")
def _build_info_fake():
    return torch.empty(torch.library.get_ctx().new_dynamic_size(), dtype=torch.uint8)


def _no_backward(ctx, *grads):
    raise RuntimeError(
        "gemmkit: the ops have no backward (they are for inference): run the model under "
        "torch.no_grad() / torch.inference_mode(), or keep torch's modules for training"
    )


def _no_context(ctx, inputs, output):
    pass


# An explicit autograd formula that refuses to differentiate, instead of torch's fallback (a
# warning on every call with inputs that require grad, then silently missing gradients).
for _op in ("gemmkit::linear", "gemmkit::conv_general"):
    torch.library.register_autograd(_op, _no_backward, setup_context=_no_context)
