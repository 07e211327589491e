// The GEMM paths of the CUDA convolution (gemm_1x1, unfold_gemm): cuBLASLt calls over chunks of
// output rows, the cached per-device cuBLASLt handle and workspace.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "common/problems.h"
#include "cuda/conv/conv_config.h"
#include "cuda/conv/conv_geometry.h"

namespace gemmkit::cuda::conv_impl {

// Runs a gemm_1x1 or unfold_gemm configuration on `stream` (the problem's device is current).
// Returns false, having enqueued no work, when cuBLASLt offers no algorithm for one of its calls
// or the workspace cannot be allocated; `why` then says which. Other failures throw Error.
bool run_gemm_path(const detail::ConvProblem& p, const ConvGeometry& g, const ConvConfig& c,
                   int device, cudaStream_t stream, std::string& why);

}  // namespace gemmkit::cuda::conv_impl
