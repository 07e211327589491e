// The GEMM paths of the CUDA convolution (gemm_1x1, unfold_gemm): cuBLASLt calls over chunks of
// output rows, the cached per-device cuBLASLt handle and workspace.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <string>

#include "common/problems.h"
#include "cuda/conv/common/config.h"
#include "cuda/conv/common/geometry.h"
#include "cuda/conv/common/launch.h"

namespace gemmkit::cuda::conv_impl {

// Runs a gemm_1x1 or unfold_gemm configuration on `stream` (the problem's device is current).
// Returns false, having enqueued no work, when cuBLASLt offers no algorithm for one of its calls
// (a pure cause: `failure.pure`) or the workspace cannot be allocated (not pure); `failure.why`
// then says which. Other failures throw Error.
bool run_gemm_path(const detail::ConvProblem& p, const ConvGeometry& g, const ConvConfig& c,
                   int device, cudaStream_t stream, RunFailure& failure);

// Runs work(pointer) with `bytes` of device workspace usable in stream order on `stream`: the
// cached per-device buffer of the GEMM paths (taken in turn, grow-only), or inside a stream
// capture an allocation of the graph's own. Returns false, having run nothing, when the memory
// cannot be allocated (`why` says so). Used by the cuDNN path too (cudnn/cudnn.cpp).
bool with_conv_workspace(int device, int64_t bytes, cudaStream_t stream, std::string& why,
                         const std::function<void(void*)>& work);

// unfold.cuh: output rows [row0, row0 + rows) into `unfold`.
void launch_conv_unfold(const ConvGeometry& g, DType x_dtype, int vector, const void* x,
                        void* unfold, int64_t row0, int64_t rows, LaunchGrid grid, int block,
                        cudaStream_t stream);

}  // namespace gemmkit::cuda::conv_impl
