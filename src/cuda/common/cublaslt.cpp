#include "cuda/common/cublaslt.h"

#include <array>
#include <mutex>
#include <string>

namespace gemmkit::cuda {

namespace {
constexpr int kMaxDevices = 64;
}  // namespace

void check_cublaslt(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status != CUBLAS_STATUS_SUCCESS) {
    throw Error(std::string("cuBLASLt error ") + cublasLtGetStatusName(status) + " (" +
                cublasLtGetStatusString(status) + ") in " + call + " at " + file + ":" +
                std::to_string(line));
  }
}

cublasLtHandle_t cublaslt_handle(int device) {
  static std::mutex mutex;
  static std::array<cublasLtHandle_t, kMaxDevices> handles{};
  if (device < 0 || device >= kMaxDevices) {
    throw Error("device cuda:" + std::to_string(device) + " is beyond the " +
                std::to_string(kMaxDevices) + " devices gemmkit's per-device caches hold");
  }
  std::lock_guard<std::mutex> lock(mutex);
  cublasLtHandle_t& handle = handles[static_cast<std::size_t>(device)];
  if (handle == nullptr) GEMMKIT_CUBLASLT_CHECK(cublasLtCreate(&handle));
  return handle;
}

cudaDataType_t cublas_data_type(DType dtype) {
  switch (dtype) {
    case DType::bf16:
      return CUDA_R_16BF;
    case DType::f16:
      return CUDA_R_16F;
    case DType::f32:
      return CUDA_R_32F;
  }
  throw Error("cublas_data_type: dtype value " + std::to_string(static_cast<int>(dtype)) +
              " is not one of bf16, f16, f32");
}

}  // namespace gemmkit::cuda
