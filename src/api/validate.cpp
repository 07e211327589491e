#include "api/validate.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <numeric>

#include "api/checks.h"

namespace gemmkit::detail {

void fail(const char* op, const std::string& argument, const std::string& message) {
  throw Error(std::string("gemmkit::") + op + ": " + argument + " " + message);
}

namespace {

// Largest element offset + 1, in elements (sizes and strides already checked >= 1).
int64_t element_span(const char* op, const char* name, const Tensor& t) {
  int64_t last = 0;
  for (int i = 0; i < t.rank; ++i) {
    const auto what = [&] { return std::string("gemmkit::") + op + ": " + name + " byte span"; };
    last = checked_add(last, checked_mul(t.shape[i] - 1, t.strides[i], what), what);
  }
  return last + 1;
}

}  // namespace

void check_tensor(const char* op, const char* name, const Tensor& t, int rank) {
  const int dtype_value = static_cast<int>(t.dtype);
  if (dtype_value < 0 || dtype_value > 2) {
    fail(op, name, "dtype value " + std::to_string(dtype_value) + ": must be bf16, f16 or f32");
  }
  if (t.rank != rank) {
    fail(op, name,
         t.str() + ": has rank " + std::to_string(t.rank) + "; rank " + std::to_string(rank) +
             " is required");
  }
  for (int i = 0; i < t.rank; ++i) {
    if (t.shape[i] < 1) {
      fail(op, name,
           t.str() + ": dim " + std::to_string(i) + " has size " + std::to_string(t.shape[i]) +
               "; every size must be >= 1");
    }
    if (t.strides[i] < 1) {
      fail(op, name,
           t.str() + ": dim " + std::to_string(i) + " has stride " + std::to_string(t.strides[i]) +
               "; every stride must be >= 1");
    }
  }
  int64_t count = 1;
  for (int i = 0; i < t.rank; ++i) {
    count = checked_mul(count, t.shape[i], [&] {
      return std::string("gemmkit::") + op + ": " + name + " " + t.str() + ": element count";
    });
  }
  const int64_t span = element_span(op, name, t);
  checked_mul(span, static_cast<int64_t>(dtype_size(t.dtype)), [&] {
    return std::string("gemmkit::") + op + ": " + name + " " + t.str() + ": size in bytes";
  });
  if (t.data == nullptr) {
    fail(op, name,
         t.str() + ": data is null but the tensor has " + std::to_string(count) + " elements");
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

void check_non_overlapping(const char* op, const char* name, const Tensor& t) {
  // Sorted by stride, each dim's stride must step past the whole extent of the smaller ones.
  std::vector<int> order;
  for (int i = 0; i < t.rank; ++i) {
    if (t.shape[i] > 1) order.push_back(i);
  }
  std::sort(order.begin(), order.end(), [&](int a, int b) { return t.strides[a] < t.strides[b]; });
  int64_t extent = 1;
  for (int i : order) {
    if (t.strides[i] < extent) {
      fail(op, name,
           t.str() + ": elements overlap (dim " + std::to_string(i) + " stride " +
               std::to_string(t.strides[i]) + " < extent " + std::to_string(extent) +
               " of the faster dims); an output must not overlap itself");
    }
    extent = t.strides[i] * (t.shape[i] - 1) + extent;
  }
}

void check_disjoint(const char* op, const char* out_name, const Tensor& out, const char* input_name,
                    const Tensor& input) {
  if (out.device != input.device) return;
  const auto span_bytes = [](const Tensor& t) {
    int64_t last = 0;
    for (int i = 0; i < t.rank; ++i) last += (t.shape[i] - 1) * t.strides[i];
    return (last + 1) * static_cast<int64_t>(dtype_size(t.dtype));
  };
  const auto* out_begin = static_cast<const char*>(out.data);
  const auto* in_begin = static_cast<const char*>(input.data);
  const auto* out_end = out_begin + span_bytes(out);
  const auto* in_end = in_begin + span_bytes(input);
  if (out_begin < in_end && in_begin < out_end) {
    fail(op, out_name,
         out.str() + ": its memory overlaps " + input_name + " " + input.str() +
             "; outputs must not alias inputs");
  }
}

void check_same_device(const char* op, const char* name, const Tensor& t, const char* ref_name,
                       const Tensor& ref) {
  if (t.device != ref.device) {
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
             dtype_name(x.dtype) + " or f32");
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
