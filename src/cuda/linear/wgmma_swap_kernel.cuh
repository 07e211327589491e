// linear transposed wgmma kernel: out[n, m] = x[n, k] . w[m, k]^T (+ bias), bf16 or f16 in, fp32
// accumulate, sm_90a; the one-chain form (weights of kOneChainMinRows rows and more) for batches
// of up to a few hundred rows.
//
// Contract: evaluates the one-chain canonical reduction (canonical.cuh) with the MMA's roles
// exchanged: batch rows are the M side (64 a tile), weight rows the N side (kBW a tile, kBW /
// kConsumers per consumer warpgroup). A k16 step takes the same 16 products of each output element
// whichever operand is A (the GPU tests check the bits against the reference kernel, whose weights
// are A). The chain starts from +0, takes every k16 step of k in order, then + bias and one
// rounding. Elements past n, m or k are TMA zero fill (k16 steps past k are not issued); k < 2^31.
//
// Why: one chain allows no k split, so a tile must reduce all of k. With weights on the M side
// (wgmma_kernel.cuh, 128 weight rows a tile) a 4096-row weight at n = 64 has 32 tiles for 132
// SMs; here a tile takes kBW = 32 weight rows: 128 CTAs, each streaming its own weight rows once,
// the 64 batch rows shared through L2.
//
// Structure: the one-chain form of wgmma_kernel.cuh with the boxes exchanged: one producer thread
// streams the (64 x 64) activation box and the (kBW x 64) weight box of each k block into a ring
// of kStages stages (128-byte swizzle); consumer warpgroup c of kConsumers multiplies the
// activation box (A) by weight rows c kBW / kConsumers .. of the weight box (B), keeping one k
// block's MMAs in flight (wait_group 1); persistent grid over tiles, the weight block fastest
// (CTAs running together share the activation block). Epilogue: a store per element (each warp's
// stores cover 8 batch rows x 8 adjacent weight columns per register pair).
//
// One consumer warpgroup or two (kConsumers): every MMA reads its A operand, a 64 x 16 block of
// activations (2 KiB), from shared memory, so two warpgroups of kBW / 2 weight rows each read each
// block twice; one warpgroup taking all kBW rows (N = kBW) reads it once. On an H200 one is 13-16%
// faster at kBW = 32 and 4-11% at 64 (docs/perf.md).
//
// Wins: n from 17 to a few hundred on one-chain weights, where the 128-row tiles leave SMs idle.
#pragma once

#include <cuda.h>

#include "cuda/common/ptx.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/linear/canonical.cuh"
#include "cuda/linear/wgmma_parts.cuh"

namespace gemmkit::cuda::linear_family {

constexpr int kSwapBlockN = 64;  // batch rows per tile: the MMA's M

// Stages of an instance: as many (64 + kBW) x 64 stages as fit 192 KiB, at most 16.
template <int kBW>
constexpr int swap_stages() {
  constexpr int bytes = (kSwapBlockN + kBW) * kWgmmaBlockK * 2;
  return (192 * 1024) / bytes < 16 ? (192 * 1024) / bytes : 16;
}
template <int kBW>
constexpr int swap_shared_bytes() {
  return 1024 + swap_stages<kBW>() * (kSwapBlockN + kBW) * kWgmmaBlockK * 2 +
         2 * swap_stages<kBW>() * 8;
}

template <typename T, typename Out, int kBW, int kConsumers>
__global__ void __launch_bounds__(128 * (1 + kConsumers), 1)
    linear_wgmma_swap_kernel(const __grid_constant__ CUtensorMap w_map,
                             const __grid_constant__ CUtensorMap x_map, const T* bias,
                             int64_t bias_stride, Out* out, int64_t out_row_stride,
                             int64_t out_col_stride, int64_t n, int64_t m, int64_t k,
                             int64_t m_blocks, int64_t tiles) {
  constexpr int kStages = swap_stages<kBW>();
  constexpr int kWidth = kBW / kConsumers;  // weight rows per consumer warpgroup: the MMA's N
  constexpr int kRegs = kWidth / 2;
  constexpr int kActivationBytes = kSwapBlockN * kWgmmaBlockK * 2;
  constexpr int kStageBytes = kActivationBytes + kBW * kWgmmaBlockK * 2;
  static_assert(kWidth % 8 == 0 && (kWidth * 128) % 1024 == 0, "swizzle atoms of 8 rows");
  extern __shared__ __align__(1024) char shared_raw[];
  uint8_t* shared = reinterpret_cast<uint8_t*>(
      shared_raw + ((1024u - (ptx::smem_address(shared_raw) & 1023u)) & 1023u));
  uint64_t* full = reinterpret_cast<uint64_t*>(shared + kStages * kStageBytes);
  uint64_t* empty = full + kStages;
  const auto activation_box = [&](int stage) { return shared + stage * kStageBytes; };
  const auto weight_box = [&](int stage) {
    return shared + stage * kStageBytes + kActivationBytes;
  };
  const int warpgroup = ptx::warpgroup_index();
  const int k_blocks = static_cast<int>((k + kWgmmaBlockK - 1) / kWgmmaBlockK);

  ptx::init_ring_barriers(full, empty, kStages, kConsumers);
  __syncthreads();
  ptx::grid_dependency_wait();

  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;");
    if (threadIdx.x != 0) return;
    ptx::prefetch_tensor_map(&w_map);
    ptx::prefetch_tensor_map(&x_map);
    int stage = 0;
    uint32_t phase = 0;
    for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      const auto m0 = static_cast<int32_t>((tile % m_blocks) * kBW);
      const auto n0 = static_cast<int32_t>((tile / m_blocks) * kSwapBlockN);
      wgmma_detail::produce_blocks<kStages>(
          0, k_blocks, full, empty, kStageBytes, stage, phase, [&](int st, int32_t k0) {
            ptx::tma_load_2d(activation_box(st), &x_map, &full[st], k0, n0);
            ptx::tma_load_2d(weight_box(st), &w_map, &full[st], k0, m0);
          });
    }
    return;
  }

  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");
  const int consumer = warpgroup - 1;
  const int t = static_cast<int>(threadIdx.x % 128);
  const int warp = t / 32, lane = t % 32;
  int stage = 0;
  uint32_t phase = 0;
  float acc[kRegs];
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    // A: the activation box (64 batch rows); B: this warpgroup's kWidth weight rows.
    wgmma_detail::one_chain_tile<T, kWidth, kStages>(
        acc, k, k_blocks, full, empty, t, stage, phase, [&](int st) { return activation_box(st); },
        [&](int st) { return weight_box(st) + consumer * kWidth * 128; });
    // Register 4 j + r: batch row row0 + 8 (r / 2), weight row col0 + 8 j + r % 2.
    const int64_t row0 = (tile / m_blocks) * kSwapBlockN + warp * 16 + lane / 4;
    const int64_t col0 = (tile % m_blocks) * kBW + consumer * kWidth + 2 * (lane % 4);
#pragma unroll
    for (int j = 0; j < kWidth / 8; ++j) {
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int64_t col = col0 + 8 * j + c;
        if (col >= m) continue;
        const float b = bias != nullptr ? widen(bias[col * bias_stride]) : 0.f;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int64_t row = row0 + 8 * h;
          if (row >= n) continue;
          float value = acc[4 * j + 2 * h + c];
          if (bias != nullptr) value += b;
          store_output(out, row * out_row_stride + col * out_col_stride, value);
        }
      }
    }
  }
}

}  // namespace gemmkit::cuda::linear_family
