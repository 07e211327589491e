// Launcher of dgrad_weight.cuh.
#include <algorithm>

#include "cuda/conv/common/operands.h"
#include "cuda/conv/cudnn/dgrad_weight.cuh"
#include "cuda/conv/cudnn/launch.h"

namespace gemmkit::cuda::conv_impl {
namespace {

constexpr int64_t kMaxBlocks = 4096;  // grid-stride beyond: any count fits

unsigned blocks_for(int64_t tiles) {
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(kMaxBlocks, tiles)));
}

template <typename Bits>
const char* launch_typed(const DgradWeightIndex& index, const void* w, void* packed,
                         cudaStream_t stream) {
  const auto* source = static_cast<const Bits*>(w);
  auto* target = static_cast<Bits*>(packed);
  if (dgrad_vector_fits(index, sizeof(Bits), pointer_alignment(w))) {
    const unsigned blocks = blocks_for(dgrad_tiles(index, dgrad_vector_edge(sizeof(Bits))));
    conv_dgrad_weight_vector_kernel<Bits>
        <<<blocks, kDgradVectorThreads, 0, stream>>>(index, source, target);
    return "vector";
  }
  const unsigned blocks = blocks_for(dgrad_tiles(index, kDgradTile));
  conv_dgrad_weight_kernel<Bits>
      <<<blocks, dim3(kDgradTile, kDgradRows), 0, stream>>>(index, source, target);
  return "scalar";
}

}  // namespace

const char* launch_conv_dgrad_weight(DType dtype, const DgradWeightIndex& index, const void* w,
                                     void* packed, cudaStream_t stream) {
  return dtype == DType::f32 ? launch_typed<uint32_t>(index, w, packed, stream)
                             : launch_typed<uint16_t>(index, w, packed, stream);
}

}  // namespace gemmkit::cuda::conv_impl
