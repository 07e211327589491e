// The k block order of the Hopper implicit-GEMM convolution kernel (wgmma.cuh and its other forms)
// and the walks over it: the place of a k block in K (its channel block and taps), the consumers'
// step cursor (the k16 steps of each k block) and the producer's box-coordinate cursor, stepped
// without divisions. One order for every form, so every output's chain of k16 steps, hence its
// bits, is the same whatever the form, the tile or the grid. GEMMKIT_CONV_HD: the kernels and the
// host tests that emulate them call the same code. Pure and header-only.
#pragma once

#include <cstdint>

#include "cuda/conv/implicit_gemm/wgmma_layout.h"

namespace gemmkit::cuda::conv_impl {

// The place of a k block in K, in the one order every form of the kernel runs its k blocks (so
// every output's chain of k16 steps): for each tap along d (outermost), then h, each group of 64
// channels, each tap along w, each k block of the group (one of 64 channels, or two of 32). So
// the k16 steps and their order are the same at either channel width (the same bits), and the k
// blocks of one (d, h) tap and 64-channel group read one input row at consecutive offsets (the
// halo form loads it once for all of them).
struct WgmmaConvKPlace {
  int32_t c_block = 0;  // the channel block (of block_c channels)
  int32_t half = 0;     // its place in its 64-channel group (0, or 1 for a second 32-channel block)
  int32_t tap[kDims] = {0, 0, 0};
};

// Channel blocks per 64-channel group (1 or 2).
GEMMKIT_CONV_HD int32_t implicit_wgmma_group_blocks(const ImplicitWgmmaPlan& p) {
  return kWgmmaConvBlockK / p.block_c;
}

// The place of k block kb (divisions: once per work item).
GEMMKIT_CONV_HD WgmmaConvKPlace implicit_wgmma_k_place(const ImplicitWgmmaPlan& p, int32_t kb) {
  constexpr int kW = kDims - 1;
  const int32_t per_tap = p.c_blocks * p.kernel[kW];  // k blocks per (d, h) tap
  int32_t rest = kb / per_tap;
  const int32_t in_tap = kb - rest * per_tap;
  const int32_t group_blocks = implicit_wgmma_group_blocks(p);
  const int32_t first = in_tap / (group_blocks * p.kernel[kW]) * group_blocks;  // group's first
  const int32_t blocks = first + group_blocks <= p.c_blocks ? group_blocks : p.c_blocks - first;
  const int32_t in_group = in_tap - first * p.kernel[kW];
  WgmmaConvKPlace k;
  k.tap[kW] = in_group / blocks;
  k.half = in_group - k.tap[kW] * blocks;
  k.c_block = first + k.half;
  for (int d = kDims - 2; d >= 0; --d) {
    k.tap[d] = rest % p.kernel[d];
    rest /= p.kernel[d];
  }
  return k;
}

// Steps place k to the next k block (past the last one it wraps to the first): compares only.
GEMMKIT_CONV_HD void implicit_wgmma_place_next(const ImplicitWgmmaPlan& p, WgmmaConvKPlace& k) {
  constexpr int kW = kDims - 1;
  const int32_t first = k.c_block - k.half;
  const int32_t group_blocks = implicit_wgmma_group_blocks(p);
  const int32_t blocks = first + group_blocks <= p.c_blocks ? group_blocks : p.c_blocks - first;
  if (k.half + 1 < blocks) {
    ++k.half;
    ++k.c_block;
    return;
  }
  k.half = 0;
  k.c_block = first;
  if (++k.tap[kW] < p.kernel[kW]) return;
  k.tap[kW] = 0;
  k.c_block = first + blocks;
  if (k.c_block < p.c_blocks) return;
  k.c_block = 0;
  for (int d = kDims - 2; d >= 0; --d) {
    if (++k.tap[d] < p.kernel[d]) return;
    k.tap[d] = 0;
  }
}

// The consumers' walk over a work item's k blocks, for the k16 steps of each (its channel block's:
// implicit_wgmma_block_steps).
struct WgmmaConvStepCursor {
  WgmmaConvKPlace place;
  GEMMKIT_CONV_HD int steps(const ImplicitWgmmaPlan& p) const {
    return implicit_wgmma_block_steps(p, place.c_block);
  }
  GEMMKIT_CONV_HD void next(const ImplicitWgmmaPlan& p) { implicit_wgmma_place_next(p, place); }
};

GEMMKIT_CONV_HD WgmmaConvStepCursor implicit_wgmma_step_cursor(const ImplicitWgmmaPlan& p,
                                                               int32_t kb) {
  WgmmaConvStepCursor c;
  c.place = implicit_wgmma_k_place(p, kb);
  return c;
}

// The TMA box coordinates (innermost first) of k block kb of tile t: the x box (channel, w, h, d,
// n) and the weight box (channel, kw, kh, kd, o).
struct WgmmaConvCoords {
  int32_t x[5] = {};
  int32_t w[5] = {};
};

// The producer's walk over a work item's k blocks: the place of the current k block and its box
// coordinates, stepped by implicit_wgmma_k_next with compares, adds and multiplies only, so the
// one producer thread spends no integer division per k block (decoding kb costs five or more;
// implicit_wgmma_k_cursor decodes once per work item).
struct WgmmaConvKCursor {
  WgmmaConvCoords coords;
  WgmmaConvKPlace place;
  int32_t x_origin[kDims] = {0, 0, 0};  // x's coordinate of tap 0, per spatial dim
  int32_t x_channel0 = 0;               // x's first channel of the tile's group
};

// Sets k's coordinates from its place.
GEMMKIT_CONV_HD void implicit_wgmma_place_coords(const ImplicitWgmmaPlan& p, WgmmaConvKCursor& k) {
  const int32_t channel = k.place.c_block * p.block_c;
  k.coords.x[0] = k.x_channel0 + channel;
  k.coords.w[0] = channel;
  for (int d = 0; d < kDims; ++d) {
    // Spatial dim d (0 = d, 1 = h, 2 = w) is box dim 3 - d.
    k.coords.x[3 - d] = k.x_origin[d] + k.place.tap[d] * p.kdil[d];
    k.coords.w[3 - d] = p.w_first[d] + p.w_step[d] * k.place.tap[d];
  }
}

// The cursor at k block kb of tile t, decoded from kb.
GEMMKIT_CONV_HD WgmmaConvKCursor implicit_wgmma_k_cursor(const ImplicitWgmmaPlan& p,
                                                         const WgmmaConvTile& t, int32_t kb) {
  WgmmaConvKCursor k;
  k.place = implicit_wgmma_k_place(p, kb);
  k.x_channel0 = static_cast<int32_t>(t.group) * p.cpg;
  for (int d = 0; d < kDims; ++d) k.x_origin[d] = t.p0[d] * p.stride[d] - p.pad_lo[d];
  k.coords.x[4] = static_cast<int32_t>(t.n);
  k.coords.w[4] =
      static_cast<int32_t>(t.group) * p.opg + static_cast<int32_t>(t.o_tile) * p.block_o;
  implicit_wgmma_place_coords(p, k);
  return k;
}

GEMMKIT_CONV_HD WgmmaConvCoords implicit_wgmma_coords(const ImplicitWgmmaPlan& p,
                                                      const WgmmaConvTile& t, int32_t kb) {
  return implicit_wgmma_k_cursor(p, t, kb).coords;
}

// Steps the cursor to the next k block (past the last one it wraps to the first).
GEMMKIT_CONV_HD void implicit_wgmma_k_next(const ImplicitWgmmaPlan& p, WgmmaConvKCursor& k) {
  implicit_wgmma_place_next(p, k.place);
  implicit_wgmma_place_coords(p, k);
}

}  // namespace gemmkit::cuda::conv_impl
