// Tensor descriptors, dtypes, devices and host float conversions.
#include <cstring>
#include <sstream>

#include "api/checks.h"
#include "gemmkit/gemmkit.h"

namespace gemmkit {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::bf16:
      return "bf16";
    case DType::f16:
      return "f16";
    case DType::f32:
      return "f32";
  }
  return "invalid-dtype";
}

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::bf16:
    case DType::f16:
      return 2;
    case DType::f32:
      return 4;
  }
  throw Error("gemmkit::dtype_size: dtype value " + std::to_string(static_cast<int>(dtype)) +
              " is not one of bf16, f16, f32");
}

DType parse_dtype(const std::string& name) {
  if (name == "bf16" || name == "bfloat16") return DType::bf16;
  if (name == "f16" || name == "fp16" || name == "float16" || name == "half") return DType::f16;
  if (name == "f32" || name == "fp32" || name == "float32" || name == "float") return DType::f32;
  throw Error("dtype: value '" + name + "' is not one of bf16, f16, f32");
}

std::string Device::str() const {
  if (kind == DeviceKind::cpu) return "cpu";
  if (kind == DeviceKind::cuda) return "cuda:" + std::to_string(index);
  return "device-kind-" + std::to_string(static_cast<int>(kind));
}

bool operator==(const Device& a, const Device& b) {
  return a.kind == b.kind && (a.kind == DeviceKind::cpu || a.index == b.index);
}
bool operator!=(const Device& a, const Device& b) {
  return !(a == b);
}

Device parse_device(const std::string& name) {
  if (name == "cpu") return Device::cpu();
  if (name == "cuda" || name == "gpu") return Device::cuda(0);
  for (const char* prefix : {"cuda:", "gpu:"}) {
    const std::size_t len = std::strlen(prefix);
    if (name.compare(0, len, prefix) == 0 && name.size() > len) {
      const std::string digits = name.substr(len);
      if (digits.find_first_not_of("0123456789") == std::string::npos && digits.size() < 6) {
        return Device::cuda(std::stoi(digits));
      }
    }
  }
  throw Error("device: value '" + name + "' is not one of cpu, cuda, cuda:N");
}

namespace {

// The descriptor of `rank` dims from `shape` and `strides` (nullptr: row-major contiguous), with
// the rank checks of the factory named `factory`; `stride_count` is the length of the strides
// given (ignored without strides).
Tensor make_tensor(const char* factory, void* data, DType dtype, Device device,
                   const int64_t* shape, std::size_t rank, const int64_t* strides,
                   std::size_t stride_count) {
  if (rank > static_cast<std::size_t>(kMaxRank)) {
    throw Error(std::string("gemmkit::Tensor::") + factory + ": shape has rank " +
                std::to_string(rank) + "; the rank must be at most " + std::to_string(kMaxRank));
  }
  if (strides != nullptr && stride_count != rank) {
    throw Error(std::string("gemmkit::Tensor::") + factory + ": strides has " +
                std::to_string(stride_count) + " entries but shape has " + std::to_string(rank) +
                "; they must have the same length");
  }
  Tensor t;
  t.data = data;
  t.dtype = dtype;
  t.device = device;
  t.rank = static_cast<int>(rank);
  int64_t running = 1;
  for (std::size_t i = rank; i-- > 0;) {
    t.shape[i] = shape[i];
    if (strides != nullptr) {
      t.strides[i] = strides[i];
    } else {
      t.strides[i] = running;
      // Saturate: an overflowing shape is reported by the operation's validation (numel()).
      running = detail::saturating_mul(running, shape[i] > 0 ? shape[i] : 1);
    }
  }
  return t;
}

}  // namespace

Tensor Tensor::contiguous(void* data, DType dtype, Device device,
                          const std::vector<int64_t>& shape) {
  return make_tensor("contiguous", data, dtype, device, shape.data(), shape.size(), nullptr, 0);
}

Tensor Tensor::contiguous(void* data, DType dtype, Device device,
                          std::initializer_list<int64_t> shape) {
  return make_tensor("contiguous", data, dtype, device, shape.begin(), shape.size(), nullptr, 0);
}

Tensor Tensor::strided(void* data, DType dtype, Device device, const std::vector<int64_t>& shape,
                       const std::vector<int64_t>& strides) {
  return make_tensor("strided", data, dtype, device, shape.data(), shape.size(), strides.data(),
                     strides.size());
}

Tensor Tensor::strided(void* data, DType dtype, Device device, std::initializer_list<int64_t> shape,
                       std::initializer_list<int64_t> strides) {
  return make_tensor("strided", data, dtype, device, shape.begin(), shape.size(), strides.begin(),
                     strides.size());
}

namespace {

bool rank_in_range(int rank) {
  return rank >= 0 && rank <= kMaxRank;
}

}  // namespace

std::vector<int64_t> Tensor::sizes() const {
  if (!rank_in_range(rank)) return {};
  return std::vector<int64_t>(shape, shape + rank);
}
std::vector<int64_t> Tensor::stride_vector() const {
  if (!rank_in_range(rank)) return {};
  return std::vector<int64_t>(strides, strides + rank);
}

int64_t Tensor::numel() const {
  if (!rank_in_range(rank)) {
    throw Error("gemmkit::Tensor::numel: rank " + std::to_string(rank) + ": must be in [0, " +
                std::to_string(kMaxRank) + "]");
  }
  int64_t n = 1;
  for (int i = 0; i < rank; ++i) {
    n = detail::checked_mul(n, shape[i],
                            [&] { return "gemmkit::Tensor::numel: " + str() + ": element count"; });
  }
  return n;
}

bool Tensor::is_contiguous() const {
  if (!rank_in_range(rank)) return false;
  int64_t expected = 1;
  for (int i = rank; i-- > 0;) {
    if (shape[i] != 1 && strides[i] != expected) return false;
    expected = detail::saturating_mul(expected, shape[i]);
  }
  return true;
}

std::string Tensor::str() const {
  std::ostringstream s;
  if (!rank_in_range(rank)) {
    // shape and strides hold kMaxRank entries: with this rank none of them is meaningful.
    s << dtype_name(dtype) << " of rank " << rank << " (outside [0, " << kMaxRank << "]) on "
      << device.str();
    return s.str();
  }
  s << dtype_name(dtype) << detail::format_dims(sizes()) << " strides "
    << detail::format_dims(stride_vector()) << " on " << device.str();
  return s.str();
}

// ---- float <-> 16-bit formats ------------------------------------------------------------------

uint16_t float_to_bf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);  // round to nearest, ties to even
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

float bf16_to_float(uint16_t bits) {
  const uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, 4);
  return value;
}

uint16_t float_to_f16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {
    // Subnormal or zero in f16: scale so the f16 subnormal step (2^-24) is 1 and round.
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);  // below half the smallest step
    const uint32_t exponent = abs >> 23;
    const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - exponent;  // 14 .. 24 (113 - exponent + 13)
    uint32_t result = mantissa >> shift;
    const uint32_t remainder = mantissa & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1u);
    if (remainder > half || (remainder == half && (result & 1u))) ++result;
    return static_cast<uint16_t>(sign | result);
  }
  uint32_t rebased = abs - 0x38000000u;  // exponent bias 127 -> 15
  const uint32_t rounding = 0xfffu + ((rebased >> 13) & 1u);
  rebased += rounding;
  return static_cast<uint16_t>(sign | (rebased >> 13));
}

float f16_to_float(uint16_t bits) {
  const uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  const uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  uint32_t out;
  if (exponent == 0) {
    if (mantissa == 0) {
      out = sign;
    } else {  // subnormal: normalize
      uint32_t e = 113;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        --e;
      }
      out = sign | (e << 23) | ((mantissa & 0x3ffu) << 13);
    }
  } else if (exponent == 31) {
    out = sign | 0x7f800000u | (mantissa << 13);
  } else {
    out = sign | ((exponent + 112u) << 23) | (mantissa << 13);
  }
  float value;
  std::memcpy(&value, &out, 4);
  return value;
}

// Through memcpy: a caller's buffer need not be aligned to the element size.
float load_as_float(const void* data, DType dtype, int64_t index) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  if (dtype == DType::f32) {
    float value;
    std::memcpy(&value, bytes + index * 4, 4);
    return value;
  }
  uint16_t bits;
  std::memcpy(&bits, bytes + index * 2, 2);
  if (dtype == DType::bf16) return bf16_to_float(bits);
  if (dtype == DType::f16) return f16_to_float(bits);
  return 0.0f;
}

void store_from_float(void* data, DType dtype, int64_t index, float value) {
  auto* bytes = static_cast<unsigned char*>(data);
  if (dtype == DType::f32) {
    std::memcpy(bytes + index * 4, &value, 4);
    return;
  }
  uint16_t bits;
  if (dtype == DType::bf16) {
    bits = float_to_bf16(value);
  } else if (dtype == DType::f16) {
    bits = float_to_f16(value);
  } else {
    return;
  }
  std::memcpy(bytes + index * 2, &bits, 2);
}

}  // namespace gemmkit
