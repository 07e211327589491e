// Launchers of the depthwise kernels (depthwise.cu, blocked.cu, staged.cu, mma.cu); each one
// launches and checks the launch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/conv/common/launch.h"
#include "cuda/conv/depthwise/layout.h"

namespace gemmkit::cuda::conv_impl {

// depthwise.cuh: blockDim (t.cvt, t.spb), smem_bytes of dynamic shared memory.
void launch_conv_depthwise(const ConvGeometry& g, const DepthwiseTiling& t, int vector,
                           DType x_dtype, DType out_dtype, const ConvPointers& ptr, LaunchGrid grid,
                           int64_t smem_bytes, cudaStream_t stream);

// depthwise.cuh, the blocked variant (called by launch_conv_depthwise): blockDim (t.cvt,
// t.spb), smem_bytes of dynamic shared memory.
void launch_conv_depthwise_blocked(const ConvGeometry& g, const DepthwiseTiling& t, int vector,
                                   DType x_dtype, DType out_dtype, const ConvPointers& ptr,
                                   LaunchGrid grid, int64_t smem_bytes, cudaStream_t stream);

// staged.cuh (called by launch_conv_depthwise): blockDim 32 * t.rows_per_block,
// smem_bytes = depthwise_staged_smem_bytes(g, t).
void launch_conv_depthwise_staged(const ConvGeometry& g, const DepthwiseTiling& t, DType x_dtype,
                                  DType out_dtype, const ConvPointers& ptr, LaunchGrid grid,
                                  int64_t smem_bytes, cudaStream_t stream);

// mma.cuh, the tensor-core variant (called by launch_conv_depthwise): blockDim
// kDepthwiseMmaThreads, smem_bytes = depthwise_mma_smem_bytes(g, t.run / 8).
void launch_conv_depthwise_mma(const ConvGeometry& g, const DepthwiseTiling& t, DType x_dtype,
                               DType out_dtype, const ConvPointers& ptr, LaunchGrid grid,
                               int64_t smem_bytes, cudaStream_t stream);

}  // namespace gemmkit::cuda::conv_impl
