// Hopper implicit-GEMM convolution kernel, the cooperative schedule's halo form: the outputs,
// chains and bits of wgmma.cuh for plans implicit_wgmma_can_halo accepts (tiles of 256 positions
// along one output row, stride 1, three taps along w, 64-channel k blocks, one reduction
// segment, TMA stores).
//
// Why: in the cooperative kernel a k block of a 128 x 256 tile lands 16 KiB of weights and 32 KiB
// of activations for 1024 cycles of MMAs, more than the SMs take in from L2 in that time where
// o = 128 (docs/perf.md). The three k blocks of one (d, h) tap and channel block (consecutive in
// WgmmaConvKPlace's order) read the same input row shifted by kdil_w positions, so a stage here
// holds that row once (256 + 2 * kdil_w positions: the tile's box and a second box of the 2 *
// kdil_w past it) and the three weight boxes: 81 KiB for three k blocks instead of 144.
//
// The shifted operands: tap j's MMAs read the row from position j * kdil_w, a matrix descriptor
// j * kdil_w 128-byte rows into the swizzled box. The 128-byte swizzle is a function of the
// shared-memory address (TMA writes it so, wgmma reads it so), so a descriptor may start at any
// row of a 1024-byte-aligned box with the base offset 0.
//
// Structure: as wgmma.cuh (one producer thread, two consumer warpgroups of 64 channels each over
// all 256 positions, persistent CTAs on tiles b, b + grid, ...), with a ring of
// kWgmmaConvHaloStages stages of three k blocks each; consumers free a stage once the first MMAs
// of the next are issued and the stage's last have completed.
#pragma once

#include <cuda.h>

#include "cuda/conv/implicit_gemm/wgmma_parts.cuh"

namespace gemmkit::cuda::conv_impl {

namespace wgmma_conv_detail {

// The halo form's shared memory: kWgmmaConvHaloStages stages of (three weight boxes of 128 x 64,
// the row of kWgmmaConvHaloRows x 64), the store staging, then the full and empty mbarriers.
struct HaloLayout {
  static constexpr int kWeightBytes = kWgmmaConvBlockO * kWgmmaConvBlockK * 2;
  static constexpr int kStageBytes = static_cast<int>(implicit_wgmma_halo_stage_bytes());
  static_assert(kStageBytes % 1024 == 0 && kWeightBytes % 1024 == 0, "boxes 1024-byte aligned");
  static_assert(kWgmmaConvHaloStages * kStageBytes + kWgmmaConvStagingBytes +
                        8 * 2 * kWgmmaConvHaloStages + 1024 <=
                    implicit_wgmma_halo_smem_bytes(),
                "the launch's shared memory holds the layout");

  uint8_t* base;
  __device__ __forceinline__ explicit HaloLayout(char* raw)
      : base(reinterpret_cast<uint8_t*>(raw +
                                        ((1024u - (ptx::smem_address(raw) & 1023u)) & 1023u))) {}
  __device__ __forceinline__ uint8_t* weight_box(int stage, int tap_w) const {
    return base + stage * kStageBytes + tap_w * kWeightBytes;
  }
  __device__ __forceinline__ uint8_t* row(int stage) const {
    return base + stage * kStageBytes + kWgmmaConvHaloTapsW * kWeightBytes;
  }
  __device__ __forceinline__ uint8_t* staging(int consumer) const {
    return base + kWgmmaConvHaloStages * kStageBytes + consumer * 2 * kWgmmaConvChunkBytes;
  }
  __device__ __forceinline__ uint64_t* full() const {
    return reinterpret_cast<uint64_t*>(base + kWgmmaConvHaloStages * kStageBytes +
                                       kWgmmaConvStagingBytes);
  }
  __device__ __forceinline__ uint64_t* empty() const { return full() + kWgmmaConvHaloStages; }
};

}  // namespace wgmma_conv_detail

template <typename T, typename TOut>
__global__ void __launch_bounds__(kWgmmaConvThreads, 1)
    conv_implicit_wgmma_halo_kernel(const __grid_constant__ CUtensorMap x_map,
                                    const __grid_constant__ CUtensorMap x_tail_map,
                                    const __grid_constant__ CUtensorMap w_map,
                                    const __grid_constant__ CUtensorMap out_map,
                                    const __grid_constant__ ImplicitWgmmaPlan plan, const T* bias) {
  constexpr int kBN = 256;
  constexpr int kRegs = kBN / 2;
  constexpr int kTaps = kWgmmaConvHaloTapsW;
  constexpr int kRowBytes = kWgmmaConvBlockK * 2;
  using Ring = WgmmaConvRing<kWgmmaConvHaloStages>;
  extern __shared__ __align__(1024) char shared_raw[];
  const wgmma_conv_detail::HaloLayout smem(shared_raw);
  uint64_t* const full = smem.full();
  uint64_t* const empty = smem.empty();
  const int warpgroup = static_cast<int>(threadIdx.x / 128);
  const int shift_bytes = plan.kdil[kDims - 1] * kRowBytes;  // tap j's row starts j of these on
  const int32_t stages_per_tile = plan.k_blocks / kTaps;

  ptx::init_ring_barriers(full, empty, kWgmmaConvHaloStages, 2);
  __syncthreads();

  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x != 0) return;
    ptx::prefetch_tensor_map(&x_map);
    ptx::prefetch_tensor_map(&x_tail_map);
    ptx::prefetch_tensor_map(&w_map);
    ptx::prefetch_tensor_map(&out_map);
    const int tail = (kTaps - 1) * plan.kdil[kDims - 1];
    const uint32_t bytes =
        static_cast<uint32_t>((kTaps * kWgmmaConvBlockO + kBN + tail) * kRowBytes);
    Ring at;
    for (int64_t tile = blockIdx.x; tile < plan.tiles; tile += gridDim.x) {
      const WgmmaConvTile t = implicit_wgmma_tile(plan, tile);
      WgmmaConvKCursor k = implicit_wgmma_k_cursor(plan, t, 0);
      for (int32_t s = 0; s < stages_per_tile; ++s) {
        ptx::mbarrier_wait(&empty[at.stage], at.phase ^ 1);
        ptx::mbarrier_arrive_expect_tx(&full[at.stage], bytes);
        // The cursor is at the stage's first tap along w: its x box starts the row.
        const int32_t(&x)[5] = k.coords.x;
        uint8_t* const row = smem.row(at.stage);
        ptx::tma_load_5d(row, &x_map, &full[at.stage], x[0], x[1], x[2], x[3], x[4]);
        ptx::tma_load_5d(row + kBN * kRowBytes, &x_tail_map, &full[at.stage], x[0], x[1] + kBN,
                         x[2], x[3], x[4]);
#pragma unroll
        for (int j = 0; j < kTaps; ++j) {
          const int32_t(&w)[5] = k.coords.w;
          ptx::tma_load_5d(smem.weight_box(at.stage, j), &w_map, &full[at.stage], w[0], w[1], w[2],
                           w[3], w[4]);
          implicit_wgmma_k_next(plan, k);
        }
        at.next();
      }
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  const int consumer = warpgroup - 1;
  const int t = static_cast<int>(threadIdx.x % 128);
  const int warp = t / 32, lane = t % 32;
  const WgmmaConvConsumerPart part = implicit_wgmma_consumer_part(plan, consumer);
  const int weight_offset = consumer * 64 * kRowBytes;
  Ring at;
  uint32_t store_turn = 0;
  float acc[kRegs];
  for (int64_t tile = blockIdx.x; tile < plan.tiles; tile += gridDim.x) {
    const WgmmaConvTile tile_at = implicit_wgmma_tile(plan, tile);
    const wgmma_conv_detail::WgmmaConvRowBias rb =
        wgmma_conv_detail::load_half_bias(plan, tile_at, part.half, warp, lane, bias);
    int previous = -1;
    WgmmaConvStepCursor steps = implicit_wgmma_step_cursor(plan, 0);
    for (int32_t s = 0; s < stages_per_tile; ++s) {
      ptx::mbarrier_wait(&full[at.stage], at.phase);
      const uint8_t* const row = smem.row(at.stage);
#pragma unroll
      for (int j = 0; j < kTaps; ++j) {
        wgmma::mma_k_block<T, kBN>(acc, smem.weight_box(at.stage, j) + weight_offset,
                                   row + j * shift_bytes, steps.steps(plan), s == 0 && j == 0,
                                   wgmma::kLayoutSw128);
        steps.next(plan);
        if (j == 0) {
          // The previous stage's MMAs are done once at most this block's group is pending.
          wgmma::wait_group<1>();
          if (previous >= 0 && t == 0) ptx::mbarrier_arrive(&empty[previous]);
        }
      }
      previous = at.stage;
      at.next();
    }
    wgmma_conv_detail::finish_mainloop(acc, empty, previous, t);
    wgmma_conv_detail::store_half_by_tma<TOut, kBN>(
        &out_map, plan, tile_at, part.half, part.first_column, acc, rb, smem.staging(consumer),
        1 + consumer, t, store_turn);
  }
  if (t == 0) ptx::bulk_wait_group_all();  // the staging stays valid until the stores are done
}

}  // namespace gemmkit::cuda::conv_impl
