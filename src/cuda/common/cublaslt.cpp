#include "cuda/common/cublaslt.h"

#include <array>
#include <atomic>
#include <mutex>
#include <string>

#include "cuda/common/cuda_check.h"
#include "cuda/common/device_context.h"

namespace gemmkit::cuda {

namespace {
constexpr int kMaxDevices = 64;

void check_device_index(int device) {
  if (device < 0 || device >= kMaxDevices) {
    throw Error("device cuda:" + std::to_string(device) + " is beyond the " +
                std::to_string(kMaxDevices) + " devices gemmkit's per-device caches hold");
  }
}

struct OwnScratch {
  std::mutex mutex;
  void* data = nullptr;
  cudaEvent_t last_use = nullptr;  // recorded on the stream of the latest call, after its work
  bool used = false;
};

OwnScratch& own_scratch(int device) {
  static std::array<OwnScratch, kMaxDevices> scratch;
  check_device_index(device);
  return scratch[static_cast<std::size_t>(device)];
}
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
  // Published once created: the calls after a device's first read them without the mutex.
  static std::array<std::atomic<cublasLtHandle_t>, kMaxDevices> handles{};
  check_device_index(device);
  std::atomic<cublasLtHandle_t>& slot = handles[static_cast<std::size_t>(device)];
  cublasLtHandle_t handle = slot.load(std::memory_order_acquire);
  if (handle != nullptr) return handle;
  std::lock_guard<std::mutex> lock(mutex);
  handle = slot.load(std::memory_order_relaxed);
  if (handle == nullptr) {
    const RelaxedCaptureMode relaxed;  // a first call may come inside a capture
    GEMMKIT_CUBLASLT_CHECK(cublasLtCreate(&handle));
    slot.store(handle, std::memory_order_release);
  }
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

CallScratch::CallScratch(int device, cudaStream_t stream, std::size_t bytes, void* caller,
                         int64_t caller_bytes)
    : device_(device), stream_(stream) {
  if (caller != nullptr) {
    source_ = Source::caller;
    data_ = caller;
    bytes_ = static_cast<std::size_t>(caller_bytes);
    return;
  }
  if (bytes > kMaxOwnScratchBytes) {
    throw Error("gemmkit: internal: call scratch of " + std::to_string(bytes) +
                " bytes asked for; the own buffer holds " + std::to_string(kMaxOwnScratchBytes));
  }
  bytes_ = bytes;
  if (stream_is_capturing(stream)) {
    source_ = Source::graph;
    GEMMKIT_CUDA_CHECK(cudaMallocAsync(&data_, bytes, stream));
    return;
  }
  source_ = Source::device;
  OwnScratch& own = own_scratch(device);
  lock_ = std::unique_lock<std::mutex>(own.mutex);
  if (own.last_use == nullptr) {
    GEMMKIT_CUDA_CHECK(cudaEventCreateWithFlags(&own.last_use, cudaEventDisableTiming));
  }
  if (own.data == nullptr) GEMMKIT_CUDA_CHECK(cudaMalloc(&own.data, kMaxOwnScratchBytes));
  if (own.used) GEMMKIT_CUDA_CHECK(cudaStreamWaitEvent(stream, own.last_use, 0));
  data_ = own.data;
}

CallScratch::~CallScratch() {
  // Best effort: destructors must not throw. Also after a failed enqueue: whatever was enqueued
  // must finish before the memory is reused.
  if (source_ == Source::graph) {
    cudaFreeAsync(data_, stream_);
  } else if (source_ == Source::device) {
    OwnScratch& own = own_scratch(device_);
    if (cudaEventRecord(own.last_use, stream_) == cudaSuccess) own.used = true;
  }
}

}  // namespace gemmkit::cuda
