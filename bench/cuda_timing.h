// CUDA timing helpers (bench/cuda_timing.cu; only in builds with GEMMKIT_BENCH_CUDA).
// Declared without CUDA types so CPU-only code can include this header.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "gemmkit/gemmkit.h"

namespace gemmkit::bench::cuda {

// Enqueues one call on `stream` reading operand copy `copy`.
using LaunchFn = std::function<void(int copy, Stream stream)>;

// A non-blocking stream on `device` (graph capture needs a stream other than the legacy one).
class StreamOwner {
 public:
  explicit StreamOwner(Device device);
  ~StreamOwner();
  StreamOwner(const StreamOwner&) = delete;
  StreamOwner& operator=(const StreamOwner&) = delete;
  Stream get() const { return stream_; }
  void synchronize() const;

 private:
  Stream stream_ = nullptr;
};

struct CallTimes {
  std::vector<double> per_call_us;  // one entry per timed replay
  std::string method;               // how they were taken
};

// Captures `calls` launches (copy i % copies for call i) into a CUDA graph, replays it once to
// warm up, then `replays` times between cudaEvents; per-call time = replay time / calls. When
// capture fails (the call does something a graph cannot hold), times the same launches issued
// directly, and `method` says so.
CallTimes time_calls(const LaunchFn& launch, int calls, int copies, int replays, Stream stream);

// Host time of one eager call: `calls` calls of `launch` (after as many to warm up) in batches of
// 64, each batch timed on the CPU's steady clock from its first call to the return of its last,
// the stream drained between batches: the median batch's time per call is what a call costs the
// calling thread (batches this short never fill the launch queue, so the GPU does not pace them).
struct HostCost {
  double call_us = 0;          // per call of `launch`
  double empty_launch_us = 0;  // per cudaLaunchKernelEx of an empty kernel (PDL attribute set)
  double empty_plain_launch_us = 0;   // the same without launch attributes
  double empty_driver_launch_us = 0;  // cuLaunchKernelEx of the same kernel (PDL attribute set)
  int calls = 0;
};
HostCost time_host_cost(const LaunchFn& launch, int calls, Stream stream);

// Throws gemmkit::Error naming `what` when a CUDA error is pending (and clears it).
void check_last_error(const char* what);

}  // namespace gemmkit::bench::cuda
