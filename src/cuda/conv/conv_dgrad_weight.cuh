// The filter of cuDNN's backward-data for a transposed convolution: packed[i] = w[source(i)],
// packed as (c, kernel..., o / groups) with the last fastest (cuDNN's KRSC layout of a filter
// (K = c, C / g = o / groups)), from gemmkit's weight (o, kernel..., c / groups) with any strides
// (dgrad_weight_source in conv_config.h, shared with the host test that checks the mapping).
// A bit copy (no conversion); a 1-D grid striding over the elements, 64-bit indices.
// When it runs: before the cuDNN engines of a transposed convolution, every call (the weight may
// change between calls); it moves the weight twice, a few microseconds for a VAE-sized layer.
#pragma once

#include <cstdint>

#include "cuda/conv/conv_config.h"

namespace gemmkit::cuda::conv_impl {

template <typename Bits>
__global__ void conv_dgrad_weight_kernel(const DgradWeightIndex index, int64_t count,
                                         const Bits* __restrict__ w, Bits* __restrict__ packed) {
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < count; i += stride) {
    packed[i] = w[dgrad_weight_source(index, i)];
  }
}

}  // namespace gemmkit::cuda::conv_impl
