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

template <typename T, typename TOut, int kBN, int kStages>
__global__ void __launch_bounds__(kWgmmaConvThreads, 1)
    conv_implicit_wgmma_kernel(const __grid_constant__ CUtensorMap x_map,
                               const __grid_constant__ CUtensorMap w_map,
                               const __grid_constant__ ImplicitWgmmaPlan plan, const T* bias,
                               TOut* out) {
  constexpr int kWeightBytes = kWgmmaConvBlockO * kWgmmaConvBlockK * 2;
  constexpr int kActivationBytes = kBN * kWgmmaConvBlockK * 2;
  constexpr int kStageBytes = kWeightBytes + kActivationBytes;
  static_assert(kActivationBytes % 1024 == 0, "swizzled boxes stay 1024-byte aligned");
  constexpr int kRegs = kBN / 2;
  extern __shared__ __align__(1024) char shared_raw[];
  uint8_t* shared = reinterpret_cast<uint8_t*>(
      shared_raw + ((1024u - (ptx::smem_address(shared_raw) & 1023u)) & 1023u));
  uint64_t* full = reinterpret_cast<uint64_t*>(shared + kStages * kStageBytes);
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
    const int64_t channel_stride = plan.out_stride[kDims + 1];
    const bool row_ok[2] = {row0 < plan.opg, row0 + 8 < plan.opg};
    float bias_value[2] = {0.f, 0.f};
    if (plan.has_bias) {
      const int64_t first = tile_at.group * plan.opg + row0;
      if (row_ok[0]) bias_value[0] = to_float(bias[first * plan.bias_stride]);
      if (row_ok[1]) bias_value[1] = to_float(bias[(first + 8) * plan.bias_stride]);
    }
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
}

}  // namespace gemmkit::cuda::conv_impl
