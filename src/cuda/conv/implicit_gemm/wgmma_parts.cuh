// Device pieces the schedules of the Hopper implicit-GEMM convolution share (wgmma.cuh: two
// consumer warpgroups on one tile; wgmma_phases.cuh: the same over up to 4 stride phases in one
// launch; wgmma_pingpong.cuh: each consumer warpgroup on its own tiles, in turn): the
// shared-memory layout, the producers' TMA loops, one k block's MMAs, the ring position
// arithmetic and both epilogues (a store per element, or TMA stores of swizzled staging). Every
// piece keeps the per-output chain of wgmma.cuh's contract, so every schedule returns the same
// bits.
#pragma once

#include <cuda.h>

#include "cuda/common/ptx.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/conv/common/dtype.cuh"
#include "cuda/conv/implicit_gemm/wgmma_k_order.h"
#include "cuda/conv/implicit_gemm/wgmma_layout.h"

namespace gemmkit::cuda::conv_impl {

// The argument of one launch of the phases kernel (wgmma_phases.cuh): up to
// kWgmmaConvMaxMergedPhases stride phases of a transposed convolution, all of one block_n, stage
// count and epilogue, each with its activation map and (TMA-store epilogue) out map, and the
// running totals of their tiles. Plain data (kernel argument).
struct WgmmaConvPhases {
  CUtensorMap x_map[kWgmmaConvMaxMergedPhases];
  CUtensorMap out_map[kWgmmaConvMaxMergedPhases];
  ImplicitWgmmaPlan plan[kWgmmaConvMaxMergedPhases];
  int64_t item_end[kWgmmaConvMaxMergedPhases] = {};
  int plans = 1;
  int64_t items = 0;  // item_end[plans - 1]

  // Launch item i: its plan and the item within that plan (implicit_wgmma_launch_item).
  __device__ __forceinline__ WgmmaConvLaunchItem item(int64_t i) const {
    return implicit_wgmma_launch_item(item_end, plans, i);
  }
};

}  // namespace gemmkit::cuda::conv_impl

namespace gemmkit::cuda::conv_impl::wgmma_conv_detail {

// The matrix descriptors' layout bits of plan p's boxes: rows of 64 channels with the 128-byte
// swizzle, or of 32 with the 64-byte one (ImplicitWgmmaPlan::block_c).
__device__ __forceinline__ uint64_t k_block_layout(const ImplicitWgmmaPlan& plan) {
  return plan.block_c == kWgmmaConvBlockK ? wgmma::kLayoutSw128 : wgmma::kLayoutSw64;
}

// The shared memory of a CTA: kStages stages of (weight box 128 x 64, of which the narrow-o form
// fills 64 rows, activation box kBN x 64),
// then (kTmaStore) the store staging, two chunk buffers per consumer warpgroup, then the
// mbarriers: full and empty per stage, and two order barriers (the ping-pong schedule's).
template <int kBN, int kStages, bool kTmaStore>
struct SharedLayout {
  static constexpr int kWeightBytes = kWgmmaConvBlockO * kWgmmaConvBlockK * 2;
  static constexpr int kActivationBytes = kBN * kWgmmaConvBlockK * 2;
  static constexpr int kStageBytes = static_cast<int>(implicit_wgmma_stage_bytes(kBN));
  static_assert(kWeightBytes + kActivationBytes == kStageBytes, "a stage is its two boxes");
  static_assert(kActivationBytes % 1024 == 0, "swizzled boxes stay 1024-byte aligned");
  static_assert(kStages * kStageBytes + (kTmaStore ? kWgmmaConvStagingBytes : 0) +
                        8 * 2 * (kStages + 1) + 1024 <=
                    implicit_wgmma_smem_bytes(kBN, kStages, kTmaStore),
                "the launch's shared memory holds the layout");

  uint8_t* base;
  __device__ __forceinline__ explicit SharedLayout(char* raw)
      : base(reinterpret_cast<uint8_t*>(raw +
                                        ((1024u - (ptx::smem_address(raw) & 1023u)) & 1023u))) {}
  __device__ __forceinline__ uint8_t* weight_box(int stage) const {
    return base + stage * kStageBytes;
  }
  __device__ __forceinline__ uint8_t* activation_box(int stage) const {
    return base + stage * kStageBytes + kWeightBytes;
  }
  // Consumer warpgroup `consumer`'s two chunk buffers.
  __device__ __forceinline__ uint8_t* staging(int consumer) const {
    return base + kStages * kStageBytes + consumer * 2 * kWgmmaConvChunkBytes;
  }
  __device__ __forceinline__ uint64_t* full() const {
    return reinterpret_cast<uint64_t*>(base + kStages * kStageBytes +
                                       (kTmaStore ? kWgmmaConvStagingBytes : 0));
  }
  __device__ __forceinline__ uint64_t* empty() const { return full() + kStages; }
  __device__ __forceinline__ uint64_t* order() const { return full() + 2 * kStages; }
  // The bytes one k block of `block_c` channels lands in a stage for tiles of `block_o` output
  // channels (the boxes fill their slots' first rows of 2 * block_c bytes).
  static __device__ __forceinline__ uint32_t k_block_bytes(int32_t block_o, int32_t block_c) {
    return static_cast<uint32_t>((kBN + block_o) * block_c * 2);
  }
};

// Thread 0 initializes the ring's mbarriers (full: one arrival, the producer's, plus the
// transaction bytes; empty: `empty_arrivals`, one per consumer warpgroup reading the stage), then
// the whole CTA waits for them.
template <int kBN, int kStages, bool kTmaStore>
__device__ __forceinline__ void init_stage_barriers(
    const SharedLayout<kBN, kStages, kTmaStore>& smem, uint32_t empty_arrivals) {
  ptx::init_ring_barriers(smem.full(), smem.empty(), kStages, empty_arrivals);
  __syncthreads();
}

// The end of a consumer warpgroup's chain of MMAs over a work item: waits for its last MMAs,
// keeps the accumulators' reads after that wait, and frees the last stage it read (`previous`;
// -1: none) by its thread t == 0.
template <int kRegs>
__device__ __forceinline__ void finish_mainloop(float (&acc)[kRegs], uint64_t* empty, int previous,
                                                int t) {
  wgmma::wait_group<0>();
  wgmma::fence_registers(acc);
  if (t == 0 && previous >= 0) ptx::mbarrier_arrive(&empty[previous]);
}

// The producer's loads of one k block (box coordinates c; `bytes`: its weight and activation
// boxes) into the next stage of ring `at`, once the stage is free.
template <int kBN, int kStages, bool kTmaStore>
__device__ __forceinline__ void load_k_block(const CUtensorMap* x_map, const CUtensorMap* w_map,
                                             const WgmmaConvCoords& c, uint32_t bytes,
                                             const SharedLayout<kBN, kStages, kTmaStore>& smem,
                                             WgmmaConvRing<kStages>& at) {
  uint64_t* const full = smem.full();
  uint64_t* const empty = smem.empty();
  ptx::mbarrier_wait(&empty[at.stage], at.phase ^ 1);
  ptx::mbarrier_arrive_expect_tx(&full[at.stage], bytes);
  ptx::tma_load_5d(smem.weight_box(at.stage), w_map, &full[at.stage], c.w[0], c.w[1], c.w[2],
                   c.w[3], c.w[4]);
  ptx::tma_load_5d(smem.activation_box(at.stage), x_map, &full[at.stage], c.x[0], c.x[1], c.x[2],
                   c.x[3], c.x[4]);
  at.next();
}

// The producer (one thread): for each work item b, b + grid, ... of the CTA, in order, the weight
// and activation boxes of each of its k blocks into the next stage, once the stage is free.
template <int kBN, int kStages, bool kTmaStore>
__device__ __forceinline__ void produce(const CUtensorMap* x_map, const CUtensorMap* w_map,
                                        const ImplicitWgmmaPlan& plan,
                                        const SharedLayout<kBN, kStages, kTmaStore>& smem) {
  using Layout = SharedLayout<kBN, kStages, kTmaStore>;
  const uint32_t bytes = Layout::k_block_bytes(plan.block_o, plan.block_c);
  WgmmaConvRing<kStages> at;
  for (int64_t item = blockIdx.x; item < plan.tiles; item += gridDim.x) {
    const WgmmaConvItem it = implicit_wgmma_item(plan, item);
    const WgmmaConvTile t = implicit_wgmma_tile(plan, it.tile);
    WgmmaConvKCursor k = implicit_wgmma_k_cursor(plan, t, it.kb_begin);
    for (int kb = it.kb_begin; kb < it.kb_end; ++kb) {
      load_k_block(x_map, w_map, k.coords, bytes, smem, at);
      implicit_wgmma_k_next(plan, k);
    }
  }
}

// The producer warpgroup's part of a kernel (every thread of warpgroup 0 calls it, then returns):
// its registers go to the consumers, and thread 0 prefetches the maps (out_map: a TMA-store
// epilogue's, else null) and fills the ring.
template <int kBN, int kStages, bool kTmaStore>
__device__ __forceinline__ void run_producer(const CUtensorMap* x_map, const CUtensorMap* w_map,
                                             const CUtensorMap* out_map,
                                             const ImplicitWgmmaPlan& plan,
                                             const SharedLayout<kBN, kStages, kTmaStore>& smem) {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
  if (threadIdx.x != 0) return;
  ptx::prefetch_tensor_map(x_map);
  ptx::prefetch_tensor_map(w_map);
  if (out_map != nullptr) ptx::prefetch_tensor_map(out_map);
  produce(x_map, w_map, plan, smem);
}

// The producer warpgroup's part of the phases kernel: as run_producer, the work items of CTA b
// over the launch's plans in turn (the order the consumers take them).
template <int kBN, int kStages, bool kTmaStore>
__device__ __forceinline__ void run_phase_producer(
    const CUtensorMap* w_map, const WgmmaConvPhases& launch,
    const SharedLayout<kBN, kStages, kTmaStore>& smem) {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
  if (threadIdx.x != 0) return;
  ptx::prefetch_tensor_map(w_map);
  for (int j = 0; j < launch.plans; ++j) {
    ptx::prefetch_tensor_map(&launch.x_map[j]);
    if (kTmaStore) ptx::prefetch_tensor_map(&launch.out_map[j]);
  }
  WgmmaConvRing<kStages> at;
  for (int64_t item = blockIdx.x; item < launch.items; item += gridDim.x) {
    const WgmmaConvLaunchItem li = launch.item(item);
    const ImplicitWgmmaPlan& plan = launch.plan[li.plan];
    const CUtensorMap* const x_map = &launch.x_map[li.plan];
    const WgmmaConvItem it = implicit_wgmma_item(plan, li.item);
    const WgmmaConvTile t = implicit_wgmma_tile(plan, it.tile);
    WgmmaConvKCursor k = implicit_wgmma_k_cursor(plan, t, it.kb_begin);
    const uint32_t bytes =
        SharedLayout<kBN, kStages, kTmaStore>::k_block_bytes(plan.block_o, plan.block_c);
    for (int kb = it.kb_begin; kb < it.kb_end; ++kb) {
      load_k_block(x_map, w_map, k.coords, bytes, smem, at);
      implicit_wgmma_k_next(plan, k);
    }
  }
}

// The output channel (within the group) of fragment rows lane / 4 of warp `warp` of 64-channel
// half `half` of tile `at`; the thread's other row is 8 channels on.
__device__ __forceinline__ int32_t fragment_row0(const ImplicitWgmmaPlan& plan,
                                                 const WgmmaConvTile& at, int half, int warp,
                                                 int lane) {
  return static_cast<int32_t>(at.o_tile) * plan.block_o + half * 64 + warp * 16 + lane / 4;
}

// The bias of a thread's two fragment rows (output channels row0 and row0 + 8 of a tile's
// 64-channel half; 0 without a bias or past the group's channels) and whether each is an output
// channel. Loaded before a tile's MMAs, so that the epilogue does not wait for it.
struct WgmmaConvRowBias {
  float value[2] = {0.f, 0.f};
  bool ok[2] = {false, false};
};

template <typename T>
__device__ __forceinline__ WgmmaConvRowBias load_bias_rows(const ImplicitWgmmaPlan& plan,
                                                           const WgmmaConvTile& at, int32_t row0,
                                                           const T* bias) {
  WgmmaConvRowBias b;
  b.ok[0] = row0 < plan.opg;
  b.ok[1] = row0 + 8 < plan.opg;
  if (plan.has_bias) {
    const int64_t first = at.group * plan.opg + row0;
    if (b.ok[0]) b.value[0] = to_float(bias[first * plan.bias_stride]);
    if (b.ok[1]) b.value[1] = to_float(bias[(first + 8) * plan.bias_stride]);
  }
  return b;
}

// The bias rows of consumer thread (warp, lane) in 64-channel half `half` of tile `at`.
template <typename T>
__device__ __forceinline__ WgmmaConvRowBias load_half_bias(const ImplicitWgmmaPlan& plan,
                                                           const WgmmaConvTile& at, int half,
                                                           int warp, int lane, const T* bias) {
  return load_bias_rows(plan, at, fragment_row0(plan, at, half, warp, lane), bias);
}

// Stores accumulators v (the fragment's 4 j .. 4 j + 3: channels row0 + 8 (r / 2), box column
// first_column + 8 j + 2 (lane % 4) + r % 2) of tile `at`, + bias, one rounding, the in-range
// elements only.
template <typename TOut>
__device__ __forceinline__ void store_elements(const ImplicitWgmmaPlan& plan,
                                               const WgmmaConvTile& at, int32_t row0,
                                               int first_column, int j, int lane,
                                               const float (&v)[4], const WgmmaConvRowBias& rb,
                                               TOut* out) {
  const int64_t channel_stride = plan.out_stride[kDims + 1];
  TOut* const tile_out =
      out + implicit_wgmma_tile_out_base(plan, at) + int64_t{row0} * channel_stride;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    int32_t position[kDims];
    const int32_t column = first_column + 8 * j + 2 * (lane % 4) + half;
    if (!implicit_wgmma_position(plan, at, column, position)) continue;
    TOut* const at_out = tile_out + implicit_wgmma_position_offset(plan, position);
#pragma unroll
    for (int r2 = 0; r2 < 2; ++r2) {
      if (!rb.ok[r2]) continue;
      float value = v[2 * r2 + half];
      if (plan.has_bias) value += rb.value[r2];
      at_out[8 * r2 * channel_stride] = from_float<TOut>(value);
    }
  }
}

// The element-store epilogue of 64-channel half `half` of tile `at` at the kBN box columns from
// `first_column` (accumulators acc, kBN / 2 of them in the fragment layout of wgmma::mma_k_block;
// rb: load_half_bias of the same half).
template <typename TOut, int kBN>
__device__ __forceinline__ void store_half_elements(const ImplicitWgmmaPlan& plan,
                                                    const WgmmaConvTile& at, int half,
                                                    int first_column, const float (&acc)[kBN / 2],
                                                    const WgmmaConvRowBias& rb, int warp, int lane,
                                                    TOut* out) {
  const int32_t row0 = fragment_row0(plan, at, half, warp, lane);
#pragma unroll
  for (int j = 0; j < kBN / 8; ++j) {
    const float v[4] = {acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]};
    store_elements(plan, at, row0, first_column, j, lane, v, rb, out);
  }
}

// The TMA-store epilogue of 64-channel half `half` of tile `at` at the kBN box columns from
// `first_column` (a multiple of kWgmmaConvStoreChunk) by one consumer warpgroup (thread t of 128;
// named barrier `barrier` of its 128 threads; rb: load_half_bias of the same half): + bias, one
// rounding, 64 positions at a time transposed by stmatrix into one of the warpgroup's two swizzled
// chunk buffers (`staging`; `turn` counts the warpgroup's chunks: buffer turn & 1), each stored as
// one box of the out map by thread 0. A half whose 64 channels start past the group's (o / groups =
// 64 with groups) stores nothing: its box would cover the next group's channels.
template <typename TOut, int kBN>
__device__ __forceinline__ void store_half_by_tma(const CUtensorMap* out_map,
                                                  const ImplicitWgmmaPlan& plan,
                                                  const WgmmaConvTile& at, int half,
                                                  int first_column, const float (&acc)[kBN / 2],
                                                  const WgmmaConvRowBias& rb, uint8_t* staging,
                                                  int barrier, int t, uint32_t& turn) {
  if (static_cast<int32_t>(at.o_tile) * plan.block_o + half * 64 >= plan.opg) return;
  const int warp = t / 32, lane = t % 32;
  const auto value = [&](int j, int r2, int column) {
    const float v = acc[4 * j + 2 * r2 + column];
    return plan.has_bias ? v + rb.value[r2] : v;
  };
  // Lane l addresses row l % 8 of matrix l / 8 of each stmatrix: matrix m holds columns
  // 8 (jj + m / 2) .. + 7 of the chunk and the warp's channels 16 warp + 8 (m % 2) .. + 7, one
  // 16-byte unit of each position's row, placed by the 128-byte swizzle.
  const int m = lane / 8;
#pragma unroll
  for (int q = 0; q < kBN / kWgmmaConvStoreChunk; ++q, ++turn) {
    uint8_t* const buffer = staging + (turn & 1) * kWgmmaConvChunkBytes;
    if (t == 0) ptx::bulk_wait_group_read<1>();  // the buffer's store of two chunks ago
    ptx::named_barrier_sync(barrier, 128);
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
    ptx::named_barrier_sync(barrier, 128);
    if (t == 0) {
      int32_t c[5];
      implicit_wgmma_store_coords(plan, at, half, first_column / kWgmmaConvStoreChunk + q, c);
      ptx::tma_store_5d(out_map, buffer, c[0], c[1], c[2], c[3], c[4]);
      ptx::bulk_commit_group();
    }
  }
}

}  // namespace gemmkit::cuda::conv_impl::wgmma_conv_detail
