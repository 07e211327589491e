// Per-device state and the device guard.
//
// DeviceGuard makes a device current for the lifetime of a call and restores the caller's
// device afterwards, also when the call throws. DeviceProperties are read once per device and
// cached (cudaGetDeviceProperties costs tens of microseconds; the tiny GEMM's budget is ~2 us).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace gemmkit::cuda {

// Whether `stream` is capturing into a CUDA graph: work enqueued now does not run now, so it
// cannot be timed, and memory it needs must be allocated in stream order.
bool stream_is_capturing(cudaStream_t stream);

// Makes this thread's stream-capture mode relaxed while it lives: one-time set-up (a library
// handle, its host-side plans) may then call APIs that a capture in the default global mode
// forbids, such as cudaMalloc, during a caller's first call inside a capture, without
// invalidating it. Work enqueued on a capturing stream is still captured as usual.
class RelaxedCaptureMode {
 public:
  RelaxedCaptureMode();
  ~RelaxedCaptureMode();
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  cudaStreamCaptureMode previous_ = cudaStreamCaptureModeRelaxed;
};

class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
  bool switched_ = false;
};

struct DeviceProperties {
  int ordinal = 0;
  int sm_major = 0, sm_minor = 0;
  int multiprocessors = 0;
  int64_t l2_bytes = 0;
  int64_t shared_per_block_optin = 0;
  int64_t shared_per_multiprocessor = 0;
  int max_grid_x = 0, max_grid_y = 0, max_grid_z = 0;
  bool cluster_launch = false;
};

// Cached properties of `device`; throws Error for an ordinal that does not exist.
const DeviceProperties& device_properties(int device);
int device_count();  // 0 when no driver or GPU is usable (never throws)

}  // namespace gemmkit::cuda
