#include "api/validate.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <map>
#include <mutex>
#include <numeric>
#include <sstream>

#include "api/checks.h"

namespace gemmkit::detail {

void fail(const char* op, const std::string& argument, const std::string& message) {
  throw Error(std::string("gemmkit::") + op + ": " + argument + " " + message);
}

namespace {

// Spans up to which check_non_overlapping decides exactly (a bitmap of this many bits, and at
// most one more step of enumeration); above, it applies the sorted-stride rule alone.
constexpr int64_t kExactOverlapSpan = int64_t{1} << 24;

// dtype_size and Device's operator==, inline here: validation runs on every call, and those live
// in another translation unit. For descriptors check_descriptor accepted (a dtype of the enum).
inline int64_t element_bytes(DType dtype) {
  return dtype == DType::f32 ? 4 : 2;
}
inline bool same_device(const Device& a, const Device& b) {
  return a.kind == b.kind && (a.kind == DeviceKind::cpu || a.index == b.index);
}

// Largest element offset + 1, in elements (sizes >= 1 and strides >= 1 already checked).
int64_t element_span(const char* op, const char* name, const Tensor& t) {
  const auto what = [&] {
    return std::string("gemmkit::") + op + ": " + name + " " + t.str() + ": element span";
  };
  int64_t last = 0;
  for (int i = 0; i < t.rank; ++i) {
    last = checked_add(last, checked_mul(t.shape[i] - 1, t.strides[i], what), what);
  }
  return checked_add(last, 1, what);
}

std::string format_address(const void* p) {
  std::ostringstream s;
  s << "0x" << std::hex << reinterpret_cast<uintptr_t>(p);
  return s.str();
}

// Number of elements of a validated descriptor (0 for an empty one); fits int64.
int64_t element_count(const Tensor& t) {
  int64_t count = 1;
  for (int i = 0; i < t.rank; ++i) count *= t.shape[i];
  return count;
}

// Byte span of a validated descriptor: 0 when it has no elements.
int64_t span_bytes(const Tensor& t) {
  if (element_count(t) == 0) return 0;
  int64_t last = 0;
  for (int i = 0; i < t.rank; ++i) last += (t.shape[i] - 1) * t.strides[i];
  return (last + 1) * element_bytes(t.dtype);
}

std::string format_index(const int64_t* index, int rank) {
  return format_dims(std::vector<int64_t>(index, index + rank));
}

// Visits the index tuples of `t` in row-major order until `visit(index, offset)` returns false.
template <typename Visit>
void for_each_index(const Tensor& t, Visit visit) {
  int64_t index[kMaxRank] = {};
  for (;;) {
    int64_t offset = 0;
    for (int i = 0; i < t.rank; ++i) offset += index[i] * t.strides[i];
    if (!visit(index, offset)) return;
    int d = t.rank - 1;
    while (d >= 0 && ++index[d] == t.shape[d]) index[d--] = 0;
    if (d < 0) return;
  }
}

}  // namespace

void check_rank_in_range(const char* op, const char* name, const Tensor& t) {
  if (t.rank < 0 || t.rank > kMaxRank) {
    fail(op, name,
         "rank " + std::to_string(t.rank) + ": must be in [0, " + std::to_string(kMaxRank) +
             "] (a descriptor holds at most kMaxRank dims)");
  }
}

void check_descriptor(const char* op, const char* name, const Tensor& t) {
  check_rank_in_range(op, name, t);
  const int dtype_value = static_cast<int>(t.dtype);
  if (dtype_value < 0 || dtype_value > 2) {
    fail(op, name, "dtype value " + std::to_string(dtype_value) + ": must be bf16, f16 or f32");
  }
  if (t.device.kind != DeviceKind::cpu && t.device.kind != DeviceKind::cuda) {
    fail(
        op, name,
        "device kind " + std::to_string(static_cast<int>(t.device.kind)) + ": must be cpu or cuda");
  }
  if (t.device.is_cuda() && t.device.index < 0) {
    fail(op, name, "device " + t.device.str() + ": the CUDA ordinal must be >= 0");
  }
}

void check_tensor(const char* op, const char* name, const Tensor& t, int rank,
                  bool allow_empty_dim0) {
  check_descriptor(op, name, t);
  if (t.rank != rank) {
    fail(op, name,
         t.str() + ": has rank " + std::to_string(t.rank) + "; rank " + std::to_string(rank) +
             " is required");
  }
  for (int i = 0; i < t.rank; ++i) {
    const bool may_be_empty = allow_empty_dim0 && i == 0;
    if (t.shape[i] < (may_be_empty ? 0 : 1)) {
      fail(op, name,
           t.str() + ": dim " + std::to_string(i) + " has size " + std::to_string(t.shape[i]) +
               (allow_empty_dim0 ? "; dim 0 (the batch) must be >= 0 and every other size >= 1"
                                 : "; every size must be >= 1"));
    }
  }
  int64_t count = 1;
  for (int i = 0; i < t.rank; ++i) {
    count = checked_mul(count, t.shape[i], [&] {
      return std::string("gemmkit::") + op + ": " + name + " " + t.str() + ": element count";
    });
  }
  // An empty batch addresses no element, so its strides are never used: frameworks give such
  // views any stride (torch's [2, 0, k] flattened to [0, k] has stride 0 in dim 0).
  const int64_t min_stride = count == 0 ? 0 : 1;
  for (int i = 0; i < t.rank; ++i) {
    if (t.strides[i] < min_stride) {
      fail(op, name,
           t.str() + ": dim " + std::to_string(i) + " has stride " + std::to_string(t.strides[i]) +
               (count == 0 ? "; strides must be >= 0" : "; every stride must be >= 1"));
    }
  }
  if (count == 0) return;  // an empty batch: no memory is read or written, any pointer will do
  const int64_t span = element_span(op, name, t);
  checked_mul(span, element_bytes(t.dtype), [&] {
    return std::string("gemmkit::") + op + ": " + name + " " + t.str() + ": size in bytes";
  });
  if (t.data == nullptr) {
    fail(op, name,
         t.str() + ": data is null but the tensor has " + std::to_string(count) + " elements");
  }
  const auto alignment = static_cast<std::size_t>(element_bytes(t.dtype));
  if (reinterpret_cast<uintptr_t>(t.data) % alignment != 0) {
    fail(op, name,
         t.str() + ": data address " + format_address(t.data) +
             " is not aligned to the element size of " + dtype_name(t.dtype) + " (" +
             std::to_string(alignment) + " bytes)");
  }
}

void check_non_overlapping(const char* op, const char* name, const Tensor& t) {
  if (element_count(t) == 0) return;
  // Sufficient: sorted by stride, each dim's stride steps past the whole extent of the smaller
  // ones (every dense or padded layout, in any dim order).
  // A fixed array: this runs on every call (no allocation on the hot path).
  std::array<int, kMaxRank> order{};
  int dims = 0;
  for (int i = 0; i < t.rank; ++i) {
    if (t.shape[i] > 1) order[static_cast<std::size_t>(dims++)] = i;
  }
  for (int a = 1; a < dims; ++a) {  // insertion sort by stride: at most kMaxRank dims
    const int dim = order[static_cast<std::size_t>(a)];
    int b = a;
    for (; b > 0 && t.strides[order[static_cast<std::size_t>(b - 1)]] > t.strides[dim]; --b) {
      order[static_cast<std::size_t>(b)] = order[static_cast<std::size_t>(b - 1)];
    }
    order[static_cast<std::size_t>(b)] = dim;
  }
  int64_t extent = 1;
  int short_dim = -1;
  int64_t short_extent = 0;
  for (int d = 0; d < dims; ++d) {
    const int i = order[static_cast<std::size_t>(d)];
    if (t.strides[i] < extent && short_dim < 0) {
      short_dim = i;
      short_extent = extent;
    }
    int64_t grown;
    if (__builtin_mul_overflow(t.strides[i], t.shape[i] - 1, &grown) ||
        __builtin_add_overflow(grown, extent, &extent)) {
      extent = std::numeric_limits<int64_t>::max();
    }
  }
  if (short_dim < 0) return;
  // Exact: enumerate the offsets (interleaved layouts such as strides [4, 3] for shape [2, 5]
  // pass it). A collision is found within span + 1 steps.
  const int64_t span = span_bytes(t) / element_bytes(t.dtype);
  if (span > kExactOverlapSpan) {
    fail(op, name,
         t.str() + ": elements may overlap (dim " + std::to_string(short_dim) + " stride " +
             std::to_string(t.strides[short_dim]) + " < extent " + std::to_string(short_extent) +
             " of the dims of smaller stride, and the exact check runs only for spans up to 2^24 "
             "elements; this one spans " +
             std::to_string(span) + "); an output must not overlap itself");
  }
  std::vector<bool> seen(static_cast<std::size_t>(span), false);
  int64_t collision = -1;
  std::vector<int64_t> second;
  for_each_index(t, [&](const int64_t* index, int64_t offset) {
    if (seen[static_cast<std::size_t>(offset)]) {
      collision = offset;
      second.assign(index, index + t.rank);
      return false;
    }
    seen[static_cast<std::size_t>(offset)] = true;
    return true;
  });
  if (collision < 0) return;
  std::vector<int64_t> first;
  for_each_index(t, [&](const int64_t* index, int64_t offset) {
    if (offset != collision) return true;
    first.assign(index, index + t.rank);
    return false;
  });
  fail(op, name,
       t.str() + ": elements overlap (indices " + format_index(first.data(), t.rank) + " and " +
           format_index(second.data(), t.rank) + " both address element " +
           std::to_string(collision) + "); an output must not overlap itself");
}

void check_disjoint(const char* op, const char* out_name, const Tensor& out, const char* input_name,
                    const Tensor& input) {
  if (!same_device(out.device, input.device)) return;
  const int64_t out_bytes = span_bytes(out), in_bytes = span_bytes(input);
  if (out_bytes == 0 || in_bytes == 0) return;  // an empty tensor has no memory
  const auto out_begin = reinterpret_cast<uintptr_t>(out.data);
  const auto in_begin = reinterpret_cast<uintptr_t>(input.data);
  // Compared as addresses, without forming pointers past either allocation.
  const bool out_before_in =
      out_begin < in_begin && in_begin - out_begin >= static_cast<uintptr_t>(out_bytes);
  const bool in_before_out =
      in_begin < out_begin && out_begin - in_begin >= static_cast<uintptr_t>(in_bytes);
  if (!out_before_in && !in_before_out) {
    fail(op, out_name,
         out.str() + ": its memory overlaps " + input_name + " " + input.str() +
             "; outputs must not alias inputs");
  }
}

void check_same_device(const char* op, const char* name, const Tensor& t, const char* ref_name,
                       const Tensor& ref) {
  if (!same_device(t.device, ref.device)) {
    fail(op, name,
         "is on " + t.device.str() + " but " + ref_name + " is on " + ref.device.str() +
             "; all tensors of a call must be on one device");
  }
}

void check_operand_devices_and_dtypes(const char* op, const Tensor& x, const char* weight_name,
                                      const Tensor& weight, const std::optional<Tensor>& bias,
                                      const Tensor& out) {
  check_same_device(op, weight_name, weight, "x", x);
  check_same_device(op, "out", out, "x", x);
  if (bias) check_same_device(op, "bias", *bias, "x", x);
  if (weight.dtype != x.dtype) {
    fail(op, weight_name,
         std::string("dtype ") + dtype_name(weight.dtype) + ": must equal x's dtype " +
             dtype_name(x.dtype));
  }
  if (bias && bias->dtype != x.dtype) {
    fail(op, "bias",
         std::string("dtype ") + dtype_name(bias->dtype) + ": must equal x's dtype " +
             dtype_name(x.dtype));
  }
  if (out.dtype != x.dtype && out.dtype != DType::f32) {
    fail(op, "out",
         std::string("dtype ") + dtype_name(out.dtype) + ": must be x's dtype " +
             dtype_name(x.dtype) + (x.dtype == DType::f32 ? "" : " or f32"));
  }
}

const std::string& env_setting(const char* name) {
  static std::mutex mutex;
  static std::map<std::string, std::string> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(name);
  if (it == cache.end()) {
    const char* value = std::getenv(name);
    it = cache.emplace(name, value ? value : "").first;
  }
  return it->second;
}

bool parse_switch(const char* op, const char* name, const std::string& value) {
  if (value.empty() || value == "1") return true;
  if (value != "0") fail(op, name, "'" + value + "': must be 0 or 1");
  return false;
}

bool parse_switch_default_off(const char* op, const char* name, const std::string& value) {
  return !value.empty() && parse_switch(op, name, value);
}

void check_switch_option(const char* op, const char* option, int value, const char* env_name) {
  if (value < -1 || value > 1) {
    fail(op, option,
         std::to_string(value) + ": must be -1, 0 or 1 (-1: " + env_name + ", 0: off, 1: on)");
  }
}

std::optional<int64_t> parse_whole_number(const std::string& text, int max_digits) {
  if (text.empty() || text.size() > static_cast<std::size_t>(max_digits)) return std::nullopt;
  int64_t value = 0;
  for (const char ch : text) {
    if (ch < '0' || ch > '9') return std::nullopt;
    value = value * 10 + (ch - '0');
  }
  return value;
}

}  // namespace gemmkit::detail
