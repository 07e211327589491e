// Launchers of the generic direct kernel, the unfold kernel and the bias pass.
#include "cuda/common/cuda_check.h"
#include "cuda/conv/conv_bias.cuh"
#include "cuda/conv/conv_direct.cuh"
#include "cuda/conv/conv_dispatch.cuh"
#include "cuda/conv/conv_launch.h"
#include "cuda/conv/conv_unfold.cuh"

namespace gemmkit::cuda::conv_impl {

void launch_conv_direct(const ConvGeometry& g, DType x_dtype, DType out_dtype,
                        const ConvPointers& ptr, LaunchGrid grid, int block, cudaStream_t stream) {
  dispatch_types(x_dtype, out_dtype, [&](auto in_tag, auto out_tag) {
    using T = typename decltype(in_tag)::type;
    using TOut = typename decltype(out_tag)::type;
    conv_direct_kernel<T, TOut><<<dim3(grid.x, grid.y, grid.z), block, 0, stream>>>(
        g, static_cast<const T*>(ptr.x), static_cast<const T*>(ptr.w),
        static_cast<const T*>(ptr.bias), static_cast<TOut*>(ptr.out));
    GEMMKIT_CUDA_CHECK_LAUNCH();
  });
}

void launch_conv_unfold(const ConvGeometry& g, DType x_dtype, int vector, const void* x,
                        void* unfold, int64_t row0, int64_t rows, LaunchGrid grid, int block,
                        cudaStream_t stream) {
  const auto launch = [&](auto elem_bytes) {
    constexpr int kElemBytes = decltype(elem_bytes)::value;
    dispatch_vector<16 / kElemBytes>(vector, [&](auto v) {
      constexpr int kV = decltype(v)::value;
      conv_unfold_kernel<kElemBytes, kV>
          <<<dim3(grid.x, grid.y, grid.z), block, 0, stream>>>(g, x, unfold, row0, rows);
      GEMMKIT_CUDA_CHECK_LAUNCH();
    });
  };
  if (x_dtype == DType::f32) {
    launch(std::integral_constant<int, 4>{});
  } else {
    launch(std::integral_constant<int, 2>{});
  }
}

void launch_conv_bias_pass(DType bias_dtype, DType out_dtype, const float* acc, int64_t acc_ld,
                           void* out, int64_t out_ld, int64_t rows, int64_t o, const void* bias,
                           int64_t bias_stride, LaunchGrid grid, int block, cudaStream_t stream) {
  dispatch_types(bias_dtype, out_dtype, [&](auto in_tag, auto out_tag) {
    using T = typename decltype(in_tag)::type;
    using TOut = typename decltype(out_tag)::type;
    conv_bias_pass_kernel<T, TOut><<<dim3(grid.x, grid.y, grid.z), block, 0, stream>>>(
        acc, acc_ld, static_cast<TOut*>(out), out_ld, rows, o, static_cast<const T*>(bias),
        bias_stride);
    GEMMKIT_CUDA_CHECK_LAUNCH();
  });
}

}  // namespace gemmkit::cuda::conv_impl
