// linear reference kernel: out[n, m] = x[n, k] . w[m, k]^T (+ bias), bf16/f16 in, fp32 accumulate.
//
// Contract: evaluates the canonical reduction of canonical.cuh literally, in either form (slices
// of canonical_slice_k(m, k): 128, or all of k for one chain), one warp per 16x8
// output tile (16 weight rows x 8 batch rows), operands read straight from global memory
// through arbitrary strides with bounds checks. Any n, m, k >= 1, any strides and alignment.
// Every fast variant must return exactly these bits. Wins: never on speed; it is the oracle,
// the GEMMKIT_LINEAR_KERNEL=reference escape hatch, and the path for layouts TMA cannot load.
#pragma once

#include "cuda/common/ptx.cuh"
#include "cuda/linear/canonical.cuh"

namespace gemmkit::cuda::linear_family {

template <typename T>
struct StridedMatrix {
  const T* data;
  int64_t rows, cols;
  int64_t row_stride, col_stride;  // in elements

  __device__ __forceinline__ uint16_t bits(int64_t r, int64_t c) const {
    if (r >= rows || c >= cols) return 0;  // zero padding of tails (bits of +0.0)
    return __ldg(reinterpret_cast<const unsigned short*>(data + r * row_stride + c * col_stride));
  }
  __device__ __forceinline__ uint32_t pair(int64_t r, int64_t c) const {
    return pack_pair(bits(r, c), bits(r, c + 1));
  }
};

template <typename T, typename Out>
__global__ void __launch_bounds__(128)
    linear_reference_kernel(StridedMatrix<T> x, StridedMatrix<T> w, const T* bias,
                            int64_t bias_stride, Out* out, int64_t out_row_stride,
                            int64_t out_col_stride, int64_t m_tiles, int64_t tiles) {
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int group = lane >> 2;  // row within the fragment
  const int thread_in_group = lane & 3;
  const int64_t k = x.cols;
  const int64_t slice_k = canonical_slice_k(w.rows, k);
  const int64_t slices = (k + slice_k - 1) / slice_k;
  const int64_t warps_per_block = blockDim.x / 32;
  const int64_t warp_stride = static_cast<int64_t>(gridDim.x) * warps_per_block;

  for (int64_t tile = blockIdx.x * warps_per_block + threadIdx.x / 32; tile < tiles;
       tile += warp_stride) {
    const int64_t m0 = (tile % m_tiles) * 16;
    const int64_t n0 = (tile / m_tiles) * 8;
    float total[4] = {0.f, 0.f, 0.f, 0.f};
    float group_sum[4] = {0.f, 0.f, 0.f, 0.f};
    for (int64_t s = 0; s < slices; ++s) {
      float partial[4] = {0.f, 0.f, 0.f, 0.f};
      const int64_t blocks = slice_blocks(k, s, slice_k);
      for (int64_t b = 0; b < blocks; ++b) {
        const int64_t kc = s * slice_k + b * 16 + thread_in_group * 2;
        const uint32_t a[4] = {w.pair(m0 + group, kc), w.pair(m0 + group + 8, kc),
                               w.pair(m0 + group, kc + 8), w.pair(m0 + group + 8, kc + 8)};
        const uint32_t bb[2] = {x.pair(n0 + group, kc), x.pair(n0 + group, kc + 8)};
        ptx::mma_m16n8k16<T>(partial, a, bb[0], bb[1]);
      }
      const bool first_in_group = s % kGroupSlices == 0;
      for (int i = 0; i < 4; ++i)
        group_sum[i] = first_in_group ? partial[i] : group_sum[i] + partial[i];
      if (s % kGroupSlices == kGroupSlices - 1 || s == slices - 1) {
        const bool first_group = s < kGroupSlices;
        for (int i = 0; i < 4; ++i) total[i] = first_group ? group_sum[i] : total[i] + group_sum[i];
      }
    }
    for (int i = 0; i < 4; ++i) {
      const int64_t row = m0 + group + (i >= 2 ? 8 : 0);       // weight row -> output column
      const int64_t col = n0 + thread_in_group * 2 + (i & 1);  // batch row
      if (row >= w.rows || col >= x.rows) continue;
      float value = total[i];
      if (bias != nullptr) value += widen(bias[row * bias_stride]);
      store_output(out, col * out_row_stride + row * out_col_stride, value);
    }
  }
}

}  // namespace gemmkit::cuda::linear_family
