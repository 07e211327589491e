// Launcher of the small-c kernel (small_c.cu): launches and checks the launch.
#pragma once

#include <cuda_runtime.h>

#include "cuda/conv/common/launch.h"
#include "cuda/conv/small_c/layout.h"

namespace gemmkit::cuda::conv_impl {

// small_c.cuh: plan.grid blocks of kSmallCThreads, plan.smem_bytes of dynamic shared memory
// (opted in once per device), on `stream`.
void launch_conv_small_c(const ConvGeometry& g, const SmallCPlan& plan, DType x_dtype,
                         DType out_dtype, const ConvPointers& ptr, cudaStream_t stream);

}  // namespace gemmkit::cuda::conv_impl
