// GPU tests of the CUDA convolution: every path (and every algo that applies) against the
// double-precision reference and the CPU backend over a parameter matrix (1-3 spatial dims,
// strides, asymmetric / negative padding, dilations, transposed convs, groups, depthwise with
// multipliers, odd channels, batches, bias, strided views, every dtype pair); outputs poisoned
// before each run; run-to-run bitwise identity; the depthwise kernel bitwise equal to the
// generic one; and the shapes that break GEMM-based convolutions (65,536 and 2^26 output
// positions, 70,000 channels, tensors past 2^31 elements, a 2048^2 x 128 conv in chunks),
// checked at sampled outputs against a double formula.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "conv_problem_spec.h"
#include "gpu/conv_test_util.h"
#include "gpu/gpu_test_util.h"
#include "reference_double.h"
#ifdef GEMMKIT_WITH_CUDA
#include <cuda_runtime.h>

#include "api/validate.h"
#include "common/problems.h"
#include "cuda/conv/conv_launch.h"
#include "cuda/conv/conv_select.h"
#endif

namespace gemmkit {
namespace {

using gemmkit_test::any_order;
using gemmkit_test::DeviceTensor;
using gemmkit_test::DtypePair;
using gemmkit_test::expect_close_to_cpu;
using gemmkit_test::HostTensor;
using gemmkit_test::Layout;
using gemmkit_test::PreparedConv;
using gemmkit_test::to_device;

const Device kGpu = Device::cuda(0);

// ---- The parameter matrix -------------------------------------------------------------------

struct ConvCase : gemmkit_test::ConvSpec {
  std::vector<std::string> algos;  // besides "auto", algos that must serve the problem
  std::string auto_kernel;         // CallInfo::kernel "auto" must pick ("" = any)
  int64_t workspace_bytes = -1;
  // The small-o kernel (taps | mma) that auto and direct run with 16-bit x ("" = not checked);
  // f32 x always runs the CUDA-core kernel (cuda).
  std::string small_o_variant;
  std::string cudnn_reason;  // text the forced cudnn call's reason must contain ("" = any)
};

ConvCase make_case(const std::string& name, std::vector<int64_t> x, std::vector<int64_t> w,
                   std::vector<std::string> algos, std::string auto_kernel = "") {
  ConvCase c;
  c.name = name;
  c.x_shape = std::move(x);
  c.w_shape = std::move(w);
  c.algos = std::move(algos);
  c.auto_kernel = std::move(auto_kernel);
  return c;
}

// A depthwise case that auto must serve with cuda.conv.depthwise: x (n, spatial..., c), a
// kernel of `kernel` per spatial dim, channel multiplier `multiplier`, the same stride and
// padding per dim, run with `algos`.
ConvCase depthwise_case(const std::string& name, std::vector<int64_t> x, int64_t kernel,
                        int64_t stride, int64_t pad_lo, int64_t pad_hi, int64_t multiplier,
                        bool bias, std::vector<std::string> algos) {
  const int64_t c = x.back();
  std::vector<int64_t> w{c * multiplier};
  for (std::size_t d = 1; d + 1 < x.size(); ++d) w.push_back(kernel);
  w.push_back(1);
  ConvCase k = make_case(name, std::move(x), std::move(w), std::move(algos), "cuda.conv.depthwise");
  k.params.groups = c;
  k.params.stride = {stride};
  k.params.padding_lo = {pad_lo};
  k.params.padding_hi = {pad_hi};
  k.bias = bias;
  return k;
}

std::vector<ConvCase> matrix() {
  std::vector<ConvCase> v;
  const std::vector<std::string> all{"reference", "direct", "gemm"};
  const std::vector<std::string> dw{"reference", "direct", "depthwise", "gemm"};
  {
    ConvCase c = make_case("1d stride 2 pad 1/2 bias (odd o: bias through f32 scratch)", {2, 33, 5},
                           {7, 3, 5}, all, "cuda.conv.small_o");
    c.params.stride = {2};
    c.params.padding_lo = {1};
    c.params.padding_hi = {2};
    c.bias = true;
    v.push_back(c);
  }
  {
    ConvCase c = make_case("2d 3x3 pad 1 c16 o24 batch 2 bias (bias epilogue)", {2, 9, 10, 16},
                           {24, 3, 3, 16}, all, "cuda.conv.unfold_gemm");
    c.params.padding_lo = {1};
    c.params.padding_hi = {1};
    c.bias = true;
    v.push_back(c);
  }
  {
    ConvCase c = make_case("2d asymmetric pad, kernel dilation 2, stride 2x1", {1, 11, 9, 8},
                           {12, 3, 2, 8}, all);
    c.params.padding_lo = {2, 0};
    c.params.padding_hi = {0, 3};
    c.params.kernel_dilation = {2};
    c.params.stride = {2, 1};
    v.push_back(c);
  }
  {
    ConvCase c = make_case("2d negative padding (crop)", {2, 8, 8, 4}, {6, 2, 3, 4}, all);
    c.params.padding_lo = {-1, 2};
    c.params.padding_hi = {-2, -1};
    v.push_back(c);
  }
  {
    ConvCase c = make_case("transposed conv k4 s2 (input dilation + flip) groups 2", {1, 6, 5, 6},
                           {10, 4, 4, 3}, all);
    c.params = conv_transpose_params({4, 4}, {2, 2}, {1, 1}, {0, 1}, {1, 1}, 2);
    c.bias = true;
    v.push_back(c);
  }
  {
    ConvCase c = make_case("groups 4 (c/g 4, o/g 2) stride 2", {2, 7, 7, 16}, {8, 3, 3, 4}, all);
    c.params.groups = 4;
    c.params.stride = {2};
    c.params.padding_lo = {1};
    c.params.padding_hi = {1};
    v.push_back(c);
  }
  // Depthwise: (name, x, kernel, stride, padding lo / hi, channel multiplier, bias).
  v.push_back(depthwise_case("depthwise 3x3 c32", {2, 9, 12, 32}, 3, 1, 1, 1, 1, true, dw));
  v.push_back(
      depthwise_case("depthwise multiplier 3 stride 2", {1, 9, 11, 8}, 3, 2, 1, 0, 3, false, dw));
  v.push_back(
      depthwise_case("depthwise 7x7 c96 (ConvNeXt)", {2, 14, 14, 96}, 7, 1, 3, 3, 1, true, dw));
  v.push_back(depthwise_case("depthwise 11x11 odd c (no register window)", {1, 15, 13, 7}, 11, 1, 5,
                             4, 1, false, dw));
  v.push_back(
      depthwise_case("depthwise causal conv1d (Mamba)", {2, 40, 64}, 4, 1, 3, 0, 1, true, dw));
  {
    ConvCase c = depthwise_case("depthwise kernel dilation 2, input dilation 2, flip",
                                {1, 7, 9, 12}, 3, 1, 2, 1, 2, false, dw);
    c.params.kernel_dilation = {2};
    c.params.input_dilation = {2};
    c.params.flip = true;
    v.push_back(c);
  }
  {
    ConvCase c =
        make_case("depthwise 3d", {1, 4, 5, 6, 8}, {8, 3, 2, 3, 1}, dw, "cuda.conv.depthwise");
    c.params.groups = 8;
    c.params.padding_lo = {1};
    c.params.padding_hi = {1};
    v.push_back(c);
  }
  {
    ConvCase c = make_case("small-o conv_out c128 -> o3 bias", {1, 20, 21, 128}, {3, 3, 3, 128},
                           all, "cuda.conv.small_o");
    c.params.padding_lo = {1};
    c.params.padding_hi = {1};
    c.bias = true;
    v.push_back(c);
  }
  {
    ConvCase c = make_case("small-o o8 c24 stride 2", {2, 9, 9, 24}, {8, 3, 3, 24}, all,
                           "cuda.conv.small_o");
    c.params.stride = {2};
    c.params.padding_lo = {1};
    c.params.padding_hi = {1};
    v.push_back(c);
  }
  {
    ConvCase c =
        make_case("small-o o5 odd c7 1d dilated", {3, 30, 7}, {5, 3, 7}, all, "cuda.conv.small_o");
    c.params.kernel_dilation = {3};
    c.params.padding_lo = {2};
    c.params.padding_hi = {2};
    c.bias = true;
    v.push_back(c);
  }
  {
    ConvCase c = make_case("3d stride 1x2x1 pad 1", {1, 4, 5, 6, 8}, {6, 3, 2, 3, 8}, all);
    c.params.padding_lo = {1};
    c.params.padding_hi = {1};
    c.params.stride = {1, 2, 1};
    v.push_back(c);
  }
  {
    ConvCase c =
        make_case("1x1 c32 o48 bias", {2, 7, 9, 32}, {48, 1, 1, 32}, all, "cuda.conv.gemm_1x1");
    c.bias = true;
    v.push_back(c);
  }
  {
    ConvCase c = make_case("1x1 groups 2, x positions strided", {1, 6, 5, 16}, {12, 1, 1, 8}, all,
                           "cuda.conv.gemm_1x1");
    c.params.groups = 2;
    c.x_layout.pad = {0, 0, 0, 4};  // position stride 20 > c
    c.bias = true;
    v.push_back(c);
  }
  {
    ConvCase c = make_case("odd channels c3 -> o16 (scalar unfold)", {1, 13, 11, 3}, {16, 3, 3, 3},
                           all, "cuda.conv.unfold_gemm");
    c.params.padding_lo = {1};
    c.params.padding_hi = {1};
    v.push_back(c);
  }
  {
    ConvCase c = make_case("x with gaps between rows and channels", {2, 6, 7, 8}, {12, 3, 3, 8},
                           all, "cuda.conv.unfold_gemm");
    c.x_layout.pad = {1, 2, 1, 3};
    c.x_layout.offset = 3;
    v.push_back(c);
  }
  {
    ConvCase c = make_case("x channels not innermost (no depthwise kernel)", {2, 5, 6, 8},
                           {8, 3, 3, 1}, {"reference", "direct", "gemm"});
    c.params.groups = 8;  // depthwise, but x's channel stride is not 1
    c.x_layout.order = {0, 3, 1, 2};
    v.push_back(c);
  }
  {
    ConvCase c = make_case("out with gaps (GEMM cannot write it)", {1, 6, 6, 8}, {10, 3, 3, 8},
                           {"reference", "direct"}, "cuda.conv.direct");
    c.out_layout.pad = {0, 0, 1, 2};  // positions do not merge into one stride
    c.out_layout.offset = 1;
    v.push_back(c);
  }
  {
    ConvCase c = make_case("depthwise, out with gaps", {1, 6, 6, 8}, {8, 3, 3, 1},
                           {"reference", "depthwise"}, "cuda.conv.depthwise");
    c.params.groups = 8;
    c.out_layout.pad = {0, 1, 0, 4};
    v.push_back(c);
  }
  {
    ConvCase c = make_case("unfold in many chunks (tiny workspace)", {2, 12, 10, 8}, {8, 3, 3, 8},
                           {"gemm", "reference"});
    c.params.padding_lo = {1};
    c.params.padding_hi = {1};
    c.bias = true;
    c.workspace_bytes = 8 * 1024;  // 7 KiB of unfold: 49 bf16 rows per chunk
    v.push_back(c);
  }
  return v;
}

std::string label(const ConvCase& c, const DtypePair& d, const std::string& algo) {
  return c.name + " [" + dtype_name(d.x) + " -> " + dtype_name(d.out) + ", algo " + algo + "]";
}

bool is_gemm_kernel(const std::string& kernel) {
  return kernel == "cuda.conv.gemm_1x1" || kernel == "cuda.conv.unfold_gemm";
}

// Whether cuDNN is built in and serves a plain conv (probed once, by forcing algo "cudnn").
bool cudnn_works() {
  static const bool works = [] {
    try {
      Buffer x(4 * 4 * 8 * 2, kGpu), w(8 * 3 * 3 * 8 * 2, kGpu), out(2 * 2 * 8 * 2, kGpu);
      x.fill_bytes(0);
      w.fill_bytes(0);
      ConvOptions options;
      options.algo = "cudnn";
      conv(Tensor::contiguous(x.data(), DType::bf16, kGpu, {1, 4, 4, 8}),
           Tensor::contiguous(w.data(), DType::bf16, kGpu, {8, 3, 3, 8}), std::nullopt,
           Tensor::contiguous(out.data(), DType::bf16, kGpu, {1, 2, 2, 8}), ConvParams{}, options);
      synchronize(kGpu);
      return true;
    } catch (const Error&) {
      return false;
    }
  }();
  return works;
}

// Whether auto may take cuDNN in this process (GEMMKIT_CONV_CUDNN=0 keeps it on own paths).
bool cudnn_in_auto() {
  const char* env = std::getenv("GEMMKIT_CONV_CUDNN");
  return !(env != nullptr && std::string(env) == "0") && cudnn_works();
}

// auto's kernel: `own`, or cuDNN where cuDNN is in auto (conv_select.h's auto_prefers_cudnn
// decides which; the host tests check that rule).
void expect_auto_kernel(const CallInfo& info, const std::string& own) {
  if (info.kernel == own) return;
  if (cudnn_in_auto() && info.kernel == "cuda.conv.cudnn") return;
  ADD_FAILURE() << "auto picked " << info.kernel << ", expected " << own
                << (cudnn_in_auto() ? " or cuda.conv.cudnn" : "") << " (" << info.reason << ")";
}

// Runs case c's prepared problem through conv() with options.algo = `algo` (and the case's
// workspace bound), waits, returns the output; `info` receives the call's CallInfo.
HostTensor run_algo(PreparedConv& prepared, const ConvCase& c, const std::string& algo,
                    CallInfo* info = nullptr) {
  return prepared.run([&] {
    ConvOptions options;
    options.algo = algo;
    options.workspace_bytes = c.workspace_bytes;
    options.info = info;
    conv(prepared.dx.view, prepared.dw.view, prepared.device_bias, prepared.dout.view, c.params,
         options);
    synchronize(kGpu);
  });
}

#ifdef GEMMKIT_WITH_CUDA
// Runs case c's prepared problem through the depthwise kernel that depthwise_config picks under
// GEMMKIT_CONV_DEPTHWISE=`variant` (a direct launch, conv_launch.h: the library reads its
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
  ConvConfig k = select_conv_config(p, describe_device(0),
                                    resolve_request("depthwise", "", -1, "", "", "", variant));
  if (registers != 0) k.depthwise.registers = registers;
  if (tiles_per_block != 0) {
    EXPECT_EQ(k.depthwise.variant, kDepthwiseMma);
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

// The small-o kernel a call ran, from its reason (conv_config.h's to_string: "small_o=...").
std::string small_o_variant_of(const CallInfo& info) {
  for (const char* v : {"taps", "mma", "cuda"}) {
    if (info.reason.find(std::string("small_o=") + v + " ") != std::string::npos) return v;
  }
  return "";
}

// Whether a small-o call ran the kernel case `c` expects on dtype pair `d`. Under
// GEMMKIT_CONV_SMALL_O=mma or cuda (scripts/smallo-check.sh runs the variant test so) the setting
// caps it: mma may fall back to cuda, taps never runs.
void expect_small_o_variant(const ConvCase& c, const DtypePair& d, const CallInfo& info,
                            const std::string& what) {
  if (c.small_o_variant.empty() || info.kernel != "cuda.conv.small_o") return;
  const std::string got = small_o_variant_of(info);
  const char* env = std::getenv("GEMMKIT_CONV_SMALL_O");
  const std::string cap = env == nullptr || std::string(env).empty() ? "auto" : env;
  if (d.x == DType::f32 || cap == "cuda") {
    EXPECT_EQ(got, "cuda") << what << ": " << info.reason;
  } else if (cap == "mma") {
    EXPECT_TRUE(got == "mma" || got == "cuda") << what << ": " << info.reason;
    if (c.small_o_variant == "mma") {
      EXPECT_EQ(got, "mma") << what << ": " << info.reason;
    }
  } else {
    EXPECT_EQ(got, c.small_o_variant) << what << ": " << info.reason;
  }
}

void run_case(const ConvCase& c, const DtypePair& d, uint64_t seed) {
  PreparedConv prepared(c, d, seed);
  const auto run = [&](const std::string& algo, CallInfo& info) {
    return run_algo(prepared, c, algo, &info);
  };

  std::vector<std::string> algos{"auto"};
  algos.insert(algos.end(), c.algos.begin(), c.algos.end());
  std::optional<HostTensor> reference_result;
  for (const std::string& algo : algos) {
    const std::string what = label(c, d, algo);
    SCOPED_TRACE(what);
    CallInfo info;
    HostTensor first;
    try {
      first = run(algo, info);
    } catch (const Error& e) {
      ADD_FAILURE() << what << ": threw " << e.what();
      continue;
    }
    EXPECT_EQ(info.backend, "cuda");
    if (algo == "auto" && !c.auto_kernel.empty()) {
      expect_auto_kernel(info, c.auto_kernel);
    }
    if (algo == "reference") {
      EXPECT_EQ(info.kernel, "cuda.conv.direct");
    }
    if (algo == "depthwise") {
      EXPECT_EQ(info.kernel, "cuda.conv.depthwise");
    }
    if (algo == "gemm") {
      EXPECT_TRUE(is_gemm_kernel(info.kernel)) << info.kernel;
    }
    if (algo == "direct") {
      EXPECT_FALSE(is_gemm_kernel(info.kernel)) << info.kernel;
    }
    if (algo == "auto" || algo == "direct") expect_small_o_variant(c, d, info, what);
    if (gemmkit_test::check_output(first, any_order(prepared.ref), what) != 0) continue;
    expect_close_to_cpu(first, prepared.cpu_out, prepared.ref, what + " vs the CPU backend");
    CallInfo again_info;
    const HostTensor again = run(algo, again_info);
    EXPECT_TRUE(gemmkit_test::same_bits(first, again)) << what << ": run-to-run difference";
    if (algo == "reference") reference_result = first;
    // The depthwise kernel sums in the generic kernel's order: identical bits (not its
    // tensor-core variant, whose MMAs sum each kernel row's products).
    if (info.kernel == "cuda.conv.depthwise" && reference_result &&
        info.reason.find("variant=mma") == std::string::npos) {
      EXPECT_TRUE(gemmkit_test::same_bits(first, *reference_result))
          << what << ": depthwise differs from the generic direct kernel";
    }
  }
}

TEST(GpuConv, ParameterMatrixBf16) {
  GEMMKIT_REQUIRE_GPU();
  uint64_t seed = 100;
  for (ConvCase c : matrix()) {
    // "reference" first, so the depthwise runs can be compared with it bit for bit.
    std::stable_partition(c.algos.begin(), c.algos.end(),
                          [](const std::string& a) { return a == "reference"; });
    run_case(c, {DType::bf16, DType::bf16}, seed += 10);
  }
}

TEST(GpuConv, ParameterMatrixOtherDtypes) {
  GEMMKIT_REQUIRE_GPU();
  const DtypePair pairs[] = {{DType::f16, DType::f16},
                             {DType::f32, DType::f32},
                             {DType::bf16, DType::f32},
                             {DType::f16, DType::f32}};
  uint64_t seed = 5000;
  for (const DtypePair& d : pairs) {
    for (ConvCase c : matrix()) {
      std::stable_partition(c.algos.begin(), c.algos.end(),
                            [](const std::string& a) { return a == "reference"; });
      run_case(c, d, seed += 10);
    }
  }
}

// The depthwise window variants (narrow / wide, last-dim stride 1 and 2, several column and row
// tiles, causal padding), the blocked depthwise variant (every kernel width and stride it
// instantiates, 1- and 2-row thread tiles, 1 and 2 channels per thread, interior and edge tiles,
// 3-D, flip, negative padding) and the three small-o kernels on every dtype pair: the taps kernel
// (conv_out shapes with several and partial tiles, 1-D, o = 1, c = 40 and 160, stride 2,
// dilation, negative padding, 8 n-tiles, strided x and out views, 3-D with one tap along dim 0),
// the tensor-core region kernel where taps * o > 64 (channels padded to the 32-channel chunk,
// several n-tile groups), the CUDA-core kernel for f32 x; the depthwise results must equal the
// generic kernel's bits. GEMMKIT_CONV_SMALL_O=mma / cuda runs the same cases on the older kernels.
TEST(GpuConv, DepthwiseAndSmallOKernelVariants) {
  GEMMKIT_REQUIRE_GPU();
  std::vector<ConvCase> cases;
  const std::vector<std::string> dw{"reference", "direct", "depthwise"};
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
  const DtypePair pairs[] = {
      {DType::bf16, DType::bf16}, {DType::f16, DType::f32}, {DType::f32, DType::f32}};
  uint64_t seed = 9000;
  for (const DtypePair& d : pairs) {
    for (const ConvCase& c : cases) run_case(c, d, seed += 10);
  }
#ifdef GEMMKIT_WITH_CUDA
  // The depthwise cases again with the staged variant kept out (GEMMKIT_CONV_DEPTHWISE=blocked):
  // the 16-bit 2-D stride-1 shapes it takes above run the blocked variant here, with the direct
  // kernel's bits.
  for (const DtypePair& d : pairs) {
    for (const ConvCase& c : cases) {
      if (c.algos != dw) continue;
      PreparedConv prepared(c, d, seed += 10);
      const HostTensor direct = run_algo(prepared, c, "reference");
      std::string config;
      const HostTensor blocked = run_depthwise_variant(prepared, c, d, "blocked", config);
      EXPECT_EQ(config.find("variant=staged"), std::string::npos) << config;
      EXPECT_TRUE(gemmkit_test::same_bits(blocked, direct))
          << label(c, d, "depthwise") << " without the staged variant: " << config;
    }
  }
#endif
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

// The staged depthwise variant (conv_depthwise_staged.cuh) against the generic direct kernel,
// bit for bit, and the CPU backend: 3x3 / 5x5 / 7x7, both warp layouts (16- and 32-channel tiles),
// partial row, column and channel tiles, bias, flip, asymmetric and negative padding, 3-D with one
// tap along dim 0 (stride and padding there), strided x and out views, blocks of several tiles
// (two windows in flight, restaging across channel tiles); then an Inf weight, which sends its
// channel tile down the exact path: still the direct kernel's bits (and the blocked variant's).
TEST(GpuConv, DepthwiseStagedVariant) {
  GEMMKIT_REQUIRE_GPU();
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
  uint64_t seed = 9300;
  for (const DtypePair& d :
       {DtypePair{DType::bf16, DType::bf16}, DtypePair{DType::f16, DType::f32}}) {
    for (const ConvCase& c : cases) {
      run_case(c, d, seed += 10);
      // The depthwise call ran the tensor-core variant (where it applies) or the staged one.
      PreparedConv prepared(c, d, seed + 5);
      CallInfo info;
      run_algo(prepared, c, "depthwise", &info);
      EXPECT_TRUE(info.reason.find("variant=staged") != std::string::npos ||
                  info.reason.find("variant=mma") != std::string::npos)
          << label(c, d, "depthwise") << ": " << info.reason;
#ifdef GEMMKIT_WITH_CUDA
      // Both register budgets of the staged plan: the direct kernel's bits.
      const HostTensor direct = run_algo(prepared, c, "reference");
      for (const int registers : {cuda::conv_impl::kDepthwiseStagedRegisters,
                                  cuda::conv_impl::kDepthwiseStagedLeanRegisters}) {
        std::string config;
        const HostTensor staged =
            run_depthwise_variant(prepared, c, d, "staged", config, registers);
        EXPECT_NE(config.find("variant=staged"), std::string::npos) << config;
        EXPECT_NE(config.find("registers=" + std::to_string(registers)), std::string::npos)
            << config;
        EXPECT_TRUE(gemmkit_test::same_bits(staged, direct))
            << label(c, d, "depthwise") << " at " << registers << " registers: " << config;
      }
#endif
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

// The tensor-core depthwise variant (conv_depthwise_mma.cuh), forced, against the reference
// kernel within the error bound, with the same bits when its blocks take 1, 2 or 5 tiles each
// (and each case through auto and the reference against the CPU backend, run_case): 3x3 to 9x9,
// rectangular kernels, partial row, column and channel tiles (c % 16 == 8), each tile width (8, 16,
// 32 columns), asymmetric and negative padding, flip, bias, strided x and out views, 3-D with one
// tap along dim 0, f16 and bf16.
TEST(GpuConv, DepthwiseMmaVariant) {
  GEMMKIT_REQUIRE_GPU();
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
  uint64_t seed = 9900;
  for (const DtypePair& d :
       {DtypePair{DType::bf16, DType::bf16}, DtypePair{DType::f16, DType::f16}}) {
    for (const ConvCase& c : cases) {
      run_case(c, d, seed += 10);  // auto (the tensor-core variant on the ConvNeXt case only)
#ifdef GEMMKIT_WITH_CUDA
      // Forced (GEMMKIT_CONV_DEPTHWISE=mma): within the error bound of the reference, and the
      // same bits for 1, 2 and 5 tiles per block.
      PreparedConv prepared(c, d, seed + 5);
      std::string config;
      const HostTensor one = run_depthwise_variant(prepared, c, d, "mma", config);
      EXPECT_NE(config.find("variant=mma"), std::string::npos) << config;
      EXPECT_EQ(gemmkit_test::check_output(one, any_order(prepared.ref),
                                           label(c, d, "depthwise") + " " + config),
                0);
      for (const int64_t tiles : {2, 5}) {
        std::string more_config;
        const HostTensor more = run_depthwise_variant(prepared, c, d, "mma", more_config, 0, tiles);
        EXPECT_TRUE(gemmkit_test::same_bits(one, more))
            << label(c, d, "depthwise") << ": " << config << " against " << more_config;
      }
#endif
    }
  }
}

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

#ifdef GEMMKIT_WITH_CUDA
// Direct launches (conv_launch.h) of the small-o kernels on one prepared case: its config under a
// GEMMKIT_CONV_SMALL_O setting, a run of any small-o config (either taps form or the region
// kernel) returning the output, and a taps config moved onto fewer blocks.
struct SmallODirect {
  PreparedConv& prepared;
  DtypePair d;
  detail::ConvProblem p;
  cuda::conv_impl::ConvGeometry g;
  cuda::conv_impl::ConvPointers ptr;

  SmallODirect(PreparedConv& prepared_case, const ConvCase& c, const DtypePair& dtypes)
      : prepared(prepared_case),
        d(dtypes),
        p(gemmkit_test::conv_problem(
            prepared.dx.view, prepared.dw.view,
            c.bias ? std::optional<Tensor>(prepared.db.view) : std::nullopt, prepared.dout.view,
            c.params)),
        g(cuda::conv_impl::normalize(p)) {
    ptr.x = p.x.data;
    ptr.w = p.weight.data;
    ptr.bias = c.bias ? p.bias.data : nullptr;
    ptr.out = p.out.data;
  }
  cuda::conv_impl::ConvConfig config(const cuda::conv_impl::DeviceDescription& dev,
                                     const std::string& small_o) const {
    return cuda::conv_impl::select_conv_config(
        p, dev, cuda::conv_impl::resolve_request("direct", "", -1, "", "", small_o));
  }
  HostTensor run(const cuda::conv_impl::ConvConfig& k) {
    return prepared.run([&] {
      if (k.small_o_taps.active) {
        cuda::conv_impl::launch_conv_small_o_taps(g, k.small_o_taps, d.x, d.out, ptr, k.grid,
                                                  k.smem_bytes, nullptr);
      } else {
        cuda::conv_impl::launch_conv_small_o(g, k.small_o, k.vector, d.x, d.out, ptr, k.grid,
                                             k.block, k.smem_bytes, nullptr);
      }
      ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    });
  }
  static cuda::conv_impl::ConvConfig on_blocks(cuda::conv_impl::ConvConfig k, int64_t blocks) {
    k.small_o_taps.grid = std::min(blocks, k.small_o_taps.tiles);
    k.small_o_taps.tiles_per_block =
        cuda::conv_impl::ceil_div(k.small_o_taps.tiles, k.small_o_taps.grid);
    k.grid.x = static_cast<uint32_t>(k.small_o_taps.grid);
    return k;
  }
};

// A case for the small-o direct-launch tests (no algos of its own): padding, bias, and the same
// stride and kernel dilation along every spatial dim.
ConvCase direct_launch_case(const std::string& name, std::vector<int64_t> x, std::vector<int64_t> w,
                            int64_t pad_lo, int64_t pad_hi, bool bias, int64_t stride = 1,
                            int64_t dilation = 1) {
  ConvCase k = make_case(name, std::move(x), std::move(w), {});
  k.params.padding_lo = {pad_lo};
  k.params.padding_hi = {pad_hi};
  k.params.stride = {stride};
  k.params.kernel_dilation = {dilation};
  k.bias = bias;
  return k;
}

// The taps kernel launched directly (conv_launch.h) next to the tensor-core region kernel on
// problems both serve: the same products (same k-slot permutation) summed in the same order
// (per tap, 32-channel chunks ascending, two k-steps each; then taps row-major, + bias), so the
// same bits; and the same bits whatever the grid (tiles strided over 1, 3 or the planned blocks).
TEST(GpuConv, SmallOTapsKernelBitsAndGrids) {
  GEMMKIT_REQUIRE_GPU();
  using namespace cuda::conv_impl;
  const DeviceDescription dev = describe_device(0);
  std::vector<ConvCase> cases;
  const auto add = [&](const std::string& name, std::vector<int64_t> x, std::vector<int64_t> w,
                       int64_t pad_lo, int64_t pad_hi, bool bias) {
    cases.push_back(direct_launch_case(name, std::move(x), std::move(w), pad_lo, pad_hi, bias));
  };
  add("conv_out c128 o3 bias", {1, 45, 70, 128}, {3, 3, 3, 128}, 1, 1, true);
  add("o1 c40 batch 2", {2, 17, 33, 40}, {1, 3, 3, 40}, 1, 1, false);
  add("1d o3 c64 k5", {2, 300, 64}, {3, 5, 64}, 4, -1, true);
  add("o2 c16 5x5", {1, 31, 29, 16}, {2, 5, 5, 16}, 2, 2, true);
  add("o6 c32 3x3 (a shift-add pass per channel)", {1, 20, 37, 32}, {6, 3, 3, 32}, 1, 1, true);
  add("o6 c48 2x2 (shift-add in passes of 4 channels)", {2, 19, 26, 48}, {6, 2, 2, 48}, 1, 0, true);
  const DtypePair pairs[] = {{DType::bf16, DType::bf16}, {DType::f16, DType::f32}};
  uint64_t seed = 12000;
  for (const DtypePair& d : pairs) {
    for (const ConvCase& c : cases) {
      const std::string what = label(c, d, "direct launches");
      SCOPED_TRACE(what);
      PreparedConv prepared(c, d, seed += 10);
      SmallODirect direct(prepared, c, d);
      const ConvConfig taps = direct.config(dev, "taps");
      const ConvConfig mma = direct.config(dev, "mma");
      ASSERT_TRUE(taps.small_o_taps.active) << to_string(taps);
      ASSERT_EQ(taps.small_o_taps.tma_stages, 0) << to_string(taps);
      ASSERT_TRUE(mma.small_o.mma) << to_string(mma);
      const HostTensor first = direct.run(taps);
      if (gemmkit_test::check_output(first, any_order(prepared.ref), what) != 0) continue;
      EXPECT_TRUE(gemmkit_test::same_bits(first, direct.run(mma)))
          << what << ": the taps and region kernels differ";
      for (const int64_t blocks : {int64_t{1}, int64_t{3}}) {
        EXPECT_TRUE(
            gemmkit_test::same_bits(first, direct.run(SmallODirect::on_blocks(taps, blocks))))
            << what << ": grid " << blocks;
      }
    }
  }
}
#endif

#ifdef GEMMKIT_WITH_CUDA
// The TMA-fed form of the taps kernel (GEMMKIT_CONV_SMALL_O=tma) returns the register form's
// bits, with padding, stride, kernel dilation, channels past a 32-channel chunk and
// batches, and VAE conv_out at a size with interior and edge tiles.
TEST(GpuConv, SmallOTapsTmaFormMatchesTheRegisterForm) {
  GEMMKIT_REQUIRE_GPU();
  using namespace cuda::conv_impl;
  const DeviceDescription dev = describe_device(0);
  std::vector<ConvCase> cases;
  const auto add = [&](const std::string& name, std::vector<int64_t> x, std::vector<int64_t> w,
                       int64_t pad_lo, int64_t pad_hi, int64_t stride, int64_t dilation,
                       bool bias) {
    cases.push_back(direct_launch_case(name, std::move(x), std::move(w), pad_lo, pad_hi, bias,
                                       stride, dilation));
  };
  add("conv_out c128 o3 bias", {1, 45, 70, 128}, {3, 3, 3, 128}, 1, 1, 1, 1, true);
  add("conv_out 200x200", {1, 200, 200, 128}, {3, 3, 3, 128}, 1, 1, 1, 1, true);
  add("o1 c40 batch 2", {2, 17, 33, 40}, {1, 3, 3, 40}, 1, 1, 1, 1, false);
  add("c136 o3 (5 chunks, 2 groups)", {1, 23, 41, 136}, {3, 3, 3, 136}, 1, 1, 1, 1, true);
  add("stride 2 o3 c64", {2, 40, 52, 64}, {3, 3, 3, 64}, 1, 0, 2, 1, true);
  add("dilation 2 o2 c32", {1, 30, 37, 32}, {2, 3, 3, 32}, 2, 2, 1, 2, false);
  add("1d o3 c64 k5", {2, 300, 64}, {3, 5, 64}, 4, -1, 1, 1, true);
  add("o6 c48 2x2 (shift-add in passes of 4 channels)", {2, 19, 26, 48}, {6, 2, 2, 48}, 1, 0, 1, 1,
      true);
  const DtypePair pairs[] = {{DType::bf16, DType::bf16}, {DType::f16, DType::f32}};
  uint64_t seed = 14000;
  for (const DtypePair& d : pairs) {
    for (const ConvCase& c : cases) {
      const std::string what = label(c, d, "taps, register and TMA forms");
      SCOPED_TRACE(what);
      PreparedConv prepared(c, d, seed += 10);
      SmallODirect direct(prepared, c, d);
      const ConvConfig taps = direct.config(dev, "taps");
      const ConvConfig tma = direct.config(dev, "tma");
      ASSERT_TRUE(taps.small_o_taps.active) << to_string(taps);
      ASSERT_EQ(taps.small_o_taps.tma_stages, 0) << to_string(taps);
      ASSERT_GT(tma.small_o_taps.tma_stages, 0) << to_string(tma);
      const HostTensor registers = direct.run(taps);
      if (gemmkit_test::check_output(registers, any_order(prepared.ref), what) != 0) continue;
      const HostTensor streamed = direct.run(tma);
      EXPECT_TRUE(gemmkit_test::same_bits(registers, streamed))
          << what << ": the TMA form differs (" << to_string(tma) << ")";
      EXPECT_TRUE(gemmkit_test::same_bits(streamed, direct.run(tma))) << what << ": run to run";
      // Fewer blocks than SMs: each block streams several tiles through its ring.
      for (const int64_t blocks : {int64_t{1}, int64_t{3}}) {
        EXPECT_TRUE(
            gemmkit_test::same_bits(registers, direct.run(SmallODirect::on_blocks(tma, blocks))))
            << what << ": grid " << blocks;
      }
    }
  }
}
#endif

TEST(GpuConv, AlgoThatCannotServeIsAnError) {
  GEMMKIT_REQUIRE_GPU();
  HostTensor x = gemmkit_test::random_tensor(DType::bf16, {1, 5, 5, 8}, 1);
  HostTensor w = gemmkit_test::random_tensor(DType::bf16, {12, 3, 3, 8}, 2);  // o > 8: no small-o
  HostTensor out = gemmkit_test::make_tensor(DType::bf16, {1, 3, 3, 12});
  const DeviceTensor dx = to_device(x), dw = to_device(w), dout = to_device(out);
  ConvOptions options;
  options.algo = "depthwise";
  try {
    conv(dx.view, dw.view, std::nullopt, dout.view, ConvParams{}, options);
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("options.algo"), std::string::npos) << m;
    EXPECT_NE(m.find("'depthwise'"), std::string::npos) << m;
  }
  options.algo = "gemm";
  options.workspace_bytes = 16;  // cannot hold one unfold row
  EXPECT_THROW(conv(dx.view, dw.view, std::nullopt, dout.view, ConvParams{}, options), Error);
  options.algo = "auto";  // auto never fails on size: the direct kernel serves it
  CallInfo info;
  options.info = &info;
  conv(dx.view, dw.view, std::nullopt, dout.view, ConvParams{}, options);
  synchronize(kGpu);
  expect_auto_kernel(info, "cuda.conv.direct");
}

#ifdef GEMMKIT_WITH_CUDA
// The cached workspace shared by streams (growing while another stream may still use it) and
// a conv captured into a CUDA graph (its own allocation inside the graph): same bits as eager.
TEST(GpuConv, WorkspaceAcrossStreamsAndGraphs) {
  GEMMKIT_REQUIRE_GPU();
  const std::vector<int64_t> x_shape{2, 40, 36, 32}, w_shape{48, 3, 3, 32};
  ConvParams params;
  params.padding_lo = {1};
  params.padding_hi = {1};
  HostTensor x = gemmkit_test::random_tensor(DType::bf16, x_shape, 61);
  HostTensor w = gemmkit_test::random_tensor(DType::bf16, w_shape, 62);
  const DeviceTensor dx = to_device(x), dw = to_device(w);
  const std::vector<int64_t> out_shape = conv_output_shape(x_shape, w_shape, params);
  const std::size_t out_bytes = static_cast<std::size_t>(2 * 40 * 36 * 48 * 2);
  const auto conv_on = [&](Buffer& out, int64_t workspace, cudaStream_t stream) {
    ConvOptions options;
    options.algo = "gemm";
    options.workspace_bytes = workspace;
    conv(dx.view, dw.view, std::nullopt,
         Tensor::contiguous(out.data(), DType::bf16, kGpu, out_shape), params, options, stream);
  };
  // Eager results on the legacy stream for a small (many chunks) and a large workspace.
  const int64_t small_ws = 256 << 10, large_ws = 64 << 20;
  Buffer eager_small(out_bytes, kGpu), eager_large(out_bytes, kGpu);
  conv_on(eager_small, small_ws, nullptr);
  conv_on(eager_large, large_ws, nullptr);
  synchronize(kGpu);
  const auto small_bytes = testing::download(eager_small);
  const auto large_bytes = testing::download(eager_large);

  cudaStream_t s1 = nullptr, s2 = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking), cudaSuccess);
  Buffer a(out_bytes, kGpu), b(out_bytes, kGpu);
  for (int round = 0; round < 3; ++round) {
    a.fill_bytes(0xFF);
    b.fill_bytes(0xFF);
    conv_on(a, small_ws, s1);
    conv_on(b, large_ws << round, s2);  // grows the workspace while s1 may still use it
    conv_on(a, small_ws, s1);
    ASSERT_EQ(cudaStreamSynchronize(s1), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s2), cudaSuccess);
    EXPECT_TRUE(testing::download(a) == small_bytes) << "round " << round;
    if (round == 0) {
      EXPECT_TRUE(testing::download(b) == large_bytes);
    }
  }

  // Captured into a graph, replayed twice.
  Buffer g(out_bytes, kGpu);
  g.fill_bytes(0xFF);
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(s1, cudaStreamCaptureModeGlobal), cudaSuccess);
  conv_on(g, small_ws, s1);
  ASSERT_EQ(cudaStreamEndCapture(s1, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 2; ++replay) {
    ASSERT_EQ(cudaGraphLaunch(exec, s1), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(s1), cudaSuccess);
    EXPECT_TRUE(testing::download(g) == small_bytes) << "replay " << replay;
    g.fill_bytes(0xFF);
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(s1);
  cudaStreamDestroy(s2);
}
#endif

// ---- cuDNN path (algo "cudnn") -------------------------------------------------------------

#define GEMMKIT_REQUIRE_CUDNN()                                                          \
  do {                                                                                   \
    GEMMKIT_REQUIRE_GPU();                                                               \
    if (!cudnn_works()) GTEST_SKIP() << "cuDNN is not built in or serves no plain conv"; \
  } while (0)

struct CudnnCase {
  ConvCase conv;
  // Needs a conv with an output type other than x's (bias into f32 scratch with 16-bit out, or
  // 16-bit in and f32 out): an Error saying cuDNN has no engine is tolerated (and reported).
  bool mixed_types = false;
};

std::vector<ConvCase> cudnn_matrix() {
  std::vector<ConvCase> v;
  const auto add = [&v](ConvCase c) { v.push_back(std::move(c)); };
  {
    ConvCase c = make_case("1d k3 stride 2 pad 1/2", {2, 33, 8}, {16, 3, 8}, {"cudnn"});
    c.params.stride = {2};
    c.params.padding_lo = {1};
    c.params.padding_hi = {2};
    add(c);
  }
  {
    ConvCase c = make_case("1d depthwise causal k4 (pad 3/0)", {2, 40, 32}, {32, 4, 1}, {"cudnn"});
    c.params.groups = 32;
    c.params.padding_lo = {3};
    c.params.padding_hi = {0};
    add(c);
  }
  {
    ConvCase c = make_case("2d 3x3 pad 1 bias", {2, 9, 10, 16}, {24, 3, 3, 16}, {"cudnn"});
    c.params.padding_lo = {1};
    c.params.padding_hi = {1};
    c.bias = true;
    add(c);
  }
  {
    ConvCase c = make_case("2d asymmetric pad, kernel dilation 2, stride 2x1", {1, 11, 9, 8},
                           {12, 3, 2, 8}, {"cudnn"});
    c.params.padding_lo = {2, 0};
    c.params.padding_hi = {0, 3};
    c.params.kernel_dilation = {2};
    c.params.stride = {2, 1};
    add(c);
  }
  {
    ConvCase c =
        make_case("2d flip (true convolution) odd o", {2, 8, 7, 8}, {7, 3, 2, 8}, {"cudnn"});
    c.params.flip = true;
    c.params.padding_lo = {1, 0};
    c.params.padding_hi = {1, 1};
    add(c);
  }
  {
    ConvCase c = make_case("groups 4 stride 2 bias", {2, 7, 7, 16}, {8, 3, 3, 4}, {"cudnn"});
    c.params.groups = 4;
    c.params.stride = {2};
    c.params.padding_lo = {1};
    c.params.padding_hi = {1};
    c.bias = true;
    add(c);
  }
  {
    ConvCase c = make_case("depthwise 3x3 c32", {2, 9, 12, 32}, {32, 3, 3, 1}, {"cudnn"});
    c.params.groups = 32;
    c.params.padding_lo = {1};
    c.params.padding_hi = {1};
    add(c);
  }
  {
    ConvCase c =
        make_case("depthwise multiplier 2 stride 2", {1, 10, 9, 16}, {32, 3, 3, 1}, {"cudnn"});
    c.params.groups = 16;
    c.params.stride = {2};
    add(c);
  }
  {
    ConvCase c = make_case("3d k3x2x3 pad 1 bias", {1, 4, 5, 6, 8}, {8, 3, 2, 3, 8}, {"cudnn"});
    c.params.padding_lo = {1};
    c.params.padding_hi = {1};
    c.bias = true;
    add(c);
  }
  {
    ConvCase c = make_case("1x1 c32 o48", {2, 7, 9, 32}, {48, 1, 1, 32}, {"cudnn"});
    add(c);
  }
  {
    ConvCase c = make_case("small o (3) 5x5", {1, 16, 16, 16}, {3, 5, 5, 16}, {"cudnn"});
    c.params.padding_lo = {2};
    c.params.padding_hi = {2};
    add(c);
  }
  {
    ConvCase c =
        make_case("x strided (padded rows, offset)", {2, 6, 7, 8}, {8, 3, 3, 8}, {"cudnn"});
    c.x_layout.pad = {0, 1, 3, 8};
    c.x_layout.offset = 8;
    add(c);
  }
  {
    ConvCase c = make_case("x channels not innermost", {2, 5, 6, 8}, {12, 3, 3, 8}, {"cudnn"});
    c.x_layout.order = {0, 3, 1, 2};
    add(c);
  }
  {
    ConvCase c = make_case("out with gaps, no bias", {1, 6, 6, 8}, {10, 3, 3, 8}, {"cudnn"});
    c.out_layout.pad = {0, 0, 1, 2};
    c.out_layout.offset = 1;
    add(c);
  }
  // Transposed convolutions: cuDNN's backward-data over the packed filter (cudnn_dgrad_form).
  {
    ConvCase c = make_case("transposed k4 s2 p1 (the suite row's form)", {2, 6, 5, 16},
                           {8, 4, 4, 16}, {"cudnn"});
    c.params = conv_transpose_params({4, 4}, {2}, {1}, {0}, {1}, 1);
    c.cudnn_reason = "filter packed (vector kernel)";
    add(c);
  }
  {
    // Two partial vector tiles each way (o 72, c 80), taps with odd strides of whole vectors.
    ConvCase c = make_case("transposed k3 s2, partial vector tiles", {1, 4, 5, 80}, {72, 3, 3, 80},
                           {"cudnn"});
    c.params = conv_transpose_params({3, 3}, {2}, {1}, {0}, {1}, 1);
    c.cudnn_reason = "filter packed (vector kernel)";
    add(c);
  }
  {
    // The weight as PyTorch stores a ConvTranspose2d weight (c, o, 4, 4) in channels-last
    // memory, i.e. (c, 4, 4, o), handed over as the permuted view (o, 4, 4, c).
    ConvCase c = make_case("transposed k4 s2, weight in cuDNN's filter layout", {1, 6, 5, 16},
                           {8, 4, 4, 16}, {"cudnn"});
    c.params = conv_transpose_params({4, 4}, {2}, {1}, {0}, {1}, 1);
    c.w_layout.order = {3, 1, 2, 0};
    c.cudnn_reason = "filter read in place";
    add(c);
  }
  {
    ConvCase c = make_case("transposed k3 s2 output_padding 1 groups 2 bias", {1, 5, 6, 8},
                           {6, 3, 3, 4}, {"cudnn"});
    c.params = conv_transpose_params({3, 3}, {2}, {1}, {1}, {1}, 2);
    c.bias = true;
    c.cudnn_reason = "filter packed (scalar kernel)";
    add(c);
  }
  {
    ConvCase c = make_case("transposed 1d k5 s3 dilation 2", {2, 9, 8}, {6, 5, 8}, {"cudnn"});
    c.params = conv_transpose_params({5}, {3}, {2}, {0}, {2}, 1);
    add(c);
  }
  {
    ConvCase c =
        make_case("input dilation without flip, asymmetric", {1, 5, 5, 8}, {4, 3, 3, 8}, {"cudnn"});
    c.params = conv_transpose_params({3, 3}, {2}, {1}, {1}, {1}, 1);
    c.params.flip = false;
    c.params.padding_lo = {0, 2};
    add(c);
  }
  return v;
}

// Forced cudnn on one case and dtype pair: the double reference, the CPU backend, poisoned
// outputs, the cuDNN kernel, run-to-run bits. Returns false when cuDNN had no engine for a case
// that tolerates it.
bool run_cudnn_case(const ConvCase& c, const DtypePair& d, uint64_t seed, bool tolerate_no_engine) {
  const std::string what = label(c, d, "cudnn");
  SCOPED_TRACE(what);
  PreparedConv prepared(c, d, seed);
  const auto run = [&](CallInfo& info) { return run_algo(prepared, c, "cudnn", &info); };
  CallInfo info;
  HostTensor first;
  try {
    first = run(info);
  } catch (const Error& e) {
    const std::string m = e.what();
    if (tolerate_no_engine && (m.find("cuDNN has no") != std::string::npos ||
                               m.find("cuDNN cannot describe") != std::string::npos)) {
      std::printf("[ note ] %s: %s\n", what.c_str(), m.c_str());
      return false;
    }
    ADD_FAILURE() << what << ": threw " << m;
    return false;
  }
  EXPECT_EQ(info.kernel, "cuda.conv.cudnn") << info.reason;
  EXPECT_NE(info.reason.find("cuDNN engine"), std::string::npos) << info.reason;
  EXPECT_NE(info.reason.find(c.cudnn_reason), std::string::npos) << info.reason;
  if (gemmkit_test::check_output(first, any_order(prepared.ref), what) != 0) return true;
  expect_close_to_cpu(first, prepared.cpu_out, prepared.ref, what + " vs the CPU backend");
  CallInfo again_info;
  const HostTensor again = run(again_info);
  EXPECT_TRUE(gemmkit_test::same_bits(first, again)) << what << ": run-to-run difference";
  EXPECT_NE(again_info.reason.find("cached"), std::string::npos) << again_info.reason;
  return true;
}

TEST(GpuConvCudnn, MatrixAgainstReference) {
  GEMMKIT_REQUIRE_CUDNN();
  const DtypePair same[] = {
      {DType::bf16, DType::bf16}, {DType::f16, DType::f16}, {DType::f32, DType::f32}};
  const DtypePair mixed[] = {{DType::bf16, DType::f32}, {DType::f16, DType::f32}};
  uint64_t seed = 9000;
  int unsupported = 0;
  for (const ConvCase& c : cudnn_matrix()) {
    for (const DtypePair& d : same) {
      // 16-bit out with a bias: the conv writes f32 scratch (a mixed-type cuDNN conv).
      const bool mixed_conv = c.bias && d.out != DType::f32;
      if (!run_cudnn_case(c, d, seed += 10, mixed_conv)) ++unsupported;
    }
    for (const DtypePair& d : mixed) {
      if (!run_cudnn_case(c, d, seed += 10, true)) ++unsupported;
    }
  }
  std::printf("[ note ] cuDNN had no engine for %d mixed-type runs\n", unsupported);
}

// The filter packing kernels launched directly against the host mapping (dgrad_weight_source),
// bit for bit: random bits in, the packed buffer poisoned first, the vector and the scalar kernel
// each where they apply (dgrad_vector_fits), partial tiles, groups, strided weights, a grid that
// strides (more tiles than the launcher's block cap).
TEST(GpuConvSanitize, DgradFilterPackingKernels) {
  GEMMKIT_REQUIRE_GPU();
  using namespace cuda::conv_impl;
  struct PackCase {
    const char* name;
    DgradWeightIndex index;
    int64_t w_elements;
    const char* kernel_16bit;
    const char* kernel_32bit;
  };
  const auto contiguous = [](int64_t groups, int64_t opg, int64_t cpg, std::vector<int64_t> kernel,
                             int64_t c_stride) {
    DgradWeightIndex x;
    x.cpg = cpg;
    x.c = groups * cpg;
    x.opg = opg;
    x.spatial = static_cast<int>(kernel.size());
    x.taps = 1;
    for (int d = 0; d < x.spatial; ++d) {
      x.kernel[d] = kernel[static_cast<std::size_t>(d)];
      x.taps *= x.kernel[d];
    }
    x.w_c_stride = c_stride;
    int64_t stride = cpg * c_stride;  // (o, kernel..., c / groups), channels c_stride apart
    for (int d = x.spatial - 1; d >= 0; --d) {
      x.w_tap_stride[d] = stride;
      stride *= x.kernel[d];
    }
    x.w_o_stride = stride;
    return x;
  };
  std::vector<PackCase> cases;
  {
    const DgradWeightIndex x = contiguous(1, 128, 256, {4, 4}, 1);  // the suite row
    cases.push_back({"suite row o128 c256 4x4", x, 128 * x.w_o_stride, "vector", "vector"});
  }
  {
    const DgradWeightIndex x = contiguous(1, 72, 80, {3, 3}, 1);  // partial 64-wide tiles
    cases.push_back({"o72 c80 3x3", x, 72 * x.w_o_stride, "vector", "vector"});
  }
  {
    const DgradWeightIndex x = contiguous(3, 12, 20, {3}, 1);  // 20 % 8 != 0: scalar for 16-bit
    cases.push_back({"groups 3 opg12 cpg20 1-D", x, 36 * x.w_o_stride, "scalar", "vector"});
  }
  {
    const DgradWeightIndex x = contiguous(2, 8, 8, {2, 2, 2}, 2);  // channels 2 apart
    cases.push_back({"3-D strided channels", x, 16 * x.w_o_stride, "scalar", "scalar"});
  }
  {
    const DgradWeightIndex x = contiguous(1, 768, 768, {3, 3}, 2);  // 5184 scalar tiles
    cases.push_back(
        {"o768 c768 3x3 strided (grid-stride)", x, 768 * x.w_o_stride, "scalar", "scalar"});
  }
  uint64_t seed = 13000;
  for (const PackCase& k : cases) {
    for (const DType dtype : {DType::bf16, DType::f32}) {
      const std::string what = std::string(k.name) + " " + dtype_name(dtype);
      SCOPED_TRACE(what);
      const std::size_t size = dtype_size(dtype);
      const DgradWeightIndex& x = k.index;
      const int64_t count = x.c * x.taps * x.opg;
      std::vector<uint8_t> w_host(static_cast<std::size_t>(k.w_elements) * size);
      std::mt19937_64 rng(seed += 7);
      for (auto& byte : w_host) byte = static_cast<uint8_t>(rng());
      const Buffer w = testing::upload(w_host, kGpu);
      Buffer packed(static_cast<std::size_t>(count) * size, kGpu);
      packed.fill_bytes(0xA5);
      const char* kernel = launch_conv_dgrad_weight(dtype, x, w.data(), packed.data(), nullptr);
      ASSERT_EQ(cudaGetLastError(), cudaSuccess);
      synchronize(kGpu);
      EXPECT_STREQ(kernel, size == 2 ? k.kernel_16bit : k.kernel_32bit);
      const std::vector<uint8_t> got = testing::download(packed);
      int64_t wrong = 0;
      for (int64_t i = 0; i < count; ++i) {
        const std::size_t source = static_cast<std::size_t>(dgrad_weight_source(x, i)) * size;
        if (std::memcmp(&got[static_cast<std::size_t>(i) * size], &w_host[source], size) != 0) {
          if (wrong++ == 0) ADD_FAILURE() << what << ": first wrong element " << i;
        }
      }
      EXPECT_EQ(wrong, 0) << what << " of " << count;
    }
  }
}

// The transposed cases alone (both filter packing kernels and the in-place filter), small enough
// for compute-sanitizer's memcheck and synccheck (scripts/device.sh runs every *Sanitize* test).
TEST(GpuConvCudnnSanitize, TransposedFilterPacking) {
  GEMMKIT_REQUIRE_CUDNN();
  uint64_t seed = 9500;
  int transposed = 0;
  for (const ConvCase& c : cudnn_matrix()) {
    if (c.cudnn_reason.empty()) continue;
    ++transposed;
    for (const DtypePair& d :
         {DtypePair{DType::bf16, DType::bf16}, DtypePair{DType::f32, DType::f32}}) {
      // 16-bit out with a bias: a mixed-type cuDNN conv (f32 scratch), which may have no engine.
      run_cudnn_case(c, d, seed += 10, c.bias && d.out != DType::f32);
    }
  }
  EXPECT_EQ(transposed, 4);
}

TEST(GpuConvCudnn, ForcedCudnnThatCannotServeIsAnError) {
  GEMMKIT_REQUIRE_GPU();
  HostTensor x = gemmkit_test::random_tensor(DType::bf16, {1, 6, 5, 6}, 1);
  HostTensor w = gemmkit_test::random_tensor(DType::bf16, {10, 4, 4, 3}, 2);
  const DeviceTensor dx = to_device(x), dw = to_device(w);
  const auto expect_cudnn_error = [&](const ConvParams& params, const std::string& why) {
    const std::vector<int64_t> out_shape = conv_output_shape(x.shape, w.shape, params);
    DeviceTensor dout = to_device(gemmkit_test::make_tensor(DType::bf16, out_shape));
    ConvOptions options;
    options.algo = "cudnn";
    try {
      conv(dx.view, dw.view, std::nullopt, dout.view, params, options);
      ADD_FAILURE() << "expected an Error (" << why << ")";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("options.algo"), std::string::npos) << m;
      EXPECT_NE(m.find("'cudnn'"), std::string::npos) << m;
      const std::string expected = cudnn_works() ? why : "cuDNN not built";
      EXPECT_NE(m.find(expected), std::string::npos) << m;
    }
  };
  ConvParams strided_transpose = conv_transpose_params({4, 4}, {2, 2}, {1, 1}, {0, 1}, {1, 1}, 2);
  strided_transpose.stride = {2, 1};  // input dilation and stride together: no cuDNN form
  expect_cudnn_error(strided_transpose, "input dilation with stride");
  ConvParams negative;
  negative.groups = 2;
  negative.padding_lo = {-1, 2};
  negative.padding_hi = {0, 1};
  expect_cudnn_error(negative, "negative padding");
}

#ifdef GEMMKIT_WITH_CUDA
// One bf16 convolution without bias on its own non-blocking stream, run eagerly or captured into
// a CUDA graph and replayed; out is poisoned before every run and read back after it.
struct StreamConv {
  ConvParams params;
  HostTensor x, w, host_out;
  gemmkit_test::Reference ref;
  DeviceTensor dx, dw, dout;
  cudaStream_t stream = nullptr;

  StreamConv(const std::vector<int64_t>& x_shape, const std::vector<int64_t>& w_shape,
             const ConvParams& p, uint64_t seed)
      : params(p),
        x(gemmkit_test::random_tensor(DType::bf16, x_shape, seed)),
        w(gemmkit_test::random_tensor(DType::bf16, w_shape, seed + 1)),
        host_out(gemmkit_test::make_tensor(DType::bf16, conv_output_shape(x_shape, w_shape, p))),
        ref(gemmkit_test::reference_conv(x, w, nullptr, p)),
        dx(to_device(x)),
        dw(to_device(w)),
        dout(to_device(host_out)) {
    EXPECT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  }
  StreamConv(const StreamConv&) = delete;
  StreamConv& operator=(const StreamConv&) = delete;
  ~StreamConv() {
    if (stream != nullptr) cudaStreamDestroy(stream);
  }

  void enqueue(const std::string& algo, CallInfo& info) {
    ConvOptions options;
    options.algo = algo;
    options.info = &info;
    conv(dx.view, dw.view, std::nullopt, dout.view, params, options, stream);
  }
  HostTensor result() {
    EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    HostTensor r = host_out;
    dout.buffer.copy_to_host(r.storage.data(), r.storage.size());
    return r;
  }
  HostTensor eager(const std::string& algo, CallInfo& info) {
    dout.buffer.fill_bytes(0xFF);
    enqueue(algo, info);
    return result();
  }
  // One call captured into a graph, then `replays` launches of it.
  std::vector<HostTensor> captured(const std::string& algo, CallInfo& info, int replays) {
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    EXPECT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    enqueue(algo, info);
    EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    EXPECT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
    std::vector<HostTensor> results;
    for (int replay = 0; replay < replays; ++replay) {
      dout.buffer.fill_bytes(0xFF);
      EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
      results.push_back(result());
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    return results;
  }
};

// cuDNN inside stream capture: a shape first seen under capture takes the heuristic's first
// engine (no timing), replays give the same bits and the right values; after an eager call has
// timed the shape, a new capture reproduces the eager bits.
TEST(GpuConvCudnn, InsideGraphCapture) {
  GEMMKIT_REQUIRE_CUDNN();
  ConvParams params;
  params.padding_lo = {1, 0};
  params.padding_hi = {1, 2};
  // bf16 out, no bias: a same-type conv, which every cuDNN 9 build serves.
  StreamConv run({2, 20, 18, 24}, {40, 3, 3, 24}, params, 71);
  const auto capture_and_replay = [&](CallInfo& info) {
    const std::vector<HostTensor> replays = run.captured("cudnn", info, 2);
    EXPECT_TRUE(gemmkit_test::same_bits(replays[0], replays[1])) << "replays differ";
    return replays[0];
  };
  CallInfo captured_info;
  const HostTensor captured = capture_and_replay(captured_info);
  EXPECT_EQ(captured_info.kernel, "cuda.conv.cudnn");
  EXPECT_NE(captured_info.reason.find("not timed"), std::string::npos) << captured_info.reason;
  EXPECT_EQ(gemmkit_test::check_output(captured, any_order(run.ref), "captured cudnn"), 0);

  CallInfo eager_info;
  const HostTensor eager = run.eager("cudnn", eager_info);
  EXPECT_EQ(gemmkit_test::check_output(eager, any_order(run.ref), "eager cudnn"), 0);

  CallInfo recaptured_info;
  const HostTensor recaptured = capture_and_replay(recaptured_info);
  EXPECT_TRUE(gemmkit_test::same_bits(eager, recaptured)) << recaptured_info.reason;
}

// auto on a 2-D depthwise shape (cuDNN against the own depthwise kernel): under capture before
// any eager call the static choice runs untimed; the first eager call times both and says so;
// later calls and captures reuse that choice with the same bits; every result is correct.
TEST(GpuConvCudnn, AutoRaceIsTimedOnceThenStable) {
  GEMMKIT_REQUIRE_CUDNN();
  ConvParams params;
  params.groups = 64;
  params.padding_lo = {2};
  params.padding_hi = {2};
  StreamConv run({2, 15, 17, 64}, {64, 5, 5, 1}, params, 81);
  const auto call = [&](bool capture, CallInfo& info) {
    const HostTensor r = capture ? run.captured("auto", info, 1)[0] : run.eager("auto", info);
    EXPECT_EQ(gemmkit_test::check_output(r, any_order(run.ref), info.kernel), 0) << info.reason;
    return r;
  };
  CallInfo before, first, second, after;
  call(true, before);
  EXPECT_EQ(before.kernel, "cuda.conv.cudnn");
  EXPECT_NE(before.reason.find("not raced"), std::string::npos) << before.reason;
  const HostTensor r1 = call(false, first);
  EXPECT_NE(first.reason.find("timed"), std::string::npos) << first.reason;
  const HostTensor r2 = call(false, second);
  const HostTensor r3 = call(true, after);
  EXPECT_EQ(first.kernel, second.kernel);
  EXPECT_EQ(first.kernel, after.kernel);
  EXPECT_TRUE(gemmkit_test::same_bits(r1, r2)) << second.reason;
  EXPECT_TRUE(gemmkit_test::same_bits(r1, r3)) << after.reason;
}
#endif

// ---- Big shapes: sampled outputs against a double formula ---------------------------------

// A device tensor too big to fill from the host element by element: `period` random elements
// uploaded over and over (a wrong offset almost never lands on an equal value, since the
// period divides no stride of the tests).
struct PeriodicTensor {
  std::vector<uint8_t> pattern;  // period elements of the dtype
  int64_t period = 0;
  DType dtype = DType::bf16;
  Buffer buffer;

  PeriodicTensor(DType dt, int64_t elements, int64_t period_elements, uint64_t seed)
      : period(period_elements), dtype(dt) {
    pattern = testing::random_host(dt, period, 1.0f, seed);
    const std::size_t es = dtype_size(dt);
    buffer = Buffer(static_cast<std::size_t>(elements) * es, kGpu);
    for (int64_t start = 0; start < elements; start += period) {
      const int64_t count = std::min(period, elements - start);
      buffer.copy_from_host(pattern.data(), static_cast<std::size_t>(count) * es,
                            static_cast<std::size_t>(start) * es);
    }
  }
  double at(int64_t offset) const { return load_as_float(pattern.data(), dtype, offset % period); }
};

// conv_general at one output element straight from the definition, reading elements through
// callbacks (offsets from strides), in double. Returns the value; `scale` gets sum |terms|.
struct SampledConv {
  std::vector<int64_t> x_shape, w_shape, out_shape, x_strides, w_strides;
  ConvParams params;
  std::function<double(int64_t)> x_at, w_at, bias_at;  // bias_at empty: no bias

  double at(int64_t flat, double& scale) const {
    const int spatial = static_cast<int>(x_shape.size()) - 2;
    const gemmkit_test::ConvDims pd = gemmkit_test::expand_params(params, spatial);
    const int64_t o = w_shape.front(), c = x_shape.back();
    const int64_t groups = params.groups, cpg = c / groups, opg = o / groups;
    std::vector<int64_t> idx(out_shape.size());
    int64_t rest = flat;
    for (int d = static_cast<int>(out_shape.size()) - 1; d >= 0; --d) {
      idx[static_cast<std::size_t>(d)] = rest % out_shape[static_cast<std::size_t>(d)];
      rest /= out_shape[static_cast<std::size_t>(d)];
    }
    const int64_t oc = idx.back(), g = oc / opg;
    int64_t taps = 1;
    for (int d = 0; d < spatial; ++d) taps *= w_shape[static_cast<std::size_t>(d + 1)];
    double sum = 0;
    scale = 0;
    for (int64_t t = 0; t < taps; ++t) {
      int64_t tr = t, x_off = idx[0] * x_strides[0], w_off = oc * w_strides[0];
      bool real = true;
      for (int d = spatial - 1; d >= 0; --d) {
        const auto i = static_cast<std::size_t>(d + 1);
        const int64_t k = w_shape[i];
        const int64_t tap = tr % k;
        tr /= k;
        const int64_t z = idx[i] * pd.stride[d] + tap * pd.kdil[d] - pd.pad_lo[d];
        if (z < 0 || z % pd.idil[d] != 0 || z / pd.idil[d] >= x_shape[i]) real = false;
        x_off += (z / pd.idil[d]) * x_strides[i];
        w_off += (params.flip ? k - 1 - tap : tap) * w_strides[i];
      }
      if (!real) continue;
      for (int64_t ci = 0; ci < cpg; ++ci) {
        const double term =
            x_at(x_off + (g * cpg + ci) * x_strides.back()) * w_at(w_off + ci * w_strides.back());
        sum += term;
        scale += std::fabs(term);
      }
    }
    if (bias_at) {
      sum += bias_at(oc);
      scale += std::fabs(bias_at(oc));
    }
    return sum;
  }
};

// Samples `samples` outputs (the first, the last, the rest random) of a contiguous device
// output and checks each against the formula; returns the sampled values.
std::vector<double> check_samples(const SampledConv& s, const Buffer& out, DType out_dtype,
                                  int64_t samples, uint64_t seed, const std::string& what) {
  int64_t numel = 1;
  for (int64_t v : s.out_shape) numel *= v;
  int64_t taps = 1;
  for (std::size_t d = 1; d + 1 < s.w_shape.size(); ++d) taps *= s.w_shape[d];
  const int64_t len = taps * s.w_shape.back();
  std::vector<int64_t> picks{0, numel - 1};
  std::mt19937_64 rng(seed);
  while (static_cast<int64_t>(picks.size()) < samples) {
    picks.push_back(static_cast<int64_t>(rng() % static_cast<uint64_t>(numel)));
  }
  const std::size_t es = dtype_size(out_dtype);
  const double u = out_dtype == DType::f32 ? 0.0 : gemmkit_test::unit_roundoff(out_dtype);
  std::vector<double> values;
  int bad = 0;
  for (const int64_t flat : picks) {
    uint8_t raw[4] = {};
    out.copy_to_host(raw, es, static_cast<std::size_t>(flat) * es);
    const double got = load_as_float(raw, out_dtype, 0);
    double scale = 0;
    const double want = s.at(flat, scale);
    const double acc = static_cast<double>(len + 6) * std::ldexp(1.0, -24) * scale;
    const double tol = acc + u * (std::fabs(want) + acc);
    if (!(std::fabs(got - want) <= tol) && ++bad <= 5) {
      ADD_FAILURE() << what << ": output " << flat << " = " << got << ", expected " << want
                    << " (tol " << tol << ")";
    }
    values.push_back(got);
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << picks.size() << " samples off";
  return values;
}

std::vector<int64_t> row_major_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (std::size_t i = shape.size() - 1; i-- > 0;) strides[i] = strides[i + 1] * shape[i + 1];
  return strides;
}

// Element i of a host bf16 buffer as a double (a SampledConv callback; `host` must outlive it).
std::function<double(int64_t)> bf16_reader(const std::vector<uint8_t>& host) {
  return [&host](int64_t i) { return double(load_as_float(host.data(), DType::bf16, i)); };
}

// A SampledConv over row-major x and w.
SampledConv sampled_conv(const std::vector<int64_t>& x_shape, const std::vector<int64_t>& w_shape,
                         const std::vector<int64_t>& out_shape, const ConvParams& params,
                         std::function<double(int64_t)> x_at, std::function<double(int64_t)> w_at,
                         std::function<double(int64_t)> bias_at = {}) {
  SampledConv s;
  s.x_shape = x_shape;
  s.w_shape = w_shape;
  s.out_shape = out_shape;
  s.x_strides = row_major_strides(x_shape);
  s.w_strides = row_major_strides(w_shape);
  s.params = params;
  s.x_at = std::move(x_at);
  s.w_at = std::move(w_at);
  s.bias_at = std::move(bias_at);
  return s;
}

// Runs conv on device tensors (contiguous out) with `algo`; returns CallInfo.
CallInfo run_big(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias, Buffer& out,
                 const std::vector<int64_t>& out_shape, DType out_dtype, const ConvParams& params,
                 const std::string& algo, int64_t workspace = -1) {
  out.fill_bytes(0xFF);
  CallInfo info;
  ConvOptions options;
  options.algo = algo;
  options.workspace_bytes = workspace;
  options.info = &info;
  conv(x, w, bias, Tensor::contiguous(out.data(), out_dtype, kGpu, out_shape), params, options);
  synchronize(kGpu);
  return info;
}

TEST(GpuConvBig, SixtyFiveThousandPositionsEveryPath) {
  GEMMKIT_REQUIRE_GPU();
  // Batch 1, 256 x 256 output, 3x3: 65,536 output positions.
  const std::vector<int64_t> x_shape{1, 256, 256, 16}, w_shape{16, 3, 3, 16};
  ConvParams params;
  params.padding_lo = {1};
  params.padding_hi = {1};
  const auto xh = testing::random_host(DType::bf16, 256 * 256 * 16, 1.0f, 7);
  const auto wh = testing::random_host(DType::bf16, 16 * 9 * 16, 0.25f, 8);
  const auto bh = testing::random_host(DType::bf16, 16, 1.0f, 9);
  Buffer xb = testing::upload(xh, kGpu), wb = testing::upload(wh, kGpu),
         bb = testing::upload(bh, kGpu);
  const Tensor x = Tensor::contiguous(xb.data(), DType::bf16, kGpu, x_shape);
  const Tensor w = Tensor::contiguous(wb.data(), DType::bf16, kGpu, w_shape);
  const Tensor b = Tensor::contiguous(bb.data(), DType::bf16, kGpu, {16});
  const std::vector<int64_t> out_shape{1, 256, 256, 16};
  Buffer out(256 * 256 * 16 * 2, kGpu);
  SampledConv s = sampled_conv(x_shape, w_shape, out_shape, params, bf16_reader(xh),
                               bf16_reader(wh), bf16_reader(bh));
  for (const char* algo : {"auto", "reference", "gemm"}) {
    const CallInfo info = run_big(x, w, b, out, out_shape, DType::bf16, params, algo);
    check_samples(s, out, DType::bf16, 2000, 1,
                  std::string("65536 positions, ") + algo + " (" + info.kernel + ")");
  }
  // Depthwise over the same 65,536 positions.
  Buffer wdb = testing::upload(testing::random_host(DType::bf16, 16 * 9, 0.5f, 10), kGpu);
  ConvParams dparams = params;
  dparams.groups = 16;
  const Tensor wd = Tensor::contiguous(wdb.data(), DType::bf16, kGpu, {16, 3, 3, 1});
  const CallInfo info = run_big(x, wd, std::nullopt, out, out_shape, DType::bf16, dparams, "auto");
  expect_auto_kernel(info, "cuda.conv.depthwise");
  std::vector<uint8_t> wdh(16 * 9 * 2);
  wdb.copy_to_host(wdh.data(), wdh.size());
  SampledConv sd = s;
  sd.w_shape = {16, 3, 3, 1};
  sd.w_strides = row_major_strides(sd.w_shape);
  sd.params = dparams;
  sd.w_at = [&](int64_t i) { return double(load_as_float(wdh.data(), DType::bf16, i)); };
  sd.bias_at = nullptr;
  check_samples(sd, out, DType::bf16, 2000, 2, "65536 positions, depthwise");
}

TEST(GpuConvBig, SeventyThousandChannels) {
  GEMMKIT_REQUIRE_GPU();
  const int64_t c = 70000;
  {
    // 1x1, c = 70,000 (channels would overflow gridDim.y): the GEMM and the direct kernel.
    const std::vector<int64_t> x_shape{1, 3, 4, c}, w_shape{16, 1, 1, c}, out_shape{1, 3, 4, 16};
    const auto xh = testing::random_host(DType::bf16, 12 * c, 1.0f, 21);
    const auto wh = testing::random_host(DType::bf16, 16 * c, 0.05f, 22);
    Buffer xb = testing::upload(xh, kGpu), wb = testing::upload(wh, kGpu);
    Buffer out(12 * 16 * 4, kGpu);
    SampledConv s =
        sampled_conv(x_shape, w_shape, out_shape, ConvParams{}, bf16_reader(xh), bf16_reader(wh));
    for (const char* algo : {"auto", "reference", "gemm"}) {
      const CallInfo info = run_big(Tensor::contiguous(xb.data(), DType::bf16, kGpu, x_shape),
                                    Tensor::contiguous(wb.data(), DType::bf16, kGpu, w_shape),
                                    std::nullopt, out, out_shape, DType::f32, s.params, algo);
      check_samples(s, out, DType::f32, 192, 3,
                    std::string("c=70000 1x1 ") + algo + " (" + info.kernel + ")");
    }
  }
  {
    // Depthwise, 70,000 groups on a small image: the depthwise kernel and the generic one agree
    // bit for bit.
    const std::vector<int64_t> x_shape{1, 6, 5, c}, w_shape{c, 3, 3, 1}, out_shape{1, 6, 5, c};
    ConvParams params;
    params.groups = c;
    params.padding_lo = {1};
    params.padding_hi = {1};
    const auto xh = testing::random_host(DType::bf16, 30 * c, 1.0f, 23);
    const auto wh = testing::random_host(DType::bf16, 9 * c, 0.5f, 24);
    Buffer xb = testing::upload(xh, kGpu), wb = testing::upload(wh, kGpu);
    Buffer out(30 * c * 2, kGpu);
    const Tensor x = Tensor::contiguous(xb.data(), DType::bf16, kGpu, x_shape);
    const Tensor w = Tensor::contiguous(wb.data(), DType::bf16, kGpu, w_shape);
    SampledConv s =
        sampled_conv(x_shape, w_shape, out_shape, params, bf16_reader(xh), bf16_reader(wh));
    const CallInfo info = run_big(x, w, std::nullopt, out, out_shape, DType::bf16, params, "auto");
    expect_auto_kernel(info, "cuda.conv.depthwise");
    check_samples(s, out, DType::bf16, 2000, 4, "c=70000 depthwise");
    const auto depthwise_bytes = testing::download(out);
    run_big(x, w, std::nullopt, out, out_shape, DType::bf16, params, "reference");
    EXPECT_TRUE(depthwise_bytes == testing::download(out)) << "depthwise != generic direct";
  }
}

TEST(GpuConvBig, OutputPastTwoToTheThirtyOneElements) {
  GEMMKIT_REQUIRE_GPU();
  {
    // 1x1 conv, 8 -> 1024 channels over 2^21 positions: out has 2^31 elements (4 GiB bf16),
    // so out offsets pass 2^31 in the GEMM (two chunks) and in the direct kernel.
    const std::vector<int64_t> x_shape{1, 2048, 1024, 8}, w_shape{1024, 1, 1, 8},
        out_shape{1, 2048, 1024, 1024};
    const auto xh = testing::random_host(DType::bf16, 2048 * 1024 * 8, 1.0f, 31);
    const auto wh = testing::random_host(DType::bf16, 1024 * 8, 1.0f, 32);
    Buffer xb = testing::upload(xh, kGpu), wb = testing::upload(wh, kGpu);
    Buffer out(std::size_t{1} << 32, kGpu);
    SampledConv s =
        sampled_conv(x_shape, w_shape, out_shape, ConvParams{}, bf16_reader(xh), bf16_reader(wh));
    for (const char* algo : {"auto", "reference"}) {
      const CallInfo info = run_big(Tensor::contiguous(xb.data(), DType::bf16, kGpu, x_shape),
                                    Tensor::contiguous(wb.data(), DType::bf16, kGpu, w_shape),
                                    std::nullopt, out, out_shape, DType::bf16, s.params, algo);
      check_samples(s, out, DType::bf16, 2000, 5,
                    std::string("2^31-element out, ") + algo + " (" + info.kernel + ")");
    }
  }
  {
    // Depthwise causal conv1d with 2^31 outputs; x is an overlapping view (rows 8 elements
    // apart) so it needs only 64 MiB. Depthwise and generic agree bit for bit.
    const int64_t length = int64_t{1} << 22, c = 512;
    const std::vector<int64_t> x_shape{1, length, c}, w_shape{c, 4, 1}, out_shape{1, length, c};
    const std::vector<int64_t> x_strides{length * 8 + c, 8, 1};
    const int64_t x_elements = (length - 1) * 8 + c;
    const auto xh = testing::random_host(DType::bf16, x_elements, 1.0f, 33);
    const auto wh = testing::random_host(DType::bf16, c * 4, 1.0f, 34);
    Buffer xb = testing::upload(xh, kGpu), wb = testing::upload(wh, kGpu);
    Buffer out(static_cast<std::size_t>(length * c * 2), kGpu);
    ConvParams params;
    params.groups = c;
    params.padding_lo = {3};
    params.padding_hi = {0};
    const Tensor x = Tensor::strided(xb.data(), DType::bf16, kGpu, x_shape, x_strides);
    const Tensor w = Tensor::contiguous(wb.data(), DType::bf16, kGpu, w_shape);
    SampledConv s =
        sampled_conv(x_shape, w_shape, out_shape, params, bf16_reader(xh), bf16_reader(wh));
    s.x_strides = x_strides;
    const CallInfo info = run_big(x, w, std::nullopt, out, out_shape, DType::bf16, params, "auto");
    expect_auto_kernel(info, "cuda.conv.depthwise");
    const std::vector<double> depthwise =
        check_samples(s, out, DType::bf16, 2000, 6, "2^31-element depthwise");
    run_big(x, w, std::nullopt, out, out_shape, DType::bf16, params, "reference");
    const std::vector<double> generic =
        check_samples(s, out, DType::bf16, 2000, 6, "2^31-element depthwise, reference");
    EXPECT_EQ(depthwise, generic);
  }
}

TEST(GpuConvBig, InputPastTwoToTheThirtyOneElementsSmallO) {
  GEMMKIT_REQUIRE_GPU();
  // x of 2^31 elements (8192 x 8192 x 32 bf16, 4 GiB), 3x3 conv to 3 channels: x offsets pass
  // 2^31 in the small-o kernel and the generic one.
  const std::vector<int64_t> x_shape{1, 8192, 8192, 32}, w_shape{3, 3, 3, 32},
      out_shape{1, 8192, 8192, 3};
  const PeriodicTensor xp(DType::bf16, int64_t{1} << 31, 1000003, 41);
  const auto wh = testing::random_host(DType::bf16, 3 * 9 * 32, 0.25f, 42);
  const auto bh = testing::random_host(DType::bf16, 3, 1.0f, 43);
  Buffer wb = testing::upload(wh, kGpu), bb = testing::upload(bh, kGpu);
  Buffer out(static_cast<std::size_t>(8192) * 8192 * 3 * 2, kGpu);
  ConvParams params;
  params.padding_lo = {1};
  params.padding_hi = {1};
  SampledConv s = sampled_conv(
      x_shape, w_shape, out_shape, params, [&](int64_t i) { return xp.at(i); }, bf16_reader(wh),
      bf16_reader(bh));
  const Tensor x = Tensor::contiguous(xp.buffer.data(), DType::bf16, kGpu, x_shape);
  const Tensor w = Tensor::contiguous(wb.data(), DType::bf16, kGpu, w_shape);
  const Tensor b = Tensor::contiguous(bb.data(), DType::bf16, kGpu, {3});
  for (const char* algo : {"auto", "reference"}) {
    const CallInfo info = run_big(x, w, b, out, out_shape, DType::bf16, params, algo);
    if (std::string(algo) == "auto") {
      expect_auto_kernel(info, "cuda.conv.small_o");
    }
    check_samples(s, out, DType::bf16, 2000, 7, std::string("2^31-element x, ") + algo);
  }
}

TEST(GpuConvBig, Output2048SquaredThroughChunks) {
  GEMMKIT_REQUIRE_GPU();
  // 2048 x 2048 output, 128 -> 128 channels, 3x3: the unfold runs in chunks of the default
  // 256 MiB workspace and of a 16 MiB one.
  const std::vector<int64_t> x_shape{1, 2048, 2048, 128}, w_shape{128, 3, 3, 128},
      out_shape{1, 2048, 2048, 128};
  const PeriodicTensor xp(DType::bf16, int64_t{2048} * 2048 * 128, 999983, 51);
  const auto wh = testing::random_host(DType::bf16, 128 * 9 * 128, 0.1f, 52);
  const auto bh = testing::random_host(DType::bf16, 128, 1.0f, 53);
  Buffer wb = testing::upload(wh, kGpu), bb = testing::upload(bh, kGpu);
  Buffer out(std::size_t{2048} * 2048 * 128 * 2, kGpu);
  ConvParams params;
  params.padding_lo = {1};
  params.padding_hi = {1};
  SampledConv s = sampled_conv(
      x_shape, w_shape, out_shape, params, [&](int64_t i) { return xp.at(i); }, bf16_reader(wh),
      bf16_reader(bh));
  const Tensor x = Tensor::contiguous(xp.buffer.data(), DType::bf16, kGpu, x_shape);
  const Tensor w = Tensor::contiguous(wb.data(), DType::bf16, kGpu, w_shape);
  const Tensor b = Tensor::contiguous(bb.data(), DType::bf16, kGpu, {128});
  for (const int64_t workspace : {int64_t{-1}, int64_t{16} << 20}) {
    const CallInfo info = run_big(x, w, b, out, out_shape, DType::bf16, params, "gemm", workspace);
    EXPECT_EQ(info.kernel, "cuda.conv.unfold_gemm");
    EXPECT_NE(info.reason.find("chunks="), std::string::npos) << info.reason;
    EXPECT_EQ(info.reason.find("chunks=1 "), std::string::npos) << info.reason;
    check_samples(
        s, out, DType::bf16, 2000, 8,
        "2048^2 x 128, workspace " + std::to_string(workspace) + " (" + info.reason + ")");
  }
}

#ifdef GEMMKIT_WITH_CUDA
// Timing of suite rows whose peer (cuDNN) figures are in shared/peers/h200-conv.csv. Not a
// test: run with --gtest_also_run_disabled_tests --gtest_filter='*Timing*'.
TEST(GpuConvBig, DISABLED_TimingOfSuiteRows) {
  GEMMKIT_REQUIRE_GPU();
  struct Row {
    const char* name;
    std::vector<int64_t> x, w;
    int64_t pad, stride, groups;
    double cudnn_us;
  };
  const Row rows[] = {
      {"convnext-dw7x7-96", {8, 56, 56, 96}, {96, 7, 7, 1}, 3, 1, 96, 24.8},
      {"convnext-dw7x7-384", {8, 14, 14, 384}, {384, 7, 7, 1}, 3, 1, 384, 12.1},
      {"mobilenet-dw3x3-144", {8, 56, 56, 144}, {144, 3, 3, 1}, 1, 1, 144, 9.3},
      {"mobilenet-dw3x3s2-144", {8, 56, 56, 144}, {144, 3, 3, 1}, 1, 2, 144, 7.3},
      {"mamba-causal-dw-conv1d", {8, 2048, 8192}, {8192, 4, 1}, -1, 1, 8192, 1720.0},
      {"vae1024-conv_out", {1, 1024, 1024, 128}, {3, 3, 3, 128}, 1, 1, 1, 322.7},
      {"vae256-conv_out", {1, 256, 256, 128}, {3, 3, 3, 128}, 1, 1, 1, 32.1},
      {"sd-vae-encoder-conv-in", {1, 1024, 1024, 3}, {128, 3, 3, 3}, 1, 1, 1, 304.1},
      {"resnet50-3x3-64", {8, 56, 56, 64}, {64, 3, 3, 64}, 1, 1, 1, 11.8},
      {"resnet50-1x1-256to64", {8, 56, 56, 256}, {64, 1, 1, 256}, 0, 1, 1, 8.5},
      {"resnext50-g32-3x3", {8, 56, 56, 256}, {256, 3, 3, 8}, 1, 1, 32, 32.4},
      {"vae1024-up3.res0.conv2", {1, 1024, 1024, 128}, {128, 3, 3, 128}, 1, 1, 1, 445.6},
  };
  cudaEvent_t start = nullptr, stop = nullptr;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&stop), cudaSuccess);
  for (const Row& r : rows) {
    ConvParams params;
    params.groups = r.groups;
    params.stride = {r.stride};
    if (r.pad >= 0) {
      params.padding_lo = {r.pad};
      params.padding_hi = {r.pad};
    } else {  // causal: pad kernel - 1 before
      params.padding_lo = {r.w[1] - 1};
      params.padding_hi = {0};
    }
    const std::vector<int64_t> out_shape = conv_output_shape(r.x, r.w, params);
    int64_t xn = 1, wn = 1, on = 1;
    for (int64_t v : r.x) xn *= v;
    for (int64_t v : r.w) wn *= v;
    for (int64_t v : out_shape) on *= v;
    Buffer xb = testing::upload(testing::random_host(DType::bf16, xn, 1.0f, 1), kGpu);
    Buffer wb = testing::upload(testing::random_host(DType::bf16, wn, 0.1f, 2), kGpu);
    Buffer bb = testing::upload(testing::random_host(DType::bf16, r.w[0], 1.0f, 3), kGpu);
    Buffer ob(static_cast<std::size_t>(on) * 2, kGpu);
    const Tensor x = Tensor::contiguous(xb.data(), DType::bf16, kGpu, r.x);
    const Tensor w = Tensor::contiguous(wb.data(), DType::bf16, kGpu, r.w);
    const Tensor b = Tensor::contiguous(bb.data(), DType::bf16, kGpu, {r.w[0]});
    const Tensor o = Tensor::contiguous(ob.data(), DType::bf16, kGpu, out_shape);
    for (const char* algo : {"auto", "reference"}) {
      ConvOptions options;
      options.algo = algo;
      CallInfo info;
      options.info = &info;
      conv(x, w, b, o, params, options);  // warm-up (workspace, cuBLASLt plans)
      synchronize(kGpu);
      const int reps = std::string(algo) == "reference" ? 3 : 20;
      cudaEventRecord(start, nullptr);
      for (int i = 0; i < reps; ++i) conv(x, w, b, o, params, options);
      cudaEventRecord(stop, nullptr);
      ASSERT_EQ(cudaEventSynchronize(stop), cudaSuccess);
      float ms = 0;
      cudaEventElapsedTime(&ms, start, stop);
      const double us = 1000.0 * ms / reps;
      std::printf("TIMING %-26s %-9s %10.1f us  cudnn %8.1f us  (%.2fx)  %s\n", r.name, algo, us,
                  r.cudnn_us, r.cudnn_us / us, info.kernel.c_str());
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}
#endif

}  // namespace
}  // namespace gemmkit
