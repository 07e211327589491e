// Eligibility and plan of the implicit-GEMM convolution kernel (implicit_gemm.cuh), and its
// ConvConfig (implicit_config). Pure and header-only (no CUDA header): the host unit tests include
// it, also in builds without CUDA. The index helpers the kernel shares with the host tests are in
// layout.h.
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
#include "cuda/conv/common/config.h"
#include "cuda/conv/common/occupancy.h"
#include "cuda/conv/common/operands.h"
#include "cuda/conv/implicit_gemm/layout.h"

namespace gemmkit::cuda::conv_impl {

// ---- Eligibility ------------------------------------------------------------------------------

// "" when the implicit-GEMM kernel can serve the problem on `dev`, else why not.
inline std::string why_not_implicit_gemm(const detail::ConvProblem& p,
                                         const DeviceDescription& dev) {
  const std::string no_mma = why_not_16bit_mma(p, dev.sm_major, dev.sm_minor);
  if (!no_mma.empty()) return no_mma;
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
    if (const std::string e = implicit_extent_past_max_coord(p, d); !e.empty()) {
      return "a spatial extent (" + e + ") reaches 2^29 (the gather indexes in 32 bits)";
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

// The ConvConfig of the implicit path: the kernel's plan, and its grid, block and shared memory
// for logs and limit checks.
inline ConvConfig implicit_config(const ImplicitGemmPlan& plan, const std::string& algo,
                                  const std::string& reason) {
  ConvConfig c = config_of(ConvPath::implicit_gemm, algo, reason + ": " + to_string(plan));
  c.block = plan.block;
  c.grid = plan.grid;
  c.grid_cap = plan.grid.x;
  c.smem_bytes = plan.smem_bytes;
  c.implicit = plan;
  return c;
}

}  // namespace gemmkit::cuda::conv_impl
