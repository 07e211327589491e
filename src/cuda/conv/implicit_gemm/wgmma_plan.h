// The plan of the Hopper implicit-GEMM convolution kernel (wgmma.cuh): tiles, k blocks, reduction
// segments, stride phases and their launches, the cost model that picks among them, and its
// ConvConfig. Pure and header-only (no CUDA header): the host unit tests include it, also in
// builds without CUDA. Eligibility is in wgmma_eligibility.h; the GEMM view, the TMA boxes and the
// index helpers in wgmma_layout.h.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "common/problems.h"
#include "cuda/conv/common/config.h"
#include "cuda/conv/common/occupancy.h"
#include "cuda/conv/common/operands.h"
#include "cuda/conv/common/request.h"
#include "cuda/conv/implicit_gemm/layout.h"
#include "cuda/conv/implicit_gemm/wgmma_eligibility.h"
#include "cuda/conv/implicit_gemm/wgmma_layout.h"

namespace gemmkit::cuda::conv_impl {

// ---- Plan -------------------------------------------------------------------------------------

// The box of block_n positions with the least overhang over out (d, h, w): tile_w a power of two
// up to block_n (and box_w = tile_w * stride_w <= 256), the rest along h, then d; ties go to the
// wider box (longer runs of one input row). Returns the useful share of the box positions.
inline double choose_wgmma_conv_box(const int64_t (&out)[kDims], const int64_t (&stride)[kDims],
                                    int block_n, int32_t (&tile)[kDims]) {
  double best = -1.0;
  for (int64_t tw = block_n; tw >= 1; tw /= 2) {
    if (tw * stride[2] > kWgmmaConvMaxBox) continue;
    for (int64_t th = block_n / tw; th >= 1; th /= 2) {
      const int64_t td = block_n / (tw * th);
      if (th * stride[1] > kWgmmaConvMaxBox || td * stride[0] > kWgmmaConvMaxBox) continue;
      const int64_t sizes[kDims] = {td, th, tw};
      double useful = 1.0;
      for (int d = 0; d < kDims; ++d) {
        useful *= static_cast<double>(out[d]) /
                  static_cast<double>(ceil_div(out[d], sizes[d]) * sizes[d]);
      }
      if (useful > best + 1e-12) {
        best = useful;
        tile[0] = static_cast<int32_t>(td);
        tile[1] = static_cast<int32_t>(th);
        tile[2] = static_cast<int32_t>(tw);
      }
    }
  }
  return best;
}

// Reduction segments (k split): where one image's tiles (of 128 positions) fill under half the
// machine and K is long, K is cut into up to kWgmmaConvMaxSegments segments of at least
// kWgmmaConvMinSegmentBlocks k blocks, as many as one image's tiles times the segments fit the
// multiprocessors. One image's shape and the device decide, never the batch, so the bits of an
// image are the same in any batch (wgmma_layout.h).
constexpr int kWgmmaConvMaxSegments = 8;
constexpr int kWgmmaConvMinSegmentBlocks = 8;

inline int implicit_wgmma_segments_for(int64_t image_tiles, int64_t k_blocks, int multiprocessors) {
  if (image_tiles <= 0 || 2 * image_tiles > multiprocessors) return 1;
  const int64_t by_k = k_blocks / kWgmmaConvMinSegmentBlocks;
  const int64_t by_machine = multiprocessors / image_tiles;
  const int64_t want = std::min<int64_t>({kWgmmaConvMaxSegments, by_k, by_machine});
  if (want <= 1) return 1;
  // Equal segments: the fewest that keep segment_blocks = ceil(k_blocks / want).
  const int64_t per = ceil_div(k_blocks, want);
  return static_cast<int>(ceil_div(k_blocks, per));
}

// Channels per k block for c / groups = cpg: 32 (64-byte rows) where the last of 64-channel blocks
// would hold 32 channels or fewer and c / groups is below 128 (c = 16 or 32: half the bytes of
// each box; 96: three full blocks for two, one of them half zeros), else 64. The MMA work is the
// same (the k16 steps past c / groups are skipped either way); the boxes' bytes, which the SMs
// take in from L2, are not.
inline int implicit_wgmma_auto_block_c(int64_t cpg) {
  const int64_t last = cpg % kWgmmaConvBlockK;
  return last != 0 && last <= kWgmmaConvHalfBlockK && cpg < 2 * kWgmmaConvBlockK
             ? kWgmmaConvHalfBlockK
             : kWgmmaConvBlockK;
}

// The plan of stride phase `phase` (all zeros without input dilation) of a problem
// why_not_implicit_wgmma accepts, for `block_n` positions per tile (256 or 128), its reduction in
// `k_segments` segments (block_n 128 and block_o 128 when more than 1), the parallel split where a
// chained one would fill under one wave and the partials fit `workspace_budget` bytes, and
// `block_o` output channels per tile (kWgmmaConvNarrowBlockO: the narrow-o form, one phase only)
// and `block_c` channels per k block (0: implicit_wgmma_auto_block_c).
inline ImplicitWgmmaPlan implicit_wgmma_plan_for(const detail::ConvProblem& p,
                                                 const DeviceDescription& dev, int block_n,
                                                 const int32_t (&phase)[kDims] = {0, 0, 0},
                                                 int k_segments = 1, int64_t workspace_budget = 0,
                                                 int block_o = kWgmmaConvBlockO, int block_c = 0) {
  const ConvGeometry g = normalize(p);
  ImplicitWgmmaPlan t;
  int64_t out[kDims], stride[kDims], taps = 1;
  for (int i = 0; i < kDims + 2; ++i) t.out_stride[i] = g.out_stride[i];
  for (int d = 0; d < kDims; ++d) {
    const WgmmaConvPhaseDim r = wgmma_conv_phase_dim(g, d, phase[d]);
    t.phases[d] = static_cast<int32_t>(g.idil[d]);
    t.phase[d] = phase[d];
    out[d] = r.out;
    stride[d] = r.stride;
    taps *= r.taps;
    t.out[d] = static_cast<int32_t>(r.out);
    t.kernel[d] = static_cast<int32_t>(r.taps);
    t.stride[d] = static_cast<int32_t>(r.stride);
    t.pad_lo[d] = static_cast<int32_t>(r.pad_lo);
    t.kdil[d] = static_cast<int32_t>(r.x_step);
    t.w_first[d] = static_cast<int32_t>(r.w_first);
    t.w_step[d] = static_cast<int32_t>(r.w_step);
    t.out_base += r.out_first * g.out_stride[1 + d];
    t.out_stride[1 + d] = g.out_stride[1 + d] * r.out_step;
  }
  t.bias_stride = g.bias_stride;
  t.has_bias = g.has_bias;
  t.batch = g.batch;
  t.groups = g.groups;
  t.multiprocessors = std::max(1, dev.multiprocessors);
  t.cpg = static_cast<int32_t>(g.cpg);
  t.opg = static_cast<int32_t>(g.opg);
  t.taps = static_cast<int32_t>(taps);
  t.block_c = block_c != 0 ? block_c : implicit_wgmma_auto_block_c(g.cpg);
  t.c_blocks = static_cast<int32_t>(ceil_div(g.cpg, t.block_c));
  t.k_blocks = t.taps * t.c_blocks;
  t.last_block_steps =
      static_cast<int32_t>(ceil_div(g.cpg - int64_t{t.c_blocks - 1} * t.block_c, 16));

  t.block_n = block_n;
  t.block_o = block_o;
  t.stages = implicit_wgmma_stages(block_n);
  const int64_t box_out[kDims] = {std::max<int64_t>(1, out[0]), std::max<int64_t>(1, out[1]),
                                  std::max<int64_t>(1, out[2])};
  const double box_useful = choose_wgmma_conv_box(box_out, stride, block_n, t.tile);
  for (int d = 0; d < kDims; ++d) {
    t.tiles_of[d] = ceil_div(out[d], t.tile[d]);
    while ((int32_t{1} << t.tile_shift[d]) < t.tile[d]) ++t.tile_shift[d];
  }
  t.o_tiles = ceil_div(g.opg, block_o);
  t.base_tiles = g.groups * g.batch * t.tiles_of[0] * t.tiles_of[1] * t.tiles_of[2] * t.o_tiles;
  t.tiles = t.base_tiles;
  t.segment_blocks = t.k_blocks;
  if (k_segments > 1 && block_n == 128 && block_o == kWgmmaConvBlockO && t.k_blocks > 1) {
    t.segment_blocks = static_cast<int32_t>(ceil_div(t.k_blocks, k_segments));
    t.k_segments = static_cast<int32_t>(ceil_div(t.k_blocks, t.segment_blocks));
    const int64_t partials = int64_t{t.k_segments} * t.base_tiles * kWgmmaConvBlockO * block_n * 4;
    if (t.base_tiles < t.multiprocessors && partials <= workspace_budget) {
      t.split_parallel = true;
      t.workspace_bytes = partials;
      t.tiles = t.base_tiles * t.k_segments;
    }
  }
  t.grid = std::max<int64_t>(1, std::min<int64_t>(t.tiles, t.multiprocessors));
  // The split_parallel form stores through the fold kernel, element by element.
  t.tma_store = !t.split_parallel && implicit_wgmma_can_store_by_tma(p, t);
  implicit_wgmma_store_box(t.tile, t.store_box);
  t.smem_bytes = implicit_wgmma_smem_bytes(block_n, t.stages, t.tma_store);

  double useful = box_useful;
  useful *= static_cast<double>(g.opg) / static_cast<double>(t.o_tiles * block_o);
  // K: the channels of the k16 steps issued (the last block's past c / groups are skipped).
  useful *= static_cast<double>(g.cpg) / static_cast<double>(implicit_wgmma_issued_channels(t));
  t.tile_efficiency = useful;
  const double slots = std::max(1, dev.multiprocessors);
  const double waves = std::ceil(static_cast<double>(t.tiles) / slots);
  t.efficiency = useful * static_cast<double>(t.tiles) / (waves * slots);
  return t;
}

inline int64_t implicit_wgmma_phase_count(const ImplicitWgmmaPlan& t) {
  return int64_t{t.phases[0]} * t.phases[1] * t.phases[2];
}

// The reduction segments of a problem, from its 128-position plan `narrow`: one image's tiles
// (the batch's, divided by the batch) and the k blocks; 1 for transposed convolutions (their
// phases are planned alike).
inline int implicit_wgmma_segments(const ImplicitWgmmaPlan& narrow) {
  if (implicit_wgmma_phase_count(narrow) > 1 || narrow.batch < 1) return 1;
  return implicit_wgmma_segments_for(narrow.base_tiles / narrow.batch, narrow.k_blocks,
                                     narrow.multiprocessors);
}
inline int implicit_wgmma_segments(const detail::ConvProblem& p, const DeviceDescription& dev) {
  return implicit_wgmma_segments(implicit_wgmma_plan_for(p, dev, 128));
}

// Whether plan t can run the ping-pong schedule: 128-position tiles of 128 channels, one
// reduction segment, TMA stores (the kernel has no other epilogue: its element stores spilled).
inline bool implicit_wgmma_can_pingpong(const ImplicitWgmmaPlan& t) {
  return t.block_n == 128 && t.block_o == kWgmmaConvBlockO && t.k_segments == 1 &&
         !t.split_parallel && t.tma_store;
}

// Whether plan t can run the halo form (wgmma_halo.cuh): the cooperative schedule's 256-position
// tiles of 128 channels along one output row (tile 1 x 1 x 256), stride 1 and three taps along w
// with 2 * kdil_w <= 8 (the row of a stage: 256 + 2 * kdil_w positions), 64-channel k blocks,
// one stride phase, one reduction segment and TMA stores.
inline bool implicit_wgmma_can_halo(const ImplicitWgmmaPlan& t) {
  constexpr int kW = kDims - 1;
  return t.block_n == 256 && t.block_o == kWgmmaConvBlockO && t.block_c == kWgmmaConvBlockK &&
         t.tile[0] == 1 && t.tile[1] == 1 && t.tile[kW] == 256 && t.stride[kW] == 1 &&
         t.kernel[kW] == kWgmmaConvHaloTapsW &&
         256 + (kWgmmaConvHaloTapsW - 1) * t.kdil[kW] <= kWgmmaConvHaloRows &&
         implicit_wgmma_phase_count(t) == 1 && t.k_segments == 1 && !t.split_parallel &&
         t.tma_store && !t.pingpong;
}

// Plan t in the halo form where `choice` (GEMMKIT_CONV_WGMMA_HALO) and implicit_wgmma_can_halo
// allow it (auto: wherever it can), with its stages and shared memory.
inline ImplicitWgmmaPlan implicit_wgmma_with_halo(ImplicitWgmmaPlan t, WgmmaHaloChoice choice) {
  if (choice == WgmmaHaloChoice::off || !implicit_wgmma_can_halo(t)) return t;
  t.halo = true;
  t.stages = kWgmmaConvHaloStages;
  t.smem_bytes = implicit_wgmma_halo_smem_bytes();
  return t;
}

// Whether auto takes the ping-pong schedule for the 128-position plan `narrow` (one that can run
// it) in place of the cooperative schedule's choice: never, as measured (docs/perf.md, ideas
// measured and rejected: 1.02-1.11x slower over the conv suites, at best 1-3% faster on a few
// small rows, within the run-to-run spread; with its MMAs unserialized still 1.05-1.15x slower on
// the VAE 3x3 layers). The hook for a rule once a change makes it win.
inline bool implicit_wgmma_prefers_pingpong(const ImplicitWgmmaPlan& narrow) {
  (void)narrow;
  return false;
}

// The plan of stride phase `phase` of the problem `base` (phase 0's plan) was made for: the same
// tile width and machine, the grid no larger than base's (a caller's cap).
inline ImplicitWgmmaPlan implicit_wgmma_phase_plan(const detail::ConvProblem& p,
                                                   const ImplicitWgmmaPlan& base,
                                                   const int32_t (&phase)[kDims]) {
  DeviceDescription dev;
  dev.multiprocessors = base.multiprocessors;
  ImplicitWgmmaPlan t = implicit_wgmma_plan_for(p, dev, base.block_n, phase, base.k_segments,
                                                base.workspace_bytes, base.block_o, base.block_c);
  t.grid = std::min(t.grid, base.grid);
  t.pingpong = base.pingpong && implicit_wgmma_can_pingpong(t);
  return t;
}

// The plans of every stride phase of base's problem p in order (phase 0 first, the last dim
// fastest); base alone without input dilation.
inline std::vector<ImplicitWgmmaPlan> implicit_wgmma_phase_plans(const detail::ConvProblem& p,
                                                                 const ImplicitWgmmaPlan& base) {
  if (implicit_wgmma_phase_count(base) == 1) return {base};
  std::vector<ImplicitWgmmaPlan> plans;
  int32_t phase[kDims];
  for (phase[0] = 0; phase[0] < base.phases[0]; ++phase[0]) {
    for (phase[1] = 0; phase[1] < base.phases[1]; ++phase[1]) {
      for (phase[2] = 0; phase[2] < base.phases[2]; ++phase[2]) {
        plans.push_back(implicit_wgmma_phase_plan(p, base, phase));
      }
    }
  }
  return plans;
}

inline int64_t implicit_wgmma_total_tiles(const std::vector<ImplicitWgmmaPlan>& plans) {
  int64_t total = 0;
  for (const ImplicitWgmmaPlan& t : plans) total += t.tiles;
  return total;
}

// The launches of a plan's phases: runs [begin, end) of consecutive phases with outputs, up to
// kWgmmaConvMaxMergedPhases of one epilogue (TMA stores or not) per launch of the phases kernel
// (wgmma_phases.cuh), on min(their tiles, base.grid) CTAs; a group of one phase runs the
// single-plan kernel, and under the ping-pong schedule every group is one phase (its kernel takes
// one plan). Phases without outputs launch nothing.
struct WgmmaConvLaunchGroup {
  int begin = 0, end = 0;
  int64_t items = 0;  // the tiles of its phases
  int64_t grid = 0;
};
inline std::vector<WgmmaConvLaunchGroup> implicit_wgmma_launch_groups(
    const std::vector<ImplicitWgmmaPlan>& phases, const ImplicitWgmmaPlan& base) {
  std::vector<WgmmaConvLaunchGroup> groups;
  const int per_launch = base.pingpong ? 1 : kWgmmaConvMaxMergedPhases;
  for (int i = 0; i < static_cast<int>(phases.size()); ++i) {
    const ImplicitWgmmaPlan& t = phases[static_cast<size_t>(i)];
    if (t.tiles == 0) continue;
    if (groups.empty() || groups.back().end != i ||
        groups.back().end - groups.back().begin >= per_launch ||
        phases[static_cast<size_t>(groups.back().begin)].tma_store != t.tma_store) {
      groups.push_back({i, i, 0, 0});
    }
    WgmmaConvLaunchGroup& g = groups.back();
    g.end = i + 1;
    g.items += t.tiles;
    g.grid = std::max<int64_t>(1, std::min(g.items, base.grid));
  }
  return groups;
}

// The estimated time of plan t over `tiles` launched tiles (all stride phases'), in arbitrary
// units: the machine's waves times one work item's MMA work (channels x positions x its k blocks x
// the share of their k16 steps issued),
// weighted by what a tile does besides its MMAs: 128-position tiles read each weight block twice
// as often (+10%), 64-channel tiles read the activation box per half as many MMAs (+20%: wan-vae's
// c = o = 96 measured 13% slower in them at the same useful share), and a parallel split adds its
// partial tiles' round trip and the fold kernel (+30%: resnet50-3x3s2-128 ran 12.5 us split in
// two against 9.1 us in one chain of 64-channel tiles).
inline double implicit_wgmma_cost(const ImplicitWgmmaPlan& t, int64_t tiles) {
  const double slots = std::max(1, t.multiprocessors);
  const int32_t item_blocks = t.split_parallel ? t.segment_blocks : t.k_blocks;
  double work = double{1} * t.block_o * t.block_n * std::max(1, item_blocks);
  work *= static_cast<double>(implicit_wgmma_issued_channels(t)) /
          static_cast<double>(t.c_blocks * t.block_c);
  if (t.block_n == 128) work *= 1.1;
  if (t.block_o == kWgmmaConvNarrowBlockO) work *= 1.2;
  if (t.split_parallel) work *= 1.3;
  return std::ceil(static_cast<double>(tiles) / slots) * work;
}

// implicit_wgmma_cost of plan t for one image of its batch, its reduction segments (if any) run
// in parallel: what decides between segments and one chain, which give different bits, so that
// the decision never depends on the batch or on the workspace.
inline double implicit_wgmma_image_cost(ImplicitWgmmaPlan t) {
  t.base_tiles /= std::max<int64_t>(1, t.batch);
  t.split_parallel = t.k_segments > 1;
  t.tiles = t.base_tiles * t.k_segments;
  return implicit_wgmma_cost(t, t.tiles);
}

// Positions per tile: 256 (128 accumulators per consumer thread, the most work per loaded byte)
// unless 128-position tiles fill the machine's waves enough better; channels per tile: 128, or 64
// (the narrow-o form, one stride phase only) where o / groups <= 64 (half of a 128-channel tile's
// MMAs would multiply rows past o) or where more, smaller tiles beat the reduction segments that
// few 128-channel tiles take; all by implicit_wgmma_cost, and segments against one chain by
// implicit_wgmma_image_cost. `o_tile` (GEMMKIT_CONV_WGMMA_O_TILE) forces 128, or 64 wherever the
// problem is one stride phase (its K then one chain).
// The schedule: `schedule` (GEMMKIT_CONV_WGMMA_SCHEDULE) pingpong takes the ping-pong schedule
// wherever the 128-position, 128-channel plan can run it, automatic where
// implicit_wgmma_prefers_pingpong says so; otherwise the cooperative schedule.
inline ImplicitWgmmaPlan implicit_wgmma_plan_without_halo(
    const detail::ConvProblem& p, const DeviceDescription& dev, int64_t workspace_budget,
    WgmmaScheduleChoice schedule, WgmmaOTileChoice o_tile, WgmmaBlockCChoice block_c_choice) {
  const int block_c = block_c_choice == WgmmaBlockCChoice::c64   ? kWgmmaConvBlockK
                      : block_c_choice == WgmmaBlockCChoice::c32 ? kWgmmaConvHalfBlockK
                                                                 : 0;
  ImplicitWgmmaPlan narrow =
      implicit_wgmma_plan_for(p, dev, 128, {0, 0, 0}, 1, 0, kWgmmaConvBlockO, block_c);
  const int segments = implicit_wgmma_segments(narrow);
  const bool may_narrow_o =
      o_tile != WgmmaOTileChoice::o128 && implicit_wgmma_phase_count(narrow) == 1;
  const bool force_narrow_o = may_narrow_o && o_tile == WgmmaOTileChoice::o64;
  if (segments == 1 && !force_narrow_o && implicit_wgmma_can_pingpong(narrow) &&
      (schedule == WgmmaScheduleChoice::pingpong ||
       (schedule == WgmmaScheduleChoice::automatic && implicit_wgmma_prefers_pingpong(narrow)))) {
    narrow.pingpong = true;
    return narrow;
  }
  // A transposed convolution's phases share one persistent grid (implicit_wgmma_launch_groups):
  // the waves of all their tiles count, and the grid covers them.
  const double slots = std::max(1, dev.multiprocessors);
  const auto launched_tiles = [&](ImplicitWgmmaPlan& t) {
    if (implicit_wgmma_phase_count(t) == 1) return t.tiles;
    const int64_t tiles = implicit_wgmma_total_tiles(implicit_wgmma_phase_plans(p, t));
    t.grid = std::max<int64_t>(1, std::min<int64_t>(tiles, t.multiprocessors));
    t.efficiency = t.tile_efficiency * static_cast<double>(tiles) /
                   (std::ceil(static_cast<double>(tiles) / slots) * slots);
    return tiles;
  };
  // The better of two plans by implicit_wgmma_cost (ties to the first).
  const auto better = [&](ImplicitWgmmaPlan a, ImplicitWgmmaPlan b) {
    const double cost_a = implicit_wgmma_cost(a, launched_tiles(a));
    return implicit_wgmma_cost(b, launched_tiles(b)) < cost_a ? b : a;
  };
  const ImplicitWgmmaPlan wide =
      segments > 1
          ? implicit_wgmma_plan_for(p, dev, 128, {0, 0, 0}, segments, workspace_budget,
                                    kWgmmaConvBlockO, block_c)
          : better(implicit_wgmma_plan_for(p, dev, 256, {0, 0, 0}, 1, 0, kWgmmaConvBlockO, block_c),
                   narrow);
  if (!may_narrow_o) return wide;
  // The narrow-o plans (one chain over K) at both tile widths, and the better of them.
  const ImplicitWgmmaPlan narrow_256 =
      implicit_wgmma_plan_for(p, dev, 256, {0, 0, 0}, 1, 0, kWgmmaConvNarrowBlockO, block_c);
  const ImplicitWgmmaPlan narrow_128 =
      implicit_wgmma_plan_for(p, dev, 128, {0, 0, 0}, 1, 0, kWgmmaConvNarrowBlockO, block_c);
  const ImplicitWgmmaPlan chain = better(narrow_256, narrow_128);
  if (force_narrow_o) return chain;
  if (segments > 1) {
    const double chain_image_cost =
        std::min(implicit_wgmma_image_cost(narrow_256), implicit_wgmma_image_cost(narrow_128));
    return chain_image_cost < implicit_wgmma_image_cost(wide) ? chain : wide;
  }
  return better(wide, chain);
}

// The plan of problem p: implicit_wgmma_plan_without_halo's, in the halo form where `halo`
// (GEMMKIT_CONV_WGMMA_HALO) and implicit_wgmma_can_halo allow it.
inline ImplicitWgmmaPlan implicit_wgmma_plan(
    const detail::ConvProblem& p, const DeviceDescription& dev, int64_t workspace_budget,
    WgmmaScheduleChoice schedule = WgmmaScheduleChoice::automatic,
    WgmmaOTileChoice o_tile = WgmmaOTileChoice::automatic,
    WgmmaBlockCChoice block_c_choice = WgmmaBlockCChoice::automatic,
    WgmmaHaloChoice halo = WgmmaHaloChoice::automatic) {
  return implicit_wgmma_with_halo(
      implicit_wgmma_plan_without_halo(p, dev, workspace_budget, schedule, o_tile, block_c_choice),
      halo);
}

inline std::string to_string(const ImplicitWgmmaPlan& t) {
  return "implicit_wgmma tile=" + std::to_string(t.block_o) + "x" + std::to_string(t.block_n) +
         "x" + std::to_string(t.block_c) + " box=" + std::to_string(t.tile[0]) + "x" +
         std::to_string(t.tile[1]) + "x" + std::to_string(t.tile[2]) +
         " stages=" + std::to_string(t.stages) + " tiles=" + std::to_string(t.tiles) +
         " grid=" + std::to_string(t.grid) + " smem=" + std::to_string(t.smem_bytes) +
         " k_blocks=" + std::to_string(t.k_blocks) +
         (t.tma_store ? " store=tma" : " store=elementwise") +
         (t.pingpong ? " schedule=pingpong" : " schedule=cooperative") + (t.halo ? " halo" : "") +
         (t.k_segments > 1 ? " k_segments=" + std::to_string(t.k_segments) + "x" +
                                 std::to_string(t.segment_blocks) +
                                 (t.split_parallel ? " split=parallel workspace=" +
                                                         std::to_string(t.workspace_bytes)
                                                   : " split=chained")
                           : std::string()) +
         (implicit_wgmma_phase_count(t) > 1
              ? " stride_phases=" + std::to_string(implicit_wgmma_phase_count(t))
              : std::string()) +
         " efficiency=" + std::to_string(t.efficiency);
}

// The ConvConfig of the wgmma implicit path.
inline ConvConfig implicit_wgmma_config(const ImplicitWgmmaPlan& plan, const std::string& algo,
                                        const std::string& reason) {
  ConvConfig c = config_of(ConvPath::implicit_wgmma, algo, reason + ": " + to_string(plan));
  c.block = kWgmmaConvThreads;
  c.grid.x = static_cast<uint32_t>(plan.grid);
  c.grid_cap = plan.grid;
  c.smem_bytes = plan.smem_bytes;
  c.workspace_bytes = plan.workspace_bytes;
  c.implicit_wgmma = plan;
  return c;
}

}  // namespace gemmkit::cuda::conv_impl
