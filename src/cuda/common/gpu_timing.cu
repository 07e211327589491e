// The spin kernel of gpu_timing.h.
#include <cstdint>

#include "cuda/common/gpu_timing.h"

namespace gemmkit::cuda {
namespace {

__device__ __forceinline__ uint64_t global_timer_ns() {
  uint64_t ns;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns));
  return ns;
}

__global__ void gpu_delay_kernel(uint64_t nanoseconds) {
  const uint64_t start = global_timer_ns();
  while (global_timer_ns() - start < nanoseconds) {
    __nanosleep(1000);
  }
}

}  // namespace

void launch_gpu_delay(cudaStream_t stream, int microseconds) {
  gpu_delay_kernel<<<1, 1, 0, stream>>>(static_cast<uint64_t>(microseconds) * 1000u);
}

}  // namespace gemmkit::cuda
