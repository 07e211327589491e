// The canonical reduction of the tiny-GEMM family (docs/linear.md), as device building blocks.
//
// out[i, j] = fold_groups(fold_slices(chain_mma(slice))) + bias[j], rounded once:
//   - k is cut into slices of canonical_slice_k(m, k) from k = 0 (kSliceK = 128, or all of k in
//     one slice for weights of kOneChainMinRows rows and more: linear_contract.h); a slice's
//     partial is a chain of
//     mma.sync.m16n8k16 (fp32 accumulate) over its ceil(len / 16) k16 blocks in ascending order,
//     starting from zero; elements past k are zeros;
//   - slices form groups of kGroupSlices = 4; a group's sum is the left fold of its slices'
//     partials (p0 + p1) + p2 ...;
//   - the total is the left fold of the group sums in ascending order; bias is added last.
// Every variant (reference, any ring depth, tile shape, cluster split, PDL) evaluates exactly
// this expression with the same MMA operand layout (weights as the m16 A operand, batch rows as
// the n8 B operand), so all return the same bits, and row i never depends on other rows.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/linear/linear_contract.h"

namespace gemmkit::cuda::linear_family {

// The exact fp32 value of a 16-bit operand (bias).
__device__ __forceinline__ float widen(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
__device__ __forceinline__ float widen(__half v) {
  return __half2float(v);
}

// Two 16-bit values packed low-first, as the MMA operand registers hold them.
__device__ __forceinline__ uint32_t pack_pair(uint16_t lo, uint16_t hi) {
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

// Number of k16 blocks in slice `slice` of a reduction of length k cut into slices of slice_k.
__device__ __host__ __forceinline__ int64_t slice_blocks(int64_t k, int64_t slice,
                                                         int64_t slice_k) {
  const int64_t remaining = k - slice * slice_k;
  const int64_t len = remaining < slice_k ? remaining : slice_k;
  return (len + 15) / 16;
}
__device__ __host__ __forceinline__ int slice_blocks(int64_t k, int64_t slice) {
  return static_cast<int>(slice_blocks(k, slice, kSliceK));
}

template <typename Out>
__device__ __forceinline__ void store_output(Out* out, int64_t index, float value);

template <>
__device__ __forceinline__ void store_output<float>(float* out, int64_t index, float value) {
  out[index] = value;
}
template <>
__device__ __forceinline__ void store_output<__nv_bfloat16>(__nv_bfloat16* out, int64_t index,
                                                            float value) {
  out[index] = __float2bfloat16_rn(value);
}
template <>
__device__ __forceinline__ void store_output<__half>(__half* out, int64_t index, float value) {
  out[index] = __float2half_rn(value);
}

}  // namespace gemmkit::cuda::linear_family
