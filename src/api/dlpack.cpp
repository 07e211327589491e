// DLPack interop. A DLTensor may come from any library (or a corrupted capsule): every field is
// checked before it is used, and enum fields are read as integers, so that codes this header
// does not know (newer DLPack versions) are an error rather than undefined behaviour.
#include "gemmkit/dlpack.h"

#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "api/checks.h"
#include "api/validate.h"

namespace gemmkit {

namespace {

constexpr const char* kFrom = "from_dlpack";

DType dtype_from_dlpack(const DLDataType& t) {
  const std::string desc = "code " + std::to_string(t.code) + " bits " + std::to_string(t.bits) +
                           " lanes " + std::to_string(t.lanes);
  if (t.lanes == 1) {
    if (t.code == kDLBfloat && t.bits == 16) return DType::bf16;
    if (t.code == kDLFloat && t.bits == 16) return DType::f16;
    if (t.code == kDLFloat && t.bits == 32) return DType::f32;
  }
  detail::fail(kFrom, "dtype",
               "(" + desc +
                   "): is not supported; gemmkit takes bfloat16, float16 and float32 with one "
                   "lane");
}

DLDataType dtype_to_dlpack(DType dtype) {
  DLDataType t;
  t.lanes = 1;
  t.code = dtype == DType::bf16 ? kDLBfloat : kDLFloat;
  t.bits = dtype == DType::f32 ? 32 : 16;
  return t;
}

DLDevice device_to_dlpack(const Device& d) {
  DLDevice out;
  out.device_type = d.is_cpu() ? kDLCPU : kDLCUDA;
  out.device_id = d.is_cpu() ? 0 : d.index;
  return out;
}

// The device type as the integer the producer stored (the enum may not name it).
int32_t device_code(const DLDevice& device) {
  static_assert(sizeof(device.device_type) == sizeof(int32_t), "DLDeviceType is 32 bits");
  int32_t code;
  std::memcpy(&code, &device.device_type, sizeof code);
  return code;
}

struct ManagedRecord {
  DLManagedTensor managed;
  int64_t shape[kMaxRank];
  int64_t strides[kMaxRank];
};

// The checks of to_dlpack and to_dlpack_managed: the descriptor's fields can be exported.
void check_exportable(const char* op, const Tensor& t) {
  detail::check_descriptor(op, "t", t);
}

}  // namespace

Tensor from_dlpack(const DLTensor& t) {
  using detail::fail;
  if (t.ndim < 0 || t.ndim > kMaxRank) {
    fail(kFrom, "ndim",
         std::to_string(t.ndim) + ": must be in [0, " + std::to_string(kMaxRank) + "]");
  }
  if (t.ndim > 0 && t.shape == nullptr) {
    fail(kFrom, "shape",
         "is null with ndim " + std::to_string(t.ndim) + ": must point to ndim sizes");
  }
  Device device;
  const int32_t code = device_code(t.device);
  if (code == static_cast<int32_t>(kDLCPU)) {
    device = Device::cpu();
  } else if (code == static_cast<int32_t>(kDLCUDA)) {
    if (t.device.device_id < 0) {
      fail(kFrom, "device_id",
           std::to_string(t.device.device_id) + ": a CUDA ordinal must be >= 0");
    }
    device = Device::cuda(t.device.device_id);
  } else {
    fail(kFrom, "device_type",
         std::to_string(code) + ": is not supported; gemmkit takes kDLCPU (" +
             std::to_string(static_cast<int>(kDLCPU)) + ") and kDLCUDA (" +
             std::to_string(static_cast<int>(kDLCUDA)) + ") tensors");
  }
  Tensor out;
  out.dtype = dtype_from_dlpack(t.dtype);
  out.device = device;
  out.rank = t.ndim;
  const std::vector<int64_t> shape(t.shape, t.shape + t.ndim);
  for (int i = 0; i < t.ndim; ++i) {
    const int64_t stride = t.strides != nullptr ? t.strides[i] : 0;
    if (shape[static_cast<std::size_t>(i)] < 0 || stride < 0) {
      fail(kFrom, "shape",
           detail::format_dims(shape) + ": dim " + std::to_string(i) + " has size " +
               std::to_string(shape[static_cast<std::size_t>(i)]) + " and stride " +
               std::to_string(stride) + "; negative sizes and strides are not supported");
    }
  }
  // Row-major strides when none are given: the running product must fit int64.
  int64_t running = 1;
  for (int i = t.ndim; i-- > 0;) {
    out.shape[i] = t.shape[i];
    out.strides[i] = t.strides != nullptr ? t.strides[i] : running;
    if (t.strides == nullptr && i > 0 &&
        __builtin_mul_overflow(running, t.shape[i] > 0 ? t.shape[i] : 1, &running)) {
      fail(kFrom, "shape",
           detail::format_dims(shape) + ": strides is null and the row-major stride of dim " +
               std::to_string(i - 1) + " (the product of the later sizes) overflows int64");
    }
  }
  const std::size_t element_bytes = dtype_size(out.dtype);
  if (t.data == nullptr) {
    out.data = nullptr;
  } else {
    const auto address = reinterpret_cast<uintptr_t>(t.data);
    if (t.byte_offset > std::numeric_limits<uintptr_t>::max() - address) {
      fail(kFrom, "byte_offset",
           std::to_string(t.byte_offset) +
               ": data + byte_offset lies beyond the address space (data " +
               std::to_string(address) + ")");
    }
    if ((address + t.byte_offset) % element_bytes != 0) {
      fail(kFrom, "byte_offset",
           std::to_string(t.byte_offset) +
               ": data + byte_offset is not aligned to the element size of " +
               dtype_name(out.dtype) + " (" + std::to_string(element_bytes) + " bytes)");
    }
    out.data = static_cast<char*>(t.data) + t.byte_offset;
  }
  return out;
}

DLTensor to_dlpack(Tensor& t) {
  check_exportable("to_dlpack", t);
  DLTensor out{};
  out.data = t.data;
  out.device = device_to_dlpack(t.device);
  out.ndim = t.rank;
  out.dtype = dtype_to_dlpack(t.dtype);
  out.shape = t.shape;
  out.strides = t.strides;
  out.byte_offset = 0;
  return out;
}

DLManagedTensor* to_dlpack_managed(const Tensor& t) {
  check_exportable("to_dlpack_managed", t);
  auto* record = new ManagedRecord{};
  for (int i = 0; i < t.rank; ++i) {
    record->shape[i] = t.shape[i];
    record->strides[i] = t.strides[i];
  }
  DLTensor& dl = record->managed.dl_tensor;
  dl.data = t.data;
  dl.device = device_to_dlpack(t.device);
  dl.ndim = t.rank;
  dl.dtype = dtype_to_dlpack(t.dtype);
  dl.shape = record->shape;
  dl.strides = record->strides;
  dl.byte_offset = 0;
  record->managed.manager_ctx = record;
  record->managed.deleter = [](DLManagedTensor* self) {
    delete static_cast<ManagedRecord*>(self->manager_ctx);
  };
  return &record->managed;
}

}  // namespace gemmkit
