// Unfold (im2col) of one chunk of output rows, the first half of the unfold + GEMM path.
//
// Computes, for output rows r in [row0, row0 + rows) (flat output positions, row-major over
// (n, out...)), the buffer (index mapping: unfold_source in gemm/layout.h)
//   unfold[r - row0][group][tap][ci] = x[n, src(r, tap)..., group * c/groups + ci]
// or 0 where the tap falls on padding or an input-dilation hole. `tap` is the *weight's* kernel
// index (row-major); with flip it reads window tap K-1-tap, so the GEMM that follows multiplies
// the unfold row by the weight rows as stored. One unfold row holds taps * c elements, so
// group g's slice (taps * c/groups elements at g * taps * c/groups) is a row of the GEMM's B_g.
//
// Contract: raw copy of kElemBytes-byte elements (no conversion), kV elements per access:
// kV > 1 requires x's channel stride 1, c/groups % kV == 0, every other x stride % kV == 0 and
// x's address aligned to kElemBytes * kV (vector_width_for checks); kV == 1 takes any strides.
// The buffer is [rows][taps * c] contiguous, aligned to 256 bytes. int64 indices throughout,
// grid-stride over gridDim.x only.
// Mapping: one thread per kV-element vector, channels fastest, so a warp reads up to 32
// consecutive vectors of one x row and writes 32 consecutive vectors of the buffer (coalesced,
// 16-byte accesses when kElemBytes * kV == 16).
// When it wins: as the first half of unfold + GEMM, for general kernels whose reduction
// (taps * c/groups) is long enough to keep the GEMM busy; its traffic is taps x the input.
#pragma once

#include "cuda/conv/common/dtype.cuh"
#include "cuda/conv/gemm/layout.h"

namespace gemmkit::cuda::conv_impl {

template <int kElemBytes, int kV>
__global__ void __launch_bounds__(256)
    conv_unfold_kernel(const ConvGeometry g, const void* __restrict__ x_raw,
                       void* __restrict__ unfold_raw, int64_t row0, int64_t rows) {
  using Raw = typename RawBits<kElemBytes * kV>::type;
  const char* x = static_cast<const char*>(x_raw);
  Raw* unfold = static_cast<Raw*>(unfold_raw);
  const int64_t row_vectors = g.kernel_positions() * div_nonneg(g.c, kV);
  const int64_t count = rows * row_vectors;
  for (int64_t iteration = 0;; ++iteration) {
    const int64_t e = grid_stride_index(blockIdx.x, threadIdx.x, iteration, gridDim.x, blockDim.x);
    if (e >= count) break;
    int64_t offset = 0;
    Raw value = raw_zero<kElemBytes * kV>();
    if (unfold_source(g, row0, e, kV, offset)) {
      value = *reinterpret_cast<const Raw*>(x + offset * kElemBytes);
    }
    unfold[e] = value;
  }
}

}  // namespace gemmkit::cuda::conv_impl
