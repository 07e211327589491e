// linear wgmma fold kernel: the second kernel of the wgmma kernel's k split (wgmma_kernel.cuh):
// folds the runs' group sums from the workspace in the canonical order, adds the bias, rounds once
// and stores out. Launched after the split kernel on the stream (PDL: waits for its completion).
#pragma once

#include "cuda/linear/wgmma_parts.cuh"

namespace gemmkit::cuda::linear_family {

// The fold of a k split: per output element of each tile, slot 0 (the prefix of the run of group
// 0) plus slots 1, 2, ... (the later groups' sums) in ascending order, then the bias, one rounding
// and the store: the unsplit kernel's epilogue on the same values. Block b folds register
// quadruple b % (kBN / 8) of tile b / (kBN / 8); thread i is consumer thread i of the split kernel
// (the same element coordinates and store pattern). Grid-stride over blocks; PDL: waits for the
// split kernel before its first load.
template <typename T, typename Out, int kBN>
__global__ void __launch_bounds__(256)
    linear_wgmma_fold_kernel(const float4* workspace, int64_t slots, const T* bias,
                             int64_t bias_stride, Out* out, int64_t out_row_stride,
                             int64_t out_col_stride, int64_t n, int64_t m, int64_t m_blocks,
                             int64_t tiles) {
  constexpr int kQuads = kBN / 8;  // float4 per consumer thread and slot
  ptx::grid_dependency_wait();
  const int consumer = static_cast<int>(threadIdx.x / 128);
  const int t = static_cast<int>(threadIdx.x % 128);
  const int warp = t / 32, lane = t % 32;
  for (int64_t block = blockIdx.x; block < tiles * kQuads; block += gridDim.x) {
    const int64_t tile = block / kQuads;
    const int j = static_cast<int>(block % kQuads);
    const float4* from = workspace + (tile * slots * kQuads + j) * 256 + threadIdx.x;
    float4 sum = from[0];
#pragma unroll 4
    for (int64_t slot = 1; slot < slots; ++slot) {
      const float4 g = from[slot * kQuads * 256];
      sum.x += g.x;
      sum.y += g.y;
      sum.z += g.z;
      sum.w += g.w;
    }
    const float value4[4] = {sum.x, sum.y, sum.z, sum.w};
    const auto [row0, n0] =
        wgmma_detail::fragment_origin(tile, m_blocks, tiles, kBN, consumer, warp, lane);
    float bias_value[2];
    wgmma_detail::load_bias_pair(bias, bias_stride, row0, m, bias_value);
    wgmma_detail::store_quad(value4, bias != nullptr, bias_value, row0, n0 + 8 * j + 2 * (lane % 4),
                             out, out_row_stride, out_col_stride, n, m);
  }
}

}  // namespace gemmkit::cuda::linear_family
