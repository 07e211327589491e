// Work decomposition and index arithmetic of the depthwise kernels (depthwise.cuh, blocked.cuh,
// staged.cuh, mma.cuh): the variants, the tiling, and the index math the kernels and the host
// tests share. Pure and header-only; GEMMKIT_CONV_HD functions compile for the device too.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "cuda/conv/common/geometry.h"
#include "cuda/conv/common/names.h"

namespace gemmkit::cuda::conv_impl {

// Depthwise kernel work decomposition (depthwise.cuh). A thread computes `vector` consecutive
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
//   generic            any stride / dilation / multiplier; per-(output, tap) loads; th = 1
//   narrow             last dim: stride 1 or 2, no dilation, kernel <= 4 (causal conv1d); th = 1
//   wide               last dim: stride 1 or 2, no dilation, kernel <= 8; th = 1
//   blocked            2-D and 3-D: kernel width 3, 5 or 7, stride 1 or 2 along the last dim,
//                      no dilation along the last two dims (dim 0: anything); th x run register
//                      tile, 32-bit offsets inside a plane (depthwise_blocked_offsets_fit)
//   staged             2-D (one tap along dim 0), square 3x3 / 5x5 / 7x7 kernels, stride 1, no
//                      dilation along the last two dims, multiplier 1, 16-bit x in 16-byte channel
//                      octets: each block's input window staged by cp.async (zeros outside x),
//                      2 x 7 outputs x 2 channels per thread (staged.cuh)
//   mma                2-D (one tap along dim 0), kernels up to 9 x 9, stride 1, no dilation
//                      along the last two dims, multiplier 1, 16-bit x and out of one type:
//                      Toeplitz MMAs per channel and kernel row (mma.cuh); th =
//                      kDepthwiseMmaRows, run = 8, 16 or 32 columns per tile
// The narrow / wide window variants need multiplier 1 and x suited to `vector`-element loads;
// they keep one kernel row of weights in registers and stream the row's input window once. The
// blocked variant takes any multiplier (vector 1 then) and is the one for every 2-D layer.
enum class DepthwiseVariant : int {
  generic = 0,
  narrow = 1,
  wide = 2,
  blocked = 3,
  staged = 4,
  mma = 5,
};

inline constexpr const char* kDepthwiseVariantNames[] = {"generic", "narrow", "wide",
                                                         "blocked", "staged", "mma"};
inline const char* depthwise_variant_name(DepthwiseVariant variant) {
  return enum_name(variant, kDepthwiseVariantNames);
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
  DepthwiseVariant variant = DepthwiseVariant::generic;
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

// ---- Staged depthwise variant (staged.cuh) --------------------------------------
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

// ---- Tensor-core depthwise variant (mma.cuh) ----------------------------------
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

// Whether a window variant's 32-bit offsets fit (staged, tensor-core): inside a plane of x (and
// of out, with out_too) and inside the weight every offset is below 2^31, and window coordinates
// up to `margin` past a plane (a tile plus the padding) stay below 2^30.
inline bool depthwise_window_offsets_fit(const ConvGeometry& g, bool out_too, int64_t margin) {
  // The largest offset inside one plane of a tensor with these extents and strides, + c.
  const auto plane_span = [&](const int64_t* extent, const int64_t* stride) {
    return static_cast<double>(extent[1] - 1) * static_cast<double>(std::abs(stride[2])) +
           static_cast<double>(extent[2] - 1) * static_cast<double>(std::abs(stride[3])) +
           static_cast<double>(g.c);
  };
  const double w_span =
      static_cast<double>(g.o - 1) * static_cast<double>(std::abs(g.w_stride[0])) +
      static_cast<double>(g.kernel[1] - 1) * static_cast<double>(std::abs(g.w_stride[2])) +
      static_cast<double>(g.kernel[2] - 1) * static_cast<double>(std::abs(g.w_stride[3]));
  const auto reach = [&](int d) { return g.in[d] + g.out[d] + std::abs(g.pad_lo[d]) + margin; };
  constexpr double kLimit = static_cast<double>(kMaxInt32);
  return plane_span(g.in, g.x_stride) < kLimit &&
         (!out_too || plane_span(g.out, g.out_stride) < kLimit) && w_span < kLimit &&
         reach(1) <= kMaxInt32 / 2 && reach(2) <= kMaxInt32 / 2;
}

}  // namespace gemmkit::cuda::conv_impl
