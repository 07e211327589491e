// Timing of short GPU work on a stream, for the choices made by timing (cuDNN engines, auto's own
// path against cuDNN, the bench peers). A GPU wait enqueued ahead of the timed work keeps the GPU
// busy while the host queues that work, so the events around it measure GPU time instead of the
// host's enqueue cost (which exceeds a 10 us kernel's run time when every launch goes through a
// library such as cuDNN).
#pragma once

#include <cuda_runtime.h>

#include "cuda_check.h"  // same folder: also reached from bench/ as src/cuda/common/...

namespace gemmkit::cuda {

// One thread that spins on the global timer for `microseconds`; check the launch with
// cudaGetLastError as for any kernel.
void launch_gpu_delay(cudaStream_t stream, int microseconds);

// Two timing events, destroyed on every exit.
struct EventPair {
  cudaEvent_t start = nullptr, stop = nullptr;
  EventPair() {
    GEMMKIT_CUDA_CHECK(cudaEventCreate(&start));
    GEMMKIT_CUDA_CHECK(cudaEventCreate(&stop));
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  ~EventPair() {
    if (stop != nullptr) cudaEventDestroy(stop);
    if (start != nullptr) cudaEventDestroy(start);
  }
};

// Mean microseconds per call of `runs` calls of enqueue() on `stream` behind a GPU wait of
// `delay_us`; negative when a call returned false (the rest are not enqueued). Synchronizes the
// stream's work up to the last call.
template <typename Enqueue>
double time_calls_us(cudaStream_t stream, int runs, int delay_us, Enqueue&& enqueue) {
  EventPair events;
  launch_gpu_delay(stream, delay_us);
  GEMMKIT_CUDA_CHECK(cudaGetLastError());
  GEMMKIT_CUDA_CHECK(cudaEventRecord(events.start, stream));
  bool ok = true;
  for (int r = 0; r < runs && ok; ++r) ok = enqueue();
  GEMMKIT_CUDA_CHECK(cudaEventRecord(events.stop, stream));
  GEMMKIT_CUDA_CHECK(cudaEventSynchronize(events.stop));
  float ms = 0;
  GEMMKIT_CUDA_CHECK(cudaEventElapsedTime(&ms, events.start, events.stop));
  return ok ? 1000.0 * static_cast<double>(ms) / runs : -1.0;
}

}  // namespace gemmkit::cuda
