// Ring stages of 128-wide k slices and their MMA fragments, shared by the ring kernel
// (tma_ring_kernel.cuh) and the streaming kernel (stream_kernel.cuh): a stage holds the weight
// rows (16 * kMT, 128) and the batch rows (8 * kNT, 128) of one k slice, each as two 64-wide
// halves in the 128-byte swizzle that TMA writes, read into mma.sync fragments with ldmatrix.
#pragma once

#include "cuda/common/ptx.cuh"

namespace gemmkit::cuda::linear_family {

constexpr int kRingHalfK = 64;  // k elements per 128-byte swizzled row
constexpr int kRingRowBytes = 128;

template <int kMT, int kNT>
struct RingTile {
  static constexpr int kRowsW = 16 * kMT;
  static constexpr int kRowsX = 8 * kNT;
  static constexpr int kWHalfBytes = kRowsW * kRingRowBytes;  // (kRowsW, 64) bf16
  static constexpr int kXHalfBytes = kRowsX * kRingRowBytes;  // (kRowsX, 64) bf16
  static constexpr int kStageBytes = 2 * (kWHalfBytes + kXHalfBytes);
};

// One k16 block of a slice: the A fragments (weights, (16, 16) per mt) and B fragments (batch
// rows, (8, 16) per nt) come from the stage's swizzled halves by ldmatrix; lane l addresses
// row l % 16 (A) or l % 8 (B) and the 16-byte chunk picked by l / 16 (A) or l / 8 (B).
template <int kMT, int kNT>
struct RingBlock {
  using Tile = RingTile<kMT, kNT>;
  uint32_t w_half, x_half;
  int chunk0;  // first 16-byte chunk of the block in a 128-byte row

  __device__ __forceinline__ RingBlock(uint32_t stage, int block)
      : w_half(stage + (block >> 2) * Tile::kWHalfBytes),
        x_half(stage + 2 * Tile::kWHalfBytes + (block >> 2) * Tile::kXHalfBytes),
        chunk0((block & 3) * 2) {}
  __device__ __forceinline__ void b_fragment(int nt, int lane, uint32_t (&b)[2]) const {
    const int row = nt * 8 + (lane & 7);
    const int chunk = (chunk0 + ((lane >> 3) & 1)) ^ (row & 7);
    ptx::ldmatrix_x2(b, x_half + row * kRingRowBytes + (chunk << 4));
  }
  __device__ __forceinline__ void a_fragment(int mt, int lane, uint32_t (&a)[4]) const {
    const int row = mt * 16 + (lane & 15);
    const int chunk = (chunk0 + (lane >> 4)) ^ (row & 7);
    ptx::ldmatrix_x4(a, w_half + row * kRingRowBytes + (chunk << 4));
  }
};

// The fragments of one k16 block of a 16 x 8 tile, for the straight-line batches.
__device__ __forceinline__ void ring_block_fragments(uint32_t stage, int block, int lane,
                                                     uint32_t (&a)[4], uint32_t (&b)[2]) {
  const RingBlock<1, 1> fragments(stage, block);
  fragments.b_fragment(0, lane, b);
  fragments.a_fragment(0, lane, a);
}

// One k16 block's MMAs of a wider tile.
template <int kMT, int kNT>
__device__ __forceinline__ void ring_slice_mma(uint32_t stage, int block, int lane,
                                               float (&acc)[kMT][kNT][4]) {
  const RingBlock<kMT, kNT> fragments(stage, block);
  uint32_t b[kNT][2];
#pragma unroll
  for (int nt = 0; nt < kNT; ++nt) fragments.b_fragment(nt, lane, b[nt]);
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt) {
    uint32_t a[4];
    fragments.a_fragment(mt, lane, a);
#pragma unroll
    for (int nt = 0; nt < kNT; ++nt)
      ptx::mma_m16n8k16<__nv_bfloat16>(acc[mt][nt], a, b[nt][0], b[nt][1]);
  }
}

}  // namespace gemmkit::cuda::linear_family
