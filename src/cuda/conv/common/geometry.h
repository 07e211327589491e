// Launch geometry and index arithmetic shared by every convolution kernel: launch grids, the
// normalized problem (ConvGeometry) and its output-position and tap decoding.
//
// Pure and header-only: no CUDA header, so the host unit tests (built also without CUDA) include
// it directly. Functions marked GEMMKIT_CONV_HD are compiled for the device too when nvcc sees
// this header; the kernels call exactly the functions the tests exercise.
//
// Size rules: every count and offset is int64; grids put all work on gridDim.x (<= 2^31 - 1) and
// loop over it (grid-stride), never on gridDim.y / gridDim.z (<= 65535), so no output count,
// channel count or chunk size can exceed a launch limit.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/problems.h"

#if defined(__CUDACC__)
#define GEMMKIT_CONV_HD __host__ __device__ __forceinline__
#else
#define GEMMKIT_CONV_HD inline
#endif

namespace gemmkit::cuda::conv_impl {

// ---- Launch grids -----------------------------------------------------------------------------

constexpr int64_t kMaxGridX = (int64_t{1} << 31) - 1;
constexpr int64_t kMaxInt32 = (int64_t{1} << 31) - 1;  // largest int32 offset
constexpr int64_t kMaxGridYZ = 65535;
constexpr int64_t kMaxBlockThreads = 1024;

// dim3-like: what a launcher passes as the grid.
struct LaunchGrid {
  uint32_t x = 1, y = 1, z = 1;
};

// Grid of 1-D blocks of `block` threads for `count` work items (one item per thread per
// grid-stride iteration): ceil(count / block) blocks, at most `max_blocks` (and gridDim.x's
// limit); the kernels loop when the grid is smaller than the work. count <= 0 gives one block
// (whose threads find nothing to do).
inline LaunchGrid grid_for(int64_t count, int64_t block, int64_t max_blocks) {
  LaunchGrid grid;
  if (count <= 0 || block <= 0) return grid;
  const int64_t needed = count / block + (count % block != 0 ? 1 : 0);
  const int64_t cap = std::max<int64_t>(1, std::min(max_blocks, kMaxGridX));
  grid.x = static_cast<uint32_t>(std::min(needed, cap));
  return grid;
}

// Grid-stride iterations a thread makes: ceil(count / (grid_x * block)).
inline int64_t grid_iterations(int64_t count, int64_t grid_x, int64_t block) {
  if (count <= 0) return 0;
  const int64_t per_iteration = grid_x * block;
  return count / per_iteration + (count % per_iteration != 0 ? 1 : 0);
}

// The work item that thread `thread` of block `block_index` handles in grid-stride iteration
// `iteration` of a grid of `grid_x` blocks of `block_dim` threads. Consecutive threads get
// consecutive items; every item in [0, count) is handled by exactly one (block, thread,
// iteration) with iteration < grid_iterations(count, ...). Items < 2^62 cannot overflow.
GEMMKIT_CONV_HD int64_t grid_stride_index(int64_t block_index, int64_t thread, int64_t iteration,
                                          int64_t grid_x, int64_t block_dim) {
  return (iteration * grid_x + block_index) * block_dim + thread;
}

// ---- Integer helpers --------------------------------------------------------------------------

// a / b for 0 <= a, 1 <= b: 32-bit division when both fit (the common case; a 64-bit division
// is a long instruction sequence on the GPU).
GEMMKIT_CONV_HD int64_t div_nonneg(int64_t a, int64_t b) {
  if (((a | b) >> 31) == 0) {
    return static_cast<int64_t>(static_cast<uint32_t>(a) / static_cast<uint32_t>(b));
  }
  return a / b;
}

inline int64_t ceil_div(int64_t a, int64_t b) {
  return a / b + (a % b != 0 ? 1 : 0);
}

// The smallest multiple of `multiple` >= value (value >= 0, multiple >= 1).
inline int64_t round_up(int64_t value, int64_t multiple) {
  return ceil_div(value, multiple) * multiple;
}

// ---- The normalized problem the kernels see -------------------------------------------------

constexpr int kDims = 3;  // spatial dims after normalization

// A ConvProblem with every spatial field widened to 3 dims: a problem with S < 3 spatial dims
// gets 3 - S *leading* dims of size 1 (stride 1, no padding, dilations 1, tensor stride 0), so
// the last spatial dim stays the fastest one. Tensor strides are in elements; index 0 is the
// batch (x, out) or output channel (weight), 1..3 the spatial dims, 4 the channels.
struct ConvGeometry {
  int64_t batch = 1;
  int64_t c = 1, o = 1, groups = 1, cpg = 1, opg = 1;
  int64_t in[kDims] = {1, 1, 1};
  int64_t kernel[kDims] = {1, 1, 1};
  int64_t out[kDims] = {1, 1, 1};
  int64_t stride[kDims] = {1, 1, 1};
  int64_t pad_lo[kDims] = {0, 0, 0};
  int64_t kdil[kDims] = {1, 1, 1};
  int64_t idil[kDims] = {1, 1, 1};
  int64_t x_stride[kDims + 2] = {};
  int64_t w_stride[kDims + 2] = {};
  int64_t out_stride[kDims + 2] = {};
  int64_t bias_stride = 0;
  bool flip = false;
  bool has_bias = false;

  GEMMKIT_CONV_HD int64_t positions() const { return batch * out[0] * out[1] * out[2]; }
  GEMMKIT_CONV_HD int64_t kernel_positions() const { return kernel[0] * kernel[1] * kernel[2]; }
};

inline ConvGeometry normalize(const detail::ConvProblem& p) {
  ConvGeometry g;
  g.batch = p.batch;
  g.c = p.in_channels;
  g.o = p.out_channels;
  g.groups = p.groups;
  g.cpg = p.in_channels_per_group;
  g.opg = p.out_channels_per_group;
  g.flip = p.flip;
  g.has_bias = p.has_bias;
  const int lead = kDims - p.spatial;  // leading dims of size 1
  for (int d = 0; d < p.spatial; ++d) {
    const int n = lead + d;
    g.in[n] = p.in_size[d];
    g.kernel[n] = p.kernel_size[d];
    g.out[n] = p.out_size[d];
    g.stride[n] = p.stride[d];
    g.pad_lo[n] = p.padding_lo[d];
    g.kdil[n] = p.kernel_dilation[d];
    g.idil[n] = p.input_dilation[d];
  }
  const auto widen = [&](const Tensor& t, int64_t* strides) {
    strides[0] = t.strides[0];
    for (int d = 0; d < kDims; ++d) strides[1 + d] = 0;
    for (int d = 0; d < p.spatial; ++d) strides[1 + lead + d] = t.strides[1 + d];
    strides[kDims + 1] = t.strides[p.spatial + 1];
  };
  widen(p.x, g.x_stride);
  widen(p.weight, g.w_stride);
  widen(p.out, g.out_stride);
  g.bias_stride = p.has_bias ? p.bias.strides[0] : 0;
  return g;
}

// Splits a flat row-major index over (leading, extent[0], extent[1], extent[2]) into index[] and
// returns the leading index.
GEMMKIT_CONV_HD int64_t unravel(const int64_t (&extent)[kDims], int64_t flat,
                                int64_t (&index)[kDims]) {
  int64_t rest = flat;
  for (int d = kDims - 1; d >= 0; --d) {
    const int64_t q = div_nonneg(rest, extent[d]);
    index[d] = rest - q * extent[d];
    rest = q;
  }
  return rest;
}

// An output position (flat index over (n, out[0], out[1], out[2]), row-major) as coordinates.
struct OutCoord {
  int64_t n = 0;
  int64_t d[kDims] = {0, 0, 0};
};

GEMMKIT_CONV_HD OutCoord decode_position(const ConvGeometry& g, int64_t position) {
  OutCoord c;
  c.n = unravel(g.out, position, c.d);
  return c;
}

// A kernel tap index (flat, row-major over kernel[0..2]) as per-dim indices.
struct Tap {
  int64_t d[kDims] = {0, 0, 0};
};

GEMMKIT_CONV_HD Tap decode_tap(const ConvGeometry& g, int64_t tap) {
  Tap t;
  unravel(g.kernel, tap, t.d);
  return t;
}

// The weight index along dim d that multiplies window tap `tap` (the kernel is flipped in every
// spatial dim when g.flip).
GEMMKIT_CONV_HD int64_t weight_tap(const ConvGeometry& g, int d, int64_t tap) {
  return g.flip ? g.kernel[d] - 1 - tap : tap;
}

// The input index along dim d that output coordinate `out_coord` reads at window tap `tap`:
// q = out * stride + tap * kernel_dilation - padding_lo is the coordinate in the dilated, padded
// input; it is a real input element iff 0 <= q <= (in - 1) * input_dilation and q is a multiple of
// input_dilation. Returns false for taps on padding or on input-dilation holes (they contribute
// nothing and are skipped).
GEMMKIT_CONV_HD bool tap_source(const ConvGeometry& g, int d, int64_t out_coord, int64_t tap,
                                int64_t& in_index) {
  const int64_t q = out_coord * g.stride[d] + tap * g.kdil[d] - g.pad_lo[d];
  if (q < 0) return false;
  int64_t i = q;
  if (g.idil[d] != 1) {
    i = div_nonneg(q, g.idil[d]);
    if (i * g.idil[d] != q) return false;
  }
  if (i >= g.in[d]) return false;
  in_index = i;
  return true;
}

}  // namespace gemmkit::cuda::conv_impl
