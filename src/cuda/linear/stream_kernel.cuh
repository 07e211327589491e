// linear streaming kernel: out[n, m] = x[n, k] . w[m, k]^T (+ bias), bf16 or f16 in, fp32
// accumulate, sm_90; the decode-batch kernel of the one-chain form (weights of kOneChainMinRows
// rows and more, linear_contract.h).
//
// Contract: evaluates the one-chain canonical reduction (canonical.cuh): per 16 x 8 output tile
// one chain of mma.sync.m16n8k16 over every k16 block of k in ascending order from zero, weights
// as the A operand and batch rows as B, then + bias and one rounding; the reference kernel's bits
// for any n. Elements past n, m or k are TMA zero fill (k16 blocks past k are not issued).
// k % 8 == 0, x and w rows contiguous with 16-byte aligned bases and row strides (TMA rules).
//
// Structure: a CTA owns 16 * kConsumers weight rows by 8 * kNT batch rows over all of k. One
// producer lane streams 128-wide k slices of both (stage_fragments.cuh: two 64-wide halves in the
// 128-byte swizzle) into a ring of kStages stages (8, or 16 for long k: stream_config.h); consumer
// warp c reduces weight rows 16c .. 16c + 15 of every slice with ldmatrix and mma.sync, kNT
// independent chains per warp, and frees the stage once its fragments are in registers. CTAs
// stride over tiles (weight block fastest); the ring runs on across a CTA's tiles. There is no k
// split (one chain), so the parallelism is m / 16 chains: at kOneChainMinRows rows and more the
// chain of k / 16 dependent MMAs ends before the weight has streamed from HBM.
//
// PDL: the weight slices of the first ring round are requested before griddepcontrol.wait;
// activations, bias and out are touched only after it; consumer thread 0 triggers the dependent
// grid right after its wait (the ring kernel's placement).
//
// Wins: batches of a few rows (n <= 64) on large weights, where the work is streaming w.
#pragma once

#include "cuda/common/ptx.cuh"
#include "cuda/linear/canonical.cuh"
#include "cuda/linear/stage_fragments.cuh"

namespace gemmkit::cuda::linear_family {

// Shared memory of an instance with a ring of kStages stages (stream_stages_host, stream_config.h,
// sets the count; the launcher checks this layout's bytes against the host's).
template <int kConsumers, int kNT, int kStages>
constexpr int stream_shared_bytes() {
  return 1024 + kStages * RingTile<kConsumers, kNT>::kStageBytes + 2 * kStages * 8;
}

namespace stream_detail {

// The fragments of one k16 block: warp c's 16 weight rows and the kNT batch tiles.
template <int kNT>
struct BlockFragments {
  uint32_t a[4];
  uint32_t b[kNT][2];
};

template <int kConsumers, int kNT>
__device__ __forceinline__ void load_block(uint32_t stage, int block, int consumer, int lane,
                                           BlockFragments<kNT>& f) {
  const RingBlock<kConsumers, kNT> fragments(stage, block);
  fragments.a_fragment(consumer, lane, f.a);
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) fragments.b_fragment(nt, lane, f.b[nt]);
}

// Fragment buffers of a slice's straight-line MMAs: block b + kBuffers - 1 may be read while block
// b's MMAs run (a dependent m16n8k16 step takes ~24 cycles on an H200, an ldmatrix's result
// longer). ptxas schedules the loads itself: with 8 buffers (kNT <= 2) the SASS still issues each
// block's ldmatrix one or two blocks ahead of its MMAs, and forcing all of a slice's loads first
// measured slower (docs/perf.md, rejected ideas).
template <int kNT>
constexpr int fragment_buffers() {
  return kNT <= 2 ? 8 : kNT == 4 ? 4 : 2;
}

template <typename T, int kNT>
__device__ __forceinline__ void block_mma(const BlockFragments<kNT>& f, float (&acc)[kNT][4]) {
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) ptx::mma_m16n8k16<T>(acc[nt], f.a, f.b[nt][0], f.b[nt][1]);
}

}  // namespace stream_detail

template <typename T, typename Out, int kConsumers, int kNT, int kStages>
__global__ void __launch_bounds__(32 * (kConsumers + 1))
    linear_stream_kernel(const __grid_constant__ CUtensorMap w_map,
                         const __grid_constant__ CUtensorMap x_map, const T* bias,
                         int64_t bias_stride, Out* out, int64_t out_row_stride,
                         int64_t out_col_stride, int64_t n, int64_t m, int64_t k, int64_t m_tiles,
                         int64_t tiles) {
  using Tile = RingTile<kConsumers, kNT>;
  extern __shared__ __align__(1024) char shared_raw[];
  char* shared = shared_raw + ((1024u - (ptx::smem_address(shared_raw) & 1023u)) & 1023u);
  uint64_t* full = reinterpret_cast<uint64_t*>(shared + kStages * Tile::kStageBytes);
  uint64_t* empty = full + kStages;
  const int warp = static_cast<int>(threadIdx.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64_t slices = (k + kSliceK - 1) / kSliceK;

  ptx::init_ring_barriers(full, empty, kStages, kConsumers);
  __syncthreads();

  if (warp == kConsumers) {  // the producer
    if (lane != 0) return;
    ptx::prefetch_tensor_map(&w_map);
    ptx::prefetch_tensor_map(&x_map);
    const auto stage_of = [&](int64_t i) { return shared + (i % kStages) * Tile::kStageBytes; };
    // A tile's first weight row and first batch row, computed once per tile (not per slice).
    const auto w_row_of = [&](int64_t tile) {
      return static_cast<int32_t>((tile % m_tiles) * Tile::kRowsW);
    };
    const auto x_row_of = [&](int64_t tile) {
      return static_cast<int32_t>((tile / m_tiles) * Tile::kRowsX);
    };
    const auto load_w = [&](int64_t i, int32_t row, int64_t slice) {
      char* stage = stage_of(i);
      const auto kc = static_cast<int32_t>(slice * kSliceK);
      ptx::tma_load_2d(stage, &w_map, &full[i % kStages], kc, row);
      ptx::tma_load_2d(stage + Tile::kWHalfBytes, &w_map, &full[i % kStages], kc + kRingHalfK, row);
    };
    const auto load_x = [&](int64_t i, int32_t row, int64_t slice) {
      char* stage = stage_of(i) + 2 * Tile::kWHalfBytes;
      const auto kc = static_cast<int32_t>(slice * kSliceK);
      ptx::tma_load_2d(stage, &x_map, &full[i % kStages], kc, row);
      ptx::tma_load_2d(stage + Tile::kXHalfBytes, &x_map, &full[i % kStages], kc + kRingHalfK, row);
    };
    // The first ring round of the first tile: weights before the wait, activations after it.
    const int64_t first = blockIdx.x < tiles ? min(int64_t{kStages}, slices) : 0;
    for (int64_t i = 0; i < first; ++i) {
      ptx::mbarrier_arrive_expect_tx(&full[i], Tile::kStageBytes);
      load_w(i, w_row_of(blockIdx.x), i);
    }
    ptx::grid_dependency_wait();
    for (int64_t i = 0; i < first; ++i) load_x(i, x_row_of(blockIdx.x), i);
    int64_t i = 0;
    for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      const int32_t w_row = w_row_of(tile), x_row = x_row_of(tile);
      for (int64_t slice = 0; slice < slices; ++slice, ++i) {
        if (i < first) continue;
        const int stage = static_cast<int>(i % kStages);
        ptx::mbarrier_wait(&empty[stage], static_cast<uint32_t>(((i / kStages) & 1) ^ 1));
        ptx::mbarrier_arrive_expect_tx(&full[stage], Tile::kStageBytes);
        load_w(i, w_row, slice);
        load_x(i, x_row, slice);
      }
    }
    return;
  }

  ptx::grid_dependency_wait();
  if (threadIdx.x == 0) ptx::launch_dependents();
  const int group = lane >> 2, thread_in_group = lane & 3;
  const uint32_t ring = ptx::smem_address(shared);
  int64_t i = 0;
  for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    float acc[kNT][4];
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) acc[nt][0] = acc[nt][1] = acc[nt][2] = acc[nt][3] = 0.f;
    for (int64_t slice = 0; slice < slices; ++slice, ++i) {
      const int stage = static_cast<int>(i % kStages);
      const uint32_t stage_address = ring + stage * Tile::kStageBytes;
      ptx::mbarrier_wait(&full[stage], static_cast<uint32_t>((i / kStages) & 1));
      const int blocks = static_cast<int>(slice_blocks(k, slice));
      if (blocks == 8) {  // every slice but the last: straight-line, read kBuffers - 1 ahead
        constexpr int kBuffers = stream_detail::fragment_buffers<kNT>();
        stream_detail::BlockFragments<kNT> f[kBuffers];
#pragma unroll
        for (int b = 0; b < kBuffers - 1; ++b) {
          stream_detail::load_block<kConsumers, kNT>(stage_address, b, warp, lane, f[b]);
        }
#pragma unroll
        for (int b = 0; b < 8; ++b) {
          if (b + kBuffers - 1 < 8) {
            stream_detail::load_block<kConsumers, kNT>(stage_address, b + kBuffers - 1, warp, lane,
                                                       f[(b + kBuffers - 1) % kBuffers]);
          }
          stream_detail::block_mma<T, kNT>(f[b % kBuffers], acc);
        }
      } else {
        for (int b = 0; b < blocks; ++b) {
          stream_detail::BlockFragments<kNT> f;
          stream_detail::load_block<kConsumers, kNT>(stage_address, b, warp, lane, f);
          stream_detail::block_mma<T, kNT>(f, acc);
        }
      }
      // The fragments are in registers (ldmatrix has returned): the stage may be refilled, once a
      // proxy fence orders the reads before the refill's TMA (async-proxy) writes, as in the ring
      // kernel.
      ptx::fence_proxy_async_shared();
      __syncwarp();
      if (lane == 0) ptx::mbarrier_arrive(&empty[stage]);
    }
    const int64_t m0 = (tile % m_tiles) * Tile::kRowsW + 16 * warp;
    const int64_t n0 = (tile / m_tiles) * Tile::kRowsX;
    float bias_value[2] = {0.f, 0.f};
    if (bias != nullptr) {
      if (m0 + group < m) bias_value[0] = widen(bias[(m0 + group) * bias_stride]);
      if (m0 + group + 8 < m) bias_value[1] = widen(bias[(m0 + group + 8) * bias_stride]);
    }
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) {
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int64_t row = m0 + group + (r >= 2 ? 8 : 0);                // weight row: out column
        const int64_t col = n0 + 8 * nt + thread_in_group * 2 + (r & 1);  // batch row
        if (row >= m || col >= n) continue;
        float value = acc[nt][r];
        if (bias != nullptr) value += bias_value[r / 2];
        store_output(out, col * out_row_stride + row * out_col_stride, value);
      }
    }
  }
}

}  // namespace gemmkit::cuda::linear_family
