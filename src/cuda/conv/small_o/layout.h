// Work decomposition and index arithmetic of the small-o kernels of small_o.cuh (the CUDA-core
// kernel and the tensor-core region kernel). Pure and header-only; GEMMKIT_CONV_HD functions
// compile for the device too.
#pragma once

#include <cstdint>

#include "cuda/conv/common/geometry.h"

namespace gemmkit::cuda::conv_impl {

// Small-o kernels (small_o.cuh).
// CUDA-core kernel: a "strip" is kSmallOPositions consecutive outputs along the last spatial dim
// of one (n, out[0], out[1]) row; `lanes` = 2^lanes_log2 consecutive lanes of a warp share one
// strip (each reducing every lanes-th channel vector); a block of `block` threads holds
// block / lanes strips per grid-stride iteration.
// Tensor-core kernel (`mma`): a block owns an output tile of tile_h x tile_w positions of one
// plane (n, d0); its input region (tile + kernel - 1 per dim, region_h x region_w positions)
// is multiplied by every tap's weights at once, P[r][tap * o + oc] = sum_ci x[r][ci] *
// w[oc][tap][ci] (an implicit GEMM with M = region positions, N = taps * o, K = c), into shared
// memory; each output then sums the P entries of its valid taps. Tiles are numbered
// (plane * row_tiles + row_tile) * col_tiles + col_tile; block b takes tiles
// [b * tiles_per_block, (b + 1) * tiles_per_block).
constexpr int kSmallOPositions = 4;
// Largest o the small-o kernels serve (the CUDA-core kernel's accumulators are
// acc[kSmallOPositions][kO], kO = 4 for o <= 4, else this).
constexpr int kSmallOMaxO = 8;
// Tensor-core kernel: threads per block, channels per K chunk (two m16n8k16 steps), bytes of
// one chunk of weights for one n-tile of 8 columns.
constexpr int kSmallOMmaThreads = 256;
constexpr int kSmallOMmaChunk = 32;
constexpr int kSmallOMmaChunkBytes = 8 * kSmallOMmaChunk * 2;
// Region positions per block: a multiple of 2 M-tiles of 16 per warp (8 warps) when it fits.
constexpr int kSmallOMmaMaxRegion = 256;

struct SmallOTiling {
  int lanes_log2 = 0;
  int64_t channel_vectors = 1;  // c / vector
  int64_t strips_per_row = 1;   // ceil(out[2] / kSmallOPositions)
  int64_t strips = 1;           // batch * out[0] * out[1] * strips_per_row
  int64_t strips_per_block = 1;
  // Tensor-core kernel.
  bool mma = false;
  int64_t tile_h = 1, tile_w = 1;      // output positions of a block's tile
  int64_t region_h = 1, region_w = 1;  // its input region
  int64_t n_cols = 1;                  // taps * o: columns of P
  int64_t n_tiles = 1;                 // ceil(n_cols / 8)
  int64_t p_stride = 32;               // floats per region position in P (multiple of 32)
  int64_t chunks = 1;                  // ceil(c / kSmallOMmaChunk)
  int64_t row_tiles = 1, col_tiles = 1;
  int64_t tiles = 1;  // batch * out[0] * row_tiles * col_tiles
  int64_t tiles_per_block = 1;
  int64_t weight_bytes = 0;  // n_tiles * chunks * kSmallOMmaChunkBytes
  GEMMKIT_CONV_HD int64_t region() const { return region_h * region_w; }
};

// Column of P entry (position r, column n) in shared memory: n XOR-swizzled within its block of
// 32 by r % 4, so that the 8 rows x 4 column pairs of an MMA accumulator fragment hit 32
// different banks when stored.
GEMMKIT_CONV_HD int64_t small_o_p_index(const SmallOTiling& t, int64_t r, int64_t n) {
  return r * t.p_stride + (n ^ ((r & 3) << 3));
}

// The output tile numbered `tile` of a small-o tiling (the region kernel's SmallOTiling or the
// taps kernel's SmallOTapsTiling: tiles of tile_h x tile_w outputs, col_tiles per output row
// band, row_tiles bands per plane): plane (n, d0) and first output row / column.
struct SmallOTile {
  int64_t n = 0, d0 = 0, oh0 = 0, ow0 = 0;
};

template <typename Tiling>
GEMMKIT_CONV_HD SmallOTile small_o_tile(const ConvGeometry& g, const Tiling& t, int64_t tile) {
  SmallOTile s;
  const int64_t q = div_nonneg(tile, t.col_tiles);
  s.ow0 = (tile - q * t.col_tiles) * t.tile_w;
  const int64_t plane = div_nonneg(q, t.row_tiles);
  s.oh0 = (q - plane * t.row_tiles) * t.tile_h;
  s.n = div_nonneg(plane, g.out[0]);
  s.d0 = plane - s.n * g.out[0];
  return s;
}

}  // namespace gemmkit::cuda::conv_impl
