// Configuration of the linear wgmma kernel (wgmma_kernel.cuh): tile width, stages, the k split
// of the sliced form and the tile width of the one-chain form; pure, host-tested
// (tests/test_linear_dispatch.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "cuda/linear/linear_contract.h"
#include "cuda/linear/linear_types.h"

namespace gemmkit::cuda::linear_family {

// The wgmma kernel (wgmma_kernel.cuh): tiles of 128 weight rows by `block_n` batch rows (64 or
// 128; 256 in the one-chain form), the stages of 64-wide k blocks its shared memory is built with,
// at most one persistent CTA per SM.
constexpr int kWgmmaBlockRows = 128;
constexpr int kWgmmaThreadsHost = 384;  // one producer and two consumer warpgroups
inline int wgmma_stages(int block_n) {
  return block_n == 64 ? 8 : block_n == 96 ? 7 : block_n == 128 ? 6 : 4;
}
// The one-chain form with 16-bit out adds the TMA-store epilogue's staging: two 64 x 64 chunks of
// 16-bit values per consumer warpgroup.
constexpr int64_t kWgmmaStagingBytesHost = 2 * 2 * 64 * 64 * 2;
inline int64_t wgmma_shared_bytes_host(int block_n, int stages, bool staging = false) {
  return 1024 + int64_t{stages} * (kWgmmaBlockRows + block_n) * 64 * 2 +
         (staging ? kWgmmaStagingBytesHost : 0) + 2 * int64_t{stages} * 8;
}
// A forced wgmma name as the names print: "wgmma[.n64|.n96|.n128|.n256][.s<stages>][.k<splits>]";
// block_n 0 is chosen as auto would (wgmma_sliced_block_n or wgmma_one_chain_block_n), stages when
// given must be the ones the variant is built with, splits 0 (no .k) as auto would
// (wgmma_auto_splits); .k1 is no split. Names print .k<splits> where the kernel splits k or the
// count was forced, so a printed name selects the config it names.
inline bool parse_wgmma_name(const std::string& name, int& block_n, int& splits) {
  std::size_t at = 0;
  const auto literal = [&](const char* text) {
    const std::string t(text);
    if (name.compare(at, t.size(), t) != 0) return false;
    at += t.size();
    return true;
  };
  if (!literal("wgmma")) return false;
  int b = 0;
  if (literal(".n128")) {
    b = 128;
  } else if (literal(".n256")) {
    b = 256;
  } else if (literal(".n64")) {
    b = 64;
  } else if (literal(".n96")) {
    b = 96;
  }
  if (b != 0 && literal(".s") && !literal(std::to_string(wgmma_stages(b)).c_str())) return false;
  int k = 0;
  if (literal(".k")) {
    // A positive decimal without a leading zero, at most 7 digits (k < 2^31 has < 2^22 groups).
    std::size_t end = at;
    while (end < name.size() && end - at < 7 && name[end] >= '0' && name[end] <= '9') ++end;
    if (end == at || name[at] == '0') return false;
    k = std::stoi(name.substr(at, end - at));
    at = end;
  }
  if (at != name.size()) return false;
  block_n = b;
  splits = k;
  return true;
}
// Batch rows per tile in the one-chain form (one accumulator set, so 256 fits): the width of least
// estimated time, waves x per-tile cost, with a tile of width b costing b + kWgmmaTileOverhead
// (the fixed share of a tile, its weight box stream and epilogue, in batch columns); ties go to
// the wider tile. 4096 x 4096: n = 256 takes 64 (128 tiles, one wave), n = 1024 and 4096 256;
// 6144 x 4096 at n = 1024 128 (H200: 77.4 us against 88.8 with 256-wide tiles).
constexpr int64_t kWgmmaTileOverhead = 64;
inline int wgmma_one_chain_block_n(int64_t m, int64_t n, int multiprocessors) {
  int best = 256;
  int64_t best_cost = -1;
  for (const int b : {256, 128, 64}) {
    const int64_t tiles = ceil_div(m, kWgmmaBlockRows) * ceil_div(n, b);
    const int64_t cost = ceil_div(tiles, multiprocessors) * (b + kWgmmaTileOverhead);
    if (best_cost < 0 || cost < best_cost) {
      best = b;
      best_cost = cost;
    }
  }
  return best;
}

// The k split of the wgmma kernel (wgmma_kernel.cuh). A problem of few tiles runs few CTAs, each
// reducing all of k (n = 64, m = 1280, k = 8192: 10 CTAs on 132 SMs). The split cuts k's groups
// of 512 into runs of split_groups = ceil(groups / splits) (every run but the last that long, none
// empty), one CTA per (tile, run); each CTA computes its groups' sums exactly as the unsplit
// kernel does and writes them as fp32 to a workspace (the run of group 0 writes the prefix of the
// fold, G0 + ... , as one value; the others one value per group), and a fold kernel adds them in
// ascending group order, then the bias, and rounds once. The expression is the canonical one for
// every split count, so the count may depend on n (and the device) without moving a bit.
//
// The rule (wgmma_auto_splits): the most splits that keep every (tile, run) unit in one wave
// (tiles * splits <= SMs: a second wave would double the critical path), down to runs of
// wgmma_min_split_groups, then the fewest splits that keep the runs equal; fewer while the
// workspace would exceed the budget (kWgmmaSplitWorkspaceBytes, or a caller's smaller workspace);
// no split when tiles * 2 > SMs. 64-wide tiles split down to runs of one group, which measured
// faster than runs of two wherever their units fit one wave (H200, PDL, forced .k on one build):
// 64 x 576 x 7168 7.2 us against 8.7 (14 runs against 7), 128 x 256 x 7168 6.8 against 8.2, 512
// x 128 x 2880 6.3 against 7.9, 512 x 128 x 4096 6.5 against 8.3, 64 x 1536 x 2048 6.5 against
// 7.8; where the units would need a second wave they lose (128 x 576 x 7168: 11.8 at 14 runs,
// 8.9 at 7), which the one-wave bound excludes. Wider tiles keep runs of two groups or more: a
// run of one group is their ring's depth of k blocks, and with runs of one the widths chosen by
// wgmma_sliced_block_n ran slower (256 x 384 x 7168 on 96-wide tiles in 14 runs 12.5 us against
// 9.0 on 64-wide ones in 7, 128 x 576 x 7168 on 128-wide tiles in 14 runs 9.7 against 8.8,
// 256 x 1536 x 2048 11.0 against 10.3).
inline int64_t wgmma_min_split_groups(int block_n) {
  return block_n == 64 ? 1 : 2;
}
constexpr int64_t kWgmmaSplitWorkspaceBytes = int64_t{32} << 20;
constexpr int kWgmmaFoldThreads = 256;  // the fold kernel's block: one thread per consumer thread

// Bytes of the group sums of `tiles` tiles of 128 x block_n split into runs of split_groups: slot
// 0 is the prefix of the run of group 0, then one slot per group after it. -1 when they exceed
// `budget` (computed without overflow for any tiles).
inline int64_t wgmma_split_workspace_bytes(int64_t tiles, int block_n, int64_t groups,
                                           int64_t split_groups, int64_t budget) {
  const int64_t per_tile = (groups - split_groups + 1) * kWgmmaBlockRows * block_n * 4;
  if (budget < 0 || tiles > budget / per_tile) return -1;
  return tiles * per_tile;
}
// Whether `splits` cuts `groups` into equal runs of ceil(groups / splits), none left empty.
inline bool wgmma_split_exact(int64_t groups, int64_t splits) {
  return splits >= 1 && splits <= groups && ceil_div(groups, ceil_div(groups, splits)) == splits;
}
inline int wgmma_auto_splits(int64_t tiles, int64_t groups, int multiprocessors, int block_n,
                             int64_t budget) {
  for (int64_t want = std::min(multiprocessors / tiles, groups / wgmma_min_split_groups(block_n));
       want >= 2; --want) {
    const int64_t split_groups = ceil_div(groups, want);
    if (wgmma_split_workspace_bytes(tiles, block_n, groups, split_groups, budget) >= 0) {
      return static_cast<int>(ceil_div(groups, split_groups));
    }
  }
  return 1;
}

// A wgmma config for sm_90 with `block_n` in {64, 128} (and 256 for one chain) and `splits` (0:
// wgmma_auto_splits within `workspace_budget`, none for one chain; else one the caller checked
// with wgmma_split_exact), or one with an empty name when the grid, the shared memory or the
// forced split's workspace does not fit, or the form excludes the width or the split.
inline LinearConfig wgmma_config(const LinearShape& s, const LinearDevice& d, int block_n, bool pdl,
                                 int splits = 0,
                                 int64_t workspace_budget = kWgmmaSplitWorkspaceBytes) {
  LinearConfig c;
  c.path = LinearPath::wgmma;
  c.pdl = pdl;
  c.block_n = block_n;
  c.stages = wgmma_stages(block_n);
  c.threads = kWgmmaThreadsHost;
  c.m_tiles = ceil_div(s.m, kWgmmaBlockRows);
  c.tiles = c.m_tiles * ceil_div(s.n, block_n);
  c.one_chain = canonical_one_chain(s.m);
  // One chain: no k split (a split would change the expression); 256-wide tiles only there,
  // 96-wide ones only in the sliced form.
  if (c.one_chain ? splits > 1 || block_n == 96 : block_n > 128) return LinearConfig{};
  const int64_t groups = ceil_div(s.k, kGroupK);
  c.splits_forced = splits != 0;
  c.splits = splits != 0 || c.one_chain
                 ? std::max(splits, 1)
                 : wgmma_auto_splits(c.tiles, groups, d.multiprocessors, block_n, workspace_budget);
  c.split_groups = ceil_div(groups, c.splits);
  int64_t units = c.tiles;
  if (c.splits > 1) {
    c.workspace_bytes =
        wgmma_split_workspace_bytes(c.tiles, block_n, groups, c.split_groups, workspace_budget);
    if (c.workspace_bytes < 0) return LinearConfig{};
    units = c.tiles * c.splits;  // tiles <= 2^25 / 2^15 here: no overflow
    c.fold_grid_x = c.tiles * (block_n / 8);
    if (c.fold_grid_x > d.max_grid_x) return LinearConfig{};
  }
  c.grid_x = std::min<int64_t>(units, d.multiprocessors);
  c.shared_bytes = wgmma_shared_bytes_host(block_n, c.stages, c.one_chain && s.out != DType::f32);
  if (c.shared_bytes > d.shared_optin || c.grid_x > d.max_grid_x) return LinearConfig{};
  if (!tma_box_rows_fit(s, block_n, kWgmmaBlockRows)) return LinearConfig{};
  c.name = "wgmma.n" + std::to_string(block_n) + ".s" + std::to_string(c.stages) +
           (c.splits > 1 || c.splits_forced ? ".k" + std::to_string(c.splits) : "");
  return c;
}
// How a wgmma config's reason names its split: "" without one.
inline std::string wgmma_split_reason(const LinearConfig& c, const LinearDevice& d) {
  if (c.splits == 1) return "";
  return ", k split in " + std::to_string(c.splits) + " runs of " + std::to_string(c.split_groups) +
         " groups (" + std::to_string(c.tiles) + " tiles on " + std::to_string(d.multiprocessors) +
         " SMs)";
}

// The sliced form's tile width (wgmma_sliced_block_n) by an estimate of each width's time in
// microseconds on an H200 (wgmma_sliced_cost_us): the sliced tiles wait on their operand stream,
// (128 + width) rows of 32 bytes per k16 step taken in at about 42-50 bytes per cycle per SM, so
// a group of 512 k costs a CTA about 2.1, 3.0 and 3.4 us at widths 64, 96 and 128 (four, four and
// three accumulator sets; docs/perf.md); the call takes the longest CTA's units of split_groups
// groups, or all its operand bytes at the L2's rate (about 11 TB/s), whichever is longer, plus a
// k split's workspace written and read back (about 5 TB/s) and the fold kernel's launch (2 us).
// Fitted on 24 sliced shapes (n 64-4096; m 128-1536; k 2048-8192): the widths it picks ran
// within 0.2% of each shape's fastest width on average (H200), where 64 up to n = 256 and 96 above
// ran within 3% (gpt-oss's router at n = 1024: 8.8 us at 64 against 10.8 at 96; 4096 x 1536 x
// 7168: 145.6 at 128 against 150.1 at 96).
constexpr int kWgmmaSlicedWidths[] = {64, 96, 128};
inline double wgmma_sliced_cost_us(const LinearConfig& c, const LinearShape& s,
                                   const LinearDevice& d) {
  const double per_group = c.block_n == 64 ? 2.1 : c.block_n == 96 ? 3.0 : 3.4;
  const double units = static_cast<double>(c.tiles) * static_cast<double>(c.splits);
  const double waves = std::ceil(units / static_cast<double>(d.multiprocessors));
  const double per_cta = waves * static_cast<double>(c.split_groups) * per_group;
  const double groups = static_cast<double>(ceil_div(s.k, kGroupK));
  const double bytes = static_cast<double>(c.tiles) * groups * 32.0 *
                       static_cast<double>(kWgmmaBlockRows + c.block_n) * 32.0;
  double us = std::max(per_cta, bytes / 11e6);
  if (c.splits > 1) us += static_cast<double>(c.workspace_bytes) * 2.0 / 5e6 + 2.0;
  return us;
}
// The width of least estimated time among those whose config fits (ties to the narrower; 64 when
// none fits, which wgmma_config then reports).
inline int wgmma_sliced_block_n(const LinearShape& s, const LinearDevice& d,
                                int64_t workspace_budget = kWgmmaSplitWorkspaceBytes) {
  int best = kWgmmaSlicedWidths[0];
  double best_us = -1;
  for (const int width : kWgmmaSlicedWidths) {
    const LinearConfig c = wgmma_config(s, d, width, false, 0, workspace_budget);
    if (c.name.empty()) continue;
    const double us = wgmma_sliced_cost_us(c, s, d);
    if (best_us < 0 || us < best_us) {
      best = width;
      best_us = us;
    }
  }
  return best;
}

// The transposed one-chain kernel (wgmma_swap_kernel.cuh): tiles of block_w weight rows (32, 64,
// 128 or 256: the MMA's N, half per consumer warpgroup) by 64 batch rows, the stages that fit
// 192 KiB (at most 16), at most one persistent CTA per SM. Named "wgmma.t<block_w>".
constexpr int64_t kSwapBatchRows = 64;
// auto takes it for one-chain weights at kStreamMaxN < n <= kSwapMaxN where the 128-row tiles of
// the wgmma kernel would fill at most half the SMs (tiles x 2 <= SMs: 4096 x 4096 at n = 64 and
// 128, 7168 x 2048 at n = 64), the 128-row tiles where they fill more (H200, docs/perf.md).
constexpr int64_t kSwapMaxN = 256;
inline bool swap_preferred(int64_t m, int64_t n, int block_n, int multiprocessors) {
  return n <= kSwapMaxN &&
         ceil_div(m, kWgmmaBlockRows) * ceil_div(n, block_n) * 2 <= multiprocessors;
}
inline bool swap_block_built(int block_w) {
  return block_w == 32 || block_w == 64 || block_w == 128 || block_w == 256;
}
inline int swap_stages_host(int block_w) {
  return static_cast<int>(
      std::min<int64_t>(16, (192 * 1024) / ((kSwapBatchRows + block_w) * 64 * 2)));
}
inline int64_t swap_shared_bytes_host(int block_w) {
  const int stages = swap_stages_host(block_w);
  return 1024 + int64_t{stages} * (kSwapBatchRows + block_w) * 64 * 2 + 2 * int64_t{stages} * 8;
}
// The narrowest tile whose count fits one wave (tiles <= SMs: each weight row read by one CTA
// per batch block, no CTA taking two tiles), else the widest. H200: 64 x 7168 x 2048 took 16.9 us
// with 32-row tiles (224 tiles, two waves) and 10.9 with 64 (112); 64 x 4096 x 4096 15.8 with 32
// (128 tiles) and 16.7 with 64.
inline int swap_block_w(int64_t m, int64_t n, int multiprocessors) {
  for (const int b : {32, 64, 128}) {
    if (ceil_div(m, b) * ceil_div(n, kSwapBatchRows) <= multiprocessors) return b;
  }
  return 256;
}

// Consumer warpgroups of the transposed kernel: 2 (block_w / 2 weight rows each), or 1 taking
// all block_w rows (".w1"): each warpgroup's MMAs read the whole activation box from shared
// memory, so one warpgroup reads it once per k16 step instead of twice. Not built: 256 rows on
// one. Chosen: one up to 64 rows (H200, deterministic linear-dense, n = 64: 64 x 4096 x 4096 on 32
// rows 13.3 us against 15.3, 64 x 4096 x 14336 40.0 against 47.2, 64 rows 4-11% faster).
inline bool swap_variant_built(int block_w, int consumers) {
  return swap_block_built(block_w) && (consumers == 2 || (consumers == 1 && block_w <= 128));
}
inline int swap_consumers(int block_w) {
  return block_w <= 64 ? 1 : 2;
}

// A transposed config with block_w (0: swap_block_w) and `consumers` warpgroups (0:
// swap_consumers), or one with an empty name when the variant is not built or the grid does not
// fit.
inline LinearConfig swap_config(const LinearShape& s, const LinearDevice& d, bool pdl,
                                int block_w = 0, int consumers = 0) {
  if (block_w == 0) block_w = swap_block_w(s.m, s.n, d.multiprocessors);
  if (consumers == 0) consumers = swap_consumers(block_w);
  if (!swap_variant_built(block_w, consumers)) return LinearConfig{};
  LinearConfig c;
  c.path = LinearPath::wgmma_swap;
  c.pdl = pdl;
  c.one_chain = true;
  c.block_n = block_w;
  c.consumers = consumers;
  c.stages = swap_stages_host(block_w);
  c.threads = 128 * (1 + consumers);
  c.m_tiles = ceil_div(s.m, block_w);
  c.tiles = c.m_tiles * ceil_div(s.n, kSwapBatchRows);
  c.grid_x = std::min<int64_t>(c.tiles, d.multiprocessors);
  c.shared_bytes = swap_shared_bytes_host(block_w);
  if (c.shared_bytes > d.shared_optin || c.grid_x > d.max_grid_x) return LinearConfig{};
  if (!tma_box_rows_fit(s, kSwapBatchRows, block_w)) return LinearConfig{};
  c.name = "wgmma.t" + std::to_string(block_w) + (consumers == 1 ? ".w1" : "");
  return c;
}
// A forced transposed name: "wgmma.t<block_w>" (two consumer warpgroups), "wgmma.t<block_w>.w1"
// (one), or "wgmma.t" (block and warpgroups chosen: block_w and consumers 0).
inline bool parse_swap_name(const std::string& name, int& block_w, int& consumers) {
  if (name.rfind("wgmma.t", 0) != 0) return false;
  std::string digits = name.substr(7);
  block_w = 0;
  consumers = 0;
  if (digits.empty()) return true;
  consumers = 2;
  if (digits.size() > 3 && digits.compare(digits.size() - 3, 3, ".w1") == 0) {
    consumers = 1;
    digits.resize(digits.size() - 3);
  }
  if (digits.empty() || digits.size() > 3 || digits[0] == '0') return false;
  for (const char ch : digits) {
    if (ch < '0' || ch > '9') return false;
  }
  block_w = std::stoi(digits);
  return true;
}

}  // namespace gemmkit::cuda::linear_family
