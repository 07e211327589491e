// GPU tests of the shapes that break GEMM-based convolutions (65,536 and 2^26 output positions,
// 70,000 channels, tensors past 2^31 elements, a 2048^2 x 128 conv in chunks), checked at
// sampled outputs against a double formula, on every path that serves them.
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
