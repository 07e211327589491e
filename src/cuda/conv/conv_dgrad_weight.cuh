// The filter of cuDNN's backward-data for a transposed convolution: packed[i] = w[source(i)],
// packed as (c, kernel..., o / groups) with the last fastest (cuDNN's KRSC layout of a filter
// (K = c, C / g = o / groups)), from gemmkit's weight (o, kernel..., c / groups) with any strides
// (dgrad_weight_source in conv_config.h, shared with the host test that checks the mapping).
// A bit copy (no conversion): per (group, tap) a tiled transpose through shared memory (tiles of
// dgrad_tile in conv_config.h; coalesced reads and writes), a 1-D grid striding over the tiles,
// 64-bit indices.
// When it runs: before the cuDNN engines of a transposed convolution, every call (the weight may
// change between calls); it moves the weight twice, a few microseconds for a VAE-sized layer.
#pragma once

#include <cstdint>

#include "cuda/conv/conv_config.h"

namespace gemmkit::cuda::conv_impl {

constexpr int kDgradRows = 8;  // blockDim.y: each thread moves kDgradTile / kDgradRows elements

template <typename Bits>
__global__ void __launch_bounds__(kDgradTile* kDgradRows)
    conv_dgrad_weight_kernel(const DgradWeightIndex index, const Bits* __restrict__ w,
                             Bits* __restrict__ packed) {
  __shared__ Bits tile_s[kDgradTile][kDgradTile + 1];  // (cc, kk); +1: conflict-free columns
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int64_t tiles = dgrad_tiles(index);
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const DgradTile d = dgrad_tile(index, t);
    // Reads along kk (w's channel dim), writes along cc (W's fastest dim).
    for (int r = ty; r < kDgradTile; r += kDgradRows) {
      const int64_t kk = d.kk0 + tx, cc = d.cc0 + r;
      if (kk < index.cpg && cc < index.opg) tile_s[r][tx] = w[dgrad_source(index, d, kk, cc)];
    }
    __syncthreads();
    for (int r = ty; r < kDgradTile; r += kDgradRows) {
      const int64_t kk = d.kk0 + r, cc = d.cc0 + tx;
      if (kk < index.cpg && cc < index.opg) {
        packed[dgrad_packed_index(index, d, kk, cc)] = tile_s[tx][r];
      }
    }
    __syncthreads();  // the tile is rewritten next
  }
}

}  // namespace gemmkit::cuda::conv_impl
