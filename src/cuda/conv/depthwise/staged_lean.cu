// The lean instantiations of the staged depthwise kernel: kDepthwiseStagedLeanRegisters (80)
// registers per thread, so an SM holds 3 blocks of 7 warps instead of 2 (depthwise/layout.h).
// ptxas keeps 12-64 bytes of tile state per thread in local memory here (decoded outputs and
// bounds, read once per tile, outside the FMA loop), so this file alone is compiled without
// -warn-spills (CMakeLists.txt); measured faster where the planner takes it (docs/perf.md).
#include "cuda/conv/depthwise/staged_launch.cuh"

namespace gemmkit::cuda::conv_impl {

void launch_conv_depthwise_staged_lean(const ConvGeometry& g, const DepthwiseTiling& t,
                                       DType x_dtype, DType out_dtype, const ConvPointers& ptr,
                                       LaunchGrid grid, int64_t smem_bytes, cudaStream_t stream) {
  launch_staged<kDepthwiseStagedLeanRegisters>(g, t, x_dtype, out_dtype, ptr, grid, smem_bytes,
                                               stream);
}

}  // namespace gemmkit::cuda::conv_impl
