// GPU tests of the cuDNN path: a matrix against the reference, the backward-data filter packing
// of transposed convolutions (also sized for compute-sanitizer), forced cuDNN that cannot serve,
// graph capture, and auto's race against an own path.
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
#include "cuda/conv/cudnn/launch.h"
#include "cuda/conv/select.h"
#endif

namespace gemmkit {
namespace {

using namespace conv_test;

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

#ifdef GEMMKIT_WITH_CUDA
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
#endif

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

}  // namespace
}  // namespace gemmkit
