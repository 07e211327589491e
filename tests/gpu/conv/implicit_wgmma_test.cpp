// GPU tests of the Hopper implicit-GEMM convolution kernel (implicit_gemm/wgmma.cuh), launched
// directly through launch_conv_implicit_wgmma: a parameter matrix (1-3 spatial dims, strides up
// to 4, asymmetric and negative padding, kernel dilation, flip, transposed convolutions as stride
// phases, groups with c/groups 64 and 128, k blocks of 64 and of 32 channels,
// bias, position, channel and reduction tails, strided x / out views, the reduction in k
// segments) on every dtype pair,
// against the double reference and the CPU backend, outputs poisoned before each run; the same
// bits run to run, from a grid of 3 CTAs, from 128- and 256-position tiles, from 64- and
// 128-channel tiles (the narrow-o form against the two consumers on channel halves), from the
// ping-pong schedule (wgmma_pingpong.cuh; on grids of 1, 3 and the plan's) against the cooperative
// one, from the halo form (wgmma_halo.cuh) against the cooperative kernel, and for each image
// alone against the batch (batch invariance), parallel against chained segments; VAE layers.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "conv/problem_spec.h"
#include "gpu/conv/test_util.h"
#include "gpu/gpu_test_util.h"
#include "reference_double.h"

#ifdef GEMMKIT_WITH_CUDA
#include <cuda_runtime.h>

#include "api/validate.h"
#include "common/problems.h"
#include "cuda/conv/common/launch.h"
#include "cuda/conv/common/request.h"
#include "cuda/conv/implicit_gemm/wgmma_launch.h"
#include "cuda/conv/implicit_gemm/wgmma_plan.h"

namespace gemmkit {
namespace {

using cuda::conv_impl::ImplicitWgmmaPlan;
using gemmkit_test::any_order;
using gemmkit_test::conv_problem;
using gemmkit_test::conv_spec;
using gemmkit_test::DeviceTensor;
using gemmkit_test::DtypePair;
using gemmkit_test::expect_close_to_cpu;
using gemmkit_test::HostTensor;
using gemmkit_test::PreparedConv;
using gemmkit_test::to_device;

using Case = gemmkit_test::ConvSpec;

bool on_hopper() {
  const cuda::conv_impl::DeviceDescription dev = cuda::conv_impl::describe_device(0);
  return dev.sm_major == 9 && dev.sm_minor == 0;
}

#define GEMMKIT_REQUIRE_HOPPER() \
  GEMMKIT_REQUIRE_GPU();         \
  if (!on_hopper()) GTEST_SKIP() << "the wgmma kernel is built for sm_90a"

// The plan auto makes (block_n 0), or the one-chain plan of block_n positions, block_o channels
// per tile and block_c channels per k block (0: as auto chooses).
ImplicitWgmmaPlan plan_or_fail(const detail::ConvProblem& p, int block_n = 0,
                               int block_o = cuda::conv_impl::kWgmmaConvBlockO, int block_c = 0) {
  const cuda::conv_impl::DeviceDescription dev = cuda::conv_impl::describe_device(0);
  EXPECT_EQ(cuda::conv_impl::why_not_implicit_wgmma(p, dev), "");
  return block_n ? cuda::conv_impl::implicit_wgmma_plan_for(p, dev, block_n, {0, 0, 0}, 1, 0,
                                                            block_o, block_c)
                 : cuda::conv_impl::implicit_wgmma_plan(p, dev,
                                                        cuda::conv_impl::kDefaultWorkspaceBytes);
}

// The halo form of p's 256-position plan, where it can run.
std::optional<ImplicitWgmmaPlan> halo_plan(const detail::ConvProblem& p) {
  const ImplicitWgmmaPlan t = cuda::conv_impl::implicit_wgmma_with_halo(
      plan_or_fail(p, 256), cuda::conv_impl::WgmmaHaloChoice::on);
  if (!t.halo) return std::nullopt;
  return t;
}

// Whether p can take 64-channel tiles (one stride phase).
bool narrow_o_applies(const ImplicitWgmmaPlan& plan) {
  return cuda::conv_impl::implicit_wgmma_phase_count(plan) == 1;
}

void launch_and_wait(const detail::ConvProblem& p, const ImplicitWgmmaPlan& plan) {
  cuda::conv_impl::launch_conv_implicit_wgmma(p, plan, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// The ping-pong form of p's 128-position plan on `grid` CTAs (0: the plan's), where it can run.
std::optional<ImplicitWgmmaPlan> pingpong_plan(const detail::ConvProblem& p, int64_t grid = 0) {
  ImplicitWgmmaPlan t = plan_or_fail(p, 128);
  if (!cuda::conv_impl::implicit_wgmma_can_pingpong(t)) return std::nullopt;
  t.pingpong = true;
  if (grid > 0) t.grid = std::min(grid, t.grid);
  return t;
}

std::vector<Case> matrix() {
  std::vector<Case> v;
  {
    Case c = conv_spec("1d stride 2 pad 1/2 bias", {2, 333, 64}, {24, 3, 64});
    c.params.stride = {2};
    c.params.padding_lo = {1};
    c.params.padding_hi = {2};
    c.bias = true;
    v.push_back(c);
  }
  {
    Case c = conv_spec("2d 3x3 pad 1 c64 o136 bias (position and channel tails)", {2, 19, 21, 64},
                       {136, 3, 3, 64});
    c.params.padding_lo = {1};
    c.params.padding_hi = {1};
    c.bias = true;
    v.push_back(c);
  }
  {
    Case c =
        conv_spec("2d 3x3 pad 1 c64 o64 bias (64-channel tiles)", {2, 20, 18, 64}, {64, 3, 3, 64});
    c.params.padding_lo = {1};
    c.params.padding_hi = {1};
    c.bias = true;
    v.push_back(c);
  }
  {
    Case c = conv_spec("2d asymmetric pad, kernel dilation 2, stride 2x1, c 40", {1, 23, 19, 40},
                       {40, 3, 2, 40});
    c.params.padding_lo = {2, 0};
    c.params.padding_hi = {0, 3};
    c.params.kernel_dilation = {2};
    c.params.stride = {2, 1};
    v.push_back(c);
  }
  {
    Case c = conv_spec("2d negative padding (crop) c 16", {2, 12, 12, 16}, {24, 2, 3, 16});
    c.params.padding_lo = {-1, 2};
    c.params.padding_hi = {-2, -1};
    v.push_back(c);
  }
  {
    Case c = conv_spec("groups 2 (c/g 64) stride 2", {2, 15, 13, 128}, {64, 3, 3, 64});
    c.params.groups = 2;
    c.params.stride = {2};
    c.params.padding_lo = {1};
    c.params.padding_hi = {1};
    v.push_back(c);
  }
  {
    Case c =
        conv_spec("groups 2 (c/g 128), odd o/groups (7) bias", {1, 10, 10, 256}, {14, 3, 3, 128});
    c.params.groups = 2;
    c.params.padding_lo = {1};
    c.params.padding_hi = {1};
    c.bias = true;
    v.push_back(c);
  }
  {
    Case c = conv_spec("3d stride 1x2x1 pad 1 c 24", {1, 5, 9, 7, 24}, {24, 3, 2, 3, 24});
    c.params.padding_lo = {1};
    c.params.padding_hi = {1};
    c.params.stride = {1, 2, 1};
    v.push_back(c);
  }
  {
    Case c = conv_spec("c 8 o 200 stride 4", {1, 31, 37, 8}, {200, 3, 3, 8});
    c.params.padding_lo = {1};
    c.params.padding_hi = {1};
    c.params.stride = {4};
    v.push_back(c);
  }
  {
    Case c = conv_spec("c 136 flip, odd spatial, batch 3", {3, 13, 11, 136}, {130, 3, 3, 136});
    c.params.flip = true;
    c.params.padding_lo = {2, 0};
    c.params.padding_hi = {0, 1};
    v.push_back(c);
  }
  {
    Case c = conv_spec("x and out strided views", {2, 14, 9, 32}, {48, 3, 3, 32});
    c.params.padding_lo = {1};
    c.params.padding_hi = {1};
    c.x_layout.pad = {0, 1, 3, 8};
    c.x_layout.offset = 8;
    c.out_layout.pad = {0, 1, 2, 5};
    c.out_layout.offset = 3;
    c.bias = true;
    v.push_back(c);
  }
  {
    Case c = conv_spec("out channels not innermost", {1, 9, 10, 16}, {40, 3, 3, 16});
    c.out_layout.order = {0, 3, 1, 2};
    v.push_back(c);
  }
  {
    Case c = conv_spec("1x1 over many tiles", {1, 47, 53, 96}, {256, 1, 1, 96});
    v.push_back(c);
  }
  {
    Case c =
        conv_spec("transposed k4 s2 p1 (4 stride phases) bias", {2, 13, 11, 64}, {72, 4, 4, 64});
    c.params = conv_transpose_params({4, 4}, {2, 2}, {1, 1}, {0, 0}, {1, 1}, 1);
    c.bias = true;
    v.push_back(c);
  }
  {
    Case c = conv_spec("transposed k3 s2 output padding 1, groups 2 (c/g 64)", {1, 9, 10, 128},
                       {40, 3, 3, 64});
    c.params = conv_transpose_params({3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 2);
    v.push_back(c);
  }
  {
    Case c = conv_spec("transposed 1-D k5 s3 c 24", {2, 37, 24}, {16, 5, 24});
    c.params = conv_transpose_params({5}, {3}, {2}, {1}, {1}, 1);
    v.push_back(c);
  }
  {
    // 8 stride phases: two launches of 4 phases sharing each grid.
    Case c = conv_spec("transposed 3-D k2 s2 (8 phases) bias", {1, 4, 6, 5, 64}, {48, 2, 2, 2, 64});
    c.params = conv_transpose_params({2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, 1);
    c.bias = true;
    v.push_back(c);
  }
  {
    Case c = conv_spec("dilated 3x3 d2 c128 o128 bias", {1, 20, 20, 128}, {128, 3, 3, 128});
    c.params.padding_lo = {2};
    c.params.padding_hi = {2};
    c.params.kernel_dilation = {2};
    c.bias = true;
    v.push_back(c);
  }
  {
    // The halo form (tiles of one output row, three taps along w): channel tails of o and c.
    Case c = conv_spec("halo: 3x3 pad 1 c112 o136 bias, rows of 512", {1, 2, 512, 112},
                       {136, 3, 3, 112});
    c.params.padding_lo = {1};
    c.params.padding_hi = {1};
    c.bias = true;
    v.push_back(c);
  }
  {
    Case c = conv_spec("halo: kernel dilation 2 along w, groups 2, a row of 260", {1, 1, 260, 128},
                       {64, 3, 3, 64});
    c.params.groups = 2;
    c.params.kernel_dilation = {1, 2};
    c.params.padding_lo = {1, 2};
    c.params.padding_hi = {1, 2};
    v.push_back(c);
  }
  {
    // 32-channel k blocks (64-byte rows) as auto takes them: c 32, and c 96 (three full blocks).
    Case c = conv_spec("2d 3x3 pad 1 c32 o200 bias (32-channel k blocks)", {2, 17, 23, 32},
                       {200, 3, 3, 32});
    c.params.padding_lo = {1};
    c.params.padding_hi = {1};
    c.bias = true;
    v.push_back(c);
  }
  {
    Case c = conv_spec("3d 3x3x3 pad 1 c96 o96 (three 32-channel k blocks)", {1, 4, 9, 11, 96},
                       {96, 3, 3, 3, 96});
    c.params.padding_lo = {1};
    c.params.padding_hi = {1};
    v.push_back(c);
  }
  {
    // Small images, long K: the reduction in 4 segments (parallel partials and the fold).
    Case c = conv_spec("k split 4 segments c256 o64 bias", {1, 8, 8, 256}, {64, 3, 3, 256});
    c.params.padding_lo = {1};
    c.params.padding_hi = {1};
    c.bias = true;
    v.push_back(c);
  }
  {
    Case c = conv_spec("k split, channel tails c200 o72", {2, 6, 7, 200}, {72, 3, 3, 200});
    c.params.padding_lo = {1, 0};
    c.params.padding_hi = {0, 1};
    v.push_back(c);
  }
  return v;
}

// One case on one dtype pair: the double reference, the CPU backend, poisoned outputs, and the
// same bits run to run, from a grid of 3 CTAs and from the other tile width.
void run_case(const Case& c, const DtypePair& d, uint64_t seed) {
  const std::string what = c.name + " [" + dtype_name(d.x) + " -> " + dtype_name(d.out) + "]";
  SCOPED_TRACE(what);
  PreparedConv prepared(c, d, seed);
  const detail::ConvProblem p = conv_problem(prepared.dx.view, prepared.dw.view,
                                             prepared.device_bias, prepared.dout.view, c.params);
  const ImplicitWgmmaPlan plan = plan_or_fail(p);
  if (::testing::Test::HasFailure()) return;
  const auto run = [&](const ImplicitWgmmaPlan& with) {
    return prepared.run([&] { launch_and_wait(p, with); });
  };
  const HostTensor first = run(plan);
  if (gemmkit_test::check_output(first, any_order(prepared.ref), what) != 0) return;
  expect_close_to_cpu(first, prepared.cpu_out, prepared.ref, what + " vs the CPU backend");
  EXPECT_TRUE(gemmkit_test::same_bits(first, run(plan))) << what << ": run-to-run difference";
  ImplicitWgmmaPlan small = plan;
  small.grid = 3;
  EXPECT_TRUE(gemmkit_test::same_bits(first, run(small))) << what << ": grid of 3 differs";
  if (plan.k_segments > 1) {
    // The same segments chained in the CTA (no workspace) against the parallel form.
    EXPECT_TRUE(plan.split_parallel) << what;
    const ImplicitWgmmaPlan chained = cuda::conv_impl::implicit_wgmma_plan_for(
        p, cuda::conv_impl::describe_device(0), 128, {0, 0, 0}, plan.k_segments, 0);
    EXPECT_FALSE(chained.split_parallel);
    EXPECT_TRUE(gemmkit_test::same_bits(first, run(chained)))
        << what << ": chained segments differ from the parallel ones";
    return;
  }
  // The other k block width (32 or 64 channels): the same k16 steps in the same order.
  const int other_c = plan.block_c == 64 ? 32 : 64;
  const ImplicitWgmmaPlan width = plan_or_fail(p, plan.block_n, plan.block_o, other_c);
  EXPECT_TRUE(gemmkit_test::same_bits(first, run(width)))
      << what << ": " << cuda::conv_impl::to_string(width) << " differs";
  const ImplicitWgmmaPlan other = plan_or_fail(p, plan.block_n == 256 ? 128 : 256);
  EXPECT_TRUE(gemmkit_test::same_bits(first, run(other)))
      << what << ": " << other.block_n << "-position tiles differ";
  // The halo form (one row per tile, three taps along w), on the plan's grid and on 3 CTAs.
  if (std::optional<ImplicitWgmmaPlan> halo = halo_plan(p)) {
    EXPECT_TRUE(gemmkit_test::same_bits(first, run(*halo)))
        << what << ": " << cuda::conv_impl::to_string(*halo) << " differs";
    halo->grid = std::min<int64_t>(3, halo->grid);
    EXPECT_TRUE(gemmkit_test::same_bits(first, run(*halo))) << what << ": halo on 3 CTAs differs";
  }
  if (narrow_o_applies(plan)) {
    // The other channel width per tile, at both tile widths.
    const int other_o = plan.block_o == 64 ? 128 : 64;
    for (const int block_n : {128, 256}) {
      const ImplicitWgmmaPlan o = plan_or_fail(p, block_n, other_o);
      EXPECT_TRUE(gemmkit_test::same_bits(first, run(o)))
          << what << ": " << cuda::conv_impl::to_string(o) << " differs";
    }
  }
  // The ping-pong schedule: the same bits, each consumer warpgroup on one or many tiles.
  for (const int64_t grid : {int64_t{0}, int64_t{3}, int64_t{1}}) {
    const std::optional<ImplicitWgmmaPlan> pp = pingpong_plan(p, grid);
    if (!pp) break;
    EXPECT_TRUE(gemmkit_test::same_bits(first, run(*pp)))
        << what << ": the ping-pong schedule differs (" << cuda::conv_impl::to_string(*pp) << ")";
  }
}

TEST(GpuConvImplicitWgmma, ParameterMatrix) {
  GEMMKIT_REQUIRE_HOPPER();
  const DtypePair pairs[] = {{DType::bf16, DType::bf16},
                             {DType::f16, DType::f16},
                             {DType::bf16, DType::f32},
                             {DType::f16, DType::f32}};
  uint64_t seed = 9000;
  for (const DtypePair& d : pairs) {
    for (const Case& c : matrix()) run_case(c, d, seed += 10);
  }
}

// Small cases of the matrix (2-D padded with tails, strided with groups, 3-D, cropped, transposed)
// with both tile widths, both channel widths and the ping-pong schedule, sized for
// compute-sanitizer (scripts/device.sh
// runs every *Sanitize* test under memcheck, racecheck and synccheck).
TEST(GpuConvSanitize, ImplicitWgmma) {
  GEMMKIT_REQUIRE_HOPPER();
  const std::vector<Case> cases = matrix();
  uint64_t seed = 9500;
  for (const std::size_t i :
       {std::size_t{1}, std::size_t{2}, std::size_t{4}, std::size_t{5}, std::size_t{7},
        std::size_t{13}, std::size_t{16}, cases.size() - 6, cases.size() - 5, cases.size() - 4,
        cases.size() - 3, cases.size() - 2}) {
    const Case& c = cases.at(i);
    PreparedConv prepared(c, {DType::bf16, DType::bf16}, seed += 10);
    const detail::ConvProblem p = conv_problem(prepared.dx.view, prepared.dw.view,
                                               prepared.device_bias, prepared.dout.view, c.params);
    // Both tile widths, or (the k-split case) the parallel and the chained segments.
    const ImplicitWgmmaPlan chosen = plan_or_fail(p);
    // The other channel width at both tile widths.
    const int other_c = chosen.block_c == 64 ? 32 : 64;
    std::vector<ImplicitWgmmaPlan> plans{plan_or_fail(p, 128), plan_or_fail(p, 256),
                                         plan_or_fail(p, 128, 128, other_c),
                                         plan_or_fail(p, 256, 128, other_c)};
    if (narrow_o_applies(chosen)) {
      plans.push_back(plan_or_fail(p, 128, 64));
      plans.push_back(plan_or_fail(p, 256, 64));
    }
    if (const std::optional<ImplicitWgmmaPlan> pp = pingpong_plan(p, 3)) plans.push_back(*pp);
    if (const std::optional<ImplicitWgmmaPlan> halo = halo_plan(p)) plans.push_back(*halo);
    if (chosen.k_segments > 1) {
      plans = {chosen,
               cuda::conv_impl::implicit_wgmma_plan_for(p, cuda::conv_impl::describe_device(0), 128,
                                                        {0, 0, 0}, chosen.k_segments, 0)};
    }
    for (const ImplicitWgmmaPlan& plan : plans) {
      const HostTensor got = prepared.run([&] { launch_and_wait(p, plan); });
      EXPECT_EQ(gemmkit_test::check_output(got, any_order(prepared.ref), c.name), 0)
          << cuda::conv_impl::to_string(plan);
    }
  }
}

// Each image of a batch alone gives the bytes it has inside the batch: a batch of 3 of one chain
// per output, a batch of 5 small images whose reduction runs in segments, in parallel for an
// image alone and chained in the CTA for the batch (its tiles fill the machine), and a batch of 4
// in 64-channel tiles.
void expect_batch_invariant(int64_t n, int64_t h, int64_t wd, int64_t c, int64_t o, uint64_t seed) {
  SCOPED_TRACE("batch " + std::to_string(n) + " of " + std::to_string(h) + "x" +
               std::to_string(wd) + " c" + std::to_string(c) + " o" + std::to_string(o));
  ConvParams params;
  params.padding_lo = {1};
  params.padding_hi = {1};
  const HostTensor x = gemmkit_test::random_tensor(DType::bf16, {n, h, wd, c}, seed);
  const HostTensor w = gemmkit_test::random_tensor(DType::bf16, {o, 3, 3, c}, seed + 1);
  const HostTensor b = gemmkit_test::random_tensor(DType::bf16, {o}, seed + 2);
  const DeviceTensor dx = to_device(x), dw = to_device(w), db = to_device(b);
  const std::vector<int64_t> out_shape{n, h, wd, o};
  DeviceTensor dout = to_device(gemmkit_test::make_tensor(DType::bf16, out_shape));
  dout.buffer.fill_bytes(0xFF);
  const detail::ConvProblem batch = conv_problem(dx.view, dw.view, db.view, dout.view, params);
  const ImplicitWgmmaPlan batch_plan = plan_or_fail(batch);
  launch_and_wait(batch, batch_plan);
  const std::vector<uint8_t> all = testing::download(dout.buffer);
  const int64_t image_bytes = h * wd * o * 2;
  for (int64_t i = 0; i < n; ++i) {
    Tensor xi = dx.view, oi = dout.view;
    xi.shape[0] = oi.shape[0] = 1;
    xi.data = static_cast<uint8_t*>(dx.view.data) + i * h * wd * c * 2;
    DeviceTensor single = to_device(gemmkit_test::make_tensor(DType::bf16, {1, h, wd, o}));
    single.buffer.fill_bytes(0xFF);
    oi.data = single.view.data;
    const detail::ConvProblem p = conv_problem(xi, dw.view, db.view, oi, params);
    const ImplicitWgmmaPlan alone_plan = plan_or_fail(p);
    EXPECT_EQ(alone_plan.k_segments, batch_plan.k_segments);
    launch_and_wait(p, alone_plan);
    const std::vector<uint8_t> alone = testing::download(single.buffer);
    const std::vector<uint8_t> inside(all.begin() + i * image_bytes,
                                      all.begin() + (i + 1) * image_bytes);
    EXPECT_TRUE(alone == inside) << "image " << i << " alone differs from the batch ("
                                 << cuda::conv_impl::to_string(alone_plan) << " against "
                                 << cuda::conv_impl::to_string(batch_plan) << ")";
  }
}

TEST(GpuConvImplicitWgmma, BatchInvariant) {
  GEMMKIT_REQUIRE_HOPPER();
  expect_batch_invariant(3, 37, 45, 128, 192, 81);
  expect_batch_invariant(5, 32, 32, 512, 512, 84);
  // Small images whose 128-channel tiles would split K: one chain of 64-channel tiles instead,
  // for an image alone as in the batch.
  expect_batch_invariant(4, 28, 28, 128, 128, 87);
}

// A VAE layer (size x size x 512 -> 512, 3x3, bias) against the double reference and the CPU
// backend, with the reduction in `segments` k segments.
void expect_vae_layer(int64_t size, int segments, uint64_t seed) {
  const std::string what =
      "vae mid 3x3 512 at " + std::to_string(size) + "x" + std::to_string(size);
  Case c = conv_spec(what, {1, size, size, 512}, {512, 3, 3, 512});
  c.params.padding_lo = {1};
  c.params.padding_hi = {1};
  c.bias = true;
  PreparedConv prepared(c, {DType::bf16, DType::bf16}, seed);
  const detail::ConvProblem p = conv_problem(prepared.dx.view, prepared.dw.view,
                                             prepared.device_bias, prepared.dout.view, c.params);
  const ImplicitWgmmaPlan plan = plan_or_fail(p);
  EXPECT_EQ(plan.k_segments, segments) << cuda::conv_impl::to_string(plan);
  EXPECT_EQ(plan.split_parallel, segments > 1);
  const HostTensor got = prepared.run([&] { launch_and_wait(p, plan); });
  EXPECT_EQ(gemmkit_test::check_output(got, any_order(prepared.ref), what), 0);
  expect_close_to_cpu(got, prepared.cpu_out, prepared.ref, what + " vs the CPU backend");
  if (segments > 1) return;
  const std::optional<ImplicitWgmmaPlan> pp = pingpong_plan(p);
  ASSERT_TRUE(pp.has_value());
  EXPECT_TRUE(gemmkit_test::same_bits(got, prepared.run([&] { launch_and_wait(p, *pp); })))
      << what << ": the ping-pong schedule differs";
}

// The layer of the suites with the most k blocks per tile (128 x 128, the VAE at 1024x1024).
TEST(GpuConvImplicitWgmma, VaeLayer) {
  GEMMKIT_REQUIRE_HOPPER();
  expect_vae_layer(128, 1, 91);
}

// The same layer at 32 x 32 (the VAE at 256x256): the reduction in 4 parallel segments.
TEST(GpuConvImplicitWgmma, VaeLayerInSegments) {
  GEMMKIT_REQUIRE_HOPPER();
  expect_vae_layer(32, 4, 93);
}

}  // namespace
}  // namespace gemmkit

#else

TEST(GpuConvImplicitWgmma, SkippedWithoutCuda) {
  GTEST_SKIP() << "built without CUDA";
}

#endif
