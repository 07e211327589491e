// TMA tensor maps, encoded through the driver entry point that cudaGetDriverEntryPointByVersion
// returns (gemmkit never links libcuda). Host code.
#pragma once

#include <cuda.h>

#include <cstdint>

namespace gemmkit::cuda {

// A row-major 2-D bf16/f16 matrix (rows, cols) with a row stride in elements, loaded in boxes
// of (box_rows, box_cols) with the 128-byte swizzle (box_cols * 2 must be 128) and zero fill.
// Encoded maps are cached per thread by (pointer, shape, stride, box).
const CUtensorMap& tensor_map_2d_16bit(const void* base, int64_t rows, int64_t cols,
                                       int64_t row_stride, int box_rows, int box_cols);

// A tensor of 16-bit elements with `rank` (<= 5) dims, innermost first (dims[0] contiguous),
// byte strides of dims 1 .. rank - 1 (multiples of 16), loaded in boxes of `box` elements per
// dim (each <= 256; box[0] * 2 a multiple of 16) without swizzle, out-of-bounds elements read as
// zeros. Not cached: the caller encodes once per call.
CUtensorMap tensor_map_16bit(const void* base, int rank, const int64_t* dims,
                             const int64_t* byte_strides, const int* box);

// As tensor_map_16bit with the swizzle of the box's row width (box[0] * 2 bytes: 128 takes the
// 128-byte swizzle, 64 the 64-byte one) and traversal strides (element_strides[d] in 1 .. 8: the
// box reads every element_strides[d]-th element of dim d, ceil(box[d] / element_strides[d]) of
// them). Not cached.
CUtensorMap tensor_map_16bit_swizzled(const void* base, int rank, const int64_t* dims,
                                      const int64_t* byte_strides, const int* box,
                                      const int* element_strides);

}  // namespace gemmkit::cuda
