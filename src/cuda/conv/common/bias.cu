// Launcher of the bias pass of the GEMM and cuDNN paths.
#include "cuda/common/cuda_check.h"
#include "cuda/conv/common/bias.cuh"
#include "cuda/conv/common/dispatch.cuh"
#include "cuda/conv/common/launch.h"

namespace gemmkit::cuda::conv_impl {

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
