// linear fast variant: TMA into an mbarrier ring, one or four producer warps, four (or eight) MMA
// consumer warps, optional split of k across a thread-block cluster, optional programmatic
// dependent launch.
//
// Computes out[n, m] = x[n, k] . w[m, k]^T (+ bias) for bf16 x/w, fp32 accumulation, returning
// exactly the bits of the reference kernel (canonical.cuh). Contract: k % 8 == 0, x and w rows
// contiguous with 16-byte aligned base and row stride (the TMA rules); any n, m (tails are
// zero-filled by TMA and masked at the store).
//
// Layout of one CTA: an output tile of kRowsW = 16 * kMT weight rows by kRowsX = 8 * kNT batch
// rows, reducing the contiguous run of k groups owned by its cluster rank. Each ring stage holds
// one k slice: w (kRowsW, 128) and x (kRowsX, 128), each as two 64-wide halves in the 128-byte
// swizzle, read into MMA fragments with ldmatrix. Of C consumer warps, warp c reduces slices c,
// c + C, ... of its run (with C = 4, slice c of every group: the SM's four tensor-core units share
// each group), each from zero into a local partial. Eight consumers (the 16 x 8 tile, one slice
// at a time) halve the MMA chains a warp runs one after another when a CTA reduces more than four
// slices. With four producer warps, producer p streams slices p, p + 4, ... (the stages p mod 4;
// with four consumers exactly consumer p's, so each pair is its own pipeline) and four lanes
// issue the copies; with one, it streams every slice; producers exit once their copies are
// issued. A group's sum is the fold of its partials in slice order
// ((p0 + p1) + p2) + p3. Partials are stored in fragment order (one 16-byte store per lane and
// MMA tile). The other ranks fold their groups after a barrier of the consumer warps, send
// the sums into rank 0's shared memory with st.async, each store completing its bytes on rank 0's
// fold_full mbarrier, and exit. Rank 0 (or the only CTA of an unclustered tile) folds its own
// groups straight from the slice partials, then the other ranks' group sums in ascending group
// order, adds the bias and stores, on its first 128 consumer threads: one thread waits on
// fold_full and the consumers' barrier passes that on with the partials; every load of the fold is
// local, and the output offsets and bias values are ready before it. One cluster barrier phase
// remains: every thread arrives at the start (relaxed: "this CTA runs and rank 0's fold barrier is
// initialized"), and only the senders wait, just before sending (the MMAs do not wait for it).
// That is the async fold (async_fold, the default). The barrier fold, its twin for
// compute-sanitizer's racecheck (which does not follow st.async hand-offs), sends with plain
// distributed stores, and every thread arrives on a second phase (release) where rank 0 waits
// (acquire) before folding. (Sending every slice partial straight from the MMA registers instead
// measured slower wherever a cluster has more than two ranks: four times the bytes and
// transaction counts land on rank 0; kimi-k2 n8 3.3 -> 5.2 us.)
// With PDL, w tiles of the first ring round are requested before griddepcontrol.wait; x, bias
// and out are touched only after it. Every thread waits as soon as it has nothing earlier to do,
// and rank 0's threads read the bias then: its load overlaps the ring instead of the store.
// Consumer thread 0 triggers the dependent grid right after its wait (so the next grid streams
// its weights while this one works, and no more than one grid waits ahead).
// A batch's MMA chains run as straight-line code: the fragments of the next k16 block are read
// while the current block's MMAs run, and MMAs past a slice's blocks are predicated off.
//
// Wins: small n (decode batches, MoE routers), where the work is streaming w from HBM: the
// cluster split spreads one weight tile over up to 16 SMs, and there is one kernel, no workspace.
#pragma once

#include "cuda/common/ptx.cuh"
#include "cuda/linear/canonical.cuh"
#include "cuda/linear/ring_schedule.h"
#include "cuda/linear/stage_fragments.cuh"

namespace gemmkit::cuda::linear_family {

// Registers are capped so that two CTAs fit on one SM (2 x 256 threads x 128 with four consumer
// warps, 2 x 384 x 85 with eight): the next grid's CTAs under PDL and clusters pack there. At 146
// registers ring16 held one CTA per SM, and kimi-k2's 24 clusters of 5 no longer fitted the GPCs at
// once: two waves, 5.4 us against 3.5.
constexpr int kRingMinBlocksPerSm = 2;

// Slices in tile group g of a reduction of `slices` slices (4 but in the last group).
__device__ __forceinline__ int ring_group_count(int64_t slices, int64_t g) {
  return static_cast<int>(min(int64_t{kGroupSlices}, slices - g * kGroupSlices));
}

__device__ __forceinline__ float ring_add(float a, float b) {
  return a + b;
}
__device__ __forceinline__ float4 ring_add(float4 a, float4 b) {
  return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

// A group's sum, ((p0 + p1) + p2) + p3 over its `count` slice partials, `stride` values apart
// from `first` (V: one slot, or four adjacent slots at once): loads first, then the adds.
template <typename V>
__device__ __forceinline__ V ring_group_fold(const V* first, int stride, int count) {
  V values[kGroupSlices];
#pragma unroll
  for (int q = 0; q < kGroupSlices; ++q) {
    if (q < count) values[q] = first[q * stride];
  }
  V sum = values[0];
#pragma unroll
  for (int q = 1; q < kGroupSlices; ++q) {
    if (q < count) sum = ring_add(sum, values[q]);
  }
  return sum;
}

template <typename Out, int kStages, int kMT, int kNT, int kBatch, int kConsumers>
__global__ void __launch_bounds__(32 * (kConsumers + kRingMaxProducerWarps), kRingMinBlocksPerSm)
    linear_tma_ring_kernel(const __grid_constant__ CUtensorMap w_map,
                           const __grid_constant__ CUtensorMap x_map, const __nv_bfloat16* bias,
                           int64_t bias_stride, Out* out, int64_t out_row_stride,
                           int64_t out_col_stride, int64_t n, int64_t m, int64_t k, int64_t m_tiles,
                           int groups_per_rank, bool async_fold) {
  using Tile = RingTile<kMT, kNT>;
  constexpr int kElements = Tile::kRowsW * Tile::kRowsX;
  extern __shared__ __align__(1024) char shared_raw[];
  // Aligned by an offset from shared_raw (not through an integer round trip), so that the compiler
  // keeps the shared address space and emits LDS/STS rather than generic loads and stores.
  char* shared = shared_raw + ((1024u - (ptx::smem_address(shared_raw) & 1023u)) & 1023u);
  const int64_t slices = (k + kSliceK - 1) / kSliceK;
  const int64_t groups = (slices + kGroupSlices - 1) / kGroupSlices;
  // Layout (ring_shared_bytes_host in linear_config.h sizes it): ring stages | fold buffer
  // (groups - groups_per_rank, kElements) fp32, clustered launches only, live in rank 0: the
  // group sums of every other rank, in tile-group order after rank 0's own groups | slice
  // partials of this CTA's run (groups_per_rank * 4, kElements) fp32 | full[kStages] |
  // empty[kStages] | fold_full (rank 0: completes when every other rank's sums have landed).
  // Partials and sums are in fragment order (ring_partial_slot, ring_schedule.h).
  char* ring = shared;
  const uint32_t ranks = ptx::cluster_size();
  const bool clustered = ranks > 1;  // launched without a cluster: no cluster instruction at all
  float* fold_sums = reinterpret_cast<float*>(ring + kStages * Tile::kStageBytes);
  float* slice_sums = fold_sums + (clustered ? groups - groups_per_rank : 0) * kElements;
  uint64_t* full =
      reinterpret_cast<uint64_t*>(slice_sums + int64_t{groups_per_rank} * kGroupSlices * kElements);
  uint64_t* empty = full + kStages;
  uint64_t* fold_full = empty + kStages;

  const int warp = static_cast<int>(threadIdx.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32);
  const uint32_t rank = ptx::cluster_rank();
  const int64_t tile = blockIdx.x / ranks;
  const int64_t m0 = (tile % m_tiles) * Tile::kRowsW;
  const int64_t n0 = (tile / m_tiles) * Tile::kRowsX;

  const int64_t group_begin = int64_t{rank} * groups_per_rank;
  const int64_t group_end = min(groups, group_begin + groups_per_rank);
  const int local_groups = static_cast<int>(max(int64_t{0}, group_end - group_begin));
  const int64_t slice_begin = group_begin * kGroupSlices;
  const int local_slices =
      static_cast<int>(max(int64_t{0}, min(slices, group_end * kGroupSlices) - slice_begin));

  // Rank 0's epilogue targets: consumer thread t < 128 (of any consumer count) folds and stores
  // tile elements t, t + 128, ... (element e: batch row e / kRowsW, weight row e % kRowsW). Their
  // partial slots, output offsets and bias values are settled right after griddepcontrol.wait
  // (the bias may belong to the preceding kernel), so that the bias load overlaps the ring and
  // only the fold itself stands between the last partial and the store.
  constexpr int kConsumerThreads = 32 * kConsumers;
  constexpr int kEpilogueThreads = 32 * kRingConsumerWarps;
  constexpr int kPerThread = kElements / kEpilogueThreads;
  static_assert(kElements % kEpilogueThreads == 0, "whole tile elements per epilogue thread");
  static_assert(ring_consumers_allowed(kConsumers, kMT, kNT, kStages, kBatch), "consumer warps");
  float bias_values[kPerThread];
  int64_t out_offsets[kPerThread];
  int slots[kPerThread];
  bool out_valid[kPerThread];
  const auto prepare_epilogue = [&] {
    if (rank != 0 || threadIdx.x >= kEpilogueThreads) return;
#pragma unroll
    for (int j = 0; j < kPerThread; ++j) {
      const int e = static_cast<int>(threadIdx.x) + j * kEpilogueThreads;
      const int tile_w = e % Tile::kRowsW, tile_x = e / Tile::kRowsW;
      slots[j] = ring_partial_slot(tile_w, tile_x, kNT);
      const int64_t row_w = m0 + tile_w, row_x = n0 + tile_x;
      out_valid[j] = row_w < m && row_x < n;
      out_offsets[j] = row_x * out_row_stride + row_w * out_col_stride;
      bias_values[j] =
          bias != nullptr && row_w < m ? __bfloat162float(bias[row_w * bias_stride]) : 0.f;
    }
  };

  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) {
      ptx::mbarrier_init(&full[s], 1);
      ptx::mbarrier_init(&empty[s], 1);
    }
    ptx::mbarrier_init(fold_full, 1);
    if (clustered && async_fold && rank == 0) {
      // Every group sum but rank 0's own arrives from the other ranks (st.async).
      ptx::mbarrier_arrive_expect_tx(
          fold_full, static_cast<uint32_t>((groups - local_groups) * kElements * sizeof(float)));
    }
    ptx::fence_barrier_init();
  }
  __syncthreads();
  // The one cluster barrier phase: "this CTA runs and its barriers are initialized" (the fence
  // above orders the initialization; nothing else is read remotely): relaxed.
  if (clustered) ptx::cluster_arrive_relaxed();

  if (warp >= kConsumers) {
    // Producers: lane 0 of producer p streams local slices p, p + P, ... (P producer warps) through
    // the ring in ascending order; with P = 4 and four consumers those are exactly consumer p's.
    const int producer = warp - kConsumers;
    const int producers = static_cast<int>(blockDim.x / 32) - kConsumers;
    if (lane == 0 && producer < local_slices) {
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
      for (int i = producer; i < first_round; i += producers) {
        ptx::mbarrier_arrive_expect_tx(&full[i], Tile::kStageBytes);
        load_w(i);  // weights never depend on the preceding kernel
      }
      ptx::grid_dependency_wait();
      for (int i = producer; i < first_round; i += producers) load_x(i);
      // The first slice of this producer past the first round.
      const int next = first_round + (producer - first_round % producers + producers) % producers;
      for (int i = next; i < local_slices; i += producers) {
        const int stage = ring_stage(i, kStages);
        ptx::mbarrier_wait(&empty[stage], ring_empty_parity(i, kStages));
        ptx::mbarrier_arrive_expect_tx(&full[stage], Tile::kStageBytes);
        load_w(i);
        load_x(i);
      }
    }
    // The producers' part ends here. In the barrier fold every thread of the cluster arrives on
    // the second phase, after waiting on the first.
    __syncwarp();
    if (clustered && !async_fold) {
      ptx::cluster_wait_acquire();
      ptx::cluster_arrive_release();
    }
    return;
  } else {
    // The consumers have nothing to do before the activations land, which follows the wait.
    ptx::grid_dependency_wait();
    // The next grid may launch once every CTA of this one is past its wait, i.e. once the
    // preceding grid is done: it then streams its weights while this one works. Triggered right
    // after the prologue, about 30 grids were resident and waiting (gpt-oss n64 3.52 us against
    // 2.93 here); after the MMAs, its weight stream came too late (3.32 us).
    if (threadIdx.x == 0) ptx::launch_dependents();
    prepare_epilogue();
    // Consumers: warp c takes local slices c, c + kConsumers, ... (ring_schedule.h), kBatch at a
    // time (each a chain of MMAs from zero; the batch's stages are released together, once read),
    // and leaves their partials in slice_sums, one 16-byte store per lane and MMA tile.
    static_assert(kStages % kGroupSlices == 0, "ring depth: multiple of 4");
    static_assert(ring_batch_allowed(kBatch, kMT, kNT, kStages, kConsumers),
                  "slices per consumer wait");
    const uint32_t ring_address = ptx::smem_address(ring);
    for (int first = warp; first < local_slices; first += kConsumers * kBatch) {
      float acc[kBatch][kMT][kNT][4];
      int blocks[kBatch];
      uint32_t stages[kBatch];
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const int i = first + j * kConsumers;
        if (i < local_slices) {
          blocks[j] = slice_blocks(k, slice_begin + i);
          stages[j] = ring_address + ring_stage(i, kStages) * Tile::kStageBytes;
          ptx::mbarrier_wait(&full[ring_stage(i, kStages)], ring_full_parity(i, kStages));
        } else {
          // Past the run: no MMA (blocks 0); its fragments are read from chain 0's stage.
          blocks[j] = 0;
          stages[j] = stages[0];
        }
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int nt = 0; nt < kNT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[j][mt][nt][e] = 0.f;
      }
      // The batch's stages that the producers refill (those of slices before the last round) go
      // back once the warp has read them into registers. The refill's TMA writes are async-proxy
      // accesses, so each lane's ldmatrix reads (generic proxy) are ordered before them by a proxy
      // fence, then before the arrive by __syncwarp and the arrive's release. (Without the fence,
      // about one call in a thousand of a 4-rank cluster on 8 stages read one weight row of a
      // slice after its refill had begun: tests/gpu/test_gpu_linear.cpp,
      // ClusterFoldsRepeatBitwise.) Stages of the last round are never waited for: no fence, no
      // arrive (the fence costs 1-2% on the one-round decode rows).
      const auto release_batch = [&] {
        // The batch's slices ascend: none refilled when its first is not.
        if (!ring_stage_refilled(first, local_slices, kStages)) return;
        ptx::fence_proxy_async_shared();
        __syncwarp();
#pragma unroll
        for (int j = 0; j < kBatch; ++j) {
          const int i = first + j * kConsumers;
          if (ring_stage_refilled(i, local_slices, kStages) && lane == 0) {
            ptx::mbarrier_arrive(&empty[ring_stage(i, kStages)]);
          }
        }
      };
      if constexpr (kMT * kNT == 1) {
        // Straight-line chains: the fragments of block b + 1 are read while block b's MMAs run
        // (two register buffers), and a chain's MMAs past its slice's blocks (the k tail, or
        // every block of an absent chain) are predicated off rather than branched around. The
        // stages are released as soon as the last block's fragments are read, before the last
        // two blocks' MMAs.
        uint32_t a[2][kBatch][4], b[2][kBatch][2];
#pragma unroll
        for (int j = 0; j < kBatch; ++j) ring_block_fragments(stages[j], 0, lane, a[0][j], b[0][j]);
#pragma unroll
        for (int block = 0; block < 8; ++block) {
          const int now = block & 1;
          if (block + 1 < 8) {
#pragma unroll
            for (int j = 0; j < kBatch; ++j)
              ring_block_fragments(stages[j], block + 1, lane, a[now ^ 1][j], b[now ^ 1][j]);
          }
          if (block == 6) release_batch();
#pragma unroll
          for (int j = 0; j < kBatch; ++j) {
            ptx::mma_m16n8k16_bf16_if(block < blocks[j], acc[j][0][0], a[now][j], b[now][j][0],
                                      b[now][j][1]);
          }
        }
      } else {
#pragma unroll
        for (int block = 0; block < 8; ++block) {
#pragma unroll
          for (int j = 0; j < kBatch; ++j) {
            if (block < blocks[j]) ring_slice_mma<kMT, kNT>(stages[j], block, lane, acc[j]);
          }
        }
        release_batch();
      }
#pragma unroll
      for (int j = 0; j < kBatch; ++j) {
        const int i = first + j * kConsumers;
        if (i >= local_slices) continue;
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int nt = 0; nt < kNT; ++nt) {
            const int slot = ((mt * kNT + nt) * 32 + ring_lane_chunk(lane)) * 4;
            *reinterpret_cast<float4*>(slice_sums + int64_t{i} * kElements + slot) = make_float4(
                acc[j][mt][nt][0], acc[j][mt][nt][1], acc[j][mt][nt][2], acc[j][mt][nt][3]);
          }
      }
    }
  }
  // Consumers from here. The sum of tile group g at fragment slot f: the partials of its up to
  // four slices (from `partials`, the group's first), folded in slice order.
  const auto group_sum = [&](const float* partials, int64_t g, int f) {
    return ring_group_fold(partials + f, kElements, ring_group_count(slices, g));
  };
  if (clustered && rank != 0) {
    // The other ranks send their group sums into rank 0's fold buffer, one 16-byte chunk per
    // store (the layout of the partials): with st.async, each completing its bytes on rank 0's
    // fold_full barrier (async fold), or with plain distributed stores ordered by the second
    // cluster barrier phase (barrier fold).
    ptx::named_barrier_sync(1, kConsumerThreads);  // every slice partial is written
    // Rank 0 runs and its fold barrier is initialized once the cluster's phase completes; waiting
    // only now lets the MMAs overlap the start of the cluster's other CTAs.
    ptx::cluster_wait_acquire();
    const uint32_t fold_address = ptx::cluster_address(fold_sums, 0);
    const uint32_t fold_barrier = ptx::cluster_address(fold_full, 0);
    constexpr int kQuads = kElements / 4;
    for (int q = static_cast<int>(threadIdx.x); q < local_groups * kQuads; q += kConsumerThreads) {
      const int local_group = q / kQuads;
      const int f = (q % kQuads) * 4;
      const int64_t g = group_begin + local_group;
      // Four adjacent slots per load; each slot folds its slices in order, as group_sum does.
      const float4 sums = ring_group_fold(
          reinterpret_cast<const float4*>(slice_sums + local_group * kGroupSlices * kElements + f),
          kElements / 4, ring_group_count(slices, g));
      const int64_t index = (g - groups_per_rank) * kElements + f;  // in floats
      const uint32_t address = fold_address + static_cast<uint32_t>(index * 4);
      if (async_fold) {
        ptx::store_cluster_async_v4(address, sums, fold_barrier);
      } else {
        ptx::store_cluster_v4(address, sums);
      }
    }
    // Nothing reads this CTA's shared memory any more. The barrier fold's second phase: arrive
    // once the stores are done (release), for rank 0 to wait on.
    if (!async_fold) {
      __syncwarp();
      ptx::cluster_arrive_release();
    }
    return;
  }

  // Rank 0 (or the only CTA of its tile) folds every group of the tile in ascending order: its
  // own straight from its slice partials, the others' sums from the fold buffer. Thread 0 waits
  // for their bytes (the others would only spin beside it) and the consumers' barrier passes
  // that on, together with the slice partials.
  if (clustered && !async_fold) {
    ptx::cluster_wait_acquire();
    ptx::cluster_arrive_release();
    ptx::cluster_wait_acquire();
  } else if (clustered && threadIdx.x == 0) {
    ptx::mbarrier_wait(fold_full, 0);
  }
  ptx::named_barrier_sync(1, kConsumerThreads);
  if (threadIdx.x >= kEpilogueThreads) return;  // eight consumer warps: the first four fold

    // Every consumer thread has passed griddepcontrol.wait, so out may be written.
#pragma unroll
  for (int j = 0; j < kPerThread; ++j) {
    if (!out_valid[j]) continue;
    const int f = slots[j];
    float total = group_sum(slice_sums, 0, f);
    for (int g = 1; g < local_groups; ++g)
      total += group_sum(slice_sums + g * kGroupSlices * kElements, g, f);
    constexpr int kFoldBatch = 8;  // fold-buffer loads in flight before their adds
    for (int64_t g0 = local_groups; g0 < groups; g0 += kFoldBatch) {
      float values[kFoldBatch];
#pragma unroll
      for (int i = 0; i < kFoldBatch; ++i) {
        if (g0 + i < groups) values[i] = fold_sums[(g0 + i - local_groups) * kElements + f];
      }
#pragma unroll
      for (int i = 0; i < kFoldBatch; ++i) {
        if (g0 + i < groups) total += values[i];
      }
    }
    if (bias != nullptr) total += bias_values[j];
    store_output(out, out_offsets[j], total);
  }
}

}  // namespace gemmkit::cuda::linear_family
