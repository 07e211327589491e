// The backward-data filter of a transposed convolution on the cuDNN path: the index math of the
// packing kernel (dgrad_weight.cuh), shared with the host tests, and when w already is that
// filter. Pure and header-only.
#pragma once

#include <cstdint>

#include "common/problems.h"
#include "cuda/conv/common/geometry.h"

namespace gemmkit::cuda::conv_impl {

// Element of the backward-data filter W[k][cc][taps] (k < c, cc < o / groups, packed with cc
// fastest: the KRSC layout) taken from gemmkit's weight w[o][taps][c / groups]: k = g * cpg + kk
// is W's output channel (x's channel), cc its input channel within the group (out's channel
// g * opg + cc). Returns w's element offset for W's packed index `i`.
struct DgradWeightIndex {
  int64_t c = 0, cpg = 0, opg = 0, taps = 0;
  int64_t w_o_stride = 0, w_c_stride = 0;  // w's strides of o and of c / groups
  int64_t w_tap_stride[detail::kMaxSpatial] = {};
  int64_t kernel[detail::kMaxSpatial] = {1, 1, 1};
  int spatial = 0;
};

#if defined(__CUDACC__)
#define GEMMKIT_DGRAD_HD __host__ __device__
#else
#define GEMMKIT_DGRAD_HD
#endif

GEMMKIT_DGRAD_HD inline int64_t dgrad_weight_source(const DgradWeightIndex& x, int64_t i) {
  const int64_t cc = i % x.opg;
  int64_t rest = i / x.opg;
  int64_t tap_offset = 0;
  for (int d = x.spatial - 1; d >= 0; --d) {
    tap_offset += (rest % x.kernel[d]) * x.w_tap_stride[d];
    rest /= x.kernel[d];
  }
  const int64_t k = rest;  // < c
  const int64_t g = k / x.cpg, kk = k - g * x.cpg;
  return (g * x.opg + cc) * x.w_o_stride + tap_offset + kk * x.w_c_stride;
}

// The packing kernels' tiling (dgrad_weight.cuh): per (group, tap), a transpose of the
// (cc < opg, kk < cpg) matrix in square tiles of `edge` elements, so that the reads (along kk,
// w's channel dim) and the writes (along cc, W's fastest dim) are both coalesced. The scalar
// kernel moves one element per thread and access (edge kDgradTile); the vector kernel moves 16
// bytes (edge dgrad_vector_edge: 8 vectors per tile row).
constexpr int kDgradTile = 32;
constexpr int kDgradVectorsPerRow = 8;
constexpr int kDgradVectorBytes = 16;

GEMMKIT_DGRAD_HD constexpr int dgrad_vector_edge(int element_bytes) {
  return kDgradVectorsPerRow * (kDgradVectorBytes / element_bytes);
}

struct DgradTile {
  int64_t g = 0, tap = 0, cc0 = 0, kk0 = 0;
  int64_t tap_offset = 0;  // w's offset of the tap (its multi-index along w's kernel dims)
};

GEMMKIT_DGRAD_HD inline int64_t dgrad_tiles(const DgradWeightIndex& x, int64_t edge) {
  const int64_t groups = x.c / x.cpg;
  return groups * x.taps * ((x.opg + edge - 1) / edge) * ((x.cpg + edge - 1) / edge);
}

// Tile `t` (< dgrad_tiles): kk tiles fastest, then cc tiles, taps, groups.
GEMMKIT_DGRAD_HD inline DgradTile dgrad_tile(const DgradWeightIndex& x, int64_t t, int64_t edge) {
  // 32-bit divisions whenever the values fit (div_nonneg): a chain of 64-bit ones costs a
  // block microseconds before its first load.
  const int64_t kk_tiles = (x.cpg + edge - 1) / edge;
  const int64_t cc_tiles = (x.opg + edge - 1) / edge;
  DgradTile d;
  int64_t q = div_nonneg(t, kk_tiles);
  d.kk0 = (t - q * kk_tiles) * edge;
  t = q;
  q = div_nonneg(t, cc_tiles);
  d.cc0 = (t - q * cc_tiles) * edge;
  t = q;
  d.g = div_nonneg(t, x.taps);
  d.tap = t - d.g * x.taps;
  int64_t rest = d.tap;
  // A fixed trip count, so the loop unrolls into constant indices of the kernel's parameter
  // arrays; a loop up to x.spatial made the compiler copy the index struct to the stack (104
  // bytes of local memory per thread).
  for (int i = 0; i < detail::kMaxSpatial; ++i) {
    const int s = detail::kMaxSpatial - 1 - i;
    if (s >= x.spatial) continue;
    q = div_nonneg(rest, x.kernel[s]);
    d.tap_offset += (rest - q * x.kernel[s]) * x.w_tap_stride[s];
    rest = q;
  }
  return d;
}

// W's packed index and w's offset of element (kk, cc) of tile d (kk < cpg, cc < opg): the same
// pair as dgrad_weight_source (the host test checks it).
GEMMKIT_DGRAD_HD inline int64_t dgrad_packed_index(const DgradWeightIndex& x, const DgradTile& d,
                                                   int64_t kk, int64_t cc) {
  return ((d.g * x.cpg + kk) * x.taps + d.tap) * x.opg + cc;
}
GEMMKIT_DGRAD_HD inline int64_t dgrad_source(const DgradWeightIndex& x, const DgradTile& d,
                                             int64_t kk, int64_t cc) {
  return (d.g * x.opg + cc) * x.w_o_stride + d.tap_offset + kk * x.w_c_stride;
}

// Whether w's memory already is the packed filter (every packed index i is its own source):
// one group, o innermost, then the taps, c outermost — PyTorch's ConvTranspose weight (c, o,
// kernel...) in channels-last memory, handed over as a permuted view. Strides of unit dims are
// free.
inline bool dgrad_weight_in_place(const DgradWeightIndex& x) {
  if (x.c != x.cpg) return false;
  int64_t expected = 1;
  if (x.opg > 1 && x.w_o_stride != expected) return false;
  expected *= x.opg;
  for (int d = x.spatial - 1; d >= 0; --d) {
    if (x.kernel[d] > 1 && x.w_tap_stride[d] != expected) return false;
    expected *= x.kernel[d];
  }
  return x.cpg == 1 || x.w_c_stride == expected;
}

// Whether the vector packing kernel serves (else the scalar one): w's channels contiguous, every
// 16-byte vector of 16 / element_bytes channels (along kk in w, along cc in W) inside one group
// and 16-byte aligned in both (w_alignment: the alignment of w's data pointer in bytes; W sits
// at an aligned workspace offset).
inline bool dgrad_vector_fits(const DgradWeightIndex& x, int element_bytes, int w_alignment) {
  const int64_t v = kDgradVectorBytes / element_bytes;
  if (w_alignment < kDgradVectorBytes || x.w_c_stride != 1) return false;
  if (x.cpg % v != 0 || x.opg % v != 0 || x.w_o_stride % v != 0) return false;
  for (int d = 0; d < x.spatial; ++d) {
    if (x.kernel[d] > 1 && x.w_tap_stride[d] % v != 0) return false;
  }
  return true;
}

inline DgradWeightIndex dgrad_weight_index(const detail::ConvProblem& p) {
  DgradWeightIndex x;
  x.c = p.in_channels;
  x.cpg = p.in_channels_per_group;
  x.opg = p.out_channels_per_group;
  x.taps = p.kernel_positions();
  x.spatial = p.spatial;
  x.w_o_stride = p.weight.strides[0];
  x.w_c_stride = p.weight.strides[p.spatial + 1];
  for (int d = 0; d < p.spatial; ++d) {
    x.kernel[d] = p.kernel_size[d];
    x.w_tap_stride[d] = p.weight.strides[d + 1];
  }
  return x;
}

}  // namespace gemmkit::cuda::conv_impl
