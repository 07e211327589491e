// The staged depthwise variant (staged.cuh): whether it serves a problem and its tiling. Pure host
// code.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/problems.h"
#include "cuda/conv/common/occupancy.h"
#include "cuda/conv/common/operands.h"
#include "cuda/conv/depthwise/layout.h"

namespace gemmkit::cuda::conv_impl {

// Why the staged depthwise variant cannot serve p ("" when it can): 2 or 3 spatial dims with one
// kernel tap along dim 0, a 3x3, 5x5 or 7x7 kernel, stride 1 and no dilation along the last two
// dims, multiplier 1, x in 16-byte channel octets (why_not_x_channel_octets) and out suited to
// 2-channel stores.
inline std::string why_not_depthwise_staged(const detail::ConvProblem& p, const ConvGeometry& g) {
  if (p.spatial < 2) return "one spatial dim";
  if (g.o != g.c) return "a channel multiplier > 1";
  if (g.kernel[0] != 1) return "more than one kernel tap along the first of 3 spatial dims";
  if (g.kernel[1] != g.kernel[2] || (g.kernel[2] != 3 && g.kernel[2] != 5 && g.kernel[2] != 7)) {
    return "a " + std::to_string(g.kernel[1]) + "x" + std::to_string(g.kernel[2]) +
           " kernel (3x3, 5x5 or 7x7 only)";
  }
  for (int d = 1; d < kDims; ++d) {
    if (g.stride[d] != 1 || g.kdil[d] != 1 || g.idil[d] != 1) {
      return "a stride or dilation along the last two spatial dims";
    }
  }
  const std::string no_octets = why_not_x_channel_octets(p);
  if (!no_octets.empty()) return no_octets;
  if (!depthwise_window_offsets_fit(g, false, 2 * kDepthwiseStagedRun * kDepthwiseStagedMaxWarps)) {
    return "a plane of x or the weight spans 2^31 or more elements";
  }
  if (channel_stride(p.out) != 1 || pointer_alignment(p.out.data) < 2 * elem_size(p.out.dtype) ||
      !outer_strides_multiple_of(p.out, 2)) {
    return "out not suited to 2-channel stores";
  }
  return "";
}

// 16 when the staged kernel may load a channel tile's weights as 16-byte vectors of one run of w
// (depthwise_staged_load_weight_run): taps and channels packed (o stride = taps, the kernel's
// rows and columns contiguous), one tap along dim 0, w 16-byte aligned; else 0 (element loads).
// Every tile's run then starts 16-byte aligned: tiles start at multiples of 16 channels and
// 16 * taps 16-bit weights are whole vectors, and a last partial tile holds a multiple of 8.
inline int depthwise_staged_w_run(const detail::ConvProblem& p, const ConvGeometry& g) {
  const int64_t k = g.kernel[2];
  const bool packed =
      g.kernel[0] == 1 && g.w_stride[3] == 1 && g.w_stride[2] == k && g.w_stride[0] == k * k;
  return packed && pointer_alignment(p.weight.data) >= 16 ? 16 : 0;
}

// Plans the staged variant: of the tilings with 4 thread tiles per warp row (16-channel tiles) or
// 2 (32-channel tiles) and 1-8 warps per block (the smem of each within 48 KiB), the one with the
// lowest estimated time per SM, in warp instructions: the larger of
//   issue    the fullest SM's blocks x each block's instructions / 4 schedulers: its thread tiles
//            (2 x 7 outputs x k^2 FMAs x 2 channels at ~1.3 instructions each, plus stores), its
//            window's 16-byte copies and its weight staging;
//   latency  rounds of resident blocks x a thread tile's instructions x 2 cycles (a warp alone
//            issues about every other cycle: small problems wait on one tile's chain);
// ties going to the least work in all (padding of every kind counts as work); then two tiles per
// block (double-buffered windows) when there are at least 4 tiles per SM; then the register
// budget of the instantiation (96, or the lean 80 where that takes fewer waves). Returns a
// description for the reason.
inline std::string plan_depthwise_staged(const ConvGeometry& g, const DeviceDescription& dev,
                                         int64_t grid_cap, DepthwiseTiling& t) {
  const int64_t k = g.kernel[2];
  const int64_t planes = g.batch * g.out[0];
  const int64_t row_pairs = ceil_div(g.out[1], int64_t{kDepthwiseStagedRows});
  const int64_t runs = ceil_div(g.out[2], int64_t{kDepthwiseStagedRun});
  const int64_t cap = std::max<int64_t>(1, std::min(grid_cap, kMaxGridX));
  const double thread_tile =
      1.3 * 2 * kDepthwiseStagedRows * kDepthwiseStagedRun * static_cast<double>(k * k) + 150;
  constexpr double kChunkCost = 25;   // instructions per 16-byte copy (32 per warp instruction)
  constexpr double kWeightCost = 25;  // instructions per staged weight (32 per warp instruction)
  // Blocks of tiling c an SM holds at `registers` per thread.
  const auto resident_blocks = [&](const DepthwiseTiling& c, int registers) {
    return resident_blocks_per_sm(dev, 32 * c.rows_per_block, registers,
                                  depthwise_staged_smem_bytes(g, c));
  };
  bool have = false;
  double best_cost = 0, best_work = 0;
  DepthwiseTiling best;
  for (const int64_t groups : {int64_t{4}, int64_t{2}}) {
    for (int64_t warps = 1; warps <= kDepthwiseStagedMaxWarps; ++warps) {
      DepthwiseTiling c;
      c.variant = DepthwiseVariant::staged;
      c.run = kDepthwiseStagedRun;
      c.th = kDepthwiseStagedRows;
      c.cvt = 32 / groups;
      c.rows_per_block = warps;
      c.runs_per_block = groups;
      c.channel_vectors = g.c / 2;
      c.channel_tiles = ceil_div(g.c, depthwise_staged_channels(c));
      c.runs_per_row = runs;
      c.row_tiles = ceil_div(row_pairs, warps);
      c.col_tiles = ceil_div(runs, groups);
      c.spatial_tiles = planes * c.row_tiles * c.col_tiles;
      c.x_vector = true;
      c.tiles_per_block = ceil_div(c.tiles(), cap);
      const int64_t smem = depthwise_staged_smem_bytes(g, c);
      if (smem > kMaxKernelSmem) continue;
      const int64_t resident = resident_blocks(c, kDepthwiseStagedRegisters);
      if (resident < 1) continue;
      const int64_t blocks = ceil_div(c.tiles(), c.tiles_per_block);
      const int64_t per_sm = ceil_div(blocks, int64_t{dev.multiprocessors});
      const double tiles = static_cast<double>(c.tiles_per_block);
      const double block_cost =
          tiles * (static_cast<double>(warps) * thread_tile +
                   static_cast<double>(depthwise_staged_window_chunks(g, c)) * kChunkCost / 32) +
          static_cast<double>(k * k * depthwise_staged_channels(c)) * kWeightCost / 32;
      const double issue = static_cast<double>(per_sm) * block_cost / 4;
      const double latency =
          static_cast<double>(ceil_div(per_sm, resident)) * tiles * thread_tile * 2;
      const double cost = std::max(issue, latency);
      const double work = static_cast<double>(blocks) * block_cost;
      if (!have || cost < best_cost * 0.999 || (cost <= best_cost * 1.001 && work < best_work)) {
        best = c;
        best_cost = cost;
        best_work = work;
        have = true;
      }
    }
  }
  t = best;
  // Two tiles per block where the grid still gives >= 2 blocks per SM: the second window streams
  // in while the first is computed (H200, MobileNet 3x3 c144: 1008 tiles, 9.40 -> 8.42 us; the
  // 7x7 rows, with fewer tiles than 4 per SM, were the same either way).
  if (t.tiles_per_block == 1 && t.tiles() >= 4 * int64_t{dev.multiprocessors}) {
    DepthwiseTiling two = t;
    two.tiles_per_block = 2;
    if (depthwise_staged_smem_bytes(g, two) <= kMaxKernelSmem) t = two;
  }
  // The lean instantiation where its residency runs the grid in fewer waves (measured on forced
  // tilings of the ConvNeXt / MobileNet rows: faster wherever the wave count drops, slower in
  // nearly all tilings where it stays).
  const auto waves = [&](int registers) {
    return ceil_div(ceil_div(t.tiles(), t.tiles_per_block),
                    resident_blocks(t, registers) * dev.multiprocessors);
  };
  t.registers = waves(kDepthwiseStagedLeanRegisters) < waves(kDepthwiseStagedRegisters)
                    ? kDepthwiseStagedLeanRegisters
                    : kDepthwiseStagedRegisters;
  return std::to_string(depthwise_staged_channels(t)) + "-channel tiles of " +
         std::to_string(kDepthwiseStagedRows * t.rows_per_block) + " x " +
         std::to_string(kDepthwiseStagedRun * t.runs_per_block) + " outputs (" +
         std::to_string(t.rows_per_block) + " warps), " + std::to_string(t.tiles()) + " tiles, " +
         std::to_string(t.tiles_per_block) + " per block, " + std::to_string(t.registers) +
         " registers";
}

}  // namespace gemmkit::cuda::conv_impl
