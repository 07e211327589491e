// Launcher of the tensor-core depthwise variant (mma.cuh): one instantiation per
// 16-bit type (x and out alike) and pieces per tile (1, 2, 4).
#include <type_traits>

#include "cuda/common/cuda_check.h"
#include "cuda/conv/common/dispatch.cuh"
#include "cuda/conv/depthwise/launch.h"
#include "cuda/conv/depthwise/mma.cuh"

namespace gemmkit::cuda::conv_impl {

void launch_conv_depthwise_mma(const ConvGeometry& g, const DepthwiseTiling& t, DType x_dtype,
                               DType out_dtype, const ConvPointers& ptr, LaunchGrid grid,
                               int64_t smem_bytes, cudaStream_t stream) {
  const int pieces = t.run / 8;
  if (t.variant != DepthwiseVariant::mma || t.run % 8 != 0 ||
      (pieces != 1 && pieces != 2 && pieces != 4) ||
      smem_bytes != depthwise_mma_smem_bytes(g, pieces) || smem_bytes > 48 * 1024 ||
      x_dtype != out_dtype || g.kernel[1] > kDepthwiseMmaMaxKernel ||
      g.kernel[2] > kDepthwiseMmaMaxKernel) {
    throw Error("gemmkit::conv: internal error: tensor-core depthwise plan (" +
                std::to_string(pieces) + " pieces, " + std::to_string(smem_bytes) +
                " bytes of shared memory)");
  }
  dispatch_types(x_dtype, out_dtype, [&](auto in_tag, auto out_tag) {
    using T = typename decltype(in_tag)::type;
    using TOut = typename decltype(out_tag)::type;
    if constexpr (std::is_same_v<T, float> || !std::is_same_v<T, TOut>) {
      throw Error("gemmkit::conv: internal error: tensor-core depthwise kernel with f32 x or out");
    } else {
      const auto run = [&](auto kernel) {
        kernel<<<dim3(grid.x, 1, 1), kDepthwiseMmaThreads, static_cast<size_t>(smem_bytes),
                 stream>>>(g, t, static_cast<const T*>(ptr.x), static_cast<const T*>(ptr.w),
                           static_cast<const T*>(ptr.bias), static_cast<T*>(ptr.out));
        GEMMKIT_CUDA_CHECK_LAUNCH();
      };
      if (pieces == 1) {
        run(conv_depthwise_mma_kernel<T, 1>);
      } else if (pieces == 2) {
        run(conv_depthwise_mma_kernel<T, 2>);
      } else {
        run(conv_depthwise_mma_kernel<T, 4>);
      }
    }
  });
}

}  // namespace gemmkit::cuda::conv_impl
