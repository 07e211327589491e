// Runs one benchmark problem: makes the operands, runs gemmkit (and the peers), checks every
// result against a double-precision reference at sampled outputs, then times it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "gemmkit/gemmkit.h"
#include "peer.h"
#include "reference.h"
#include "stats.h"
#include "suite.h"

namespace gemmkit::bench {

constexpr int kDefaultCpuReps = 5;             // timed calls on the CPU
constexpr int kDefaultCudaCallsPerGraph = 20;  // calls captured into one CUDA graph
constexpr int kDefaultCudaReplays = 10;        // timed replays of that graph

struct BenchSettings {
  Device device = Device::cpu();
  int reps = 0;     // CPU: timed calls; CUDA: calls per graph. 0 = the default above
  int replays = 0;  // CUDA: timed graph replays. 0 = the default above
  uint64_t seed = 0x5eed;
  bool check = true;  // compare with the reference before timing
  bool time = true;
  bool cold = true;           // CUDA: also time with cold L2 (rotating input copies)
  std::string linear_kernel;  // LinearOptions::kernel
  std::string conv_algo;      // ConvOptions::algo
  int host_cost_calls = 0;    // CUDA: > 0 also times the host cost of that many eager calls
};

// The reps and replays the settings mean on their device (defaults filled in).
inline int effective_reps(const BenchSettings& settings) {
  if (settings.reps > 0) return settings.reps;
  return settings.device.is_cuda() ? kDefaultCudaCallsPerGraph : kDefaultCpuReps;
}
inline int effective_replays(const BenchSettings& settings) {
  return settings.replays > 0 ? settings.replays : kDefaultCudaReplays;
}

struct Timing {
  double warm_us = kNaN;  // median per-call time, the same buffers every call
  double cold_us = kNaN;  // median per-call time, rotating through input copies beyond 2x L2
  int cold_copies = 0;    // input copies rotated for the cold figure
  std::string method;     // how the times were taken
  // CUDA, when BenchSettings::host_cost_calls > 0: host time of one eager call, and of an empty
  // kernel launch beside it (bench/cuda_timing.h, time_host_cost).
  double host_us = kNaN;
  double empty_launch_us = kNaN;
  double empty_plain_launch_us = kNaN;
  double empty_driver_launch_us = kNaN;
};

// What happened to one implementation (gemmkit or a peer) on one problem.
struct Measurement {
  std::string name;
  bool ran = false;          // ran to the end (checked and timed as asked)
  bool unsupported = false;  // a peer that cannot express the problem ("n/a")
  std::string note;          // why it did not run: the n/a reason or the error message
  CheckResult check;
  Timing timing;

  bool failed() const { return !ran && !unsupported; }
  bool check_failed() const { return check.ran && !check.passed(); }
};

struct CaseResult {
  std::string name;
  std::string shape;  // short description of the problem
  int64_t count = 1;  // repeats of the shape in the model (conv suites)
  Cost cost;
  double floor_us = kNaN;  // H200 floor; NaN on the CPU
  CallInfo info;           // the kernel gemmkit chose
  Measurement gemmkit;
  std::vector<Measurement> peers;

  // gemmkit ran and, where checked, passed.
  bool ok() const { return gemmkit.ran && !gemmkit.check_failed(); }
};

// `peers` may be empty. Errors of gemmkit or a peer are recorded in the result, not thrown;
// errors making the operands (out of memory, bad device) are thrown.
CaseResult run_linear_case(const LinearRow& row, const BenchSettings& settings, PeerSet& peers);
CaseResult run_conv_case(const ConvRow& row, const BenchSettings& settings, PeerSet& peers);

}  // namespace gemmkit::bench
