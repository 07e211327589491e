// A stream-ordered wait on the GPU, for timing short kernels: enqueued ahead of timed work, it
// keeps the GPU busy while the host queues the work, so the events around that work measure GPU
// time instead of the host's enqueue cost (which exceeds a 10 us kernel's run time when every
// launch goes through a library such as cuDNN).
#pragma once

#include <cuda_runtime.h>

namespace gemmkit::cuda {

// One thread that spins on the global timer for `microseconds`; check the launch with
// cudaGetLastError as for any kernel.
void launch_gpu_delay(cudaStream_t stream, int microseconds);

}  // namespace gemmkit::cuda
