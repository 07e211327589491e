// Launch geometry and index arithmetic of the CUDA convolution kernels.
//
// Pure and header-only: no CUDA header, so the host unit tests (built also without CUDA) include
// it directly. Functions marked GEMMKIT_CONV_HD are compiled for the device too when nvcc sees
// this header; the kernels call exactly the functions the tests exercise.
//
// Size rules (the reason this file exists): every count and offset is int64; grids put all work
// on gridDim.x (<= 2^31 - 1) and loop over it (grid-stride), never on gridDim.y / gridDim.z
// (<= 65535), so no output count, channel count or chunk size can exceed a launch limit.
#pragma once

#include <algorithm>
#include <cstdint>

#include "common/problems.h"

#if defined(__CUDACC__)
#define GEMMKIT_CONV_HD __host__ __device__ __forceinline__
#else
#define GEMMKIT_CONV_HD inline
#endif

namespace gemmkit::cuda::conv_impl {

// ---- Launch grids -----------------------------------------------------------------------------

constexpr int64_t kMaxGridX = (int64_t{1} << 31) - 1;
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

// An output position (flat index over (n, out[0], out[1], out[2]), row-major) as coordinates.
struct OutCoord {
  int64_t n = 0;
  int64_t d[kDims] = {0, 0, 0};
};

GEMMKIT_CONV_HD OutCoord decode_position(const ConvGeometry& g, int64_t position) {
  OutCoord c;
  int64_t rest = position;
  for (int d = kDims - 1; d >= 0; --d) {
    const int64_t q = div_nonneg(rest, g.out[d]);
    c.d[d] = rest - q * g.out[d];
    rest = q;
  }
  c.n = rest;
  return c;
}

// A kernel tap index (flat, row-major over kernel[0..2]) as per-dim indices.
struct Tap {
  int64_t d[kDims] = {0, 0, 0};
};

GEMMKIT_CONV_HD Tap decode_tap(const ConvGeometry& g, int64_t tap) {
  Tap t;
  int64_t rest = tap;
  for (int d = kDims - 1; d >= 0; --d) {
    const int64_t q = div_nonneg(rest, g.kernel[d]);
    t.d[d] = rest - q * g.kernel[d];
    rest = q;
  }
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

// ---- Unfold mapping -------------------------------------------------------------------------

// The unfold buffer of the chunk of output rows starting at row0 (conv_unfold.cuh) is
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

// ---- Depthwise tiling --------------------------------------------------------------------------

// Depthwise kernel work decomposition. A "strip" is kDepthwiseTile consecutive outputs along the
// last spatial dim of one (n, out[0], out[1]) row; a "channel vector" is `vector` consecutive
// output channels. A block (blockDim = (cvt, spb)) takes tiles of cvt channel vectors x spb
// strips, tile index = channel_tile * strip_tiles + strip_tile, tiles grid-strided over
// gridDim.x; thread (tx, ty) of tile (ct, st) computes channel vector ct * cvt + tx of strip
// st * spb + ty (when both exist).
constexpr int kDepthwiseTile = 4;
// Kernels up to this wide (last spatial dim) keep one kernel row of weights in registers.
constexpr int kDepthwiseMaxRegisterTaps = 8;
// Output channels per depthwise thread, at most (acc[kDepthwiseTile][4] and a kernel row of
// weights wr[kDepthwiseMaxRegisterTaps][4] stay in registers).
constexpr int kDepthwiseMaxVector = 4;

struct DepthwiseTiling {
  int64_t cvt = 1;              // channel vectors per tile (blockDim.x)
  int64_t spb = 1;              // strips per tile (blockDim.y)
  int64_t channel_vectors = 1;  // o / vector
  int64_t channel_tiles = 1;
  int64_t strips_per_row = 1;  // ceil(out[2] / kDepthwiseTile)
  int64_t strips = 1;          // batch * out[0] * out[1] * strips_per_row
  int64_t strip_tiles = 1;
  bool x_vector = false;  // x read as vectors (multiplier 1 and aligned), else per channel
  int64_t tiles() const { return channel_tiles * strip_tiles; }
};

struct DepthwiseItem {
  int64_t channel_vector = 0, strip = 0;
  bool valid = false;
};

GEMMKIT_CONV_HD DepthwiseItem depthwise_item(const DepthwiseTiling& t, int64_t tile, int64_t tx,
                                             int64_t ty) {
  DepthwiseItem item;
  const int64_t channel_tile = div_nonneg(tile, t.strip_tiles);
  const int64_t strip_tile = tile - channel_tile * t.strip_tiles;
  item.channel_vector = channel_tile * t.cvt + tx;
  item.strip = strip_tile * t.spb + ty;
  item.valid = item.channel_vector < t.channel_vectors && item.strip < t.strips;
  return item;
}

// ---- Small-o tiling ---------------------------------------------------------------------------

// Small-o kernel work decomposition: a "strip" is kSmallOPositions consecutive outputs along the
// last spatial dim of one (n, out[0], out[1]) row; `lanes` = 2^lanes_log2 consecutive lanes of a
// warp share one strip (each reducing every lanes-th channel vector); a block of `block` threads
// holds block / lanes strips per grid-stride iteration.
constexpr int kSmallOPositions = 4;
// Largest o the small-o kernel serves (its accumulators are acc[kSmallOPositions][kO], kO = 4
// for o <= 4, else this).
constexpr int kSmallOMaxO = 8;

struct SmallOTiling {
  int lanes_log2 = 0;
  int64_t channel_vectors = 1;  // c / vector
  int64_t strips_per_row = 1;   // ceil(out[2] / kSmallOPositions)
  int64_t strips = 1;           // batch * out[0] * out[1] * strips_per_row
  int64_t strips_per_block = 1;
};

// ---- Layout helpers (host) ------------------------------------------------------------------

// Stride of the single index formed by merging dims [0, count) of a tensor (row-major, as the
// flat output position is formed): the stride of the innermost dim of size > 1 when every dim of
// size > 1 steps by the extent of the next inner one; 0 when all sizes are 1 (one row: any stride
// works); -1 when the dims do not merge.
inline int64_t merged_stride(const int64_t* shape, const int64_t* strides, int count) {
  int64_t stride = 0;  // of the merged inner part; 0 = nothing of size > 1 seen yet
  int64_t extent = 1;  // elements in the merged inner part
  for (int i = count - 1; i >= 0; --i) {
    if (shape[i] == 1) continue;
    if (stride == 0) {
      stride = strides[i];
    } else if (strides[i] != stride * extent) {
      return -1;
    }
    extent *= shape[i];
  }
  return stride;
}

// Row stride of the flat output-position index of x (dims 0..S of (n, spatial..., c)) or of out:
// merged_stride over the batch and spatial dims.
inline int64_t position_stride(const Tensor& t) {
  return merged_stride(t.shape, t.strides, t.rank - 1);
}

// The weight (o, kernel..., c/groups) as a matrix [o][kernel_positions * c/groups]: returns the
// row (output channel) stride when every row is contiguous (channel stride 1, kernel dims
// row-major over the channels), the rows do not overlap, and it is >= 1; else -1.
inline int64_t weight_row_stride(const detail::ConvProblem& p) {
  const Tensor& w = p.weight;
  const int64_t row = p.kernel_positions() * p.in_channels_per_group;
  const int64_t inner = merged_stride(w.shape + 1, w.strides + 1, w.rank - 1);
  if (inner != 1 && !(inner == 0 && row == 1)) return -1;
  if (p.out_channels == 1) return row;
  return w.strides[0] >= row ? w.strides[0] : -1;
}

// Largest power of two (<= 256) dividing `address` (256 for 0): the alignment cuBLASLt is told.
inline int address_alignment(uint64_t address) {
  int alignment = 1;
  while (alignment < 256 && (address & static_cast<uint64_t>(alignment)) == 0) alignment *= 2;
  return alignment;
}

inline int pointer_alignment(const void* pointer) {
  return address_alignment(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(pointer)));
}

}  // namespace gemmkit::cuda::conv_impl
