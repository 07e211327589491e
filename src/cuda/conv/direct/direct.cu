// Launcher of the generic direct kernel.
#include "cuda/common/cuda_check.h"
#include "cuda/conv/common/dispatch.cuh"
#include "cuda/conv/direct/direct.cuh"
#include "cuda/conv/direct/launch.h"

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

}  // namespace gemmkit::cuda::conv_impl
