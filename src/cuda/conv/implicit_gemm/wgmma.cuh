// Hopper implicit-GEMM convolution kernel: out = conv(x, weight) (+ bias) for bf16 / f16 inputs,
// fp32 accumulation, out in x's dtype or f32, sm_90a.
//
// What it computes: for every output position and output channel, the chain of warpgroup MMAs
// (wgmma m64nNk16) over K = taps x channel blocks of 64 in one fixed order (tap-major, 16-wide k
// steps ascending), from zero, then + bias and one rounding. Every output element's chain is the
// same whatever the tile, the grid or the batch, so the bits are batch-invariant and run-to-run
// identical. The GEMM view and the TMA boxes are in wgmma_layout.h; eligibility (no input
// dilation, strides <= 8, c / groups % 8, c / groups % 64 with groups) in wgmma_plan.h.
//
// Structure: one producer warpgroup (one thread issues the TMA loads of the weight box 128 x 64
// and the activation box block_n x 64 of each k block into a ring of kStages stages, 128-byte
// swizzle) and two consumer warpgroups (64 output channels each) over a persistent grid: CTA b
// takes tiles b, b + grid, ... Consumers keep one k block's MMAs in flight (wait_group 1) and
// free its stage when the next block's are issued; the epilogue of a tile overlaps the producer's
// loads of the next. Registers: setmaxnreg gives the consumers 232 and the producer 40 (its
// coordinate arithmetic spilled at 24).
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

#include "cuda/common/ptx.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/conv/common/dtype.cuh"
#include "cuda/conv/implicit_gemm/wgmma_layout.h"

namespace gemmkit::cuda::conv_impl {

namespace wgmma_conv_detail {

template <typename T, int kBN>
__device__ __forceinline__ void mma_block(float (&acc)[kBN / 2], const uint8_t* weight_band,
                                          const uint8_t* activations, bool first) {
  wgmma::fence();
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    wgmma::Mma<T, kBN>::run(acc, wgmma::smem_descriptor_sw128(weight_band, 32 * j),
                            wgmma::smem_descriptor_sw128(activations, 32 * j), !(first && j == 0));
  }
  wgmma::commit_group();
}

}  // namespace wgmma_conv_detail

template <typename T, typename TOut, int kBN, int kStages, bool kTmaStore>
__global__ void __launch_bounds__(kWgmmaConvThreads, 1)
    conv_implicit_wgmma_kernel(const __grid_constant__ CUtensorMap x_map,
                               const __grid_constant__ CUtensorMap w_map,
                               const __grid_constant__ CUtensorMap out_map,
                               const __grid_constant__ ImplicitWgmmaPlan plan, const T* bias,
                               TOut* out) {
  static_assert(!kTmaStore || sizeof(TOut) == 2, "TMA stores of 16-bit out");
  constexpr int kWeightBytes = kWgmmaConvBlockO * kWgmmaConvBlockK * 2;
  constexpr int kActivationBytes = kBN * kWgmmaConvBlockK * 2;
  constexpr int kStageBytes = kWeightBytes + kActivationBytes;
  static_assert(kActivationBytes % 1024 == 0, "swizzled boxes stay 1024-byte aligned");
  constexpr int kRegs = kBN / 2;
  extern __shared__ __align__(1024) char shared_raw[];
  uint8_t* shared = reinterpret_cast<uint8_t*>(
      shared_raw + ((1024u - (ptx::smem_address(shared_raw) & 1023u)) & 1023u));
  constexpr int kChunkBytes = kWgmmaConvStoreChunk * 64 * 2;
  uint8_t* const staging = shared + kStages * kStageBytes;  // kTmaStore: 2 x 2 chunk buffers
  uint64_t* full = reinterpret_cast<uint64_t*>(staging + (kTmaStore ? kWgmmaConvStagingBytes : 0));
  uint64_t* empty = full + kStages;
  const auto weight_box = [&](int stage) { return shared + stage * kStageBytes; };
  const auto activation_box = [&](int stage) {
    return shared + stage * kStageBytes + kWeightBytes;
  };
  const int warpgroup = static_cast<int>(threadIdx.x / 128);
  const int k_blocks = plan.k_blocks;

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      ptx::mbarrier_init(&full[s], 1);
      ptx::mbarrier_init(&empty[s], 2);
    }
    ptx::fence_barrier_init();
  }
  __syncthreads();

  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
    if (threadIdx.x != 0) return;
    ptx::prefetch_tensor_map(&x_map);
    ptx::prefetch_tensor_map(&w_map);
    if constexpr (kTmaStore) ptx::prefetch_tensor_map(&out_map);
    int stage = 0;
    uint32_t phase = 0;
    for (int64_t tile = blockIdx.x; tile < plan.tiles; tile += gridDim.x) {
      const WgmmaConvTile t = implicit_wgmma_tile(plan, tile);
      for (int kb = 0; kb < k_blocks; ++kb) {
        const WgmmaConvCoords c = implicit_wgmma_coords(plan, t, kb);
        ptx::mbarrier_wait(&empty[stage], phase ^ 1);
        ptx::mbarrier_arrive_expect_tx(&full[stage], kStageBytes);
        ptx::tma_load_5d(weight_box(stage), &w_map, &full[stage], c.w[0], c.w[1], c.w[2], c.w[3],
                         c.w[4]);
        ptx::tma_load_5d(activation_box(stage), &x_map, &full[stage], c.x[0], c.x[1], c.x[2],
                         c.x[3], c.x[4]);
        if (++stage == kStages) {
          stage = 0;
          phase ^= 1;
        }
      }
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
  const int consumer = warpgroup - 1;
  const int t = static_cast<int>(threadIdx.x % 128);
  const int warp = t / 32, lane = t % 32;
  int stage = 0;
  uint32_t phase = 0;
  float acc[kRegs];
  for (int64_t tile = blockIdx.x; tile < plan.tiles; tile += gridDim.x) {
    int previous = -1;
    for (int kb = 0; kb < k_blocks; ++kb) {
      ptx::mbarrier_wait(&full[stage], phase);
      wgmma_conv_detail::mma_block<T, kBN>(acc, weight_box(stage) + consumer * 64 * 128,
                                           activation_box(stage), kb == 0);
      // The previous block's MMAs are done once at most this block's group is pending.
      wgmma::wait_group<1>();
      if (previous >= 0 && t == 0) ptx::mbarrier_arrive(&empty[previous]);
      previous = stage;
      if (++stage == kStages) {
        stage = 0;
        phase ^= 1;
      }
    }
    wgmma::wait_group<0>();
    wgmma::fence_registers(acc);
    if (t == 0) ptx::mbarrier_arrive(&empty[previous]);

    // Epilogue: bias, one rounding, stores of the in-range elements. Register 4 j + r holds
    // output channel row0 + 8 (r / 2) at box column 8 j + 2 (lane % 4) + r % 2.
    const WgmmaConvTile tile_at = implicit_wgmma_tile(plan, tile);
    const int32_t row0 = static_cast<int32_t>(tile_at.o_tile) * kWgmmaConvBlockO + consumer * 64 +
                         warp * 16 + lane / 4;  // output channel within the group
    const bool row_ok[2] = {row0 < plan.opg, row0 + 8 < plan.opg};
    float bias_value[2] = {0.f, 0.f};
    if (plan.has_bias) {
      const int64_t first = tile_at.group * plan.opg + row0;
      if (row_ok[0]) bias_value[0] = to_float(bias[first * plan.bias_stride]);
      if (row_ok[1]) bias_value[1] = to_float(bias[(first + 8) * plan.bias_stride]);
    }
    if constexpr (kTmaStore) {
      // A warpgroup whose 64 channels lie past the group's (o / groups = 64 with groups) stores
      // nothing: its box would cover the next group's channels.
      if (static_cast<int32_t>(tile_at.o_tile) * kWgmmaConvBlockO + consumer * 64 >= plan.opg) {
        continue;
      }
      const auto value = [&](int j, int r2, int half) {
        const float v = acc[4 * j + 2 * r2 + half];
        return plan.has_bias ? v + bias_value[r2] : v;
      };
      // Lane l addresses row l % 8 of matrix l / 8 of each stmatrix: matrix m holds columns
      // 8 (jj + m / 2) .. + 7 of the chunk and the warp's channels 16 warp + 8 (m % 2) .. + 7,
      // one 16-byte unit of each position's row, placed by the 128-byte swizzle.
      const int m = lane / 8;
#pragma unroll
      for (int q = 0; q < kBN / kWgmmaConvStoreChunk; ++q) {
        uint8_t* const buffer = staging + (consumer * 2 + (q & 1)) * kChunkBytes;
        if (t == 0) ptx::bulk_wait_group_read<1>();  // the buffer's store of two chunks ago
        ptx::named_barrier_sync(1 + consumer, 128);
#pragma unroll
        for (int jj = 0; jj < 8; jj += 2) {
          uint32_t r[4];
#pragma unroll
          for (int mm = 0; mm < 4; ++mm) {
            const int j = 8 * q + jj + mm / 2;
            r[mm] = round_pair<TOut>(value(j, mm % 2, 0), value(j, mm % 2, 1));
          }
          const int row = 8 * (jj + m / 2) + lane % 8;
          const int unit = (warp * 2 + m % 2) ^ (row & 7);
          ptx::stmatrix_x4_trans(ptx::smem_address(buffer + row * 128 + unit * 16), r);
        }
        ptx::fence_proxy_async_shared();
        ptx::named_barrier_sync(1 + consumer, 128);
        if (t == 0) {
          int32_t c[5];
          implicit_wgmma_store_coords(plan, tile_at, consumer, q, c);
          ptx::tma_store_5d(&out_map, buffer, c[0], c[1], c[2], c[3], c[4]);
          ptx::bulk_commit_group();
        }
      }
      continue;
    }
    const int64_t channel_stride = plan.out_stride[kDims + 1];
    TOut* const tile_out =
        out + implicit_wgmma_tile_out_base(plan, tile_at) + int64_t{row0} * channel_stride;
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        int32_t position[kDims];
        const int32_t column = 8 * j + 2 * (lane % 4) + half;
        if (!implicit_wgmma_position(plan, tile_at, column, position)) continue;
        TOut* const at = tile_out + implicit_wgmma_position_offset(plan, position);
#pragma unroll
        for (int r2 = 0; r2 < 2; ++r2) {
          if (!row_ok[r2]) continue;
          float value = acc[4 * j + 2 * r2 + half];
          if (plan.has_bias) value += bias_value[r2];
          at[8 * r2 * channel_stride] = from_float<TOut>(value);
        }
      }
    }
  }
  if constexpr (kTmaStore) {
    if (t == 0) ptx::bulk_wait_group_all();  // the staging stays valid until the stores are done
  }
}

}  // namespace gemmkit::cuda::conv_impl
