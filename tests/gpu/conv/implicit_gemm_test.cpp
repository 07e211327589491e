// GPU tests of the implicit-GEMM convolution kernel (implicit_gemm/implicit_gemm.cuh), launched
// directly through launch_conv_implicit_gemm (before the dispatcher routes to it): a parameter
// matrix (1-3 spatial dims, strides, asymmetric and negative padding, kernel dilation, input
// dilation + flip = transposed conv, groups, bias, M and N tails, strided x / out views, channel
// counts that put several taps in one K stage) on every dtype pair, against the double reference
// and the CPU backend, outputs poisoned before each run, run-to-run bitwise identity and identity
// across grid sizes; and a VAE-sized conv (128 x 128 x 512 -> 512, 3x3) checked at sampled
// outputs against a double formula.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <random>
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
#include "cuda/conv/implicit_gemm/launch.h"
#include "cuda/conv/implicit_gemm/plan.h"

namespace gemmkit {
namespace {

using cuda::conv_impl::ImplicitGemmPlan;
using gemmkit_test::any_order;
using gemmkit_test::conv_problem;
using gemmkit_test::conv_spec;
using gemmkit_test::DeviceTensor;
using gemmkit_test::DtypePair;
using gemmkit_test::expect_close_to_cpu;
using gemmkit_test::HostTensor;
using gemmkit_test::Layout;
using gemmkit_test::PreparedConv;
using gemmkit_test::to_device;

const Device kGpu = Device::cuda(0);

// Plans (the problem must be eligible), launches on the legacy stream, waits.
ImplicitGemmPlan plan_or_fail(const detail::ConvProblem& p) {
  const cuda::conv_impl::DeviceDescription dev = cuda::conv_impl::describe_device(0);
  const std::string why = cuda::conv_impl::why_not_implicit_gemm(p, dev);
  EXPECT_EQ(why, "");
  return cuda::conv_impl::implicit_gemm_plan(p, dev);
}

void launch_and_wait(const detail::ConvProblem& p, const ImplicitGemmPlan& plan) {
  cuda::conv_impl::launch_conv_implicit_gemm(p, plan, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

using Case = gemmkit_test::ConvSpec;

std::vector<Case> matrix() {
  std::vector<Case> v;
  {
    Case c = conv_spec("1d stride 2 pad 1/2 bias", {2, 33, 16}, {24, 3, 16});
    c.params.stride = {2};
    c.params.padding_lo = {1};
    c.params.padding_hi = {2};
    c.bias = true;
    v.push_back(c);
  }
  {
    Case c =
        conv_spec("2d 3x3 pad 1 c64 o136 bias (M and N tails)", {2, 19, 21, 64}, {136, 3, 3, 64});
    c.params.padding_lo = {1};
    c.params.padding_hi = {1};
    c.bias = true;
    v.push_back(c);
  }
  {
    Case c = conv_spec("2d asymmetric pad, kernel dilation 2, stride 2x1", {1, 23, 19, 32},
                       {40, 3, 2, 32});
    c.params.padding_lo = {2, 0};
    c.params.padding_hi = {0, 3};
    c.params.kernel_dilation = {2};
    c.params.stride = {2, 1};
    v.push_back(c);
  }
  {
    Case c = conv_spec("2d negative padding (crop)", {2, 12, 12, 16}, {24, 2, 3, 16});
    c.params.padding_lo = {-1, 2};
    c.params.padding_hi = {-2, -1};
    v.push_back(c);
  }
  {
    Case c = conv_spec("transposed conv k4 s2 (input dilation + flip) groups 2 bias", {1, 9, 7, 32},
                       {48, 4, 4, 16});
    c.params = conv_transpose_params({4, 4}, {2, 2}, {1, 1}, {0, 1}, {1, 1}, 2);
    c.bias = true;
    v.push_back(c);
  }
  {
    Case c = conv_spec("groups 4 stride 2", {2, 15, 13, 64}, {64, 3, 3, 16});
    c.params.groups = 4;
    c.params.stride = {2};
    c.params.padding_lo = {1};
    c.params.padding_hi = {1};
    v.push_back(c);
  }
  {
    Case c = conv_spec("groups 2, odd o/groups (7)", {1, 10, 10, 32}, {14, 3, 3, 16});
    c.params.groups = 2;
    c.params.padding_lo = {1};
    c.params.padding_hi = {1};
    c.bias = true;
    v.push_back(c);
  }
  {
    Case c = conv_spec("3d stride 1x2x1 pad 1", {1, 5, 9, 7, 16}, {24, 3, 2, 3, 16});
    c.params.padding_lo = {1};
    c.params.padding_hi = {1};
    c.params.stride = {1, 2, 1};
    v.push_back(c);
  }
  {
    Case c = conv_spec("c 8 (8 taps a K stage) o 200", {1, 31, 17, 8}, {200, 3, 3, 8});
    c.params.padding_lo = {1};
    c.params.padding_hi = {1};
    v.push_back(c);
  }
  {
    Case c = conv_spec("c 72 flip, odd spatial, batch 3", {3, 13, 11, 72}, {130, 3, 3, 72});
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
    Case c = conv_spec("1x1, M over 4 tiles", {1, 17, 23, 48}, {64, 1, 1, 48});
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
  return v;
}

// One case on one dtype pair: the double reference, the CPU backend, poisoned outputs, run-to-run
// bits, and the same bits from a grid of 3 CTAs looping over every tile.
void run_case(const Case& c, const DtypePair& d, uint64_t seed) {
  const std::string what = c.name + " [" + dtype_name(d.x) + " -> " + dtype_name(d.out) + "]";
  SCOPED_TRACE(what);
  PreparedConv prepared(c, d, seed);
  const detail::ConvProblem p = conv_problem(prepared.dx.view, prepared.dw.view,
                                             prepared.device_bias, prepared.dout.view, c.params);
  const ImplicitGemmPlan plan = plan_or_fail(p);
  if (::testing::Test::HasFailure()) return;
  const auto run = [&](const ImplicitGemmPlan& with) {
    return prepared.run([&] { launch_and_wait(p, with); });
  };
  const HostTensor first = run(plan);
  if (gemmkit_test::check_output(first, any_order(prepared.ref), what) != 0) return;
  expect_close_to_cpu(first, prepared.cpu_out, prepared.ref, what + " vs the CPU backend");
  EXPECT_TRUE(gemmkit_test::same_bits(first, run(plan))) << what << ": run-to-run difference";
  ImplicitGemmPlan small = plan;
  small.grid.x = 3;
  EXPECT_TRUE(gemmkit_test::same_bits(first, run(small))) << what << ": grid of 3 differs";
}

TEST(GpuConvImplicit, ParameterMatrix) {
  GEMMKIT_REQUIRE_GPU();
  const DtypePair pairs[] = {{DType::bf16, DType::bf16},
                             {DType::f16, DType::f16},
                             {DType::bf16, DType::f32},
                             {DType::f16, DType::f32}};
  uint64_t seed = 7000;
  for (const DtypePair& d : pairs) {
    for (const Case& c : matrix()) run_case(c, d, seed += 10);
  }
}

// Several stages of 128 x 128 tiles with every K-loop shape the VAE uses (c = 32 packs two taps
// in a stage; c = 128 / 256 whole taps), each run three times: identical bytes every time.
TEST(GpuConvImplicit, RunToRunBitwise) {
  GEMMKIT_REQUIRE_GPU();
  for (const int64_t c : {32, 128, 256}) {
    const std::vector<int64_t> x_shape{1, 40, 48, c}, w_shape{256, 3, 3, c};
    ConvParams params;
    params.padding_lo = {1};
    params.padding_hi = {1};
    const HostTensor x = gemmkit_test::random_tensor(DType::bf16, x_shape, 300 + c);
    const HostTensor w = gemmkit_test::random_tensor(DType::bf16, w_shape, 400 + c);
    const HostTensor b = gemmkit_test::random_tensor(DType::bf16, {256}, 500 + c);
    const std::vector<int64_t> out_shape = conv_output_shape(x_shape, w_shape, params);
    const DeviceTensor dx = to_device(x), dw = to_device(w), db = to_device(b);
    DeviceTensor dout = to_device(gemmkit_test::make_tensor(DType::bf16, out_shape));
    const detail::ConvProblem p = conv_problem(dx.view, dw.view, db.view, dout.view, params);
    const ImplicitGemmPlan plan = plan_or_fail(p);
    std::vector<uint8_t> first;
    for (int run = 0; run < 3; ++run) {
      dout.buffer.fill_bytes(0xFF);
      launch_and_wait(p, plan);
      const std::vector<uint8_t> bytes = testing::download(dout.buffer);
      if (run == 0) {
        first = bytes;
      } else {
        EXPECT_TRUE(bytes == first) << "c = " << c << ", run " << run;
      }
    }
  }
}

// A VAE decoder conv at 128 x 128 (mid.res0.conv1 of conv-flux2-vae-1024): 512 -> 512 channels,
// 3x3, pad 1, bias, bf16 -> bf16 and bf16 -> f32; 2000 sampled outputs against a double sum.
TEST(GpuConvImplicit, VaeShapeSampledAgainstDouble) {
  GEMMKIT_REQUIRE_GPU();
  const int64_t h = 128, wd = 128, c = 512, o = 512;
  const std::vector<int64_t> x_shape{1, h, wd, c}, w_shape{o, 3, 3, c}, out_shape{1, h, wd, o};
  ConvParams params;
  params.padding_lo = {1};
  params.padding_hi = {1};
  const auto xh = testing::random_host(DType::bf16, h * wd * c, 1.0f, 61);
  const auto wh = testing::random_host(DType::bf16, o * 9 * c, 0.05f, 62);
  const auto bh = testing::random_host(DType::bf16, o, 1.0f, 63);
  Buffer xb = testing::upload(xh, kGpu), wb = testing::upload(wh, kGpu),
         bb = testing::upload(bh, kGpu);
  const Tensor x = Tensor::contiguous(xb.data(), DType::bf16, kGpu, x_shape);
  const Tensor w = Tensor::contiguous(wb.data(), DType::bf16, kGpu, w_shape);
  const Tensor b = Tensor::contiguous(bb.data(), DType::bf16, kGpu, {o});
  const auto xv = [&](int64_t i) { return double(load_as_float(xh.data(), DType::bf16, i)); };
  const auto wv = [&](int64_t i) { return double(load_as_float(wh.data(), DType::bf16, i)); };
  const auto bv = [&](int64_t i) { return double(load_as_float(bh.data(), DType::bf16, i)); };
  for (const DType out_dtype : {DType::bf16, DType::f32}) {
    const std::size_t es = dtype_size(out_dtype);
    Buffer ob(static_cast<std::size_t>(h * wd * o) * es, kGpu);
    ob.fill_bytes(0xFF);
    const Tensor out = Tensor::contiguous(ob.data(), out_dtype, kGpu, out_shape);
    const detail::ConvProblem p = conv_problem(x, w, b, out, params);
    const ImplicitGemmPlan plan = plan_or_fail(p);
    launch_and_wait(p, plan);
    const std::vector<uint8_t> result = testing::download(ob);
    std::mt19937_64 rng(64);
    const int64_t numel = h * wd * o;
    const double u = out_dtype == DType::f32 ? 0.0 : gemmkit_test::unit_roundoff(out_dtype);
    int bad = 0;
    for (int s = 0; s < 2000; ++s) {
      const int64_t flat = s == 0   ? 0
                           : s == 1 ? numel - 1
                                    : static_cast<int64_t>(rng() % static_cast<uint64_t>(numel));
      const int64_t oc = flat % o, pos = flat / o, oy = pos / wd, ox = pos % wd;
      double sum = bv(oc), scale = std::fabs(bv(oc));
      for (int64_t ty = 0; ty < 3; ++ty) {
        for (int64_t tx = 0; tx < 3; ++tx) {
          const int64_t iy = oy + ty - 1, ix = ox + tx - 1;
          if (iy < 0 || iy >= h || ix < 0 || ix >= wd) continue;
          for (int64_t ci = 0; ci < c; ++ci) {
            const double term = xv((iy * wd + ix) * c + ci) * wv(((oc * 3 + ty) * 3 + tx) * c + ci);
            sum += term;
            scale += std::fabs(term);
          }
        }
      }
      const double got = load_as_float(result.data(), out_dtype, flat);
      const double acc = static_cast<double>(9 * c + 6) * std::ldexp(1.0, -24) * scale;
      const double tol = acc + u * (std::fabs(sum) + acc);
      if (!(std::fabs(got - sum) <= tol) && ++bad <= 5) {
        ADD_FAILURE() << dtype_name(out_dtype) << " output " << flat << " = " << got
                      << ", expected " << sum << " (tol " << tol << ")";
      }
    }
    EXPECT_EQ(bad, 0) << dtype_name(out_dtype) << ": " << bad << " of 2000 samples off";
  }
}

// Timing of the kernel alone on the conv-flux2-vae-1024 rows it serves, against the cuDNN times
// of shared/peers/h200-conv.csv. Not a test: run with --gtest_also_run_disabled_tests
// --gtest_filter='*ImplicitTiming*'.
TEST(GpuConvImplicit, DISABLED_ImplicitTimingOfVaeRows) {
  GEMMKIT_REQUIRE_GPU();
  struct Row {
    const char* name;
    int64_t size, c, o, kernel;
    double cudnn_us;
  };
  const Row rows[] = {
      {"conv_in", 128, 32, 512, 3, 20.5},
      {"mid.res0.conv1", 128, 512, 512, 3, 101.8},
      {"up0.upsample.conv", 256, 512, 512, 3, 393.5},
      {"up1.upsample.conv", 512, 512, 512, 3, 1765.4},
      {"up2.res0.conv1", 512, 512, 256, 3, 803.0},
      {"up2.res0.conv2", 512, 256, 256, 3, 415.1},
      {"up2.res0.shortcut", 512, 512, 256, 1, 127.1},
      {"up2.upsample.conv", 1024, 256, 256, 3, 1849.2},
      {"up3.res0.conv1", 1024, 256, 128, 3, 850.8},
      {"up3.res0.conv2", 1024, 128, 128, 3, 445.6},
      {"up3.res0.shortcut", 1024, 256, 128, 1, 196.0},
      {"conv_out", 1024, 128, 3, 3, 322.7},
  };
  cudaEvent_t start = nullptr, stop = nullptr;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&stop), cudaSuccess);
  for (const Row& r : rows) {
    const std::vector<int64_t> x_shape{1, r.size, r.size, r.c},
        w_shape{r.o, r.kernel, r.kernel, r.c}, out_shape{1, r.size, r.size, r.o};
    ConvParams params;
    params.padding_lo = {r.kernel / 2};
    params.padding_hi = {r.kernel / 2};
    Buffer xb =
        testing::upload(testing::random_host(DType::bf16, r.size * r.size * r.c, 1.0f, 1), kGpu);
    Buffer wb = testing::upload(
        testing::random_host(DType::bf16, r.o * r.kernel * r.kernel * r.c, 0.1f, 2), kGpu);
    Buffer bb = testing::upload(testing::random_host(DType::bf16, r.o, 1.0f, 3), kGpu);
    Buffer ob(static_cast<std::size_t>(r.size * r.size * r.o) * 2, kGpu);
    const detail::ConvProblem p =
        conv_problem(Tensor::contiguous(xb.data(), DType::bf16, kGpu, x_shape),
                     Tensor::contiguous(wb.data(), DType::bf16, kGpu, w_shape),
                     Tensor::contiguous(bb.data(), DType::bf16, kGpu, {r.o}),
                     Tensor::contiguous(ob.data(), DType::bf16, kGpu, out_shape), params);
    const ImplicitGemmPlan plan = plan_or_fail(p);
    launch_and_wait(p, plan);  // warm-up
    const int reps = 20;
    ASSERT_EQ(cudaEventRecord(start, nullptr), cudaSuccess);
    for (int i = 0; i < reps; ++i) cuda::conv_impl::launch_conv_implicit_gemm(p, plan, nullptr);
    ASSERT_EQ(cudaEventRecord(stop, nullptr), cudaSuccess);
    ASSERT_EQ(cudaEventSynchronize(stop), cudaSuccess);
    float ms = 0;
    ASSERT_EQ(cudaEventElapsedTime(&ms, start, stop), cudaSuccess);
    const double us = 1000.0 * ms / reps;
    const double tflops = 2.0 * p.macs() / (us * 1e-6) / 1e12;
    std::printf("IMPLICIT %-20s %10.1f us %7.1f TFLOP/s  cudnn %8.1f us  (%.2fx cudnn)  %s\n",
                r.name, us, tflops, r.cudnn_us, us / r.cudnn_us,
                cuda::conv_impl::to_string(plan).c_str());
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
}

}  // namespace
}  // namespace gemmkit

#endif  // GEMMKIT_WITH_CUDA
