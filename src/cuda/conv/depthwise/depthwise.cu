// Launcher of the depthwise kernel: picks the instantiation of the variant depthwise_config chose
// (window variants only at their own vector width; the generic one at 1, 2 or 4 channels; the
// blocked variant in blocked.cu).
#include "cuda/common/cuda_check.h"
#include "cuda/conv/common/dispatch.cuh"
#include "cuda/conv/depthwise/depthwise.cuh"
#include "cuda/conv/depthwise/launch.h"

namespace gemmkit::cuda::conv_impl {

void launch_conv_depthwise(const ConvGeometry& g, const DepthwiseTiling& t, int vector,
                           DType x_dtype, DType out_dtype, const ConvPointers& ptr, LaunchGrid grid,
                           int64_t smem_bytes, cudaStream_t stream) {
  if (t.variant == DepthwiseVariant::mma) {
    launch_conv_depthwise_mma(g, t, x_dtype, out_dtype, ptr, grid, smem_bytes, stream);
    return;
  }
  if (t.variant == DepthwiseVariant::staged) {
    launch_conv_depthwise_staged(g, t, x_dtype, out_dtype, ptr, grid, smem_bytes, stream);
    return;
  }
  if (t.variant == DepthwiseVariant::blocked) {
    launch_conv_depthwise_blocked(g, t, vector, x_dtype, out_dtype, ptr, grid, smem_bytes, stream);
    return;
  }
  const dim3 block(static_cast<unsigned>(t.cvt), static_cast<unsigned>(t.spb()));
  dispatch_types(x_dtype, out_dtype, [&](auto in_tag, auto out_tag) {
    using T = typename decltype(in_tag)::type;
    using TOut = typename decltype(out_tag)::type;
    const auto run = [&](auto kernel) {
      kernel<<<dim3(grid.x, grid.y, grid.z), block, static_cast<size_t>(smem_bytes), stream>>>(
          g, t, static_cast<const T*>(ptr.x), static_cast<const T*>(ptr.w),
          static_cast<const T*>(ptr.bias), static_cast<TOut*>(ptr.out));
      GEMMKIT_CUDA_CHECK_LAUNCH();
    };
    const auto expect_vector = [&](int want) {
      if (vector != want) {
        throw Error("gemmkit::conv: internal error: depthwise variant " +
                    std::to_string(static_cast<int>(t.variant)) + " with vector " +
                    std::to_string(vector));
      }
    };
    constexpr int kNarrowV = static_cast<int>(16 / sizeof(T));
    if (t.variant == DepthwiseVariant::narrow) {
      expect_vector(kNarrowV);
      if (g.stride[2] == 1) {
        run(conv_depthwise_kernel<T, TOut, kNarrowV, kDepthwiseNarrowRun, kDepthwiseNarrowTaps, 1>);
      } else {
        run(conv_depthwise_kernel<T, TOut, kNarrowV, kDepthwiseNarrowRun, kDepthwiseNarrowTaps, 2>);
      }
      return;
    }
    if (t.variant == DepthwiseVariant::wide) {
      expect_vector(kDepthwiseWideVector);
      if (g.stride[2] == 1) {
        run(conv_depthwise_kernel<T, TOut, kDepthwiseWideVector, kDepthwiseWideRun,
                                  kDepthwiseWideTaps, 1>);
      } else {
        run(conv_depthwise_kernel<T, TOut, kDepthwiseWideVector, kDepthwiseWideRun,
                                  kDepthwiseWideTaps, 2>);
      }
      return;
    }
    dispatch_vector<kDepthwiseMaxGenericVector>(vector, [&](auto v) {
      constexpr int kV = decltype(v)::value;
      run(conv_depthwise_kernel<T, TOut, kV, kDepthwiseGenericRun, 0, 1>);
    });
  });
}

}  // namespace gemmkit::cuda::conv_impl
