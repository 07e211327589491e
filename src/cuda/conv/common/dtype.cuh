// Element types of the convolution kernels: conversions to and from the fp32 accumulator, and
// raw vector types for copies. Device code only.
//
// Contract: loads widen exactly (bf16 / f16 -> f32 is exact); stores round to nearest even
// (__float2bfloat16_rn / __float2half_rn), NaN stays NaN, overflow gives infinity.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/common/round_pair.cuh"

namespace gemmkit::cuda::conv_impl {

__device__ __forceinline__ float to_float(float v) {
  return v;
}
__device__ __forceinline__ float to_float(__nv_bfloat16 v) {
  return __bfloat162float(v);
}
__device__ __forceinline__ float to_float(__half v) {
  return __half2float(v);
}

template <typename T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) {
  return v;
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
template <>
__device__ __forceinline__ __half from_float<__half>(float v) {
  return __float2half_rn(v);
}

// An unsigned type of exactly kBytes bytes (2, 4, 8 or 16), for raw aligned copies.
template <int kBytes>
struct RawBits;
template <>
struct RawBits<2> {
  using type = unsigned short;
};
template <>
struct RawBits<4> {
  using type = unsigned int;
};
template <>
struct RawBits<8> {
  using type = uint2;
};
template <>
struct RawBits<16> {
  using type = uint4;
};

template <int kBytes>
__device__ __forceinline__ typename RawBits<kBytes>::type raw_zero() {
  typename RawBits<kBytes>::type z;
  if constexpr (kBytes == 16) {
    z = make_uint4(0u, 0u, 0u, 0u);
  } else if constexpr (kBytes == 8) {
    z = make_uint2(0u, 0u);
  } else {
    z = 0;
  }
  return z;
}

// kV elements of T loaded / stored as one aligned access (sizeof(T) * kV bytes).
template <typename T, int kV>
struct alignas(sizeof(T) * kV) Vec {
  T v[kV];
};

}  // namespace gemmkit::cuda::conv_impl
