// GPU tests of the depthwise kernels: the window, generic and blocked variants (with the small-o
// kernels, through conv()), the staged and tensor-core variants, each launched directly under a
// GEMMKIT_CONV_DEPTHWISE setting against the generic direct kernel's bits, and the problems sized
// for compute-sanitizer (GpuConvSanitize).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gpu/conv/cases.h"
#include "gpu/gpu_test_util.h"
#ifdef GEMMKIT_WITH_CUDA
#include <cuda_runtime.h>

#include "api/validate.h"
#include "common/problems.h"
#include "cuda/conv/depthwise/launch.h"
#include "cuda/conv/select.h"
#endif

namespace gemmkit {
namespace {

using namespace conv_test;

#ifdef GEMMKIT_WITH_CUDA
// Runs case c's prepared problem through the depthwise kernel that depthwise_config picks under
// GEMMKIT_CONV_DEPTHWISE=`variant` (a direct launch, depthwise/launch.h: the library reads its
// settings once per process); returns the output, and the configuration in `config`.
// registers: 0 keeps the plan's; else the staged instantiation to launch (96 or the lean 80).
// tiles_per_block: 0 keeps the plan's; else the tensor-core variant's blocks take that many tiles.
HostTensor run_depthwise_variant(PreparedConv& prepared, const ConvCase& c, const DtypePair& d,
                                 const std::string& variant, std::string& config, int registers = 0,
                                 int64_t tiles_per_block = 0) {
  using namespace cuda::conv_impl;
  const detail::ConvProblem p =
      gemmkit_test::conv_problem(prepared.dx.view, prepared.dw.view,
                                 c.bias ? std::optional<Tensor>(prepared.db.view) : std::nullopt,
                                 prepared.dout.view, c.params);
  ConvRequestSettings settings;
  settings.option_algo = "depthwise";
  settings.env_depthwise = variant;
  ConvConfig k = select_conv_config(p, describe_device(0), resolve_request(settings));
  if (registers != 0) k.depthwise.registers = registers;
  if (tiles_per_block != 0) {
    EXPECT_EQ(k.depthwise.variant, DepthwiseVariant::mma);
    k.depthwise.tiles_per_block = tiles_per_block;
    k.grid.x = static_cast<uint32_t>(ceil_div(k.depthwise.tiles(), tiles_per_block));
  }
  config = to_string(k);
  const ConvGeometry g = normalize(p);
  ConvPointers ptr;
  ptr.x = p.x.data;
  ptr.w = p.weight.data;
  ptr.bias = c.bias ? p.bias.data : nullptr;
  ptr.out = p.out.data;
  return prepared.run([&] {
    launch_conv_depthwise(g, k.depthwise, k.vector, d.x, d.out, ptr, k.grid, k.smem_bytes, nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  });
}

#endif

// The algos of the depthwise cases of kernel_variant_cases.
const std::vector<std::string> kDepthwiseAlgos{"reference", "direct", "depthwise"};
const DtypePair kVariantPairs[] = {
    {DType::bf16, DType::bf16}, {DType::f16, DType::f32}, {DType::f32, DType::f32}};

// The cases of the depthwise window variants (narrow / wide, last-dim stride 1 and 2, several
// column and row tiles, causal padding), the blocked depthwise variant (every kernel width and
// stride it instantiates, 1- and 2-row thread tiles, 1 and 2 channels per thread, interior and edge
// tiles, 3-D, flip, negative padding) and the three small-o kernels on every dtype pair: the taps
// kernel (conv_out shapes with several and partial tiles, 1-D, o = 1, c = 40 and 160, stride 2,
// dilation, negative padding, 8 n-tiles, strided x and out views, 3-D with one tap along dim 0),
// the tensor-core region kernel where taps * o > 64 (channels padded to the 32-channel chunk,
// several n-tile groups), the CUDA-core kernel for f32 x; the depthwise results must equal the
// generic kernel's bits (run_case; without the staged variant: GpuConvDepthwiseSameBits).
// GEMMKIT_CONV_SMALL_O=mma / cuda runs the same cases on the older kernels.
std::vector<ConvCase> kernel_variant_cases() {
  std::vector<ConvCase> cases;
  const std::vector<std::string>& dw = kDepthwiseAlgos;
  const std::vector<std::string> so{"reference", "direct"};
  const auto depthwise = [&](const std::string& name, std::vector<int64_t> x, int64_t kernel,
                             int64_t stride, int64_t pad_lo, int64_t pad_hi, bool bias) {
    cases.push_back(
        depthwise_case(name, std::move(x), kernel, stride, pad_lo, pad_hi, 1, bias, dw));
  };
  // Window variants: 1-D, and 2-D kernel widths the blocked variant does not instantiate.
  depthwise("dw narrow causal conv1d k4 c24", {3, 77, 24}, 4, 1, 3, 0, true);
  depthwise("dw narrow conv1d k3 stride 2 c16", {2, 53, 16}, 3, 2, 1, 1, false);
  depthwise("dw narrow 4x4 stride 2 odd width", {2, 13, 23, 16}, 4, 2, 1, 2, true);
  depthwise("dw wide 8x8 c8", {1, 17, 19, 8}, 8, 1, 3, 4, false);
  depthwise("dw wide 6x6 stride 2 c40 wide rows", {2, 9, 45, 40}, 6, 2, 2, 3, true);
  // The same shapes as before the blocked variant existed (now blocked).
  depthwise("dw blocked 3x3 stride 2 odd width", {2, 13, 23, 16}, 3, 2, 1, 1, true);
  depthwise("dw blocked 5x5 stride 2", {1, 17, 19, 8}, 5, 2, 2, 2, false);
  depthwise("dw blocked 7x7 c40 wide rows", {2, 9, 45, 40}, 7, 1, 3, 3, true);
  depthwise("dw blocked 3x3 many rows", {1, 70, 6, 32}, 3, 1, 1, 1, false);
  // Blocked variant (2-D / 3-D, kernel width 3, 5, 7, last-dim stride 1 or 2): interior and edge
  // tiles, odd sizes, c not a multiple of a warp's 64 channels, 1-row thread tiles (these small
  // problems) and 2-row ones (the two big ones: >= 512 thread tiles per SM), bias, n > 1.
  depthwise("dw blocked 7x7 c96 (ConvNeXt, 1-row tiles)", {2, 30, 33, 96}, 7, 1, 3, 3, true);
  depthwise("dw blocked 7x7 c128 2-row tiles", {4, 96, 96, 128}, 7, 1, 3, 3, true);
  depthwise("dw blocked 3x3 c256 2-row tiles", {4, 64, 64, 256}, 3, 1, 1, 1, false);
  depthwise("dw blocked 3x3 c144 (MobileNet)", {2, 28, 29, 144}, 3, 1, 1, 1, true);
  depthwise("dw blocked 3x3 stride 2 c40 odd sizes", {2, 17, 23, 40}, 3, 2, 1, 1, true);
  depthwise("dw blocked 5x5 c24", {1, 19, 21, 24}, 5, 1, 2, 2, false);
  depthwise("dw blocked 5x5 stride 2 c48", {3, 20, 18, 48}, 5, 2, 2, 2, true);
  depthwise("dw blocked 7x7 stride 2 narrow image", {2, 9, 5, 16}, 7, 2, 3, 3, false);
  depthwise("dw blocked 3x3 odd c (1 channel per thread)", {2, 12, 13, 7}, 3, 1, 1, 1, true);
  // Partial last channel tiles under the vector weight staging (8- and 16-byte loads).
  depthwise("dw blocked 3x3 c70 (tiles of 36 channels)", {2, 15, 17, 70}, 3, 1, 1, 1, true);
  depthwise("dw blocked 7x7 c46 (tiles of 16 channels)", {1, 15, 17, 46}, 7, 1, 3, 3, false);
  {
    ConvCase k = make_case("dw blocked multiplier 2 (1 channel per thread)", {2, 13, 15, 12},
                           {24, 3, 3, 1}, dw, "cuda.conv.depthwise");
    k.params.groups = 12;
    k.params.padding_lo = {1};
    k.params.padding_hi = {1};
    k.bias = true;
    cases.push_back(k);
  }
  {
    ConvCase k = make_case("dw blocked 5x5 flip, row stride 3, asymmetric / negative padding",
                           {1, 23, 26, 32}, {32, 5, 5, 1}, dw, "cuda.conv.depthwise");
    k.params.groups = 32;
    k.params.stride = {3, 2};
    k.params.padding_lo = {3, -1};
    k.params.padding_hi = {0, 4};
    k.params.flip = true;
    cases.push_back(k);
  }
  {
    ConvCase k = make_case("dw blocked 3-D (dim-0 stride and dilation) 3x7", {2, 6, 8, 11, 16},
                           {16, 2, 3, 7, 1}, dw, "cuda.conv.depthwise");
    k.params.groups = 16;
    k.params.stride = {2, 1, 1};
    k.params.kernel_dilation = {2, 1, 1};
    k.params.padding_lo = {1, 1, 3};
    k.params.padding_hi = {1, 1, 3};
    k.bias = true;
    cases.push_back(k);
  }
  const auto small_o = [&](const std::string& name, std::vector<int64_t> x, std::vector<int64_t> w,
                           const std::string& variant) -> ConvCase& {
    ConvCase k = make_case(name, std::move(x), std::move(w), so, "cuda.conv.small_o");
    k.small_o_variant = variant;
    cases.push_back(k);
    return cases.back();
  };
  {
    ConvCase& k = small_o("small-o mma o8 c40 3x3 (72 columns: channel padding, 3 n-groups)",
                          {2, 11, 13, 40}, {8, 3, 3, 40}, "mma");
    k.params.padding_lo = {1};
    k.params.padding_hi = {1};
    k.bias = true;
  }
  {
    ConvCase& k =
        small_o("small-o mma o3 c32 5x5 (75 columns)", {1, 21, 26, 32}, {3, 5, 5, 32}, "mma");
    k.params.padding_lo = {2};
    k.params.padding_hi = {2};
  }
  {
    ConvCase& k =
        small_o("small-o taps 1d o3 c64 k5 negative pad", {2, 300, 64}, {3, 5, 64}, "taps");
    k.params.padding_lo = {4};
    k.params.padding_hi = {-1};
  }
  {
    ConvCase& k =
        small_o("small-o taps o1 c16 5x5 pad 2 bias", {1, 31, 29, 16}, {1, 5, 5, 16}, "taps");
    k.params.padding_lo = {2};
    k.params.padding_hi = {2};
    k.bias = true;
  }
  {
    ConvCase& k = small_o("small-o taps conv_out c128 o3 bias (partial 16 x 16 tiles)",
                          {1, 45, 70, 128}, {3, 3, 3, 128}, "taps");
    k.params.padding_lo = {1};
    k.params.padding_hi = {1};
    k.bias = true;
  }
  {
    ConvCase& k = small_o("small-o taps o1 c40 batch 3", {3, 19, 21, 40}, {1, 3, 3, 40}, "taps");
    k.params.padding_lo = {1};
    k.params.padding_hi = {1};
  }
  {
    ConvCase& k = small_o("small-o taps o2 c160 stride 2 dilation 2 asymmetric pad",
                          {1, 27, 33, 160}, {2, 3, 3, 160}, "taps");
    k.params.stride = {2};
    k.params.kernel_dilation = {2};
    k.params.padding_lo = {2, 1};
    k.params.padding_hi = {1, 3};
    k.bias = true;
  }
  {
    ConvCase& k =
        small_o("small-o taps o3 c16 negative padding 2x3", {2, 14, 17, 16}, {3, 2, 3, 16}, "taps");
    k.params.padding_lo = {-1, 2};
    k.params.padding_hi = {-2, -1};
  }
  {
    ConvCase& k = small_o("small-o taps o7 c48 (63 columns: 8 n-tiles) flip", {1, 12, 19, 48},
                          {7, 3, 3, 48}, "taps");
    k.params.padding_lo = {1};
    k.params.padding_hi = {1};
    k.params.flip = true;
    k.bias = true;
  }
  {
    ConvCase& k = small_o("small-o taps x with gaps, out channels strided", {2, 9, 14, 32},
                          {3, 3, 3, 32}, "taps");
    k.params.padding_lo = {1};
    k.params.padding_hi = {1};
    k.x_layout.pad = {1, 2, 1, 8};
    k.x_layout.offset = 16;
    k.out_layout.order = {3, 0, 1, 2};
    k.out_layout.pad = {0, 1, 0, 0};
    k.out_layout.offset = 3;
    k.bias = true;
  }
  {
    ConvCase& k = small_o("small-o taps 3-D one tap along dim 0, stride 2 there", {1, 5, 9, 10, 16},
                          {2, 1, 3, 3, 16}, "taps");
    k.params.stride = {2, 1, 1};
    k.params.padding_lo = {1, 1, 1};
    k.params.padding_hi = {1, 0, 2};
    k.bias = true;
  }
  return cases;
}

// The kernel_variant_cases through conv() under every algo they name (run_case).
TEST(GpuConv, DepthwiseAndSmallOKernelVariants) {
  GEMMKIT_REQUIRE_GPU();
  uint64_t seed = 9000;
  for (const DtypePair& d : kVariantPairs) {
    for (const ConvCase& c : kernel_variant_cases()) run_case(c, d, seed += 10);
  }
}

// Appends a case of the 2-D window variants (staged, tensor-core) to `cases`: stride 1, padding
// `pad` on every side, multiplier 1, run by the reference kernel and the depthwise path. Returns
// it for further edits (valid until the next append).
ConvCase& add_window_case(std::vector<ConvCase>& cases, const std::string& name,
                          std::vector<int64_t> x, int64_t kernel, int64_t pad, bool bias) {
  cases.push_back(
      depthwise_case(name, std::move(x), kernel, 1, pad, pad, 1, bias, {"reference", "depthwise"}));
  return cases.back();
}

// The 2-D window variants' layout cases (staged, tensor-core), named with `prefix`: flip with
// asymmetric and negative padding, a weight view with padded rows (not one run of w), strided x
// and out views, and 3-D with one tap along dim 0 (stride and padding there).
std::vector<ConvCase> depthwise_window_layout_cases(const std::string& prefix) {
  std::vector<ConvCase> cases;
  ConvCase& flip = add_window_case(cases, prefix + " 3x3 flip, asymmetric / negative padding",
                                   {2, 12, 19, 16}, 3, 0, true);
  flip.params.padding_lo = {2, -1};
  flip.params.padding_hi = {0, 3};
  flip.params.flip = true;
  ConvCase& padded_w =
      add_window_case(cases, prefix + " 7x7 padded weight view", {2, 20, 21, 48}, 7, 3, false);
  padded_w.w_layout.pad = {0, 0, 1, 0};
  ConvCase& strided =
      add_window_case(cases, prefix + " 5x5 strided x and out", {2, 12, 13, 32}, 5, 2, true);
  strided.x_layout.pad = {0, 1, 1, 8};
  strided.x_layout.offset = 8;
  strided.out_layout.pad = {0, 0, 1, 2};
  strided.out_layout.offset = 2;
  ConvCase three_d = make_case(prefix + " 3-D one tap along dim 0", {1, 3, 10, 12, 16},
                               {16, 1, 5, 5, 1}, {"reference", "depthwise"}, "cuda.conv.depthwise");
  three_d.params.groups = 16;
  three_d.params.stride = {2, 1, 1};
  three_d.params.padding_lo = {1, 2, 2};
  three_d.params.padding_hi = {1, 2, 2};
  three_d.bias = true;
  cases.push_back(three_d);
  return cases;
}

// Cases of the staged depthwise variant (depthwise/staged.cuh): 3x3 / 5x5 / 7x7, both warp
// layouts (16- and 32-channel tiles), partial row, column and channel tiles, bias, flip,
// asymmetric and negative padding, 3-D with one tap along dim 0 (stride and padding there),
// strided x and out views, blocks of several tiles (two windows in flight, restaging across
// channel tiles).
std::vector<ConvCase> staged_cases() {
  std::vector<ConvCase> cases;
  add_window_case(cases, "staged 7x7 c96 odd sizes", {2, 30, 33, 96}, 7, 3, true);
  add_window_case(cases, "staged 7x7 c384 14x14", {2, 14, 14, 384}, 7, 3, false);
  // ConvNeXt 8 x 56^2 x 96: 384 blocks of 7 warps, which the planner gives the lean kernel.
  add_window_case(cases, "staged 7x7 c96 8x56x56 (lean registers)", {8, 56, 56, 96}, 7, 3, true);
  add_window_case(cases, "staged 3x3 c144 (MobileNet)", {2, 28, 29, 144}, 3, 1, true);
  add_window_case(cases, "staged 5x5 c40 (partial channel tile)", {2, 19, 23, 40}, 5, 2, false);
  add_window_case(cases, "staged 3x3 c8 tall", {1, 61, 9, 8}, 3, 1, true);
  add_window_case(cases, "staged 3x3 many tiles per block", {3000, 2, 7, 48}, 3, 1, true);
  for (const ConvCase& k : depthwise_window_layout_cases("staged")) cases.push_back(k);
  return cases;
}

const std::vector<DtypePair> kWindowPairs{{DType::bf16, DType::bf16}, {DType::f16, DType::f32}};

// The staged cases through conv() (run_case) and under algo "depthwise" (the tensor-core variant
// where it applies, else the staged one); both register budgets against the generic direct
// kernel's bits: GpuConvDepthwiseSameBits. Then an Inf weight, which sends its channel tile down
// the exact path: still the direct kernel's bits (and the blocked variant's).
TEST(GpuConv, DepthwiseStagedVariant) {
  GEMMKIT_REQUIRE_GPU();
  uint64_t seed = 9300;
  for (const DtypePair& d : kWindowPairs) {
    for (const ConvCase& c : staged_cases()) {
      run_case(c, d, seed += 10);
      // The depthwise call ran the tensor-core variant (where it applies) or the staged one.
      PreparedConv prepared(c, d, seed + 5);
      CallInfo info;
      run_algo(prepared, c, "depthwise", &info);
      EXPECT_TRUE(info.reason.find("variant=staged") != std::string::npos ||
                  info.reason.find("variant=mma") != std::string::npos)
          << label(c, d, "depthwise") << ": " << info.reason;
    }
  }

#ifdef GEMMKIT_WITH_CUDA
  // An Inf weight (channel 3, first tap: padding for the corner outputs).
  for (const DtypePair& d :
       {DtypePair{DType::bf16, DType::bf16}, DtypePair{DType::f16, DType::f16}}) {
    const ConvCase c = depthwise_case("staged 7x7 Inf weight", {2, 15, 16, 32}, 7, 1, 3, 3, 1, true,
                                      {"reference", "depthwise"});
    PreparedConv prepared(c, d, seed += 10);
    const uint16_t inf = d.x == DType::bf16 ? 0x7F80 : 0x7C00;
    std::memcpy(prepared.w.storage.data() + prepared.w.storage_index({3, 0, 0, 0}) * 2, &inf, 2);
    prepared.dw.buffer.copy_from_host(prepared.w.storage.data(), prepared.w.storage.size());
    const HostTensor direct = run_algo(prepared, c, "reference");
    std::string staged_config, blocked_config;
    const HostTensor staged = run_depthwise_variant(prepared, c, d, "staged", staged_config);
    EXPECT_NE(staged_config.find("variant=staged"), std::string::npos) << staged_config;
    EXPECT_TRUE(gemmkit_test::same_bits(staged, direct))
        << "Inf weight: staged differs from direct";
    const HostTensor blocked = run_depthwise_variant(prepared, c, d, "blocked", blocked_config);
    EXPECT_NE(blocked_config.find("variant=blocked"), std::string::npos) << blocked_config;
    EXPECT_TRUE(gemmkit_test::same_bits(blocked, direct)) << "Inf weight: blocked differs";
  }
#endif
}

// The blocked depthwise kernel's weight staging (whole-tile vector loads, partial last channel
// tiles, scalar fallbacks) on problems small enough for compute-sanitizer's three tools (1-row
// thread tiles; the staging of 2-row ones is the same code, exercised by
// GpuConv.DepthwiseAndSmallOKernelVariants, and racecheck ran past 240 s on a 2-row problem):
// 16- and 32-bit, odd and multiplier channel layouts, stride 2.
TEST(GpuConvSanitize, DepthwiseBlockedWeightStaging) {
  GEMMKIT_REQUIRE_GPU();
  std::vector<ConvCase> cases;
  const auto depthwise = [&](const std::string& name, std::vector<int64_t> x, int64_t kernel,
                             int64_t stride, int64_t multiplier, bool bias) {
    cases.push_back(depthwise_case(name, std::move(x), kernel, stride, kernel / 2, kernel / 2,
                                   multiplier, bias, {"depthwise"}));
  };
  depthwise("dw staging 3x3 c70 (tiles of 36 channels)", {2, 15, 17, 70}, 3, 1, 1, true);
  depthwise("dw staging 7x7 c46 (tiles of 16 channels)", {1, 15, 17, 46}, 7, 1, 1, false);
  depthwise("dw staging 7x7 c96 1-row tiles", {2, 30, 33, 96}, 7, 1, 1, true);
  depthwise("dw staging 3x3 stride 2 c40", {2, 17, 23, 40}, 3, 2, 1, true);
  depthwise("dw staging 5x5 stride 2 c48", {3, 20, 18, 48}, 5, 2, 1, false);
  depthwise("dw staging 3x3 odd c7", {2, 12, 13, 7}, 3, 1, 1, true);
  depthwise("dw staging 3x3 multiplier 2", {2, 13, 15, 12}, 3, 1, 2, true);
  uint64_t seed = 9700;
  for (const DtypePair& d :
       {DtypePair{DType::bf16, DType::bf16}, DtypePair{DType::f32, DType::f32}})
    for (const ConvCase& c : cases) run_case(c, d, seed += 10);
}

// Cases of the tensor-core depthwise variant (depthwise/mma.cuh): 3x3 to 9x9, rectangular
// kernels, partial row, column and channel tiles (c % 16 == 8), each tile width (8, 16, 32
// columns), asymmetric and negative padding, flip, bias, strided x and out views, 3-D with one tap
// along dim 0.
std::vector<ConvCase> mma_cases() {
  std::vector<ConvCase> cases;
  add_window_case(cases, "mma 7x7 c96 8x56x56 (ConvNeXt, 32-column tiles)", {8, 56, 56, 96}, 7, 3,
                  true);
  add_window_case(cases, "mma 7x7 c384 14x14 (8-column tiles)", {2, 14, 14, 384}, 7, 3, false);
  add_window_case(cases, "mma 3x3 c144 odd sizes", {2, 29, 31, 144}, 3, 1, true);
  add_window_case(cases, "mma 5x5 c40 (partial channel tile)", {2, 19, 23, 40}, 5, 2, false);
  add_window_case(cases, "mma 9x9 c8 (one channel octet)", {1, 12, 20, 8}, 9, 4, true);
  add_window_case(cases, "mma 1x1 c24", {1, 9, 17, 24}, 1, 0, true);
  add_window_case(cases, "mma 3x3 c16 tall", {1, 61, 9, 16}, 3, 1, true);
  {
    ConvCase& k = add_window_case(cases, "mma 2x5 rectangular, flip", {1, 19, 40, 32}, 3, 0, false);
    k.w_shape = {32, 2, 5, 1};
    k.params.padding_lo = {1, 2};
    k.params.padding_hi = {0, 2};
    k.params.flip = true;
  }
  for (const ConvCase& k : depthwise_window_layout_cases("mma")) cases.push_back(k);
  return cases;
}

// The tensor-core cases through auto and the reference against the CPU backend (run_case), f16
// and bf16; forced, within the error bound of the reference with the same bits when its blocks
// take 1, 2 or 5 tiles each: GpuConvDepthwiseSameBits.
TEST(GpuConv, DepthwiseMmaVariant) {
  GEMMKIT_REQUIRE_GPU();
  uint64_t seed = 9900;
  for (const DtypePair& d :
       {DtypePair{DType::bf16, DType::bf16}, DtypePair{DType::f16, DType::f16}}) {
    // auto (the tensor-core variant on the ConvNeXt case only)
    for (const ConvCase& c : mma_cases()) run_case(c, d, seed += 10);
  }
}

#ifdef GEMMKIT_WITH_CUDA
// Depthwise variants that must give the same bits, each launched directly under a
// GEMMKIT_CONV_DEPTHWISE setting (run_depthwise_variant) or, for "reference", the generic direct
// kernel through conv(). A variant is named "<setting>[ registers=N][ tiles=N]": the staged
// instantiation of N registers per thread, or the tensor-core variant's blocks taking N tiles.
//   reference, blocked          the depthwise cases of kernel_variant_cases with the staged
//                               variant kept out: the 16-bit 2-D stride-1 shapes it takes run
//                               the blocked variant, with the direct kernel's bits;
//   reference, staged registers=96 / 80   both register budgets of the staged plan;
//   mma, mma tiles=2 / 5       the forced tensor-core variant (within the error bound of the
//                               reference) on blocks of several tiles.
class GpuConvDepthwiseSameBits : public ::testing::TestWithParam<SameBitsCase> {};

// Runs variant `name` of case c; `config` receives its configuration ("" for the reference).
HostTensor run_named_variant(PreparedConv& prepared, const ConvCase& c, const DtypePair& d,
                             const std::string& name, std::string& config) {
  if (name == "reference") {
    config.clear();
    return run_algo(prepared, c, "reference");
  }
  std::istringstream words(name);
  std::string setting, word;
  words >> setting;
  int registers = 0;
  int64_t tiles = 0;
  while (words >> word) {
    if (word.rfind("registers=", 0) == 0) registers = std::stoi(word.substr(10));
    if (word.rfind("tiles=", 0) == 0) tiles = std::stoll(word.substr(6));
  }
  const HostTensor out = run_depthwise_variant(prepared, c, d, setting, config, registers, tiles);
  if (setting == "blocked") {
    EXPECT_EQ(config.find("variant=staged"), std::string::npos) << config;
  } else {
    EXPECT_NE(config.find("variant=" + setting), std::string::npos) << config;
  }
  if (registers != 0) {
    EXPECT_NE(config.find("registers=" + std::to_string(registers)), std::string::npos) << config;
  }
  return out;
}

TEST_P(GpuConvDepthwiseSameBits, Variants) {
  GEMMKIT_REQUIRE_GPU();
  const SameBitsCase& p = GetParam();
  const std::string what = label(p.conv, p.dtypes, "depthwise " + p.first);
  SCOPED_TRACE(what);
  PreparedConv prepared(p.conv, p.dtypes, p.seed);
  std::string first_config;
  const HostTensor expected = run_named_variant(prepared, p.conv, p.dtypes, p.first, first_config);
  if (gemmkit_test::check_output(expected, any_order(prepared.ref), what + " " + first_config) !=
      0) {
    return;
  }
  for (const std::string& other : p.others) {
    std::string config;
    const HostTensor got = run_named_variant(prepared, p.conv, p.dtypes, other, config);
    EXPECT_TRUE(gemmkit_test::same_bits(expected, got))
        << what << ", " << other << ": " << config << " against " << first_config;
  }
}

std::vector<SameBitsCase> blocked_against_reference() {
  std::vector<ConvCase> all = kernel_variant_cases(), depthwise;
  for (const ConvCase& c : all) {
    if (c.algos == kDepthwiseAlgos) depthwise.push_back(c);
  }
  const std::vector<DtypePair> pairs(std::begin(kVariantPairs), std::end(kVariantPairs));
  // The seeds continue those of GpuConv.DepthwiseAndSmallOKernelVariants.
  const uint64_t base = 9000 + 10 * static_cast<uint64_t>(pairs.size() * all.size());
  return same_bits_cases(depthwise, pairs, "reference", {"blocked"}, base);
}

std::vector<SameBitsCase> staged_against_reference() {
  std::vector<std::string> budgets;
  for (const int registers : {cuda::conv_impl::kDepthwiseStagedRegisters,
                              cuda::conv_impl::kDepthwiseStagedLeanRegisters}) {
    budgets.push_back("staged registers=" + std::to_string(registers));
  }
  return same_bits_cases(staged_cases(), kWindowPairs, "reference", budgets, 9305);
}

std::vector<SameBitsCase> mma_on_several_tiles() {
  return same_bits_cases(mma_cases(), {{DType::bf16, DType::bf16}, {DType::f16, DType::f16}}, "mma",
                         {"mma tiles=2", "mma tiles=5"}, 9905);
}

INSTANTIATE_TEST_SUITE_P(DepthwiseAndSmallOKernelVariants, GpuConvDepthwiseSameBits,
                         ::testing::ValuesIn(blocked_against_reference()), same_bits_name);
INSTANTIATE_TEST_SUITE_P(DepthwiseStagedVariant, GpuConvDepthwiseSameBits,
                         ::testing::ValuesIn(staged_against_reference()), same_bits_name);
INSTANTIATE_TEST_SUITE_P(DepthwiseMmaVariant, GpuConvDepthwiseSameBits,
                         ::testing::ValuesIn(mma_on_several_tiles()), same_bits_name);
#endif

// The tensor-core depthwise variant on problems small enough for compute-sanitizer's three
// tools: padding on every side with a partial channel tile, and blocks of several tiles that
// restage their weights across channel tiles (the in-place transposition and the output staging
// over the window are what racecheck watches).
TEST(GpuConvSanitize, DepthwiseMma) {
  GEMMKIT_REQUIRE_GPU();
  const std::vector<std::string> dw{"depthwise"};
  const ConvCase c = depthwise_case("dw mma 7x7 c24", {1, 15, 19, 24}, 7, 1, 3, 3, 1, true, dw);
  const DtypePair d{DType::bf16, DType::bf16};
  run_case(c, d, 9990);
#ifdef GEMMKIT_WITH_CUDA
  PreparedConv prepared(c, d, 9995);
  const HostTensor direct = run_algo(prepared, c, "reference");
  std::string config;
  const HostTensor three = run_depthwise_variant(prepared, c, d, "mma", config, 0, 3);
  EXPECT_EQ(gemmkit_test::check_output(three, any_order(prepared.ref), config), 0);
#endif
}

// The staged depthwise kernel on problems small enough for compute-sanitizer's three tools: a
// 7x7 tile with padding on every side, and 1200 tiny planes of 48 channels (more tiles than
// blocks: each block streams its next window in while it computes one, and restages weights).
TEST(GpuConvSanitize, DepthwiseStaged) {
  GEMMKIT_REQUIRE_GPU();
  const std::vector<std::string> dw{"depthwise"};
  const ConvCase cases[] = {
      depthwise_case("dw staged 7x7 c32", {1, 15, 16, 32}, 7, 1, 3, 3, 1, true, dw),
      depthwise_case("dw staged 3x3 two tiles per block", {1200, 2, 7, 48}, 3, 1, 1, 1, 1, false,
                     dw),
  };
  uint64_t seed = 9800;
  for (const ConvCase& c : cases) run_case(c, DtypePair{DType::bf16, DType::bf16}, seed += 10);
#ifdef GEMMKIT_WITH_CUDA
  // The lean instantiation (80 registers, tile state in local memory) on the first case.
  const DtypePair d{DType::bf16, DType::bf16};
  PreparedConv prepared(cases[0], d, seed += 10);
  const HostTensor direct = run_algo(prepared, cases[0], "reference");
  std::string config;
  const HostTensor lean = run_depthwise_variant(prepared, cases[0], d, "staged", config,
                                                cuda::conv_impl::kDepthwiseStagedLeanRegisters);
  EXPECT_NE(config.find("variant=staged"), std::string::npos) << config;
  EXPECT_TRUE(gemmkit_test::same_bits(lean, direct)) << config;
#endif
}

}  // namespace
}  // namespace gemmkit
