// Launchers of the convolution kernels: raw pointers, the normalized geometry, the launch
// geometry chosen by conv_config.h, a stream. Each one launches and checks the launch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/conv/conv_config.h"
#include "cuda/conv/conv_geometry.h"
#include "gemmkit/gemmkit.h"

namespace gemmkit::cuda::conv_impl {

// What path selection needs to know about cuda:`device` (its cached properties and whether
// cuDNN is built); throws Error for a device that does not exist.
DeviceDescription describe_device(int device);

struct ConvPointers {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* bias = nullptr;  // null when the problem has none
  void* out = nullptr;
};

// conv_direct.cuh. x_dtype is also the weight's and bias's dtype.
void launch_conv_direct(const ConvGeometry& g, DType x_dtype, DType out_dtype,
                        const ConvPointers& ptr, LaunchGrid grid, int block, cudaStream_t stream);

// conv_depthwise.cuh: blockDim (t.cvt, t.spb), smem_bytes of dynamic shared memory.
void launch_conv_depthwise(const ConvGeometry& g, const DepthwiseTiling& t, int vector,
                           DType x_dtype, DType out_dtype, const ConvPointers& ptr, LaunchGrid grid,
                           int64_t smem_bytes, cudaStream_t stream);

// conv_depthwise.cuh, the blocked variant (called by launch_conv_depthwise): blockDim (t.cvt,
// t.spb), smem_bytes of dynamic shared memory.
void launch_conv_depthwise_blocked(const ConvGeometry& g, const DepthwiseTiling& t, int vector,
                                   DType x_dtype, DType out_dtype, const ConvPointers& ptr,
                                   LaunchGrid grid, int64_t smem_bytes, cudaStream_t stream);

// conv_depthwise_staged.cuh (called by launch_conv_depthwise): blockDim 32 * t.rows_per_block,
// smem_bytes = depthwise_staged_smem_bytes(g, t).
void launch_conv_depthwise_staged(const ConvGeometry& g, const DepthwiseTiling& t, DType x_dtype,
                                  DType out_dtype, const ConvPointers& ptr, LaunchGrid grid,
                                  int64_t smem_bytes, cudaStream_t stream);

// conv_depthwise_mma.cuh, the tensor-core variant (called by launch_conv_depthwise): blockDim
// kDepthwiseMmaThreads, smem_bytes = depthwise_mma_smem_bytes(g, t.run / 8).
void launch_conv_depthwise_mma(const ConvGeometry& g, const DepthwiseTiling& t, DType x_dtype,
                               DType out_dtype, const ConvPointers& ptr, LaunchGrid grid,
                               int64_t smem_bytes, cudaStream_t stream);

// conv_small_o.cuh.
void launch_conv_small_o(const ConvGeometry& g, const SmallOTiling& t, int vector, DType x_dtype,
                         DType out_dtype, const ConvPointers& ptr, LaunchGrid grid, int block,
                         int64_t smem_bytes, cudaStream_t stream);

// conv_small_o_taps.cuh: grid.x blocks of kSmallOTapsThreads, smem_bytes of dynamic shared
// memory (opted in once per device up to the device's limit); with t.tma_stages > 0 its TMA-fed
// form, conv_small_o_taps_tma.cuh (kSmallOTapsTmaThreads per block).
void launch_conv_small_o_taps(const ConvGeometry& g, const SmallOTapsTiling& t, DType x_dtype,
                              DType out_dtype, const ConvPointers& ptr, LaunchGrid grid,
                              int64_t smem_bytes, cudaStream_t stream);

// conv_unfold.cuh: output rows [row0, row0 + rows) into `unfold`.
void launch_conv_unfold(const ConvGeometry& g, DType x_dtype, int vector, const void* x,
                        void* unfold, int64_t row0, int64_t rows, LaunchGrid grid, int block,
                        cudaStream_t stream);

// conv_bias.cuh: out[r * out_ld + oc] = round(acc[r * acc_ld + oc] + bias[oc * bias_stride])
// for r < rows, oc < o; acc may be out itself (f32 out).
void launch_conv_bias_pass(DType bias_dtype, DType out_dtype, const float* acc, int64_t acc_ld,
                           void* out, int64_t out_ld, int64_t rows, int64_t o, const void* bias,
                           int64_t bias_stride, LaunchGrid grid, int block, cudaStream_t stream);

// conv_dgrad_weight.cuh: the packed backward-data filter of a transposed convolution (packed
// 16-byte aligned). Returns the kernel it launched: "vector" or "scalar".
const char* launch_conv_dgrad_weight(DType dtype, const DgradWeightIndex& index, const void* w,
                                     void* packed, cudaStream_t stream);

}  // namespace gemmkit::cuda::conv_impl
