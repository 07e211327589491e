// Hopper implicit-GEMM convolution, ping-pong schedule: the computation and contract of wgmma.cuh
// (every output's chain over K in the fixed k block order, from zero, + bias, one rounding: the
// same bits as the cooperative schedule) for plans with 128-position tiles, one reduction segment
// and a 16-bit out TMA can store (plan.pingpong).
//
// Structure: the producer warpgroup of wgmma.cuh fills the ring with the k blocks of the CTA's
// tiles b, b + grid, ... in order; each consumer warpgroup computes whole 128 x 128 tiles (two
// m64n128k16 per k16 step, 128 accumulators a thread), consumer 0 the CTA's even tiles and
// consumer 1 its odd ones, so one warpgroup's epilogue (bias, rounding, TMA stores) runs under the
// other's MMAs instead of both stopping the tensor cores at each tile's end. The mainloops take
// turns through two order mbarriers: a consumer starts its tile's MMAs once the other has issued
// all of the previous tile's. Besides keeping the MMAs of one tile together, the turns keep each
// consumer within one pass of every stage it waits on: it skips the other's k blocks in the ring,
// and once a tile has as many k blocks as the ring has stages, a consumer starting its tile could
// otherwise wait on a stage whose previous pass (the other's block) is not filled yet, whose
// parity a wait cannot tell from the pass it wants. kFullKBlocks (implicit_wgmma_full_k_blocks:
// every k block 4 k16 steps) issues each block's MMAs as one straight-line sequence: around the
// branch over step counts that other plans need, ptxas serializes the MMAs of the two
// accumulators (its warning C7520), which costs the schedule its overlap.
// Wins: layers whose tiles are short in K (c = 128-256: 18-36 k blocks a tile), where the
// cooperative schedule's shared tile end is a large share of the time (docs/perf.md).
#pragma once

#include <cuda.h>

#include "cuda/conv/implicit_gemm/wgmma_parts.cuh"

namespace gemmkit::cuda::conv_impl {

template <typename T, typename TOut, int kStages, bool kFullKBlocks>
__global__ void __launch_bounds__(kWgmmaConvThreads, 1)
    conv_implicit_wgmma_pingpong_kernel(const __grid_constant__ CUtensorMap x_map,
                                        const __grid_constant__ CUtensorMap w_map,
                                        const __grid_constant__ CUtensorMap out_map,
                                        const __grid_constant__ ImplicitWgmmaPlan plan,
                                        const T* bias) {
  static_assert(sizeof(TOut) == 2, "TMA stores of 16-bit out");
  constexpr int kBN = 128;
  constexpr int kRegs = kBN / 2;  // per 64-channel half
  extern __shared__ __align__(1024) char shared_raw[];
  const wgmma_conv_detail::SharedLayout<kBN, kStages, true> smem(shared_raw);
  uint64_t* const full = smem.full();
  uint64_t* const empty = smem.empty();
  uint64_t* const order = smem.order();  // order[c]: consumer c issued a tile's MMAs
  const int warpgroup = static_cast<int>(threadIdx.x / 128);

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      ptx::mbarrier_init(&full[s], 1);
      ptx::mbarrier_init(&empty[s], 1);
    }
    ptx::mbarrier_init(&order[0], 1);
    ptx::mbarrier_init(&order[1], 1);
    ptx::fence_barrier_init();
  }
  __syncthreads();

  if (warpgroup == 0) {
    wgmma_conv_detail::run_producer(&x_map, &w_map, &out_map, plan, smem);
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  const int consumer = warpgroup - 1;
  const int other = 1 - consumer;
  const int t = static_cast<int>(threadIdx.x % 128);
  const int32_t k_blocks = plan.k_blocks;
  const int row_bytes = implicit_wgmma_row_bytes(plan);
  const uint64_t layout = wgmma_conv_detail::k_block_layout(plan);
  WgmmaConvRing<kStages> at;
  if (consumer == 1) at.skip(k_blocks);  // past the k blocks of the CTA's first tile
  uint32_t store_turn = 0;
  float acc0[kRegs], acc1[kRegs];
  uint32_t round = 0;  // this consumer's tiles so far
  for (int64_t item = blockIdx.x + int64_t{consumer} * gridDim.x; item < plan.tiles;
       item += 2 * int64_t{gridDim.x}, ++round) {
    // The CTA's tile 2 round + consumer follows the other consumer's tile before it: consumer 1
    // waits for consumer 0's pass `round`, consumer 0 (from its second tile) for consumer 1's
    // pass round - 1.
    if (consumer == 1) {
      ptx::mbarrier_wait(&order[other], round & 1);
    } else if (round > 0) {
      ptx::mbarrier_wait(&order[other], (round - 1) & 1);
    }
    const WgmmaConvTile tile_at = implicit_wgmma_tile(plan, item);
    const wgmma_conv_detail::WgmmaConvRowBias rb0 =
        wgmma_conv_detail::load_half_bias(plan, tile_at, 0, t / 32, t % 32, bias);
    const wgmma_conv_detail::WgmmaConvRowBias rb1 =
        wgmma_conv_detail::load_half_bias(plan, tile_at, 1, t / 32, t % 32, bias);
    int previous = -1;
    WgmmaConvStepCursor steps;  // tiles start at k block 0
    for (int32_t kb = 0; kb < k_blocks; ++kb) {
      ptx::mbarrier_wait(&full[at.stage], at.phase);
      const uint8_t* const weight = smem.weight_box(at.stage);
      const uint8_t* const weight_half = weight + 64 * row_bytes;
      const uint8_t* const activations = smem.activation_box(at.stage);
      wgmma::fence();
      const auto mma_steps = [&](auto count) {
#pragma unroll
        for (int j = 0; j < decltype(count)::value; ++j) {
          // Step j's operands start 32 j bytes on (either swizzle).
          const uint64_t b = wgmma::smem_descriptor(activations + 32 * j, layout);
          const bool accumulate = !(kb == 0 && j == 0);
          wgmma::Mma<T, kBN>::run(acc0, wgmma::smem_descriptor(weight + 32 * j, layout), b,
                                  accumulate);
          wgmma::Mma<T, kBN>::run(acc1, wgmma::smem_descriptor(weight_half + 32 * j, layout), b,
                                  accumulate);
        }
      };
      if constexpr (kFullKBlocks) {
        mma_steps(std::integral_constant<int, kWgmmaConvBlockK / 16>{});
      } else {
        wgmma::with_k_steps(steps.steps(plan), mma_steps);
        steps.next(plan);
      }
      wgmma::commit_group();
      // The previous block's MMAs are done once at most this block's group is pending.
      wgmma::wait_group<1>();
      if (previous >= 0 && t == 0) ptx::mbarrier_arrive(&empty[previous]);
      previous = at.stage;
      at.next();
    }
    // Every k block of the tile is in the ring and its MMAs issued: the other consumer's turn.
    if (t == 0) ptx::mbarrier_arrive(&order[consumer]);
    wgmma::wait_group<0>();
    wgmma::fence_registers(acc0);
    wgmma::fence_registers(acc1);
    if (t == 0 && previous >= 0) ptx::mbarrier_arrive(&empty[previous]);
    at.skip(k_blocks);  // the other consumer's next tile

    uint8_t* const staging = smem.staging(consumer);
    wgmma_conv_detail::store_half_by_tma<TOut, kBN>(&out_map, plan, tile_at, 0, 0, acc0, rb0,
                                                    staging, 1 + consumer, t, store_turn);
    wgmma_conv_detail::store_half_by_tma<TOut, kBN>(&out_map, plan, tile_at, 1, 0, acc1, rb1,
                                                    staging, 1 + consumer, t, store_turn);
  }
  if (t == 0) ptx::bulk_wait_group_all();  // the staging stays valid until the stores are done
}

}  // namespace gemmkit::cuda::conv_impl
