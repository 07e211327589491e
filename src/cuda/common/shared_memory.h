// Opting a kernel in to more than the default 48 KiB of dynamic shared memory, once per device.
// Host code of the .cu launchers.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "cuda/common/cuda_check.h"
#include "cuda/common/device_context.h"

namespace gemmkit::cuda {

// allow_shared_memory's `bytes` for the device's whole opt-in limit
// (DeviceProperties::shared_per_block_optin), for kernels whose plans size their shared memory up
// to it; the limit is looked up only when the attributes are set, not on every launch.
constexpr int64_t kAllSharedMemory = -1;

// Raises `kernel`'s dynamic shared memory limit to `bytes` and prefers the largest shared-memory
// carveout (several large blocks per SM), on the current device. Both attributes are per device:
// `done` keeps one bit per device index set once they were raised (devices >= 64 set them on
// every launch; it is idempotent). `bytes` must be the same for every call with one `done`.
template <typename Kernel>
void allow_shared_memory(Kernel kernel, int64_t bytes, std::atomic<uint64_t>& done) {
  int device = 0;
  GEMMKIT_CUDA_CHECK(cudaGetDevice(&device));
  const uint64_t bit = device < 64 ? uint64_t{1} << device : 0;
  if (bit != 0 && (done.load(std::memory_order_acquire) & bit) != 0) return;
  if (bytes == kAllSharedMemory) bytes = device_properties(device).shared_per_block_optin;
  GEMMKIT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          static_cast<int>(bytes)));
  GEMMKIT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                          cudaSharedmemCarveoutMaxShared));
  done.fetch_or(bit, std::memory_order_acq_rel);
}

}  // namespace gemmkit::cuda
