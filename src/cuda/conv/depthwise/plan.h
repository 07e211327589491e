// The depthwise path (groups == c, any channel multiplier): whether it serves a problem, and which
// variant with which tiling (depthwise_config). Pure host code.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/problems.h"
#include "cuda/conv/common/config.h"
#include "cuda/conv/common/occupancy.h"
#include "cuda/conv/common/operands.h"
#include "cuda/conv/common/request.h"
#include "cuda/conv/depthwise/layout.h"
#include "cuda/conv/depthwise/plan_blocked.h"
#include "cuda/conv/depthwise/plan_mma.h"
#include "cuda/conv/depthwise/plan_staged.h"

namespace gemmkit::cuda::conv_impl {

inline std::string why_not_depthwise(const detail::ConvProblem& p) {
  if (p.groups != p.in_channels || p.in_channels_per_group != 1) {
    return "groups (" + std::to_string(p.groups) + ") != c (" + std::to_string(p.in_channels) + ")";
  }
  if (channel_stride(p.x) != 1 && p.in_channels > 1) return "x's channel stride is not 1";
  if (channel_stride(p.out) != 1 && p.out_channels > 1) return "out's channel stride is not 1";
  if (p.kernel_positions() * 4 > kMaxKernelSmem) {
    return "the kernel has more than " + std::to_string(kMaxKernelSmem / 4) + " taps";
  }
  return "";
}

// Spatial layout and grid of a depthwise tiling whose variant, run, cvt and channel_vectors are
// set: the block's spatial tile takes as many runs of a row as fit the thread budget (whole rows
// when they fit: no halo along the last dim), then as many rows as fit; the budget halves (256
// -> 128 -> 64 threads) while the problem would give fewer than 2 blocks per multiprocessor.
// Then tiles_per_block so that the grid stays within `max_blocks`. Returns gridDim.x.
inline int64_t depthwise_layout(const ConvGeometry& g, int64_t multiprocessors, int64_t max_blocks,
                                DepthwiseTiling& t) {
  t.channel_tiles = ceil_div(t.channel_vectors, t.cvt);
  t.runs_per_row = ceil_div(g.out[2], t.run);
  const int64_t planes = g.batch * g.out[0];
  for (int64_t budget = 256;; budget /= 2) {
    const int64_t spatial = std::max<int64_t>(1, budget / t.cvt);
    t.runs_per_block = std::min(t.runs_per_row, spatial);
    t.rows_per_block = std::max<int64_t>(1, std::min(g.out[1], spatial / t.runs_per_block));
    t.row_tiles = ceil_div(g.out[1], t.rows_per_block);
    t.col_tiles = ceil_div(t.runs_per_row, t.runs_per_block);
    t.spatial_tiles = planes * t.row_tiles * t.col_tiles;
    if (budget <= 64 || t.tiles() >= 2 * multiprocessors) break;
  }
  const int64_t cap = std::max<int64_t>(1, std::min(max_blocks, kMaxGridX));
  t.tiles_per_block = ceil_div(t.tiles(), cap);
  return ceil_div(t.tiles(), t.tiles_per_block);
}

// Depthwise kernel (depthwise.cuh). Variant, first that applies (DepthwiseTiling):
//   blocked 2-D / 3-D, kernel width 3, 5 or 7, last-dim stride 1 or 2, no dilation along the last
//           two dims (why_not_depthwise_blocked): a th x tw register tile of 2 channels
//           (multiplier 1, x and out suited to 2-element vectors) or 1 channel per thread
//           (plan_depthwise_blocked)
//   narrow  kernel width <= 4: 16 bytes of x per thread (8 16-bit / 4 f32 channels) x 4 outputs
//   wide    kernel width <= 8: 4 channels x 8 outputs (acc[8][4] + a kernel row of weights
//           wr[8][4] in registers: ~80 of them, 3 blocks of 256 per SM)
//   generic anything else: up to 4 channels x 4 outputs, per-tap loads
// Window and generic variants: channel vectors per block: balanced tiles of at most
// kDepthwiseMaxCvt (16: 128-256 bytes of a position's channels per warp row, enough for full
// 32-byte sectors), fewer when the tile's weights (taps x channels x fp32) would pass 48 KiB;
// spatial tile and grid: depthwise_layout. Every variant: block b takes tiles_per_block
// consecutive tiles, so that the grid stays within max_blocks(dev).
inline ConvConfig depthwise_config(const detail::ConvProblem& p, const DeviceDescription& dev,
                                   const std::string& algo, const std::string& reason,
                                   DepthwiseChoice variant = DepthwiseChoice::automatic) {
  ConvConfig c = config_of(ConvPath::depthwise, algo, reason);
  const ConvGeometry g = normalize(p);
  const int64_t ex = elem_size(p.x.dtype), eo = elem_size(p.out.dtype);
  const int64_t taps = p.kernel_positions();
  const auto out_suits = [&](int64_t width) {
    return p.out_channels % width == 0 &&
           pointer_alignment(p.out.data) >= std::min<int64_t>(16, width * eo) &&
           outer_strides_multiple_of(p.out, width);
  };
  const auto x_suits = [&](int64_t width) {
    return p.out_channels_per_group == 1 && vector_width_for(p, width) == width;
  };
  const auto fits = [&](int64_t width) { return taps * width * 4 <= kMaxKernelSmem; };
  DepthwiseTiling& t = c.depthwise;
  c.grid_cap = max_blocks(dev);
  const auto finish = [&](int64_t v) {
    const int64_t cap = std::max<int64_t>(1, std::min(c.grid_cap, kMaxGridX));
    t.tiles_per_block = ceil_div(t.tiles(), cap);
    c.grid.x = static_cast<uint32_t>(ceil_div(t.tiles(), t.tiles_per_block));
    c.vector = static_cast<int>(v);
    c.tile = t.run;
    c.block = static_cast<int>(t.threads());
  };
  if (variant == DepthwiseChoice::automatic || variant == DepthwiseChoice::mma) {
    std::string no_mma = why_not_depthwise_mma(p, g);
    if (no_mma.empty() && variant == DepthwiseChoice::automatic) {
      no_mma = why_not_depthwise_mma_by_default(g, dev, c.grid_cap, t);
    }
    if (no_mma.empty()) {
      const std::string shape = variant == DepthwiseChoice::mma
                                    ? plan_depthwise_mma(g, dev, c.grid_cap, t)
                                    : "16-channel tiles of 16 x 32 outputs, " +
                                          std::to_string(t.tiles()) + " tiles, one full wave";
      c.grid.x = static_cast<uint32_t>(ceil_div(t.tiles(), t.tiles_per_block));
      c.vector = 8;
      c.tile = t.run;
      c.block = kDepthwiseMmaThreads;
      c.smem_bytes = depthwise_mma_smem_bytes(g, t.run / 8);
      c.reason += "; tensor-core variant: " + shape;
      return c;
    }
    c.reason += "; not the tensor-core variant: " + no_mma;
  } else {
    c.reason += std::string("; not the tensor-core variant: GEMMKIT_CONV_DEPTHWISE=") +
                depthwise_choice_name(variant);
  }
  if (variant != DepthwiseChoice::blocked) {
    const std::string no_staged = why_not_depthwise_staged(p, g);
    if (no_staged.empty()) {
      const std::string shape = plan_depthwise_staged(g, dev, c.grid_cap, t);
      t.w_vector_bytes = depthwise_staged_w_run(p, g);
      c.grid.x = static_cast<uint32_t>(ceil_div(t.tiles(), t.tiles_per_block));
      c.vector = 2;
      c.tile = t.run;
      c.block = static_cast<int>(32 * t.rows_per_block);
      c.smem_bytes = depthwise_staged_smem_bytes(g, t);
      c.reason += "; staged variant: " + shape;
      return c;
    }
    c.reason += "; not the staged variant: " + no_staged;
  } else {
    c.reason += "; not the staged variant: GEMMKIT_CONV_DEPTHWISE=blocked";
  }
  {
    DepthwiseTiling blocked;
    blocked.run = depthwise_blocked_tw(g.kernel[2], g.stride[2]);
    blocked.th = kDepthwiseBlockedRows;
    const std::string no_blocked = why_not_depthwise_blocked(p, g, blocked);
    if (no_blocked.empty()) {
      const int64_t v = out_suits(2) && x_suits(2) && fits(2) ? 2 : 1;
      const std::string shape = plan_depthwise_blocked(g, dev, v, blocked);
      blocked.w_vector_bytes = depthwise_blocked_w_vector_bytes(p, g, blocked, v);
      t = blocked;
      finish(v);
      c.smem_bytes = t.cvt * t.w_cv_stride * 4;
      c.reason += "; blocked variant: " + shape +
                  (v == 2 ? ", 2 channels per thread"
                          : ", 1 channel per thread (multiplier > 1, odd o or unaligned x / out)");
      return c;
    }
    c.reason += "; not the blocked variant: " + no_blocked;
  }
  const bool window = g.kdil[2] == 1 && g.idil[2] == 1 && (g.stride[2] == 1 || g.stride[2] == 2);
  const auto suits = [&](int64_t width) {
    return out_suits(width) && x_suits(width) && fits(width);
  };
  const int64_t narrow = 16 / ex;
  int64_t v = 1;
  if (window && g.kernel[2] <= kDepthwiseNarrowTaps && suits(narrow)) {
    t.variant = DepthwiseVariant::narrow;
    t.run = kDepthwiseNarrowRun;
    v = narrow;
  } else if (window && g.kernel[2] <= kDepthwiseWideTaps && suits(kDepthwiseWideVector)) {
    t.variant = DepthwiseVariant::wide;
    t.run = kDepthwiseWideRun;
    v = kDepthwiseWideVector;
  } else {
    t.variant = DepthwiseVariant::generic;
    t.run = kDepthwiseGenericRun;
    v = kDepthwiseMaxGenericVector;
    while (v > 1 && !(out_suits(v) && fits(v))) v /= 2;  // why_not_depthwise: taps * 4 fits
    t.x_vector = v > 1 && x_suits(v);
  }
  if (t.variant != DepthwiseVariant::generic) t.x_vector = true;
  t.channel_vectors = p.out_channels / v;
  int64_t cap = std::min<int64_t>(kDepthwiseMaxCvt, t.channel_vectors);
  while (cap > 1 && taps * cap * v * 4 > kMaxKernelSmem) cap = ceil_div(cap, 2);
  while (cap > 1 && taps * cap * v * 4 > kMaxKernelSmem) --cap;
  t.cvt = ceil_div(t.channel_vectors, ceil_div(t.channel_vectors, cap));
  c.grid.x = static_cast<uint32_t>(depthwise_layout(g, dev.multiprocessors, c.grid_cap, t));
  c.vector = static_cast<int>(v);
  c.tile = t.run;
  c.block = static_cast<int>(t.cvt * t.spb());
  c.smem_bytes = taps * t.cvt * v * 4;
  return c;
}

}  // namespace gemmkit::cuda::conv_impl
