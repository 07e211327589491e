"""torch.nn modules whose forward runs through gemmkit, and ``patch`` to swap them into a model.

Each module is a subclass of its torch.nn counterpart with the same parameters, buffers and
state_dict keys; only forward differs. Convolution weights are kept in channels-last memory (the
layout gemmkit reads in place; the shapes, and so state_dict, are unchanged). The ops have no
backward: these modules are for inference.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from . import functional as gf

__all__ = [
    "Linear", "Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d",
    "ConvTranspose3d", "patch",
]


def _channels_last_(param: torch.nn.Parameter) -> None:
    """Stores (d0, d1, rest...) in (d0, rest..., d1) memory, shape unchanged."""
    dims = param.dim()
    order = (0, *range(2, dims), 1)
    inverse = [order.index(d) for d in range(dims)]
    with torch.no_grad():
        param.data = param.data.permute(order).contiguous().permute(inverse)


class Linear(torch.nn.Linear):
    """``torch.nn.Linear`` through ``gemmkit.linear``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return gf.linear(x, self.weight, self.bias)

    def _gemmkit_prepare(self) -> None:
        pass


class _ConvMixin:
    _spatial = 0

    def _gemmkit_prepare(self) -> None:
        _channels_last_(self.weight)

    def _load_from_state_dict(self, *args, **kwargs):
        super()._load_from_state_dict(*args, **kwargs)  # copies into the channels-last weight
        if not _is_channels_last(self.weight):
            _channels_last_(self.weight)

    def _gemmkit_input(self, x):
        if self.padding_mode == "zeros":
            return x, self.padding
        # Non-zero padding modes pad in torch (as torch's own _conv_forward does), then convolve
        # without padding.
        return F.pad(x, self._reversed_padding_repeated_twice, mode=self.padding_mode), 0


def _is_channels_last(t: torch.Tensor) -> bool:
    return t.permute(0, *range(2, t.dim()), 1).is_contiguous()


class _Conv(_ConvMixin):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x, padding = self._gemmkit_input(x)
        return gf._conv_nd(self._spatial, x, self.weight, self.bias, self.stride, padding,
                           self.dilation, self.groups)


class Conv1d(_Conv, torch.nn.Conv1d):
    """``torch.nn.Conv1d`` through gemmkit."""
    _spatial = 1

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._gemmkit_prepare()


class Conv2d(_Conv, torch.nn.Conv2d):
    """``torch.nn.Conv2d`` through gemmkit."""
    _spatial = 2

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._gemmkit_prepare()


class Conv3d(_Conv, torch.nn.Conv3d):
    """``torch.nn.Conv3d`` through gemmkit."""
    _spatial = 3

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._gemmkit_prepare()


class _ConvTranspose(_ConvMixin):
    def forward(self, x: torch.Tensor, output_size=None) -> torch.Tensor:
        if self.padding_mode != "zeros":
            raise ValueError("only 'zeros' padding mode is supported for ConvTranspose")
        output_padding = self._output_padding(
            x, output_size, self.stride, self.padding, self.kernel_size, self._spatial,
            self.dilation,
        )
        return gf._conv_transpose_nd(self._spatial, x, self.weight, self.bias, self.stride,
                                     self.padding, output_padding, self.groups, self.dilation)


class ConvTranspose1d(_ConvTranspose, torch.nn.ConvTranspose1d):
    """``torch.nn.ConvTranspose1d`` through gemmkit."""
    _spatial = 1

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._gemmkit_prepare()


class ConvTranspose2d(_ConvTranspose, torch.nn.ConvTranspose2d):
    """``torch.nn.ConvTranspose2d`` through gemmkit."""
    _spatial = 2

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._gemmkit_prepare()


class ConvTranspose3d(_ConvTranspose, torch.nn.ConvTranspose3d):
    """``torch.nn.ConvTranspose3d`` through gemmkit."""
    _spatial = 3

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._gemmkit_prepare()


_REPLACEMENTS = {
    torch.nn.Linear: Linear,
    torch.nn.Conv1d: Conv1d,
    torch.nn.Conv2d: Conv2d,
    torch.nn.Conv3d: Conv3d,
    torch.nn.ConvTranspose1d: ConvTranspose1d,
    torch.nn.ConvTranspose2d: ConvTranspose2d,
    torch.nn.ConvTranspose3d: ConvTranspose3d,
}


def patch(module: torch.nn.Module, *, linear: bool = True, conv: bool = True) -> torch.nn.Module:
    """Swaps, in place, every torch.nn.Linear (``linear``) and Conv / ConvTranspose (``conv``)
    of ``module`` (itself included) for its gemmkit counterpart. The modules keep their
    parameters (the same Parameter objects; conv weights moved to channels-last memory), hooks
    and attributes, so state_dict keys and values, optimizers and references still hold. Only
    modules of exactly those torch classes are swapped (not subclasses). Returns ``module``."""
    for sub in module.modules():
        replacement = _REPLACEMENTS.get(type(sub))
        if replacement is None:
            continue
        if replacement is Linear and not linear:
            continue
        if replacement is not Linear and not conv:
            continue
        sub.__class__ = replacement
        sub._gemmkit_prepare()
    return module
