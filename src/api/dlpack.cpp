#include "gemmkit/dlpack.h"

#include <string>

namespace gemmkit {

namespace {

DType dtype_from_dlpack(const DLDataType& t) {
  const std::string desc = "code " + std::to_string(t.code) + " bits " + std::to_string(t.bits) +
                           " lanes " + std::to_string(t.lanes);
  if (t.lanes == 1) {
    if (t.code == kDLBfloat && t.bits == 16) return DType::bf16;
    if (t.code == kDLFloat && t.bits == 16) return DType::f16;
    if (t.code == kDLFloat && t.bits == 32) return DType::f32;
  }
  throw Error("from_dlpack: dtype (" + desc +
              ") is not supported; gemmkit takes bfloat16, float16 and float32 with one lane");
}

DLDataType dtype_to_dlpack(DType dtype) {
  DLDataType t;
  t.lanes = 1;
  switch (dtype) {
    case DType::bf16:
      t.code = kDLBfloat;
      t.bits = 16;
      break;
    case DType::f16:
      t.code = kDLFloat;
      t.bits = 16;
      break;
    case DType::f32:
      t.code = kDLFloat;
      t.bits = 32;
      break;
  }
  return t;
}

DLDevice device_to_dlpack(const Device& d) {
  DLDevice out;
  out.device_type = d.is_cpu() ? kDLCPU : kDLCUDA;
  out.device_id = d.is_cpu() ? 0 : d.index;
  return out;
}

struct ManagedRecord {
  DLManagedTensor managed;
  int64_t shape[kMaxRank];
  int64_t strides[kMaxRank];
};

}  // namespace

Tensor from_dlpack(const DLTensor& t) {
  if (t.ndim < 0 || t.ndim > kMaxRank) {
    throw Error("from_dlpack: ndim " + std::to_string(t.ndim) + " must be in [0, " +
                std::to_string(kMaxRank) + "]");
  }
  Device device;
  if (t.device.device_type == kDLCPU) {
    device = Device::cpu();
  } else if (t.device.device_type == kDLCUDA) {
    device = Device::cuda(t.device.device_id);
  } else {
    throw Error("from_dlpack: device type " + std::to_string(t.device.device_type) +
                " is not supported; gemmkit takes kDLCPU and kDLCUDA tensors");
  }
  Tensor out;
  out.dtype = dtype_from_dlpack(t.dtype);
  out.device = device;
  out.rank = t.ndim;
  out.data = t.data == nullptr ? nullptr : static_cast<char*>(t.data) + t.byte_offset;
  int64_t running = 1;
  for (int i = t.ndim; i-- > 0;) {
    out.shape[i] = t.shape[i];
    out.strides[i] = t.strides != nullptr ? t.strides[i] : running;
    if (out.shape[i] < 0 || out.strides[i] < 0) {
      throw Error("from_dlpack: dim " + std::to_string(i) + " has size " +
                  std::to_string(out.shape[i]) + " and stride " + std::to_string(out.strides[i]) +
                  "; negative sizes and strides are not supported");
    }
    running *= t.shape[i] > 0 ? t.shape[i] : 1;
  }
  return out;
}

DLTensor to_dlpack(Tensor& t) {
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
