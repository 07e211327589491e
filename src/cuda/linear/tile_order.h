// The order in which the wgmma kernel's persistent CTAs take output tiles (128 weight rows by
// block_n batch rows), shared by the kernel, its fold kernel and the host tests
// (tests/test_linear_dispatch.cpp). No CUDA header: host and device.
//
// Tiles go in bands of kWgmmaBandBlocks weight blocks: within a band the weight block runs
// fastest, then the batch block; bands follow each other. The 132 CTAs of one wave then cover
// about 16 weight blocks by 8 batch blocks, whose boxes stay in L2 while every CTA of the wave
// reads them, instead of 132 weight blocks against one batch block (a 28672-row weight streamed
// from HBM once per batch block). The order moves no bit: every tile's elements are the same
// chains wherever the tile runs.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define GEMMKIT_TILE_HD __host__ __device__ __forceinline__
#else
#define GEMMKIT_TILE_HD inline
#endif

namespace gemmkit::cuda::linear_family {

constexpr int64_t kWgmmaBandBlocks = 16;

struct WgmmaTileCoords {
  int64_t m_block, n_block;
};

// Tile `tile` of m_blocks x n_blocks (0 <= tile < m_blocks * n_blocks).
GEMMKIT_TILE_HD WgmmaTileCoords wgmma_tile_coords(int64_t tile, int64_t m_blocks,
                                                  int64_t n_blocks) {
  const int64_t band_tiles = kWgmmaBandBlocks * n_blocks;
  const int64_t band = tile / band_tiles;
  const int64_t in_band = tile - band * band_tiles;
  const int64_t rows_left = m_blocks - band * kWgmmaBandBlocks;
  const int64_t band_rows = rows_left < kWgmmaBandBlocks ? rows_left : kWgmmaBandBlocks;
  return {band * kWgmmaBandBlocks + in_band % band_rows, in_band / band_rows};
}

}  // namespace gemmkit::cuda::linear_family
