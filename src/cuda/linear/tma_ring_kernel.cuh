// linear fast variant: TMA into an mbarrier ring, one producer warp, four MMA consumer warps,
// optional split of k across a thread-block cluster, optional programmatic dependent launch.
//
// Computes out[n, m] = x[n, k] . w[m, k]^T (+ bias) for bf16 x/w, fp32 accumulation, returning
// exactly the bits of the reference kernel (canonical.cuh). Contract: k % 8 == 0, x and w rows
// contiguous with 16-byte aligned base and row stride (the TMA rules); any n, m (tails are
// zero-filled by TMA and masked at the store).
//
// Layout of one CTA: an output tile of kRowsW = 16 * kMT weight rows by kRowsX = 8 * kNT batch
// rows, reducing the contiguous run of k groups owned by its cluster rank. Each ring stage holds
// one k slice: w (kRowsW, 128) and x (kRowsX, 128), each as two 64-wide halves in the 128-byte
// swizzle. Consumer warp c reduces groups c, c + A, ... of its run (A = kStages / 4, at most 4)
// and leaves one fp32 sum per group in shared memory; then every rank of the cluster takes a
// share of the tile's elements and folds their group sums in ascending group order (reading
// the other ranks through distributed shared memory), adds the bias and stores.
// With PDL, w tiles of the first ring round are requested before griddepcontrol.wait; x, bias
// and out are touched only after it.
//
// Wins: small n (decode batches, MoE routers), where the work is streaming w from HBM: the
// cluster split spreads one weight tile over up to 8 SMs, and there is one kernel, no workspace.
#pragma once

#include "cuda/common/ptx.cuh"
#include "cuda/linear/canonical.cuh"
#include "cuda/linear/ring_schedule.h"

namespace gemmkit::cuda::linear_family {

constexpr int kRingThreads = 32 * (kRingConsumerWarps + 1);
constexpr int kRingHalfK = 64;  // k elements per 128-byte swizzled row
constexpr int kRingRowBytes = 128;

template <int kMT, int kNT>
struct RingTile {
  static constexpr int kRowsW = 16 * kMT;
  static constexpr int kRowsX = 8 * kNT;
  static constexpr int kWHalfBytes = kRowsW * kRingRowBytes;  // (kRowsW, 64) bf16
  static constexpr int kXHalfBytes = kRowsX * kRingRowBytes;  // (kRowsX, 64) bf16
  static constexpr int kStageBytes = 2 * (kWHalfBytes + kXHalfBytes);
  static constexpr int kGroupSumBytes = kRowsW * kRowsX * 4;  // (kRowsX, kRowsW) fp32
  static constexpr int kSliceBatch = ring_slice_batch(kMT, kNT);
};

// Dynamic shared memory: ring stages (1024-byte aligned for the swizzle), group sums, barriers.
__host__ __device__ constexpr int64_t ring_shared_bytes(int stages, int stage_bytes,
                                                        int group_sum_bytes, int groups) {
  return 1024 + int64_t{stages} * stage_bytes + int64_t{groups} * group_sum_bytes +
         int64_t{2} * stages * 8;
}

// 32-bit load of elements (row, col), (row, col + 1) of a swizzled (rows, 64) half.
__device__ __forceinline__ uint32_t swizzled_pair(const char* half, int row, int col) {
  const int chunk = (col >> 3) ^ (row & 7);
  return *reinterpret_cast<const uint32_t*>(half + row * kRingRowBytes + (chunk << 4) +
                                            ((col & 7) << 1));
}

template <int kMT, int kNT>
__device__ __forceinline__ void ring_slice_mma(const char* stage, int block, int group,
                                               int thread_in_group, float (&acc)[kMT][kNT][4]) {
  using Tile = RingTile<kMT, kNT>;
  const int half = block >> 2;
  const int col = (block & 3) * 16 + thread_in_group * 2;
  const char* w_half = stage + half * Tile::kWHalfBytes;
  const char* x_half = stage + 2 * Tile::kWHalfBytes + half * Tile::kXHalfBytes;
  uint32_t b[kNT][2];
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) {
    b[nt][0] = swizzled_pair(x_half, nt * 8 + group, col);
    b[nt][1] = swizzled_pair(x_half, nt * 8 + group, col + 8);
  }
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
    const uint32_t a[4] = {swizzled_pair(w_half, mt * 16 + group, col),
                           swizzled_pair(w_half, mt * 16 + group + 8, col),
                           swizzled_pair(w_half, mt * 16 + group, col + 8),
                           swizzled_pair(w_half, mt * 16 + group + 8, col + 8)};
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt) MmaTraits<__nv_bfloat16>::mma(acc[mt][nt], a, b[nt]);
  }
}

template <typename Out, int kStages, int kMT, int kNT>
__global__ void __launch_bounds__(kRingThreads, 1)
    linear_tma_ring_kernel(const __grid_constant__ CUtensorMap w_map,
                           const __grid_constant__ CUtensorMap x_map, const __nv_bfloat16* bias,
                           int64_t bias_stride, Out* out, int64_t out_row_stride,
                           int64_t out_col_stride, int64_t n, int64_t m, int64_t k, int64_t m_tiles,
                           int groups_per_rank) {
  using Tile = RingTile<kMT, kNT>;
  extern __shared__ __align__(1024) char shared_raw[];
  char* shared =
      reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(shared_raw) + 1023) & ~uintptr_t{1023});
  char* ring = shared;
  float* group_sums = reinterpret_cast<float*>(ring + kStages * Tile::kStageBytes);
  uint64_t* full = reinterpret_cast<uint64_t*>(reinterpret_cast<char*>(group_sums) +
                                               groups_per_rank * Tile::kGroupSumBytes);
  uint64_t* empty = full + kStages;

  const int warp = static_cast<int>(threadIdx.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const uint32_t rank = ptx::cluster_rank();
  const uint32_t ranks = ptx::cluster_size();
  const int64_t tile = blockIdx.x / ranks;
  const int64_t m0 = (tile % m_tiles) * Tile::kRowsW;
  const int64_t n0 = (tile / m_tiles) * Tile::kRowsX;

  const int64_t slices = (k + kSliceK - 1) / kSliceK;
  const int64_t groups = (slices + kGroupSlices - 1) / kGroupSlices;
  const int64_t group_begin = int64_t{rank} * groups_per_rank;
  const int64_t group_end = min(groups, group_begin + groups_per_rank);
  const int local_groups = static_cast<int>(max(int64_t{0}, group_end - group_begin));
  const int64_t slice_begin = group_begin * kGroupSlices;
  const int local_slices =
      static_cast<int>(max(int64_t{0}, min(slices, group_end * kGroupSlices) - slice_begin));

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      ptx::mbarrier_init(&full[s], 1);
      ptx::mbarrier_init(&empty[s], 1);
    }
    ptx::fence_barrier_init();
  }
  __syncthreads();
  ptx::launch_dependents();

  if (warp == kRingConsumerWarps) {
    // Producer: one lane streams the run's slices through the ring in ascending order.
    if (lane == 0 && local_slices > 0) {
      ptx::prefetch_tensor_map(&w_map);
      ptx::prefetch_tensor_map(&x_map);
      const auto load_w = [&](int i) {
        char* stage = ring + ring_stage(i, kStages) * Tile::kStageBytes;
        const int32_t kc = static_cast<int32_t>((slice_begin + i) * kSliceK);
        const int32_t row = static_cast<int32_t>(m0);
        ptx::tma_load_2d(stage, &w_map, &full[ring_stage(i, kStages)], kc, row);
        ptx::tma_load_2d(stage + Tile::kWHalfBytes, &w_map, &full[ring_stage(i, kStages)],
                         kc + kRingHalfK, row);
      };
      const auto load_x = [&](int i) {
        char* stage = ring + ring_stage(i, kStages) * Tile::kStageBytes + 2 * Tile::kWHalfBytes;
        const int32_t kc = static_cast<int32_t>((slice_begin + i) * kSliceK);
        const int32_t row = static_cast<int32_t>(n0);
        ptx::tma_load_2d(stage, &x_map, &full[ring_stage(i, kStages)], kc, row);
        ptx::tma_load_2d(stage + Tile::kXHalfBytes, &x_map, &full[ring_stage(i, kStages)],
                         kc + kRingHalfK, row);
      };
      const int first_round = min(kStages, local_slices);
      for (int i = 0; i < first_round; ++i) {
        ptx::mbarrier_arrive_expect_tx(&full[i], Tile::kStageBytes);
        load_w(i);  // weights never depend on the preceding kernel
      }
      ptx::grid_dependency_wait();
      for (int i = 0; i < first_round; ++i) load_x(i);
      for (int i = first_round; i < local_slices; ++i) {
        const int stage = ring_stage(i, kStages);
        ptx::mbarrier_wait(&empty[stage], ring_empty_parity(i, kStages));
        ptx::mbarrier_arrive_expect_tx(&full[stage], Tile::kStageBytes);
        load_w(i);
        load_x(i);
      }
    }
    __syncwarp();
  } else {
    // Consumers: warp c owns local groups c, c + A, ... (ring_schedule.h says why).
    constexpr int kActive = ring_active_consumers(kStages);
    static_assert(kStages % kGroupSlices == 0 && kActive >= 1, "ring depth: multiple of 4");
    const int group = lane >> 2;
    const int thread_in_group = lane & 3;
    for (int local_group = warp; local_group < local_groups; local_group += kActive) {
      if (warp >= kActive) break;
      const int first_slice = local_group * static_cast<int>(kGroupSlices);
      const int count = min(static_cast<int>(kGroupSlices), local_slices - first_slice);
      float group_sum[kMT][kNT][4];
      for (int batch = 0; batch < count; batch += Tile::kSliceBatch) {
        float acc[Tile::kSliceBatch][kMT][kNT][4];
        int blocks[Tile::kSliceBatch];
        const char* stages[Tile::kSliceBatch];
#pragma unroll
        for (int j = 0; j < Tile::kSliceBatch; ++j) {
          const int i = first_slice + batch + j;
          const bool present = batch + j < count;
          blocks[j] = present ? slice_blocks(k, slice_begin + i) : 0;
          stages[j] = ring + ring_stage(i, kStages) * Tile::kStageBytes;
          if (present)
            ptx::mbarrier_wait(&full[ring_stage(i, kStages)], ring_full_parity(i, kStages));
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
              for (int e = 0; e < 4; ++e) acc[j][mt][nt][e] = 0.f;
        }
#pragma unroll
        for (int block = 0; block < 8; ++block) {
#pragma unroll
          for (int j = 0; j < Tile::kSliceBatch; ++j) {
            if (block < blocks[j])
              ring_slice_mma<kMT, kNT>(stages[j], block, group, thread_in_group, acc[j]);
          }
        }
        __syncwarp();
#pragma unroll
        for (int j = 0; j < Tile::kSliceBatch; ++j) {
          const int i = first_slice + batch + j;
          if (batch + j < count && lane == 0) ptx::mbarrier_arrive(&empty[ring_stage(i, kStages)]);
          if (batch + j >= count) continue;
          const bool first = batch + j == 0;
#pragma unroll
          for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
            for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
              for (int e = 0; e < 4; ++e)
                group_sum[mt][nt][e] =
                    first ? acc[j][mt][nt][e] : group_sum[mt][nt][e] + acc[j][mt][nt][e];
        }
      }
      // (kRowsX, kRowsW) layout: consecutive threads of the epilogue read consecutive m.
      float* sums = group_sums + local_group * (Tile::kRowsW * Tile::kRowsX);
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
        for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int row_w = mt * 16 + group + (e >= 2 ? 8 : 0);
            const int row_x = nt * 8 + thread_in_group * 2 + (e & 1);
            sums[row_x * Tile::kRowsW + row_w] = group_sum[mt][nt][e];
          }
    }
  }

  if (ranks > 1) {
    ptx::cluster_sync();
  } else {
    __syncthreads();
  }
  if (warp < kRingConsumerWarps) {
    // Every rank folds a share of the tile's elements over all groups in ascending order.
    // Remote group sums are read in batches so the loads overlap instead of queueing behind
    // each add.
    ptx::grid_dependency_wait();  // bias and out may belong to the preceding kernel
    constexpr int kElements = Tile::kRowsW * Tile::kRowsX;
    constexpr int kBatch = 8;
    const int consumers = 32 * kRingConsumerWarps;
    for (int e = static_cast<int>(rank * consumers + threadIdx.x); e < kElements;
         e += static_cast<int>(ranks) * consumers) {
      const int64_t row_w = m0 + e % Tile::kRowsW;
      const int64_t row_x = n0 + e / Tile::kRowsW;
      if (row_w >= m || row_x >= n) continue;
      float total = 0.f;
      for (int64_t g0 = 0; g0 < groups; g0 += kBatch) {
        float values[kBatch];
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
          const int64_t g = g0 + j;
          if (g >= groups) break;
          const uint32_t owner = static_cast<uint32_t>(g / groups_per_rank);
          const float* local = group_sums + (g % groups_per_rank) * kElements + e;
          values[j] = ranks > 1 ? ptx::load_cluster_float(local, owner) : *local;
        }
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
          const int64_t g = g0 + j;
          if (g >= groups) break;
          total = g == 0 ? values[j] : total + values[j];
        }
      }
      if (bias != nullptr) total += __bfloat162float(bias[row_w * bias_stride]);
      store_output(out, row_x * out_row_stride + row_w * out_col_stride, total);
    }
  }
  if (ranks > 1) ptx::cluster_sync();  // keep every rank's shared memory alive until read
}

}  // namespace gemmkit::cuda::linear_family
