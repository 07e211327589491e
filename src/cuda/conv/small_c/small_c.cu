// Launcher of the small-c kernel (small_c.cuh): picks the instantiation (x dtype, out dtype, warps
// along N, pixel words held: c_pad <= 4 or <= 8; groups), opts the kernel in to the device's shared
// memory once per device and launches the plan's persistent grid.
#include <atomic>
#include <cstdint>
#include <string>
#include <type_traits>

#include "cuda/common/cuda_check.h"
#include "cuda/common/shared_memory.h"
#include "cuda/conv/common/dispatch.cuh"
#include "cuda/conv/small_c/launch.h"
#include "cuda/conv/small_c/small_c.cuh"

namespace gemmkit::cuda::conv_impl {

namespace {

template <typename T, typename TOut, int kWarpsN, int kPixelWords, bool kGrouped>
void launch_typed(const ConvGeometry& g, const SmallCPlan& plan, const ConvPointers& ptr,
                  cudaStream_t stream) {
  static std::atomic<uint64_t> smem_set{0};
  const auto kernel = conv_small_c_kernel<T, TOut, kWarpsN, kPixelWords, kGrouped>;
  allow_shared_memory(kernel, kAllSharedMemory, smem_set);
  kernel<<<dim3(static_cast<unsigned>(plan.grid), 1, 1), kSmallCThreads,
           static_cast<size_t>(plan.smem_bytes), stream>>>(
      g, plan, static_cast<const T*>(ptr.x), static_cast<const T*>(ptr.w),
      static_cast<const T*>(ptr.bias), static_cast<TOut*>(ptr.out));
  GEMMKIT_CUDA_CHECK_LAUNCH();
}

// The instantiation of the plan's warps along N.
template <typename T, typename TOut, int kPixelWords, bool kGrouped>
void launch_warps(const ConvGeometry& g, const SmallCPlan& plan, const ConvPointers& ptr,
                  cudaStream_t stream) {
  if (plan.warps_n == 1) {
    launch_typed<T, TOut, 1, kPixelWords, kGrouped>(g, plan, ptr, stream);
  } else if (plan.warps_n == 2) {
    launch_typed<T, TOut, 2, kPixelWords, kGrouped>(g, plan, ptr, stream);
  } else {
    launch_typed<T, TOut, 4, kPixelWords, kGrouped>(g, plan, ptr, stream);
  }
}

}  // namespace

void launch_conv_small_c(const ConvGeometry& g, const SmallCPlan& plan, DType x_dtype,
                         DType out_dtype, const ConvPointers& ptr, cudaStream_t stream) {
  if (!plan.active || plan.grid < 1 || plan.grid > kMaxGridX ||
      (plan.warps_n != 1 && plan.warps_n != 2 && plan.warps_n != 4)) {
    throw Error("gemmkit::conv: internal error: small-c plan with grid " +
                std::to_string(plan.grid) + ", warps_n " + std::to_string(plan.warps_n));
  }
  dispatch_types(x_dtype, out_dtype, [&](auto in_tag, auto out_tag) {
    using T = typename decltype(in_tag)::type;
    using TOut = typename decltype(out_tag)::type;
    if constexpr (std::is_same_v<T, float>) {
      throw Error("gemmkit::conv: internal error: small-c kernel with f32 x");
    } else if (plan.grouped) {
      launch_warps<T, TOut, 2, true>(g, plan, ptr, stream);  // (no held pixels)
    } else if (plan.pixel_words() <= 2) {
      launch_warps<T, TOut, 2, false>(g, plan, ptr, stream);
    } else {
      launch_warps<T, TOut, 4, false>(g, plan, ptr, stream);
    }
  });
}

}  // namespace gemmkit::cuda::conv_impl
