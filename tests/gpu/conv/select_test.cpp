// GPU tests of the CUDA convolution through conv(): every path (and every algo that applies)
// against the double-precision reference and the CPU backend over a parameter matrix (1-3 spatial
// dims, strides, asymmetric / negative padding, dilations, transposed convs, groups, depthwise
// with multipliers, odd channels, batches, bias, strided views, every dtype pair), outputs
// poisoned before each run, run-to-run bitwise identity, the depthwise kernel bitwise equal to the
// generic one; forced algos that cannot serve, and the workspace across streams and graphs.
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

#include "gpu/conv/cases.h"
#include "gpu/gpu_test_util.h"
#ifdef GEMMKIT_WITH_CUDA
#include <cuda_runtime.h>

#include "api/validate.h"
#include "common/problems.h"
#include "cuda/conv/select.h"
#endif

namespace gemmkit {
namespace {

using namespace conv_test;

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
    ConvCase c = make_case("odd channels c3 -> o16 (small-c kernel, scalar unfold under gemm)",
                           {1, 13, 11, 3}, {16, 3, 3, 3}, all, "cuda.conv.small_c");
    c.params.padding_lo = {1};
    c.params.padding_hi = {1};
    v.push_back(c);
  }
  {
    ConvCase c = make_case("x with gaps between rows and channels", {2, 6, 7, 8}, {12, 3, 3, 8},
                           all, "cuda.conv.small_c");
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
                           {"reference", "direct"}, "cuda.conv.small_c");
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

}  // namespace
}  // namespace gemmkit
