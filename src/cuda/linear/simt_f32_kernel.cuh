// linear for f32 inputs: out[n, m] = x[n, k] . w[m, k]^T (+ bias), plain fp32 on CUDA cores.
//
// Contract: one thread per output element (grid-stride, 64-bit indices), k summed in ascending
// order with fused multiply-adds, bias added last. Outside the tensor-core family and its
// bitwise contract (f32 operands would lose precision in bf16 MMAs). Wins: it is the only f32
// path; f32 linear is not a decode hot spot.
#pragma once

#include <cstdint>

namespace gemmkit::cuda::linear_family {

template <typename Out>
__global__ void __launch_bounds__(256)
    linear_simt_f32_kernel(const float* x, int64_t x_row_stride, int64_t x_col_stride,
                           const float* w, int64_t w_row_stride, int64_t w_col_stride,
                           const float* bias, int64_t bias_stride, Out* out, int64_t out_row_stride,
                           int64_t out_col_stride, int64_t n, int64_t m, int64_t k) {
  const int64_t total = n * m;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += stride) {
    const int64_t row = e / m;  // batch row
    const int64_t col = e % m;  // consecutive threads -> consecutive weight rows (coalesced out)
    const float* xr = x + row * x_row_stride;
    const float* wr = w + col * w_row_stride;
    float acc = 0.f;
    for (int64_t i = 0; i < k; ++i)
      acc = fmaf(__ldg(xr + i * x_col_stride), __ldg(wr + i * w_col_stride), acc);
    if (bias != nullptr) acc += __ldg(bias + col * bias_stride);
    if constexpr (sizeof(Out) == 4) {
      out[row * out_row_stride + col * out_col_stride] = acc;
    } else {
      out[row * out_row_stride + col * out_col_stride] = Out(acc);
    }
  }
}

}  // namespace gemmkit::cuda::linear_family
