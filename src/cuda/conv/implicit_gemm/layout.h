// Tile constants, the launch plan (ImplicitGemmPlan) and the index helpers of the implicit-GEMM
// kernel (implicit_gemm.cuh). The plan is filled by implicit_gemm_plan (plan.h) and held in
// ConvConfig from selection to the launch. The GEMMKIT_CONV_HD helpers are the ones the kernel
// calls, so the host tests that emulate its operand gathers exercise the device's index
// arithmetic. Pure and header-only.
#pragma once

#include <cstdint>
#include <string>

#include "cuda/conv/common/geometry.h"

namespace gemmkit::cuda::conv_impl {

// CTA tile (TILE_M, TILE_N, TILE_K) = (128, 128, 64): 8 warps as 2 (M) x 4 (N) warp tiles of
// 64 x 32. Why: 64 fp32 accumulators per thread keep the kernel within 128 registers, so two
// CTAs (16 warps) share an SM and hide each other's barriers; 128 x 128 fits every o of the VAE
// suites (128 / 256 / 512) without an N tail; TILE_K = 64 makes a tile row 128 bytes, the
// width of the XOR swizzle that keeps both cp.async stores and ldmatrix reads conflict-free.
constexpr int kImplicitTileM = 128;
constexpr int kImplicitTileN = 128;
constexpr int kImplicitTileK = 64;
constexpr int kImplicitVector = 8;  // channels per 16-byte vector (16-bit inputs)
constexpr int kImplicitVectorsPerStage = kImplicitTileK / kImplicitVector;
constexpr int kImplicitThreads = 256;
constexpr int kImplicitWarpsM = 2;
constexpr int kImplicitWarpsN = 4;
constexpr int kImplicitWarpM = kImplicitTileM / kImplicitWarpsM;  // 64
constexpr int kImplicitWarpN = kImplicitTileN / kImplicitWarpsN;  // 32
// Three stages of 32 KiB: 96 KiB + the per-row table, two CTAs in an SM's 227 KiB.
constexpr int kImplicitStages = 3;
constexpr int64_t kImplicitTileABytes = int64_t{kImplicitTileM} * kImplicitTileK * 2;
constexpr int64_t kImplicitTileBBytes = int64_t{kImplicitTileN} * kImplicitTileK * 2;
constexpr int64_t kImplicitStageBytes = kImplicitTileABytes + kImplicitTileBBytes;
// Per output row of the tile: int4 {q0, q1, q2, -} (16 B), x offset (8 B), out offset (8 B).
constexpr int64_t kImplicitRowTableBytes = int64_t{kImplicitTileM} * (16 + 8 + 8);
constexpr int64_t kImplicitSmemBytes =
    kImplicitStages * kImplicitStageBytes + kImplicitRowTableBytes;
// Raster: tiles are visited in bands of this many M tiles, M fastest inside a band, so the CTAs
// resident at one time share a few M tiles (x rows) and every N tile (weight columns) in L2.
constexpr int64_t kImplicitRasterBand = 8;
// Every spatial coordinate the kernel forms (input, dilated input, output * stride, kernel
// extent, padding) must stay below this in magnitude: the gather does its index arithmetic in
// 32 bits. Larger problems go to other paths.
constexpr int64_t kImplicitMaxCoord = int64_t{1} << 29;

// The first spatial extent of p in dim d (the dilated input, output * stride, the dilated
// kernel, |pad_lo|) at or above kImplicitMaxCoord, as "E in dim D", or "" when all are below it.
// Both implicit-GEMM kernels (the gather here, TMA box coordinates in the Hopper kernel) keep their
// coordinates in 32 bits under that bound.
inline std::string implicit_extent_past_max_coord(const detail::ConvProblem& p, int d) {
  const int64_t extent[] = {p.in_size[d] * p.input_dilation[d], p.out_size[d] * p.stride[d],
                            p.kernel_size[d] * p.kernel_dilation[d],
                            p.padding_lo[d] < 0 ? -p.padding_lo[d] : p.padding_lo[d]};
  for (const int64_t e : extent) {
    if (e >= kImplicitMaxCoord) return std::to_string(e) + " in dim " + std::to_string(d);
  }
  return "";
}

// q0 of a row past the last output position: every tap of it fails the bounds check.
constexpr int32_t kImplicitInvalidRow = -(int32_t{1} << 30);

// Everything the kernel needs, filled by implicit_gemm_plan. Plain data (kernel argument).
struct ImplicitGemmPlan {
  // Geometry, normalized to 3 spatial dims (leading dims of size 1).
  int32_t in[kDims] = {1, 1, 1};
  int32_t kernel[kDims] = {1, 1, 1};
  int32_t out[kDims] = {1, 1, 1};
  int32_t stride[kDims] = {1, 1, 1};
  int32_t pad_lo[kDims] = {0, 0, 0};
  int32_t kdil[kDims] = {1, 1, 1};
  int32_t idil[kDims] = {1, 1, 1};
  int64_t x_stride[kDims + 2] = {};  // elements; [4] (channels) is 1
  int64_t w_stride[kDims + 2] = {};  // [4] is 1
  int64_t out_stride[kDims + 2] = {};
  int64_t bias_stride = 0;
  bool flip = false;
  bool has_bias = false;
  bool input_dilation = false;  // some idil > 1: the gather's slow (divisibility) form
  bool out_pairs = false;       // out's channel pairs are aligned vectors (channel stride 1)

  // GEMM sizes.
  int64_t positions = 0;  // M
  int64_t groups = 1;
  int32_t cpg = 0, opg = 0;
  int32_t cpv = 0;  // channel vectors per tap: cpg / 8
  int32_t taps = 1;
  int64_t k_vectors = 0;  // taps * cpv
  int32_t k_blocks = 0;   // ceil(k_vectors / 8): pipeline stages of the reduction

  // Tiles and launch.
  int64_t m_tiles = 0, n_tiles = 0, tiles = 0;  // tiles = groups * m_tiles * n_tiles
  int64_t band = kImplicitRasterBand;
  LaunchGrid grid;  // gridDim.x = min(tiles, grid limit); CTAs loop over tiles
  int block = kImplicitThreads;
  int64_t smem_bytes = kImplicitSmemBytes;
  int split_k = 1;  // never split: deterministic without atomics or a second pass
  // Share of the issued MMA work that is useful: tile_efficiency counts the M, N, K tails and
  // input-dilation holes, efficiency also the last wave on `multiprocessors` x 2 CTAs. Guides
  // for the dispatcher, not launch parameters.
  double tile_efficiency = 0.0;
  double efficiency = 0.0;
};

// ---- Index helpers shared by the kernel and the host tests ---------------------------------

// The (group, M tile, N tile) of linear tile index `tile` < t.tiles: groups outermost, then
// bands of t.band M tiles; inside a band M fastest, then N.
struct ImplicitTile {
  int64_t group = 0, m_tile = 0, n_tile = 0;
};

GEMMKIT_CONV_HD ImplicitTile implicit_gemm_tile(const ImplicitGemmPlan& t, int64_t tile) {
  ImplicitTile r;
  const int64_t per_group = t.m_tiles * t.n_tiles;
  r.group = div_nonneg(tile, per_group);
  const int64_t rest = tile - r.group * per_group;
  const int64_t band_tiles = t.band * t.n_tiles;
  const int64_t band = div_nonneg(rest, band_tiles);
  const int64_t in_band = rest - band * band_tiles;
  const int64_t first = band * t.band;
  const int64_t height = t.m_tiles - first < t.band ? t.m_tiles - first : t.band;
  r.n_tile = div_nonneg(in_band, height);
  r.m_tile = first + (in_band - r.n_tile * height);
  return r;
}

// Output row m of the GEMM: its first dilated-input coordinate per dim (q = out * stride -
// pad_lo; q0 = kImplicitInvalidRow past the last position), the x offset of that coordinate
// (batch part only with input dilation, where the input index is q / idil per tap) and out's
// offset of the position (channel 0).
struct ImplicitRow {
  int32_t q[kDims] = {0, 0, 0};
  int64_t x_base = 0;
  int64_t out_base = 0;
};

GEMMKIT_CONV_HD ImplicitRow implicit_row(const ImplicitGemmPlan& t, int64_t m) {
  ImplicitRow r;
  if (m >= t.positions) {
    r.q[0] = kImplicitInvalidRow;
    return r;
  }
  int64_t rest = m;
  int64_t o[kDims];
  for (int d = kDims - 1; d >= 0; --d) {
    const int64_t q = div_nonneg(rest, t.out[d]);
    o[d] = rest - q * t.out[d];
    rest = q;
  }
  r.x_base = rest * t.x_stride[0];
  r.out_base = rest * t.out_stride[0];
  for (int d = 0; d < kDims; ++d) {
    const int32_t q = static_cast<int32_t>(o[d]) * t.stride[d] - t.pad_lo[d];
    r.q[d] = q;
    r.out_base += o[d] * t.out_stride[1 + d];
    if (!t.input_dilation) r.x_base += int64_t{q} * t.x_stride[1 + d];
  }
  return r;
}

// Where one thread's column of 16-byte vectors stands in K: window tap (t0, t1, t2) and channel
// vector cv of the tap. Past the end of K when t[0] >= kernel[0].
struct ImplicitKCursor {
  int32_t t[kDims] = {0, 0, 0};
  int32_t cv = 0;
};

// The cursor at K vector kv.
GEMMKIT_CONV_HD ImplicitKCursor implicit_k_start(const ImplicitGemmPlan& p, int32_t kv) {
  ImplicitKCursor c;
  c.cv = kv % p.cpv;
  int32_t tap = kv / p.cpv;
  c.t[2] = tap % p.kernel[2];
  tap /= p.kernel[2];
  c.t[1] = tap % p.kernel[1];
  c.t[0] = tap / p.kernel[1];
  return c;
}

// Moves the cursor one stage (kImplicitVectorsPerStage vectors) on; the loop runs once per tap
// crossed (at most once when c/groups >= 64).
GEMMKIT_CONV_HD void implicit_k_advance(const ImplicitGemmPlan& p, ImplicitKCursor& c) {
  c.cv += kImplicitVectorsPerStage;
  while (c.cv >= p.cpv) {
    c.cv -= p.cpv;
    if (++c.t[2] == p.kernel[2]) {
      c.t[2] = 0;
      if (++c.t[1] == p.kernel[1]) {
        c.t[1] = 0;
        ++c.t[0];
      }
    }
  }
}

// The tap part of a stage's gather, shared by the rows: dilated-input steps dq (tap * kdil),
// the x offset of the tap (no input dilation) and the weight offset (from the group's output
// channel 0 row, channel vector included).
struct ImplicitTap {
  int32_t dq[kDims] = {0, 0, 0};
  int64_t x_offset = 0;
  int64_t w_offset = 0;
  bool valid = false;  // inside K
};

GEMMKIT_CONV_HD ImplicitTap implicit_tap(const ImplicitGemmPlan& p, const ImplicitKCursor& c) {
  ImplicitTap k;
  k.valid = c.t[0] < p.kernel[0];
  const int32_t channel = c.cv * kImplicitVector;
  k.x_offset = channel;
  k.w_offset = channel;
  for (int d = 0; d < kDims; ++d) {
    k.dq[d] = c.t[d] * p.kdil[d];
    if (!p.input_dilation) k.x_offset += int64_t{k.dq[d]} * p.x_stride[1 + d];
    const int32_t u = p.flip ? p.kernel[d] - 1 - c.t[d] : c.t[d];
    k.w_offset += int64_t{u} * p.w_stride[1 + d];
  }
  return k;
}

// The A vector of row (q, x_base) at tap k: true and its x offset (from x + group * cpg) when it
// reads the input, false for padding, cropped input, dilation holes, rows past M and K past
// the end. kInputDilation must equal p.input_dilation.
template <bool kInputDilation>
GEMMKIT_CONV_HD bool implicit_a_offset(const ImplicitGemmPlan& p, const ImplicitTap& k, int32_t q0,
                                       int32_t q1, int32_t q2, int64_t x_base, int64_t& offset) {
  const int32_t q[kDims] = {q0 + k.dq[0], q1 + k.dq[1], q2 + k.dq[2]};
  bool ok = k.valid;
  if constexpr (!kInputDilation) {
    for (int d = 0; d < kDims; ++d) {
      ok = ok && static_cast<uint32_t>(q[d]) < static_cast<uint32_t>(p.in[d]);
    }
    offset = x_base + k.x_offset;
  } else {
    int64_t off = x_base + k.x_offset;
    for (int d = 0; d < kDims; ++d) {
      const uint32_t qd = static_cast<uint32_t>(q[d] < 0 ? 0 : q[d]);
      const uint32_t i = qd / static_cast<uint32_t>(p.idil[d]);
      ok = ok && q[d] >= 0 && i * static_cast<uint32_t>(p.idil[d]) == qd &&
           i < static_cast<uint32_t>(p.in[d]);
      off += int64_t{i} * p.x_stride[1 + d];
    }
    offset = off;
  }
  return ok;
}

}  // namespace gemmkit::cuda::conv_impl
