// libFuzzer target of gemmkit's public API boundary (CPU tensors): linear, conv,
// conv_output_shape, conv_transpose_params, from_dlpack, to_dlpack and to_dlpack_managed.
//
// Every input builds one call. About half are well-formed small problems with fuzzed sizes,
// dtypes, layouts (permuted, padded, self-overlapping inputs, interleaved outputs), parameters
// and empty batches; the rest corrupt one or more fields of such a problem with hostile values
// (ranks, sizes, strides, pointers, enum values, options). The target aborts — so that libFuzzer
// keeps the input — when
//   - a call throws anything other than gemmkit::Error;
//   - a call the target knows to be valid throws, or one it knows to be invalid returns;
//   - a call that returns gives a result that differs from the double-precision reference below
//     (written from the definitions in gemmkit.h) by more than the output dtype's rounding, or
//     writes outside its output's elements, or writes to an input;
// and the sanitizers abort on any memory error or undefined behaviour. Every operand lives in an
// allocation of exactly its span, so any read or write outside it is an AddressSanitizer report.
// At exit (and at every power of two) it prints how many cases ran, how many were valid (and
// checked), invalid (a gemmkit::Error), or skipped (a corrupted descriptor whose memory the
// target could not provide).
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gemmkit/dlpack.h"
#include "gemmkit/gemmkit.h"

namespace {

using gemmkit::ConvParams;
using gemmkit::Device;
using gemmkit::DType;
using gemmkit::Tensor;
using i128 = __int128;

// ---- Counters ---------------------------------------------------------------------------------

struct Counters {
  uint64_t cases = 0, valid = 0, invalid = 0, skipped = 0, checked_outputs = 0;
  void print(const char* when) const {
    std::fprintf(stderr,
                 "gemmkit_fuzz_api %s: %" PRIu64 " cases, %" PRIu64 " valid (%" PRIu64
                 " outputs checked), %" PRIu64 " invalid (gemmkit::Error), %" PRIu64 " skipped\n",
                 when, cases, valid, checked_outputs, invalid, skipped);
  }
  ~Counters() { print("at exit"); }
};
Counters g_counters;

[[noreturn]] void failure(const std::string& what) {
  std::fprintf(stderr, "gemmkit_fuzz_api FAILURE: %s\n", what.c_str());
  g_counters.print("at the failure");
  std::abort();
}

// ---- Values -------------------------------------------------------------------------------------

std::size_t element_bytes(DType dt) {
  return dt == DType::f32 ? 4 : 2;
}

double decode(DType dt, const unsigned char* p) {
  if (dt == DType::f32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  if (dt == DType::bf16) {
    const uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v = e == 0 ? std::ldexp(m, -24) : e == 31 ? INFINITY : std::ldexp(1024 + m, e - 25);
  if (e == 31 && m) v = NAN;
  return (h & 0x8000) ? -v : v;
}

// Multiples of 1/8 in [-2, 2]: exact in every dtype, so the sums the problems below make are
// exact in fp32 and the only difference from the reference is the output's rounding.
void encode_grid(DType dt, unsigned char* p, int step) {
  const float value = static_cast<float>(step - 16) / 8.0f;
  if (dt == DType::f32) {
    std::memcpy(p, &value, 4);
  } else {
    const uint16_t bits =
        dt == DType::bf16 ? gemmkit::float_to_bf16(value) : gemmkit::float_to_f16(value);
    std::memcpy(p, &bits, 2);
  }
}

// ---- Operands -----------------------------------------------------------------------------------

// One operand: a descriptor and an allocation of exactly the bytes it spans (so that ASan sees
// any access outside it), plus the original contents to detect writes.
struct Operand {
  Tensor t;
  std::unique_ptr<unsigned char[]> memory;
  std::size_t bytes = 0;
  std::vector<unsigned char> before;

  bool empty() const {
    for (int i = 0; i < t.rank; ++i)
      if (t.shape[i] == 0) return true;
    return false;
  }
};

// Span in elements of a well-formed descriptor (max offset + 1), 0 when it has no elements.
i128 span_of(const Tensor& t) {
  i128 last = 0;
  for (int i = 0; i < t.rank; ++i) {
    if (t.shape[i] == 0) return 0;
    last += static_cast<i128>(t.shape[i] - 1) * t.strides[i];
  }
  return last + 1;
}

// Strides: dims in a fuzzed memory order with fuzzed gaps; inputs may instead get small
// arbitrary strides (their elements may alias), outputs interleaved ones (checked exactly by
// the target itself).
void make_layout(FuzzedDataProvider& fdp, Tensor& t, bool is_output) {
  const int style = fdp.ConsumeIntegralInRange(0, 9);
  if (style == 9 && t.rank > 0) {
    for (int i = 0; i < t.rank; ++i) t.strides[i] = fdp.ConsumeIntegralInRange<int64_t>(1, 7);
    (void)is_output;
    return;
  }
  int order[gemmkit::kMaxRank];
  for (int i = 0; i < t.rank; ++i) order[i] = i;
  if (style >= 5) {
    for (int i = t.rank - 1; i > 0; --i)
      std::swap(order[i], order[fdp.ConsumeIntegralInRange(0, i)]);
  }
  int64_t stride = 1;
  for (int i = t.rank - 1; i >= 0; --i) {
    const int d = order[i];
    t.strides[d] = stride;
    const int64_t gap = style >= 3 ? fdp.ConsumeIntegralInRange<int64_t>(0, 2) : 0;
    stride *= std::max<int64_t>(t.shape[d], 1) + gap;
  }
}

// Allocates and fills (grid values) the memory of `op.t` (dtype, rank, shape, strides set).
void allocate(FuzzedDataProvider& fdp, Operand& op, bool misalign = false) {
  const std::size_t es = element_bytes(op.t.dtype);
  const i128 span = span_of(op.t);
  op.bytes = static_cast<std::size_t>(span) * es + (misalign ? 1 : 0);
  if (op.bytes == 0) {
    op.t.data = fdp.ConsumeBool() ? nullptr : reinterpret_cast<void*>(uintptr_t{64});
    return;
  }
  op.memory.reset(new unsigned char[op.bytes]);
  unsigned char* base = op.memory.get() + (misalign ? 1 : 0);
  const uint32_t seed = fdp.ConsumeIntegral<uint32_t>();
  for (i128 i = 0; i < span; ++i) {
    encode_grid(op.t.dtype, base + static_cast<std::size_t>(i) * es,
                static_cast<int>((seed + static_cast<uint32_t>(i) * 2654435761u) % 33u));
  }
  op.t.data = base;
  op.before.assign(op.memory.get(), op.memory.get() + op.bytes);
}

bool unchanged(const Operand& op) {
  return op.bytes == 0 || std::memcmp(op.memory.get(), op.before.data(), op.bytes) == 0;
}

double value_at(const Tensor& t, const int64_t* index) {
  int64_t offset = 0;
  for (int i = 0; i < t.rank; ++i) offset += index[i] * t.strides[i];
  return decode(t.dtype,
                static_cast<const unsigned char*>(t.data) + offset * element_bytes(t.dtype));
}

// Whether two index tuples of `t` (well-formed, small) address one element: by enumeration.
bool self_overlapping(const Tensor& t) {
  const i128 span = span_of(t);
  if (span == 0) return false;
  std::vector<char> seen(static_cast<std::size_t>(span), 0);
  int64_t index[gemmkit::kMaxRank] = {};
  for (;;) {
    int64_t offset = 0;
    for (int i = 0; i < t.rank; ++i) offset += index[i] * t.strides[i];
    if (seen[static_cast<std::size_t>(offset)]++) return true;
    int d = t.rank - 1;
    while (d >= 0 && ++index[d] == t.shape[d]) index[d--] = 0;
    if (d < 0) return false;
  }
}

// The output elements hold the reference within the rounding of their dtype, and the bytes of
// the allocation that are no output element are unchanged.
void check_output(const Operand& out, const std::vector<double>& expected,
                  const std::vector<double>& magnitude, const char* op) {
  const Tensor& t = out.t;
  const std::size_t es = element_bytes(t.dtype);
  std::vector<char> is_element(out.bytes, 0);
  const double rel = t.dtype == DType::f32 ? 0x1p-22 : t.dtype == DType::bf16 ? 0x1p-8 : 0x1p-11;
  int64_t index[gemmkit::kMaxRank] = {};
  std::size_t n = 0;
  if (!out.empty()) {
    for (;;) {
      int64_t offset = 0;
      for (int i = 0; i < t.rank; ++i) offset += index[i] * t.strides[i];
      for (std::size_t b = 0; b < es; ++b)
        is_element[static_cast<std::size_t>(offset) * es + b] = 1;
      const double got = value_at(t, index);
      const double want = expected[n];
      const double tol = rel * std::fabs(want) + 0x1p-20 * (magnitude[n] + 1.0);
      if (!(std::fabs(got - want) <= tol)) {
        failure(std::string(op) + ": output element " + std::to_string(n) + " is " +
                std::to_string(got) + ", the reference " + std::to_string(want) + " (out " +
                t.str() + ")");
      }
      ++n;
      int d = t.rank - 1;
      while (d >= 0 && ++index[d] == t.shape[d]) index[d--] = 0;
      if (d < 0) break;
    }
  }
  g_counters.checked_outputs += n;
  for (std::size_t b = 0; b < out.bytes; ++b) {
    if (!is_element[b] && out.memory[b] != out.before[b]) {
      failure(std::string(op) + ": byte " + std::to_string(b) +
              " of out's allocation is no element of out but was written");
    }
  }
}

// ---- Corruption ------------------------------------------------------------------------------

int64_t hostile_int64(FuzzedDataProvider& fdp) {
  static const int64_t kValues[] = {0,
                                    -1,
                                    1,
                                    2,
                                    std::numeric_limits<int64_t>::max(),
                                    std::numeric_limits<int64_t>::min(),
                                    std::numeric_limits<int64_t>::max() / 2,
                                    std::numeric_limits<int64_t>::max() / 4 + 1,
                                    int64_t{1} << 31,
                                    int64_t{1} << 32,
                                    int64_t{1} << 40,
                                    int64_t{1} << 62,
                                    (int64_t{1} << 62) - 1,
                                    3037000500};
  if (fdp.ConsumeBool()) return fdp.PickValueInArray(kValues);
  return fdp.ConsumeIntegral<int64_t>();
}

int hostile_int(FuzzedDataProvider& fdp) {
  static const int kValues[] = {
      -1, 3, 9, 16, 17, 100, std::numeric_limits<int>::max(), std::numeric_limits<int>::min()};
  if (fdp.ConsumeBool()) return fdp.PickValueInArray(kValues);
  return fdp.ConsumeIntegral<int>();
}

// Corrupts one field of `op.t`. Returns false when the result may be a well-formed descriptor
// that spans memory the target did not allocate (the call is then skipped: no library can
// detect a caller's wrong size).
bool corrupt(FuzzedDataProvider& fdp, Operand& op) {
  Tensor& t = op.t;
  switch (fdp.ConsumeIntegralInRange(0, 6)) {
    case 0:
      t.rank = hostile_int(fdp);
      break;
    case 1: {
      const int value = fdp.ConsumeBool() ? fdp.ConsumeIntegralInRange(3, 5) : hostile_int(fdp);
      std::memcpy(&t.dtype, &value, sizeof value);
      break;
    }
    case 2: {
      const int value = hostile_int(fdp);
      std::memcpy(&t.device.kind, &value, sizeof value);
      break;
    }
    case 3:
      if (t.rank > 0 && t.rank <= gemmkit::kMaxRank)
        t.shape[fdp.ConsumeIntegralInRange(0, t.rank - 1)] = hostile_int64(fdp);
      break;
    case 4:
      if (t.rank > 0 && t.rank <= gemmkit::kMaxRank)
        t.strides[fdp.ConsumeIntegralInRange(0, t.rank - 1)] = hostile_int64(fdp);
      break;
    case 5:
      t.data = fdp.ConsumeBool() ? nullptr
                                 : reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(t.data) + 1);
      break;
    case 6:
      t.device = Device::cuda(fdp.ConsumeBool() ? -1 : fdp.ConsumeIntegralInRange(0, 3));
      break;
  }
  // Still within the allocation? Then the call is safe to make whatever the library decides.
  if (t.rank < 0 || t.rank > gemmkit::kMaxRank) return true;
  int dtype_value;
  std::memcpy(&dtype_value, &t.dtype, sizeof dtype_value);
  if (dtype_value < 0 || dtype_value > 2) return true;
  i128 last = 0;
  for (int i = 0; i < t.rank; ++i) {
    if (t.shape[i] < 0 || t.strides[i] < 0) return true;
    if (t.shape[i] == 0) return true;
    last += static_cast<i128>(t.shape[i] - 1) * t.strides[i];
  }
  if (last >= (static_cast<i128>(1) << 63)) return true;
  if (t.data == nullptr || t.device.kind != gemmkit::DeviceKind::cpu) return true;
  if (op.memory == nullptr) return false;
  const i128 begin = static_cast<i128>(reinterpret_cast<uintptr_t>(t.data)) -
                     static_cast<i128>(reinterpret_cast<uintptr_t>(op.memory.get()));
  const i128 end = begin + (last + 1) * static_cast<i128>(element_bytes(t.dtype));
  return begin >= 0 && end <= static_cast<i128>(op.bytes);
}

// ---- Calls --------------------------------------------------------------------------------------

// Runs `call`; returns true when it returned, false on a gemmkit::Error; aborts otherwise.
template <typename Call>
bool returns(Call call, const char* op) {
  try {
    call();
    return true;
  } catch (const gemmkit::Error& e) {
    const std::string message = e.what();
    if (message.rfind("gemmkit::", 0) != 0 && message.rfind("gemmkit: ", 0) != 0) {
      failure(std::string(op) + ": an Error without the gemmkit prefix: " + message);
    }
    return false;
  } catch (const std::exception& e) {
    failure(std::string(op) + ": threw " + typeid(e).name() + " (not gemmkit::Error): " + e.what());
  } catch (...) {
    failure(std::string(op) + ": threw something that is not a std::exception");
  }
}

DType pick_dtype(FuzzedDataProvider& fdp) {
  return static_cast<DType>(fdp.ConsumeIntegralInRange(0, 2));
}

void fuzz_linear(FuzzedDataProvider& fdp, bool hostile) {
  const int64_t n = fdp.ConsumeIntegralInRange<int64_t>(0, 9);
  const int64_t m = fdp.ConsumeIntegralInRange<int64_t>(1, 17);
  const int64_t k = fdp.ConsumeIntegralInRange<int64_t>(1, 40);
  const DType in = pick_dtype(fdp);
  const DType out_dtype = fdp.ConsumeBool() ? DType::f32 : in;
  const bool has_bias = fdp.ConsumeBool();
  Operand x, w, bias, out;
  const auto shape2 = [](Operand& op, DType dt, int64_t a, int64_t b) {
    op.t.dtype = dt;
    op.t.rank = 2;
    op.t.shape[0] = a;
    op.t.shape[1] = b;
  };
  shape2(x, in, n, k);
  shape2(w, in, m, k);
  shape2(out, out_dtype, n, m);
  bias.t.dtype = in;
  bias.t.rank = 1;
  bias.t.shape[0] = m;
  make_layout(fdp, x.t, false);
  make_layout(fdp, w.t, false);
  make_layout(fdp, out.t, true);
  if (has_bias) bias.t.strides[0] = fdp.ConsumeIntegralInRange<int64_t>(1, 3);
  const bool misalign = fdp.ConsumeIntegralInRange(0, 15) == 0;
  allocate(fdp, x, misalign);
  allocate(fdp, w);
  allocate(fdp, out);
  if (has_bias) allocate(fdp, bias);
  // Valid by the documented rules: out does not overlap itself, the data are aligned.
  bool valid = !self_overlapping(out.t) && !(misalign && !x.empty());

  gemmkit::LinearOptions options;
  if (fdp.ConsumeIntegralInRange(0, 7) == 0) {
    options.pdl = hostile_int(fdp);
    valid = valid && options.pdl >= -1 && options.pdl <= 1;
  }
  if (fdp.ConsumeIntegralInRange(0, 7) == 0) {
    options.batch_invariant = hostile_int(fdp);
    valid = valid && options.batch_invariant >= -1 && options.batch_invariant <= 1;
  }
  if (fdp.ConsumeIntegralInRange(0, 7) == 0) {
    static const char* kKernels[] = {"auto", "reference", "", "ring8", "cublaslt", "bogus"};
    options.kernel = fdp.PickValueInArray(kKernels);
    valid = valid &&
            (options.kernel.empty() || options.kernel == "auto" || options.kernel == "reference");
  }
  bool safe = true;
  if (hostile) {
    valid = false;
    Operand* ops[] = {&x, &w, &out, &bias};
    const int corruptions = fdp.ConsumeIntegralInRange(1, 2);
    for (int i = 0; i < corruptions; ++i) {
      Operand* op = ops[fdp.ConsumeIntegralInRange(0, has_bias ? 3 : 2)];
      if (op->t.rank == 0 && op == &bias) continue;
      safe = corrupt(fdp, *op) && safe;
    }
  }
  ++g_counters.cases;
  if (!safe) {
    ++g_counters.skipped;
    return;
  }
  std::optional<Tensor> b;
  if (has_bias) b = bias.t;
  const bool ran = returns([&] { gemmkit::linear(x.t, w.t, b, out.t, options); }, "linear");
  if (!ran) {
    if (valid) failure("linear: a valid call was rejected");
    ++g_counters.invalid;
    return;
  }
  if (!valid && !hostile) failure("linear: an invalid call returned (out overlaps or misaligned)");
  // A corrupted call that returned must still be a well-formed problem: check it like one.
  if (x.t.rank != 2 || w.t.rank != 2 || out.t.rank != 2 || x.t.shape[1] != w.t.shape[1] ||
      out.t.shape[0] != x.t.shape[0] || out.t.shape[1] != w.t.shape[0] ||
      (has_bias && (bias.t.rank != 1 || bias.t.shape[0] != w.t.shape[0])) ||
      self_overlapping(out.t)) {
    failure("linear: an ill-formed call returned: x " + x.t.str() + ", w " + w.t.str() + ", out " +
            out.t.str());
  }
  ++g_counters.valid;
  if (!unchanged(x) || !unchanged(w) || (has_bias && !unchanged(bias))) {
    failure("linear: an input was written");
  }
  const int64_t rn = out.t.shape[0], rm = out.t.shape[1], rk = x.t.shape[1];
  std::vector<double> expected, magnitude;
  for (int64_t i = 0; i < rn; ++i) {
    for (int64_t j = 0; j < rm; ++j) {
      double sum = 0, mag = 0;
      for (int64_t q = 0; q < rk; ++q) {
        const int64_t xi[2] = {i, q}, wi[2] = {j, q};
        const double p = value_at(x.t, xi) * value_at(w.t, wi);
        sum += p;
        mag += std::fabs(p);
      }
      if (has_bias) {
        const int64_t bi[1] = {j};
        sum += value_at(bias.t, bi);
        mag += std::fabs(value_at(bias.t, bi));
      }
      expected.push_back(sum);
      magnitude.push_back(mag);
    }
  }
  check_output(out, expected, magnitude, "linear");
}

// Output size of one spatial dim by the formula of gemmkit.h, or -1 when it is < 1.
int64_t conv_out_size(int64_t in, int64_t kernel, int64_t stride, int64_t lo, int64_t hi,
                      int64_t kdil, int64_t idil) {
  const i128 padded = static_cast<i128>(in - 1) * idil + 1 + lo + hi;
  const i128 extent = static_cast<i128>(kernel - 1) * kdil + 1;
  if (padded < extent) return -1;
  return static_cast<int64_t>((padded - extent) / stride + 1);
}

void fuzz_conv(FuzzedDataProvider& fdp, bool hostile) {
  const int spatial = fdp.ConsumeIntegralInRange(1, 3);
  const int rank = spatial + 2;
  const int64_t n = fdp.ConsumeIntegralInRange<int64_t>(0, 3);
  const int64_t groups = fdp.ConsumeIntegralInRange<int64_t>(1, 3);
  const int64_t cpg = fdp.ConsumeIntegralInRange<int64_t>(1, 4);
  const int64_t opg = fdp.ConsumeIntegralInRange<int64_t>(1, 4);
  const DType in = pick_dtype(fdp);
  const DType out_dtype = fdp.ConsumeBool() ? DType::f32 : in;
  const bool has_bias = fdp.ConsumeBool();
  ConvParams p;
  p.groups = groups;
  p.flip = fdp.ConsumeBool();
  int64_t in_size[3], kernel[3], stride[3], lo[3], hi[3], kdil[3], idil[3], out_size[3];
  bool geometry_ok = true;
  for (int d = 0; d < spatial; ++d) {
    in_size[d] = fdp.ConsumeIntegralInRange<int64_t>(1, 6);
    kernel[d] = fdp.ConsumeIntegralInRange<int64_t>(1, 3);
    stride[d] = fdp.ConsumeIntegralInRange<int64_t>(1, 3);
    lo[d] = fdp.ConsumeIntegralInRange<int64_t>(-1, 2);
    hi[d] = fdp.ConsumeIntegralInRange<int64_t>(-1, 2);
    kdil[d] = fdp.ConsumeIntegralInRange<int64_t>(1, 2);
    idil[d] = fdp.ConsumeIntegralInRange<int64_t>(1, 2);
    p.stride.push_back(stride[d]);
    p.padding_lo.push_back(lo[d]);
    p.padding_hi.push_back(hi[d]);
    p.kernel_dilation.push_back(kdil[d]);
    p.input_dilation.push_back(idil[d]);
    out_size[d] = conv_out_size(in_size[d], kernel[d], stride[d], lo[d], hi[d], kdil[d], idil[d]);
    if (out_size[d] < 1) {
      geometry_ok = false;
      out_size[d] = 1;
    }
  }
  Operand x, w, bias, out;
  x.t.dtype = w.t.dtype = bias.t.dtype = in;
  out.t.dtype = out_dtype;
  x.t.rank = w.t.rank = out.t.rank = rank;
  x.t.shape[0] = n;
  w.t.shape[0] = groups * opg;
  out.t.shape[0] = n;
  for (int d = 0; d < spatial; ++d) {
    x.t.shape[1 + d] = in_size[d];
    w.t.shape[1 + d] = kernel[d];
    out.t.shape[1 + d] = out_size[d];
  }
  x.t.shape[rank - 1] = groups * cpg;
  w.t.shape[rank - 1] = cpg;
  out.t.shape[rank - 1] = groups * opg;
  bias.t.rank = 1;
  bias.t.shape[0] = groups * opg;
  bias.t.strides[0] = 1;
  make_layout(fdp, x.t, false);
  make_layout(fdp, w.t, false);
  make_layout(fdp, out.t, true);

  // conv_output_shape on the same shapes and parameters.
  {
    const std::vector<int64_t> xs(x.t.shape, x.t.shape + rank), ws(w.t.shape, w.t.shape + rank);
    std::vector<int64_t> got;
    const bool ok =
        returns([&] { got = gemmkit::conv_output_shape(xs, ws, p); }, "conv_output_shape");
    if (ok != geometry_ok) failure("conv_output_shape: accepted != the formula's verdict");
    if (ok && got != std::vector<int64_t>(out.t.shape, out.t.shape + rank)) {
      failure("conv_output_shape: a shape other than the formula's");
    }
  }
  allocate(fdp, x);
  allocate(fdp, w);
  allocate(fdp, out);
  if (has_bias) allocate(fdp, bias);
  bool valid = geometry_ok && !self_overlapping(out.t);
  gemmkit::ConvOptions options;
  if (fdp.ConsumeIntegralInRange(0, 7) == 0) {
    static const char* kAlgos[] = {"auto", "reference", "direct", "cudnn", ""};
    options.algo = fdp.PickValueInArray(kAlgos);
    valid =
        valid && (options.algo.empty() || options.algo == "auto" || options.algo == "reference");
    options.deterministic = hostile_int(fdp);
    valid = valid && options.deterministic >= -1 && options.deterministic <= 1;
  }
  bool safe = true;
  if (hostile) {
    valid = false;
    const int what = fdp.ConsumeIntegralInRange(0, 3);
    if (what == 0) {
      // Parameters: a vector of a wrong length or a hostile value.
      std::vector<int64_t>* vectors[] = {&p.stride, &p.padding_lo, &p.padding_hi,
                                         &p.kernel_dilation, &p.input_dilation};
      std::vector<int64_t>& v = *vectors[fdp.ConsumeIntegralInRange(0, 4)];
      if (fdp.ConsumeBool()) {
        v.resize(static_cast<std::size_t>(fdp.ConsumeIntegralInRange(0, 5)), 1);
      } else {
        v[static_cast<std::size_t>(fdp.ConsumeIntegralInRange(0, spatial - 1))] =
            hostile_int64(fdp);
      }
      if (fdp.ConsumeBool()) p.groups = hostile_int64(fdp);
      // The output's shape was made for the old parameters: a call that returns must have been
      // given parameters of the same geometry; the check below recomputes it.
    } else {
      Operand* ops[] = {&x, &w, &out, &bias};
      const int corruptions = fdp.ConsumeIntegralInRange(1, 2);
      for (int i = 0; i < corruptions; ++i) {
        Operand* op = ops[fdp.ConsumeIntegralInRange(0, has_bias ? 3 : 2)];
        safe = corrupt(fdp, *op) && safe;
      }
    }
  }
  ++g_counters.cases;
  if (!safe) {
    ++g_counters.skipped;
    return;
  }
  std::optional<Tensor> b;
  if (has_bias) b = bias.t;
  const bool ran = returns([&] { gemmkit::conv(x.t, w.t, b, out.t, p, options); }, "conv");
  if (!ran) {
    if (valid) failure("conv: a valid call was rejected");
    ++g_counters.invalid;
    return;
  }
  if (!valid && !hostile) failure("conv: an invalid call returned");
  // Recompute the geometry from what was passed: the call must have been well-formed.
  const auto param = [&](const std::vector<int64_t>& v, int d, int64_t fallback) {
    if (v.empty()) return fallback;
    if (v.size() == 1) return v[0];
    if (static_cast<int>(v.size()) != spatial) failure("conv: a parameter of a wrong length");
    return v[static_cast<std::size_t>(d)];
  };
  if (x.t.rank != rank || w.t.rank != rank || out.t.rank != rank || p.groups < 1 ||
      x.t.shape[rank - 1] % p.groups != 0 || w.t.shape[0] % p.groups != 0 ||
      w.t.shape[rank - 1] * p.groups != x.t.shape[rank - 1] || out.t.shape[0] != x.t.shape[0] ||
      out.t.shape[rank - 1] != w.t.shape[0] || self_overlapping(out.t) ||
      (has_bias && (bias.t.rank != 1 || bias.t.shape[0] != w.t.shape[0]))) {
    failure("conv: an ill-formed call returned");
  }
  for (int d = 0; d < spatial; ++d) {
    stride[d] = param(p.stride, d, 1);
    lo[d] = param(p.padding_lo, d, 0);
    hi[d] = param(p.padding_hi, d, 0);
    kdil[d] = param(p.kernel_dilation, d, 1);
    idil[d] = param(p.input_dilation, d, 1);
    if (stride[d] < 1 || kdil[d] < 1 || idil[d] < 1) failure("conv: a parameter < 1 returned");
    if (conv_out_size(x.t.shape[1 + d], w.t.shape[1 + d], stride[d], lo[d], hi[d], kdil[d],
                      idil[d]) != out.t.shape[1 + d]) {
      failure("conv: returned with an output size other than the formula's");
    }
  }
  ++g_counters.valid;
  if (!unchanged(x) || !unchanged(w) || (has_bias && !unchanged(bias))) {
    failure("conv: an input was written");
  }
  // The reference: the definition in gemmkit.h, element by element.
  const int64_t c_per_group = w.t.shape[rank - 1];
  const int64_t o_per_group = w.t.shape[0] / p.groups;
  std::vector<double> expected, magnitude;
  int64_t oi[gemmkit::kMaxRank] = {};
  if (!out.empty()) {
    for (;;) {
      const int64_t oc = oi[rank - 1];
      const int64_t g = oc / o_per_group;
      double sum = 0, mag = 0;
      int64_t tap[3] = {0, 0, 0};
      for (;;) {
        bool inside = true;
        int64_t xi[gemmkit::kMaxRank], wi[gemmkit::kMaxRank];
        xi[0] = oi[0];
        wi[0] = oc;
        for (int d = 0; d < spatial; ++d) {
          const int64_t q = oi[1 + d] * stride[d] + tap[d] * kdil[d] - lo[d];
          if (q < 0 || q > (x.t.shape[1 + d] - 1) * idil[d] || q % idil[d] != 0) inside = false;
          xi[1 + d] = q / std::max<int64_t>(idil[d], 1);
          wi[1 + d] = p.flip ? w.t.shape[1 + d] - 1 - tap[d] : tap[d];
        }
        if (inside) {
          for (int64_t ci = 0; ci < c_per_group; ++ci) {
            xi[rank - 1] = g * c_per_group + ci;
            wi[rank - 1] = ci;
            const double prod = value_at(x.t, xi) * value_at(w.t, wi);
            sum += prod;
            mag += std::fabs(prod);
          }
        }
        int d = spatial - 1;
        while (d >= 0 && ++tap[d] == w.t.shape[1 + d]) tap[d--] = 0;
        if (d < 0) break;
      }
      if (has_bias) {
        const int64_t bi[1] = {oc};
        sum += value_at(bias.t, bi);
        mag += std::fabs(value_at(bias.t, bi));
      }
      expected.push_back(sum);
      magnitude.push_back(mag);
      int d = rank - 1;
      while (d >= 0 && ++oi[d] == out.t.shape[d]) oi[d--] = 0;
      if (d < 0) break;
    }
  }
  check_output(out, expected, magnitude, "conv");
}

void fuzz_conv_transpose_params(FuzzedDataProvider& fdp) {
  const int spatial = fdp.ConsumeIntegralInRange(0, 4);
  const auto values = [&](int64_t lo, int64_t hi) {
    std::vector<int64_t> v;
    const int count =
        fdp.ConsumeIntegralInRange(0, 2) == 0 ? fdp.ConsumeIntegralInRange(0, 4) : spatial;
    for (int i = 0; i < count; ++i) {
      v.push_back(fdp.ConsumeBool() ? fdp.ConsumeIntegralInRange<int64_t>(lo, hi)
                                    : hostile_int64(fdp));
    }
    return v;
  };
  std::vector<int64_t> kernel(static_cast<std::size_t>(spatial));
  for (auto& k : kernel)
    k = fdp.ConsumeBool() ? fdp.ConsumeIntegralInRange<int64_t>(1, 5) : hostile_int64(fdp);
  const std::vector<int64_t> stride = values(1, 3), padding = values(0, 3),
                             output_padding = values(0, 2), dilation = values(1, 3);
  const int64_t groups = fdp.ConsumeBool() ? 1 : hostile_int64(fdp);
  ++g_counters.cases;
  ConvParams p;
  if (!returns(
          [&] {
            p = gemmkit::conv_transpose_params(kernel, stride, padding, output_padding, dilation,
                                               groups);
          },
          "conv_transpose_params")) {
    ++g_counters.invalid;
    return;
  }
  ++g_counters.valid;
  const auto at = [](const std::vector<int64_t>& v, int d, int64_t fallback) {
    return v.empty() ? fallback : v.size() == 1 ? v[0] : v[static_cast<std::size_t>(d)];
  };
  for (int d = 0; d < spatial; ++d) {
    const i128 want_lo =
        static_cast<i128>(at(dilation, d, 1)) * (kernel[static_cast<std::size_t>(d)] - 1) -
        at(padding, d, 0);
    const i128 want_hi = want_lo + at(output_padding, d, 0);
    if (p.padding_lo[static_cast<std::size_t>(d)] != want_lo ||
        p.padding_hi[static_cast<std::size_t>(d)] != want_hi) {
      failure("conv_transpose_params: padding other than dilation * (kernel - 1) - padding");
    }
  }
  // The parameters it returned are accepted by conv_output_shape for some input.
  std::vector<int64_t> xs{1}, ws{1};
  for (int d = 0; d < spatial; ++d) {
    xs.push_back(fdp.ConsumeIntegralInRange<int64_t>(1, 8));
    ws.push_back(kernel[static_cast<std::size_t>(d)]);
  }
  xs.push_back(groups);
  ws.push_back(1);
  std::vector<int64_t> got;
  if (returns([&] { got = gemmkit::conv_output_shape(xs, ws, p); }, "conv_output_shape")) {
    for (int d = 0; d < spatial; ++d) {
      if (got[static_cast<std::size_t>(1 + d)] !=
          conv_out_size(xs[static_cast<std::size_t>(1 + d)], ws[static_cast<std::size_t>(1 + d)], 1,
                        p.padding_lo[static_cast<std::size_t>(d)],
                        p.padding_hi[static_cast<std::size_t>(d)],
                        p.kernel_dilation[static_cast<std::size_t>(d)],
                        p.input_dilation[static_cast<std::size_t>(d)])) {
        failure("conv_output_shape: a size other than the formula's for transposed parameters");
      }
    }
  }
}

void fuzz_dlpack(FuzzedDataProvider& fdp) {
  ++g_counters.cases;
  if (fdp.ConsumeBool()) {
    // from_dlpack: a DLTensor from another library, shape and strides in exact allocations.
    DLTensor t{};
    t.ndim = fdp.ConsumeBool() ? fdp.ConsumeIntegralInRange(0, 8) : hostile_int(fdp);
    const int entries = t.ndim >= 0 && t.ndim <= 8 ? t.ndim : 0;
    std::unique_ptr<int64_t[]> shape, strides;
    if (fdp.ConsumeIntegralInRange(0, 7) != 0 && entries > 0) {
      shape.reset(new int64_t[static_cast<std::size_t>(entries)]);
      for (int i = 0; i < entries; ++i)
        shape[i] =
            fdp.ConsumeBool() ? fdp.ConsumeIntegralInRange<int64_t>(0, 9) : hostile_int64(fdp);
    }
    if (fdp.ConsumeBool() && entries > 0) {
      strides.reset(new int64_t[static_cast<std::size_t>(entries)]);
      for (int i = 0; i < entries; ++i)
        strides[i] =
            fdp.ConsumeBool() ? fdp.ConsumeIntegralInRange<int64_t>(0, 9) : hostile_int64(fdp);
    }
    t.shape = shape.get();
    t.strides = strides.get();
    const int32_t device_type =
        fdp.ConsumeBool() ? fdp.ConsumeIntegralInRange(1, 2) * 1 : fdp.ConsumeIntegral<int32_t>();
    std::memcpy(&t.device.device_type, &device_type, sizeof device_type);
    t.device.device_id = fdp.ConsumeBool() ? 0 : fdp.ConsumeIntegral<int32_t>();
    t.dtype.code = fdp.ConsumeBool() ? static_cast<uint8_t>(fdp.ConsumeIntegralInRange(2, 4))
                                     : fdp.ConsumeIntegral<uint8_t>();
    t.dtype.bits = fdp.ConsumeBool() ? static_cast<uint8_t>(16 * fdp.ConsumeIntegralInRange(1, 2))
                                     : fdp.ConsumeIntegral<uint8_t>();
    t.dtype.lanes = fdp.ConsumeBool() ? 1 : fdp.ConsumeIntegral<uint16_t>();
    t.data = fdp.ConsumeBool()
                 ? nullptr
                 : reinterpret_cast<void*>(fdp.ConsumeBool() ? uintptr_t{4096}
                                                             : fdp.ConsumeIntegral<uintptr_t>());
    t.byte_offset = fdp.ConsumeBool() ? 4 * fdp.ConsumeIntegralInRange<uint64_t>(0, 4)
                                      : fdp.ConsumeIntegral<uint64_t>();
    Tensor view;
    if (!returns([&] { view = gemmkit::from_dlpack(t); }, "from_dlpack")) {
      ++g_counters.invalid;
      return;
    }
    ++g_counters.valid;
    if (view.rank != t.ndim) failure("from_dlpack: rank != ndim");
    i128 running = 1;
    for (int i = t.ndim - 1; i >= 0; --i) {
      if (view.shape[i] != t.shape[i] || view.shape[i] < 0 || view.strides[i] < 0)
        failure("from_dlpack: a size or stride other than the DLTensor's");
      const i128 want = t.strides ? static_cast<i128>(t.strides[i]) : running;
      if (view.strides[i] != want) failure("from_dlpack: strides other than the DLTensor's");
      if (t.strides == nullptr && i > 0) {
        running *= std::max<int64_t>(t.shape[i], 1);
        if (running > std::numeric_limits<int64_t>::max())
          failure("from_dlpack: accepted row-major strides that overflow int64");
      }
    }
    if (t.data != nullptr &&
        reinterpret_cast<uintptr_t>(view.data) !=
            reinterpret_cast<uintptr_t>(t.data) + static_cast<uintptr_t>(t.byte_offset))
      failure("from_dlpack: data != data + byte_offset");
    if (reinterpret_cast<uintptr_t>(view.data) % gemmkit::dtype_size(view.dtype) != 0)
      failure("from_dlpack: returned a misaligned view");
    (void)view.str();
    return;
  }
  // to_dlpack / to_dlpack_managed of a descriptor with fuzzed (often invalid) fields.
  Tensor t;
  t.rank = fdp.ConsumeBool() ? fdp.ConsumeIntegralInRange(0, 8) : hostile_int(fdp);
  for (int i = 0; i < gemmkit::kMaxRank; ++i) {
    t.shape[i] = fdp.ConsumeBool() ? fdp.ConsumeIntegralInRange<int64_t>(0, 9) : hostile_int64(fdp);
    t.strides[i] =
        fdp.ConsumeBool() ? fdp.ConsumeIntegralInRange<int64_t>(1, 9) : hostile_int64(fdp);
  }
  const int dtype_value = fdp.ConsumeBool() ? fdp.ConsumeIntegralInRange(0, 2) : hostile_int(fdp);
  std::memcpy(&t.dtype, &dtype_value, sizeof dtype_value);
  const int kind_value = fdp.ConsumeBool() ? fdp.ConsumeIntegralInRange(0, 1) : hostile_int(fdp);
  std::memcpy(&t.device.kind, &kind_value, sizeof kind_value);
  t.device.index = fdp.ConsumeBool() ? 0 : hostile_int(fdp);
  t.data = reinterpret_cast<void*>(uintptr_t{4096} * fdp.ConsumeIntegralInRange<uintptr_t>(0, 4));
  (void)returns([&] { (void)t.str(); }, "Tensor::str");
  (void)returns([&] { (void)t.numel(); }, "Tensor::numel");
  (void)t.is_contiguous();
  DLManagedTensor* managed = nullptr;
  const bool managed_ok =
      returns([&] { managed = gemmkit::to_dlpack_managed(t); }, "to_dlpack_managed");
  DLTensor plain{};
  const bool plain_ok = returns([&] { plain = gemmkit::to_dlpack(t); }, "to_dlpack");
  if (managed_ok != plain_ok) failure("to_dlpack and to_dlpack_managed disagree");
  if (!plain_ok) {
    ++g_counters.invalid;
    return;
  }
  ++g_counters.valid;
  const DLTensor& dl = managed->dl_tensor;
  if (dl.ndim != t.rank || plain.ndim != t.rank || dl.ndim < 0 || dl.ndim > gemmkit::kMaxRank)
    failure("to_dlpack: ndim != rank");
  for (int i = 0; i < dl.ndim; ++i) {
    if (dl.shape[i] != t.shape[i] || dl.strides[i] != t.strides[i])
      failure("to_dlpack_managed: shape or strides other than the tensor's");
  }
  // The round trip gives the tensor back (when from_dlpack accepts it).
  Tensor back;
  if (returns([&] { back = gemmkit::from_dlpack(dl); }, "from_dlpack")) {
    if (back.rank != t.rank || back.dtype != t.dtype || back.device != t.device)
      failure("from_dlpack(to_dlpack(t)) differs from t");
  }
  managed->deleter(managed);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider fdp(data, size);
  const int op = fdp.ConsumeIntegralInRange(0, 9);
  const bool hostile = fdp.ConsumeBool();
  if (op <= 3) {
    fuzz_linear(fdp, hostile);
  } else if (op <= 6) {
    fuzz_conv(fdp, hostile);
  } else if (op == 7) {
    fuzz_conv_transpose_params(fdp);
  } else {
    fuzz_dlpack(fdp);
  }
  if ((g_counters.cases & (g_counters.cases - 1)) == 0 && g_counters.cases >= 1024) {
    g_counters.print("progress");
  }
  return 0;
}
