#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>

#include "bench/cuda_timing.h"

namespace gemmkit::bench::cuda {
namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw Error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(status));
}

class EventPair {
 public:
  EventPair() {
    check(cudaEventCreate(&start_), "cudaEventCreate");
    check(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  ~EventPair() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;
  void record_start(cudaStream_t stream) {
    check(cudaEventRecord(start_, stream), "cudaEventRecord");
  }
  void record_stop(cudaStream_t stream) {
    check(cudaEventRecord(stop_, stream), "cudaEventRecord");
  }
  double elapsed_us() {
    check(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return 1000.0 * static_cast<double>(ms);
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

// Returns the captured graph, or null (with `why`) when the launches could not be captured.
cudaGraph_t capture(const LaunchFn& launch, int calls, int copies, cudaStream_t stream,
                    std::string& why) {
  check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  std::string launch_error;
  try {
    for (int call = 0; call < calls; ++call) launch(call % copies, stream);
  } catch (const std::exception& error) {
    launch_error = error.what();
  }
  cudaGraph_t graph = nullptr;
  const cudaError_t status = cudaStreamEndCapture(stream, &graph);
  cudaGetLastError();  // a failed capture leaves a sticky-looking error behind; it is handled here
  if (!launch_error.empty() || status != cudaSuccess) {
    if (graph) cudaGraphDestroy(graph);
    why = !launch_error.empty() ? launch_error : cudaGetErrorString(status);
    return nullptr;
  }
  return graph;
}

__global__ void empty_kernel() {}

double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

StreamOwner::StreamOwner(Device device) {
  check(cudaSetDevice(device.index), "cudaSetDevice");
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  stream_ = stream;
}

StreamOwner::~StreamOwner() {
  if (stream_) cudaStreamDestroy(stream_);
}

void StreamOwner::synchronize() const {
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

CallTimes time_calls(const LaunchFn& launch, int calls, int copies, int replays, Stream stream) {
  CallTimes times;
  EventPair events;
  std::string why;
  cudaGraph_t graph = capture(launch, calls, copies, stream, why);
  if (graph) {
    cudaGraphExec_t exec = nullptr;
    const cudaError_t status = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    check(status, "cudaGraphInstantiate");
    try {
      check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");  // warm-up replay
      for (int replay = 0; replay < replays; ++replay) {
        events.record_start(stream);
        check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
        events.record_stop(stream);
        times.per_call_us.push_back(events.elapsed_us() / calls);
      }
    } catch (...) {
      cudaGraphExecDestroy(exec);
      throw;
    }
    cudaGraphExecDestroy(exec);
    times.method = "CUDA graph of " + std::to_string(calls) + " calls, median of " +
                   std::to_string(replays) + " replays";
    return times;
  }
  // Direct launches: includes each call's host overhead whenever the GPU outruns the host.
  for (int call = 0; call < calls; ++call) launch(call % copies, stream);  // warm-up
  for (int replay = 0; replay < replays; ++replay) {
    events.record_start(stream);
    for (int call = 0; call < calls; ++call) launch(call % copies, stream);
    events.record_stop(stream);
    times.per_call_us.push_back(events.elapsed_us() / calls);
  }
  times.method = "events around " + std::to_string(calls) +
                 " direct calls (graph capture failed: " + why + "), median of " +
                 std::to_string(replays);
  return times;
}

HostCost time_host_cost(const LaunchFn& launch, int calls, Stream stream) {
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  // Batches of calls short enough that the launch queue never fills (a full queue would make the
  // loop wait for the GPU and time the kernels instead), the stream drained between batches
  // outside the timed window; the median batch gives the per-call figure.
  constexpr int kBatch = 64;
  const auto per_call_us = [&](const std::function<void()>& call) {
    std::vector<double> samples;
    for (int done = 0; done < calls; done += kBatch) {
      check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < kBatch; ++i) call();
      const auto stop = std::chrono::steady_clock::now();
      samples.push_back(1e6 * seconds_between(start, stop) / kBatch);
    }
    check(cudaStreamSynchronize(s), "cudaStreamSynchronize");
    std::sort(samples.begin(), samples.end());
    return samples[samples.size() / 2];
  };
  HostCost cost;
  cost.calls = calls;
  const auto call = [&] { launch(0, stream); };
  // A warm-up pass (caches, lazy set-up), then the timed one.
  const auto warm_per_call_us = [&](const std::function<void()>& f) {
    per_call_us(f);
    return per_call_us(f);
  };
  cost.call_us = warm_per_call_us(call);

  cudaLaunchConfig_t config{};
  config.gridDim = dim3(1);
  config.blockDim = dim3(32);
  config.stream = s;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  const auto empty = [&] {
    check(cudaLaunchKernelEx(&config, empty_kernel), "cudaLaunchKernelEx");
  };
  cost.empty_launch_us = warm_per_call_us(empty);

  config.numAttrs = 0;
  cost.empty_plain_launch_us = warm_per_call_us(empty);

  // The driver API's launch of the same kernel (entry point from the runtime, never -lcuda).
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found{};
  check(cudaGetDriverEntryPointByVersion("cuLaunchKernelEx", &entry, 12000, cudaEnableDefault,
                                         &found),
        "cudaGetDriverEntryPointByVersion(cuLaunchKernelEx)");
  cudaFunction_t function = nullptr;
  check(cudaGetFuncBySymbol(&function, reinterpret_cast<const void*>(empty_kernel)),
        "cudaGetFuncBySymbol");
  if (found == cudaDriverEntryPointSuccess && entry != nullptr) {
    const auto launch_ex = reinterpret_cast<PFN_cuLaunchKernelEx_v11060>(entry);
    CUlaunchConfig driver_config{};
    driver_config.gridDimX = driver_config.gridDimY = driver_config.gridDimZ = 1;
    driver_config.blockDimX = 32;
    driver_config.blockDimY = driver_config.blockDimZ = 1;
    driver_config.hStream = reinterpret_cast<CUstream>(s);
    CUlaunchAttribute driver_attribute{};
    driver_attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    driver_attribute.value.programmaticStreamSerializationAllowed = 1;
    driver_config.attrs = &driver_attribute;
    driver_config.numAttrs = 1;
    const auto driver_empty = [&] {
      if (launch_ex(&driver_config, reinterpret_cast<CUfunction>(function), nullptr, nullptr) !=
          CUDA_SUCCESS)
        throw Error("cuLaunchKernelEx of an empty kernel failed");
    };
    cost.empty_driver_launch_us = warm_per_call_us(driver_empty);
  }
  return cost;
}

void check_last_error(const char* what) {
  check(cudaGetLastError(), what);
}

}  // namespace gemmkit::bench::cuda
