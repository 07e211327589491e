// Operand layout of the GEMM paths: the unfold buffer's mapping from x (unfold.cuh) and the
// cuBLASLt call of a chunk of output rows (gemm.cpp). Pure and header-only; GEMMKIT_CONV_HD
// functions compile for the device too.
#pragma once

#include <algorithm>
#include <cstdint>

#include "common/problems.h"
#include "cuda/conv/common/config.h"
#include "cuda/conv/common/geometry.h"

namespace gemmkit::cuda::conv_impl {

// The unfold buffer of the chunk of output rows starting at row0 (unfold.cuh) is
// [row][group][tap][c/groups] (one row = taps * c elements), read and written as vectors of kV
// channels: vector e holds x elements x_offset + i * x_stride[4], i < kV, of row
// row0 + e / (taps * c / kV), or zeros when that tap falls on padding / a dilation hole (returns
// false). `tap` is the weight's kernel index: with flip it reads window tap kernel - 1 - tap, so
// the unfold row times the stored weight row is the convolution. Requires kV | c/groups.
GEMMKIT_CONV_HD bool unfold_source(const ConvGeometry& g, int64_t row0, int64_t e, int64_t kV,
                                   int64_t& x_offset) {
  const int64_t taps = g.kernel_positions();
  const int64_t cpg_vectors = div_nonneg(g.cpg, kV);
  const int64_t row_vectors = g.groups * taps * cpg_vectors;
  const int64_t r = div_nonneg(e, row_vectors);
  const int64_t in_row = e - r * row_vectors;
  const int64_t group_tap = div_nonneg(in_row, cpg_vectors);
  const int64_t ci_vector = in_row - group_tap * cpg_vectors;
  const int64_t group = div_nonneg(group_tap, taps);
  const Tap tap = decode_tap(g, group_tap - group * taps);
  const OutCoord at = decode_position(g, row0 + r);
  int64_t offset = at.n * g.x_stride[0] + (group * g.cpg + ci_vector * kV) * g.x_stride[4];
  for (int d = 0; d < kDims; ++d) {
    int64_t i = 0;
    // weight_tap is its own inverse: weight index k multiplies window tap weight_tap(k).
    if (!tap_source(g, d, at.d[d], weight_tap(g, d, tap.d[d]), i)) return false;
    offset += i * g.x_stride[1 + d];
  }
  x_offset = offset;
  return true;
}

// One cuBLASLt call of a GEMM path for output rows [row0, row0 + rows), in cuBLASLt's
// column-major terms, batched over the groups (batch index g):
//   D_g[m, n] = A_g^T[m, k] * B_g[k, n]
//   A_g: weight rows g*opg.. (k x m, ld lda), B_g: the unfold buffer or x's positions (k x n,
//   ld ldb), D_g: out's positions (m x n, ld ldd); m = opg, n = rows, k = taps * c/groups.
// Offsets are in elements from the tensor's (or the unfold buffer's) data pointer.
struct GemmCall {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int64_t lda = 0, a_batch_stride = 0;
  int64_t b_offset = 0, ldb = 0, b_batch_stride = 0;
  // D: out's rows, or with BiasMode::scratch the f32 scratch [rows][o] (offset from its start).
  bool d_scratch = false;
  int64_t d_offset = 0, ldd = 0, d_batch_stride = 0;
  int64_t bias_batch_stride = 0;  // BiasMode::epilogue
  // out's rows of this call (for the bias pass): out + out_offset, row stride out_ld.
  int64_t out_offset = 0, out_ld = 0;
};

inline GemmCall gemm_call(const detail::ConvProblem& p, const ConvConfig& c, int64_t row0,
                          int64_t rows) {
  GemmCall g;
  const int64_t cpg = p.in_channels_per_group, opg = p.out_channels_per_group;
  g.m = opg;
  g.n = rows;
  g.k = p.kernel_positions() * cpg;
  g.batch = p.groups;
  g.lda = c.weight_row_stride;
  g.a_batch_stride = opg * c.weight_row_stride;
  if (c.path == ConvPath::unfold_gemm) {
    g.b_offset = 0;
    g.ldb = c.unfold_row_elements;
    g.b_batch_stride = g.k;
  } else {
    g.ldb = c.x_row_stride != 0 ? c.x_row_stride : p.in_channels;
    g.b_offset = row0 * g.ldb;
    g.b_batch_stride = cpg;
  }
  g.out_ld = c.out_row_stride != 0 ? c.out_row_stride : p.out_channels;
  g.out_offset = row0 * g.out_ld;
  g.d_scratch = c.bias == BiasMode::scratch;
  g.ldd = g.d_scratch ? p.out_channels : g.out_ld;
  g.d_offset = g.d_scratch ? 0 : g.out_offset;
  g.d_batch_stride = opg;
  g.bias_batch_stride = c.bias == BiasMode::epilogue ? opg * p.bias.strides[0] : 0;
  return g;
}

}  // namespace gemmkit::cuda::conv_impl
