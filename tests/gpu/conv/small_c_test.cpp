// GPU tests of the small-c kernel (small_c/small_c.cuh): launched directly on a parameter matrix
// (1-3 spatial dims, c = 1 .. 8, groups of 8 channels, strides, kernel dilation, asymmetric and
// negative padding, flip, bias, M and N tails, column blocks, strided views, out channels not
// innermost) on every dtype pair, against the double reference and the CPU backend, outputs
// poisoned before each run, run-to-run bits and the same bits on a grid of 3 blocks; batch
// invariance (a batch of 5 against each image alone); the suites' stems through the dispatcher; and
// the sanitizer cases.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "gpu/conv/cases.h"
#include "gpu/gpu_test_util.h"

#ifdef GEMMKIT_WITH_CUDA
#include <cuda_runtime.h>

#include "common/problems.h"
#include "cuda/conv/common/launch.h"
#include "cuda/conv/small_c/launch.h"
#include "cuda/conv/small_c/plan.h"

namespace gemmkit {
namespace {

using namespace conv_test;
using cuda::conv_impl::SmallCPlan;

SmallCPlan plan_or_fail(const detail::ConvProblem& p) {
  SmallCPlan t;
  EXPECT_EQ(cuda::conv_impl::why_not_small_c(p, cuda::conv_impl::describe_device(0), t), "");
  return t;
}

void launch_and_wait(const detail::ConvProblem& p, const SmallCPlan& t) {
  cuda::conv_impl::ConvPointers ptr;
  ptr.x = p.x.data;
  ptr.w = p.weight.data;
  ptr.bias = p.has_bias ? p.bias.data : nullptr;
  ptr.out = p.out.data;
  cuda::conv_impl::launch_conv_small_c(cuda::conv_impl::normalize(p), t, p.x.dtype, p.out.dtype,
                                       ptr, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

using Case = gemmkit_test::ConvSpec;

Case padded(const std::string& name, std::vector<int64_t> x, std::vector<int64_t> w, int64_t lo,
            int64_t hi, bool bias) {
  Case c = gemmkit_test::conv_spec(name, std::move(x), std::move(w));
  c.params.padding_lo = {lo};
  c.params.padding_hi = {hi};
  c.bias = bias;
  return c;
}

std::vector<Case> matrix() {
  std::vector<Case> v;
  {
    Case c = padded("stem 7x7 s2 c3 o64 bias", {2, 45, 38, 3}, {64, 7, 7, 3}, 3, 3, true);
    c.params.stride = {2};
    v.push_back(c);
  }
  v.push_back(padded("3x3 c3 o128 bias (VAE conv_in)", {1, 33, 29, 3}, {128, 3, 3, 3}, 1, 1, true));
  v.push_back(
      padded("3x3 c3 o300 (column blocks, N tail)", {1, 17, 19, 3}, {300, 3, 3, 3}, 1, 1, false));
  v.push_back(padded("c1 o20 1d dilation", {3, 77, 1}, {20, 5, 1}, 4, 1, true));
  v.back().params.kernel_dilation = {3};
  {
    Case c =
        padded("c5 flip stride 3x1 negative padding", {1, 23, 17, 5}, {24, 3, 4, 5}, 0, 0, false);
    c.params.padding_lo = {-1, 2};
    c.params.padding_hi = {2, -2};
    c.params.stride = {3, 1};
    c.params.flip = true;
    v.push_back(c);
  }
  v.push_back(padded("3d 3x3x3 c4 o40 bias", {1, 5, 9, 11, 4}, {40, 3, 3, 3, 4}, 1, 1, true));
  v.push_back(padded("c4 o72 11x11 (31 k steps)", {1, 30, 26, 4}, {72, 11, 11, 4}, 5, 5, false));
  {
    Case c = padded("c7 o33, strided views", {2, 14, 9, 7}, {33, 3, 3, 7}, 1, 1, true);
    c.x_layout.pad = {0, 1, 3, 5};
    c.x_layout.offset = 3;
    c.w_layout.pad = {0, 0, 1, 2};
    c.out_layout.pad = {0, 1, 2, 3};
    c.out_layout.offset = 5;
    v.push_back(c);
  }
  {
    Case c = padded("groups 4 of 8 -> 8, bias", {2, 13, 11, 32}, {32, 3, 3, 8}, 1, 1, true);
    c.params.groups = 4;
    v.push_back(c);
  }
  {
    Case c = padded("groups 20 of 8 -> 16, flip, dilation 2, stride 2 (column blocks)",
                    {1, 21, 18, 160}, {320, 3, 3, 8}, 2, 1, true);
    c.params.groups = 20;
    c.params.flip = true;
    c.params.kernel_dilation = {2};
    c.params.stride = {2};
    v.push_back(c);
  }
  {
    Case c = padded("groups 3 of 8 -> 32, strided out", {1, 9, 14, 24}, {96, 3, 3, 8}, 1, 1, false);
    c.params.groups = 3;
    c.out_layout.pad = {0, 1, 2, 8};
    v.push_back(c);
  }
  {
    Case c =
        padded("c2 o48, out channels not innermost", {1, 9, 10, 2}, {48, 2, 2, 2}, 0, 0, false);
    c.out_layout.order = {0, 3, 1, 2};
    v.push_back(c);
  }
  return v;
}

void run_direct_case(const Case& c, const DtypePair& d, uint64_t seed) {
  const std::string what = c.name + " [" + dtype_name(d.x) + " -> " + dtype_name(d.out) + "]";
  SCOPED_TRACE(what);
  PreparedConv prepared(c, d, seed);
  const detail::ConvProblem p = gemmkit_test::conv_problem(
      prepared.dx.view, prepared.dw.view, prepared.device_bias, prepared.dout.view, c.params);
  const SmallCPlan plan = plan_or_fail(p);
  if (::testing::Test::HasFailure()) return;
  const auto run = [&](const SmallCPlan& with) {
    return prepared.run([&] { launch_and_wait(p, with); });
  };
  const HostTensor first = run(plan);
  if (gemmkit_test::check_output(first, any_order(prepared.ref), what) != 0) return;
  expect_close_to_cpu(first, prepared.cpu_out, prepared.ref, what + " vs the CPU backend");
  EXPECT_TRUE(gemmkit_test::same_bits(first, run(plan))) << what << ": run-to-run difference";
  SmallCPlan small = plan;
  small.grid = std::min<int64_t>(3, plan.tiles);
  EXPECT_TRUE(gemmkit_test::same_bits(first, run(small))) << what << ": grid of 3 differs";
}

const DtypePair kPairs[] = {{DType::bf16, DType::bf16},
                            {DType::f16, DType::f16},
                            {DType::bf16, DType::f32},
                            {DType::f16, DType::f32}};

TEST(GpuConvSmallC, ParameterMatrix) {
  GEMMKIT_REQUIRE_GPU();
  uint64_t seed = 9100;
  for (const DtypePair& d : kPairs) {
    for (const Case& c : matrix()) run_direct_case(c, d, seed += 10);
  }
}

// Row i's bits do not depend on the batch: a batch of 5 against each image run alone.
TEST(GpuConvSmallC, BatchInvariant) {
  GEMMKIT_REQUIRE_GPU();
  Case c = padded("stem batch 5", {5, 40, 36, 3}, {64, 7, 7, 3}, 3, 3, true);
  c.params.stride = {2};
  const DtypePair d{DType::bf16, DType::bf16};
  PreparedConv batch(c, d, 9500);
  const detail::ConvProblem p = gemmkit_test::conv_problem(
      batch.dx.view, batch.dw.view, batch.device_bias, batch.dout.view, c.params);
  const HostTensor all = batch.run([&] { launch_and_wait(p, plan_or_fail(p)); });
  const int64_t image_x = 40 * 36 * 3, image_out = all.numel() / 5;
  for (int64_t i = 0; i < 5; ++i) {
    const Tensor xi = Tensor::contiguous(static_cast<char*>(batch.dx.view.data) + i * image_x * 2,
                                         DType::bf16, kGpu, {1, 40, 36, 3});
    gemmkit_test::DeviceTensor one = gemmkit_test::to_device(
        gemmkit_test::make_tensor(DType::bf16, {1, all.shape[1], all.shape[2], 64}));
    one.buffer.fill_bytes(0xFF);
    const detail::ConvProblem pi =
        gemmkit_test::conv_problem(xi, batch.dw.view, batch.device_bias, one.view, c.params);
    launch_and_wait(pi, plan_or_fail(pi));
    const std::vector<uint8_t> bytes = testing::download(one.buffer);
    EXPECT_EQ(0, std::memcmp(bytes.data(), all.storage.data() + i * image_out * 2,
                             static_cast<std::size_t>(image_out * 2)))
        << "image " << i << " differs from its row of the batch";
  }
}

// The suites' stems through conv(): auto takes the small-c kernel (or cuDNN where the race finds
// it faster), algo 'implicit' takes it; checked against the references (run_case).
TEST(GpuConvSmallC, DispatcherOnStems) {
  GEMMKIT_REQUIRE_GPU();
  ConvCase stem = make_case("resnet stem 7x7 s2 (n 2)", {2, 224, 224, 3}, {64, 7, 7, 3},
                            {"implicit"}, "cuda.conv.small_c");
  stem.params.stride = {2};
  stem.params.padding_lo = {3};
  stem.params.padding_hi = {3};
  ConvCase vae = make_case("sd-vae conv_in 3x3 c3 o128 at 256x256", {1, 256, 256, 3},
                           {128, 3, 3, 3}, {"implicit"}, "cuda.conv.small_c");
  vae.params.padding_lo = {1};
  vae.params.padding_hi = {1};
  vae.bias = true;
  ConvCase resnext = make_case("resnext50 3x3 groups 32 of 8 (n 2)", {2, 56, 56, 256},
                               {256, 3, 3, 8}, {}, "cuda.conv.small_c");
  resnext.params.groups = 32;
  resnext.params.padding_lo = {1};
  resnext.params.padding_hi = {1};
  uint64_t seed = 9600;
  for (const ConvCase& c : {stem, vae, resnext}) {
    conv_test::run_case(c, {DType::bf16, DType::bf16}, seed += 10);
  }
}

// Small cases for compute-sanitizer (memcheck, racecheck, synccheck): a stem tile with padding on
// every side and a bias, column blocks with an N tail, f32 out by elements.
TEST(GpuConvSmallCSanitize, Cases) {
  GEMMKIT_REQUIRE_GPU();
  Case stem = padded("sanitize stem", {1, 19, 21, 3}, {64, 7, 7, 3}, 3, 3, true);
  stem.params.stride = {2};
  Case wide = padded("sanitize column blocks", {1, 9, 11, 5}, {140, 3, 3, 5}, 1, 1, false);
  wide.out_layout.pad = {0, 0, 1, 3};
  Case grouped = padded("sanitize groups", {1, 7, 9, 40}, {40, 3, 3, 8}, 1, 1, true);
  grouped.params.groups = 5;
  run_direct_case(stem, {DType::bf16, DType::bf16}, 9700);
  run_direct_case(wide, {DType::f16, DType::f32}, 9710);
  run_direct_case(grouped, {DType::bf16, DType::bf16}, 9720);
}

}  // namespace
}  // namespace gemmkit
#endif
