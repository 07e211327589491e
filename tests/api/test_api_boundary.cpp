// The public API boundary under hostile input: malformed descriptors (ranks outside 0..8, null
// DLPack shapes, misaligned pointers, sizes whose products overflow int64, out-of-range enum
// values) get a gemmkit::Error naming the argument, its value and the rule, never undefined
// behaviour; valid calls whose operands are large views of small memory run; outputs that do not
// overlap are accepted whatever their stride order; empty batches are valid calls that do no work.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "cpu/cpu_internal.h"
#include "gemmkit/dlpack.h"
#include "gemmkit/gemmkit.h"

namespace gemmkit {
namespace {

const Device kCpu = Device::cpu();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// Runs `call`, expects a gemmkit::Error (any other exception fails the test), and checks that its
// message contains every fragment of `present` and none of `absent`.
template <typename Call>
std::string expect_error(Call call, std::initializer_list<const char*> present,
                         std::initializer_list<const char*> absent = {}) {
  try {
    call();
  } catch (const Error& e) {
    const std::string message = e.what();
    for (const char* fragment : present) {
      EXPECT_NE(message.find(fragment), std::string::npos)
          << "message \"" << message << "\" lacks \"" << fragment << "\"";
    }
    for (const char* fragment : absent) {
      EXPECT_EQ(message.find(fragment), std::string::npos)
          << "message \"" << message << "\" has \"" << fragment << "\"";
    }
    return message;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "a " << typeid(e).name() << " instead of a gemmkit::Error: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no gemmkit::Error was thrown";
  return "";
}

struct LinearCase {
  std::vector<float> x, w, out;
  LinearCase() : x(8, 1.0f), w(12, 0.5f), out(6, -1.0f) {}
  Tensor xt() { return Tensor::contiguous(x.data(), DType::f32, kCpu, {2, 4}); }
  Tensor wt() { return Tensor::contiguous(w.data(), DType::f32, kCpu, {3, 4}); }
  Tensor outt() { return Tensor::contiguous(out.data(), DType::f32, kCpu, {2, 3}); }
};

struct ConvCase {
  std::vector<float> x, w, out;
  ConvCase() : x(2 * 5 * 3, 1.0f), w(4 * 3 * 3, 0.5f), out(2 * 3 * 4, -1.0f) {}
  Tensor xt() { return Tensor::contiguous(x.data(), DType::f32, kCpu, {2, 5, 3}); }
  Tensor wt() { return Tensor::contiguous(w.data(), DType::f32, kCpu, {4, 3, 3}); }
  Tensor outt() { return Tensor::contiguous(out.data(), DType::f32, kCpu, {2, 3, 4}); }
};

// ---- 1. ranks outside 0..kMaxRank --------------------------------------------------------------

TEST(ApiBoundary, RankOutsideTheDescriptorIsAnErrorNotARead) {
  for (const int rank : {9, 16, 17, 1000, -1, std::numeric_limits<int>::min()}) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const std::string value = "rank " + std::to_string(rank);
    {
      LinearCase c;
      Tensor x = c.xt();
      x.rank = rank;
      expect_error([&] { linear(x, c.wt(), std::nullopt, c.outt()); },
                   {"gemmkit::linear: x", value.c_str(), "[0, 8]"});
      Tensor w = c.wt();
      w.rank = rank;
      expect_error([&] { linear(c.xt(), w, std::nullopt, c.outt()); },
                   {"gemmkit::linear: w", value.c_str()});
      Tensor b = Tensor::contiguous(c.w.data(), DType::f32, kCpu, {3});
      b.rank = rank;
      expect_error([&] { linear(c.xt(), c.wt(), b, c.outt()); },
                   {"gemmkit::linear: bias", value.c_str()});
    }
    {
      ConvCase c;
      Tensor x = c.xt();
      x.rank = rank;
      expect_error([&] { conv(x, c.wt(), std::nullopt, c.outt(), {}); },
                   {"gemmkit::conv: x", value.c_str()});
      Tensor out = c.outt();
      out.rank = rank;
      expect_error([&] { conv(c.xt(), c.wt(), std::nullopt, out, {}); },
                   {"gemmkit::conv: out", value.c_str()});
    }
  }
}

TEST(ApiBoundary, DescribingAnIllFormedTensorReadsOnlyItsFields) {
  std::vector<float> data(4);
  Tensor t = Tensor::contiguous(data.data(), DType::f32, kCpu, {2, 2});
  t.rank = 40;
  EXPECT_EQ(t.sizes().size(), 0u);
  EXPECT_NE(t.str().find("rank 40"), std::string::npos) << t.str();
  t.rank = -3;
  EXPECT_EQ(t.stride_vector().size(), 0u);
  expect_error([&] { (void)t.numel(); }, {"rank -3"});
}

TEST(ApiBoundary, BracedAndVectorFactoriesBuildTheSameDescriptor) {
  std::vector<float> data(24);
  const auto same = [](const Tensor& a, const Tensor& b) {
    EXPECT_EQ(a.data, b.data);
    EXPECT_EQ(a.dtype, b.dtype);
    EXPECT_EQ(a.device, b.device);
    EXPECT_EQ(a.rank, b.rank);
    for (int i = 0; i < kMaxRank; ++i) {  // the entries past the rank too
      EXPECT_EQ(a.shape[i], b.shape[i]) << i;
      EXPECT_EQ(a.strides[i], b.strides[i]) << i;
    }
  };
  const std::vector<int64_t> shape{2, 0, 3, 4};
  same(Tensor::contiguous(data.data(), DType::bf16, Device::cuda(1), {2, 0, 3, 4}),
       Tensor::contiguous(data.data(), DType::bf16, Device::cuda(1), shape));
  EXPECT_EQ(Tensor::contiguous(data.data(), DType::f32, kCpu, {2, 0, 3, 4}).stride_vector(),
            (std::vector<int64_t>{12, 12, 4, 1}));
  same(Tensor::contiguous(data.data(), DType::f32, kCpu, {}),
       Tensor::contiguous(data.data(), DType::f32, kCpu, std::vector<int64_t>{}));
  same(Tensor::strided(data.data(), DType::f16, kCpu, {3, 4}, {1, 3}),
       Tensor::strided(data.data(), DType::f16, kCpu, std::vector<int64_t>{3, 4},
                       std::vector<int64_t>{1, 3}));
  // The same errors from either form.
  const std::vector<int64_t> nine(9, 1);
  for (const auto& call : std::vector<std::function<void()>>{
           [&] { Tensor::contiguous(data.data(), DType::f32, kCpu, nine); },
           [&] {
             Tensor::contiguous(data.data(), DType::f32, kCpu, {1, 1, 1, 1, 1, 1, 1, 1, 1});
           }}) {
    expect_error(call, {"gemmkit::Tensor::contiguous: shape has rank 9", "at most 8"});
  }
  for (const auto& call : std::vector<std::function<void()>>{
           [&] {
             Tensor::strided(data.data(), DType::f32, kCpu, std::vector<int64_t>{2, 3},
                             std::vector<int64_t>{1});
           },
           [&] {
             Tensor::strided(data.data(), DType::f32, kCpu, {2, 3}, {1});
           }}) {
    expect_error(call, {"gemmkit::Tensor::strided: strides has 1 entries but shape has 2"});
  }
}

// ---- 2, 3, 7. from_dlpack
// -------------------------------------------------------------------------

DLTensor cpu_dl(void* data, int32_t ndim, int64_t* shape, int64_t* strides = nullptr) {
  DLTensor t{};
  t.data = data;
  t.device.device_type = kDLCPU;
  t.device.device_id = 0;
  t.ndim = ndim;
  t.dtype.code = kDLFloat;
  t.dtype.bits = 32;
  t.dtype.lanes = 1;
  t.shape = shape;
  t.strides = strides;
  return t;
}

TEST(ApiBoundary, FromDlpackNullShapeIsAnError) {
  std::vector<float> data(8);
  expect_error([&] { from_dlpack(cpu_dl(data.data(), 2, nullptr)); },
               {"gemmkit::from_dlpack: shape", "null", "ndim 2"});
  // A scalar needs no shape.
  const Tensor scalar = from_dlpack(cpu_dl(data.data(), 0, nullptr));
  EXPECT_EQ(scalar.rank, 0);
}

TEST(ApiBoundary, FromDlpackRowMajorStridesThatOverflowAreAnError) {
  std::vector<float> data(8);
  int64_t shape[3] = {3, int64_t{1} << 62, 4};
  expect_error([&] { from_dlpack(cpu_dl(data.data(), 3, shape)); },
               {"gemmkit::from_dlpack: shape", "[3, 4611686018427387904, 4]", "overflows int64"});
}

TEST(ApiBoundary, FromDlpackByteOffsetIsRangeChecked) {
  std::vector<float> data(8);
  int64_t shape[1] = {2};
  DLTensor t = cpu_dl(data.data(), 1, shape);
  t.byte_offset = std::numeric_limits<uint64_t>::max() - 2;
  expect_error([&] { from_dlpack(t); }, {"gemmkit::from_dlpack: byte_offset", "address space"});
  t.byte_offset = 2;  // not a multiple of the element size
  expect_error([&] { from_dlpack(t); },
               {"gemmkit::from_dlpack: byte_offset 2", "aligned", "4 bytes"});
  t.byte_offset = 4;
  const Tensor view = from_dlpack(t);
  EXPECT_EQ(view.data, static_cast<void*>(data.data() + 1));
}

TEST(ApiBoundary, FromDlpackUnknownDeviceCodesAreAnError) {
  std::vector<float> data(8);
  int64_t shape[1] = {2};
  for (const int32_t code : {0, 3, 14, 17, 255, -1, std::numeric_limits<int32_t>::max()}) {
    DLTensor t = cpu_dl(data.data(), 1, shape);
    static_assert(sizeof(t.device.device_type) == sizeof(code), "DLDeviceType is 32 bits");
    std::memcpy(&t.device.device_type, &code, sizeof code);  // what a newer producer may send
    const std::string value = "device_type " + std::to_string(code);
    expect_error([&] { from_dlpack(t); }, {"gemmkit::from_dlpack", value.c_str()});
  }
}

TEST(ApiBoundary, FromDlpackMessagesNameTheFunction) {
  std::vector<float> data(8);
  int64_t shape[1] = {2};
  DLTensor t = cpu_dl(data.data(), 1, shape);
  t.dtype.bits = 64;
  expect_error([&] { from_dlpack(t); }, {"gemmkit::from_dlpack: dtype"});
  t = cpu_dl(data.data(), 9, shape);
  expect_error([&] { from_dlpack(t); }, {"gemmkit::from_dlpack: ndim 9"});
  int64_t negative[1] = {-2};
  expect_error([&] { from_dlpack(cpu_dl(data.data(), 1, negative)); },
               {"gemmkit::from_dlpack: shape"});
}

// ---- 4. to_dlpack
// ---------------------------------------------------------------------------------

TEST(ApiBoundary, ToDlpackValidatesTheDescriptor) {
  std::vector<float> data(8);
  const Tensor good = Tensor::contiguous(data.data(), DType::f32, kCpu, {2, 4});
  for (const int rank : {9, -1, 100}) {
    Tensor t = good;
    t.rank = rank;
    const std::string value = "rank " + std::to_string(rank);
    expect_error([&] { to_dlpack(t); }, {"gemmkit::to_dlpack: t", value.c_str()});
    expect_error([&] { to_dlpack_managed(t); }, {"gemmkit::to_dlpack_managed: t", value.c_str()});
  }
  Tensor bad_dtype = good;
  const int dtype_value = 7;
  std::memcpy(&bad_dtype.dtype, &dtype_value, sizeof dtype_value);
  expect_error([&] { to_dlpack(bad_dtype); }, {"gemmkit::to_dlpack: t", "dtype value 7"});
  expect_error([&] { to_dlpack_managed(bad_dtype); }, {"dtype value 7"});
  Tensor bad_device = good;
  const int kind_value = 5;
  std::memcpy(&bad_device.device.kind, &kind_value, sizeof kind_value);
  expect_error([&] { to_dlpack(bad_device); }, {"gemmkit::to_dlpack: t", "device kind 5"});
  expect_error([&] { to_dlpack_managed(bad_device); }, {"device kind 5"});
  Tensor bad_index = good;
  bad_index.device = Device::cuda(-2);
  expect_error([&] { to_dlpack(bad_index); }, {"cuda:-2", ">= 0"});

  // A valid descriptor of every rank round-trips.
  for (int rank = 0; rank <= kMaxRank; ++rank) {
    Tensor t;
    t.data = data.data();
    t.rank = rank;
    for (int i = 0; i < rank; ++i) {
      t.shape[i] = 1;
      t.strides[i] = 1;
    }
    DLManagedTensor* managed = to_dlpack_managed(t);
    EXPECT_EQ(managed->dl_tensor.ndim, rank);
    const Tensor back = from_dlpack(managed->dl_tensor);
    EXPECT_EQ(back.rank, rank);
    managed->deleter(managed);
  }
}

// ---- 5. conv_transpose_params
// ----------------------------------------------------------------------

TEST(ApiBoundary, ConvTransposeParamsRejectsOverflowingPadding) {
  expect_error([] { conv_transpose_params({int64_t{1} << 62}, {1}, {0}, {0}, {4}); },
               {"gemmkit::conv_transpose_params: kernel_size[0] 4611686018427387904"});
  expect_error([] { conv_transpose_params({kInt64Max}, {1}, {0}, {0}, {1}); }, {"kernel_size[0]"});
  // dilation * (kernel - 1) - padding beyond conv's padding bound.
  expect_error([] { conv_transpose_params({(int64_t{1} << 30) + 1}, {1}, {0}, {0}, {1 << 20}); },
               {"kernel_size[0]", "padding_lo", "2^40"});
  const ConvParams ok = conv_transpose_params({3}, {2}, {1}, {1}, {1});
  EXPECT_EQ(ok.padding_lo, std::vector<int64_t>{1});
  EXPECT_EQ(ok.padding_hi, std::vector<int64_t>{2});
}

// ---- 6. alignment
// -----------------------------------------------------------------------------------

TEST(ApiBoundary, MisalignedDataIsAnError) {
  alignas(16) unsigned char bytes[256] = {};
  LinearCase c;
  const Tensor x_odd = Tensor::contiguous(bytes + 1, DType::bf16, kCpu, {2, 4});
  const Tensor w16 = Tensor::contiguous(bytes + 64, DType::bf16, kCpu, {3, 4});
  const Tensor out16 = Tensor::contiguous(bytes + 128, DType::bf16, kCpu, {2, 3});
  expect_error([&] { linear(x_odd, w16, std::nullopt, out16); },
               {"gemmkit::linear: x", "not aligned", "2 bytes"});
  const Tensor x32 = Tensor::contiguous(bytes + 2, DType::f32, kCpu, {2, 4});
  expect_error([&] { linear(x32, c.wt(), std::nullopt, c.outt()); },
               {"gemmkit::linear: x", "not aligned", "4 bytes"});
  const Tensor out_mis = Tensor::contiguous(bytes + 130, DType::f32, kCpu, {2, 3});
  expect_error([&] { linear(c.xt(), c.wt(), std::nullopt, out_mis); },
               {"gemmkit::linear: out", "not aligned"});
  ConvCase cc;
  const Tensor cx = Tensor::contiguous(bytes + 1, DType::f16, kCpu, {2, 5, 3});
  const Tensor cw = Tensor::contiguous(bytes + 64, DType::f16, kCpu, {4, 3, 3});
  const Tensor co = Tensor::contiguous(bytes + 160, DType::f16, kCpu, {2, 3, 4});
  expect_error([&] { conv(cx, cw, std::nullopt, co, {}); }, {"gemmkit::conv: x", "not aligned"});
  // CUDA tensors follow the same rule; it is checked on the host before any device work.
  const Tensor gx =
      Tensor::contiguous(reinterpret_cast<void*>(0x10001), DType::bf16, Device::cuda(0), {2, 4});
  const Tensor gw =
      Tensor::contiguous(reinterpret_cast<void*>(0x20000), DType::bf16, Device::cuda(0), {3, 4});
  const Tensor go =
      Tensor::contiguous(reinterpret_cast<void*>(0x30000), DType::f32, Device::cuda(0), {2, 3});
  expect_error([&] { linear(gx, gw, std::nullopt, go); },
               {"gemmkit::linear: x", "not aligned", "2 bytes"});
}

// ---- 8. element span at the int64 limit
// ------------------------------------------------------------

TEST(ApiBoundary, ElementSpanAtTheInt64LimitNamesNoNegativeSize) {
  LinearCase c;
  // The last element's offset is INT64_MAX: the span, one more, does not fit.
  const Tensor x = Tensor::strided(c.x.data(), DType::f32, kCpu, {2, 4}, {kInt64Max - 3, 1});
  expect_error([&] { linear(x, c.wt(), std::nullopt, c.outt()); },
               {"gemmkit::linear: x", "span", "overflows int64"}, {"-9223372036854775808"});
  const Tensor x1 = Tensor::strided(c.x.data(), DType::f32, kCpu, {2, 4}, {kInt64Max / 4, 1});
  expect_error([&] { linear(x1, c.wt(), std::nullopt, c.outt()); },
               {"gemmkit::linear: x", "overflows int64"}, {"-"});
}

// ---- 9. staging of large views
// -----------------------------------------------------------------------

TEST(ApiBoundary, ConvOfALargeViewOfSmallMemoryRuns) {
  // x is a (1, 2^20, 2^20, 1) f16 view of 2^21 elements whose rows overlap: its fp32 copy would
  // need 4 TiB. A stride of 2^20 makes the output one element: x[0, 0, 0] * w.
  const int64_t big = int64_t{1} << 20;
  std::vector<uint16_t> xs(static_cast<std::size_t>(2 * big), float_to_f16(2.0f));
  std::vector<uint16_t> ws(1, float_to_f16(3.0f));
  std::vector<uint16_t> os(1, 0);
  const Tensor x =
      Tensor::strided(xs.data(), DType::f16, kCpu, {1, big, big, 1}, {2 * big, 1, 1, 1});
  const Tensor w = Tensor::contiguous(ws.data(), DType::f16, kCpu, {1, 1, 1, 1});
  const Tensor out = Tensor::contiguous(os.data(), DType::f16, kCpu, {1, 1, 1, 1});
  ConvParams p;
  p.stride = {big};
  conv(x, w, std::nullopt, out, p);
  EXPECT_EQ(f16_to_float(os[0]), 6.0f);
}

TEST(ApiBoundary, LinearOfAViewLargerThanTheStagingBoundRuns) {
  // x[i, q] = xs[i + q]: 2^16 rows of k = 4100 overlapping in memory of n + k - 1 elements; its
  // fp32 copy (n * round_up(k, 8) floats) exceeds the bound, so the rows are packed per task.
  const int64_t n = int64_t{1} << 16, k = 4100;
  ASSERT_GT(n * cpu::round_up8(k), cpu::kMaxStagedFloats);
  std::vector<uint16_t> xs(static_cast<std::size_t>(n + k - 1)), ws(static_cast<std::size_t>(k));
  for (std::size_t i = 0; i < xs.size(); ++i)
    xs[i] = float_to_bf16(static_cast<float>(static_cast<int>(i % 7) - 3) / 4.0f);
  for (std::size_t q = 0; q < ws.size(); ++q)
    ws[q] = float_to_bf16(static_cast<float>(static_cast<int>(q % 5) - 2) / 8.0f);
  std::vector<float> out(static_cast<std::size_t>(n), -1.0f);
  linear(Tensor::strided(xs.data(), DType::bf16, kCpu, {n, k}, {1, 1}),
         Tensor::contiguous(ws.data(), DType::bf16, kCpu, {1, k}), std::nullopt,
         Tensor::contiguous(out.data(), DType::f32, kCpu, {n, 1}));
  for (const int64_t i : {int64_t{0}, int64_t{1}, int64_t{4097}, n / 2 + 3, n - 1}) {
    double want = 0;  // exact: multiples of 1/32 summed in fp32 stay exact
    for (int64_t q = 0; q < k; ++q) {
      want += static_cast<double>(bf16_to_float(xs[static_cast<std::size_t>(i + q)])) *
              static_cast<double>(bf16_to_float(ws[static_cast<std::size_t>(q)]));
    }
    EXPECT_EQ(static_cast<double>(out[static_cast<std::size_t>(i)]), want) << "row " << i;
  }
}

TEST(ApiBoundary, StagingThatCannotBeAllocatedIsAnError) {
  expect_error([] { cpu::thread_scratch(3, int64_t{1} << 61); },
               {"gemmkit: the CPU backend", "9223372036854775808 bytes"});
  expect_error([] { cpu::staging_buffer("linear", "x", int64_t{1} << 40, int64_t{1} << 30); },
               {"gemmkit::linear", "x", "1099511627776 * 1073741824", "overflows"});
}

// ---- 10. outputs that do not overlap
// -----------------------------------------------------------------

TEST(ApiBoundary, InterleavedOutputsThatDoNotOverlapAreAccepted) {
  // Offsets 4i + 3j (i < 2, j < 5) are all distinct: 0 3 6 9 12 / 4 7 10 13 16.
  LinearCase c;
  std::vector<float> x(2 * 4, 1.0f), w(5 * 4, 0.5f), out(17, -1.0f);
  const Tensor xt = Tensor::contiguous(x.data(), DType::f32, kCpu, {2, 4});
  const Tensor wt = Tensor::contiguous(w.data(), DType::f32, kCpu, {5, 4});
  const Tensor ot = Tensor::strided(out.data(), DType::f32, kCpu, {2, 5}, {4, 3});
  linear(xt, wt, std::nullopt, ot);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 5; ++j) EXPECT_EQ(out[static_cast<std::size_t>(4 * i + 3 * j)], 2.0f);
  EXPECT_EQ(out[1], -1.0f);
  EXPECT_EQ(out[2], -1.0f);
  // A layout that does overlap is still rejected: 2 * 3 = 3 * 2.
  std::vector<float> small(16);
  const Tensor bad = Tensor::strided(small.data(), DType::f32, kCpu, {4, 5}, {2, 3});
  const Tensor w5 = Tensor::contiguous(w.data(), DType::f32, kCpu, {5, 4});
  const Tensor x4 = Tensor::contiguous(c.x.data(), DType::f32, kCpu, {4, 2});
  std::vector<float> w52(10, 1.0f);
  expect_error(
      [&] {
        linear(x4, Tensor::contiguous(w52.data(), DType::f32, kCpu, {5, 2}), std::nullopt, bad);
      },
      {"gemmkit::linear: out", "overlap", "[3, 0]", "[0, 2]"});
  (void)w5;
}

// ---- smaller rules and message nits
// -------------------------------------------------------------------

TEST(ApiBoundary, LinearPdlMustBeOneOfTheDocumentedValues) {
  LinearCase c;
  for (const int pdl : {-1, 0, 1}) {
    LinearOptions options;
    options.pdl = pdl;
    linear(c.xt(), c.wt(), std::nullopt, c.outt(), options);
  }
  for (const int pdl : {7, -2, 2}) {
    LinearOptions options;
    options.pdl = pdl;
    const std::string value = "options.pdl " + std::to_string(pdl);
    expect_error([&] { linear(c.xt(), c.wt(), std::nullopt, c.outt(), options); },
                 {"gemmkit::linear", value.c_str(), "-1, 0 or 1"});
  }
}

TEST(ApiBoundary, LinearSwitchesMustBeOneOfTheDocumentedValues) {
  LinearCase c;
  struct Switch {
    const char* option;
    const char* env;
    int LinearOptions::*field;
  };
  for (const Switch& sw :
       {Switch{"options.deterministic", "GEMMKIT_DETERMINISTIC", &LinearOptions::deterministic},
        Switch{"options.batch_invariant", "GEMMKIT_LINEAR_BATCH_INVARIANT",
               &LinearOptions::batch_invariant}}) {
    for (const int value : {-1, 0, 1}) {
      LinearOptions options;
      options.*sw.field = value;
      linear(c.xt(), c.wt(), std::nullopt, c.outt(), options);
    }
    for (const int value : {7, -2, 2}) {
      LinearOptions options;
      options.*sw.field = value;
      const std::string named = std::string(sw.option) + " " + std::to_string(value);
      const std::string rule = std::string("-1, 0 or 1 (-1: ") + sw.env + ", 0: off, 1: on)";
      expect_error([&] { linear(c.xt(), c.wt(), std::nullopt, c.outt(), options); },
                   {"gemmkit::linear", named.c_str(), rule.c_str()});
    }
  }
}

TEST(ApiBoundary, ConvDeterministicMustBeOneOfTheDocumentedValues) {
  ConvCase c;
  for (const int deterministic : {-1, 0, 1}) {
    ConvOptions options;
    options.deterministic = deterministic;
    conv(c.xt(), c.wt(), std::nullopt, c.outt(), ConvParams{}, options);
  }
  for (const int deterministic : {7, -2, 2}) {
    ConvOptions options;
    options.deterministic = deterministic;
    const std::string value = "options.deterministic " + std::to_string(deterministic);
    expect_error(
        [&] { conv(c.xt(), c.wt(), std::nullopt, c.outt(), ConvParams{}, options); },
        {"gemmkit::conv", value.c_str(), "-1, 0 or 1 (-1: GEMMKIT_DETERMINISTIC, 0: off, 1: on)"});
  }
}

TEST(ApiBoundary, MessagesHaveOneStyle) {
  ConvCase c;
  ConvParams p;
  p.stride = {0};
  const std::string stride =
      expect_error([&] { conv(c.xt(), c.wt(), std::nullopt, c.outt(), p); },
                   {"gemmkit::conv: params.stride[0] 0: must be in [1, 2^20]"}, {"  "});
  // x is f32: "x's dtype f32 or f32" says one thing twice.
  LinearCase l;
  std::vector<uint16_t> o16(6);
  expect_error(
      [&] {
        linear(l.xt(), l.wt(), std::nullopt,
               Tensor::contiguous(o16.data(), DType::bf16, kCpu, {2, 3}));
      },
      {"gemmkit::linear: out dtype bf16: must be x's dtype f32"}, {"f32 or f32"});
  // An overflow names the quantity it overflows.
  const std::string overflow = expect_error(
      [] {
        ConvParams q;
        q.input_dilation = {4};
        conv_output_shape({1, (int64_t{1} << 62) - 1 + 1, 1}, {1, 1, 1}, q);
      },
      {"gemmkit::conv_output_shape: x", "spatial dim 0", "(in - 1) * input_dilation",
       "overflows int64"},
      {" : "});
}

// ---- empty batches
// -------------------------------------------------------------------------------------

TEST(ApiBoundary, LinearOfAnEmptyBatchIsValidAndDoesNoWork) {
  std::vector<float> w(12, 0.5f);
  CallInfo info;
  LinearOptions options;
  options.info = &info;
  const Tensor x = Tensor::contiguous(nullptr, DType::f32, kCpu, {0, 4});
  const Tensor wt = Tensor::contiguous(w.data(), DType::f32, kCpu, {3, 4});
  const Tensor out = Tensor::contiguous(nullptr, DType::f32, kCpu, {0, 3});
  linear(x, wt, std::nullopt, out, options);
  EXPECT_EQ(info.backend, "cpu");
  EXPECT_EQ(info.kernel, "none (empty batch)");
  // An empty view's strides address nothing: torch's [2, 0, 4] flattened to [0, 4] has stride 0
  // in dim 0. A negative stride is still an error.
  linear(Tensor::strided(nullptr, DType::f32, kCpu, {0, 4}, {0, 1}), wt, std::nullopt,
         Tensor::strided(nullptr, DType::f32, kCpu, {0, 3}, {0, 0}), options);
  EXPECT_EQ(info.kernel, "none (empty batch)");
  expect_error(
      [&] {
        linear(Tensor::strided(nullptr, DType::f32, kCpu, {0, 4}, {-4, 1}), wt, std::nullopt, out);
      },
      {"gemmkit::linear: x", "dim 0 has stride -4; strides must be >= 0"});
  // Everything else is still validated.
  expect_error(
      [&] {
        linear(x, wt, std::nullopt, Tensor::contiguous(nullptr, DType::f32, kCpu, {0, 2}));
      },
      {"gemmkit::linear: out", "must have shape [0, 3]"});
  expect_error(
      [&] {
        linear(Tensor::contiguous(nullptr, DType::f32, kCpu, {0, 0}),
               Tensor::contiguous(w.data(), DType::f32, kCpu, {3, 0}), std::nullopt, out);
      },
      {"gemmkit::linear: x", "dim 1 has size 0"});
  expect_error(
      [&] {
        linear(x, Tensor::contiguous(w.data(), DType::f16, kCpu, {3, 4}), std::nullopt, out);
      },
      {"gemmkit::linear: w", "dtype f16"});
  expect_error(
      [&] {
        linear(x, Tensor::contiguous(nullptr, DType::f32, kCpu, {3, 4}), std::nullopt, out);
      },
      {"gemmkit::linear: w", "data is null"});
  LinearOptions forced;
  forced.kernel = "ring8";
  expect_error([&] { linear(x, wt, std::nullopt, out, forced); }, {"options.kernel"});
  // The weight's rows stay >= 1.
  expect_error(
      [&] {
        linear(x, Tensor::contiguous(w.data(), DType::f32, kCpu, {0, 4}), std::nullopt,
               Tensor::contiguous(nullptr, DType::f32, kCpu, {0, 0}));
      },
      {"gemmkit::linear: w", "dim 0 has size 0"});
}

TEST(ApiBoundary, ConvOfAnEmptyBatchIsValidAndDoesNoWork) {
  std::vector<float> w(4 * 3 * 3, 0.5f);
  const Tensor x = Tensor::contiguous(nullptr, DType::f32, kCpu, {0, 5, 3});
  const Tensor wt = Tensor::contiguous(w.data(), DType::f32, kCpu, {4, 3, 3});
  const Tensor out = Tensor::contiguous(nullptr, DType::f32, kCpu, {0, 3, 4});
  EXPECT_EQ(conv_output_shape({0, 5, 3}, {4, 3, 3}, {}), (std::vector<int64_t>{0, 3, 4}));
  CallInfo info;
  ConvOptions options;
  options.info = &info;
  conv(x, wt, std::nullopt, out, {}, options);
  EXPECT_EQ(info.backend, "cpu");
  EXPECT_EQ(info.kernel, "none (empty batch)");
  expect_error(
      [&] {
        conv(x, wt, std::nullopt, Tensor::contiguous(nullptr, DType::f32, kCpu, {0, 4, 4}), {});
      },
      {"gemmkit::conv: out", "must have shape [0, 3, 4]"});
  expect_error(
      [&] {
        conv(Tensor::contiguous(nullptr, DType::f32, kCpu, {0, 0, 3}), wt, std::nullopt, out, {});
      },
      {"gemmkit::conv: x", "dim 1 has size 0"});
  ConvParams groups;
  groups.groups = 2;
  expect_error([&] { conv(x, wt, std::nullopt, out, groups); }, {"params.groups"});
}

TEST(ApiBoundary, EmptyBatchOnCudaTensorsIsValidatedOnTheHost) {
  const Device gpu = Device::cuda(0);
  std::vector<float> w(12);
  const Tensor x = Tensor::contiguous(nullptr, DType::bf16, gpu, {0, 4});
  const Tensor wt = Tensor::contiguous(reinterpret_cast<void*>(0x1000), DType::bf16, gpu, {3, 4});
  const Tensor out = Tensor::contiguous(nullptr, DType::f32, gpu, {0, 3});
  expect_error(
      [&] {
        linear(x, wt, std::nullopt, Tensor::contiguous(nullptr, DType::f16, gpu, {0, 3}));
      },
      {"gemmkit::linear: out", "dtype f16"});
  expect_error(
      [&] {
        linear(x, Tensor::contiguous(w.data(), DType::bf16, kCpu, {3, 4}), std::nullopt, out);
      },
      {"gemmkit::linear: w", "is on cpu"});
  if (built_with_cuda()) {
    CallInfo info;
    LinearOptions options;
    options.info = &info;
    linear(x, wt, std::nullopt, out, options);  // no device is touched
    EXPECT_EQ(info.backend, "cuda");
    EXPECT_EQ(info.kernel, "none (empty batch)");
  } else {
    expect_error([&] { linear(x, wt, std::nullopt, out); }, {"no CUDA backend"});
  }
}

}  // namespace
}  // namespace gemmkit
