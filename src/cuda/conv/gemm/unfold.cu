// Launcher of the unfold kernel of the unfold_gemm path.
#include <type_traits>

#include "cuda/common/cuda_check.h"
#include "cuda/conv/common/dispatch.cuh"
#include "cuda/conv/gemm/launch.h"
#include "cuda/conv/gemm/unfold.cuh"

namespace gemmkit::cuda::conv_impl {

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

}  // namespace gemmkit::cuda::conv_impl
