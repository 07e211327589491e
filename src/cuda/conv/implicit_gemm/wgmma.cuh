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
// Reduction segments (kSegmented; wgmma_layout.h): where one image's tiles fill under half the
// machine, K is cut into segments, each a chain from zero; a CTA runs a tile's segments in turn and
// adds them in order (chained), or, below one wave, each work item reduces one segment into an
// fp32 partial tile of the workspace and conv_implicit_wgmma_fold_kernel adds them in the same
// order, so both forms return the same bits.
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

// The output channel (within the group) of fragment rows lane / 4 of warp `warp` of 64-channel
// half `half` of tile `at`; the thread's other row is 8 channels on.
__device__ __forceinline__ int32_t fragment_row0(const WgmmaConvTile& at, int half, int warp,
                                                 int lane) {
  return static_cast<int32_t>(at.o_tile) * kWgmmaConvBlockO + half * 64 + warp * 16 + lane / 4;
}

// The bias of output channels row0 and row0 + 8 of tile `at` (0 without a bias or past the
// group's channels), and whether each is an output channel.
template <typename T>
__device__ __forceinline__ void load_bias_rows(const ImplicitWgmmaPlan& plan,
                                               const WgmmaConvTile& at, int32_t row0, const T* bias,
                                               float (&value)[2], bool (&ok)[2]) {
  ok[0] = row0 < plan.opg;
  ok[1] = row0 + 8 < plan.opg;
  value[0] = value[1] = 0.f;
  if (plan.has_bias) {
    const int64_t first = at.group * plan.opg + row0;
    if (ok[0]) value[0] = to_float(bias[first * plan.bias_stride]);
    if (ok[1]) value[1] = to_float(bias[(first + 8) * plan.bias_stride]);
  }
}

// Stores accumulators v (the fragment's 4 j .. 4 j + 3: channels row0 + 8 (r / 2), box column
// 8 j + 2 (lane % 4) + r % 2) of tile `at`, + bias, one rounding, the in-range elements only.
template <typename TOut>
__device__ __forceinline__ void store_elements(const ImplicitWgmmaPlan& plan,
                                               const WgmmaConvTile& at, int32_t row0, int j,
                                               int lane, const float (&v)[4],
                                               const float (&bias_value)[2], const bool (&ok)[2],
                                               TOut* out) {
  const int64_t channel_stride = plan.out_stride[kDims + 1];
  TOut* const tile_out =
      out + implicit_wgmma_tile_out_base(plan, at) + int64_t{row0} * channel_stride;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    int32_t position[kDims];
    const int32_t column = 8 * j + 2 * (lane % 4) + half;
    if (!implicit_wgmma_position(plan, at, column, position)) continue;
    TOut* const at_out = tile_out + implicit_wgmma_position_offset(plan, position);
#pragma unroll
    for (int r2 = 0; r2 < 2; ++r2) {
      if (!ok[r2]) continue;
      float value = v[2 * r2 + half];
      if (plan.has_bias) value += bias_value[r2];
      at_out[8 * r2 * channel_stride] = from_float<TOut>(value);
    }
  }
}

}  // namespace wgmma_conv_detail

// kSegmented (block_n 128 only): the reduction in plan.k_segments segments, chained in the CTA or,
// split_parallel, one segment per work item with fp32 partials to `partials` for the fold kernel.
template <typename T, typename TOut, int kBN, int kStages, bool kTmaStore, bool kSegmented>
__global__ void __launch_bounds__(kWgmmaConvThreads, 1)
    conv_implicit_wgmma_kernel(const __grid_constant__ CUtensorMap x_map,
                               const __grid_constant__ CUtensorMap w_map,
                               const __grid_constant__ CUtensorMap out_map,
                               const __grid_constant__ ImplicitWgmmaPlan plan, const T* bias,
                               TOut* out, float4* partials) {
  static_assert(!kTmaStore || sizeof(TOut) == 2, "TMA stores of 16-bit out");
  static_assert(!kSegmented || kBN == 128, "segments with 128-position tiles (registers)");
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
    for (int64_t item = blockIdx.x; item < plan.tiles; item += gridDim.x) {
      const WgmmaConvItem it = implicit_wgmma_item(plan, item);
      const WgmmaConvTile t = implicit_wgmma_tile(plan, it.tile);
      for (int kb = it.kb_begin; kb < it.kb_end; ++kb) {
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
  [[maybe_unused]] float total[kSegmented ? kRegs : 1];
  for (int64_t item = blockIdx.x; item < plan.tiles; item += gridDim.x) {
    const WgmmaConvItem it = implicit_wgmma_item(plan, item);
    const int64_t tile = it.tile;
    int previous = -1;
    int in_segment = 0;       // k blocks of the current segment done
    bool have_total = false;  // chained: total holds the segments before the current one
    for (int kb = it.kb_begin; kb < it.kb_end; ++kb) {
      ptx::mbarrier_wait(&full[stage], phase);
      wgmma_conv_detail::mma_block<T, kBN>(acc, weight_box(stage) + consumer * 64 * 128,
                                           activation_box(stage), in_segment == 0);
      // The previous block's MMAs are done once at most this block's group is pending.
      wgmma::wait_group<1>();
      if (previous >= 0 && t == 0) ptx::mbarrier_arrive(&empty[previous]);
      previous = stage;
      if (++stage == kStages) {
        stage = 0;
        phase ^= 1;
      }
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
    wgmma::wait_group<0>();
    wgmma::fence_registers(acc);
    if (t == 0 && previous >= 0) ptx::mbarrier_arrive(&empty[previous]);
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

    // Epilogue: bias, one rounding, stores of the in-range elements. Register 4 j + r holds
    // output channel row0 + 8 (r / 2) at box column 8 j + 2 (lane % 4) + r % 2.
    const WgmmaConvTile tile_at = implicit_wgmma_tile(plan, tile);
    const int32_t row0 = wgmma_conv_detail::fragment_row0(tile_at, consumer, warp, lane);
    bool row_ok[2];
    float bias_value[2];
    wgmma_conv_detail::load_bias_rows(plan, tile_at, row0, bias, bias_value, row_ok);
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
    } else {
#pragma unroll
      for (int j = 0; j < kBN / 8; ++j) {
        const float v[4] = {acc[4 * j], acc[4 * j + 1], acc[4 * j + 2], acc[4 * j + 3]};
        wgmma_conv_detail::store_elements(plan, tile_at, row0, j, lane, v, bias_value, row_ok, out);
      }
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
  const int32_t row0 = wgmma_conv_detail::fragment_row0(at, consumer, warp, lane);
  bool row_ok[2];
  float bias_value[2];
  wgmma_conv_detail::load_bias_rows(plan, at, row0, bias, bias_value, row_ok);
  const float v[4] = {sum.x, sum.y, sum.z, sum.w};
  wgmma_conv_detail::store_elements(plan, at, row0, j, lane, v, bias_value, row_ok, out);
}

}  // namespace gemmkit::cuda::conv_impl
