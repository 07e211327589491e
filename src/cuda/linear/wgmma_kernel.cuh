// linear wgmma kernel: out[n, m] = x[n, k] . w[m, k]^T (+ bias), bf16 or f16 in, fp32 accumulate,
// sm_90a; the batch-invariant GEMM of the family for batches beyond the ring's.
//
// Contract: evaluates the canonical reduction of canonical.cuh with warpgroup MMAs (the k16 step
// of wgmma rounds as mma.sync's does: the GPU tests check the bits against the reference kernel).
// Weight rows are the MMA's M side (64 per consumer warpgroup), batch rows its N side (kBN per
// tile). Sliced form (weights of fewer than kOneChainMinRows rows): a slice's partial is the chain
// of its k16 steps (wgmma m64nNk16) from zero, the first step written without reading the
// accumulator and steps past the slice's blocks not issued; slice partials fold into the group sum
// and group sums into the total in the canonical order, in registers: up to kWgmmaOverlapMaxN (96)
// batch rows a tile, four accumulator sets (total, group, two partials taken in turn, so a slice's
// fold runs under the next slice's MMAs), 128 x 128 with three (total, group, partial: each
// slice's MMAs drain before its fold). One-chain form (kOneChain, weights of
// kOneChainMinRows rows and more): one accumulator set takes every k16 step of k in order, the
// MMAs of the next k block issued while the last block's complete (wait_group 1), so the tensor
// cores never drain inside a tile, and tiles reach 128 x 256. The bits never depend on the batch,
// the grid, the tile position or the k split below. Elements past k, n or m are TMA zero fill;
// k < 2^31, rows < 2^31.
//
// Structure: one producer warpgroup (one thread issues the TMA loads of 64-wide k blocks of the
// weight and activation tiles into a ring of kStages stages, 128-byte swizzle) and two consumer
// warpgroups (64 weight rows each) over a persistent grid: CTA b takes work units b, b + grid, ...
// in the banded tile order of tile_order.h. Sliced form: a slice's stages are freed once its MMAs
// complete, before its partial is folded. Registers: setmaxnreg gives the consumers 240 and the
// producer 24. PDL: every thread waits for the preceding grid before the first load.
//
// k split (kSplit, sliced form only; the count is chosen by wgmma_auto_splits in wgmma_config.h): a
// problem of few tiles would leave most SMs idle, so k's groups (512 each) are cut into runs of
// split_groups, and a work unit is (tile, run); unit u is run u / tiles of tile u % tiles. A unit
// computes each of its group sums G_j from zero exactly as the unsplit kernel does. The total is a
// left fold over the groups, ((G0 + G1) + G2) + ..., so runs cannot fold their own groups and
// combine: the run of group 0 keeps its running total (a prefix of that fold: the unsplit kernel's
// very registers) and writes it to workspace slot 0, every other run writes each G_j to slot j -
// split_groups + 1, and linear_wgmma_fold_kernel, launched after it on the stream (PDL: it waits
// for this grid's completion before reading), adds slots 1, 2, ... into slot 0 in ascending order,
// then the bias, and rounds once: the same fp32 adds in the same order as the unsplit epilogue (no
// products, so nothing can contract into an FMA; wgmma_fold_kernel.cuh). A second kernel rather
// than a last-arriving CTA per tile: no arrival counters to zero or reset per call (graph capture,
// a caller's workspace), no fences, and the fold spreads over tiles * kBN / 8 blocks instead of one
// CTA per tile. Workspace: per tile, slots of 128 x kBN fp32 stored as float4 in the accumulator
// layout (slot, register quadruple j, thread), so a warp's stores and the fold's loads are 512
// contiguous bytes; 64-bit indices. The split kernel triggers its dependents at the start so the
// fold's blocks are resident and waiting when it ends.
//
// Wins: batches of a few tiles and more where bits must not depend on the batch (docs/perf.md
// has its speed against cuBLASLt); the split for problems of fewer tiles than half the SMs with
// k of 4 groups or more (n = 64, m = 1280, k = 8192: 8 runs of 2 groups, 80 CTAs instead of 10).
// cuBLASLt is faster but outside the contract.
#pragma once

#include <cuda.h>

#include "cuda/common/ptx.cuh"
#include "cuda/common/wgmma.cuh"
#include "cuda/linear/canonical.cuh"
#include "cuda/linear/tile_order.h"
#include "cuda/linear/wgmma_parts.cuh"

namespace gemmkit::cuda::linear_family {

// kSplit: units of split_groups groups (of `splits` per tile) whose sums go to `workspace` (Out
// and out unused); else one unit per tile over all of k, stored to out (split arguments unused).
// kOneChain: the one-chain form (no split); with 16-bit Out and tma_store, the epilogue writes
// out through out_map (rows n, columns m, boxes of 64 x 64 in the 128-byte swizzle).
template <typename T, typename Out, int kBN, int kStages, bool kSplit, bool kOneChain = false>
__global__ void __launch_bounds__(kWgmmaThreads, 1)
    linear_wgmma_kernel(const __grid_constant__ CUtensorMap w_map,
                        const __grid_constant__ CUtensorMap x_map,
                        const __grid_constant__ CUtensorMap out_map, bool tma_store, const T* bias,
                        int64_t bias_stride, Out* out, int64_t out_row_stride,
                        int64_t out_col_stride, int64_t n, int64_t m, int64_t k, int64_t m_blocks,
                        int64_t tiles, int split_groups, int splits, float4* workspace) {
  constexpr bool kStaging = kOneChain && sizeof(Out) == 2;
  using Layout = WgmmaSharedLayout<kBN, kStages, kStaging>;
  constexpr int kRegs = kBN / 2;
  constexpr int kGroupBlocks = static_cast<int>(kGroupK / kWgmmaBlockK);
  static_assert(!(kSplit && kOneChain), "one chain is never split");
  static_assert(kOneChain || kBN <= 128, "three accumulator sets: at most 128 x 128");
  static_assert(kBN % 64 == 0 || (!kOneChain && kBN <= kWgmmaOverlapMaxN),
                "96-wide tiles: the overlapped sliced form only");
  extern __shared__ __align__(1024) char shared_raw[];
  // Aligned by an offset from shared_raw, so the compiler keeps the shared address space.
  uint8_t* shared = reinterpret_cast<uint8_t*>(
      shared_raw + ((1024u - (ptx::smem_address(shared_raw) & 1023u)) & 1023u));
  uint64_t* full = reinterpret_cast<uint64_t*>(shared + Layout::kBarrierOffset);
  uint64_t* empty = full + kStages;
  const auto weight_box = [&](int stage) { return shared + stage * Layout::kStageBytes; };
  const auto activation_box = [&](int stage) {
    return shared + stage * Layout::kStageBytes + Layout::kWeightBytes;
  };
  const int warpgroup = ptx::warpgroup_index();
  // k < 2^31 (the TMA rule the planner checks): the reduction's counters are 32-bit.
  const int k_blocks = static_cast<int>((k + kWgmmaBlockK - 1) / kWgmmaBlockK);
  const int slices = static_cast<int>((k + kSliceK - 1) / kSliceK);
  const int groups = static_cast<int>((k + kGroupK - 1) / kGroupK);
  const int unit_groups = kSplit ? split_groups : groups;
  const int64_t units = kSplit ? tiles * splits : tiles;

  ptx::init_ring_barriers(full, empty, kStages, kWgmmaConsumers);
  __syncthreads();
  ptx::grid_dependency_wait();
  if constexpr (kSplit) ptx::launch_dependents();  // the fold kernel waits for our completion

  if (warpgroup == 0) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;");
    if (threadIdx.x != 0) return;
    ptx::prefetch_tensor_map(&w_map);
    ptx::prefetch_tensor_map(&x_map);
    if (kStaging && tma_store) ptx::prefetch_tensor_map(&out_map);
    int stage = 0;
    uint32_t phase = 0;
    for (int64_t unit = blockIdx.x; unit < units; unit += gridDim.x) {
      const int64_t tile = unit % tiles;
      const int g_begin = kSplit ? static_cast<int>(unit / tiles) * unit_groups : 0;
      const WgmmaTileCoords at = wgmma_tile_coords(tile, m_blocks, tiles / m_blocks);
      const auto m0 = static_cast<int32_t>(at.m_block * kWgmmaBlockM);
      const auto n0 = static_cast<int32_t>(at.n_block * kBN);
      const int kb_end = min(k_blocks, (g_begin + unit_groups) * kGroupBlocks);
      wgmma_detail::produce_blocks<kStages>(
          g_begin * kGroupBlocks, kb_end, full, empty, Layout::kStageBytes, stage, phase,
          [&](int st, int32_t k0) {
            ptx::tma_load_2d(weight_box(st), &w_map, &full[st], k0, m0);
            ptx::tma_load_2d(activation_box(st), &x_map, &full[st], k0, n0);
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
  const auto next_stage = [&] {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1;
    }
  };
  // Issues the one or two k blocks of slice s into acc (a commit group each); returns the stages
  // it used.
  const auto issue_slice = [&](float(&acc)[kRegs], int s) {
    int used = 0;
    for (int h = 0; h < 2 && 2 * s + h < k_blocks; ++h) {
      ptx::mbarrier_wait(&full[stage], phase);
      wgmma::mma_k_block<T, kBN>(acc, weight_box(stage) + consumer * 64 * 128,
                                 activation_box(stage), min(4, slice_blocks(k, s) - 4 * h), h == 0);
      ++used;
      next_stage();
    }
    return used;
  };
  // Frees the `used` stages of a slice from stage `first` once its MMAs are complete.
  const auto release_slice = [&](int first, int used) {
    if (t == 0) {
      ptx::mbarrier_arrive(&empty[first]);
      if (used == 2) ptx::mbarrier_arrive(&empty[first + 1 == kStages ? 0 : first + 1]);
    }
  };
  // Workspace slot `slot` of `tile` gets `sums` (kSplit only): slots of 128 x kBN per tile.
  const int64_t slots = groups - unit_groups + 1;
  const auto store_sums = [&](const float(&sums)[kRegs], int64_t tile, int64_t slot) {
    float4* to = workspace + (tile * slots + slot) * (kRegs / 4) * 256 + consumer * 128 + t;
#pragma unroll
    for (int j = 0; j < kRegs / 4; ++j) {
      to[j * 256] = make_float4(sums[4 * j], sums[4 * j + 1], sums[4 * j + 2], sums[4 * j + 3]);
    }
  };
  // The epilogue of a tile (wgmma_detail::store_quad), register quadruple by quadruple.
  const auto store_tile = [&](const float(&sums)[kRegs], int64_t tile) {
    const auto [row0, n0] =
        wgmma_detail::fragment_origin(tile, m_blocks, tiles, kBN, consumer, warp, lane);
    float bias_value[2];
    wgmma_detail::load_bias_pair(bias, bias_stride, row0, m, bias_value);
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j) {
      const float quad[4] = {sums[4 * j], sums[4 * j + 1], sums[4 * j + 2], sums[4 * j + 3]};
      wgmma_detail::store_quad(quad, bias != nullptr, bias_value, row0, n0 + 8 * j + 2 * (lane % 4),
                               out, out_row_stride, out_col_stride, n, m);
    }
  };
  if constexpr (kOneChain) {
    float acc[kRegs];
    uint32_t store_turn = 0;
    for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
      wgmma_detail::one_chain_tile<T, kBN, kStages>(
          acc, k, k_blocks, full, empty, t, stage, phase,
          [&](int st) { return weight_box(st) + consumer * 64 * 128; },
          [&](int st) { return activation_box(st); });
      if constexpr (kStaging) {
        if (tma_store) {
          const WgmmaTileCoords at = wgmma_tile_coords(tile, m_blocks, tiles / m_blocks);
          const int64_t m0 = at.m_block * kWgmmaBlockM + consumer * 64;
          float bias_value[2];
          wgmma_detail::load_bias_pair(bias, bias_stride, m0 + warp * 16 + lane / 4, m, bias_value);
          wgmma_detail::store_tile_by_tma<Out, kBN>(
              &out_map, acc, bias != nullptr, bias_value, static_cast<int32_t>(m0),
              at.n_block * kBN,
              shared + Layout::kStagingOffset + consumer * 2 * kWgmmaStoreChunkBytes, 1 + consumer,
              t, store_turn);
          continue;
        }
      }
      store_tile(acc, tile);
    }
    if constexpr (kStaging) {
      if (tma_store && t == 0) ptx::bulk_wait_group_all();  // staging valid until stores land
    }
  } else {
    // The sliced form. The total and the group sum; how a group ends (its sum into the total, or
    // for a k split's later runs to workspace) and how a unit ends (the total stored, or for a
    // k split the run of group 0's prefix G0 + ... to workspace slot 0).
    float total[kRegs], group[kRegs];
    const auto finish_group = [&](int g, int g_begin, int64_t tile) {
      if (!kSplit || g_begin == 0) {
        wgmma_detail::add_into(total, group);
      } else {
        store_sums(group, tile, g - unit_groups + 1);
      }
    };
    const auto finish_unit = [&](int g_begin, int64_t tile) {
      if constexpr (kSplit) {
        if (g_begin == 0) store_sums(total, tile, 0);
      } else {
        store_tile(total, tile);
      }
    };
    if constexpr (kBN <= kWgmmaOverlapMaxN) {
      // Four accumulator sets: the total, the group sum and two slice partials taken in turn. A
      // group of four full slices is one straight-line sequence in which slice j + 1's MMAs run
      // while slice j's partial is folded (a full slice is two commit groups, so wait_group<2>
      // after slice j + 1's issue means slice j is complete), and the MMAs drain once per group
      // instead of once per slice. ptxas keeps MMAs in flight across the folds only in code
      // without a loop around them (it serializes them, C7514, when MMAs stay in flight across a
      // loop's back edge), hence the drain at each group's end. k's last group, when not four full
      // slices, drains after each slice.
      float part_a[kRegs], part_b[kRegs];
      struct SliceStages {
        int first = 0, used = 0;
      };
      // A slice of all 128 elements of k: its two k blocks of four steps.
      const auto issue_full = [&](float(&acc)[kRegs]) {
        const SliceStages f{stage, 2};
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          ptx::mbarrier_wait(&full[stage], phase);
          wgmma::mma_k_steps<T, kBN, 4>(acc, weight_box(stage) + consumer * 64 * 128,
                                        activation_box(stage), h == 0);
          next_stage();
        }
        return f;
      };
      // Slice `slot` of group g is complete in `acc`: free its stages, fold it into the group's sum
      // (group 0's: the total itself).
      const auto fold = [&](float(&acc)[kRegs], int slot, SliceStages f, int g) {
        wgmma::fence_registers(acc);
        release_slice(f.first, f.used);
        if (g == 0) {
          if (slot == 0) {
            wgmma_detail::copy_into(total, acc);
          } else {
            wgmma_detail::add_into(total, acc);
          }
        } else if (slot == 0) {
          wgmma_detail::copy_into(group, acc);
        } else {
          wgmma_detail::add_into(group, acc);
        }
      };
      const int full_groups = static_cast<int>(k / kGroupK);
      for (int64_t unit = blockIdx.x; unit < units; unit += gridDim.x) {
        const int64_t tile = unit % tiles;
        const int g_begin = kSplit ? static_cast<int>(unit / tiles) * unit_groups : 0;
        const int g_end = min(groups, g_begin + unit_groups);
        for (int g = g_begin; g < g_end; ++g) {
          if (g < full_groups) {
            const SliceStages in0 = issue_full(part_a);
            const SliceStages in1 = issue_full(part_b);
            wgmma::wait_group<2>();
            fold(part_a, 0, in0, g);
            const SliceStages in2 = issue_full(part_a);
            wgmma::wait_group<2>();
            fold(part_b, 1, in1, g);
            const SliceStages in3 = issue_full(part_b);
            wgmma::wait_group<2>();
            fold(part_a, 2, in2, g);
            wgmma::wait_group<0>();
            fold(part_b, 3, in3, g);
          } else {
            const int s0 = g * static_cast<int>(kGroupSlices);
            for (int s = s0; s < min(slices, s0 + static_cast<int>(kGroupSlices)); ++s) {
              const SliceStages in{stage, issue_slice(part_a, s)};
              wgmma::wait_group<0>();
              fold(part_a, s - s0, in, g);
            }
          }
          if (g > 0) finish_group(g, g_begin, tile);  // group 0's sum is the total itself
        }
        finish_unit(g_begin, tile);
      }
    } else {
      float partial[kRegs];
      for (int64_t unit = blockIdx.x; unit < units; unit += gridDim.x) {
        const int64_t tile = unit % tiles;
        const int g_begin = kSplit ? static_cast<int>(unit / tiles) * unit_groups : 0;
        const int s_end = min(slices, (g_begin + unit_groups) * static_cast<int>(kGroupSlices));
        for (int s = g_begin * static_cast<int>(kGroupSlices); s < s_end; ++s) {
          const int first_stage = stage;
          int used;
          if (s == 0) {
            used = issue_slice(total, s);
          } else if (s % kGroupSlices == 0) {
            used = issue_slice(group, s);
          } else {
            used = issue_slice(partial, s);
          }
          wgmma::wait_group<0>();
          wgmma::fence_registers(total);
          wgmma::fence_registers(group);
          wgmma::fence_registers(partial);
          release_slice(first_stage, used);
          if (s % kGroupSlices != 0) {
            if (s < kGroupSlices) {
              wgmma_detail::add_into(total, partial);
            } else {
              wgmma_detail::add_into(group, partial);
            }
          }
          const bool group_ends = s % kGroupSlices == kGroupSlices - 1 || s == s_end - 1;
          if (group_ends && s >= kGroupSlices) {
            finish_group(static_cast<int>(s / kGroupSlices), g_begin, tile);
          }
        }
        finish_unit(g_begin, tile);
      }
    }
  }
}

}  // namespace gemmkit::cuda::linear_family
