// Launch-side pieces shared by the convolution's launchers: the device description of a device
// index, the tensors' raw pointers, and the bias pass that the GEMM and cuDNN paths end with.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/conv/common/geometry.h"
#include "cuda/conv/common/occupancy.h"
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

// bias.cuh: out[r * out_ld + oc] = round(acc[r * acc_ld + oc] + bias[oc * bias_stride])
// for r < rows, oc < o; acc may be out itself (f32 out).
void launch_conv_bias_pass(DType bias_dtype, DType out_dtype, const float* acc, int64_t acc_ld,
                           void* out, int64_t out_ld, int64_t rows, int64_t o, const void* bias,
                           int64_t bias_stride, LaunchGrid grid, int block, cudaStream_t stream);

}  // namespace gemmkit::cuda::conv_impl
