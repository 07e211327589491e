// Compile-time dispatch of the convolution launchers over element types and vector widths.
// Host code of the .cu launchers only.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>
#include <type_traits>

#include "gemmkit/gemmkit.h"

namespace gemmkit::cuda::conv_impl {

template <typename T>
struct TypeTag {
  using type = T;
};

// Calls f(TypeTag<T>, TypeTag<TOut>) for x's element type T and the output type TOut (T or f32).
template <typename F>
void dispatch_types(DType x_dtype, DType out_dtype, F&& f) {
  const bool f32_out = out_dtype == DType::f32;
  switch (x_dtype) {
    case DType::bf16:
      if (f32_out) {
        f(TypeTag<__nv_bfloat16>{}, TypeTag<float>{});
      } else {
        f(TypeTag<__nv_bfloat16>{}, TypeTag<__nv_bfloat16>{});
      }
      return;
    case DType::f16:
      if (f32_out) {
        f(TypeTag<__half>{}, TypeTag<float>{});
      } else {
        f(TypeTag<__half>{}, TypeTag<__half>{});
      }
      return;
    case DType::f32:
      f(TypeTag<float>{}, TypeTag<float>{});
      return;
  }
  throw Error("gemmkit::conv: internal error: dtype value " +
              std::to_string(static_cast<int>(x_dtype)) + " reached a CUDA launcher");
}

// Calls f(std::integral_constant<int, V>) for V = vector in {1, 2, 4, 8}, V <= kMaxV (only
// those are instantiated).
template <int kMaxV, typename F>
void dispatch_vector(int vector, F&& f) {
  if (vector == 1) {
    f(std::integral_constant<int, 1>{});
    return;
  }
  if constexpr (kMaxV >= 2) {
    if (vector == 2) {
      f(std::integral_constant<int, 2>{});
      return;
    }
  }
  if constexpr (kMaxV >= 4) {
    if (vector == 4) {
      f(std::integral_constant<int, 4>{});
      return;
    }
  }
  if constexpr (kMaxV >= 8) {
    if (vector == 8) {
      f(std::integral_constant<int, 8>{});
      return;
    }
  }
  throw Error("gemmkit::conv: internal error: vector width " + std::to_string(vector) +
              " (at most " + std::to_string(kMaxV) + " here)");
}

}  // namespace gemmkit::cuda::conv_impl
