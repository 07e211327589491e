// Launcher of the small-o kernels: the tensor-core one when small_o_config planned it, else the
// CUDA-core one.
#include <type_traits>

#include "cuda/common/cuda_check.h"
#include "cuda/conv/common/dispatch.cuh"
#include "cuda/conv/small_o/launch.h"
#include "cuda/conv/small_o/small_o.cuh"

namespace gemmkit::cuda::conv_impl {

void launch_conv_small_o(const ConvGeometry& g, const SmallOTiling& t, int vector, DType x_dtype,
                         DType out_dtype, const ConvPointers& ptr, LaunchGrid grid, int block,
                         int64_t smem_bytes, cudaStream_t stream) {
  dispatch_types(x_dtype, out_dtype, [&](auto in_tag, auto out_tag) {
    using T = typename decltype(in_tag)::type;
    using TOut = typename decltype(out_tag)::type;
    if (t.mma) {
      if constexpr (std::is_same_v<T, float>) {
        throw Error("gemmkit::conv: internal error: tensor-core small-o kernel with f32 x");
      } else {
        conv_small_o_mma_kernel<T, TOut>
            <<<dim3(grid.x, grid.y, grid.z), block, static_cast<size_t>(smem_bytes), stream>>>(
                g, t, static_cast<const T*>(ptr.x), static_cast<const T*>(ptr.w),
                static_cast<const T*>(ptr.bias), static_cast<TOut*>(ptr.out));
        GEMMKIT_CUDA_CHECK_LAUNCH();
      }
      return;
    }
    dispatch_vector<static_cast<int>(16 / sizeof(T))>(vector, [&](auto v) {
      constexpr int kV = decltype(v)::value;
      const auto run = [&](auto kernel) {
        kernel<<<dim3(grid.x, grid.y, grid.z), block, static_cast<size_t>(smem_bytes), stream>>>(
            g, t, static_cast<const T*>(ptr.x), static_cast<const T*>(ptr.w),
            static_cast<const T*>(ptr.bias), static_cast<TOut*>(ptr.out));
        GEMMKIT_CUDA_CHECK_LAUNCH();
      };
      if (g.o <= 4) {
        run(conv_small_o_kernel<T, TOut, kV, 4>);
        return;
      }
      // o > 4 takes vectors of at most 8 bytes (small_o_config): 16-byte ones would spill.
      if constexpr (kV * sizeof(T) <= 8) {
        run(conv_small_o_kernel<T, TOut, kV, kSmallOMaxO>);
      } else {
        throw Error("gemmkit::conv: internal error: small-o kernel with o = " +
                    std::to_string(g.o) + " and " + std::to_string(kV) + "-element vectors");
      }
    });
  });
}

}  // namespace gemmkit::cuda::conv_impl
