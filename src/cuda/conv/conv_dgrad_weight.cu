// Launcher of conv_dgrad_weight.cuh.
#include <algorithm>

#include "cuda/conv/conv_dgrad_weight.cuh"
#include "cuda/conv/conv_launch.h"

namespace gemmkit::cuda::conv_impl {

void launch_conv_dgrad_weight(DType dtype, const DgradWeightIndex& index, const void* w,
                              void* packed, cudaStream_t stream) {
  constexpr int64_t kMaxBlocks = 4096;  // grid-stride beyond: any count fits
  const auto blocks =
      static_cast<unsigned>(std::max<int64_t>(1, std::min(kMaxBlocks, dgrad_tiles(index))));
  const dim3 block(kDgradTile, kDgradRows);
  if (dtype == DType::f32) {
    conv_dgrad_weight_kernel<uint32_t><<<blocks, block, 0, stream>>>(
        index, static_cast<const uint32_t*>(w), static_cast<uint32_t*>(packed));
  } else {
    conv_dgrad_weight_kernel<uint16_t><<<blocks, block, 0, stream>>>(
        index, static_cast<const uint16_t*>(w), static_cast<uint16_t*>(packed));
  }
}

}  // namespace gemmkit::cuda::conv_impl
