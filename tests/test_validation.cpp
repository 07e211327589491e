// Every class of invalid input is rejected before any work with a gemmkit::Error whose message
// names the argument, its value and the rule broken. Also: shape helpers and DLPack interop.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <vector>

#include "gemmkit/dlpack.h"
#include "gemmkit/gemmkit.h"

namespace gemmkit {
namespace {

const Device kCpu = Device::cpu();

// Runs `call`, expects a gemmkit::Error, and checks that its message contains every fragment.
template <typename Call>
void expect_error(Call call, std::initializer_list<const char*> fragments) {
  try {
    call();
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const char* fragment : fragments) {
      EXPECT_NE(message.find(fragment), std::string::npos)
          << "message \"" << message << "\" lacks \"" << fragment << "\"";
    }
    return;
  }
  ADD_FAILURE() << "no gemmkit::Error was thrown";
}

struct LinearBuffers {
  std::vector<float> x, w, b, out;
  LinearBuffers(int64_t n, int64_t m, int64_t k)
      : x(static_cast<std::size_t>(n * k), 0.5f),
        w(static_cast<std::size_t>(m * k), 0.25f),
        b(static_cast<std::size_t>(m), 1.0f),
        out(static_cast<std::size_t>(n * m), -7.0f) {}
};

TEST(LinearValidation, MismatchedShapes) {
  LinearBuffers buf(2, 3, 4);
  const Tensor x = Tensor::contiguous(buf.x.data(), DType::f32, kCpu, {2, 4});
  expect_error(
      [&] {
        linear(x, Tensor::contiguous(buf.w.data(), DType::f32, kCpu, {3, 5}), std::nullopt,
               Tensor::contiguous(buf.out.data(), DType::f32, kCpu, {2, 3}));
      },
      {"gemmkit::linear", "w", "[3, 5]", "k = 4"});
  expect_error(
      [&] {
        linear(x, Tensor::contiguous(buf.w.data(), DType::f32, kCpu, {3, 4}),
               Tensor::contiguous(buf.b.data(), DType::f32, kCpu, {2}),
               Tensor::contiguous(buf.out.data(), DType::f32, kCpu, {2, 3}));
      },
      {"bias", "[2]", "must have shape [3]"});
}

TEST(LinearValidation, OutputOfTheWrongShape) {
  LinearBuffers buf(2, 3, 4);
  expect_error(
      [&] {
        linear(Tensor::contiguous(buf.x.data(), DType::f32, kCpu, {2, 4}),
               Tensor::contiguous(buf.w.data(), DType::f32, kCpu, {3, 4}), std::nullopt,
               Tensor::contiguous(buf.out.data(), DType::f32, kCpu, {3, 2}));
      },
      {"out", "f32[3, 2]", "must have shape [2, 3]"});
}

TEST(LinearValidation, DtypeMixes) {
  LinearBuffers buf(2, 3, 4);
  const Tensor x = Tensor::contiguous(buf.x.data(), DType::bf16, kCpu, {2, 4});
  const Tensor out = Tensor::contiguous(buf.out.data(), DType::f32, kCpu, {2, 3});
  expect_error(
      [&] {
        linear(x, Tensor::contiguous(buf.w.data(), DType::f16, kCpu, {3, 4}), std::nullopt, out);
      },
      {"w", "dtype f16", "must equal x's dtype bf16"});
  expect_error(
      [&] {
        linear(x, Tensor::contiguous(buf.w.data(), DType::bf16, kCpu, {3, 4}),
               Tensor::contiguous(buf.b.data(), DType::f32, kCpu, {3}), out);
      },
      {"bias", "dtype f32", "must equal x's dtype bf16"});
  expect_error(
      [&] {
        linear(x, Tensor::contiguous(buf.w.data(), DType::bf16, kCpu, {3, 4}), std::nullopt,
               Tensor::contiguous(buf.out.data(), DType::f16, kCpu, {2, 3}));
      },
      {"out", "dtype f16", "must be x's dtype bf16 or f32"});
}

TEST(LinearValidation, UnsupportedDtypeValue) {
  LinearBuffers buf(2, 3, 4);
  Tensor x = Tensor::contiguous(buf.x.data(), DType::f32, kCpu, {2, 4});
  x.dtype = static_cast<DType>(7);  // e.g. an int8 tensor coming through a binding
  expect_error(
      [&] {
        linear(x, Tensor::contiguous(buf.w.data(), DType::f32, kCpu, {3, 4}), std::nullopt,
               Tensor::contiguous(buf.out.data(), DType::f32, kCpu, {2, 3}));
      },
      {"x", "dtype value 7", "must be bf16, f16 or f32"});
}

TEST(LinearValidation, ZeroAndNegativeSizes) {
  LinearBuffers buf(2, 3, 4);
  const Tensor w = Tensor::contiguous(buf.w.data(), DType::f32, kCpu, {3, 4});
  const Tensor out = Tensor::contiguous(buf.out.data(), DType::f32, kCpu, {2, 3});
  expect_error(
      [&] {
        linear(Tensor::contiguous(buf.x.data(), DType::f32, kCpu, {2, 0}), w, std::nullopt, out);
      },
      {"x", "dim 1 has size 0", "every other size >= 1"});
  expect_error(
      [&] {
        linear(Tensor::contiguous(buf.x.data(), DType::f32, kCpu, {2, -4}), w, std::nullopt, out);
      },
      {"x", "dim 1 has size -4", ">= 1"});
}

TEST(LinearValidation, SizeProductsThatOverflow) {
  LinearBuffers buf(2, 3, 4);
  const int64_t huge = int64_t{1} << 40;
  expect_error(
      [&] {
        linear(Tensor::strided(buf.x.data(), DType::f32, kCpu, {huge, huge}, {1, 1}),
               Tensor::contiguous(buf.w.data(), DType::f32, kCpu, {3, 4}), std::nullopt,
               Tensor::contiguous(buf.out.data(), DType::f32, kCpu, {2, 3}));
      },
      {"x", "element count", "overflows int64"});
  expect_error(
      [&] {
        linear(Tensor::strided(buf.x.data(), DType::f32, kCpu, {2, 4},
                               {std::numeric_limits<int64_t>::max() / 2, 1}),
               Tensor::contiguous(buf.w.data(), DType::f32, kCpu, {3, 4}), std::nullopt,
               Tensor::contiguous(buf.out.data(), DType::f32, kCpu, {2, 3}));
      },
      {"x", "overflows int64"});
}

TEST(LinearValidation, StridesBelowOne) {
  LinearBuffers buf(2, 3, 4);
  expect_error(
      [&] {
        linear(Tensor::strided(buf.x.data(), DType::f32, kCpu, {2, 4}, {4, 0}),
               Tensor::contiguous(buf.w.data(), DType::f32, kCpu, {3, 4}), std::nullopt,
               Tensor::contiguous(buf.out.data(), DType::f32, kCpu, {2, 3}));
      },
      {"x", "dim 1 has stride 0", "every stride must be >= 1"});
}

TEST(LinearValidation, NullDataWithElements) {
  LinearBuffers buf(2, 3, 4);
  expect_error(
      [&] {
        linear(Tensor::contiguous(nullptr, DType::f32, kCpu, {2, 4}),
               Tensor::contiguous(buf.w.data(), DType::f32, kCpu, {3, 4}), std::nullopt,
               Tensor::contiguous(buf.out.data(), DType::f32, kCpu, {2, 3}));
      },
      {"x", "data is null", "8 elements"});
}

TEST(LinearValidation, TensorsOnDifferentDevices) {
  LinearBuffers buf(2, 3, 4);
  expect_error(
      [&] {
        linear(Tensor::contiguous(buf.x.data(), DType::f32, kCpu, {2, 4}),
               Tensor::contiguous(buf.w.data(), DType::f32, Device::cuda(0), {3, 4}), std::nullopt,
               Tensor::contiguous(buf.out.data(), DType::f32, kCpu, {2, 3}));
      },
      {"w", "is on cuda:0 but x is on cpu", "one device"});
}

TEST(LinearValidation, OutputsMustNotOverlapOrAlias) {
  LinearBuffers buf(2, 3, 4);
  const Tensor x = Tensor::contiguous(buf.x.data(), DType::f32, kCpu, {2, 4});
  const Tensor w = Tensor::contiguous(buf.w.data(), DType::f32, kCpu, {3, 4});
  expect_error(
      [&] {
        linear(x, w, std::nullopt,
               Tensor::strided(buf.out.data(), DType::f32, kCpu, {2, 3}, {1, 1}));
      },
      {"out", "elements overlap", "must not overlap itself"});
  expect_error(
      [&] {
        linear(x, w, std::nullopt, Tensor::contiguous(buf.x.data(), DType::f32, kCpu, {2, 3}));
      },
      {"out", "overlaps x", "must not alias"});
}

TEST(LinearValidation, WrongRankAndUnknownKernel) {
  LinearBuffers buf(2, 3, 4);
  expect_error(
      [&] {
        linear(Tensor::contiguous(buf.x.data(), DType::f32, kCpu, {2, 2, 2}),
               Tensor::contiguous(buf.w.data(), DType::f32, kCpu, {3, 4}), std::nullopt,
               Tensor::contiguous(buf.out.data(), DType::f32, kCpu, {2, 3}));
      },
      {"x", "has rank 3", "rank 2 is required"});
  LinearOptions options;
  options.kernel = "ring16";
  expect_error(
      [&] {
        linear(Tensor::contiguous(buf.x.data(), DType::f32, kCpu, {2, 4}),
               Tensor::contiguous(buf.w.data(), DType::f32, kCpu, {3, 4}), std::nullopt,
               Tensor::contiguous(buf.out.data(), DType::f32, kCpu, {2, 3}), options);
      },
      {"options.kernel", "'ring16'", "CPU backend"});
}

TEST(LinearValidation, NothingIsWrittenOnError) {
  LinearBuffers buf(2, 3, 4);
  linear(Tensor::contiguous(buf.x.data(), DType::f32, kCpu, {2, 4}),
         Tensor::contiguous(buf.w.data(), DType::f32, kCpu, {3, 4}), std::nullopt,
         Tensor::contiguous(buf.out.data(), DType::f32, kCpu, {2, 3}));
  EXPECT_FLOAT_EQ(buf.out[0], 0.5f);  // 4 * 0.5 * 0.25
  std::fill(buf.out.begin(), buf.out.end(), -7.0f);
  EXPECT_THROW(linear(Tensor::contiguous(buf.x.data(), DType::f32, kCpu, {2, 4}),
                      Tensor::contiguous(buf.w.data(), DType::f32, kCpu, {3, 4}),
                      Tensor::contiguous(buf.b.data(), DType::f32, kCpu, {4}),
                      Tensor::contiguous(buf.out.data(), DType::f32, kCpu, {2, 3})),
               Error);
  for (float v : buf.out) EXPECT_EQ(v, -7.0f);
}

// ---- conv -------------------------------------------------------------------------------------

struct ConvBuffers {
  std::vector<float> x = std::vector<float>(4096, 0.5f), w = std::vector<float>(4096, 0.5f),
                     b = std::vector<float>(64, 0.f), out = std::vector<float>(4096, 0.f);
};

TEST(ConvValidation, ShapesParametersAndGroups) {
  ConvBuffers buf;
  const Tensor x = Tensor::contiguous(buf.x.data(), DType::f32, kCpu, {1, 8, 8, 4});
  const auto w = [&](std::vector<int64_t> shape) {
    return Tensor::contiguous(buf.w.data(), DType::f32, kCpu, shape);
  };
  const auto out = [&](std::vector<int64_t> shape) {
    return Tensor::contiguous(buf.out.data(), DType::f32, kCpu, shape);
  };
  ConvParams p;
  expect_error(
      [&] {
        conv(x, w({6, 3, 3, 3}), std::nullopt, out({1, 6, 6, 6}), p);
      },
      {"weight", "last dim must be c / groups = 4 / 1 = 4"});
  p.groups = 3;
  expect_error(
      [&] {
        conv(x, w({6, 3, 3, 1}), std::nullopt, out({1, 6, 6, 6}), p);
      },
      {"params.groups", "3", "must divide the input channels c = 4"});
  p.groups = 2;
  expect_error(
      [&] {
        conv(x, w({5, 3, 3, 2}), std::nullopt, out({1, 6, 6, 5}), p);
      },
      {"params.groups", "must divide the output channels o = 5"});
  p.groups = 0;
  expect_error(
      [&] {
        conv(x, w({6, 3, 3, 4}), std::nullopt, out({1, 6, 6, 6}), p);
      },
      {"params.groups", "0", ">= 1"});
  p = ConvParams{};
  expect_error(
      [&] {
        conv(x, w({6, 3, 3, 4}), std::nullopt, out({1, 8, 8, 6}), p);
      },
      {"out", "f32[1, 8, 8, 6]", "must have shape [1, 6, 6, 6]"});
  expect_error(
      [&] {
        conv(x, w({6, 3, 4}), std::nullopt, out({1, 6, 6, 6}), p);
      },
      {"weight", "has rank 3"});
  expect_error(
      [&] {
        conv(Tensor::contiguous(buf.x.data(), DType::f32, kCpu, {8, 4}), w({6, 3, 4}), std::nullopt,
             out({1, 6, 6}), p);
      },
      {"x", "has rank 2", "1, 2 or 3 spatial dims"});
  expect_error(
      [&] {
        conv(x, w({6, 3, 3, 4}), Tensor::contiguous(buf.b.data(), DType::f32, kCpu, {4}),
             out({1, 6, 6, 6}), p);
      },
      {"bias", "must have shape [6]"});
  p.stride = {1, 1, 1};
  expect_error(
      [&] {
        conv(x, w({6, 3, 3, 4}), std::nullopt, out({1, 6, 6, 6}), p);
      },
      {"params.stride", "has 3 entries", "give 0, 1 or 2"});
}

TEST(ConvValidation, StridesAndDilationsBelowOne) {
  ConvBuffers buf;
  const Tensor x = Tensor::contiguous(buf.x.data(), DType::f32, kCpu, {1, 8, 8, 4});
  const Tensor w = Tensor::contiguous(buf.w.data(), DType::f32, kCpu, {6, 3, 3, 4});
  const Tensor out = Tensor::contiguous(buf.out.data(), DType::f32, kCpu, {1, 6, 6, 6});
  ConvParams p;
  p.stride = {1, 0};
  expect_error([&] { conv(x, w, std::nullopt, out, p); },
               {"params.stride[1]", "0", "must be in [1, 2^20]"});
  p = ConvParams{};
  p.kernel_dilation = {0};
  expect_error([&] { conv(x, w, std::nullopt, out, p); },
               {"params.kernel_dilation[0]", "must be in [1, 2^20]"});
  p = ConvParams{};
  p.input_dilation = {-1, 1};
  expect_error([&] { conv(x, w, std::nullopt, out, p); }, {"params.input_dilation[0]", "-1"});
  expect_error(
      [&] {
        conv(Tensor::strided(buf.x.data(), DType::f32, kCpu, {1, 8, 8, 4}, {256, 32, 4, -1}), w,
             std::nullopt, out, ConvParams{});
      },
      {"x", "dim 3 has stride -1", ">= 1"});
}

TEST(ConvValidation, EmptyOutputZeroSizesNullAndOverflow) {
  ConvBuffers buf;
  const Tensor w = Tensor::contiguous(buf.w.data(), DType::f32, kCpu, {6, 3, 3, 4});
  const Tensor out = Tensor::contiguous(buf.out.data(), DType::f32, kCpu, {1, 6, 6, 6});
  expect_error(
      [&] {
        conv(Tensor::contiguous(buf.x.data(), DType::f32, kCpu, {1, 2, 8, 4}), w, std::nullopt, out,
             ConvParams{});
      },
      {"spatial dim [0]", "smaller than the dilated kernel extent 3", "output would be empty"});
  expect_error(
      [&] {
        conv(Tensor::contiguous(buf.x.data(), DType::f32, kCpu, {1, 0, 8, 4}), w, std::nullopt, out,
             ConvParams{});
      },
      {"x", "dim 1 has size 0"});
  expect_error(
      [&] {
        conv(Tensor::contiguous(nullptr, DType::f32, kCpu, {1, 8, 8, 4}), w, std::nullopt, out,
             ConvParams{});
      },
      {"x", "data is null"});
  const int64_t huge = int64_t{1} << 31;
  expect_error(
      [&] {
        conv(Tensor::strided(buf.x.data(), DType::f32, kCpu, {huge, huge, huge, 4}, {1, 1, 1, 1}),
             w, std::nullopt, out, ConvParams{});
      },
      {"x", "overflows int64"});
}

TEST(ConvValidation, DtypesAndDevices) {
  ConvBuffers buf;
  const Tensor x = Tensor::contiguous(buf.x.data(), DType::bf16, kCpu, {1, 8, 8, 4});
  const Tensor out = Tensor::contiguous(buf.out.data(), DType::bf16, kCpu, {1, 6, 6, 6});
  expect_error(
      [&] {
        conv(x, Tensor::contiguous(buf.w.data(), DType::f16, kCpu, {6, 3, 3, 4}), std::nullopt, out,
             ConvParams{});
      },
      {"weight", "dtype f16", "must equal x's dtype bf16"});
  expect_error(
      [&] {
        conv(x, Tensor::contiguous(buf.w.data(), DType::bf16, kCpu, {6, 3, 3, 4}), std::nullopt,
             Tensor::contiguous(buf.out.data(), DType::f16, kCpu, {1, 6, 6, 6}), ConvParams{});
      },
      {"out", "dtype f16", "must be x's dtype bf16 or f32"});
  expect_error(
      [&] {
        conv(x, Tensor::contiguous(buf.w.data(), DType::bf16, Device::cuda(1), {6, 3, 3, 4}),
             std::nullopt, out, ConvParams{});
      },
      {"weight", "is on cuda:1 but x is on cpu"});
}

TEST(ConvShapes, OutputShapeAndTransposeParams) {
  ConvParams p;
  p.stride = {2};
  p.padding_lo = {1};
  p.padding_hi = {0};
  EXPECT_EQ(conv_output_shape({2, 9, 9, 3}, {5, 3, 3, 3}, p), (std::vector<int64_t>{2, 4, 4, 5}));
  // PyTorch ConvTranspose2d(k=4, s=2, p=1): out = (in - 1) * 2 - 2 + 4 = 2 * in.
  const ConvParams t = conv_transpose_params({4, 4}, {2}, {1}, {0}, {1});
  EXPECT_TRUE(t.flip);
  EXPECT_EQ(t.input_dilation, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(t.padding_lo, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(conv_output_shape({1, 16, 16, 8}, {4, 4, 4, 8}, t),
            (std::vector<int64_t>{1, 32, 32, 4}));
  expect_error([&] { conv_transpose_params({3}, {2}, {0}, {2}, {1}); },
               {"output_padding[0]", "2", "smaller than stride (2) or dilation (1)"});
  expect_error(
      [&] {
        conv_output_shape({1, 4, 4, 3}, {2, 5, 5, 3}, ConvParams{});
      },
      {"gemmkit::conv_output_shape", "output would be empty"});
}

// ---- parsing and DLPack -------------------------------------------------------------------------

TEST(Parsing, DtypesAndDevices) {
  EXPECT_EQ(parse_dtype("bf16"), DType::bf16);
  EXPECT_EQ(parse_dtype("fp32"), DType::f32);
  EXPECT_EQ(parse_device("cuda:3"), Device::cuda(3));
  EXPECT_EQ(parse_device("cpu"), Device::cpu());
  expect_error([] { parse_dtype("int8"); }, {"dtype", "'int8'", "bf16, f16, f32"});
  expect_error([] { parse_device("tpu"); }, {"device", "'tpu'"});
}

TEST(DLPack, RoundTripAndErrors) {
  std::vector<uint16_t> data(24);
  Tensor t = Tensor::strided(data.data(), DType::bf16, kCpu, {2, 3}, {12, 2});
  DLTensor dl = to_dlpack(t);
  EXPECT_EQ(dl.dtype.code, kDLBfloat);
  EXPECT_EQ(dl.strides[0], 12);
  const Tensor back = from_dlpack(dl);
  EXPECT_EQ(back.sizes(), t.sizes());
  EXPECT_EQ(back.stride_vector(), t.stride_vector());
  EXPECT_EQ(back.data, t.data);

  DLManagedTensor* managed = to_dlpack_managed(t);
  EXPECT_EQ(from_dlpack(managed->dl_tensor).stride_vector(), t.stride_vector());
  managed->deleter(managed);

  int64_t shape[2] = {4, 5};
  DLTensor contiguous{};
  contiguous.data = data.data();
  contiguous.device = {kDLCUDA, 2};
  contiguous.ndim = 2;
  contiguous.dtype = {kDLFloat, 32, 1};
  contiguous.shape = shape;
  contiguous.byte_offset = 8;
  const Tensor c = from_dlpack(contiguous);
  EXPECT_EQ(c.device, Device::cuda(2));
  EXPECT_EQ(c.stride_vector(), (std::vector<int64_t>{5, 1}));
  EXPECT_EQ(static_cast<char*>(c.data) - reinterpret_cast<char*>(data.data()), 8);

  DLTensor bad = contiguous;
  bad.dtype = {kDLInt, 8, 1};
  expect_error([&] { from_dlpack(bad); }, {"from_dlpack", "code 0 bits 8", "not supported"});
  bad = contiguous;
  bad.device = {kDLMetal, 0};
  expect_error([&] { from_dlpack(bad); }, {"gemmkit::from_dlpack", "device_type 8"});
}

TEST(Buffers, CpuBufferRoundTripAndRangeChecks) {
  Buffer b(16, kCpu);
  const char text[] = "gemmkit buffers!";
  b.copy_from_host(text, 16);
  char back[16];
  b.copy_to_host(back, 16);
  EXPECT_EQ(std::memcmp(text, back, 16), 0);
  expect_error([&] { b.copy_to_host(back, 8, 12); },
               {"copy_to_host", "outside the buffer of 16 bytes"});
}

}  // namespace
}  // namespace gemmkit

namespace gemmkit {
namespace {

// Without a usable GPU (CI), a call on CUDA tensors is a clear error, never a crash.
TEST(DeviceValidation, CudaTensorsWithoutAUsableGpu) {
  if (!cuda_devices().empty()) GTEST_SKIP() << "a GPU is present";
  std::vector<float> x(8), w(12), out(6);
  const Device gpu = Device::cuda(0);
  expect_error(
      [&] {
        linear(Tensor::contiguous(x.data(), DType::f32, gpu, {2, 4}),
               Tensor::contiguous(w.data(), DType::f32, gpu, {3, 4}), std::nullopt,
               Tensor::contiguous(out.data(), DType::f32, gpu, {2, 3}));
      },
      {built_with_cuda() ? "cuda:0 does not exist" : "no CUDA backend"});
  expect_error([] { Buffer b(64, Device::cuda(0)); },
               {built_with_cuda() ? "cuda:0 does not exist" : "absent in this build"});
}

}  // namespace
}  // namespace gemmkit
