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

// Depthwise kernel work decomposition (conv_depthwise.cuh). A thread computes `vector` consecutive
// output channels (a "channel vector") x a tile of `th` output rows x `run` consecutive outputs
// along the last spatial dim, of one plane (n, out[0]). A block is blockDim = (cvt,
// rows_per_block * runs_per_block): cvt channel vectors (threadIdx.x, the fast axis: a warp reads
// consecutive channels of a position, and the warps of the block cover the linear thread index
// y * cvt + x, so a warp may span two spatial tiles) x a 2-D spatial tile of rows_per_block x
// runs_per_block thread tiles, so the input rows of neighbouring outputs, kernel rows apart, are
// read by the same block (L1 hits) rather than by different SMs.
// Tiles are numbered channel-tile-major: tile = channel_tile * spatial_tiles + spatial_tile,
// spatial_tile = (plane * row_tiles + row_tile) * col_tiles + col_tile, plane = n * out[0] + d0.
// Block b takes the contiguous tiles [b * tiles_per_block, (b + 1) * tiles_per_block): its
// channel tile (whose weights it stages in shared memory) changes at most once per
// spatial_tiles tiles, and every grid fits gridDim.x alone.
// Kernel variants (`variant`):
//   kDepthwiseGeneric  any stride / dilation / multiplier; per-(output, tap) loads; th = 1
//   kDepthwiseNarrow   last dim: stride 1 or 2, no dilation, kernel <= 4 (causal conv1d); th = 1
//   kDepthwiseWide     last dim: stride 1 or 2, no dilation, kernel <= 8; th = 1
//   kDepthwiseBlocked  2-D and 3-D: kernel width 3, 5 or 7, stride 1 or 2 along the last dim,
//                      no dilation along the last two dims (dim 0: anything); th x run register
//                      tile, 32-bit offsets inside a plane (depthwise_blocked_offsets_fit)
//   kDepthwiseStaged   2-D (one tap along dim 0), square 3x3 / 5x5 / 7x7 kernels, stride 1, no
//                      dilation along the last two dims, multiplier 1, 16-bit x in 16-byte channel
//                      octets: each block's input window staged by cp.async (zeros outside x),
//                      2 x 7 outputs x 2 channels per thread (conv_depthwise_staged.cuh)
//   kDepthwiseMma      2-D (one tap along dim 0), kernels up to 9 x 9, stride 1, no dilation
//                      along the last two dims, multiplier 1, 16-bit x and out of one type:
//                      Toeplitz MMAs per channel and kernel row (conv_depthwise_mma.cuh); th =
//                      kDepthwiseMmaRows, run = 8, 16 or 32 columns per tile
// The narrow / wide window variants need multiplier 1 and x suited to `vector`-element loads;
// they keep one kernel row of weights in registers and stream the row's input window once. The
// blocked variant takes any multiplier (vector 1 then) and is the one for every 2-D layer.
constexpr int kDepthwiseGeneric = 0;
constexpr int kDepthwiseNarrow = 1;
constexpr int kDepthwiseWide = 2;
constexpr int kDepthwiseBlocked = 3;
constexpr int kDepthwiseStaged = 4;
constexpr int kDepthwiseMma = 5;

inline const char* depthwise_variant_name(int variant) {
  switch (variant) {
    case kDepthwiseGeneric:
      return "generic";
    case kDepthwiseNarrow:
      return "narrow";
    case kDepthwiseWide:
      return "wide";
    case kDepthwiseBlocked:
      return "blocked";
    case kDepthwiseStaged:
      return "staged";
    case kDepthwiseMma:
      return "mma";
  }
  return "?";
}
// Outputs per thread along the last dim: (variant) -> run.
constexpr int kDepthwiseGenericRun = 4;
constexpr int kDepthwiseNarrowRun = 4;
constexpr int kDepthwiseWideRun = 8;
// Largest kernel width (last dim) of the window variants.
constexpr int kDepthwiseNarrowTaps = 4;
constexpr int kDepthwiseWideTaps = 8;
// Channels per thread of the wide variant (its accumulators acc[8][4] and weights wr[8][4] stay
// in registers); the narrow one takes 16 bytes of x (8 16-bit or 4 f32 channels); the generic
// one at most this.
constexpr int kDepthwiseWideVector = 4;
constexpr int kDepthwiseMaxGenericVector = 4;
// Channel vectors per block, at most (window and generic variants).
constexpr int kDepthwiseMaxCvt = 16;
// Blocked variant: threads per block at most (the kernel's launch bounds; 4 warps: 4 blocks per SM
// at ~120 registers, 5 at <= 96, 8 at <= 64, so the warps of every instantiation pack the
// register file), and channel vectors per block at most
// (32: one warp covers a position's 64 16-bit channels, 128 bytes). Few channels and several
// thread tiles per block keep the weight staging cheap: each thread stages vector * taps /
// (threads / cvt) weights.
constexpr int kDepthwiseBlockedThreads = 128;
constexpr int kDepthwiseBlockedMaxCvt = 32;

// Thread tile of the blocked variant: columns (outputs along the last dim) for kernel width kw and
// last-dim stride s; rows: kDepthwiseBlockedRows, or 1 when that leaves too few threads (see
// depthwise_config). The register budget of a thread at vector 2: rows * tw * 2 accumulators +
// rows * kw * 2 weights (a kernel row per output row) + ((tw - 1) * s + kw) raw input columns.
// Stride 1: 8 columns (10 / 12 / 14 input columns); stride 2: 4 (9 / 11 / 13).
constexpr int kDepthwiseBlockedRows = 2;
constexpr int depthwise_blocked_tw(int64_t /*kw*/, int64_t s) {
  return s == 2 ? 4 : 8;
}

struct DepthwiseTiling {
  int variant = kDepthwiseGeneric;
  int run = kDepthwiseGenericRun;  // outputs per thread along the last dim
  int th = 1;                      // output rows per thread (blocked variant; else 1)
  int64_t cvt = 1;                 // channel vectors per block (blockDim.x)
  int64_t rows_per_block = 1;      // thread tiles along out[1] of a block's spatial tile
  int64_t runs_per_block = 1;      // thread tiles along out[2] of a block's spatial tile
  int64_t channel_vectors = 1;     // o / vector
  int64_t channel_tiles = 1;       // ceil(channel_vectors / cvt)
  int64_t runs_per_row = 1;        // ceil(out[2] / run)
  int64_t row_tiles = 1;           // ceil(ceil(out[1] / th) / rows_per_block)
  int64_t col_tiles = 1;           // ceil(runs_per_row / runs_per_block)
  int64_t spatial_tiles = 1;       // batch * out[0] * row_tiles * col_tiles
  int64_t tiles_per_block = 1;
  bool x_vector = false;  // x read as vectors (multiplier 1 and aligned), else per channel
  // Blocked variant: staged weights [cvt][w_cv_stride / vector][vector] fp32 (w_cv_stride = an
  // odd number of taps >= taps, times vector: a warp's reads of one tap hit distinct banks), and
  // whether the weight's taps are one stride (w_stride[3]) apart (staging without index math).
  int64_t w_cv_stride = 0;
  bool w_linear = false;
  // Blocked and staged variants: bytes per load of the weight staging (16 or 8: each channel
  // tile's weights are one aligned run of w; depthwise_blocked_w_vector_bytes, or
  // depthwise_staged_w_run: 16 only), or 0: element by element.
  int w_vector_bytes = 0;
  // Staged variant: registers per thread of the kernel instantiation (kDepthwiseStagedRegisters,
  // or kDepthwiseStagedLeanRegisters where that fits the grid in fewer waves).
  int registers = 0;
  GEMMKIT_CONV_HD int64_t spb() const { return rows_per_block * runs_per_block; }  // blockDim.y
  GEMMKIT_CONV_HD int64_t threads() const { return cvt * spb(); }
  GEMMKIT_CONV_HD int64_t tiles() const { return channel_tiles * spatial_tiles; }
};

// What thread (tx, ty) computes in tile `tile`: channel vector, plane (n, d0), first output row
// d1 of its th rows and first output `ow0` of its run; `valid` is false for threads past an edge
// (the rows d1 + 1 .. d1 + th - 1 may still be past out[1]: the kernel checks them).
struct DepthwiseItem {
  int64_t channel_tile = 0, channel_vector = 0;
  int64_t n = 0, d0 = 0, d1 = 0, ow0 = 0;
  bool valid = false;
};

GEMMKIT_CONV_HD DepthwiseItem depthwise_item(const ConvGeometry& g, const DepthwiseTiling& t,
                                             int64_t tile, int64_t tx, int64_t ty) {
  DepthwiseItem item;
  item.channel_tile = div_nonneg(tile, t.spatial_tiles);
  int64_t rest = tile - item.channel_tile * t.spatial_tiles;
  const int64_t q = div_nonneg(rest, t.col_tiles);
  const int64_t col_tile = rest - q * t.col_tiles;
  const int64_t plane = div_nonneg(q, t.row_tiles);
  const int64_t row_tile = q - plane * t.row_tiles;
  item.n = div_nonneg(plane, g.out[0]);
  item.d0 = plane - item.n * g.out[0];
  const int64_t r = div_nonneg(ty, t.runs_per_block);
  item.d1 = (row_tile * t.rows_per_block + r) * t.th;
  const int64_t run = col_tile * t.runs_per_block + (ty - r * t.runs_per_block);
  item.ow0 = run * t.run;
  item.channel_vector = item.channel_tile * t.cvt + tx;
  item.valid =
      item.channel_vector < t.channel_vectors && item.d1 < g.out[1] && run < t.runs_per_row;
  return item;
}

// Blocked variant, along the last dim: a thread tile reads the input columns q0 .. q0 + span - 1,
// q0 = ow0 * stride - pad_lo, span = (run - 1) * stride + kernel. Interior tiles (every column
// inside x, every output inside out) take the path without checks; edge tiles read columns
// [lo, hi) of the span only (`columns` computes them) and store outputs < out[2] only.
GEMMKIT_CONV_HD int64_t depthwise_blocked_span(const ConvGeometry& g, const DepthwiseTiling& t) {
  return (t.run - 1) * g.stride[2] + g.kernel[2];
}

GEMMKIT_CONV_HD bool depthwise_blocked_interior(const ConvGeometry& g, const DepthwiseTiling& t,
                                                int64_t ow0) {
  const int64_t q0 = ow0 * g.stride[2] - g.pad_lo[2];
  return q0 >= 0 && q0 + depthwise_blocked_span(g, t) <= g.in[2] && ow0 + t.run <= g.out[2];
}

// The columns [lo, hi) of a thread tile's span that lie inside x (lo >= hi: none).
struct DepthwiseColumns {
  int64_t lo = 0, hi = 0;
};

GEMMKIT_CONV_HD DepthwiseColumns depthwise_blocked_columns(const ConvGeometry& g,
                                                           const DepthwiseTiling& t, int64_t ow0) {
  const int64_t q0 = ow0 * g.stride[2] - g.pad_lo[2];
  const int64_t span = depthwise_blocked_span(g, t);
  DepthwiseColumns c;
  c.lo = q0 < 0 ? -q0 : 0;
  c.hi = g.in[2] - q0 < span ? g.in[2] - q0 : span;
  return c;
}

// Rows of a blocked thread tile: it walks the input rows ih0 + ir, ir < (th - 1) * stride[1] +
// kernel[1], ih0 = d1 * stride[1] - pad_lo[1] (rows outside x are skipped: padding); input row ir
// feeds its output row r at kernel row kr = ir - r * stride[1] when 0 <= kr < kernel[1]. For
// each output, ir ascending is kr ascending: the taps arrive in row-major order.
GEMMKIT_CONV_HD int64_t depthwise_blocked_rows(const ConvGeometry& g, const DepthwiseTiling& t) {
  return (t.th - 1) * g.stride[1] + g.kernel[1];
}

// Whether the blocked variant's 32-bit offsets hold: inside one plane (n, input index along dim
// 0) of x every element offset (and its row / column coordinate, padding included) and inside
// one plane (n, d0) of out every element offset stays below 2^31. Plane bases are 64-bit.
inline bool depthwise_blocked_offsets_fit(const ConvGeometry& g, const DepthwiseTiling& t) {
  const auto abs64 = [](int64_t v) { return v < 0 ? -v : v; };
  // Coordinates the kernel forms: rows and columns of the padded windows of every thread tile.
  const int64_t reach_h = depthwise_blocked_rows(g, t) + t.th * g.stride[1] + abs64(g.pad_lo[1]);
  const int64_t reach_w = depthwise_blocked_span(g, t) + t.run * g.stride[2] + abs64(g.pad_lo[2]);
  if (g.in[1] + g.out[1] * g.stride[1] + reach_h > kMaxInt32 / 2) return false;
  if (g.in[2] + g.out[2] * g.stride[2] + reach_w > kMaxInt32 / 2) return false;
  // Spans: the largest offsets (strides are >= 1); the products stay far below 2^63 because
  // the tensors' spans were checked to fit int64.
  const double x_span = static_cast<double>(g.in[1] - 1) * static_cast<double>(g.x_stride[2]) +
                        static_cast<double>(g.in[2] - 1) * static_cast<double>(g.x_stride[3]) +
                        static_cast<double>(g.c - 1) * static_cast<double>(g.x_stride[4]);
  const double out_span = static_cast<double>(g.out[1] - 1) * static_cast<double>(g.out_stride[2]) +
                          static_cast<double>(g.out[2] - 1) * static_cast<double>(g.out_stride[3]) +
                          static_cast<double>(g.o - 1) * static_cast<double>(g.out_stride[4]);
  return x_span < static_cast<double>(kMaxInt32) && out_span < static_cast<double>(kMaxInt32);
}

// ---- Staged depthwise variant (conv_depthwise_staged.cuh) --------------------------------------
// A thread owns 2 channels x kDepthwiseStagedRows output rows x kDepthwiseStagedRun output
// columns. A warp is cvt = 32 / groups channel pairs x `groups` (runs_per_block: 4 or 2) thread
// tiles side by side along the row; the block's warps (rows_per_block) stack along the rows. So a
// block tile is 2 * cvt channels x 2 * warps rows x 7 * groups columns of one plane, and its
// input window (2 * warps + k - 1) x (7 * groups + k - 1) pixels of those channels, 16-byte
// chunks of 8 channels. Seven columns per thread tile: a warp's thread tiles start 7 pixels
// apart, so with 32-byte (groups 4) or 64-byte (groups 2) staged pixels their 4-byte reads of one
// window column fall on distinct banks; and 7 divides the widths of ConvNeXt / MobileNet stages.
constexpr int kDepthwiseStagedRun = 7;
constexpr int kDepthwiseStagedRows = 2;
constexpr int kDepthwiseStagedMaxWarps = 8;

// Registers per thread the staged kernels are held to (__maxnreg__), which the planner's count of
// resident blocks uses (blocks_per_sm_by_registers). The FMA loop needs ~85; uncapped, ptxas
// spent up to 111 on the staging loops. At 96 an SM holds 20 warps (2 blocks of 7 warps); the
// lean instantiation, at 80, holds 24 (3 of 7), which the planner takes where it runs the grid in
// fewer waves (ConvNeXt 7x7 c96: 384 blocks of 7 warps, 14.6 -> 13.6 us on an H200), though
// ptxas then keeps a few tile-state values in local memory (read once per tile).
constexpr int kDepthwiseStagedRegisters = 96;
constexpr int kDepthwiseStagedLeanRegisters = 80;

GEMMKIT_CONV_HD int64_t depthwise_staged_channels(const DepthwiseTiling& t) {
  return 2 * t.cvt;  // channels of a tile: 32 (groups 2) or 16 (groups 4)
}
GEMMKIT_CONV_HD int64_t depthwise_staged_window_rows(const ConvGeometry& g,
                                                     const DepthwiseTiling& t) {
  return kDepthwiseStagedRows * t.rows_per_block + g.kernel[1] - 1;
}
GEMMKIT_CONV_HD int64_t depthwise_staged_window_cols(const ConvGeometry& g,
                                                     const DepthwiseTiling& t) {
  return kDepthwiseStagedRun * t.runs_per_block + g.kernel[2] - 1;
}
// 16-byte chunks of one staged window (pixels x channels / 8).
GEMMKIT_CONV_HD int64_t depthwise_staged_window_chunks(const ConvGeometry& g,
                                                       const DepthwiseTiling& t) {
  return depthwise_staged_window_rows(g, t) * depthwise_staged_window_cols(g, t) *
         (depthwise_staged_channels(t) / 8);
}
// Shared memory: one window (two when a block takes several tiles: the next one is staged while
// the current one is computed), then the channel tile's weights as fp32 [tap][channel].
GEMMKIT_CONV_HD int64_t depthwise_staged_buffers(const DepthwiseTiling& t) {
  return t.tiles_per_block > 1 ? 2 : 1;
}
GEMMKIT_CONV_HD int64_t depthwise_staged_smem_bytes(const ConvGeometry& g,
                                                    const DepthwiseTiling& t) {
  return depthwise_staged_buffers(t) * depthwise_staged_window_chunks(g, t) * 16 +
         g.kernel[1] * g.kernel[2] * depthwise_staged_channels(t) * 4;
}

// Block tile `tile` of a window variant (staged, tensor-core) whose tiles are `channels` x
// `rows` x `cols` outputs (channel tile outermost, then plane, row tile, column tile): first
// channel, plane (n, d0), first output row and column, the input coordinates of the window's
// pixel (0, 0) (padding when negative), and the plane's input index along dim 0 (plane_ok false:
// the plane reads padding, every staged pixel is zero). The divisions run in `I`: the kernels
// take 32-bit ones when every count fits (depthwise_staged_decode32: a 64-bit division costs ~70
// instructions).
struct DepthwiseStagedTile {
  int64_t channel_tile = 0, c0 = 0, n = 0, d0 = 0, oh0 = 0, ow0 = 0, ih0 = 0, iw0 = 0, i0 = 0;
  bool plane_ok = false;
};
template <typename I>
GEMMKIT_CONV_HD DepthwiseStagedTile depthwise_window_tile(const ConvGeometry& g,
                                                          const DepthwiseTiling& t, int64_t tile,
                                                          int64_t channels, int64_t rows,
                                                          int64_t cols) {
  DepthwiseStagedTile s;
  I rest = static_cast<I>(tile);
  const I col_tile = rest % static_cast<I>(t.col_tiles);
  rest /= static_cast<I>(t.col_tiles);
  const I row_tile = rest % static_cast<I>(t.row_tiles);
  rest /= static_cast<I>(t.row_tiles);
  const I planes = static_cast<I>(g.batch * g.out[0]);
  const I plane = rest % planes;
  s.channel_tile = static_cast<int64_t>(rest / planes);
  s.d0 = static_cast<int64_t>(plane % static_cast<I>(g.out[0]));
  s.n = static_cast<int64_t>(plane / static_cast<I>(g.out[0]));
  s.c0 = s.channel_tile * channels;
  s.oh0 = static_cast<int64_t>(row_tile) * rows;
  s.ow0 = static_cast<int64_t>(col_tile) * cols;
  s.ih0 = s.oh0 - g.pad_lo[1];
  s.iw0 = s.ow0 - g.pad_lo[2];
  s.plane_ok = tap_source(g, 0, s.d0, 0, s.i0);
  if (!s.plane_ok) s.i0 = 0;
  return s;
}
// The staged variant's tiles: 2 * cvt channels x 2 * warps rows x 7 * groups columns.
template <typename I = int64_t>
GEMMKIT_CONV_HD DepthwiseStagedTile depthwise_staged_tile(const ConvGeometry& g,
                                                          const DepthwiseTiling& t, int64_t tile) {
  return depthwise_window_tile<I>(g, t, tile, depthwise_staged_channels(t),
                                  t.rows_per_block * kDepthwiseStagedRows,
                                  t.runs_per_block * kDepthwiseStagedRun);
}
// Whether every tile index (and so every count it is divided by) fits 32-bit unsigned division.
GEMMKIT_CONV_HD bool depthwise_staged_decode32(const DepthwiseTiling& t) {
  return t.tiles() <= 0xffffffffll;
}

// ---- Tensor-core depthwise variant (conv_depthwise_mma.cuh) ----------------------------------
// A block tile is kDepthwiseMmaChannels channels (t.cvt = 2 vectors of 8) x kDepthwiseMmaRows
// output rows x t.run output columns of one plane (t.run / 8 = "pieces" of 8 columns: 1, 2 or 4).
// Per channel, kernel row i and piece j, one mma.m16n8k16 multiplies A = the 16 x 16 input window
// (rows i .. i + 15, columns 8j .. 8j + 15 of the tile's window) by kernel row i's Toeplitz matrix
// B (B[k][n] = w[i][k - n] for 0 <= k - n < kw, else 0), so kw <= 9. The window, (16 + kh - 1) rows
// x (8 * pieces + 8) columns, is staged per row: first as pixels of 16 channels (two 16-byte
// chunks, swizzled), then transposed in place into 16 channel rows of 8-column blocks.
constexpr int kDepthwiseMmaRows = 16;
constexpr int kDepthwiseMmaChannels = 16;
constexpr int kDepthwiseMmaThreads = 256;  // 8 warps: channels w and w + 8 in the MMA phase
constexpr int kDepthwiseMmaMaxKernel = 9;
constexpr int kDepthwiseMmaMaxPieces = 4;
// Registers per thread the kernel is held to (__launch_bounds__): 64 for 1-piece tiles (4 blocks
// of 8 warps per SM), 80 for the others (3 blocks), whose accumulators and weight loads need more.
GEMMKIT_CONV_HD constexpr int depthwise_mma_registers(int pieces) {
  return pieces == 1 ? 64 : 80;
}
// Staged weights per (channel, kernel row): window tap s at index s + 8, zeros around it, so a
// lane's Toeplitz slots 2 (l % 4) - l / 4 + {8, 9, 16, 17} always fall inside.
constexpr int kDepthwiseMmaWeightRow = 24;

// Shared-memory layout, in 16-byte units. A window row holds 8 * pieces + 8 pixels (2 units
// each) before the transposition and 16 channel rows of `depthwise_mma_channel_units` units
// after it; the row pitch is odd so that ldmatrix's 8 rows of one A matrix (8 window rows) hit
// distinct banks, and so is the channel pitch (stmatrix's 8 channel rows).
GEMMKIT_CONV_HD int depthwise_mma_in_cols(int pieces) {
  return 8 * pieces + 8;
}
GEMMKIT_CONV_HD int depthwise_mma_in_rows(const ConvGeometry& g) {
  return kDepthwiseMmaRows + static_cast<int>(g.kernel[1]) - 1;
}
GEMMKIT_CONV_HD int depthwise_mma_channel_units(int pieces) {
  return (pieces + 1) | 1;
}
GEMMKIT_CONV_HD int depthwise_mma_row_units(int pieces) {
  return kDepthwiseMmaChannels * depthwise_mma_channel_units(pieces) + 1;
}
// The output staging after the MMAs (over the window): (channel, row, 8-column block) units with
// an odd row pitch (the fragments' 32-bit stores) and an odd channel pitch (ldmatrix.trans).
GEMMKIT_CONV_HD int depthwise_mma_out_row_units(int pieces) {
  return pieces | 1;
}
GEMMKIT_CONV_HD int depthwise_mma_out_channel_units(int pieces) {
  return kDepthwiseMmaRows * depthwise_mma_out_row_units(pieces) + 1;
}
GEMMKIT_CONV_HD int64_t depthwise_mma_window_bytes(const ConvGeometry& g, int pieces) {
  const int64_t window = int64_t{depthwise_mma_in_rows(g)} * depthwise_mma_row_units(pieces);
  const int64_t staged = int64_t{kDepthwiseMmaChannels} * depthwise_mma_out_channel_units(pieces);
  return 16 * (window > staged ? window : staged);
}
// Then the channel tile's weights, 16-bit: (channel, kernel row, kDepthwiseMmaWeightRow).
GEMMKIT_CONV_HD int64_t depthwise_mma_smem_bytes(const ConvGeometry& g, int pieces) {
  return depthwise_mma_window_bytes(g, pieces) +
         int64_t{kDepthwiseMmaChannels} * g.kernel[1] * kDepthwiseMmaWeightRow * 2;
}

// The tensor-core variant's tiles: kDepthwiseMmaChannels x kDepthwiseMmaRows x t.run.
template <typename I = int64_t>
GEMMKIT_CONV_HD DepthwiseStagedTile depthwise_mma_tile(const ConvGeometry& g,
                                                       const DepthwiseTiling& t, int64_t tile) {
  return depthwise_window_tile<I>(g, t, tile, kDepthwiseMmaChannels, kDepthwiseMmaRows, t.run);
}

// Lane `lane`'s window row (0 .. 15) and 8-column block (0 or 1) of the 16 x 16 A matrix it
// points ldmatrix.x4 at: matrices (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15),
// (rows 8-15, k 8-15), the A fragment registers a0 .. a3 of mma.m16n8k16.
GEMMKIT_CONV_HD int depthwise_mma_a_row(int lane) {
  return (lane & 7) + ((lane >> 3) & 1) * 8;
}
GEMMKIT_CONV_HD int depthwise_mma_a_block(int lane) {
  return lane >> 4;
}
// Index in a staged weight row of the window tap that lane `lane`'s Toeplitz B fragment holds in
// register `reg` (0: k-slots 2 (l % 4) + {0, 1}; 1: + 8), half `half`, for column n = l / 4:
// slot k - n + 8.
GEMMKIT_CONV_HD int depthwise_mma_b_slot(int lane, int reg, int half) {
  return 2 * (lane & 3) + 8 * reg + half - (lane >> 2) + 8;
}
// The 16-byte unit of pixel `col`'s chunk `h` (channels 8h .. 8h + 7) in a staged window row
// before the transposition: the chunks of pixels 4 .. 7 of every 8 swap places, so that 8
// consecutive pixels' chunks h fall on 8 distinct bank groups (ldmatrix.trans).
GEMMKIT_CONV_HD int depthwise_mma_pixel_unit(int col, int h) {
  return 2 * col + (h ^ ((col >> 2) & 1));
}

// ---- Small-o tiling ---------------------------------------------------------------------------

// Small-o kernels (conv_small_o.cuh).
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

// Spatial layout and grid of a depthwise tiling whose variant, run, cvt and channel_vectors are
// set: the block's spatial tile takes as many runs of a row as fit the thread budget (whole rows
// when they fit: no halo along the last dim), then as many rows as fit; the budget halves (256
// -> 128 -> 64 threads) while the problem would give fewer than 2 blocks per multiprocessor.
// Then tiles_per_block so that the grid stays within `max_blocks`. Returns gridDim.x.
inline int64_t depthwise_layout(const ConvGeometry& g, int64_t multiprocessors, int64_t max_blocks,
                                DepthwiseTiling& t) {
  t.channel_tiles = ceil_div(t.channel_vectors, t.cvt);
  t.runs_per_row = ceil_div(g.out[2], t.run);
  const int64_t planes = g.batch * g.out[0];
  for (int64_t budget = 256;; budget /= 2) {
    const int64_t spatial = std::max<int64_t>(1, budget / t.cvt);
    t.runs_per_block = std::min(t.runs_per_row, spatial);
    t.rows_per_block = std::max<int64_t>(1, std::min(g.out[1], spatial / t.runs_per_block));
    t.row_tiles = ceil_div(g.out[1], t.rows_per_block);
    t.col_tiles = ceil_div(t.runs_per_row, t.runs_per_block);
    t.spatial_tiles = planes * t.row_tiles * t.col_tiles;
    if (budget <= 64 || t.tiles() >= 2 * multiprocessors) break;
  }
  const int64_t cap = std::max<int64_t>(1, std::min(max_blocks, kMaxGridX));
  t.tiles_per_block = ceil_div(t.tiles(), cap);
  return ceil_div(t.tiles(), t.tiles_per_block);
}

// Plans the tensor-core small-o kernel for `g` (16-bit x read as 8-channel vectors: the caller
// checks dtype, c % 8 and alignment) within `max_smem` bytes of shared memory. Needs a kernel of
// one tap along dim 0 and stride 1, no dilations along dims 1 and 2. Fills `t` (mma = true) and
// returns "" , or returns why not. Region shapes, largest first (why: 256 positions = 2 M-tiles
// of 16 for each of the 8 warps; wide before tall because rows are contiguous in memory):
//   2-D (region_h, region_w): (16, 16), (8, 16), (8, 8), (4, 8); 1-D: (1, 256) ... (1, 32).
inline std::string plan_small_o_mma(const ConvGeometry& g, int64_t max_smem, SmallOTiling& t) {
  if (g.kernel[0] != 1) return "3-D kernel";
  for (int d = 1; d < kDims; ++d) {
    if (g.stride[d] != 1 || g.kdil[d] != 1 || g.idil[d] != 1) {
      return "a stride or dilation of the last two spatial dims is not 1";
    }
  }
  const int64_t taps = g.kernel_positions();
  t.n_cols = taps * g.o;
  t.n_tiles = ceil_div(t.n_cols, 8);
  t.p_stride = ceil_div(t.n_cols, 32) * 32;
  t.chunks = ceil_div(g.c, kSmallOMmaChunk);
  t.weight_bytes = t.n_tiles * t.chunks * kSmallOMmaChunkBytes;
  const bool one_d = g.out[1] == 1 && g.kernel[1] == 1;
  for (int64_t region = kSmallOMmaMaxRegion; region >= 32; region /= 2) {
    const int64_t w = one_d ? region : (region >= 128 ? 16 : 8);
    const int64_t h = region / w;
    if (h < g.kernel[1] || w < g.kernel[2]) continue;
    if (t.weight_bytes + region * t.p_stride * 4 > max_smem) continue;
    t.mma = true;
    t.region_h = h;
    t.region_w = w;
    t.tile_h = h - g.kernel[1] + 1;
    t.tile_w = w - g.kernel[2] + 1;
    t.row_tiles = ceil_div(g.out[1], t.tile_h);
    t.col_tiles = ceil_div(g.out[2], t.tile_w);
    t.tiles = g.batch * g.out[0] * t.row_tiles * t.col_tiles;
    return "";
  }
  return "the weights (" + std::to_string(t.weight_bytes) +
         " bytes as MMA fragments) and a region of per-tap products do not fit in " +
         std::to_string(max_smem / 1024) + " KiB of shared memory";
}

// ---- Small-o taps tiling ------------------------------------------------------------------------

// Tap-GEMM small-o kernel (conv_small_o_taps.cuh): a 1x1 GEMM of a block's input region by every
// tap's weights, Y[r][tap * o + oc] = sum_ci x[r][ci] * w[oc][tap][ci] (M = region pixels, N =
// taps * o, K = c), then a shift-add gather out[p][oc] = sum_tap Y[src(p, tap)][tap * o + oc].
// A block owns an output tile of tile_h x tile_w positions of one plane (n, d0) along dims 1 and
// 2; its input region is region_h x region_w pixels ((tile - 1) * stride + (kernel - 1) *
// dilation + 1 per dim), row-major, cut into m-tiles of 16 pixels that the warps take in turn
// (m-tile warp, warp + 8, ...). A warp step multiplies one m-tile by one channel group (4 chunks
// of 32 channels); the steps of a warp run (tile, m-tile, group) in that nesting order. Tiles
// are numbered (plane * row_tiles + row_tile) * col_tiles + col_tile; block b takes tiles b,
// b + grid, b + 2 grid, ... (64-bit), so any tile count fits a grid of resident blocks.
constexpr int kSmallOTapsThreads = 256;
constexpr int kSmallOTapsWarps = kSmallOTapsThreads / 32;
constexpr int kSmallOTapsMRows = 16;       // region pixels per m-tile (the MMA's M)
constexpr int kSmallOTapsChunk = 32;       // channels per chunk: two m16n8k16 k-steps
constexpr int kSmallOTapsGroupChunks = 4;  // chunks per load group: 8 16-byte loads per lane
constexpr int kSmallOTapsMaxCols = 64;     // taps * o at most: 8 n-tiles of 8 columns
// Bytes of one chunk of B fragments for one n-tile: 32 lanes x 16 bytes.
constexpr int64_t kSmallOTapsChunkBytes = 32 * 16;
// Shared memory the CUDA runtime reserves per block (sm_80 and later).
constexpr int64_t kSmallOTapsSmemReserve = 1024;

// Resident blocks per multiprocessor that the kernel's registers allow (its __launch_bounds__
// minimum): 2, so up to 128 registers per thread. (At 3 blocks, 80 registers, the 32 registers
// of one step's x, 16-32 accumulators and the tile's 64-bit coordinates spill; 2 blocks of 8
// warps with 4 KiB of loads in flight each already cover the DRAM latency.)
constexpr int kSmallOTapsMinBlocks = 2;

// Y is column-major (entry (r, n) at n * y_stride + r, small_o_taps_y) with a column stride of
// the first value >= y_rows that is 4 mod 32 banks: an accumulator store (lanes: rows q = 0..7,
// columns 2k, k = 0..3) then hits banks 8k + q, all distinct, and the shift-add's lanes (one
// output position each, consecutive region pixels) read consecutive banks.
constexpr int64_t small_o_taps_y_stride(int64_t y_rows) {
  return y_rows + (4 - y_rows % 32 + 32) % 32;
}

struct SmallOTapsTiling {
  bool active = false;
  int n_tiles = 4;                 // MMA n-tiles of 8 columns: 4 or 8 (kernel template)
  int64_t n_cols = 1;              // taps * o: columns of Y
  int64_t y_stride = 1;            // floats per Y column (small_o_taps_y_stride; Y is column-major)
  int64_t chunks = 1;              // ceil(c / 32)
  int64_t channel_groups = 1;      // ceil(chunks / 4): warp steps per m-tile
  int64_t tile_h = 1, tile_w = 1;  // output positions of a tile (dims 1 and 2)
  int64_t region_h = 1, region_w = 1;  // input pixels the tile reads
  int64_t m_tiles = 1;                 // ceil(region / 16)
  int64_t row_tiles = 1, col_tiles = 1;
  int64_t tiles = 1;            // batch * out[0] * row_tiles * col_tiles
  int64_t weight_bytes = 0;     // chunks * n_tiles * kSmallOTapsChunkBytes: B fragments
  int64_t y_bytes = 0;          // n_tiles * 8 * y_stride * 4: Y in fp32
  int64_t pixel_bytes = 0;      // y_rows() * 4: the tile's region pixel offsets (int32)
  int64_t blocks_per_sm = 1;    // resident blocks (registers, shared memory)
  int64_t tiles_per_block = 1;  // most tiles one block takes
  int64_t grid = 1;             // blocks: ceil(tiles / tiles_per_block)
  // The TMA-fed form (conv_small_o_taps_tma.cuh; plan_small_o_taps_tma): 0 for the register
  // form, else the stages of its ring of region chunks (region pixels x 32 channels, padded to
  // whole m-tiles) of stage_bytes each.
  int tma_stages = 0;
  int64_t stage_bytes = 0;
  GEMMKIT_CONV_HD int64_t region() const { return region_h * region_w; }
  // Rows of Y and of the pixel table: every m-tile's 16 (the m-tail rows are written, never read).
  GEMMKIT_CONV_HD int64_t y_rows() const { return m_tiles * kSmallOTapsMRows; }
  GEMMKIT_CONV_HD int64_t smem_bytes() const {
    if (tma_stages > 0) {
      // + 128: the ring's alignment after B fragments and Y; then full and empty mbarriers.
      return weight_bytes + y_bytes + 128 + tma_stages * stage_bytes + 2 * tma_stages * 8;
    }
    return weight_bytes + y_bytes + pixel_bytes;
  }
};

// The tile of tiling `t` numbered `tile`: plane (n, d0), first output row / column, whether the
// input plane along dim 0 is real (plane_ok; else every tap is padding) and x's offset of that
// plane (x_plane), and the input coordinates of region pixel (0, 0) (may be negative or past the
// input: padding).
struct SmallOTapsTile : SmallOTile {
  bool plane_ok = false;
  int64_t i0 = -1;  // the plane's input index along dim 0, -1 on padding
  int64_t x_plane = 0;
  int64_t ih0 = 0, iw0 = 0;
};

GEMMKIT_CONV_HD SmallOTapsTile small_o_taps_tile(const ConvGeometry& g, const SmallOTapsTiling& t,
                                                 int64_t tile) {
  SmallOTapsTile s;
  static_cast<SmallOTile&>(s) = small_o_tile(g, t, tile);
  int64_t i0 = 0;
  s.plane_ok = tap_source(g, 0, s.d0, 0, i0);
  if (s.plane_ok) s.i0 = i0;
  s.x_plane = s.n * g.x_stride[0] + i0 * g.x_stride[1];
  s.ih0 = s.oh0 * g.stride[1] - g.pad_lo[1];
  s.iw0 = s.ow0 * g.stride[2] - g.pad_lo[2];
  return s;
}

// In-tile indices (region pixels, Y columns and entries, channels, m-tiles, groups, tile
// positions) are `int`: the plan bounds Y and the B fragments by shared memory (region < 2^15
// pixels, c < 2^11). Offsets into x, weight and out are int64.

// Region pixel r (row-major, region_w wide) of tile s: whether it is a real input pixel (not the
// m-tail past the region, padding or cropped input: those rows load zeros), and the element
// offset of its channel 0 in x.
GEMMKIT_CONV_HD bool small_o_taps_pixel(const ConvGeometry& g, const SmallOTapsTiling& t,
                                        const SmallOTapsTile& s, int r, int64_t& offset) {
  const int region_w = static_cast<int>(t.region_w);
  if (!s.plane_ok || r >= region_w * static_cast<int>(t.region_h)) return false;
  const int rh = r / region_w;
  const int64_t ih = s.ih0 + rh, iw = s.iw0 + (r - rh * region_w);
  if (ih < 0 || ih >= g.in[1] || iw < 0 || iw >= g.in[2]) return false;
  offset = s.x_plane + ih * g.x_stride[2] + iw * g.x_stride[3];
  return true;
}

// x's element offset of tile s's region pixel (0, 0) (it may be padding: only a base that real
// pixels' offsets are taken from).
GEMMKIT_CONV_HD int64_t small_o_taps_tile_base(const ConvGeometry& g, const SmallOTapsTile& s) {
  return s.x_plane + s.ih0 * g.x_stride[2] + s.iw0 * g.x_stride[3];
}

// Region pixel r's offset from small_o_taps_tile_base (>= 0: strides are >= 1, and the plan
// keeps it below 2^31), or -1 where small_o_taps_pixel is false. The kernel keeps these in a
// per-tile table in shared memory, so a warp step locates its rows with two shared loads.
GEMMKIT_CONV_HD int small_o_taps_region_offset(const ConvGeometry& g, const SmallOTapsTiling& t,
                                               const SmallOTapsTile& s, int r) {
  int64_t offset = 0;
  if (!small_o_taps_pixel(g, t, s, r, offset)) return -1;
  return static_cast<int>(offset - small_o_taps_tile_base(g, s));
}

// The m-tile row (0 .. 15) whose x lane `lane` loads into its registers a[.][h] (h = 0, 1): the
// A-fragment rows q = lane / 4 and q + 8.
GEMMKIT_CONV_HD int small_o_taps_a_row(int lane, int h) {
  return (lane >> 2) + h * 8;
}

// First channel of the 8 that lane `lane` loads (one 16-byte vector per row) for chunk k of
// channel group `group`: 8 (lane % 4) into the chunk; the load happens only when it is < c
// (c % 8 == 0: all 8 are then). small_o_taps_a_fragment gives them their k-slots.
GEMMKIT_CONV_HD int small_o_taps_channel(int group, int k, int lane) {
  return (group * kSmallOTapsGroupChunks + k) * kSmallOTapsChunk + (lane & 3) * 8;
}

// B fragments in shared memory: 16-byte unit (chunk, n_tile, lane) holds the weights of column
// n = n_tile * 8 + lane / 4 for channels chunk * 32 + (lane % 4) * 8 .. + 7 (a warp reads 512
// consecutive bytes per (chunk, n-tile)).
GEMMKIT_CONV_HD int small_o_taps_b_unit(const SmallOTapsTiling& t, int chunk, int n_tile,
                                        int lane) {
  return (chunk * t.n_tiles + n_tile) * 32 + lane;
}

// Weights of Y column n = tap * o + oc (tap = window tap, row-major over dims 1, 2) for channels
// ch0 .. ch0 + 7 (ch0 % 8 == 0): false for the padding columns (n >= taps * o) and channels
// (ch0 >= c), which hold zeros; else channel ch0 + e is at offset + e * w_stride[4]. Flip maps
// the window tap to the weight's (weight_tap).
GEMMKIT_CONV_HD bool small_o_taps_weight(const ConvGeometry& g, int n, int ch0, int64_t& offset) {
  const int o = static_cast<int>(g.o), k2 = static_cast<int>(g.kernel[2]);
  if (n >= static_cast<int>(g.kernel[1]) * k2 * o || ch0 >= g.c) return false;
  const int tap = n / o;
  const int oc = n - tap * o;
  const int t1 = tap / k2;
  const int t2 = tap - t1 * k2;
  offset = oc * g.w_stride[0] + weight_tap(g, 1, t1) * g.w_stride[2] +
           weight_tap(g, 2, t2) * g.w_stride[3] + ch0 * g.w_stride[4];
  return true;
}

// The L2 prefetch of the warp's step two ahead (when it is in the same tile, whose pixel table
// is at hand): lane `lane` asks for the 128-byte line at channel small_o_taps_prefetch_channel of
// region pixel small_o_taps_prefetch_row (16 pixels x the group's 128 channels = 32 lines of
// 16-bit x, one per lane), when the pixel is real and the channel < c.
constexpr int kSmallOTapsLineElems = 64;  // 16-bit elements per 128-byte line
GEMMKIT_CONV_HD int small_o_taps_prefetch_row(int m_tile, int lane) {
  return m_tile * kSmallOTapsMRows + (lane >> 1);
}
GEMMKIT_CONV_HD int small_o_taps_prefetch_channel(int group, int lane) {
  return group * kSmallOTapsGroupChunks * kSmallOTapsChunk + (lane & 1) * kSmallOTapsLineElems;
}

// MMA fragments (PTX mma.m16n8k16 .row.col, 16-bit A and B, fp32 D). Lane (q = lane / 4,
// k = lane % 4) holds, two 16-bit elements per register (the lower index in the low half):
//   A: reg 0 (row q, k-slots 2k, 2k+1), 1 (row q+8, 2k, 2k+1), 2 (row q, 2k+8, 2k+9),
//      3 (row q+8, 2k+8, 2k+9)
//   B: reg 0 (k-slots 2k, 2k+1; column q), reg 1 (k-slots 2k+8, 2k+9; column q)
//   D: element e at (row q + 8 (e / 2), column 2k + e % 2)
// The taps kernel's lane holds, for rows q and q + 8 of its m-tile, channels 8k .. 8k + 7 of a
// 32-channel chunk as 4 registers (one 16-byte load each); k-step `half` (0, 1) of the chunk
// takes registers 2 half and 2 half + 1 of each row, so channels 8k + 4 half + {0, 1, 2, 3} are
// its k-slots {2k, 2k+1, 2k+8, 2k+9}. B units hold the same 8 channels of a column.
GEMMKIT_CONV_HD void small_o_taps_a_fragment(const uint32_t (&row_q)[4],
                                             const uint32_t (&row_q8)[4], int half,
                                             uint32_t (&a)[4]) {
  a[0] = row_q[2 * half];
  a[1] = row_q8[2 * half];
  a[2] = row_q[2 * half + 1];
  a[3] = row_q8[2 * half + 1];
}

GEMMKIT_CONV_HD void small_o_taps_b_fragment(const uint32_t (&unit)[4], int half, uint32_t& b0,
                                             uint32_t& b1) {
  b0 = unit[2 * half];
  b1 = unit[2 * half + 1];
}

// Row (in the m-tile) and column (in the n-tile) of accumulator element e of lane `lane`.
GEMMKIT_CONV_HD int small_o_taps_acc_row(int lane, int e) {
  return (lane >> 2) + (e >> 1) * 8;
}
GEMMKIT_CONV_HD int small_o_taps_acc_col(int lane, int e) {
  return (lane & 3) * 2 + (e & 1);
}

// Y entry (region pixel r, column n), in floats from Y's start (column-major).
GEMMKIT_CONV_HD int small_o_taps_y(const SmallOTapsTiling& t, int r, int n) {
  return n * static_cast<int>(t.y_stride) + r;
}

// What the shift-add of tile s needs, in the tile's own int coordinates: the output positions
// inside the output (rows x cols of the tile, from its corner), the region rows [lo_h, hi_h) and
// columns [lo_w, hi_w) that are real input pixels (all of them: `interior`; none on a padding
// plane), and out's element offset of the tile's corner.
struct SmallOTapsShift {
  int rows = 0, cols = 0;
  int lo_h = 0, hi_h = 0, lo_w = 0, hi_w = 0;
  bool interior = false;
  int64_t out_base = 0;
};
GEMMKIT_CONV_HD int64_t small_o_taps_clamp(int64_t v, int64_t hi) {
  return v < 0 ? 0 : (v > hi ? hi : v);
}
GEMMKIT_CONV_HD SmallOTapsShift small_o_taps_shift(const ConvGeometry& g, const SmallOTapsTiling& t,
                                                   const SmallOTapsTile& s) {
  SmallOTapsShift sh;
  sh.rows = static_cast<int>(small_o_taps_clamp(g.out[1] - s.oh0, t.tile_h));
  sh.cols = static_cast<int>(small_o_taps_clamp(g.out[2] - s.ow0, t.tile_w));
  if (s.plane_ok) {
    sh.lo_h = static_cast<int>(small_o_taps_clamp(-s.ih0, t.region_h));
    sh.hi_h = static_cast<int>(small_o_taps_clamp(g.in[1] - s.ih0, t.region_h));
    sh.lo_w = static_cast<int>(small_o_taps_clamp(-s.iw0, t.region_w));
    sh.hi_w = static_cast<int>(small_o_taps_clamp(g.in[2] - s.iw0, t.region_w));
  }
  sh.interior =
      s.plane_ok && sh.lo_h == 0 && sh.hi_h == t.region_h && sh.lo_w == 0 && sh.hi_w == t.region_w;
  sh.out_base = s.n * g.out_stride[0] + s.d0 * g.out_stride[1] + s.oh0 * g.out_stride[2] +
                s.ow0 * g.out_stride[3];
  return sh;
}

// The region pixel r that output (ph, pw) of a tile reads at window tap (t1, t2); false when the
// tap falls on padding or cropped input (skipped, not added as zero).
GEMMKIT_CONV_HD bool small_o_taps_tap(const ConvGeometry& g, const SmallOTapsTiling& t,
                                      const SmallOTapsShift& sh, int ph, int pw, int t1, int t2,
                                      int& r) {
  const int rh = ph * static_cast<int>(g.stride[1]) + t1 * static_cast<int>(g.kdil[1]);
  const int rw = pw * static_cast<int>(g.stride[2]) + t2 * static_cast<int>(g.kdil[2]);
  if (rh < sh.lo_h || rh >= sh.hi_h || rw < sh.lo_w || rw >= sh.hi_w) return false;
  r = rh * static_cast<int>(t.region_w) + rw;
  return true;
}

// Y index of output (ph, pw, oc) at window tap (0, 0) of an interior tile; window tap (t1, t2)
// adds t1 * step1 + t2 * step2: Y(r, tap * o + oc) is linear in (t1, t2), since r = (ph * s1 +
// t1 * d1) * region_w + pw * s2 + t2 * d2 and tap = t1 * k2 + t2 (column stride y_stride).
GEMMKIT_CONV_HD int small_o_taps_y_base(const ConvGeometry& g, const SmallOTapsTiling& t, int ph,
                                        int pw, int oc) {
  const int r = ph * static_cast<int>(g.stride[1]) * static_cast<int>(t.region_w) +
                pw * static_cast<int>(g.stride[2]);
  return small_o_taps_y(t, r, oc);
}

GEMMKIT_CONV_HD void small_o_taps_y_steps(const ConvGeometry& g, const SmallOTapsTiling& t,
                                          int& step1, int& step2) {
  const int o = static_cast<int>(g.o), y_stride = static_cast<int>(t.y_stride);
  step1 = static_cast<int>(g.kdil[1] * t.region_w) + static_cast<int>(g.kernel[2]) * o * y_stride;
  step2 = static_cast<int>(g.kdil[2]) + o * y_stride;
}

// Element offset of output (ph, pw, oc) of a tile in out.
GEMMKIT_CONV_HD int64_t small_o_taps_out_offset(const ConvGeometry& g, const SmallOTapsShift& sh,
                                                int ph, int pw, int oc) {
  return sh.out_base + ph * g.out_stride[2] + pw * g.out_stride[3] + oc * g.out_stride[4];
}

// A warp's step: tile, m-tile, channel group. tile >= t.tiles: no step.
struct SmallOTapsStep {
  int64_t tile = 0;
  int m_tile = 0;
  int group = 0;
};

// The step after `s` for warp `warp` of a grid of `grid` blocks: the next channel group, else the
// warp's next m-tile of the tile, else its first m-tile of the block's next tile. (A warp with
// no m-tile, warp >= m_tiles, has no steps.) The kernel loads the next step's x while it
// multiplies the current one.
GEMMKIT_CONV_HD SmallOTapsStep small_o_taps_next_step(const SmallOTapsTiling& t, int64_t grid,
                                                      int warp, SmallOTapsStep s) {
  if (s.group + 1 < t.channel_groups) {
    ++s.group;
    return s;
  }
  s.group = 0;
  if (s.m_tile + kSmallOTapsWarps < t.m_tiles) {
    s.m_tile += kSmallOTapsWarps;
    return s;
  }
  s.m_tile = warp;
  s.tile += grid;
  return s;
}

// The taps kernel's tile sizes, largest first (both forms' plans take the first that fits their
// limits and makes enough tiles): output positions along dims 1 and 2.
constexpr int64_t kSmallOTapsTileCandidates[][2] = {{16, 32}, {16, 16}, {8, 16}, {8, 8},
                                                    {4, 8},   {2, 8},   {1, 8}};

// Candidate tile h x w for g in c: each side clamped by the output, a clamped side giving its
// area to the other (up to the output); the input region it reads and the tile counts.
inline void small_o_taps_tile_candidate(const ConvGeometry& g, int64_t h, int64_t w,
                                        SmallOTapsTiling& c) {
  c.tile_h = std::min(h, g.out[1]);
  c.tile_w = std::min(w, g.out[2]);
  if (c.tile_h < h) {
    c.tile_w = std::min(g.out[2], h * w / c.tile_h);
  } else if (c.tile_w < w) {
    c.tile_h = std::min(g.out[1], h * w / c.tile_w);
  }
  c.region_h = (c.tile_h - 1) * g.stride[1] + (g.kernel[1] - 1) * g.kdil[1] + 1;
  c.region_w = (c.tile_w - 1) * g.stride[2] + (g.kernel[2] - 1) * g.kdil[2] + 1;
  c.row_tiles = ceil_div(g.out[1], c.tile_h);
  c.col_tiles = ceil_div(g.out[2], c.tile_w);
  c.tiles = g.batch * g.out[0] * c.row_tiles * c.col_tiles;
}

// Plans the taps kernel for `g` (16-bit x read as 16-byte vectors of 8 channels: the caller
// checks dtype, c % 8, alignment and strides) on a device with `multiprocessors` SMs,
// `smem_per_block` bytes of opt-in shared memory per block and `smem_per_sm` per SM. Needs one
// tap along dim 0, no input dilation and taps * o <= 64. Output tiles (tile_h, tile_w), largest
// first: (16, 32), (16, 16), (8, 16), (8, 8), (4, 8), (2, 8), (1, 8); a dim clamped by the
// output's extent gives its area to the other one (1-D: (1, 512), (1, 256), ...). Takes the
// first whose shared memory (B fragments + Y) lets 2 blocks share an SM and that makes at least
// 1.5 tiles per SM, but no tile whose region has fewer m-tiles than warps once one was found
// (smaller tiles would idle warps). Grid: the resident blocks (blocks_per_sm per SM), reduced so
// that every block takes tiles_per_block or tiles_per_block - 1 tiles. Fills `t` (active) and
// returns "", or returns why not.
inline std::string plan_small_o_taps(const ConvGeometry& g, int64_t multiprocessors,
                                     int64_t smem_per_block, int64_t smem_per_sm,
                                     SmallOTapsTiling& t) {
  t = SmallOTapsTiling{};
  if (g.kernel[0] != 1) return "more than one kernel tap along the first of 3 spatial dims";
  for (int d = 0; d < kDims; ++d) {
    if (g.idil[d] != 1) return "input dilation";
  }
  t.n_cols = g.kernel_positions() * g.o;
  if (t.n_cols > kSmallOTapsMaxCols) {
    return "taps * o = " + std::to_string(t.n_cols) + " > " + std::to_string(kSmallOTapsMaxCols);
  }
  t.n_tiles = t.n_cols <= 32 ? 4 : 8;
  t.chunks = ceil_div(g.c, kSmallOTapsChunk);
  t.channel_groups = ceil_div(t.chunks, kSmallOTapsGroupChunks);
  t.weight_bytes = t.chunks * t.n_tiles * kSmallOTapsChunkBytes;
  const int64_t limit = std::min(smem_per_block, smem_per_sm / 2 - kSmallOTapsSmemReserve);
  bool found = false;
  SmallOTapsTiling best = t;
  for (const auto& cand : kSmallOTapsTileCandidates) {
    SmallOTapsTiling c = t;
    small_o_taps_tile_candidate(g, cand[0], cand[1], c);
    if (c.region_h > limit || c.region_w > limit) continue;  // (their product could overflow)
    // Region offsets are int32 (small_o_taps_region_offset).
    if ((c.region_h - 1) * g.x_stride[2] + (c.region_w - 1) * g.x_stride[3] + g.c > kMaxInt32) {
      continue;
    }
    c.m_tiles = ceil_div(c.region(), kSmallOTapsMRows);
    c.y_stride = small_o_taps_y_stride(c.y_rows());
    c.y_bytes = c.n_tiles * 8 * c.y_stride * 4;
    c.pixel_bytes = c.y_rows() * 4;
    if (c.smem_bytes() > limit) continue;
    if (found && c.m_tiles < kSmallOTapsWarps) break;
    best = c;
    found = true;
    if (2 * c.tiles >= 3 * multiprocessors) break;
  }
  if (!found) {
    return "the B fragments (" + std::to_string(t.weight_bytes) +
           " bytes) and the smallest tile's Y do not fit in " + std::to_string(limit) +
           " bytes of shared memory (2 blocks per SM), or x's region offsets pass 2^31";
  }
  t = best;
  t.active = true;
  t.blocks_per_sm = std::min<int64_t>(kSmallOTapsMinBlocks,
                                      smem_per_sm / (t.smem_bytes() + kSmallOTapsSmemReserve));
  const int64_t resident =
      std::min(kMaxGridX, std::max<int64_t>(1, multiprocessors) * t.blocks_per_sm);
  t.tiles_per_block = ceil_div(t.tiles, resident);
  t.grid = ceil_div(t.tiles, t.tiles_per_block);
  return "";
}

// The TMA-fed taps kernel (conv_small_o_taps_tma.cuh): one block per SM of kSmallOTapsWarps
// consumer warps and one producer warp whose lane 0 streams each tile's region, one 32-channel
// chunk at a time, into a ring of `tma_stages` stages (one TMA box of region_w x region_h pixels
// x 32 channels each; padding and channels >= c read as zeros), across tiles, so that the loads
// stay in flight through the shift-add. A consumer warp takes the m-tiles warp, warp + 8, ... of
// every chunk (at most kSmallOTapsTmaWarpMTiles, accumulators in registers), its MMAs in the
// register form's order (per m-tile: chunks ascending, each k-step lo then hi), so both forms
// return the same bits.
constexpr int kSmallOTapsTmaThreads = kSmallOTapsThreads + 32;
// Auto takes the TMA form from this many tiles per block (1 block per SM) on, else the register
// form (2 blocks per SM). H200, VAE conv_out: 2 tiles (256^2) 16.1 us against 12.2; 16 (1024^2)
// 130.7 against 142.7; 63 (2048^2) 417.8 against 547.4.
constexpr int64_t kSmallOTapsTmaMinTilesPerBlock = 8;
constexpr int kSmallOTapsTmaWarpMTiles = 5;
constexpr int kSmallOTapsTmaMaxBox = 256;  // TMA box extent per dim

// Plans the TMA form for `g` on a device with `multiprocessors` SMs and `smem_per_block` bytes of
// opt-in shared memory, as plan_small_o_taps but with 1 block per SM: the largest tile of
// plan_small_o_taps's list whose region has at most 8 * kSmallOTapsTmaWarpMTiles m-tiles and
// extents <= 256 and whose B fragments, Y and a ring of 3 (else 2) stages fit, making at least
// 1.5 tiles per SM when one does. x's extents, the batch and the box coordinates must fit TMA's
// int32 coordinates, and its strides (bytes) be multiples of 16 (the caller's 16-byte rule).
// Needs taps * o <= 32 (4 n-tiles).
inline std::string plan_small_o_taps_tma(const ConvGeometry& g, int64_t multiprocessors,
                                         int64_t smem_per_block, SmallOTapsTiling& t) {
  SmallOTapsTiling base;
  const std::string why = plan_small_o_taps(g, multiprocessors, smem_per_block,
                                            2 * (smem_per_block + kSmallOTapsSmemReserve), base);
  if (!why.empty()) return why;
  if (base.n_tiles != 4) return "taps * o > 32 (the TMA form keeps 4 n-tiles of accumulators)";
  for (int d = 0; d < kDims; ++d) {
    if (g.in[d] >= kMaxInt32) return "an input extent >= 2^31 (TMA coordinates)";
  }
  if (g.batch >= kMaxInt32 || g.c >= kMaxInt32) return "batch or channels >= 2^31";
  for (int d = 0; d < 4; ++d) {
    if (g.x_stride[d] * 2 >= (int64_t{1} << 40)) return "an x stride of 2^40 bytes or more (TMA)";
  }
  bool found = false;
  SmallOTapsTiling best = base;
  for (const auto& cand : kSmallOTapsTileCandidates) {
    SmallOTapsTiling c = base;
    small_o_taps_tile_candidate(g, cand[0], cand[1], c);
    if (c.region_h > kSmallOTapsTmaMaxBox || c.region_w > kSmallOTapsTmaMaxBox) continue;
    c.m_tiles = ceil_div(c.region(), kSmallOTapsMRows);
    if (c.m_tiles > kSmallOTapsWarps * kSmallOTapsTmaWarpMTiles) continue;
    c.y_stride = small_o_taps_y_stride(c.y_rows());
    c.y_bytes = c.n_tiles * 8 * c.y_stride * 4;
    c.pixel_bytes = 0;
    // A stage: every m-tile row (the m-tail rows are read, never used), 128-byte aligned.
    c.stage_bytes = ceil_div(c.y_rows() * kSmallOTapsChunk * 2, 128) * 128;
    c.tma_stages = 0;
    for (int stages : {3, 2}) {
      SmallOTapsTiling s = c;
      s.tma_stages = stages;
      if (s.smem_bytes() <= smem_per_block) {
        c.tma_stages = stages;
        break;
      }
    }
    if (c.tma_stages == 0) continue;
    if (found && c.m_tiles < kSmallOTapsWarps) break;
    best = c;
    found = true;
    if (2 * c.tiles >= 3 * multiprocessors) break;
  }
  if (!found) return "no tile's B fragments, Y and a ring of 2 region chunks fit";
  t = best;
  t.active = true;
  t.blocks_per_sm = 1;
  const int64_t resident = std::min(kMaxGridX, std::max<int64_t>(1, multiprocessors));
  t.tiles_per_block = ceil_div(t.tiles, resident);
  t.grid = ceil_div(t.tiles, t.tiles_per_block);
  return "";
}

// The TMA form's view of x: a 5-D tensor of 16-bit elements (c, in[2], in[1], in[0], batch),
// innermost first, with byte strides of dims 1..4 (a dim of extent 1 is never stepped and gets
// the packed stride, which TMA accepts whatever x's), loaded in boxes of (32, region_w,
// region_h, 1, 1).
struct SmallOTapsTmaMap {
  int64_t dims[5] = {};
  int64_t byte_strides[4] = {};
  int box[5] = {};
};
inline SmallOTapsTmaMap small_o_taps_tma_map(const ConvGeometry& g, const SmallOTapsTiling& t) {
  SmallOTapsTmaMap m;
  const int64_t dims[5] = {g.c, g.in[2], g.in[1], g.in[0], g.batch};
  int64_t span = g.c * 2;
  for (int d = 0; d < 5; ++d) m.dims[d] = dims[d];
  for (int d = 1; d < 5; ++d) {
    const int64_t stride = g.x_stride[4 - d] * 2;
    m.byte_strides[d - 1] = dims[d] > 1 ? stride : ceil_div(span, 16) * 16;
    span = m.byte_strides[d - 1] * dims[d];
  }
  m.box[0] = kSmallOTapsChunk;
  m.box[1] = static_cast<int>(t.region_w);
  m.box[2] = static_cast<int>(t.region_h);
  m.box[3] = 1;
  m.box[4] = 1;
  return m;
}

// The box coordinates (innermost first) of tile s's region, channels chunk * 32 ..: region
// pixel (0, 0) of plane (n, dim-0 input index); a plane on padding gets dim-0 coordinate -1, so
// the whole box reads zeros.
GEMMKIT_CONV_HD void small_o_taps_tma_coords(const SmallOTapsTile& s, int chunk,
                                             int32_t (&coords)[5]) {
  coords[0] = chunk * kSmallOTapsChunk;
  coords[1] = static_cast<int32_t>(s.iw0);
  coords[2] = static_cast<int32_t>(s.ih0);
  coords[3] = static_cast<int32_t>(s.i0);
  coords[4] = static_cast<int32_t>(s.n);
}

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
