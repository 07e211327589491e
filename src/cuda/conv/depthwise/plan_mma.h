// The tensor-core depthwise variant (mma.cuh): whether it serves a problem, whether auto takes it
// over the staged variant, and its tiling. Pure host code.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/problems.h"
#include "cuda/conv/common/occupancy.h"
#include "cuda/conv/common/operands.h"
#include "cuda/conv/depthwise/layout.h"

namespace gemmkit::cuda::conv_impl {

// Why the tensor-core depthwise variant (mma.cuh) cannot serve p ("" when it
// can): a 2-D layer (or 3-D with one tap along dim 0) with multiplier 1, kernels up to 9 x 9,
// stride 1 and no dilation along the last two dims, at least 8 output rows (a 16-row tile of
// fewer would be mostly waste), 16-bit x in 16-byte channel octets and out of x's type, stored
// as 2-channel (32-bit) words.
inline std::string why_not_depthwise_mma(const detail::ConvProblem& p, const ConvGeometry& g) {
  if (p.spatial < 2) return "one spatial dim";
  if (g.o != g.c) return "a channel multiplier > 1";
  if (g.kernel[0] != 1) return "more than one kernel tap along the first of 3 spatial dims";
  if (g.kernel[1] > kDepthwiseMmaMaxKernel || g.kernel[2] > kDepthwiseMmaMaxKernel) {
    return "a kernel wider or taller than 9";
  }
  for (int d = 1; d < kDims; ++d) {
    if (g.stride[d] != 1 || g.kdil[d] != 1 || g.idil[d] != 1) {
      return "a stride or dilation along the last two spatial dims";
    }
  }
  if (g.out[1] < kDepthwiseMmaRows / 2) return "fewer than 8 output rows";
  const std::string no_octets = why_not_x_channel_octets(p);
  if (!no_octets.empty()) return no_octets;
  if (p.out.dtype != p.x.dtype) return "out's dtype is not x's";
  if (channel_stride(p.out) != 1 || pointer_alignment(p.out.data) < 4 ||
      !outer_strides_multiple_of(p.out, 2)) {
    return "out not suited to 2-channel stores";
  }
  if (!depthwise_window_offsets_fit(
          g, true, 2 * kDepthwiseMmaRows + 8 * kDepthwiseMmaMaxPieces + kDepthwiseMmaMaxKernel)) {
    return "a plane of x or out, or the weight, spans 2^31 or more elements";
  }
  return "";
}

// The tensor-core variant's tiling with `pieces` 8-column pieces per tile (4, 2 or 1), and the
// blocks of it an SM holds (resident_blocks_per_sm); resident 0: the window does not fit 48 KiB.
inline DepthwiseTiling depthwise_mma_tiling(const ConvGeometry& g, const DeviceDescription& dev,
                                            int64_t grid_cap, int pieces, int64_t& resident) {
  DepthwiseTiling c;
  c.variant = DepthwiseVariant::mma;
  c.run = 8 * pieces;
  c.th = kDepthwiseMmaRows;
  c.cvt = kDepthwiseMmaChannels / 8;
  c.channel_vectors = g.c / 8;
  c.channel_tiles = ceil_div(c.channel_vectors, c.cvt);
  c.runs_per_row = ceil_div(g.out[2], int64_t{c.run});
  c.row_tiles = ceil_div(g.out[1], int64_t{kDepthwiseMmaRows});
  c.col_tiles = c.runs_per_row;
  c.spatial_tiles = g.batch * g.out[0] * c.row_tiles * c.col_tiles;
  c.x_vector = true;
  c.registers = depthwise_mma_registers(pieces);
  c.tiles_per_block = ceil_div(c.tiles(), std::max<int64_t>(1, std::min(grid_cap, kMaxGridX)));
  const int64_t smem = depthwise_mma_smem_bytes(g, pieces);
  resident = smem > kMaxKernelSmem
                 ? 0
                 : resident_blocks_per_sm(dev, kDepthwiseMmaThreads, c.registers, smem);
  return c;
}

// Under GEMMKIT_CONV_DEPTHWISE=mma: the tile width (4, 2 or 1 pieces) whose grid takes the fewest
// rounds of resident blocks times a tile's pixels moved (window in, outputs out), ties to fewer
// pixels in all. Fills t; returns a description for the reason.
inline std::string plan_depthwise_mma(const ConvGeometry& g, const DeviceDescription& dev,
                                      int64_t grid_cap, DepthwiseTiling& t) {
  bool have = false;
  double best_cost = 0, best_work = 0;
  for (const int pieces : {4, 2, 1}) {
    int64_t resident = 0;
    const DepthwiseTiling c = depthwise_mma_tiling(g, dev, grid_cap, pieces, resident);
    if (resident < 1) continue;
    const int64_t blocks = ceil_div(c.tiles(), c.tiles_per_block);
    const double tile = static_cast<double>(
        depthwise_mma_in_rows(g) * depthwise_mma_in_cols(pieces) + kDepthwiseMmaRows * 8 * pieces);
    const double rounds = static_cast<double>(ceil_div(blocks, resident * dev.multiprocessors));
    const double cost = rounds * static_cast<double>(c.tiles_per_block) * tile;
    const double work = static_cast<double>(c.tiles()) * tile;
    if (!have || cost < best_cost * 0.999 || (cost <= best_cost * 1.001 && work < best_work)) {
      t = c;
      best_cost = cost;
      best_work = work;
      have = true;
    }
  }
  return "16-channel tiles of 16 x " + std::to_string(t.run) + " outputs, " +
         std::to_string(t.tiles()) + " tiles, " + std::to_string(t.tiles_per_block) + " per block";
}

// Where auto takes the tensor-core variant over the staged one ("" and its tiling in t, else why
// not): kernels of at least 7 x 7, whose FMAs cost the staged variant most, and 32-column tiles
// that fill 90-100% of one wave of resident blocks. Its blocks run copy, transposition, MMAs and
// stores back to back, with no next tile to overlap, so it wins only where every SM holds a full
// set of them once: of the ConvNeXt and MobileNet rows of docs/perf.md, it is faster than the
// staged variant only on ConvNeXt 8 x 56^2 x 96 (384 tiles, 97% of a wave of 396).
inline std::string why_not_depthwise_mma_by_default(const ConvGeometry& g,
                                                    const DeviceDescription& dev, int64_t grid_cap,
                                                    DepthwiseTiling& t) {
  if (g.kernel[1] < 7 || g.kernel[2] < 7) {
    return "a kernel smaller than 7 x 7 (the staged variant is faster; GEMMKIT_CONV_DEPTHWISE=mma "
           "forces it)";
  }
  int64_t resident = 0;
  const DepthwiseTiling c =
      depthwise_mma_tiling(g, dev, grid_cap, kDepthwiseMmaMaxPieces, resident);
  const int64_t slots = resident * dev.multiprocessors;
  if (resident < 1 || c.tiles() > slots || 10 * c.tiles() < 9 * slots) {
    return "its 32-column tiles (" + std::to_string(c.tiles()) +
           ") do not fill 90-100% of one wave (" + std::to_string(slots) +
           " blocks; GEMMKIT_CONV_DEPTHWISE=mma forces it)";
  }
  t = c;
  return "";
}

}  // namespace gemmkit::cuda::conv_impl
