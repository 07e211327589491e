// Launcher of the implicit-GEMM convolution kernel: picks the instantiation (input dtype, output
// dtype, input dilation or not), raises the kernel's dynamic shared memory limit once per device
// (allow_shared_memory: the largest carveout, so that two CTAs of ~100 KiB share an SM) and
// launches the plan's 1-D grid.
#include <atomic>
#include <cstdint>
#include <string>
#include <type_traits>

#include "cuda/common/cuda_check.h"
#include "cuda/common/shared_memory.h"
#include "cuda/conv/common/dispatch.cuh"
#include "cuda/conv/implicit_gemm/implicit_gemm.cuh"
#include "cuda/conv/implicit_gemm/launch.h"

namespace gemmkit::cuda::conv_impl {

namespace {

template <typename T, typename TOut, bool kInputDilation>
void launch_typed(const detail::ConvProblem& p, const ImplicitGemmPlan& plan, cudaStream_t stream) {
  static std::atomic<uint64_t> smem_set{0};
  const auto kernel = conv_implicit_gemm_kernel<T, TOut, kInputDilation>;
  allow_shared_memory(kernel, plan.smem_bytes, smem_set);
  kernel<<<dim3(plan.grid.x, 1, 1), plan.block, static_cast<size_t>(plan.smem_bytes), stream>>>(
      plan, static_cast<const T*>(p.x.data), static_cast<const T*>(p.weight.data),
      p.has_bias ? static_cast<const T*>(p.bias.data) : nullptr, static_cast<TOut*>(p.out.data));
  GEMMKIT_CUDA_CHECK_LAUNCH();
}

}  // namespace

void launch_conv_implicit_gemm(const detail::ConvProblem& p, const ImplicitGemmPlan& plan,
                               cudaStream_t stream) {
  if (plan.grid.x == 0 || plan.block != kImplicitThreads || plan.smem_bytes != kImplicitSmemBytes) {
    throw Error("gemmkit::conv: internal error: implicit-GEMM plan with grid " +
                std::to_string(plan.grid.x) + ", block " + std::to_string(plan.block) + ", smem " +
                std::to_string(plan.smem_bytes));
  }
  dispatch_types(p.x.dtype, p.out.dtype, [&](auto in_tag, auto out_tag) {
    using T = typename decltype(in_tag)::type;
    using TOut = typename decltype(out_tag)::type;
    if constexpr (std::is_same_v<T, float>) {
      throw Error("gemmkit::conv: internal error: implicit-GEMM kernel with f32 x");
    } else if (plan.input_dilation) {
      launch_typed<T, TOut, true>(p, plan, stream);
    } else {
      launch_typed<T, TOut, false>(p, plan, stream);
    }
  });
}

}  // namespace gemmkit::cuda::conv_impl
