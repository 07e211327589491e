// What the host tests of the convolution's paths share: a device like the H200 (the defaults of
// DeviceDescription), requests built as the options and the environment give them, and the
// checks every configuration and every GEMM-path chunking must pass.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "common/problems.h"
#include "conv/problem_spec.h"
#include "cuda/conv/common/occupancy.h"
#include "cuda/conv/common/request.h"
#include "cuda/conv/gemm/layout.h"
#include "cuda/conv/select.h"

namespace gemmkit::cuda::conv_impl {

using detail::ConvProblem;
using gemmkit_test::depthwise_spec;
using gemmkit_test::fake;
using gemmkit_test::make_problem;
using gemmkit_test::Spec;

// Whether `path` is one of the implicit GEMMs (the Hopper kernel where it applies and pays, else
// the mma.sync kernel).
inline bool is_implicit_path(ConvPath path) {
  return path == ConvPath::implicit_gemm || path == ConvPath::implicit_wgmma;
}

// sm_90, 132 SMs, 227 KiB of opt-in shared memory per block, 228 KiB per SM, CUDA's grid limits.
inline const DeviceDescription kH200{};

// The request that the options (algo: "" = not set; workspace_bytes, deterministic: < 0 = not
// set) and the environment's values ("" = not set) give.
inline ConvRequest resolve(const std::string& option_algo, const std::string& env_algo,
                           int64_t option_workspace, const std::string& env_workspace_mb,
                           const std::string& env_cudnn = "", const std::string& env_small_o = "",
                           const std::string& env_depthwise = "", int option_deterministic = -1,
                           const std::string& env_deterministic = "") {
  ConvRequestSettings s;
  s.option_deterministic = option_deterministic;
  s.env_deterministic = env_deterministic;
  s.option_algo = option_algo;
  s.env_algo = env_algo;
  s.option_workspace = option_workspace;
  s.env_workspace_mb = env_workspace_mb;
  s.env_cudnn = env_cudnn;
  s.env_small_o = env_small_o;
  s.env_depthwise = env_depthwise;
  return resolve_request(s);
}

// resolve_request(settings) must throw an Error naming the setting `variable`, its quoted `value`
// and the `names` it may take.
inline void expect_setting_error(const ConvRequestSettings& settings, const std::string& variable,
                                 const std::string& value, const std::string& names) {
  try {
    resolve_request(settings);
    ADD_FAILURE() << "no error for " << variable << "=" << value;
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(variable), std::string::npos) << what;
    EXPECT_NE(what.find("'" + value + "'"), std::string::npos) << what;
    EXPECT_NE(what.find(names), std::string::npos) << what;
  }
}

// A knob of the request parsed from its setting (`env`, a ConvRequestSettings string) into `field`
// (a ConvRequest choice): unset it is automatic, each of `names` gives its choice, and `bad`
// throws the error expect_setting_error checks (`variable`, the value and the `listed` names).
template <typename Choice>
void expect_choice_setting(std::string ConvRequestSettings::*env, Choice ConvRequest::*field,
                           const std::string& variable,
                           std::initializer_list<std::pair<const char*, Choice>> names,
                           const std::string& bad, const std::string& listed) {
  ConvRequestSettings settings;
  EXPECT_EQ(resolve_request(settings).*field, Choice::automatic) << variable;
  for (const auto& [name, choice] : names) {
    settings.*env = name;
    EXPECT_EQ(resolve_request(settings).*field, choice) << variable << "=" << name;
  }
  settings.*env = bad;
  expect_setting_error(settings, variable, bad, listed);
}

// The request of options.algo `algo` and options.workspace_bytes `workspace` with
// GEMMKIT_CONV_SMALL_O = `small_o` and GEMMKIT_CONV_DEPTHWISE = `depthwise`.
inline ConvRequest request_of(const std::string& algo, int64_t workspace,
                              const std::string& small_o = "", const std::string& depthwise = "") {
  return resolve(algo, "", workspace, "", "", small_o, depthwise);
}

// The configuration of `s` under algo "depthwise" and GEMMKIT_CONV_DEPTHWISE = `depthwise`, which
// must be the depthwise path's.
inline ConvConfig depthwise_config_of(const Spec& s, const std::string& depthwise) {
  const ConvConfig c = select_conv_config(
      make_problem(s), kH200, request_of("depthwise", kDefaultWorkspaceBytes, "", depthwise));
  EXPECT_EQ(c.path, ConvPath::depthwise) << to_string(c);
  return c;
}

// Every launch limit of a configuration.
inline void expect_within_limits(const ConvConfig& c) {
  SCOPED_TRACE(to_string(c));
  EXPECT_FALSE(c.reason.empty());
  EXPECT_GE(c.grid.x, 1u);
  EXPECT_LE(int64_t{c.grid.x}, kMaxGridX);
  EXPECT_LE(int64_t{c.grid.x}, c.grid_cap);
  EXPECT_EQ(c.grid.y, 1u);
  EXPECT_EQ(c.grid.z, 1u);
  EXPECT_GE(c.block, 1);
  EXPECT_LE(c.block, kMaxBlockThreads);
  // The implicit GEMMs and the small-o taps kernel opt in to more shared memory; every other
  // kernel stays within the default 48 KiB.
  const bool optin = c.path == ConvPath::implicit_gemm || c.path == ConvPath::implicit_wgmma ||
                     c.path == ConvPath::small_c || c.small_o_taps.active;
  EXPECT_LE(c.smem_bytes, optin ? kH200.shared_per_block_optin : kMaxKernelSmem);
  if (c.small_o_taps.active) {
    const SmallOTapsTiling& t = c.small_o_taps;
    EXPECT_EQ(c.path, ConvPath::small_o);
    EXPECT_FALSE(c.small_o.mma);
    EXPECT_EQ(c.block, kSmallOTapsThreads);
    EXPECT_EQ(c.smem_bytes, t.smem_bytes());
    EXPECT_LE(2 * (c.smem_bytes + kSmallOTapsSmemReserve), kH200.shared_per_multiprocessor);
    EXPECT_EQ(int64_t{c.grid.x}, t.grid);
    EXPECT_LE(t.grid, t.tiles);
    EXPECT_LE(t.grid, kH200.multiprocessors * t.blocks_per_sm);
    EXPECT_GE(t.grid * t.tiles_per_block, t.tiles);
    EXPECT_LT((t.grid - 1) * t.tiles_per_block, t.tiles);
  }
  if (c.path == ConvPath::small_c) {
    const SmallCPlan& t = c.small_c;
    EXPECT_TRUE(t.active);
    EXPECT_EQ(c.block, kSmallCThreads);
    EXPECT_EQ(c.smem_bytes, t.smem_bytes);
    EXPECT_EQ(int64_t{c.grid.x}, t.grid);
    EXPECT_LE(t.grid, t.tiles);
    EXPECT_LE(t.grid, kH200.multiprocessors * t.blocks_per_sm);
    EXPECT_EQ(t.tile_h * t.tile_w, t.tile_m());
    EXPECT_LE(t.region_pixels(), kSmallCMaxRegionPixels);
    EXPECT_LE(t.k_steps, kSmallCMaxKSteps);
  }
  if (c.path == ConvPath::depthwise) {
    EXPECT_EQ(int64_t{c.block}, c.depthwise.variant == DepthwiseVariant::mma
                                    ? int64_t{kDepthwiseMmaThreads}
                                    : c.depthwise.cvt * c.depthwise.spb());
    EXPECT_LE(c.depthwise.cvt, c.depthwise.variant == DepthwiseVariant::blocked
                                   ? kDepthwiseBlockedMaxCvt
                                   : kDepthwiseMaxCvt);
    EXPECT_LE(c.depthwise.spb(), kMaxGridYZ);
    EXPECT_LE(static_cast<double>(c.grid.x) * static_cast<double>(c.depthwise.tiles_per_block),
              static_cast<double>(c.depthwise.tiles() + c.depthwise.tiles_per_block));
    EXPECT_GE(int64_t{c.grid.x} * c.depthwise.tiles_per_block, c.depthwise.tiles());
  }
  if (c.path == ConvPath::small_o && c.small_o.mma) {
    EXPECT_EQ(c.block, kSmallOMmaThreads);
    EXPECT_EQ(c.small_o.region() % 32, 0);
    EXPECT_GE(int64_t{c.grid.x} * c.small_o.tiles_per_block, c.small_o.tiles);
    EXPECT_LT((int64_t{c.grid.x} - 1) * c.small_o.tiles_per_block, c.small_o.tiles);
  }
  if (c.path == ConvPath::gemm_1x1 || c.path == ConvPath::unfold_gemm) {
    EXPECT_GE(c.chunk_rows, 1);
    EXPECT_LE(c.chunk_rows, kMaxGemmRows);
    EXPECT_LE(c.workspace_bytes, c.workspace_budget);
    EXPECT_GE(c.scratch_offset, c.unfold_bytes);
    EXPECT_GE(c.lt_offset, c.scratch_offset + c.scratch_bytes);
    EXPECT_EQ(c.workspace_bytes, c.lt_offset + c.lt_workspace_bytes);
    EXPECT_EQ(c.scratch_offset % kWorkspaceAlign, 0);
    EXPECT_EQ(c.lt_offset % kWorkspaceAlign, 0);
  }
}

// The GEMM calls of a GEMM-path configuration: every row covered once, every operand span
// within kMaxGemmSpan, every cuBLASLt dimension within its bounds.
inline void expect_gemm_chunks_valid(const detail::ConvProblem& p, const ConvConfig& c) {
  SCOPED_TRACE(to_string(c));
  ASSERT_TRUE(c.path == ConvPath::gemm_1x1 || c.path == ConvPath::unfold_gemm);
  const int64_t positions = p.out_positions();
  EXPECT_EQ(c.scratch_bytes,
            c.bias == BiasMode::scratch ? c.chunk_rows * p.out_channels * 4 : int64_t{0});
  EXPECT_GE(c.chunks * c.chunk_rows, positions);
  EXPECT_LT((c.chunks - 1) * c.chunk_rows, positions);
  // Checking the first two and the last chunk covers every distinct (offset, rows) shape.
  std::vector<int64_t> chunks{0, c.chunks - 1};
  if (c.chunks > 1) chunks.push_back(1);
  for (const int64_t chunk : chunks) {
    const int64_t row0 = chunk * c.chunk_rows;
    const int64_t rows = std::min(c.chunk_rows, positions - row0);
    ASSERT_GE(rows, 1);
    const GemmCall g = gemm_call(p, c, row0, rows);
    EXPECT_EQ(g.m, p.out_channels_per_group);
    EXPECT_EQ(g.n, rows);
    EXPECT_EQ(g.k, p.kernel_positions() * p.in_channels_per_group);
    EXPECT_LE(g.batch, kMaxGemmBatch);
    EXPECT_GE(g.lda, g.k);
    EXPECT_GE(g.ldb, g.k);
    EXPECT_GE(g.ldd, g.m);
    EXPECT_LE(operand_span(g.k, g.m, g.lda, g.batch, g.a_batch_stride), kMaxGemmSpan);
    EXPECT_LE(operand_span(g.k, g.n, g.ldb, g.batch, g.b_batch_stride), kMaxGemmSpan);
    EXPECT_LE(operand_span(g.m, g.n, g.ldd, g.batch, g.d_batch_stride), kMaxGemmSpan);
    EXPECT_LE(operand_span(g.m, g.n, g.out_ld, g.batch, g.d_batch_stride), kMaxGemmSpan);
    EXPECT_EQ(g.d_scratch, c.bias == BiasMode::scratch);
    EXPECT_EQ(g.out_offset, row0 * g.out_ld);
    if (g.d_scratch) {
      EXPECT_EQ(g.d_offset, 0);
      EXPECT_EQ(g.ldd, p.out_channels);
    }
    if (c.path == ConvPath::unfold_gemm) {
      EXPECT_EQ(g.b_offset, 0);
      EXPECT_LE(rows * c.unfold_row_elements * elem_size(p.x.dtype), c.unfold_bytes);
    }
  }
}

}  // namespace gemmkit::cuda::conv_impl
