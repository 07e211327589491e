// Launcher of the depthwise kernel.
#include "cuda/common/cuda_check.h"
#include "cuda/conv/conv_depthwise.cuh"
#include "cuda/conv/conv_dispatch.cuh"
#include "cuda/conv/conv_launch.h"

namespace gemmkit::cuda::conv_impl {

void launch_conv_depthwise(const ConvGeometry& g, const DepthwiseTiling& t, int vector,
                           DType x_dtype, DType out_dtype, const ConvPointers& ptr, LaunchGrid grid,
                           int64_t smem_bytes, cudaStream_t stream) {
  const bool window = g.kernel[2] <= kDepthwiseMaxRegisterTaps && g.stride[2] == 1 &&
                      g.kdil[2] == 1 && g.idil[2] == 1;
  const dim3 block(static_cast<unsigned>(t.cvt), static_cast<unsigned>(t.spb));
  dispatch_types(x_dtype, out_dtype, [&](auto in_tag, auto out_tag) {
    using T = typename decltype(in_tag)::type;
    using TOut = typename decltype(out_tag)::type;
    dispatch_vector<kDepthwiseMaxVector>(vector, [&](auto v) {
      constexpr int kV = decltype(v)::value;
      const auto run = [&](auto kernel) {
        kernel<<<dim3(grid.x, grid.y, grid.z), block, static_cast<size_t>(smem_bytes), stream>>>(
            g, t, static_cast<const T*>(ptr.x), static_cast<const T*>(ptr.w),
            static_cast<const T*>(ptr.bias), static_cast<TOut*>(ptr.out));
        GEMMKIT_CUDA_CHECK_LAUNCH();
      };
      if (window) {
        run(conv_depthwise_kernel<T, TOut, kV, true>);
      } else {
        run(conv_depthwise_kernel<T, TOut, kV, false>);
      }
    });
  });
}

}  // namespace gemmkit::cuda::conv_impl
