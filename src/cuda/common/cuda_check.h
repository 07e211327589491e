// Error checking for CUDA runtime and driver calls: every failure becomes a gemmkit::Error that
// names the call, the file and line, and CUDA's own message.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "gemmkit/gemmkit.h"

namespace gemmkit::cuda {

[[noreturn]] inline void throw_cuda_error(cudaError_t status, const char* call, const char* file,
                                          int line) {
  throw Error(std::string("CUDA error ") + cudaGetErrorName(status) + " (" +
              cudaGetErrorString(status) + ") in " + call + " at " + file + ":" +
              std::to_string(line));
}

}  // namespace gemmkit::cuda

#define GEMMKIT_CUDA_CHECK(call)                                                     \
  do {                                                                               \
    const cudaError_t gemmkit_status_ = (call);                                      \
    if (gemmkit_status_ != cudaSuccess) {                                            \
      ::gemmkit::cuda::throw_cuda_error(gemmkit_status_, #call, __FILE__, __LINE__); \
    }                                                                                \
  } while (0)

// After a kernel launch: launch-configuration errors surface here, not at a later call.
#define GEMMKIT_CUDA_CHECK_LAUNCH() GEMMKIT_CUDA_CHECK(cudaGetLastError())
