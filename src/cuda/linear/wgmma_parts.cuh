// Pieces the linear wgmma kernels share (wgmma_kernel.cuh, its k split's fold in
// wgmma_fold_kernel.cuh, the transposed one-chain kernel in wgmma_swap_kernel.cuh): the tile and
// thread constants, the shared-memory layout of a ring of stages, the producer's loop over k
// blocks, a one-chain tile's mainloop, fragment origins, bias loads and both epilogues (a store per
// element quadruple, or TMA stores of swizzled staging). Device code only.
#pragma once

#include <cuda.h>

#include "cuda/common/ptx.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/common/wgmma_store.cuh"
#include "cuda/linear/canonical.cuh"
#include "cuda/linear/tile_order.h"

namespace gemmkit::cuda::linear_family {

constexpr int kWgmmaBlockM = 128;  // weight rows per tile: two consumer warpgroups of 64
constexpr int kWgmmaBlockK = 64;   // k per ring stage: one 128-byte swizzled row of 16-bit values
constexpr int kWgmmaConsumers = 2;
// The widest sliced tile whose four accumulator sets (total, group sum, two slice partials) fit
// the consumers' registers: up to it, a slice's MMAs overlap the fold of the one before.
constexpr int kWgmmaOverlapMaxN = 96;
constexpr int kWgmmaThreads = 128 * (1 + kWgmmaConsumers);

// Output chunks of the TMA-store epilogue: 64 batch rows by a warpgroup's 64 weight rows of
// 16-bit out, one 128-byte swizzled row per batch row; two buffers per consumer warpgroup.
constexpr int kWgmmaStoreChunkBytes = 64 * 64 * 2;
constexpr int kWgmmaStagingBytes = kWgmmaConsumers * 2 * kWgmmaStoreChunkBytes;

// Shared memory: 1024 bytes of alignment slack, kStages x (weight box 128 x 64, activation box
// kBN x 64), then (kStaging) the store staging, then full[kStages] and empty[kStages] mbarriers.
template <int kBN, int kStages, bool kStaging = false>
struct WgmmaSharedLayout {
  static constexpr int kWeightBytes = kWgmmaBlockM * kWgmmaBlockK * 2;
  static constexpr int kActivationBytes = kBN * kWgmmaBlockK * 2;
  static constexpr int kStageBytes = kWeightBytes + kActivationBytes;
  static constexpr int kStagingOffset = kStages * kStageBytes;
  static constexpr int kBarrierOffset = kStagingOffset + (kStaging ? kWgmmaStagingBytes : 0);
  static constexpr int kBytes = 1024 + kBarrierOffset + 2 * kStages * 8;
  static_assert(kActivationBytes % 1024 == 0, "swizzled boxes stay 1024-byte aligned");
};

namespace wgmma_detail {

template <int kCount>
__device__ __forceinline__ void copy_into(float (&to)[kCount], const float (&from)[kCount]) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) to[i] = from[i];
}

template <int kCount>
__device__ __forceinline__ void add_into(float (&sum)[kCount], const float (&value)[kCount]) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) sum[i] += value[i];
}

// Where thread (consumer, warp, lane)'s accumulator fragment of tile `tile` (kBN batch rows)
// lies: its first weight row (output column; the other is 8 on) and the tile's first batch row.
struct WgmmaFragmentOrigin {
  int64_t row0, n0;
};
__device__ __forceinline__ WgmmaFragmentOrigin fragment_origin(int64_t tile, int64_t m_blocks,
                                                               int64_t tiles, int block_n,
                                                               int consumer, int warp, int lane) {
  const WgmmaTileCoords at = wgmma_tile_coords(tile, m_blocks, tiles / m_blocks);
  return {at.m_block * kWgmmaBlockM + consumer * 64 + warp * 16 + lane / 4, at.n_block * block_n};
}

// The bias of output columns row0 and row0 + 8 (0 where past m or without a bias).
template <typename T>
__device__ __forceinline__ void load_bias_pair(const T* bias, int64_t bias_stride, int64_t row0,
                                               int64_t m, float (&value)[2]) {
  value[0] = value[1] = 0.f;
  if (bias == nullptr) return;
  if (row0 < m) value[0] = widen(bias[row0 * bias_stride]);
  if (row0 + 8 < m) value[1] = widen(bias[(row0 + 8) * bias_stride]);
}

// The epilogue of one register quadruple: v[r] is output column row0 + 8 (r / 2) of batch row
// col0 + r % 2; bias (when has_bias), one rounding, the stores of the in-range elements (each
// warp's stores fill whole 32-byte sectors of f32 output rows).
template <typename Out>
__device__ __forceinline__ void store_quad(const float (&v)[4], bool has_bias,
                                           const float (&bias_value)[2], int64_t row0, int64_t col0,
                                           Out* out, int64_t out_row_stride, int64_t out_col_stride,
                                           int64_t n, int64_t m) {
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const int64_t row = row0 + 8 * (r / 2);
    const int64_t col = col0 + (r % 2);
    if (row < m && col < n) {
      float value = v[r];
      if (has_bias) value += bias_value[r / 2];
      store_output(out, col * out_row_stride + row * out_col_stride, value);
    }
  }
}

// The producer's part of one work unit: k blocks [kb_begin, kb_end) into the ring, each stage
// refilled once the consumers freed it (empty), its boxes issued by load(stage, k0) onto
// full[stage] for stage_bytes. stage and phase follow the ring.
template <int kStages, typename Load>
__device__ __forceinline__ void produce_blocks(int kb_begin, int kb_end, uint64_t* full,
                                               uint64_t* empty, uint32_t stage_bytes, int& stage,
                                               uint32_t& phase, const Load& load) {
  for (int kb = kb_begin; kb < kb_end; ++kb) {
    ptx::mbarrier_wait(&empty[stage], phase ^ 1);
    ptx::mbarrier_arrive_expect_tx(&full[stage], stage_bytes);
    load(stage, static_cast<int32_t>(kb * kWgmmaBlockK));
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1;
    }
  }
}

// One tile of the one-chain form: acc from +0 (the reference's start: a first step that ignored
// the accumulator would turn a step of all -0 products into -0) through every k block's steps in
// order, a_box(stage) the A operand and b_box(stage) the B operand (kN columns); one block's MMAs
// stay in flight (wait_group 1) and a stage is freed (thread t == 0 arrives on empty) once its
// MMAs are done. stage and phase follow the ring.
template <typename T, int kN, int kStages, typename ABox, typename BBox>
__device__ __forceinline__ void one_chain_tile(float (&acc)[kN / 2], int64_t k, int k_blocks,
                                               uint64_t* full, uint64_t* empty, int t, int& stage,
                                               uint32_t& phase, const ABox& a_box,
                                               const BBox& b_box) {
#pragma unroll
  for (int r = 0; r < kN / 2; ++r) acc[r] = 0.f;
  int previous = 0;
  for (int kb = 0; kb < k_blocks; ++kb) {
    ptx::mbarrier_wait(&full[stage], phase);
    const int steps = min(4, static_cast<int>((k - int64_t{kb} * kWgmmaBlockK + 15) / 16));
    wgmma::mma_k_block<T, kN>(acc, a_box(stage), b_box(stage), steps, false);
    if (kb > 0) {  // the last block's MMAs are done with its stage
      wgmma::wait_group<1>();
      if (t == 0) ptx::mbarrier_arrive(&empty[previous]);
    }
    previous = stage;
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1;
    }
  }
  wgmma::wait_group<0>();
  wgmma::fence_registers(acc);
  if (t == 0) ptx::mbarrier_arrive(&empty[previous]);
}

// The TMA-store epilogue of a warpgroup's 64 weight rows (from m0) of a tile's kBN batch rows
// (from n0), 16-bit out: + bias, one rounding, 64 batch rows at a time transposed by stmatrix into
// one of the warpgroup's two swizzled chunk buffers (`staging`; `turn` counts its chunks: buffer
// turn & 1), each stored as one 64 x 64 box of out_map by thread 0 (TMA drops what lies past n or
// m). Thread t of 128; named barrier `barrier` of the warpgroup's threads.
template <typename Out, int kBN>
__device__ __forceinline__ void store_tile_by_tma(const CUtensorMap* out_map,
                                                  const float (&acc)[kBN / 2], bool has_bias,
                                                  const float (&bias_value)[2], int32_t m0,
                                                  int64_t n0, uint8_t* staging, int barrier, int t,
                                                  uint32_t& turn) {
  const int warp = t / 32, lane = t % 32;
  const auto value = [&](int j, int r2, int column) {
    const float v = acc[4 * j + 2 * r2 + column];
    return has_bias ? v + bias_value[r2] : v;
  };
#pragma unroll
  for (int q = 0; q < kBN / 64; ++q, ++turn) {
    uint8_t* const buffer = staging + (turn & 1) * kWgmmaStoreChunkBytes;
    if (t == 0) ptx::bulk_wait_group_read<1>();  // the buffer's store of two chunks ago
    ptx::named_barrier_sync(barrier, 128);
    wgmma::stage_chunk_transposed<Out>(q, warp, lane, buffer, value);
    ptx::fence_proxy_async_shared();
    ptx::named_barrier_sync(barrier, 128);
    if (t == 0) {
      ptx::tma_store_2d(out_map, buffer, m0, static_cast<int32_t>(n0 + 64 * q));
      ptx::bulk_commit_group();
    }
  }
}

}  // namespace wgmma_detail

}  // namespace gemmkit::cuda::linear_family
