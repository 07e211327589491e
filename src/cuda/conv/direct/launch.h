// Launcher of the generic direct kernel (direct.cu); it launches and checks the launch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/conv/common/geometry.h"
#include "cuda/conv/common/launch.h"

namespace gemmkit::cuda::conv_impl {

// direct.cuh. x_dtype is also the weight's and bias's dtype.
void launch_conv_direct(const ConvGeometry& g, DType x_dtype, DType out_dtype,
                        const ConvPointers& ptr, LaunchGrid grid, int block, cudaStream_t stream);

}  // namespace gemmkit::cuda::conv_impl
