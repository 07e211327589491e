// Dispatch of the CUDA linear family: a pure function of the problem and the device, with no
// CUDA header, unit-tested on CPU-only machines (tests/test_linear_dispatch.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>

#include "api/validate.h"
#include "cuda/linear/linear_contract.h"
#include "cuda/linear/linear_types.h"
#include "cuda/linear/ring_config.h"
#include "cuda/linear/ring_schedule.h"
#include "cuda/linear/stream_config.h"
#include "cuda/linear/wgmma_config.h"
#include "gemmkit/gemmkit.h"

namespace gemmkit::cuda::linear_family {

// Largest batch the tensor-core family serves (its batch-invariance contract holds for n up to
// family_max_n); larger batches go to cuBLASLt. Crossovers measured on the H200: docs/perf.md.
constexpr int64_t kFamilyMaxN = 256;
// Weights of this many elements (32 MiB of bf16) and more are bandwidth-bound at every n, and
// cuBLASLt streams them faster than the ring's 16-row tiles (H200, n = 1, same run: 4096 x 4096
// 12.1 against 9.8 us, 8192 x 28672 140 against 114, 16384 x 53248 609 against 406), while
// 2048 x 7168 (2^23.8) is even (9.95 against 9.88) and 3072 x 3072 faster (6.4 against 7.6).
constexpr int64_t kFamilyMaxWeight = int64_t{1} << 24;
constexpr int kReferenceThreads = 128;

// Largest n the family serves for a weight of (m, k): above it cuBLASLt was faster on the H200
// (docs/perf.md; same binary, PDL). Router-sized weights (m <= 128, k <= 2880) up to 256
// (128 x 128 x 2880: 3.86 us against cuBLASLt's 6.7; 256 x 128 x 2880: 6.03 against 6.25); up to
// 64 for m <= 128, k <= 7168 (64 x 128 x 7168: 5.14 against 6.18; 4.34 since single-slice
// batches) and for m <= 256, k <= 4096 (64 x 256 x 4096: 4.50 against 5.80 with PDL, 5.47 against
// 5.80 without), 32 for m <= 256, k <= 7168 (32 x 256 x 7168: 4.34 against 5.89; at 64 x 256 x
// 7168 cuBLASLt still wins, 6.02 against the ring's best 6.13, one CTA per tile); up to
// 16 below m = 1024 or up to a 1024 x 1024 weight (seed-mid); every n <= 8 below
// kFamilyMaxWeight, none from it on.
inline int64_t family_max_n(int64_t m, int64_t k) {
  if (m * k >= kFamilyMaxWeight) return 0;  // m * k < 2^62: w exists
  if (m <= 128 && k <= 2880) return kFamilyMaxN;
  if (m <= 128 && k <= 7168) return 64;
  if (m <= 256 && k <= 4096) return 64;
  if (m <= 256 && k <= 7168) return 32;
  if (m < 1024 || m * k <= 1024 * 1024) return 16;
  return 8;
}
// GEMMKIT_LINEAR_PDL: "" or "1" is on, "0" off.
inline bool parse_pdl(const std::string& text) {
  return detail::parse_switch("linear", "GEMMKIT_LINEAR_PDL", text);
}
// GEMMKIT_LINEAR_MAX_CLUSTER: "" is 16; else a decimal integer from 1 to 16.
inline int parse_max_cluster(const std::string& text) {
  if (text.empty()) return 16;
  const std::optional<int64_t> value = detail::parse_whole_number(text, 2);
  if (!value || *value < 1 || *value > 16) {
    detail::fail("linear", "GEMMKIT_LINEAR_MAX_CLUSTER",
                 "'" + text + "': must be an integer from 1 to 16");
  }
  return static_cast<int>(*value);
}
inline LinearConfig reference_config(const LinearShape& s, const LinearDevice& d,
                                     std::string reason) {
  LinearConfig c;
  c.path = LinearPath::reference;
  c.name = "reference";
  c.reason = std::move(reason);
  c.threads = kReferenceThreads;
  c.m_tiles = ceil_div(s.m, 16);
  c.tiles = c.m_tiles * ceil_div(s.n, 8);  // < 2^63: m, n < 2^62 after validation
  // One warp per tile, grid-stride beyond a few waves: the grid never exceeds its limits.
  const int64_t warps = c.threads / 32;
  c.grid_x = std::max<int64_t>(
      1,
      std::min(ceil_div(c.tiles, warps), std::min<int64_t>(d.max_grid_x, d.multiprocessors * 64)));
  return c;
}

inline LinearConfig simt_config(const LinearShape& s, const LinearDevice& d, std::string reason) {
  LinearConfig c;
  c.path = LinearPath::simt_f32;
  c.name = "simt_f32";
  c.reason = std::move(reason);
  c.threads = 256;
  c.tiles = s.n * s.m;
  c.grid_x =
      std::max<int64_t>(1, std::min(ceil_div(c.tiles, c.threads),
                                    std::min<int64_t>(d.max_grid_x, d.multiprocessors * 32)));
  return c;
}

inline LinearConfig cublaslt_config(std::string reason) {
  LinearConfig c;
  c.path = LinearPath::cublaslt;
  c.name = "cublaslt";
  c.reason = std::move(reason);
  return c;
}

// Why a call TMA cannot load (k % 8 != 0, a k stride other than 1, rows not 16-byte aligned) takes
// the reference kernel, and why a forced TMA kernel is refused for it.
constexpr const char* kNotTmaLoadableReason =
    "layout not loadable by TMA (k % 8, unit stride, 16-byte alignment)";
constexpr const char* kNotTmaLoadableForced =
    "x or w cannot be loaded by TMA (k % 8 == 0, unit k stride and 16-byte aligned rows are "
    "required)";

// The ring's reach in batch-invariant mode. Its bound (the family's, and up to n = 16 for weights
// of 2^24 elements and more: streaming weights, the ring against the wgmma kernel's 64-row tiles,
// H200: 32 x 8192 x 8192 ring8 132 us, wgmma.n64 60 us; docs/perf.md), and beyond it the problems
// whose 16 x 8 tiles are few enough: at most kBatchInvariantRingMaxTiles, and a k of at most
// kBatchInvariantRingTileK per tile and SM (tiles * k <= SMs * 7168). There the ring's many small
// tiles beat the wgmma kernel, whose few 128-row tiles each stream at least one group of k at
// the intake of one SM (6-7 us at any n). H200, PDL, ring (auto) against the wgmma kernel (k
// split in runs of one group where it pays): 128 x 128 x 7168 (128 tiles) 6.2 against 6.8 us,
// 32 x 1536 x 2048 (384) 5.6 against 6.5, 64 x 1024 x 1024 (512) 4.3 against 6.3, 512 x 32 x 2880
// 3.1 against 7.6; beyond the bound 32 x 576 x 7168 (144 tiles) 9.2 against 7.2, 128 x 1024 x
// 1024 (1024 tiles) 7.6 against 6.3, 512 x 128 x 2880 7.9 against 6.3.
constexpr int64_t kBatchInvariantRingMaxN = 16;
constexpr int64_t kBatchInvariantRingMaxTiles = 512;
constexpr int64_t kBatchInvariantRingTileK = 7168;
inline int64_t batch_invariant_ring_max_n(int64_t m, int64_t k) {
  return std::max(family_max_n(m, k), kBatchInvariantRingMaxN);
}
inline bool batch_invariant_ring_serves(int64_t n, int64_t m, int64_t k, int multiprocessors) {
  if (n <= batch_invariant_ring_max_n(m, k)) return true;
  const int64_t m_tiles = ceil_div(m, 16), n_tiles = ceil_div(n, 8);
  if (m_tiles > kBatchInvariantRingMaxTiles || n_tiles > kBatchInvariantRingMaxTiles) return false;
  const int64_t tiles = m_tiles * n_tiles;  // <= 2^18
  return tiles <= kBatchInvariantRingMaxTiles &&
         k <= int64_t{multiprocessors} * kBatchInvariantRingTileK / tiles;
}

// auto in batch-invariant mode (the default) for bf16 / f16 on sm_90, sliced weights
// (one_chain_config serves the others either way): the ring within its reach (bf16), the wgmma
// kernel beyond it, the reference kernel for layouts TMA cannot load and for f16 batches within
// the ring's bound.
inline LinearConfig batch_invariant_config(const LinearShape& s, const LinearDevice& d, bool pdl) {
  const std::string mode = "batch-invariant mode: the family at every n; ";
  if (!s.tma_compatible) {
    return reference_config(s, d, mode + kNotTmaLoadableReason);
  }
  const int64_t ring_max_n = batch_invariant_ring_max_n(s.m, s.k);
  if (s.in == DType::f16 && s.n <= ring_max_n) {
    return reference_config(s, d,
                            mode + "f16 operands at n <= " + std::to_string(ring_max_n) +
                                ": the family's reference kernel");
  }
  const bool beyond_bound = s.n > ring_max_n;
  const std::string reach =
      " the ring's reach (at most " + std::to_string(kBatchInvariantRingMaxTiles) +
      " tiles of 16 x 8, tiles x k <= SMs x " + std::to_string(kBatchInvariantRingTileK) + ")";
  const std::string beyond = "n = " + std::to_string(s.n) + " > " + std::to_string(ring_max_n);
  if (s.in == DType::bf16 && batch_invariant_ring_serves(s.n, s.m, s.k, d.multiprocessors)) {
    LinearConfig c = ring_config(s, d, 0, pdl);
    if (!c.name.empty()) {
      c.reason =
          mode +
          (beyond_bound ? beyond + " within" + reach : "n <= " + std::to_string(ring_max_n)) +
          ": ring sized to " + std::to_string(c.tiles) + " tiles x cluster " +
          std::to_string(c.cluster) + c.reason;
      return c;
    }
  }
  LinearConfig c = wgmma_config(s, d, wgmma_sliced_block_n(s, d), pdl);
  if (c.name.empty()) {
    return reference_config(s, d, mode + "no ring or wgmma configuration fits the device");
  }
  const bool ring_declined = s.in == DType::bf16 && !beyond_bound;
  c.reason = mode +
             (ring_declined ? std::string("no ring configuration fits")
                            : beyond + (s.in == DType::bf16 ? " beyond" + reach : "")) +
             ": the wgmma kernel, " + std::to_string(c.block_n) +
             "-wide tiles (least estimated time)" + wgmma_split_reason(c, d);
  return c;
}

// With batch invariance off, one-chain weights keep the family where it measured level with
// cuBLASLt on the H200 (docs/perf.md, linear-dense): the streaming kernel up to n = 8 and the
// wgmma kernel from n = 4096; between them the family is up to 1.6x slower (one chain allows no
// k split), so cuBLASLt.
constexpr int64_t kNonInvariantStreamMaxN = 8;
constexpr int64_t kNonInvariantWgmmaMinN = 4096;

// auto for bf16 / f16 on sm_90 where the canonical reduction is one chain (m >= kOneChainMinRows):
// the streaming kernel up to kStreamMaxN batch rows, the transposed wgmma kernel up to kSwapMaxN,
// the wgmma kernel's one-chain form above, the reference kernel for layouts TMA cannot load; with
// batch invariance off, cuBLASLt for the batches between kNonInvariantStreamMaxN and
// kNonInvariantWgmmaMinN.
inline LinearConfig one_chain_config(const LinearShape& s, const LinearDevice& d, bool pdl) {
  const std::string form = "one-chain form (m = " + std::to_string(s.m) +
                           " >= " + std::to_string(kOneChainMinRows) +
                           "): batch-invariant at every n; ";
  if (!s.batch_invariant && s.n > kNonInvariantStreamMaxN && s.n < kNonInvariantWgmmaMinN) {
    return cublaslt_config("n = " + std::to_string(s.n) + " between " +
                           std::to_string(kNonInvariantStreamMaxN) + " and " +
                           std::to_string(kNonInvariantWgmmaMinN) +
                           " on a one-chain weight (m = " + std::to_string(s.m) +
                           "): cuBLASLt, faster there (batch invariance off: outside the "
                           "batch-invariance contract)");
  }
  if (!s.tma_compatible) return reference_config(s, d, form + kNotTmaLoadableReason);
  if (s.n <= kStreamMaxN) {
    LinearConfig c = stream_config(s, d, pdl);
    if (!c.name.empty()) {
      c.reason = form + "n <= " + std::to_string(kStreamMaxN) + ": the streaming kernel, " +
                 std::to_string(c.tiles) + " tiles of " + std::to_string(16 * c.consumers) + " x " +
                 std::to_string(8 * c.nt) + ", " + std::to_string(c.stages) + " stages" +
                 (c.stages == kStreamLongStages ? " (k of " + std::to_string(kStreamLongSlices) +
                                                      " slices or more, tiles fit one wave)"
                                                : "");
      return c;
    }
  }
  const int block_n = wgmma_one_chain_block_n(s.m, s.n, d.multiprocessors);
  if (swap_preferred(s.m, s.n, block_n, d.multiprocessors)) {
    LinearConfig c = swap_config(s, d, pdl);
    if (!c.name.empty()) {
      c.reason =
          form +
          "the 128-row tiles would fill at most half the SMs: the transposed wgmma kernel, " +
          std::to_string(c.tiles) + " tiles of " + std::to_string(c.block_n) +
          " weight rows x 64 on " + std::to_string(c.grid_x) + " CTAs";
      return c;
    }
  }
  LinearConfig c = wgmma_config(s, d, block_n, pdl);
  if (c.name.empty()) {
    return reference_config(s, d, form + "no streaming or wgmma configuration fits the device");
  }
  c.reason = form + "the wgmma kernel, " + std::to_string(c.tiles) + " tiles of 128 x " +
             std::to_string(c.block_n) + " on " + std::to_string(c.grid_x) + " CTAs";
  return c;
}

// Why a forced kernel of one form is refused for a weight of the other.
inline std::string form_mismatch(const LinearShape& s, const char* kernel, bool needs_one_chain) {
  return std::string(kernel) + " evaluate" + (needs_one_chain ? "s" : "") + " the " +
         (needs_one_chain ? "one-chain" : "sliced") +
         " form of the canonical reduction, for weights of m " + (needs_one_chain ? ">= " : "< ") +
         std::to_string(kOneChainMinRows) + " rows (m = " + std::to_string(s.m) +
         "; docs/linear.md)";
}

// forced: "" or "auto" to choose; "reference", "ring4", "ring8", "ring16" (or with a tile:
// "ring4.t1x2"), "wgmma[...]", "wgmma.t[...]", "stream[...]", "simt_f32", "cublaslt" to force
// (Error when the forced kernel cannot serve the problem, or evaluates the other form of the
// canonical reduction than the weight's).
inline LinearConfig select_linear_config(const LinearShape& s, const LinearDevice& d,
                                         const std::string& forced, bool pdl) {
  const bool hopper = d.sm_major == 9 && d.sm_minor == 0;
  const auto reject = [&](const std::string& why) -> LinearConfig {
    throw Error("gemmkit::linear: options.kernel (or GEMMKIT_LINEAR_KERNEL) '" + forced +
                "': " + why);
  };
  if (forced.empty() || forced == "auto") {
    if (!hopper) return cublaslt_config("portable path: the tensor-core family is built for sm_90");
    if (s.in == DType::f32) return simt_config(s, d, "f32 operands: the fp32 CUDA-core kernel");
    if (canonical_one_chain(s.m)) return one_chain_config(s, d, pdl);
    if (s.batch_invariant) return batch_invariant_config(s, d, pdl);
    const int64_t max_n = family_max_n(s.m, s.k);
    if (max_n == 0) {
      return cublaslt_config("weight of m x k = " + std::to_string(s.m * s.k) +
                             " >= 2^24 elements: bandwidth-bound at every n, cuBLASLt (outside "
                             "the batch-invariance contract)");
    }
    if (s.n > max_n) {
      return cublaslt_config("n = " + std::to_string(s.n) + " > " + std::to_string(max_n) +
                             " (the family's largest n for this m, k): cuBLASLt (outside the "
                             "batch-invariance contract)");
    }
    if (s.in == DType::f16)
      return reference_config(s, d, "f16 operands: the family's reference kernel");
    if (!s.tma_compatible) {
      return reference_config(s, d, kNotTmaLoadableReason);
    }
    LinearConfig c = ring_config(s, d, 0, pdl);
    if (c.name.empty()) {
      return reference_config(s, d,
                              "no ring configuration fits the device (k = " + std::to_string(s.k) +
                                  ": the fp32 partials of its " +
                                  std::to_string(ceil_div(s.k, kSliceK)) +
                                  " slices of 128 need more shared memory than a block gets)");
    }
    c.reason = "n <= " + std::to_string(max_n) + ", TMA-loadable: ring sized to " +
               std::to_string(c.tiles) + " tiles x cluster " + std::to_string(c.cluster) +
               (c.consumers == kRingMaxConsumerWarps
                    ? ", 8 consumer warps (over 4 slices per CTA, one CTA per SM)"
                    : "") +
               c.reason;
    return c;
  }
  // What every forced one-chain kernel (stream, wgmma.t) needs: sm_90, 16-bit operands, a
  // one-chain weight, TMA-loadable operands.
  const auto require_one_chain_kernel = [&](const std::string& kernel, const char* arch) {
    if (!hopper) reject(kernel + " is built for " + arch + " only");
    if (s.in == DType::f32) reject(kernel + " takes bf16 or f16 operands only");
    if (!canonical_one_chain(s.m)) reject(form_mismatch(s, kernel.c_str(), true));
    if (!s.tma_compatible) reject(kNotTmaLoadableForced);
  };
  if (forced == "cublaslt") return cublaslt_config("forced");
  if (forced == "simt_f32") {
    if (s.in != DType::f32) reject("simt_f32 serves f32 operands only");
    return simt_config(s, d, "forced");
  }
  if (forced == "reference") {
    if (s.in == DType::f32) return simt_config(s, d, "forced reference (f32 operands)");
    if (!hopper) reject("the reference kernel is built for sm_90 only");
    return reference_config(s, d, "forced");
  }
  if (forced.rfind("stream", 0) == 0) {
    int consumers = 0, nt = 0;
    StreamRing ring = StreamRing::chosen;
    if (!parse_stream_name(forced, consumers, nt, ring)) {
      reject(
          "unknown stream variant; use stream or stream.t<c>x<nt> (t1x1, t1x2, t2x1, t2x2, t2x4, "
          "t2x8, t4x4, t4x8), with .s16 for the long ring of t2x1 and t2x2");
    }
    require_one_chain_kernel("the streaming kernel", "sm_90");
    if (consumers != 0 && !stream_tile_built(consumers, nt)) {
      reject(
          "no streaming kernel is built for that tile; tiles: t1x1, t1x2, t2x1, t2x2, t2x4, t2x8, "
          "t4x4, t4x8");
    }
    if (ring == StreamRing::long_ring && !stream_long_ring_built(consumers, nt)) {
      reject("the long ring (.s" + std::to_string(kStreamLongStages) +
             ") is built for tiles t2x1 and t2x2 only");
    }
    LinearConfig c = stream_config(s, d, pdl, consumers, nt, ring);
    if (c.name.empty()) reject("does not fit this device's shared memory or grid for this shape");
    c.reason = "forced";
    return c;
  }
  if (forced.rfind("wgmma.t", 0) == 0) {
    int block_w = 0, consumers = 0;
    if (!parse_swap_name(forced, block_w, consumers) ||
        (block_w != 0 && !swap_variant_built(block_w, consumers))) {
      reject(
          "unknown transposed wgmma variant; use wgmma.t or wgmma.t32, .t64, .t128, .t256, and "
          "for one consumer warpgroup wgmma.t32.w1, .t64.w1, .t128.w1");
    }
    require_one_chain_kernel("the transposed wgmma kernel", "sm_90a");
    LinearConfig c = swap_config(s, d, pdl, block_w, consumers);
    if (c.name.empty()) reject("does not fit this device's shared memory or grid for this shape");
    c.reason = "forced";
    return c;
  }
  if (forced.rfind("wgmma", 0) == 0) {
    int block_n = 0, splits = 0;
    if (!parse_wgmma_name(forced, block_n, splits)) {
      reject(
          "unknown wgmma variant; use wgmma, wgmma.n64, wgmma.n96 (sliced weights), wgmma.n128 "
          "or wgmma.n256 (one-chain weights), optionally with a k split (wgmma.n64.k4)");
    }
    if (!hopper) reject("the wgmma kernel is built for sm_90a only");
    if (s.in == DType::f32) reject("the wgmma kernel takes bf16 or f16 operands only");
    if (!s.tma_compatible) reject(kNotTmaLoadableForced);
    const bool one_chain = canonical_one_chain(s.m);
    if (block_n == 0) {
      block_n = one_chain ? wgmma_one_chain_block_n(s.m, s.n, d.multiprocessors)
                          : wgmma_sliced_block_n(s, d);
    }
    if (block_n == 256 && !one_chain) {
      reject("wgmma.n256 (one accumulator set) serves the one-chain form only: weights of m >= " +
             std::to_string(kOneChainMinRows) + " rows (m = " + std::to_string(s.m) + ")");
    }
    if (block_n == 96 && one_chain) {
      reject("wgmma.n96 (four accumulator sets) serves the sliced form only: weights of m < " +
             std::to_string(kOneChainMinRows) + " rows (m = " + std::to_string(s.m) + ")");
    }
    const int64_t groups = ceil_div(s.k, kGroupK);
    const std::string k_split = "k split " + std::to_string(splits);
    if (one_chain && splits > 1) {
      reject(
          k_split + ": the one-chain form of the canonical reduction (m = " + std::to_string(s.m) +
          " >= " + std::to_string(kOneChainMinRows) + ") is one chain over all of k, never split");
    }
    if (splits != 0 && !wgmma_split_exact(groups, splits)) {
      reject(k_split + " does not split the " + std::to_string(groups) + " k groups of " +
             std::to_string(kGroupK) + " (k = " + std::to_string(s.k) +
             ") evenly: every run takes ceil(groups / splits) groups and none may be left empty");
    }
    LinearConfig c = wgmma_config(s, d, block_n, pdl, splits);
    if (c.name.empty() && splits > 1 &&
        wgmma_split_workspace_bytes(ceil_div(s.m, kWgmmaBlockRows) * ceil_div(s.n, block_n),
                                    block_n, groups, ceil_div(groups, splits),
                                    kWgmmaSplitWorkspaceBytes) < 0) {
      reject(k_split + ": its fp32 group sums need more than the " +
             std::to_string(kWgmmaSplitWorkspaceBytes) + " bytes of workspace the split may use");
    }
    if (c.name.empty()) reject("does not fit this device's shared memory or grid for this shape");
    c.reason = "forced" + wgmma_split_reason(c, d);
    return c;
  }
  RingName ring;
  const bool ring_name = parse_ring_name(forced, ring);
  const int stages = ring.stages;
  const RingTileShape tile = ring.tile;
  if (ring_name) {
    if (!hopper) reject("ring kernels are built for sm_90 only");
    if (canonical_one_chain(s.m)) reject(form_mismatch(s, "ring kernels", false));
    if (s.in != DType::bf16) reject("ring kernels take bf16 operands only");
    if (!s.tma_compatible) reject(kNotTmaLoadableForced);
    if (tile.mt != 0 && !ring_tile_built(tile))
      reject("no ring kernel is built for that tile; tiles: t1x1, t1x2, t1x4, t2x4");
    if (ring.producers != 0 && ring.producers != 1 && ring.producers != kRingMaxProducerWarps)
      reject("producer warps: 1 or 4 (p1, p4)");
    if (ring.batch != 0) {
      const RingTileShape t = tile.mt != 0 ? tile : RingTileShape{1, 1};
      const std::string b = "batch " + std::to_string(ring.batch);
      if (!ring_batch_allowed(ring.batch, 1, 1, stages))
        reject(b + ": a consumer waits for 1, 2 or 4 slices at a time, at most stages / 4 (" +
               std::to_string(stages / kRingConsumerWarps) + " here)");
      if ((t.mt != 1 || t.nt != 1) && ring.batch != ring_slice_batch(t.mt, t.nt, stages))
        reject(b + ": wider tiles than t1x1 are built with their default batch only (" +
               std::to_string(ring_slice_batch(t.mt, t.nt, stages)) + " here)");
    }
    if (ring.consumers != 0) {
      const RingTileShape t = tile.mt != 0 ? tile : RingTileShape{1, 1};
      const int batch = ring.batch != 0 ? ring.batch : ring_slice_batch(t.mt, t.nt, stages);
      if (!ring_consumers_allowed(ring.consumers, t.mt, t.nt, stages, batch))
        reject("consumer warps " + std::to_string(ring.consumers) +
               ": 4, or 8 (w8) for the t1x1 tile on 8 or 16 stages with batch 1");
    }
    if (ring.cluster != 0) {
      const int64_t groups = ceil_div(s.k, kGroupK);
      const std::string c = "cluster " + std::to_string(ring.cluster);
      if (ring.cluster > 1 && !d.cluster_launch) reject(c + ": this device launches no clusters");
      if (ring.cluster > std::min(kRingMaxCluster, d.max_cluster))
        reject(c + " > " + std::to_string(std::min(kRingMaxCluster, d.max_cluster)) +
               ", the largest this device co-schedules (GEMMKIT_LINEAR_MAX_CLUSTER)");
      if (ring_cluster_ranks(groups, ring.cluster) != ring.cluster)
        reject(c + " does not split the " + std::to_string(groups) + " k groups of " +
               std::to_string(kGroupK) + " (k = " + std::to_string(s.k) +
               ") evenly: every rank takes ceil(groups / cluster) and none may be left empty");
    }
    LinearConfig c =
        ring_config(s, d, stages, pdl, tile, ring.producers, ring.fold, ring.cluster, ring.batch,
                    ring.consumers != 0 ? ring.consumers : kRingConsumerWarps);
    if (c.name.empty() || c.stages != stages) {
      reject("does not fit this device's shared memory or grid for this shape");
    }
    c.reason = "forced" + c.reason;
    return c;
  }
  reject(
      "unknown kernel; use auto, reference, ring4, ring8, ring16 (optionally with a tile, "
      "consumer warps, a batch, a producer count, a fold and a cluster, e.g. ring8.t1x2, "
      "ring16.w8, ring16.b2, ring8.p4, ring8.t1x2.p4.fb.c3), wgmma (wgmma.n64, wgmma.n128, "
      "wgmma.n256, with a k split: wgmma.n64.k4), stream (stream.t2x1), "
      "simt_f32 "
      "or cublaslt");
  return LinearConfig{};
}

}  // namespace gemmkit::cuda::linear_family
