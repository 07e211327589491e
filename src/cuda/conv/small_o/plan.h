// The small-o path (o <= 8, groups == 1): whether it serves a problem, and which kernel with which
// tiling (small_o_config). Pure host code.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/problems.h"
#include "cuda/conv/common/config.h"
#include "cuda/conv/common/occupancy.h"
#include "cuda/conv/common/operands.h"
#include "cuda/conv/common/request.h"
#include "cuda/conv/small_o/layout.h"
#include "cuda/conv/small_o/taps_layout.h"

namespace gemmkit::cuda::conv_impl {

// Largest o the small-o path serves.
constexpr int64_t kSmallOMax = kSmallOMaxO;

// Plans the tensor-core small-o kernel for `g` (16-bit x read as 8-channel vectors: the caller
// checks dtype, c % 8 and alignment) within `max_smem` bytes of shared memory. Needs a kernel of
// one tap along dim 0 and stride 1, no dilations along dims 1 and 2. Fills `t` (mma = true) and
// returns "" , or returns why not. Region shapes, largest first (why: 256 positions = 2 M-tiles
// of 16 for each of the 8 warps; wide before tall because rows are contiguous in memory):
//   2-D (region_h, region_w): (16, 16), (8, 16), (8, 8), (4, 8); 1-D: (1, 256) ... (1, 32).
inline std::string plan_small_o_mma(const ConvGeometry& g, int64_t max_smem, SmallOTiling& t) {
  if (g.kernel[0] != 1) return "3-D kernel";
  for (int d = 1; d < kDims; ++d) {
    if (g.stride[d] != 1 || g.kdil[d] != 1 || g.idil[d] != 1) {
      return "a stride or dilation of the last two spatial dims is not 1";
    }
  }
  const int64_t taps = g.kernel_positions();
  t.n_cols = taps * g.o;
  t.n_tiles = ceil_div(t.n_cols, 8);
  t.p_stride = ceil_div(t.n_cols, 32) * 32;
  t.chunks = ceil_div(g.c, kSmallOMmaChunk);
  t.weight_bytes = t.n_tiles * t.chunks * kSmallOMmaChunkBytes;
  const bool one_d = g.out[1] == 1 && g.kernel[1] == 1;
  for (int64_t region = kSmallOMmaMaxRegion; region >= 32; region /= 2) {
    const int64_t w = one_d ? region : (region >= 128 ? 16 : 8);
    const int64_t h = region / w;
    if (h < g.kernel[1] || w < g.kernel[2]) continue;
    if (t.weight_bytes + region * t.p_stride * 4 > max_smem) continue;
    t.mma = true;
    t.region_h = h;
    t.region_w = w;
    t.tile_h = h - g.kernel[1] + 1;
    t.tile_w = w - g.kernel[2] + 1;
    t.row_tiles = ceil_div(g.out[1], t.tile_h);
    t.col_tiles = ceil_div(g.out[2], t.tile_w);
    t.tiles = g.batch * g.out[0] * t.row_tiles * t.col_tiles;
    return "";
  }
  return "the weights (" + std::to_string(t.weight_bytes) +
         " bytes as MMA fragments) and a region of per-tap products do not fit in " +
         std::to_string(max_smem / 1024) + " KiB of shared memory";
}

// The taps kernel's tile sizes, largest first (both forms' plans take the first that fits their
// limits and makes enough tiles): output positions along dims 1 and 2.
constexpr int64_t kSmallOTapsTileCandidates[][2] = {{16, 32}, {16, 16}, {8, 16}, {8, 8},
                                                    {4, 8},   {2, 8},   {1, 8}};

// Candidate tile h x w for g in c: each side clamped by the output, a clamped side giving its
// area to the other (up to the output); the input region it reads and the tile counts.
inline void small_o_taps_tile_candidate(const ConvGeometry& g, int64_t h, int64_t w,
                                        SmallOTapsTiling& c) {
  c.tile_h = std::min(h, g.out[1]);
  c.tile_w = std::min(w, g.out[2]);
  if (c.tile_h < h) {
    c.tile_w = std::min(g.out[2], h * w / c.tile_h);
  } else if (c.tile_w < w) {
    c.tile_h = std::min(g.out[1], h * w / c.tile_w);
  }
  c.region_h = (c.tile_h - 1) * g.stride[1] + (g.kernel[1] - 1) * g.kdil[1] + 1;
  c.region_w = (c.tile_w - 1) * g.stride[2] + (g.kernel[2] - 1) * g.kdil[2] + 1;
  c.row_tiles = ceil_div(g.out[1], c.tile_h);
  c.col_tiles = ceil_div(g.out[2], c.tile_w);
  c.tiles = g.batch * g.out[0] * c.row_tiles * c.col_tiles;
}

// Plans the taps kernel for `g` (16-bit x read as 16-byte vectors of 8 channels: the caller
// checks dtype, c % 8, alignment and strides) on a device with `multiprocessors` SMs,
// `smem_per_block` bytes of opt-in shared memory per block and `smem_per_sm` per SM. Needs one
// tap along dim 0, no input dilation and taps * o <= 64. Output tiles (tile_h, tile_w), largest
// first: (16, 32), (16, 16), (8, 16), (8, 8), (4, 8), (2, 8), (1, 8); a dim clamped by the
// output's extent gives its area to the other one (1-D: (1, 512), (1, 256), ...). Takes the
// first whose shared memory (B fragments + Y) lets 2 blocks share an SM and that makes at least
// 1.5 tiles per SM, but no tile whose region has fewer m-tiles than warps once one was found
// (smaller tiles would idle warps). Grid: the resident blocks (blocks_per_sm per SM), reduced so
// that every block takes tiles_per_block or tiles_per_block - 1 tiles. Fills `t` (active) and
// returns "", or returns why not.
inline std::string plan_small_o_taps(const ConvGeometry& g, int64_t multiprocessors,
                                     int64_t smem_per_block, int64_t smem_per_sm,
                                     SmallOTapsTiling& t) {
  t = SmallOTapsTiling{};
  if (g.kernel[0] != 1) return "more than one kernel tap along the first of 3 spatial dims";
  for (int d = 0; d < kDims; ++d) {
    if (g.idil[d] != 1) return "input dilation";
  }
  t.n_cols = g.kernel_positions() * g.o;
  if (t.n_cols > kSmallOTapsMaxCols) {
    return "taps * o = " + std::to_string(t.n_cols) + " > " + std::to_string(kSmallOTapsMaxCols);
  }
  t.n_tiles = t.n_cols <= 32 ? 4 : 8;
  t.chunks = ceil_div(g.c, kSmallOTapsChunk);
  t.channel_groups = ceil_div(t.chunks, kSmallOTapsGroupChunks);
  t.weight_bytes = t.chunks * t.n_tiles * kSmallOTapsChunkBytes;
  const int64_t limit = std::min(smem_per_block, smem_per_sm / 2 - kSmallOTapsSmemReserve);
  bool found = false;
  SmallOTapsTiling best = t;
  for (const auto& cand : kSmallOTapsTileCandidates) {
    SmallOTapsTiling c = t;
    small_o_taps_tile_candidate(g, cand[0], cand[1], c);
    if (c.region_h > limit || c.region_w > limit) continue;  // (their product could overflow)
    // Region offsets are int32 (small_o_taps_region_offset).
    if ((c.region_h - 1) * g.x_stride[2] + (c.region_w - 1) * g.x_stride[3] + g.c > kMaxInt32) {
      continue;
    }
    c.m_tiles = ceil_div(c.region(), kSmallOTapsMRows);
    c.y_stride = small_o_taps_y_stride(c.y_rows());
    c.y_bytes = c.n_tiles * 8 * c.y_stride * 4;
    c.pixel_bytes = c.y_rows() * 4;
    if (c.smem_bytes() > limit) continue;
    if (found && c.m_tiles < kSmallOTapsWarps) break;
    best = c;
    found = true;
    if (2 * c.tiles >= 3 * multiprocessors) break;
  }
  if (!found) {
    return "the B fragments (" + std::to_string(t.weight_bytes) +
           " bytes) and the smallest tile's Y do not fit in " + std::to_string(limit) +
           " bytes of shared memory (2 blocks per SM), or x's region offsets pass 2^31";
  }
  t = best;
  t.active = true;
  t.blocks_per_sm = std::min<int64_t>(kSmallOTapsMinBlocks,
                                      smem_per_sm / (t.smem_bytes() + kSmallOTapsSmemReserve));
  const int64_t resident =
      std::min(kMaxGridX, std::max<int64_t>(1, multiprocessors) * t.blocks_per_sm);
  t.tiles_per_block = ceil_div(t.tiles, resident);
  t.grid = ceil_div(t.tiles, t.tiles_per_block);
  return "";
}

// Plans the TMA form for `g` on a device with `multiprocessors` SMs and `smem_per_block` bytes of
// opt-in shared memory, as plan_small_o_taps but with 1 block per SM: the largest tile of
// plan_small_o_taps's list whose region has at most 8 * kSmallOTapsTmaWarpMTiles m-tiles and
// extents <= 256 and whose B fragments, Y and a ring of 3 (else 2) stages fit, making at least
// 1.5 tiles per SM when one does. x's extents, the batch and the box coordinates must fit TMA's
// int32 coordinates, and its strides (bytes) be multiples of 16 (the caller's 16-byte rule).
// Needs taps * o <= 32 (4 n-tiles).
inline std::string plan_small_o_taps_tma(const ConvGeometry& g, int64_t multiprocessors,
                                         int64_t smem_per_block, SmallOTapsTiling& t) {
  SmallOTapsTiling base;
  const std::string why = plan_small_o_taps(g, multiprocessors, smem_per_block,
                                            2 * (smem_per_block + kSmallOTapsSmemReserve), base);
  if (!why.empty()) return why;
  if (base.n_tiles != 4) return "taps * o > 32 (the TMA form keeps 4 n-tiles of accumulators)";
  for (int d = 0; d < kDims; ++d) {
    if (g.in[d] >= kMaxInt32) return "an input extent >= 2^31 (TMA coordinates)";
  }
  if (g.batch >= kMaxInt32 || g.c >= kMaxInt32) return "batch or channels >= 2^31";
  for (int d = 0; d < 4; ++d) {
    if (g.x_stride[d] * 2 >= (int64_t{1} << 40)) return "an x stride of 2^40 bytes or more (TMA)";
  }
  bool found = false;
  SmallOTapsTiling best = base;
  for (const auto& cand : kSmallOTapsTileCandidates) {
    SmallOTapsTiling c = base;
    small_o_taps_tile_candidate(g, cand[0], cand[1], c);
    if (c.region_h > kSmallOTapsTmaMaxBox || c.region_w > kSmallOTapsTmaMaxBox) continue;
    c.m_tiles = ceil_div(c.region(), kSmallOTapsMRows);
    if (c.m_tiles > kSmallOTapsWarps * kSmallOTapsTmaWarpMTiles) continue;
    c.y_stride = small_o_taps_y_stride(c.y_rows());
    c.y_bytes = c.n_tiles * 8 * c.y_stride * 4;
    c.pixel_bytes = 0;
    // A stage: every m-tile row (the m-tail rows are read, never used), 128-byte aligned.
    c.stage_bytes = ceil_div(c.y_rows() * kSmallOTapsChunk * 2, 128) * 128;
    c.tma_stages = 0;
    for (int stages : {3, 2}) {
      SmallOTapsTiling s = c;
      s.tma_stages = stages;
      if (s.smem_bytes() <= smem_per_block) {
        c.tma_stages = stages;
        break;
      }
    }
    if (c.tma_stages == 0) continue;
    if (found && c.m_tiles < kSmallOTapsWarps) break;
    best = c;
    found = true;
    if (2 * c.tiles >= 3 * multiprocessors) break;
  }
  if (!found) return "no tile's B fragments, Y and a ring of 2 region chunks fit";
  t = best;
  t.active = true;
  t.blocks_per_sm = 1;
  const int64_t resident = std::min(kMaxGridX, std::max<int64_t>(1, multiprocessors));
  t.tiles_per_block = ceil_div(t.tiles, resident);
  t.grid = ceil_div(t.tiles, t.tiles_per_block);
  return "";
}

// The small-o kernel's shared-memory copy of the weight: o * taps * c elements of x's type.
inline int64_t small_o_weight_bytes(const detail::ConvProblem& p) {
  return p.out_channels * p.kernel_positions() * p.in_channels * elem_size(p.x.dtype);
}

// Whether the tensor-core small-o kernel serves p: x read as 8-channel (16-byte) vectors
// (why_not_x_channel_octets) and a geometry plan_small_o_mma accepts; fills its tiling.
inline bool small_o_mma_fits(const detail::ConvProblem& p, SmallOTiling& t) {
  return why_not_x_channel_octets(p).empty() &&
         plan_small_o_mma(normalize(p), kMaxKernelSmem, t).empty();
}

// Whether the taps kernel serves p (o and groups checked by why_not_small_o): "" and its tiling,
// else why not. Needs x read as 16-byte loads of 8 channels at every pixel
// (why_not_x_channel_octets) and a geometry plan_small_o_taps accepts; out, weight and bias may
// have any strides.
inline std::string why_not_small_o_taps(const detail::ConvProblem& p, const DeviceDescription& dev,
                                        SmallOTapsTiling& t) {
  t = SmallOTapsTiling{};
  const std::string no_octets = why_not_x_channel_octets(p);
  if (!no_octets.empty()) return no_octets;
  return plan_small_o_taps(normalize(p), dev.multiprocessors, dev.shared_per_block_optin,
                           dev.shared_per_multiprocessor, t);
}

// Whether the TMA form of the taps kernel serves p: "" and its tiling (tma_stages > 0), else why
// not (the register form's x rule, then plan_small_o_taps_tma).
inline std::string why_not_small_o_taps_tma(const detail::ConvProblem& p,
                                            const DeviceDescription& dev, SmallOTapsTiling& t) {
  t = SmallOTapsTiling{};
  const std::string no_octets = why_not_x_channel_octets(p);
  if (!no_octets.empty()) return no_octets;
  if (dev.sm_major < 9) return "no TMA before sm_90";
  return plan_small_o_taps_tma(normalize(p), dev.multiprocessors, dev.shared_per_block_optin, t);
}

// Whether the small-o path serves p with a kernel that `variant` (ConvRequest::small_o) allows.
inline std::string why_not_small_o(const detail::ConvProblem& p, const DeviceDescription& dev,
                                   SmallOChoice variant = SmallOChoice::automatic) {
  if (p.out_channels > kSmallOMax) {
    return "o = " + std::to_string(p.out_channels) + " > " + std::to_string(kSmallOMax);
  }
  if (p.groups != 1) return "groups = " + std::to_string(p.groups) + " != 1";
  if (channel_stride(p.x) != 1 && p.in_channels > 1) return "x's channel stride is not 1";
  SmallOTapsTiling taps;
  if ((variant == SmallOChoice::automatic || variant == SmallOChoice::tma ||
       variant == SmallOChoice::taps) &&
      why_not_small_o_taps(p, dev, taps).empty()) {
    return "";
  }
  SmallOTiling mma;
  if (variant != SmallOChoice::cuda && small_o_mma_fits(p, mma)) return "";
  if (small_o_weight_bytes(p) > kMaxKernelSmem) {
    return "the weight (" + std::to_string(small_o_weight_bytes(p)) + " bytes) does not fit in " +
           std::to_string(kMaxKernelSmem / 1024) + " KiB of shared memory" +
           (variant == SmallOChoice::automatic
                ? ""
                : std::string(" (GEMMKIT_CONV_SMALL_O=") + small_o_choice_name(variant) + ")");
  }
  return "";
}

// Small-o kernels, the first that `variant` allows and that serves p:
//   taps  (taps.cuh) why_not_small_o_taps: 256 threads, B fragments + Y in opt-in
//         shared memory, the grid of plan_small_o_taps
//   mma   (small_o.cuh) 16-bit x whose channels load as 16-byte vectors and a geometry
//         plan_small_o_mma accepts: 256 threads, weights as MMA fragments + the region's per-tap
//         products in 48 KiB of shared memory
//   cuda  (small_o.cuh) `lanes` lanes share a strip of kSmallOPositions outputs along the
//         last spatial dim, each reducing every lanes-th vector of `vector` channels for all o
//         outputs, with the whole weight staged in shared memory in x's type.
// The reason names why the faster kernels did not serve.
inline ConvConfig small_o_config(const detail::ConvProblem& p, const DeviceDescription& dev,
                                 const std::string& algo, const std::string& reason,
                                 SmallOChoice variant = SmallOChoice::automatic) {
  ConvConfig c = config_of(ConvPath::small_o, algo, reason);
  c.vector = vector_width_for(p, p.in_channels);
  SmallOTiling& t = c.small_o;
  c.grid_cap = max_blocks(dev);
  std::string no_taps = std::string("GEMMKIT_CONV_SMALL_O=") + small_o_choice_name(variant);
  // Either form of the taps kernel, planned in c.small_o_taps.
  const auto take_taps = [&](int threads, const char* what) {
    const SmallOTapsTiling& k = c.small_o_taps;
    c.reason += what;
    c.block = threads;
    c.tile = static_cast<int>(k.tile_h * k.tile_w);
    c.grid_cap = k.grid;
    c.grid.x = static_cast<uint32_t>(k.grid);
    c.smem_bytes = k.smem_bytes();
    return c;
  };
  if (variant == SmallOChoice::tma || variant == SmallOChoice::automatic) {
    std::string no_tma = why_not_small_o_taps_tma(p, dev, c.small_o_taps);
    if (no_tma.empty() && variant == SmallOChoice::automatic &&
        c.small_o_taps.tiles_per_block < kSmallOTapsTmaMinTilesPerBlock) {
      no_tma = std::to_string(c.small_o_taps.tiles_per_block) + " tiles per block < " +
               std::to_string(kSmallOTapsTmaMinTilesPerBlock) +
               ": too few for its ring to overlap; the register form's 2 blocks per SM win";
    }
    if (no_tma.empty()) {
      return take_taps(kSmallOTapsTmaThreads,
                       ": taps kernel, TMA-fed form (the region streamed chunk by chunk into a "
                       "ring of shared memory, then the taps kernel's GEMM and shift-add)");
    }
    c.reason += " (TMA form: " + no_tma + ")";
  }
  if (variant == SmallOChoice::automatic || variant == SmallOChoice::tma ||
      variant == SmallOChoice::taps) {
    no_taps = why_not_small_o_taps(p, dev, c.small_o_taps);
    if (no_taps.empty()) {
      return take_taps(kSmallOTapsThreads,
                       ": taps kernel (one 1x1 GEMM of each input region by all taps' weights, "
                       "then a shift-add)");
    }
  }
  c.small_o_taps = SmallOTapsTiling{};
  if (variant != SmallOChoice::cuda && small_o_mma_fits(p, t)) {
    c.reason += ": tensor-core region kernel (taps kernel: " + no_taps + ")";
    c.block = kSmallOMmaThreads;
    c.tile = static_cast<int>(t.tile_h * t.tile_w);
    t.tiles_per_block = ceil_div(t.tiles, std::min(c.grid_cap, kMaxGridX));
    c.grid.x = static_cast<uint32_t>(ceil_div(t.tiles, t.tiles_per_block));
    c.smem_bytes = t.weight_bytes + t.region() * t.p_stride * 4;
    return c;
  }
  c.reason += ": CUDA-core kernel (taps kernel: " + no_taps + "; tensor-core region kernel: " +
              (variant == SmallOChoice::cuda ? "GEMMKIT_CONV_SMALL_O=cuda" : "does not apply") +
              ")";
  t = SmallOTiling{};
  // acc[4][8] with 16-byte vectors would spill: o > 4 reads 8-byte vectors.
  if (p.out_channels > 4 && c.vector * elem_size(p.x.dtype) > 8) c.vector /= 2;
  t.channel_vectors = p.in_channels / c.vector;
  int lanes_log2 = 0;
  while (lanes_log2 < 5 && (int64_t{1} << lanes_log2) < t.channel_vectors) ++lanes_log2;
  t.lanes_log2 = lanes_log2;
  c.lanes = 1 << lanes_log2;
  c.block = 256;
  c.tile = kSmallOPositions;
  const int64_t last = p.out_size[p.spatial - 1];
  t.strips_per_row = ceil_div(last, kSmallOPositions);
  t.strips = p.out_positions() / last * t.strips_per_row;
  t.strips_per_block = c.block / c.lanes;
  c.grid = grid_for(t.strips, t.strips_per_block, c.grid_cap);
  c.smem_bytes = small_o_weight_bytes(p);
  return c;
}

}  // namespace gemmkit::cuda::conv_impl
