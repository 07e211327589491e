// Launcher of the staged depthwise variant (staged.cuh): checks the plan, then the
// kDepthwiseStagedRegisters instantiations here or the lean ones (staged_lean.cu).
#include "cuda/conv/depthwise/staged_launch.cuh"

namespace gemmkit::cuda::conv_impl {

void launch_conv_depthwise_staged(const ConvGeometry& g, const DepthwiseTiling& t, DType x_dtype,
                                  DType out_dtype, const ConvPointers& ptr, LaunchGrid grid,
                                  int64_t smem_bytes, cudaStream_t stream) {
  if (t.variant != DepthwiseVariant::staged || smem_bytes != depthwise_staged_smem_bytes(g, t) ||
      smem_bytes > 48 * 1024 || t.rows_per_block < 1 ||
      t.rows_per_block > kDepthwiseStagedMaxWarps || g.kernel[1] != g.kernel[2] ||
      (t.registers != kDepthwiseStagedRegisters && t.registers != kDepthwiseStagedLeanRegisters)) {
    throw Error("gemmkit::conv: internal error: staged depthwise plan (" +
                std::to_string(t.rows_per_block) + " warps, " + std::to_string(smem_bytes) +
                " bytes of shared memory, " + std::to_string(t.registers) + " registers)");
  }
  if (t.registers == kDepthwiseStagedLeanRegisters) {
    launch_conv_depthwise_staged_lean(g, t, x_dtype, out_dtype, ptr, grid, smem_bytes, stream);
  } else {
    launch_staged<kDepthwiseStagedRegisters>(g, t, x_dtype, out_dtype, ptr, grid, smem_bytes,
                                             stream);
  }
}

}  // namespace gemmkit::cuda::conv_impl
