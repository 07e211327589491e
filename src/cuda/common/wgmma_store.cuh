// The transposing stage of the TMA-store epilogues of the warpgroup-MMA kernels (linear and
// convolution): a warpgroup's m64nN fp32 accumulators (the layout of wgmma.cuh), 64 N-side columns
// at a time, rounded to a 16-bit type and written with stmatrix as 64 rows of 128 bytes, one row
// per N index holding its 64 M-side values, 16-byte units placed by the 128-byte swizzle: the
// layout a 64 x 64 TMA box of 16-bit elements with CU_TENSOR_MAP_SWIZZLE_128B stores. Device code.
#pragma once

#include <cstdint>

#include "cuda/common/ptx.cuh"
#include "cuda/common/round_pair.cuh"

namespace gemmkit::cuda::wgmma {

// Chunk q (accumulator column blocks j = 8 q .. 8 q + 7) into `buffer` (8 KiB, 1024-byte aligned);
// value(j, r2, column) is accumulator 4 j + 2 r2 + column with the epilogue's bias applied.
// Lane l addresses row l % 8 of matrix l / 8 of each stmatrix: matrix i holds N columns
// 8 (jj + i / 2) .. + 7 of the chunk and the warp's M rows 16 warp + 8 (i % 2) .. + 7, one 16-byte
// unit of each N column's 128-byte row.
template <typename TOut, typename Value>
__device__ __forceinline__ void stage_chunk_transposed(int q, int warp, int lane, uint8_t* buffer,
                                                       const Value& value) {
  const int matrix = lane / 8;
#pragma unroll
  for (int jj = 0; jj < 8; jj += 2) {
    uint32_t r[4];
#pragma unroll
    for (int mm = 0; mm < 4; ++mm) {
      const int j = 8 * q + jj + mm / 2;
      r[mm] = round_pair<TOut>(value(j, mm % 2, 0), value(j, mm % 2, 1));
    }
    const int row = 8 * (jj + matrix / 2) + lane % 8;
    const int unit = (warp * 2 + matrix % 2) ^ (row & 7);
    ptx::stmatrix_x4_trans(ptx::smem_address(buffer + row * 128 + unit * 16), r);
  }
}

}  // namespace gemmkit::cuda::wgmma
