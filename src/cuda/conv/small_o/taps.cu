// Launcher of the taps kernel (taps.cuh, and its TMA-fed form,
// taps_tma.cuh, when the plan has tma_stages): picks the instantiation (x dtype, out
// dtype, 4 or 8 n-tiles), opts the kernel in to the device's shared memory once per device and
// launches the plan's 1-D grid.
#include <atomic>
#include <cstdint>
#include <string>
#include <type_traits>

#include "cuda/common/cuda_check.h"
#include "cuda/common/shared_memory.h"
#include "cuda/common/tensor_map.h"
#include "cuda/conv/common/dispatch.cuh"
#include "cuda/conv/small_o/launch.h"
#include "cuda/conv/small_o/taps.cuh"
#include "cuda/conv/small_o/taps_tma.cuh"

namespace gemmkit::cuda::conv_impl {

namespace {

template <typename T, typename TOut, int kNTiles>
void launch_typed(const ConvGeometry& g, const SmallOTapsTiling& t, const ConvPointers& ptr,
                  LaunchGrid grid, int64_t smem_bytes, cudaStream_t stream) {
  // The limit is raised to the device's maximum, so that every plan's shared memory fits.
  static std::atomic<uint64_t> smem_set{0};
  const auto kernel = conv_small_o_taps_kernel<T, TOut, kNTiles>;
  allow_shared_memory(kernel, kAllSharedMemory, smem_set);
  kernel<<<dim3(grid.x, 1, 1), kSmallOTapsThreads, static_cast<size_t>(smem_bytes), stream>>>(
      g, t, static_cast<const T*>(ptr.x), static_cast<const T*>(ptr.w),
      static_cast<const T*>(ptr.bias), static_cast<TOut*>(ptr.out));
  GEMMKIT_CUDA_CHECK_LAUNCH();
}

// The TMA form (taps_tma.cuh) with its own plan `t` (tma_stages > 0).
template <typename T, typename TOut>
void launch_tma_typed(const ConvGeometry& g, const SmallOTapsTiling& t, const ConvPointers& ptr,
                      cudaStream_t stream) {
  static std::atomic<uint64_t> smem_set{0};
  const auto kernel = conv_small_o_taps_tma_kernel<T, TOut>;
  allow_shared_memory(kernel, kAllSharedMemory, smem_set);
  const SmallOTapsTmaMap m = small_o_taps_tma_map(g, t);
  const CUtensorMap x_map = tensor_map_16bit(ptr.x, 5, m.dims, m.byte_strides, m.box);
  kernel<<<dim3(static_cast<unsigned>(t.grid), 1, 1), kSmallOTapsTmaThreads,
           static_cast<size_t>(t.smem_bytes()), stream>>>(g, t, x_map, static_cast<const T*>(ptr.w),
                                                          static_cast<const T*>(ptr.bias),
                                                          static_cast<TOut*>(ptr.out));
  GEMMKIT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_conv_small_o_taps(const ConvGeometry& g, const SmallOTapsTiling& t, DType x_dtype,
                              DType out_dtype, const ConvPointers& ptr, LaunchGrid grid,
                              int64_t smem_bytes, cudaStream_t stream) {
  if (!t.active || int64_t{grid.x} != t.grid || smem_bytes != t.smem_bytes() ||
      (t.n_tiles != 4 && t.n_tiles != 8) || (t.tma_stages > 0 && t.n_tiles != 4)) {
    throw Error("gemmkit::conv: internal error: small-o taps plan with grid " +
                std::to_string(grid.x) + " (planned " + std::to_string(t.grid) + "), smem " +
                std::to_string(smem_bytes) + ", n_tiles " + std::to_string(t.n_tiles));
  }
  dispatch_types(x_dtype, out_dtype, [&](auto in_tag, auto out_tag) {
    using T = typename decltype(in_tag)::type;
    using TOut = typename decltype(out_tag)::type;
    if constexpr (std::is_same_v<T, float>) {
      throw Error("gemmkit::conv: internal error: small-o taps kernel with f32 x");
    } else if (t.tma_stages > 0) {
      launch_tma_typed<T, TOut>(g, t, ptr, stream);
    } else if (t.n_tiles == 4) {
      launch_typed<T, TOut, 4>(g, t, ptr, grid, smem_bytes, stream);
    } else {
      launch_typed<T, TOut, 8>(g, t, ptr, grid, smem_bytes, stream);
    }
  });
}

}  // namespace gemmkit::cuda::conv_impl
