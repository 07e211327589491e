// Eligibility and plan of the implicit-GEMM convolution kernel (conv_implicit_gemm.cuh).
//
// Pure and header-only (no CUDA header): the host unit tests include it, also in builds without
// CUDA. The index helpers marked GEMMKIT_CONV_HD are the ones the kernel calls, so the host tests
// that emulate the kernel's operand gathers exercise the device's index arithmetic.
//
// GEMM view, per group g (grid over groups, the weight is never copied):
//   M = output positions (n x out spatial, row-major), N = o / groups, K = taps * c / groups,
//   A[m][k] = x at position m, window tap k / cpg, channel g * cpg + k % cpg (zero on padding,
//   out-of-range input or input-dilation holes), B[k][n] = weight[g * opg + n][tap'][k % cpg]
//   with tap' the window tap flipped in every dim when flip, out[m][g * opg + n] = A.B + bias.
// K is walked in 16-byte vectors of 8 channels, taps row-major outer, channel vectors inner;
// one pipeline stage holds 8 consecutive vectors (kImplicitTileK = 64 elements), which may span
// several taps when c / groups < 64, so a small channel count wastes no MMA work.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "common/problems.h"
#include "cuda/conv/conv_config.h"
#include "cuda/conv/conv_geometry.h"
#include "cuda/conv/conv_implicit_plan.h"

namespace gemmkit::cuda::conv_impl {

// ---- Eligibility ------------------------------------------------------------------------------

// "" when the implicit-GEMM kernel can serve the problem on `dev`, else why not.
inline std::string why_not_implicit_gemm(const detail::ConvProblem& p,
                                         const DeviceDescription& dev) {
  if (dev.sm_major < 8) {
    return "needs sm_80 or newer (bf16 mma.sync), the device is sm_" +
           std::to_string(dev.sm_major) + std::to_string(dev.sm_minor);
  }
  if (p.x.dtype != DType::bf16 && p.x.dtype != DType::f16) {
    return std::string("x is ") + dtype_name(p.x.dtype) + " (the kernel takes bf16 / f16)";
  }
  if (p.weight.dtype != p.x.dtype) return "the weight's dtype differs from x's";
  if (p.out.dtype != p.x.dtype && p.out.dtype != DType::f32) {
    return "out's dtype is neither x's nor f32";
  }
  if (p.in_channels_per_group % kImplicitVector != 0) {
    return "c/groups (" + std::to_string(p.in_channels_per_group) +
           ") is not a multiple of 8 (16-byte channel vectors)";
  }
  if (channel_stride(p.x) != 1) return "x's channel stride is not 1";
  if (pointer_alignment(p.x.data) < 16) return "x is not 16-byte aligned";
  if (!outer_strides_multiple_of(p.x, kImplicitVector)) {
    return "an x stride is not a multiple of 8 elements (16-byte vectors)";
  }
  if (channel_stride(p.weight) != 1) return "the weight's channel stride is not 1";
  if (pointer_alignment(p.weight.data) < 16) return "the weight is not 16-byte aligned";
  if (!outer_strides_multiple_of(p.weight, kImplicitVector)) {
    return "a weight stride is not a multiple of 8 elements (16-byte vectors)";
  }
  for (int d = 0; d < p.spatial; ++d) {
    const int64_t extent[] = {p.in_size[d] * p.input_dilation[d], p.out_size[d] * p.stride[d],
                              p.kernel_size[d] * p.kernel_dilation[d],
                              p.padding_lo[d] < 0 ? -p.padding_lo[d] : p.padding_lo[d]};
    for (const int64_t e : extent) {
      if (e >= kImplicitMaxCoord) {
        return "a spatial extent (" + std::to_string(e) + " in dim " + std::to_string(d) +
               ") reaches 2^29 (the gather indexes in 32 bits)";
      }
    }
  }
  const int64_t k = p.kernel_positions() * p.in_channels_per_group;
  if (k >= (int64_t{1} << 31) - kImplicitTileK) {
    return "the reduction (taps * c/groups = " + std::to_string(k) + ") reaches 2^31";
  }
  if (p.out_channels_per_group >= (int64_t{1} << 31) - kImplicitTileN) {
    return "o/groups reaches 2^31";
  }
  if (dev.shared_per_block_optin < kImplicitSmemBytes) {
    return "needs " + std::to_string(kImplicitSmemBytes) + " bytes of shared memory per block, " +
           "the device allows " + std::to_string(dev.shared_per_block_optin);
  }
  return "";
}

// ---- Plan -------------------------------------------------------------------------------------

// The plan of a problem why_not_implicit_gemm accepts (its result is meaningless otherwise).
inline ImplicitGemmPlan implicit_gemm_plan(const detail::ConvProblem& p,
                                           const DeviceDescription& dev) {
  const ConvGeometry g = normalize(p);
  ImplicitGemmPlan t;
  for (int d = 0; d < kDims; ++d) {
    t.in[d] = static_cast<int32_t>(g.in[d]);
    t.kernel[d] = static_cast<int32_t>(g.kernel[d]);
    t.out[d] = static_cast<int32_t>(g.out[d]);
    t.stride[d] = static_cast<int32_t>(g.stride[d]);
    t.pad_lo[d] = static_cast<int32_t>(g.pad_lo[d]);
    t.kdil[d] = static_cast<int32_t>(g.kdil[d]);
    t.idil[d] = static_cast<int32_t>(g.idil[d]);
    t.input_dilation = t.input_dilation || g.idil[d] != 1;
  }
  for (int i = 0; i < kDims + 2; ++i) {
    t.x_stride[i] = g.x_stride[i];
    t.w_stride[i] = g.w_stride[i];
    t.out_stride[i] = g.out_stride[i];
  }
  t.x_stride[kDims + 1] = 1;
  t.w_stride[kDims + 1] = 1;
  t.bias_stride = g.bias_stride;
  t.flip = g.flip;
  t.has_bias = g.has_bias;

  t.positions = g.positions();
  t.groups = g.groups;
  t.cpg = static_cast<int32_t>(g.cpg);
  t.opg = static_cast<int32_t>(g.opg);
  t.cpv = t.cpg / kImplicitVector;
  t.taps = static_cast<int32_t>(g.kernel_positions());
  t.k_vectors = int64_t{t.taps} * t.cpv;
  t.k_blocks = static_cast<int32_t>(ceil_div(t.k_vectors, kImplicitVectorsPerStage));

  // Channel pairs of out as one aligned 2-element store: unit channel stride, every offset a
  // store can start at even (position strides, the group's first channel) and out aligned.
  const int64_t eo = elem_size(p.out.dtype);
  t.out_pairs = channel_stride(p.out) == 1 && pointer_alignment(p.out.data) >= 2 * eo &&
                (t.opg % 2 == 0 || t.groups == 1) && outer_strides_multiple_of(p.out, 2);

  t.m_tiles = ceil_div(t.positions, kImplicitTileM);
  t.n_tiles = ceil_div(t.opg, kImplicitTileN);
  t.tiles = t.groups * t.m_tiles * t.n_tiles;
  t.band = kImplicitRasterBand;
  t.grid.x =
      static_cast<uint32_t>(std::max<int64_t>(1, std::min({t.tiles, dev.max_grid_x, kMaxGridX})));
  t.block = kImplicitThreads;
  t.smem_bytes = kImplicitSmemBytes;
  t.split_k = 1;

  if (t.positions <= 0 || t.opg <= 0 || t.k_blocks <= 0) return t;  // efficiency 0
  double useful =
      static_cast<double>(t.positions) / static_cast<double>(t.m_tiles * kImplicitTileM);
  useful *= static_cast<double>(t.opg) / static_cast<double>(t.n_tiles * kImplicitTileN);
  useful *= static_cast<double>(t.k_vectors) /
            static_cast<double>(int64_t{t.k_blocks} * kImplicitVectorsPerStage);
  for (int d = 0; d < kDims; ++d) useful /= static_cast<double>(t.idil[d]);
  t.tile_efficiency = useful;
  const double slots = 2.0 * std::max(1, dev.multiprocessors);
  const double waves = std::ceil(static_cast<double>(t.tiles) / slots);
  useful *= static_cast<double>(t.tiles) / (waves * slots);
  t.efficiency = useful;
  return t;
}

inline std::string to_string(const ImplicitGemmPlan& t) {
  return "implicit_gemm tile=" + std::to_string(kImplicitTileM) + "x" +
         std::to_string(kImplicitTileN) + "x" + std::to_string(kImplicitTileK) +
         " stages=" + std::to_string(kImplicitStages) + " tiles=" + std::to_string(t.tiles) + " (" +
         std::to_string(t.groups) + " groups x " + std::to_string(t.m_tiles) + " x " +
         std::to_string(t.n_tiles) + ") grid=" + std::to_string(t.grid.x) +
         " block=" + std::to_string(t.block) + " smem=" + std::to_string(t.smem_bytes) +
         " k_blocks=" + std::to_string(t.k_blocks) + " split_k=" + std::to_string(t.split_k) +
         (t.input_dilation ? " input_dilation" : "") + (t.out_pairs ? " out_pairs" : "") +
         " efficiency=" + std::to_string(t.efficiency);
}

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
