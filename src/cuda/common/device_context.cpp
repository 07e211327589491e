#include "cuda/common/device_context.h"

#include <array>
#include <atomic>
#include <memory>
#include <mutex>

#include "cuda/common/cuda_check.h"

namespace gemmkit::cuda {

bool stream_is_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  GEMMKIT_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

RelaxedCaptureMode::RelaxedCaptureMode() {
  GEMMKIT_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&previous_));
}

RelaxedCaptureMode::~RelaxedCaptureMode() {
  cudaThreadExchangeStreamCaptureMode(&previous_);  // best effort: destructors must not throw
}

DeviceGuard::DeviceGuard(int device) {
  GEMMKIT_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != device) {
    GEMMKIT_CUDA_CHECK(cudaSetDevice(device));
    switched_ = true;
  }
}

DeviceGuard::~DeviceGuard() {
  if (switched_) cudaSetDevice(previous_);  // best effort: destructors must not throw
}

int device_count() {
  static const int count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky "no driver" status
      return 0;
    }
    return n;
  }();
  return count;
}

namespace {
constexpr int kMaxDevices = 64;
std::array<std::unique_ptr<DeviceProperties>, kMaxDevices> g_properties;
std::mutex g_properties_mutex;
// The properties read so far, published once complete: every call after a device's first reads
// them without taking the mutex.
std::array<std::atomic<const DeviceProperties*>, kMaxDevices> g_ready{};
}  // namespace

const DeviceProperties& device_properties(int device) {
  if (device >= 0 && device < kMaxDevices) {
    const DeviceProperties* ready =
        g_ready[static_cast<std::size_t>(device)].load(std::memory_order_acquire);
    if (ready != nullptr) return *ready;
  }
  const int count = device_count();
  if (device < 0 || device >= count || device >= kMaxDevices) {
    throw Error("device cuda:" + std::to_string(device) + " does not exist (" +
                std::to_string(count) + " CUDA device(s) usable)");
  }
  std::lock_guard<std::mutex> lock(g_properties_mutex);
  auto& slot = g_properties[static_cast<std::size_t>(device)];
  if (!slot) {
    auto p = std::make_unique<DeviceProperties>();
    p->ordinal = device;
    const auto attribute = [&](cudaDeviceAttr attr) {
      int value = 0;
      GEMMKIT_CUDA_CHECK(cudaDeviceGetAttribute(&value, attr, device));
      return value;
    };
    p->sm_major = attribute(cudaDevAttrComputeCapabilityMajor);
    p->sm_minor = attribute(cudaDevAttrComputeCapabilityMinor);
    p->multiprocessors = attribute(cudaDevAttrMultiProcessorCount);
    p->l2_bytes = attribute(cudaDevAttrL2CacheSize);
    p->shared_per_block_optin = attribute(cudaDevAttrMaxSharedMemoryPerBlockOptin);
    p->shared_per_multiprocessor = attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor);
    p->max_grid_x = attribute(cudaDevAttrMaxGridDimX);
    p->max_grid_y = attribute(cudaDevAttrMaxGridDimY);
    p->max_grid_z = attribute(cudaDevAttrMaxGridDimZ);
    p->cluster_launch = attribute(cudaDevAttrClusterLaunch) != 0;
    slot = std::move(p);
    g_ready[static_cast<std::size_t>(device)].store(slot.get(), std::memory_order_release);
  }
  return *slot;
}

}  // namespace gemmkit::cuda
