// Launcher of the implicit-GEMM convolution kernel (implicit_gemm.cuh), for the dispatcher:
// check why_not_implicit_gemm(p, device) == "" first, plan with implicit_gemm_plan(p, device),
// then launch. Host code; the plan and eligibility are in plan.h.
#pragma once

#include <cuda_runtime.h>

#include "common/problems.h"
#include "cuda/conv/implicit_gemm/layout.h"

namespace gemmkit::cuda::conv_impl {

// Enqueues the whole convolution p (x, weight, bias, out as in p) on `stream`, on the current
// device (the caller's DeviceGuard). Throws gemmkit::Error on a CUDA error (launch included).
void launch_conv_implicit_gemm(const detail::ConvProblem& p, const ImplicitGemmPlan& plan,
                               cudaStream_t stream);

}  // namespace gemmkit::cuda::conv_impl
