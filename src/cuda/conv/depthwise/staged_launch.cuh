// Launch of the staged depthwise kernel (staged.cuh) at kRegisters registers per
// thread: one instantiation per 16-bit x type, out type, kernel size (3, 5, 7) and thread tiles
// per warp row (2, 4). staged.cu holds the kDepthwiseStagedRegisters ones,
// staged_lean.cu the kDepthwiseStagedLeanRegisters ones (depthwise/layout.h).
#pragma once

#include <type_traits>

#include "cuda/common/cuda_check.h"
#include "cuda/conv/common/dispatch.cuh"
#include "cuda/conv/depthwise/launch.h"
#include "cuda/conv/depthwise/staged.cuh"

namespace gemmkit::cuda::conv_impl {

template <typename T, typename TOut, int kK, int kRegisters>
void launch_staged_groups(const ConvGeometry& g, const DepthwiseTiling& t, const ConvPointers& ptr,
                          LaunchGrid grid, int64_t smem_bytes, cudaStream_t stream) {
  const auto run = [&](auto kernel) {
    const unsigned threads = static_cast<unsigned>(32 * t.rows_per_block);
    kernel<<<dim3(grid.x, 1, 1), threads, static_cast<size_t>(smem_bytes), stream>>>(
        g, t, static_cast<const T*>(ptr.x), static_cast<const T*>(ptr.w),
        static_cast<const T*>(ptr.bias), static_cast<TOut*>(ptr.out));
    GEMMKIT_CUDA_CHECK_LAUNCH();
  };
  if (t.runs_per_block == 4 && t.cvt == 8) {
    run(conv_depthwise_staged_kernel<T, TOut, kK, 4, kRegisters>);
  } else if (t.runs_per_block == 2 && t.cvt == 16) {
    run(conv_depthwise_staged_kernel<T, TOut, kK, 2, kRegisters>);
  } else {
    throw Error("gemmkit::conv: internal error: staged depthwise tile of " +
                std::to_string(t.runs_per_block) + " thread tiles x " + std::to_string(t.cvt) +
                " channel pairs");
  }
}

template <int kRegisters>
void launch_staged(const ConvGeometry& g, const DepthwiseTiling& t, DType x_dtype, DType out_dtype,
                   const ConvPointers& ptr, LaunchGrid grid, int64_t smem_bytes,
                   cudaStream_t stream) {
  dispatch_types(x_dtype, out_dtype, [&](auto in_tag, auto out_tag) {
    using T = typename decltype(in_tag)::type;
    using TOut = typename decltype(out_tag)::type;
    if constexpr (std::is_same_v<T, float>) {
      throw Error("gemmkit::conv: internal error: staged depthwise kernel with f32 x");
    } else {
      switch (g.kernel[2]) {
        case 3:
          return launch_staged_groups<T, TOut, 3, kRegisters>(g, t, ptr, grid, smem_bytes, stream);
        case 5:
          return launch_staged_groups<T, TOut, 5, kRegisters>(g, t, ptr, grid, smem_bytes, stream);
        case 7:
          return launch_staged_groups<T, TOut, 7, kRegisters>(g, t, ptr, grid, smem_bytes, stream);
        default:
          throw Error("gemmkit::conv: internal error: staged depthwise kernel " +
                      std::to_string(g.kernel[2]));
      }
    }
  });
}

// The lean instantiations (staged_lean.cu).
void launch_conv_depthwise_staged_lean(const ConvGeometry& g, const DepthwiseTiling& t,
                                       DType x_dtype, DType out_dtype, const ConvPointers& ptr,
                                       LaunchGrid grid, int64_t smem_bytes, cudaStream_t stream);

}  // namespace gemmkit::cuda::conv_impl
