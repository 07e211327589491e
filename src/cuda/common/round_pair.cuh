// Two fp32 values rounded to a 16-bit type and packed, as the 16-bit stores of the epilogues
// (stmatrix staging, paired stores) take them. Device code.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace gemmkit::cuda {

// Two values rounded to the 16-bit type T (each to nearest even on its own, as from_float
// does), packed low-first into one 32-bit word.
template <typename T>
__device__ __forceinline__ uint32_t round_pair(float lo, float hi) {
  static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>, "bf16 or f16");
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&pair);
  } else {
    const __half2 pair = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const uint32_t*>(&pair);
  }
}

}  // namespace gemmkit::cuda
