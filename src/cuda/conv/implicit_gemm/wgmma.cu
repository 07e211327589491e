// Launcher of the Hopper implicit-GEMM convolution kernel (wgmma.cuh): encodes the activation,
// weight and (TMA-store epilogue) out tensor maps of the plan, picks the instantiation (input
// dtype, output dtype, positions and channels per tile, epilogue, schedule: cooperative or
// ping-pong), raises the kernel's shared memory limit once per device and launches the persistent
// grid: once, or for a transposed convolution once per group of up to 4 stride phases (the phases
// kernel, wgmma_phases.cuh) or per phase where a group holds one.
#include <atomic>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "cuda/common/cuda_check.h"
#include "cuda/common/shared_memory.h"
#include "cuda/common/tensor_map.h"
#include "cuda/conv/common/dispatch.cuh"
#include "cuda/conv/gemm/launch.h"
#include "cuda/conv/implicit_gemm/wgmma.cuh"
#include "cuda/conv/implicit_gemm/wgmma_halo.cuh"
#include "cuda/conv/implicit_gemm/wgmma_launch.h"
#include "cuda/conv/implicit_gemm/wgmma_maps.h"
#include "cuda/conv/implicit_gemm/wgmma_phases.cuh"
#include "cuda/conv/implicit_gemm/wgmma_pingpong.cuh"
#include "cuda/conv/implicit_gemm/wgmma_plan.h"

namespace gemmkit::cuda::conv_impl {

namespace {

CUtensorMap encode(const void* base, const WgmmaConvMap& m) {
  return tensor_map_16bit_swizzled(base, 5, m.dims, m.byte_strides, m.box, m.element_strides);
}

template <typename T, typename TOut, int kBN, bool kTmaStore, bool kSegmented, bool kNarrowO>
void launch_typed(const detail::ConvProblem& p, const ImplicitWgmmaPlan& plan,
                  const CUtensorMap& x_map, const CUtensorMap& w_map, const CUtensorMap& out_map,
                  cudaStream_t stream) {
  constexpr int kStages = implicit_wgmma_stages(kBN);
  constexpr int64_t kSmem = implicit_wgmma_smem_bytes(kBN, kStages, kTmaStore);
  static std::atomic<uint64_t> smem_set{0};
  const auto kernel =
      conv_implicit_wgmma_kernel<T, TOut, kBN, kStages, kTmaStore, kSegmented, kNarrowO>;
  allow_shared_memory(kernel, kSmem, smem_set);
  const T* const bias = p.has_bias ? static_cast<const T*>(p.bias.data) : nullptr;
  TOut* const out = static_cast<TOut*>(p.out.data);
  const auto main = [&](float4* partials) {
    kernel<<<dim3(static_cast<unsigned>(plan.grid), 1, 1), kWgmmaConvThreads,
             static_cast<size_t>(kSmem), stream>>>(x_map, w_map, out_map, plan, bias, out,
                                                   partials);
    GEMMKIT_CUDA_CHECK_LAUNCH();
  };
  if (!plan.split_parallel) return main(nullptr);
  if constexpr (kSegmented) {
    int device = 0;
    GEMMKIT_CUDA_CHECK(cudaGetDevice(&device));
    std::string why;
    const bool ran = with_conv_workspace(device, plan.workspace_bytes, stream, why, [&](void* ws) {
      float4* const partials = static_cast<float4*>(ws);
      main(partials);
      const int64_t blocks = plan.base_tiles * (kBN / 8);
      conv_implicit_wgmma_fold_kernel<T, TOut>
          <<<dim3(static_cast<unsigned>(blocks), 1, 1), 256, 0, stream>>>(plan, partials, bias,
                                                                          out);
      GEMMKIT_CUDA_CHECK_LAUNCH();
    });
    if (!ran) throw Error("gemmkit::conv: the wgmma implicit GEMM's k-split partials: " + why);
  }
}

template <typename T, typename TOut>
void launch_pingpong(const ImplicitWgmmaPlan& plan, const T* bias, const CUtensorMap& x_map,
                     const CUtensorMap& w_map, const CUtensorMap& out_map, cudaStream_t stream) {
  constexpr int kStages = implicit_wgmma_stages(128);
  constexpr int64_t kSmem = implicit_wgmma_smem_bytes(128, kStages, true);
  const auto run = [&](auto full_tag) {
    static std::atomic<uint64_t> smem_set{0};
    const auto kernel =
        conv_implicit_wgmma_pingpong_kernel<T, TOut, kStages, decltype(full_tag)::value>;
    allow_shared_memory(kernel, kSmem, smem_set);
    kernel<<<dim3(static_cast<unsigned>(plan.grid), 1, 1), kWgmmaConvThreads,
             static_cast<size_t>(kSmem), stream>>>(x_map, w_map, out_map, plan, bias);
    GEMMKIT_CUDA_CHECK_LAUNCH();
  };
  if (implicit_wgmma_full_k_blocks(plan)) {
    run(std::true_type{});
  } else {
    run(std::false_type{});
  }
}

// The halo form (wgmma_halo.cuh) of plan (implicit_wgmma_can_halo): x_map's tile boxes and the
// tail boxes of the row past them.
template <typename T, typename TOut>
void launch_halo(const detail::ConvProblem& p, const ConvGeometry& g, const ImplicitWgmmaPlan& plan,
                 const CUtensorMap& x_map, const CUtensorMap& w_map, const CUtensorMap& out_map,
                 cudaStream_t stream) {
  constexpr int64_t kSmem = implicit_wgmma_halo_smem_bytes();
  static std::atomic<uint64_t> smem_set{0};
  const auto kernel = conv_implicit_wgmma_halo_kernel<T, TOut>;
  allow_shared_memory(kernel, kSmem, smem_set);
  const CUtensorMap x_tail_map = encode(p.x.data, implicit_wgmma_x_tail_map(g, plan));
  const T* const bias = p.has_bias ? static_cast<const T*>(p.bias.data) : nullptr;
  kernel<<<dim3(static_cast<unsigned>(plan.grid), 1, 1), kWgmmaConvThreads,
           static_cast<size_t>(kSmem), stream>>>(x_map, x_tail_map, w_map, out_map, plan, bias);
  GEMMKIT_CUDA_CHECK_LAUNCH();
}

template <typename T, typename TOut, int kBN>
void launch_epilogue(const detail::ConvProblem& p, const ConvGeometry& g,
                     const ImplicitWgmmaPlan& plan, const CUtensorMap& x_map,
                     const CUtensorMap& w_map, cudaStream_t stream) {
  const auto with_segments = [&](auto tma_tag, const CUtensorMap& out_map) {
    constexpr bool kTma = decltype(tma_tag)::value;
    if constexpr (kBN == 128) {
      if (plan.k_segments > 1) {
        return launch_typed<T, TOut, kBN, kTma, true, false>(p, plan, x_map, w_map, out_map,
                                                             stream);
      }
    }
    if (plan.block_o == kWgmmaConvNarrowBlockO) {
      return launch_typed<T, TOut, kBN, kTma, false, true>(p, plan, x_map, w_map, out_map, stream);
    }
    launch_typed<T, TOut, kBN, kTma, false, false>(p, plan, x_map, w_map, out_map, stream);
  };
  if constexpr (sizeof(TOut) == 2) {
    if (plan.tma_store) {
      const CUtensorMap out_map = encode(static_cast<const char*>(p.out.data) + plan.out_base * 2,
                                         implicit_wgmma_out_map(plan, p.out_channels));
      if constexpr (kBN == 256) {
        if (plan.halo) return launch_halo<T, TOut>(p, g, plan, x_map, w_map, out_map, stream);
      }
      if constexpr (kBN == 128) {
        if (plan.pingpong) {
          const T* const bias = p.has_bias ? static_cast<const T*>(p.bias.data) : nullptr;
          return launch_pingpong<T, TOut>(plan, bias, x_map, w_map, out_map, stream);
        }
      }
      return with_segments(std::true_type{}, out_map);
    }
  }
  with_segments(std::false_type{}, CUtensorMap{});
}

// The phases kernel over launch group `group` of `phases` (2 or more phases; no K split).
template <typename T, typename TOut, int kBN>
void launch_phases(const detail::ConvProblem& p, const ConvGeometry& g,
                   const std::vector<ImplicitWgmmaPlan>& phases, const WgmmaConvLaunchGroup& group,
                   const CUtensorMap& w_map, cudaStream_t stream) {
  WgmmaConvPhases launch;
  launch.plans = group.end - group.begin;
  for (int j = 0; j < launch.plans; ++j) {
    const ImplicitWgmmaPlan& t = phases[static_cast<size_t>(group.begin + j)];
    launch.plan[j] = t;
    launch.x_map[j] = encode(p.x.data, implicit_wgmma_x_map(g, t));
    launch.out_map[j] = CUtensorMap{};
    if (sizeof(TOut) == 2 && t.tma_store) {
      launch.out_map[j] = encode(static_cast<const char*>(p.out.data) + t.out_base * 2,
                                 implicit_wgmma_out_map(t, p.out_channels));
    }
    launch.items += t.tiles;
    launch.item_end[j] = launch.items;
  }
  const T* const bias = p.has_bias ? static_cast<const T*>(p.bias.data) : nullptr;
  TOut* const out = static_cast<TOut*>(p.out.data);
  const auto run = [&](auto tma_tag) {
    constexpr bool kTma = decltype(tma_tag)::value;
    constexpr int kStages = implicit_wgmma_stages(kBN);
    constexpr int64_t kSmem = implicit_wgmma_smem_bytes(kBN, kStages, kTma);
    static std::atomic<uint64_t> smem_set{0};
    const auto kernel = conv_implicit_wgmma_phases_kernel<T, TOut, kBN, kStages, kTma>;
    allow_shared_memory(kernel, kSmem, smem_set);
    kernel<<<dim3(static_cast<unsigned>(group.grid), 1, 1), kWgmmaConvThreads,
             static_cast<size_t>(kSmem), stream>>>(w_map, launch, bias, out);
    GEMMKIT_CUDA_CHECK_LAUNCH();
  };
  if constexpr (sizeof(TOut) == 2) {
    if (launch.plan[0].tma_store) return run(std::true_type{});
  }
  run(std::false_type{});
}

// Calls fn(x type tag, out type tag, std::integral_constant<int, block_n>) for p's dtypes (16-bit
// x) and a tile width of 128 or 256 positions.
template <typename Fn>
void dispatch_wgmma(const detail::ConvProblem& p, int block_n, Fn&& fn) {
  dispatch_types(p.x.dtype, p.out.dtype, [&](auto in_tag, auto out_tag) {
    using T = typename decltype(in_tag)::type;
    if constexpr (std::is_same_v<T, float>) {
      throw Error("gemmkit::conv: internal error: wgmma implicit-GEMM kernel with f32 x");
    } else if (block_n == 256) {
      fn(in_tag, out_tag, std::integral_constant<int, 256>{});
    } else {
      fn(in_tag, out_tag, std::integral_constant<int, 128>{});
    }
  });
}

}  // namespace

void launch_conv_implicit_wgmma(const detail::ConvProblem& p, const ImplicitWgmmaPlan& plan,
                                cudaStream_t stream) {
  if (plan.grid <= 0 || plan.grid > kMaxGridX || (plan.block_n != 128 && plan.block_n != 256) ||
      plan.stages != (plan.halo ? kWgmmaConvHaloStages : implicit_wgmma_stages(plan.block_n)) ||
      plan.k_blocks <= 0 || (plan.halo && !implicit_wgmma_can_halo(plan)) ||
      (plan.k_segments > 1 && plan.block_n != 128) ||
      (plan.k_segments > 1 && implicit_wgmma_phase_count(plan) > 1) ||
      (plan.split_parallel && (plan.k_segments <= 1 || plan.tma_store)) ||
      (plan.split_parallel && plan.base_tiles * (plan.block_n / 8) > kMaxGridX) ||
      (plan.pingpong && !implicit_wgmma_can_pingpong(plan)) ||
      (plan.block_o != kWgmmaConvBlockO && plan.block_o != kWgmmaConvNarrowBlockO) ||
      (plan.block_o == kWgmmaConvNarrowBlockO &&
       (plan.k_segments > 1 || implicit_wgmma_phase_count(plan) > 1))) {
    throw Error("gemmkit::conv: internal error: wgmma implicit-GEMM plan with grid " +
                std::to_string(plan.grid) + ", block_n " + std::to_string(plan.block_n) +
                ", block_o " + std::to_string(plan.block_o) + ", stages " +
                std::to_string(plan.stages) + ", k_blocks " + std::to_string(plan.k_blocks) +
                (plan.pingpong ? ", ping-pong" : "") + (plan.halo ? ", halo" : ""));
  }
  const ConvGeometry g = normalize(p);
  const CUtensorMap w_map =
      encode(p.weight.data, implicit_wgmma_w_map(g, plan.block_o, plan.block_c));
  // A transposed convolution: its stride phases (each a dense convolution of x whose outputs are
  // every s-th position of out), phase 0's plan given, the others planned alike, in launch groups
  // of up to kWgmmaConvMaxMergedPhases phases sharing one persistent grid.
  const auto launch = [&](const ImplicitWgmmaPlan& t) {
    if (t.tiles == 0) return;  // a phase without outputs
    const CUtensorMap x_map = encode(p.x.data, implicit_wgmma_x_map(g, t));
    dispatch_wgmma(p, t.block_n, [&](auto in_tag, auto out_tag, auto bn_tag) {
      using T = typename decltype(in_tag)::type;
      using TOut = typename decltype(out_tag)::type;
      launch_epilogue<T, TOut, decltype(bn_tag)::value>(p, g, t, x_map, w_map, stream);
    });
  };
  if (implicit_wgmma_phase_count(plan) == 1) return launch(plan);
  const std::vector<ImplicitWgmmaPlan> phases = implicit_wgmma_phase_plans(p, plan);
  for (const WgmmaConvLaunchGroup& group : implicit_wgmma_launch_groups(phases, plan)) {
    if (group.end - group.begin == 1) {
      launch(phases[static_cast<size_t>(group.begin)]);
      continue;
    }
    dispatch_wgmma(p, plan.block_n, [&](auto in_tag, auto out_tag, auto bn_tag) {
      using T = typename decltype(in_tag)::type;
      using TOut = typename decltype(out_tag)::type;
      launch_phases<T, TOut, decltype(bn_tag)::value>(p, g, phases, group, w_map, stream);
    });
  }
}

}  // namespace gemmkit::cuda::conv_impl
