// Hopper implicit-GEMM convolution kernel: out = conv(x, weight) (+ bias) for bf16 / f16 inputs,
// fp32 accumulation, out in x's dtype or f32, sm_90a.
//
// What it computes: for every output position and output channel, the chain of warpgroup MMAs
// (wgmma m64nNk16) over K = taps x channel blocks of 64 in one fixed order (WgmmaConvKPlace's:
// per tap along d and h, per 64-channel group, the taps along w; 16-wide k steps ascending, a last
// block's steps past c / groups skipped: implicit_wgmma_block_steps), from zero, then + bias and
// one rounding. Every output element's chain is the same whatever the tile, the grid or the batch,
// so the bits are batch-invariant and run-to-run identical. The GEMM view and the TMA boxes are in
// wgmma_layout.h and wgmma_maps.h; eligibility (no input dilation, strides <= 8, c / groups % 8, c
// / groups % 64 with groups) in wgmma_eligibility.h.
//
// Structure (the cooperative schedule; wgmma_pingpong.cuh is the other and wgmma_halo.cuh this
// one's halo form, the pieces they share are in wgmma_parts.cuh): one producer warpgroup (one
// thread issues the TMA loads of the weight box block_o x 64 and the activation box block_n x 64 of
// each k block into a ring of kStages stages, 128-byte swizzle) and two consumer warpgroups over a
// persistent grid: CTA b takes tiles b, b + grid, ... The consumers split a tile by channels (64
// each over all positions) or, in the narrow-o form (kNarrowO: 64-channel tiles, chosen by the
// plan's cost model), by positions (the tile's 64 channels each, over block_n / 2 positions): the
// same chains either way. Consumers keep one k block's MMAs in flight (wait_group 1) and free its
// stage when the next block's are issued; the epilogue of a tile overlaps the producer's loads of
// the next. Registers: setmaxnreg gives the consumers 232 and the producer 40 (its coordinate
// arithmetic spilled at 24). Reduction segments (kSegmented; wgmma_layout.h): where one image's
// tiles fill under half the machine, K is cut into segments, each a chain from zero; a CTA runs a
// tile's segments in turn and adds them in order (chained), or, below one wave, each work item
// reduces one segment into an fp32 partial tile of the workspace and
// conv_implicit_wgmma_fold_kernel adds them in the same order, so both forms return the same bits.
// Epilogue (kTmaStore, 16-bit out whose map TMA can write): each consumer warpgroup rounds its
// accumulators (+ bias) 64 positions at a time, transposes them into a swizzled staging buffer with
// stmatrix (a position's 64 channels per 128-byte row) and one thread stores the chunk as a box of
// the out map, which drops what lies outside out; two buffers per warpgroup, so the next chunk is
// written while the last one is stored, and the next tile's MMAs start while stores drain. Else a
// store per element (f32 out, out strides or channel tiles TMA cannot take).
// Wins: dense and grouped 2-D / 3-D layers with channels >= 64, where the mma.sync implicit GEMM
// (implicit_gemm.cuh) runs at well under half of the tensor-core peak (docs/perf.md).
#pragma once

#include <cuda.h>

#include "cuda/conv/implicit_gemm/wgmma_parts.cuh"

namespace gemmkit::cuda::conv_impl {

// kSegmented (block_n 128 only): the reduction in plan.k_segments segments, chained in the CTA or,
// split_parallel, one segment per work item with fp32 partials to `partials` for the fold kernel.
// kNarrowO (not with kSegmented): plan.block_o is 64, each consumer on half of the positions.
template <typename T, typename TOut, int kBN, int kStages, bool kTmaStore, bool kSegmented,
          bool kNarrowO>
__global__ void __launch_bounds__(kWgmmaConvThreads, 1)
    conv_implicit_wgmma_kernel(const __grid_constant__ CUtensorMap x_map,
                               const __grid_constant__ CUtensorMap w_map,
                               const __grid_constant__ CUtensorMap out_map,
                               const __grid_constant__ ImplicitWgmmaPlan plan, const T* bias,
                               TOut* out, float4* partials) {
  static_assert(!kTmaStore || sizeof(TOut) == 2, "TMA stores of 16-bit out");
  static_assert(!kSegmented || kBN == 128, "segments with 128-position tiles (registers)");
  static_assert(!(kSegmented && kNarrowO), "the narrow-o form reduces K in one chain");
  // Positions per consumer warpgroup (the N of its MMAs) and its accumulators per thread.
  constexpr int kN = kNarrowO ? kBN / 2 : kBN;
  constexpr int kRegs = kN / 2;
  extern __shared__ __align__(1024) char shared_raw[];
  const wgmma_conv_detail::SharedLayout<kBN, kStages, kTmaStore> smem(shared_raw);
  uint64_t* const full = smem.full();
  uint64_t* const empty = smem.empty();
  const int warpgroup = static_cast<int>(threadIdx.x / 128);

  wgmma_conv_detail::init_stage_barriers(smem, 2);

  if (warpgroup == 0) {
    wgmma_conv_detail::run_producer(&x_map, &w_map, kTmaStore ? &out_map : nullptr, plan, smem);
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  const int consumer = warpgroup - 1;
  const int t = static_cast<int>(threadIdx.x % 128);
  const int warp = t / 32, lane = t % 32;
  const WgmmaConvConsumerPart part = implicit_wgmma_consumer_part(plan, consumer);
  // This warpgroup's operands in a stage: its 64 weight rows and its positions' activation rows
  // (implicit_wgmma_row_bytes each), part's in terms the compiler folds (from part.half and
  // part.first_column at run time, the kBN 256 element-store kernel spilled 436 bytes).
  const int row_bytes = implicit_wgmma_row_bytes(plan);
  const uint64_t layout = wgmma_conv_detail::k_block_layout(plan);
  const int weight_offset = kNarrowO ? 0 : consumer * 64 * row_bytes;
  const int activation_offset = kNarrowO ? consumer * kN * row_bytes : 0;
  WgmmaConvRing<kStages> at;
  uint32_t store_turn = 0;
  float acc[kRegs];
  [[maybe_unused]] float total[kSegmented ? kRegs : 1];
  for (int64_t item = blockIdx.x; item < plan.tiles; item += gridDim.x) {
    const WgmmaConvItem it = implicit_wgmma_item(plan, item);
    const int64_t tile = it.tile;
    // The tile's coordinates and bias before its MMAs: their divisions and loads run while the
    // first stages land, not after the last MMA.
    const WgmmaConvTile tile_at = implicit_wgmma_tile(plan, tile);
    const wgmma_conv_detail::WgmmaConvRowBias rb =
        wgmma_conv_detail::load_half_bias(plan, tile_at, part.half, warp, lane, bias);
    int previous = -1;
    int in_segment = 0;       // k blocks of the current segment done
    bool have_total = false;  // chained: total holds the segments before the current one
    WgmmaConvStepCursor steps = implicit_wgmma_step_cursor(plan, it.kb_begin);
    for (int kb = it.kb_begin; kb < it.kb_end; ++kb) {
      ptx::mbarrier_wait(&full[at.stage], at.phase);
      wgmma::mma_k_block<T, kN>(acc, smem.weight_box(at.stage) + weight_offset,
                                smem.activation_box(at.stage) + activation_offset,
                                steps.steps(plan), in_segment == 0, layout);
      steps.next(plan);
      // The previous block's MMAs are done once at most this block's group is pending.
      wgmma::wait_group<1>();
      if (previous >= 0 && t == 0) ptx::mbarrier_arrive(&empty[previous]);
      previous = at.stage;
      at.next();
      ++in_segment;
      if constexpr (kSegmented) {
        // A chained segment ends before the item's last block: fold it into the total, in
        // segment order, and start the next chain from zero.
        if (in_segment == plan.segment_blocks && kb + 1 < it.kb_end) {
          wgmma::wait_group<0>();
          wgmma::fence_registers(acc);
          if (t == 0) ptx::mbarrier_arrive(&empty[previous]);
          previous = -1;
#pragma unroll
          for (int r = 0; r < kRegs; ++r) total[r] = have_total ? total[r] + acc[r] : acc[r];
          have_total = true;
          in_segment = 0;
        }
      }
    }
    wgmma_conv_detail::finish_mainloop(acc, empty, previous, t);
    if constexpr (kSegmented) {
      if (plan.split_parallel) {
        // One segment's partial tile, in fragment order (the fold kernel adds the segments).
        float4* const dst =
            partials + implicit_wgmma_partial_index(plan, it.segment, tile, 0, consumer * 128 + t);
#pragma unroll
        for (int v = 0; v < kRegs / 4; ++v) {
          dst[v * 256] = make_float4(acc[4 * v], acc[4 * v + 1], acc[4 * v + 2], acc[4 * v + 3]);
        }
        continue;
      }
      if (have_total) {
#pragma unroll
        for (int r = 0; r < kRegs; ++r) acc[r] = total[r] + acc[r];
      }
    }

    // Epilogue: bias, one rounding, the stores of this warpgroup's 64 channels and positions.
    if constexpr (kTmaStore) {
      wgmma_conv_detail::store_half_by_tma<TOut, kN>(
          &out_map, plan, tile_at, part.half, part.first_column, acc, rb, smem.staging(consumer),
          1 + consumer, t, store_turn);
    } else {
      wgmma_conv_detail::store_half_elements<TOut, kN>(plan, tile_at, part.half, part.first_column,
                                                       acc, rb, warp, lane, out);
    }
  }
  if constexpr (kTmaStore) {
    if (t == 0) ptx::bulk_wait_group_all();  // the staging stays valid until the stores are done
  }
}

// The fold of a split_parallel plan (block_n 128): block b sums float4 b % 16 of every consumer
// thread of partial tile b / 16 over the segments in order, then adds the bias and stores as
// the kernel's per-element epilogue does. The same bits as the chained segments.
template <typename T, typename TOut>
__global__ void __launch_bounds__(256)
    conv_implicit_wgmma_fold_kernel(const __grid_constant__ ImplicitWgmmaPlan plan,
                                    const float4* partials, const T* bias, TOut* out) {
  constexpr int kVectors = 128 / 8;
  const int64_t tile = blockIdx.x / kVectors;
  const int j = static_cast<int>(blockIdx.x % kVectors);
  const int thread = static_cast<int>(threadIdx.x);
  float4 sum = partials[implicit_wgmma_partial_index(plan, 0, tile, j, thread)];
  for (int segment = 1; segment < plan.k_segments; ++segment) {
    const float4 p = partials[implicit_wgmma_partial_index(plan, segment, tile, j, thread)];
    sum.x += p.x;
    sum.y += p.y;
    sum.z += p.z;
    sum.w += p.w;
  }
  const WgmmaConvTile at = implicit_wgmma_tile(plan, tile);
  const int consumer = thread / 128, t = thread % 128, warp = t / 32, lane = t % 32;
  const int32_t row0 = wgmma_conv_detail::fragment_row0(plan, at, consumer, warp, lane);
  const wgmma_conv_detail::WgmmaConvRowBias rb =
      wgmma_conv_detail::load_bias_rows(plan, at, row0, bias);
  const float v[4] = {sum.x, sum.y, sum.z, sum.w};
  wgmma_conv_detail::store_elements(plan, at, row0, 0, j, lane, v, rb, out);
}

}  // namespace gemmkit::cuda::conv_impl
