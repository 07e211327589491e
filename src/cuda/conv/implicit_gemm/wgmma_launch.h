// Launcher of the Hopper implicit-GEMM convolution kernel (wgmma.cuh), for the dispatcher: check
// why_not_implicit_wgmma(p, device) == "" first, plan with implicit_wgmma_plan(p, device), then
// launch. Host code; the plan is in wgmma_plan.h, eligibility in wgmma_eligibility.h.
#pragma once

#include <cuda_runtime.h>

#include "common/problems.h"
#include "cuda/conv/implicit_gemm/wgmma_layout.h"

namespace gemmkit::cuda::conv_impl {

// Enqueues the whole convolution p on `stream`, on the current device (the caller's
// DeviceGuard). Throws gemmkit::Error on a CUDA error (tensor-map encoding and launch included).
void launch_conv_implicit_wgmma(const detail::ConvProblem& p, const ImplicitWgmmaPlan& plan,
                                cudaStream_t stream);

}  // namespace gemmkit::cuda::conv_impl
