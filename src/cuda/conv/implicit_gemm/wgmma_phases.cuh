// Hopper implicit-GEMM convolution over several stride phases in one launch: the cooperative
// kernel of wgmma.cuh (one producer warpgroup loading by TMA, two consumer warpgroups of 64
// output channels each on every tile, wgmma, the same epilogues) whose persistent grid runs the
// tiles of up to kWgmmaConvMaxMergedPhases stride phases of a transposed convolution in turn
// (WgmmaConvPhases: their plans and maps; implicit_wgmma_launch_item: launch item -> phase, item).
//
// What it computes: each phase's outputs exactly as one launch of wgmma.cuh's kernel per phase
// would (the same chain of k16 steps per output from zero, + bias, one rounding), so the bits are
// those of the per-phase launches. One reduction segment per tile (transposed convolutions do
// not split K).
// Wins: transposed convolutions whose phases alone fill under a wave or two, e.g. a 4x4 / stride-2
// upsampling layer (docs/conv.md): a CTA's next tile, of the same or the next phase, loads while
// its last one stores, and no phase waits for the previous one's drain.
#pragma once

#include <cuda.h>

#include "cuda/conv/implicit_gemm/wgmma_parts.cuh"

namespace gemmkit::cuda::conv_impl {

template <typename T, typename TOut, int kBN, int kStages, bool kTmaStore>
__global__ void __launch_bounds__(kWgmmaConvThreads, 1)
    conv_implicit_wgmma_phases_kernel(const __grid_constant__ CUtensorMap w_map,
                                      const __grid_constant__ WgmmaConvPhases launch, const T* bias,
                                      TOut* out) {
  static_assert(!kTmaStore || sizeof(TOut) == 2, "TMA stores of 16-bit out");
  constexpr int kRegs = kBN / 2;
  extern __shared__ __align__(1024) char shared_raw[];
  const wgmma_conv_detail::SharedLayout<kBN, kStages, kTmaStore> smem(shared_raw);
  uint64_t* const full = smem.full();
  uint64_t* const empty = smem.empty();
  const int warpgroup = static_cast<int>(threadIdx.x / 128);

  wgmma_conv_detail::init_stage_barriers(smem, 2);

  if (warpgroup == 0) {
    wgmma_conv_detail::run_phase_producer(&w_map, launch, smem);
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  const int consumer = warpgroup - 1;
  const int t = static_cast<int>(threadIdx.x % 128);
  const int warp = t / 32, lane = t % 32;
  WgmmaConvRing<kStages> at;
  uint32_t store_turn = 0;
  float acc[kRegs];
  for (int64_t launch_item = blockIdx.x; launch_item < launch.items; launch_item += gridDim.x) {
    const WgmmaConvLaunchItem li = launch.item(launch_item);
    const ImplicitWgmmaPlan& plan = launch.plan[li.plan];
    const WgmmaConvItem it = implicit_wgmma_item(plan, li.item);
    const WgmmaConvTile tile_at = implicit_wgmma_tile(plan, it.tile);
    const wgmma_conv_detail::WgmmaConvRowBias rb =
        wgmma_conv_detail::load_half_bias(plan, tile_at, consumer, warp, lane, bias);
    int previous = -1;
    WgmmaConvStepCursor steps = implicit_wgmma_step_cursor(plan, it.kb_begin);
    for (int kb = it.kb_begin; kb < it.kb_end; ++kb) {
      ptx::mbarrier_wait(&full[at.stage], at.phase);
      wgmma::mma_k_block<T, kBN>(
          acc, smem.weight_box(at.stage) + consumer * 64 * implicit_wgmma_row_bytes(plan),
          smem.activation_box(at.stage), steps.steps(plan), kb == it.kb_begin,
          wgmma_conv_detail::k_block_layout(plan));
      steps.next(plan);
      // The previous block's MMAs are done once at most this block's group is pending.
      wgmma::wait_group<1>();
      if (previous >= 0 && t == 0) ptx::mbarrier_arrive(&empty[previous]);
      previous = at.stage;
      at.next();
    }
    wgmma_conv_detail::finish_mainloop(acc, empty, previous, t);

    // Epilogue: bias, one rounding, the stores of this warpgroup's 64 channels.
    if constexpr (kTmaStore) {
      wgmma_conv_detail::store_half_by_tma<TOut, kBN>(&launch.out_map[li.plan], plan, tile_at,
                                                      consumer, 0, acc, rb, smem.staging(consumer),
                                                      1 + consumer, t, store_turn);
    } else {
      wgmma_conv_detail::store_half_elements<TOut, kBN>(plan, tile_at, consumer, 0, acc, rb, warp,
                                                        lane, out);
    }
  }
  if constexpr (kTmaStore) {
    if (t == 0) ptx::bulk_wait_group_all();  // the staging stays valid until the stores are done
  }
}

}  // namespace gemmkit::cuda::conv_impl
