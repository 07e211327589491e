// Bias pass of the GEMM paths where cuBLASLt's bias epilogue is not used (BiasMode::pass and
// BiasMode::scratch in common/config.h).
//
// Computes out[r, oc] = round(acc[r, oc] + bias[oc]) for rows r in [0, rows) and oc in [0, o),
// acc being the fp32 GEMM result: out itself when out is f32 (in place: each element is read
// and written by the same thread), else the fp32 scratch of the workspace. One fp32 add and one
// rounding: what a fused epilogue that rounds once would store.
// Contract: int64 indices, any row strides and bias stride, grid-stride over gridDim.x only.
// Mapping: one thread per element, output channel fastest (coalesced).
// When it wins: it is only used where the epilogue cannot be trusted to round once (f32 out
// with a 16-bit bias; 16-bit out with unaligned rows or a strided bias).
#pragma once

#include "cuda/conv/common/dtype.cuh"
#include "cuda/conv/common/geometry.h"

namespace gemmkit::cuda::conv_impl {

template <typename T, typename TOut>
__global__ void __launch_bounds__(256)
    conv_bias_pass_kernel(const float* acc, int64_t acc_ld, TOut* out, int64_t out_ld, int64_t rows,
                          int64_t o, const T* __restrict__ bias, int64_t bias_stride) {
  const int64_t count = rows * o;
  for (int64_t iteration = 0;; ++iteration) {
    const int64_t e = grid_stride_index(blockIdx.x, threadIdx.x, iteration, gridDim.x, blockDim.x);
    if (e >= count) break;
    const int64_t r = div_nonneg(e, o);
    const int64_t oc = e - r * o;
    const float value = acc[r * acc_ld + oc] + to_float(bias[oc * bias_stride]);
    out[r * out_ld + oc] = from_float<TOut>(value);
  }
}

}  // namespace gemmkit::cuda::conv_impl
