// The blocked depthwise variant (blocked.cuh): whether it serves a problem and its tiling.
// Pure host code.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/problems.h"
#include "cuda/conv/common/occupancy.h"
#include "cuda/conv/common/operands.h"
#include "cuda/conv/depthwise/layout.h"

namespace gemmkit::cuda::conv_impl {

// Why the blocked depthwise variant cannot serve p ("" when it can): it needs 2 or 3 spatial dims,
// kernel width 3, 5 or 7 with stride 1 or 2 along the last dim, no kernel or input dilation along
// the last two dims (dim 0 of a 3-D problem: anything), weight taps one stride apart and 32-bit
// offsets inside a plane (depthwise_blocked_offsets_fit).
inline std::string why_not_depthwise_blocked(const detail::ConvProblem& p, const ConvGeometry& g,
                                             const DepthwiseTiling& t) {
  if (p.spatial < 2) return "one spatial dim (the window variants serve it)";
  for (int d = 1; d < kDims; ++d) {
    if (g.kdil[d] != 1 || g.idil[d] != 1) {
      return "a kernel or input dilation along the last two spatial dims";
    }
  }
  if (g.stride[2] > 2) return "a stride > 2 along the last dim";
  if (g.kernel[2] != 3 && g.kernel[2] != 5 && g.kernel[2] != 7) {
    return "kernel width " + std::to_string(g.kernel[2]) + " (3, 5 or 7 only)";
  }
  // Taps one stride apart: tap index (t0 * k1 + t1) * k2 + t2 at offset tap * w_stride[3].
  if ((g.kernel[1] > 1 && g.w_stride[2] != g.kernel[2] * g.w_stride[3]) ||
      (g.kernel[0] > 1 && g.w_stride[1] != g.kernel[1] * g.kernel[2] * g.w_stride[3])) {
    return "the weight's taps are not one stride apart";
  }
  const double w_span =
      static_cast<double>(g.o - 1) * static_cast<double>(g.w_stride[0]) +
      static_cast<double>(g.kernel_positions() - 1) * static_cast<double>(g.w_stride[3]);
  if (w_span >= static_cast<double>(kMaxInt32) || !depthwise_blocked_offsets_fit(g, t)) {
    return "a plane of x or out, or the weight, spans 2^31 or more elements";
  }
  return "";
}

// Bytes per load of the blocked variant's weight staging: 16 or 8 when every channel tile's
// weights are one run of w — taps contiguous (w_stride[3] = 1, taps one stride apart) and
// channels back to back (w_stride[0] = taps) — whose start and length are multiples of that many
// bytes (w's address included); else 0 (a load per element, any strides).
inline int depthwise_blocked_w_vector_bytes(const detail::ConvProblem& p, const ConvGeometry& g,
                                            const DepthwiseTiling& t, int64_t v) {
  const int64_t taps = g.kernel_positions();
  if (!t.w_linear || g.w_stride[3] != 1 || g.w_stride[0] != taps) return 0;
  const int64_t tile_bytes = t.cvt * v * taps * elem_size(p.weight.dtype);
  for (const int bytes : {16, 8}) {
    if (tile_bytes % bytes == 0 && pointer_alignment(p.weight.data) >= bytes) return bytes;
  }
  return 0;
}

// Threads per multiprocessor below which the blocked variant takes 1-row thread tiles (twice the
// threads, 1.2x the instructions per FMA): 16 warps, 4 per scheduler, hide the L1 and shared
// memory latencies of the FMA-bound loop.
constexpr int64_t kDepthwiseBlockedMinThreadsPerSm = 512;

// Plans the blocked variant (vector `v` chosen by the caller). Thread tile th x tw (th: 2 rows, or
// 1 when 2-row tiles would leave fewer than kDepthwiseBlockedMinThreadsPerSm threads per SM or
// 1-row ones finish in fewer cost-weighted rounds of resident threads).
// Channel tiles: k tiles of cvt = ceil(channel_vectors / k) vectors, cvt <= kDepthwiseBlockedMaxCvt
// and its staged weights within 48 KiB; of the k from the fewest tiles up, the widest cvt whose
// lane use (channel padding x the block's last warp) is within 3% of the best, so a block of
// at most kDepthwiseBlockedThreads threads has no half-empty warp (c = 96: 3 tiles of 16 vectors,
// 8 thread tiles, 128 threads; c = 144: 4 of 18, 7 thread tiles, 126 threads). Thread tiles per
// block (rows_per_block x runs_per_block <= kDepthwiseBlockedThreads / cvt): the shape with the
// fewest idle lanes (thread tiles past the edges, the unused lanes of a block's last warp; within
// 1/32), then the largest that still gives >= 2 blocks per multiprocessor
// (else the one with most blocks), then the tallest (a block's tiles then share columns, so
// interior and edge tiles do not mix in a warp). Returns a description for the reason.
inline std::string plan_depthwise_blocked(const ConvGeometry& g, const DeviceDescription& dev,
                                          int64_t v, DepthwiseTiling& t) {
  const int64_t taps = g.kernel_positions();
  t.variant = DepthwiseVariant::blocked;
  t.x_vector = v == 2;
  t.w_cv_stride = (taps % 2 == 0 ? taps + 1 : taps) * v;
  t.w_linear = true;
  t.channel_vectors = g.o / v;
  int64_t cap = std::min<int64_t>(kDepthwiseBlockedMaxCvt, t.channel_vectors);
  cap = std::max<int64_t>(1, std::min(cap, kMaxKernelSmem / (t.w_cv_stride * 4)));
  const auto lane_use = [&](int64_t cvt) {
    const int64_t threads = kDepthwiseBlockedThreads / cvt * cvt;
    const int64_t lanes = ceil_div(threads, 32) * 32;
    const int64_t tiles = ceil_div(t.channel_vectors, cvt);
    return static_cast<double>(t.channel_vectors) / static_cast<double>(tiles * cvt) *
           static_cast<double>(threads) / static_cast<double>(lanes);
  };
  const int64_t fewest = ceil_div(t.channel_vectors, cap);
  double best_use = 0;
  for (int64_t k = fewest; k < fewest + 16; ++k) {
    best_use = std::max(best_use, lane_use(ceil_div(t.channel_vectors, k)));
  }
  t.cvt = 1;
  for (int64_t k = fewest; k < fewest + 16; ++k) {
    const int64_t cvt = ceil_div(t.channel_vectors, k);
    if (lane_use(cvt) >= 0.97 * best_use) {
      t.cvt = cvt;
      break;
    }
  }
  t.channel_tiles = ceil_div(t.channel_vectors, t.cvt);
  const int64_t planes = g.batch * g.out[0];
  t.run = depthwise_blocked_tw(g.kernel[2], g.stride[2]);
  t.runs_per_row = ceil_div(g.out[2], t.run);
  const auto thread_tiles = [&](int64_t th) {
    return t.channel_tiles * t.cvt * planes * ceil_div(g.out[1], th) * t.runs_per_row;
  };
  t.th = kDepthwiseBlockedRows;
  std::string why_rows = "2-row thread tiles";
  // Rounds of resident threads (kDepthwiseBlockedMinThreadsPerSm per SM: the registers of the
  // launch bounds) each tiling takes; a 1-row round costs ~0.6 of a 2-row one (half the outputs
  // at 1.2x the instructions per FMA): 1-row tiles when they finish sooner by more than 5%.
  constexpr int64_t kOneRowRoundPercent = 60, kMarginPercent = 95;
  const int64_t resident = kDepthwiseBlockedMinThreadsPerSm * dev.multiprocessors;
  const int64_t rounds2 = ceil_div(thread_tiles(kDepthwiseBlockedRows), resident);
  const int64_t rounds1 = ceil_div(thread_tiles(1), resident);
  if (thread_tiles(t.th) < resident) {
    t.th = 1;
    why_rows = "1-row thread tiles (2-row ones would give " +
               std::to_string(thread_tiles(kDepthwiseBlockedRows) / dev.multiprocessors) + " < " +
               std::to_string(kDepthwiseBlockedMinThreadsPerSm) + " threads per SM)";
  } else if (rounds1 * kOneRowRoundPercent < rounds2 * kMarginPercent) {
    t.th = 1;
    why_rows = "1-row thread tiles (" + std::to_string(rounds1) +
               " rounds of resident threads against " + std::to_string(rounds2) +
               " of 2-row ones at ~1.7x the cost)";
  }
  const int64_t tile_rows = ceil_div(g.out[1], t.th);
  const int64_t useful = tile_rows * t.runs_per_row;
  const int64_t per_block = std::max<int64_t>(1, kDepthwiseBlockedThreads / t.cvt);
  // Idle lanes of a shape, per plane and channel tile: thread tiles past the edges and the
  // unused lanes of each block's last warp.
  struct Choice {
    int64_t bh = 1, bw = 1, blocks = 0, idle = 0;
  };
  Choice best;
  bool have = false;
  const int64_t slack = useful * t.cvt / 32;  // 1/32 of the useful lanes
  for (int64_t bh = 1; bh <= std::min(per_block, tile_rows); ++bh) {
    for (int64_t bw = 1; bw * bh <= per_block && bw <= t.runs_per_row; ++bw) {
      Choice c{bh, bw, 0, 0};
      const int64_t per_plane = ceil_div(tile_rows, bh) * ceil_div(t.runs_per_row, bw);
      const int64_t lanes = per_plane * ceil_div(bh * bw * t.cvt, 32) * 32;
      c.idle = lanes - useful * t.cvt;
      c.blocks = t.channel_tiles * planes * per_plane;
      if (!have) {
        best = c;
        have = true;
        continue;
      }
      // Fewer idle lanes (beyond 1/32 of the useful ones) win outright.
      if (c.idle + slack < best.idle) {
        best = c;
        continue;
      }
      if (best.idle + slack < c.idle) continue;
      const int64_t enough = 2 * int64_t{dev.multiprocessors};
      const bool c_enough = c.blocks >= enough, best_enough = best.blocks >= enough;
      if (c_enough != best_enough) {
        if (c_enough) best = c;
        continue;
      }
      const int64_t c_size = c.bh * c.bw, best_size = best.bh * best.bw;
      if (c_enough ? c_size > best_size : c.blocks > best.blocks) {
        best = c;
      } else if (c_size == best_size && c.bw < best.bw) {
        best = c;
      }
    }
  }
  t.rows_per_block = best.bh;
  t.runs_per_block = best.bw;
  t.row_tiles = ceil_div(tile_rows, t.rows_per_block);
  t.col_tiles = ceil_div(t.runs_per_row, t.runs_per_block);
  t.spatial_tiles = planes * t.row_tiles * t.col_tiles;
  return why_rows + ", " + std::to_string(t.cvt) + " channel vectors x " +
         std::to_string(t.rows_per_block) + "x" + std::to_string(t.runs_per_block) +
         " thread tiles per block";
}

}  // namespace gemmkit::cuda::conv_impl
