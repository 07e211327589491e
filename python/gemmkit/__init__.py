"""gemmkit for PyTorch: small-batch linear and N-D convolution as torch ops (torch.ops.gemmkit).

CPU tensors run on gemmkit's CPU backend, CUDA tensors on its CUDA backend, on torch's current
stream. The ops work eagerly, inside CUDA graph capture and under torch.compile (fake kernels
are registered for each).
"""

import torch  # first: the extension resolves its torch symbols against the loaded libtorch

from . import _library  # noqa: F401  (loads torch.ops.gemmkit, registers the fake kernels)
from . import nn
from ._shapes import conv_transpose_params
from .functional import (
    Error,
    build_info,
    built_with_cuda,
    conv1d,
    conv2d,
    conv3d,
    conv_general,
    conv_output_shape,
    conv_transpose1d,
    conv_transpose2d,
    conv_transpose3d,
    linear,
)
from .nn import patch

__version__ = "0.1.0"

__all__ = [
    "Error", "build_info", "built_with_cuda", "conv1d", "conv2d", "conv3d", "conv_general",
    "conv_output_shape", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
    "conv_transpose_params", "linear", "nn", "patch",
]
