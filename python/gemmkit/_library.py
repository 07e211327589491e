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
def _linear_fake(x, w, bias=None, out_dtype=None, variant="", pdl=-1, workspace=None,
                 batch_invariant=-1):
    torch._check(x.dim() >= 1, lambda: "gemmkit::linear: x must be [..., k]")
    torch._check(w.dim() == 2, lambda: "gemmkit::linear: w must be [m, k]")
    torch._check(x.shape[-1] == w.shape[1], lambda: "gemmkit::linear: x and w disagree on k")
    return x.new_empty((*x.shape[:-1], w.shape[0]), dtype=out_dtype or x.dtype)


@torch.library.register_fake("gemmkit::linear_out")
def _linear_out_fake(x, w, bias, out, variant="", pdl=-1, workspace=None, batch_invariant=-1):
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


_NO_BACKWARD = (
    "gemmkit: the ops have no backward (they are for inference): run the model under "
    "torch.no_grad() / torch.inference_mode(), or keep torch's modules for training"
)


class _NoBackward(torch.autograd.Function):
    """A gemmkit op called with inputs that require grad: the op runs below autograd and its
    output's backward refuses."""

    @staticmethod
    def forward(ctx, op, keyset, *args):
        with torch._C._AutoDispatchBelowAutograd():
            return op.redispatch(keyset & torch._C._after_autograd_keyset, *args)

    @staticmethod
    def backward(ctx, *grads):
        raise RuntimeError(_NO_BACKWARD)


def _any_requires_grad_fallback(*args):
    return any(isinstance(a, torch.Tensor) and a.requires_grad for a in args)


def _autograd_kernel(op):
    """The op's Autograd-key kernel: what torch.library.register_autograd builds for an op whose
    backward refuses, without its per-call Python bookkeeping (the no-grad path is one check and
    the redispatch below autograd)."""
    redispatch = op.redispatch
    after_autograd = torch._C._after_autograd_keyset
    below_autograd = torch._C._AutoDispatchBelowAutograd
    grad_enabled = torch.is_grad_enabled
    any_requires_grad = getattr(torch._C, "_any_requires_grad", _any_requires_grad_fallback)

    def kernel(keyset, *args):
        if grad_enabled() and any_requires_grad(*args):
            return _NoBackward.apply(op, keyset, *args)
        with below_autograd():
            return redispatch(keyset & after_autograd, *args)

    return kernel


# An explicit autograd kernel that refuses to differentiate, instead of torch's fallback (a
# warning on every call with inputs that require grad, then silently missing gradients).
_autograd_library = torch.library.Library("gemmkit", "IMPL")
for _name in ("linear", "conv_general"):
    _autograd_library.impl(
        _name, _autograd_kernel(getattr(torch.ops.gemmkit, _name).default), "Autograd",
        with_keyset=True,
    )
