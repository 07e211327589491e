// Launchers of the small-o kernels (small_o.cu, taps.cu); each one launches and checks the launch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/conv/common/launch.h"
#include "cuda/conv/small_o/layout.h"
#include "cuda/conv/small_o/taps_layout.h"

namespace gemmkit::cuda::conv_impl {

// small_o.cuh.
void launch_conv_small_o(const ConvGeometry& g, const SmallOTiling& t, int vector, DType x_dtype,
                         DType out_dtype, const ConvPointers& ptr, LaunchGrid grid, int block,
                         int64_t smem_bytes, cudaStream_t stream);

// taps.cuh: grid.x blocks of kSmallOTapsThreads, smem_bytes of dynamic shared
// memory (opted in once per device up to the device's limit); with t.tma_stages > 0 its TMA-fed
// form, taps_tma.cuh (kSmallOTapsTmaThreads per block).
void launch_conv_small_o_taps(const ConvGeometry& g, const SmallOTapsTiling& t, DType x_dtype,
                              DType out_dtype, const ConvPointers& ptr, LaunchGrid grid,
                              int64_t smem_bytes, cudaStream_t stream);

}  // namespace gemmkit::cuda::conv_impl
