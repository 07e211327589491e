// Layout rules of the convolution's tensors that several paths share: element sizes, channel and
// position strides, the weight as a matrix, alignments and vector widths. Pure host code.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/problems.h"

namespace gemmkit::cuda::conv_impl {

// Stride of the single index formed by merging dims [0, count) of a tensor (row-major, as the
// flat output position is formed): the stride of the innermost dim of size > 1 when every dim of
// size > 1 steps by the extent of the next inner one; 0 when all sizes are 1 (one row: any stride
// works); -1 when the dims do not merge.
inline int64_t merged_stride(const int64_t* shape, const int64_t* strides, int count) {
  int64_t stride = 0;  // of the merged inner part; 0 = nothing of size > 1 seen yet
  int64_t extent = 1;  // elements in the merged inner part
  for (int i = count - 1; i >= 0; --i) {
    if (shape[i] == 1) continue;
    if (stride == 0) {
      stride = strides[i];
    } else if (strides[i] != stride * extent) {
      return -1;
    }
    extent *= shape[i];
  }
  return stride;
}

// Row stride of the flat output-position index of x (dims 0..S of (n, spatial..., c)) or of out:
// merged_stride over the batch and spatial dims.
inline int64_t position_stride(const Tensor& t) {
  return merged_stride(t.shape, t.strides, t.rank - 1);
}

// The weight (o, kernel..., c/groups) as a matrix [o][kernel_positions * c/groups]: returns the
// row (output channel) stride when every row is contiguous (channel stride 1, kernel dims
// row-major over the channels), the rows do not overlap, and it is >= 1; else -1.
inline int64_t weight_row_stride(const detail::ConvProblem& p) {
  const Tensor& w = p.weight;
  const int64_t row = p.kernel_positions() * p.in_channels_per_group;
  const int64_t inner = merged_stride(w.shape + 1, w.strides + 1, w.rank - 1);
  if (inner != 1 && !(inner == 0 && row == 1)) return -1;
  if (p.out_channels == 1) return row;
  return w.strides[0] >= row ? w.strides[0] : -1;
}

// Largest power of two (<= 256) dividing `address` (256 for 0): the alignment cuBLASLt is told.
inline int address_alignment(uint64_t address) {
  int alignment = 1;
  while (alignment < 256 && (address & static_cast<uint64_t>(alignment)) == 0) alignment *= 2;
  return alignment;
}

inline int pointer_alignment(const void* pointer) {
  return address_alignment(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(pointer)));
}

inline int64_t elem_size(DType dtype) {
  return static_cast<int64_t>(dtype_size(dtype));
}

inline int64_t channel_stride(const Tensor& t) {
  return t.strides[t.rank - 1];
}

// Whether every stride of t but the last (channels) is a multiple of v elements, dims of size 1
// aside: vectors of v channels then start at multiples of v at every position.
inline bool outer_strides_multiple_of(const Tensor& t, int64_t v) {
  for (int i = 0; i + 1 < t.rank; ++i) {
    if (t.shape[i] != 1 && t.strides[i] % v != 0) return false;
  }
  return true;
}

// Why an mma.sync kernel of 16-bit operands cannot take p's dtypes on a device of compute
// capability sm_major.sm_minor ("" when it can): sm_80 or newer, bf16 / f16 x, the weight of x's
// dtype, out of x's dtype or f32.
inline std::string why_not_16bit_mma(const detail::ConvProblem& p, int sm_major, int sm_minor) {
  if (sm_major < 8) {
    return "needs sm_80 or newer (bf16 mma.sync), the device is sm_" + std::to_string(sm_major) +
           std::to_string(sm_minor);
  }
  if (p.x.dtype != DType::bf16 && p.x.dtype != DType::f16) {
    return std::string("x is ") + dtype_name(p.x.dtype) + " (the kernel takes bf16 / f16)";
  }
  if (p.weight.dtype != p.x.dtype) return "the weight's dtype differs from x's";
  if (p.out.dtype != p.x.dtype && p.out.dtype != DType::f32) {
    return "out's dtype is neither x's nor f32";
  }
  return "";
}

// Why the tensor-core small-o kernels cannot read x as 16-byte loads of 8 16-bit channels at
// every pixel ("" when they can): 16-bit x with unit channel stride, c % 8 == 0, a 16-byte
// aligned base and other strides multiples of 8 elements.
inline std::string why_not_x_channel_octets(const detail::ConvProblem& p) {
  if (p.x.dtype == DType::f32) return "f32 x (no 16-bit MMA operands)";
  if (channel_stride(p.x) != 1 && p.in_channels > 1) return "x's channel stride is not 1";
  if (p.in_channels % 8 != 0) return "c % 8 != 0";
  if (pointer_alignment(p.x.data) < 16) return "x is not 16-byte aligned";
  if (!outer_strides_multiple_of(p.x, 8)) return "x's strides are not multiples of 8 elements";
  return "";
}

// Widest vector (elements) for copying runs of `run` channels of x with unit channel stride:
// 16, 8 or 4 bytes when the run, every other stride of x and its address allow it.
inline int vector_width_for(const detail::ConvProblem& p, int64_t run) {
  const int64_t esize = elem_size(p.x.dtype);
  if (channel_stride(p.x) != 1 && p.in_channels > 1) return 1;
  const int alignment = pointer_alignment(p.x.data);
  for (int64_t bytes = 16; bytes > esize; bytes /= 2) {
    const int64_t v = bytes / esize;
    if (run % v == 0 && alignment >= bytes && outer_strides_multiple_of(p.x, v)) {
      return static_cast<int>(v);
    }
  }
  return 1;
}

}  // namespace gemmkit::cuda::conv_impl
