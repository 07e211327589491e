// Runs a validated call on the backend of its tensors' device and logs the choice.
#pragma once

#include <string>

#include "api/log.h"
#include "api/validate.h"

namespace gemmkit::detail {

// The backend-level rules every call meets, whether it runs or not: the CPU backend's forced-kernel
// rule, and a CUDA device only in a build with the CUDA backend.
inline void check_backend(const char* op, const Device& device, const char* option_name,
                          const std::string& forced) {
  if (device.is_cpu()) {
    if (!forced.empty() && forced != "auto" && forced != "reference") {
      fail(op, option_name, "'" + forced + "': the CPU backend has only 'auto' and 'reference'");
    }
    return;
  }
#ifndef GEMMKIT_WITH_CUDA
  fail(op, "x", "is on " + device.str() + " but this build of gemmkit has no CUDA backend");
#endif
}

// `forced` is the kernel/algorithm option (`option_name` in messages): the CPU backend has one
// kernel per op, so it accepts only "", "auto" and "reference". `info` receives what ran; nullptr
// when nobody reads it (no CallInfo asked for and GEMMKIT_LOG off), and never nullptr when
// GEMMKIT_LOG is on. `describe` is called only when GEMMKIT_LOG is on.
template <typename CpuCall, typename CudaCall, typename Describe>
void run_on_backend(const char* op, const Device& device, const char* option_name,
                    const std::string& forced, CallInfo* info, CpuCall cpu_call, CudaCall cuda_call,
                    Describe describe) {
  check_backend(op, device, option_name, forced);
  if (device.is_cpu()) {
    cpu_call();
  } else {
#ifdef GEMMKIT_WITH_CUDA
    cuda_call();
#else
    (void)cuda_call;
#endif
  }
  if (log_enabled()) log_call(op, describe(), *info);
}

// A validated call with an empty batch (n = 0): nothing to compute, so no backend runs and no
// kernel is launched. The CPU's forced-kernel rule and the build's backends are checked as for
// any call; the CUDA backend's kernel names and the device itself are not consulted. `info` as
// for run_on_backend.
template <typename Describe>
void finish_empty_call(const char* op, const Device& device, const char* option_name,
                       const std::string& forced, CallInfo* info, Describe describe) {
  check_backend(op, device, option_name, forced);
  if (info == nullptr) return;
  info->backend = device.is_cpu() ? "cpu" : "cuda";
  info->kernel = "none (empty batch)";
  info->reason = "n = 0: no output element to compute; nothing was launched";
  if (log_enabled()) log_call(op, describe(), *info);
}

// Where an operation writes what it ran: the caller's CallInfo (`requested`), else `local` when
// GEMMKIT_LOG prints it, else nowhere (nullptr: the backends build no name or reason text).
inline CallInfo* call_info_sink(CallInfo* requested, CallInfo& local) {
  if (requested != nullptr) return requested;
  return log_enabled() ? &local : nullptr;
}

}  // namespace gemmkit::detail
