// Eligibility and plan of the small-c kernel (small_c.cuh: c <= 8 input channels with one group,
// or groups of 8, K packed across taps), and its ConvConfig (small_c_config). Pure and
// header-only (no CUDA header): the host unit tests include it, also in builds without CUDA.
// Index math: layout.h.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/problems.h"
#include "cuda/conv/common/config.h"
#include "cuda/conv/common/occupancy.h"
#include "cuda/conv/common/operands.h"
#include "cuda/conv/small_c/layout.h"

namespace gemmkit::cuda::conv_impl {

// Registers per thread the kernel is built for: what its __launch_bounds__ (kSmallCThreads,
// kSmallCMinBlocks) leave each thread (128); the plan counts resident blocks at this figure.
constexpr int64_t kSmallCRegisters = kRegistersPerSm / (kSmallCThreads * kSmallCMinBlocks);

// The shared-memory parts of plan t (layout.h's SmallCPlan order) for an out element of
// `out_bytes` bytes.
inline void small_c_smem(SmallCPlan& t, int64_t out_bytes) {
  // With groups two region buffers: the next tile's copies run during this tile's MMAs.
  t.region_buffer_bytes = round_up(int64_t{t.region_pixels()} * t.pixel_stride * 4, 16);
  t.region_bytes = t.region_buffer_bytes * (t.grouped ? 2 : 1);
  t.b_bytes = int64_t{t.tile_n()} * t.b_words * 4;
  t.c_row_bytes = t.tile_n() * out_bytes + 16;
  t.c_bytes = t.tile_m() * t.c_row_bytes;
  // (With groups also each region pixel's packed coordinates, for the cp.async copies.)
  t.table_bytes = round_up((int64_t{t.tile_m()} + int64_t{t.k_steps} * 8 + int64_t{t.b_words} * 2 +
                            (t.grouped ? int64_t{t.region_pixels()} : 0)) *
                               4,
                           16);
  t.smem_bytes = t.region_bytes + t.b_bytes + t.c_bytes + t.table_bytes;
}

// "" when the small-c kernel can serve p on dev, else why not; then `t` is its plan. Tiles: of
// the shapes tile_h x tile_w = tile_m() (tile_w a power of two), the one with the least
// tiles x (tile_m() + region pixels) — the tiles' outputs and the input they stage — whose region
// fits; ties to the wider tile (longer contiguous output rows).
inline std::string why_not_small_c(const detail::ConvProblem& p, const DeviceDescription& dev,
                                   SmallCPlan& t) {
  t = SmallCPlan{};
  const std::string no_mma = why_not_16bit_mma(p, dev.sm_major, dev.sm_minor);
  if (!no_mma.empty()) return no_mma;
  const ConvGeometry g = normalize(p);
  t.grouped = g.groups > 1;
  t.opg = static_cast<int>(std::min<int64_t>(g.opg, kMaxInt32));
  if (t.grouped) {
    if (g.cpg != kSmallCMaxC) {
      return "groups = " + std::to_string(g.groups) + " with c/groups = " + std::to_string(g.cpg) +
             " (grouped: c/groups must be 8)";
    }
    if (g.opg % 8 != 0 || g.opg > kSmallCWarpN * 4 || (kSmallCWarpN * 4) % g.opg != 0) {
      return "groups = " + std::to_string(g.groups) + " with o/groups = " + std::to_string(g.opg) +
             " (grouped: o/groups must be 8, 16, 32, 64 or 128)";
    }
    const std::string no_octets = why_not_x_channel_octets(p);
    if (!no_octets.empty()) return "grouped: " + no_octets;
  } else if (g.c > kSmallCMaxC) {
    return "c = " + std::to_string(g.c) + " > " + std::to_string(kSmallCMaxC);
  }
  for (int d = 0; d < kDims; ++d) {
    if (g.idil[d] != 1) return "input dilation";
  }
  for (int d = 0; d < kDims; ++d) {
    const int64_t extent[] = {g.in[d], g.out[d] * g.stride[d], g.kernel[d] * g.kdil[d],
                              g.pad_lo[d] < 0 ? -g.pad_lo[d] : g.pad_lo[d]};
    for (const int64_t e : extent) {
      if (e >= kSmallCMaxCoord) {
        return "a spatial extent (" + std::to_string(e) + " in dim " + std::to_string(d) +
               ") reaches 2^30 (tile coordinates are 32-bit)";
      }
    }
  }
  int64_t weight_span = (g.cpg - 1) * g.w_stride[4];
  for (int d = 0; d < kDims; ++d) weight_span += (g.kernel[d] - 1) * g.w_stride[1 + d];
  if (weight_span >= kMaxInt32) return "a weight row spans 2^31 elements or more";
  t.c_pad = static_cast<int>(g.cpg + (g.cpg & 1));
  const int64_t k = g.kernel_positions() * t.c_pad;
  if (k > int64_t{kSmallCMaxKSteps} * 16) {
    return "taps * c rounded up to even = " + std::to_string(k) + " > " +
           std::to_string(kSmallCMaxKSteps * 16);
  }
  t.taps = static_cast<int>(g.kernel_positions());
  t.k_pairs = static_cast<int>(k / 2);
  t.k_steps = static_cast<int>(ceil_div(k, 16));
  t.b_words = 8 * t.k_steps + 4;
  t.warps_n = static_cast<int>(std::min<int64_t>(4, ceil_div(g.o, kSmallCWarpN)));
  t.warps_n = t.warps_n == 3 ? 4 : t.warps_n;
  if (t.grouped) t.warps_n = std::max(t.warps_n, static_cast<int>(g.opg / kSmallCWarpN));
  t.col_blocks = ceil_div(g.o, t.tile_n());
  // A staged pixel: c_pad channels, or the column block's groups' 8 channels each plus 4 words,
  // so that the 8 rows of an A-fragment load fall in different banks.
  t.groups_per_block = t.grouped ? t.tile_n() / t.opg : 1;
  t.pixel_stride = t.grouped ? t.groups_per_block * t.pixel_words() + 4 : t.pixel_words();
  const int64_t region_d = small_c_region_extent(g, 0, 1);
  if (region_d >= kSmallCMaxRegionDepth) {
    return "the kernel spans " + std::to_string(region_d) + " input planes along dim 0 (at most " +
           std::to_string(kSmallCMaxRegionDepth - 1) + ")";
  }
  t.region_d = static_cast<int>(region_d);
  const int64_t out_bytes = elem_size(p.out.dtype);

  bool found = false;
  int64_t best_cost = 0;
  SmallCPlan best = t;
  for (int tile_w = t.tile_m(); tile_w >= 1; tile_w /= 2) {
    SmallCPlan c = t;
    c.tile_w = tile_w;
    c.tile_h = t.tile_m() / tile_w;
    const int64_t rh = small_c_region_extent(g, 1, c.tile_h);
    const int64_t rw = small_c_region_extent(g, 2, c.tile_w);
    if (c.region_d * rh * rw > kSmallCMaxRegionPixels || rh >= 4096 || rw >= 4096) continue;
    c.region_h = static_cast<int>(rh);
    c.region_w = static_cast<int>(rw);
    small_c_smem(c, out_bytes);
    if (c.smem_bytes > dev.shared_per_block_optin) continue;
    c.row_tiles = ceil_div(g.out[1], c.tile_h);
    c.col_tiles = ceil_div(g.out[2], c.tile_w);
    c.spatial_tiles = g.batch * g.out[0] * c.row_tiles * c.col_tiles;
    const int64_t cost = c.spatial_tiles * (c.tile_m() + c.region_pixels());
    if (!found || cost < best_cost) {
      found = true;
      best_cost = cost;
      best = c;
    }
  }
  if (!found) {
    return "no tile's input region fits (" + std::to_string(kSmallCMaxRegionPixels) +
           " pixels and the shared memory per block): stride or dilation too large";
  }
  t = best;
  t.tiles = t.col_blocks * t.spatial_tiles;
  t.blocks_per_sm = std::max<int64_t>(
      1, resident_blocks_per_sm(dev, kSmallCThreads, kSmallCRegisters, t.smem_bytes));
  t.grid = std::max<int64_t>(
      1, std::min({t.tiles, t.blocks_per_sm * std::max(1, dev.multiprocessors), dev.max_grid_x}));
  const int64_t vector = 16 / out_bytes;
  t.vector_out = channel_stride(p.out) == 1 && pointer_alignment(p.out.data) >= 16 &&
                 outer_strides_multiple_of(p.out, vector);
  const double positions = static_cast<double>(g.positions());
  t.tile_efficiency = positions / static_cast<double>(t.spatial_tiles * t.tile_m()) *
                      static_cast<double>(g.o) / static_cast<double>(t.col_blocks * t.tile_n()) *
                      static_cast<double>(g.kernel_positions() * g.cpg) /
                      static_cast<double>(int64_t{t.k_steps} * 16);
  t.active = true;
  return "";
}

inline std::string to_string(const SmallCPlan& t) {
  return "small_c tile=" + std::to_string(t.tile_h) + "x" + std::to_string(t.tile_w) + "x" +
         std::to_string(t.tile_n()) + " region=" + std::to_string(t.region_d) + "x" +
         std::to_string(t.region_h) + "x" + std::to_string(t.region_w) +
         " c_pad=" + std::to_string(t.c_pad) + " k_steps=" + std::to_string(t.k_steps) +
         (t.grouped ? " groups_per_block=" + std::to_string(t.groups_per_block) : std::string()) +
         " tiles=" + std::to_string(t.tiles) + " (" + std::to_string(t.col_blocks) +
         " column blocks) grid=" + std::to_string(t.grid) +
         " blocks_per_sm=" + std::to_string(t.blocks_per_sm) +
         " smem=" + std::to_string(t.smem_bytes) + (t.vector_out ? " vector_out" : "") +
         " efficiency=" + std::to_string(t.tile_efficiency);
}

// The ConvConfig of the small-c path.
inline ConvConfig small_c_config(const SmallCPlan& plan, const std::string& algo,
                                 const std::string& reason) {
  ConvConfig c = config_of(ConvPath::small_c, algo, reason + ": " + to_string(plan));
  c.block = kSmallCThreads;
  c.grid.x = static_cast<uint32_t>(plan.grid);
  c.grid_cap = plan.grid;
  c.smem_bytes = plan.smem_bytes;
  c.small_c = plan;
  return c;
}

}  // namespace gemmkit::cuda::conv_impl
