// The filter of cuDNN's backward-data for a transposed convolution: packed[i] = w[source(i)],
// packed as (c, kernel..., o / groups) with the last fastest (cuDNN's KRSC layout of a filter
// (K = c, C / g = o / groups)), from gemmkit's weight (o, kernel..., c / groups) with any strides
// (dgrad_weight_source in layout.h, shared with the host test that checks the mapping).
// A bit copy (no conversion): per (group, tap) a tiled transpose through shared memory (the
// tiling of layout.h; coalesced reads and writes), a 1-D grid striding over the tiles,
// 64-bit indices. Two kernels of one mapping:
//   - vector: 16 bytes per load and store, 64x64 tiles of 16-bit elements (32x32 of 32-bit),
//     where channels are contiguous and the counts and strides keep vectors whole and aligned
//     (dgrad_vector_fits);
//   - scalar: one element per access, 32x32 tiles, any strides and counts.
// When it runs: before the cuDNN engines of a transposed convolution, every call (the weight may
// change between calls), unless the weight already has the packed layout (read in place). It
// moves the weight twice: about a megabyte each way for a VAE-sized layer.
#pragma once

#include <cstdint>
#include <cstring>

#include "cuda/conv/cudnn/layout.h"

namespace gemmkit::cuda::conv_impl {

constexpr int kDgradRows = 8;  // scalar kernel's blockDim.y: kDgradTile / kDgradRows per thread
constexpr int kDgradVectorThreads = 256;
// Tile rows one pass of the vector kernel's block covers (kDgradVectorsPerRow threads a row).
constexpr int kDgradVectorPassRows = kDgradVectorThreads / kDgradVectorsPerRow;

template <typename Bits>
__global__ void __launch_bounds__(kDgradTile* kDgradRows)
    conv_dgrad_weight_kernel(const DgradWeightIndex index, const Bits* __restrict__ w,
                             Bits* __restrict__ packed) {
  __shared__ Bits tile_s[kDgradTile][kDgradTile + 1];  // (cc, kk); +1: conflict-free columns
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int64_t tiles = dgrad_tiles(index, kDgradTile);
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const DgradTile d = dgrad_tile(index, t, kDgradTile);
    // Reads along kk (w's channel dim), writes along cc (W's fastest dim).
#pragma unroll
    for (int i = 0; i < kDgradTile / kDgradRows; ++i) {
      const int r = ty + i * kDgradRows;
      const int64_t kk = d.kk0 + tx, cc = d.cc0 + r;
      if (kk < index.cpg && cc < index.opg) tile_s[r][tx] = w[dgrad_source(index, d, kk, cc)];
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < kDgradTile / kDgradRows; ++i) {
      const int r = ty + i * kDgradRows;
      const int64_t kk = d.kk0 + r, cc = d.cc0 + tx;
      if (kk < index.cpg && cc < index.opg) {
        packed[dgrad_packed_index(index, d, kk, cc)] = tile_s[tx][r];
      }
    }
    __syncthreads();  // the tile is rewritten next
  }
}

template <typename Bits>
__global__ void __launch_bounds__(kDgradVectorThreads)
    conv_dgrad_weight_vector_kernel(const DgradWeightIndex index, const Bits* __restrict__ w,
                                    Bits* __restrict__ packed) {
  constexpr int kPerVector = kDgradVectorBytes / static_cast<int>(sizeof(Bits));
  constexpr int kEdge = dgrad_vector_edge(sizeof(Bits));
  constexpr int kPad = 4 / static_cast<int>(sizeof(Bits));  // one word: rows 33 words apart
  static_assert(kEdge % kDgradVectorPassRows == 0, "whole passes per tile");
  // (kk, cc): written transposed, element by element; read back 4 words at a time. The odd
  // word pitch spreads both accesses over the banks (2-way at most on the writes).
  __shared__ __align__(16) Bits tile_s[kEdge][kEdge + kPad];
  const int lane_vector = static_cast<int>(threadIdx.x) % kDgradVectorsPerRow;
  const int lane_row = static_cast<int>(threadIdx.x) / kDgradVectorsPerRow;
  const int64_t tiles = dgrad_tiles(index, kEdge);
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {
    const DgradTile d = dgrad_tile(index, t, kEdge);
    uint4 loaded[kEdge / kDgradVectorPassRows] = {};  // every pass's load in flight at once
#pragma unroll
    for (int pass = 0; pass < kEdge / kDgradVectorPassRows; ++pass) {
      const int64_t cc = d.cc0 + pass * kDgradVectorPassRows + lane_row;
      const int64_t kk = d.kk0 + lane_vector * kPerVector;
      if (cc < index.opg && kk < index.cpg) {
        loaded[pass] = *reinterpret_cast<const uint4*>(w + dgrad_source(index, d, kk, cc));
      }
    }
#pragma unroll
    for (int pass = 0; pass < kEdge / kDgradVectorPassRows; ++pass) {
      Bits elements[kPerVector];
      memcpy(elements, &loaded[pass], sizeof(elements));
      const int cc_local = pass * kDgradVectorPassRows + lane_row;
#pragma unroll
      for (int e = 0; e < kPerVector; ++e) {
        tile_s[lane_vector * kPerVector + e][cc_local] = elements[e];
      }
    }
    __syncthreads();
#pragma unroll
    for (int pass = 0; pass < kEdge / kDgradVectorPassRows; ++pass) {
      const int kk_local = pass * kDgradVectorPassRows + lane_row;
      const int64_t kk = d.kk0 + kk_local, cc = d.cc0 + lane_vector * kPerVector;
      if (kk < index.cpg && cc < index.opg) {
        const auto* words =
            reinterpret_cast<const uint32_t*>(&tile_s[kk_local][lane_vector * kPerVector]);
        *reinterpret_cast<uint4*>(packed + dgrad_packed_index(index, d, kk, cc)) =
            make_uint4(words[0], words[1], words[2], words[3]);
      }
    }
    __syncthreads();  // the tile is rewritten next
  }
}

}  // namespace gemmkit::cuda::conv_impl
