// Work decomposition and index arithmetic of the small-c kernel (small_c.cuh): an implicit GEMM
// whose K packs every tap's few input channels, for stems such as ResNet's 7x7 / stride-2 conv
// over RGB or a VAE encoder's conv_in (c = 3). Pure and header-only; GEMMKIT_CONV_HD functions
// compile for the device too, and the host tests emulate the kernel through them.
//
// GEMM view (per group; groups == 1 for c <= 8, or c/groups == 8): M = output positions, N =
// o/groups, K = taps * c_pad with c_pad = c/groups rounded up to even, k = weight_tap * c_pad + ci
// (weight taps row-major; channels c .. c_pad - 1 are zeros),
//   A[m][k] = x at position m, the window tap that weight tap k / c_pad multiplies (flipped in
//             every dim when flip), channel k % c_pad (zero on padding, cropped input or ci >= c),
//   B[k][n] = weight[n][k / c_pad][k % c_pad] (zero for ci >= c),
//   out[m][n] = round(sum over the k16 steps, ascending, of the step's MMA + bias[n]).
// K is padded to whole k16 steps with zeros (A's padded pairs are zero in registers).
//
// A block owns a tile of tile_h x tile_w output positions of one plane (n, d0) and tile_n() output
// channels (a column block), and stages the input region the tile reads, region_d x region_h x
// region_w pixels ((tile - 1) * stride + (kernel - 1) * dilation + 1 per dim; tile 1 along dim 0)
// of c_pad channels, in shared memory; A fragments are gathered from it through two tables that
// do not change from tile to tile: a row base per tile position and an offset per k pair.
#pragma once

#include <cstdint>

#include "cuda/conv/common/geometry.h"

namespace gemmkit::cuda::conv_impl {

constexpr int kSmallCThreads = 256;
constexpr int kSmallCWarps = kSmallCThreads / 32;
constexpr int kSmallCWarpM = 32;      // a warp's tile: 2 m16 tiles ...
constexpr int kSmallCWarpN = 32;      // ... by 4 n8 tiles of mma.sync m16n8k16
constexpr int kSmallCMaxC = 8;        // channels the path serves
constexpr int kSmallCMaxKSteps = 32;  // K <= 512: taps * c_pad, e.g. 11 x 11 x 4
constexpr int kSmallCMaxKPairs = kSmallCMaxKSteps * 8;
constexpr int kSmallCMaxRegionPixels = 4096;  // staged input pixels per tile
constexpr int kSmallCMaxRegionDepth = 256;    // region planes along dim 0 (packed in 8 bits)
constexpr int64_t kSmallCMaxCoord = int64_t{1} << 30;  // spatial extents (32-bit coordinates)
// Rounds of region pixels (one per thread each) that a thread loads into registers one tile ahead,
// and weight words whose loads a thread issues together when it stages a column block.
constexpr int kSmallCHeldRounds = 4;
constexpr int kSmallCWeightBatch = 8;
// __launch_bounds__ minimum blocks per SM (registers <= 128 per thread).
constexpr int kSmallCMinBlocks = 2;

struct SmallCPlan {
  bool active = false;
  int warps_n = 1;  // warps along N: 1, 2 or 4 (a kernel template); warps along M: 8 / warps_n
  int c_pad = 2;    // c rounded up to even: a k pair never spans two taps
  int taps = 1;     // kernel positions
  int k_pairs = 1;  // taps * c_pad / 2: the k pairs that hold data
  int k_steps = 1;  // ceil(taps * c_pad / 16)
  int b_words =
      12;  // 32-bit words per staged weight row: 8 k_steps + 4 (ldmatrix without conflicts)
  int tile_h = 1, tile_w = 1;                    // output positions of a tile (dims 1 and 2)
  int region_d = 1, region_h = 1, region_w = 1;  // input pixels the tile reads
  int64_t row_tiles = 1, col_tiles = 1;          // tiles per plane along dims 1 and 2
  int64_t spatial_tiles = 1;                     // batch * out[0] * row_tiles * col_tiles
  int64_t col_blocks = 1;                        // ceil(o / tile_n())
  int64_t tiles = 1;                             // col_blocks * spatial_tiles
  int64_t grid = 1;                              // persistent blocks (tile b, b + grid, ...)
  int64_t blocks_per_sm = 1;
  bool vector_out = false;  // 16-byte stores of out (unit channel stride, aligned positions)
  // Groups (groups > 1: c/groups == 8, o/groups a multiple of 8 dividing tile_n()): a column block
  // holds groups_per_block whole groups, whose 8 input channels each a staged pixel holds side by
  // side (16 bytes per group, copied by cp.async); an n8 tile's A fragments read its group's.
  bool grouped = false;
  int opg = 1;               // output channels per group
  int groups_per_block = 1;  // tile_n() / opg (1 without groups)
  int pixel_stride = 1;      // 32-bit words per staged pixel: c_pad / 2, or 4 per group + 4
  // Shared memory, in this order, each part a multiple of 16 bytes: the region (16-bit), the
  // weight block (tile_n() rows of b_words), the output tile (out's dtype, rows of
  // c_row_bytes), the row bases, the k-pair offsets, the weight offsets of k within a row
  // (2 b_words entries) and, with groups, the region pixels' packed coordinates (int32).
  int64_t region_bytes = 0, b_bytes = 0, c_bytes = 0, c_row_bytes = 0, table_bytes = 0;
  int64_t region_buffer_bytes = 0;  // one region (two buffers of it with groups)
  int64_t smem_bytes = 0;
  double tile_efficiency = 0;  // useful share of the tiles' MMA work (M, N, K tails)

  GEMMKIT_CONV_HD int tile_m() const { return kSmallCWarpM * (kSmallCWarps / warps_n); }
  GEMMKIT_CONV_HD int tile_n() const { return kSmallCWarpN * warps_n; }
  GEMMKIT_CONV_HD int region_pixels() const { return region_d * region_h * region_w; }
  GEMMKIT_CONV_HD int pixel_words() const { return c_pad / 2; }  // of one group
};

// The first group whose channels column block `col_block` stages (0 without groups: every column
// block reads the one group).
GEMMKIT_CONV_HD int64_t small_c_block_group0(const SmallCPlan& t, int col_block) {
  return t.grouped ? int64_t{col_block} * t.groups_per_block : 0;
}

// The region word of tile column n's group within a staged pixel (0 without groups).
GEMMKIT_CONV_HD int small_c_group_word(const SmallCPlan& t, int n) {
  return t.grouped ? n / t.opg * t.pixel_words() : 0;
}

// Region extent along a dim for `tile` outputs: (tile - 1) * stride + (kernel - 1) * dilation + 1.
GEMMKIT_CONV_HD int64_t small_c_region_extent(const ConvGeometry& g, int d, int64_t tile) {
  return (tile - 1) * g.stride[d] + (g.kernel[d] - 1) * g.kdil[d] + 1;
}

// The tile numbered `tile`: column block, first output row and column, the input coordinates of
// region pixel (0, 0, 0) (may lie on padding), and x's and out's offsets of the tile. Tiles run
// column block outermost, then (plane * row_tiles + row_tile) * col_tiles + col_tile. The plan
// keeps coordinates and column blocks below 2^30 (int32 here; offsets int64).
struct SmallCTile {
  int col_block = 0, oh0 = 0, ow0 = 0;
  int iz0 = 0, ih0 = 0, iw0 = 0;
  int64_t x_base = 0;    // x's offset of region pixel (0, 0, 0) (only real pixels are read)
  int64_t out_base = 0;  // out's offset of the tile's first position, channel 0
};

GEMMKIT_CONV_HD SmallCTile small_c_tile(const ConvGeometry& g, const SmallCPlan& t, int64_t tile) {
  SmallCTile s;
  const int64_t col_block = div_nonneg(tile, t.spatial_tiles);
  const int64_t spatial = tile - col_block * t.spatial_tiles;
  const int64_t q = div_nonneg(spatial, t.col_tiles);
  const int64_t ow0 = (spatial - q * t.col_tiles) * t.tile_w;
  const int64_t plane = div_nonneg(q, t.row_tiles);
  const int64_t oh0 = (q - plane * t.row_tiles) * t.tile_h;
  const int64_t n = div_nonneg(plane, g.out[0]);
  const int64_t d0 = plane - n * g.out[0];
  const int64_t iz0 = d0 * g.stride[0] - g.pad_lo[0];
  const int64_t ih0 = oh0 * g.stride[1] - g.pad_lo[1];
  const int64_t iw0 = ow0 * g.stride[2] - g.pad_lo[2];
  s.col_block = static_cast<int>(col_block);
  s.oh0 = static_cast<int>(oh0);
  s.ow0 = static_cast<int>(ow0);
  s.iz0 = static_cast<int>(iz0);
  s.ih0 = static_cast<int>(ih0);
  s.iw0 = static_cast<int>(iw0);
  s.x_base = n * g.x_stride[0] + iz0 * g.x_stride[1] + ih0 * g.x_stride[2] + iw0 * g.x_stride[3];
  s.out_base =
      n * g.out_stride[0] + d0 * g.out_stride[1] + oh0 * g.out_stride[2] + ow0 * g.out_stride[3];
  return s;
}

// Region pixel r's coordinates (rz, ry, rx) in the region, packed (rz << 24) | (ry << 12) | rx
// (the plan keeps region_d < 256 and region_h, region_w < 4096); the same for every tile, so the
// kernel decodes its pixels once.
struct SmallCPixel {
  int packed = 0;
  GEMMKIT_CONV_HD int z() const { return packed >> 24; }
  GEMMKIT_CONV_HD int y() const { return (packed >> 12) & 0xFFF; }
  GEMMKIT_CONV_HD int x() const { return packed & 0xFFF; }
};
GEMMKIT_CONV_HD SmallCPixel small_c_pixel(const SmallCPlan& t, int r) {
  const int row = r / t.region_w;
  const int x = r - row * t.region_w;
  const int z = row / t.region_h;
  const int y = row - z * t.region_h;
  SmallCPixel q;  // (unsigned: r past the region, which no load reads, may not fit 8 bits of z)
  q.packed = static_cast<int>((static_cast<uint32_t>(z) << 24) | (static_cast<uint32_t>(y) << 12) |
                              static_cast<uint32_t>(x));
  return q;
}

// Region pixel q of tile s: false where it lies outside x (staged as zeros), else the element
// offset of its channel 0 in x (64-bit).
GEMMKIT_CONV_HD bool small_c_pixel_offset(const ConvGeometry& g, const SmallCTile& s,
                                          const SmallCPixel& q, int64_t& offset) {
  const int z = q.z(), y = q.y(), x = q.x();
  // (Unsigned: a coordinate below 0 compares as past the extent; extents < 2^30 by the plan.)
  const uint32_t iz = static_cast<uint32_t>(s.iz0 + z), ih = static_cast<uint32_t>(s.ih0 + y),
                 iw = static_cast<uint32_t>(s.iw0 + x);
  if (iz >= static_cast<uint32_t>(g.in[0]) || ih >= static_cast<uint32_t>(g.in[1]) ||
      iw >= static_cast<uint32_t>(g.in[2])) {
    return false;
  }
  offset = s.x_base + z * g.x_stride[1] + y * g.x_stride[2] + x * g.x_stride[3];
  return true;
}

// Region pixel r (row-major over region_d x region_h x region_w) of tile s: small_c_pixel_offset
// of its coordinates.
GEMMKIT_CONV_HD bool small_c_region_pixel(const ConvGeometry& g, const SmallCPlan& t,
                                          const SmallCTile& s, int r, int64_t& offset) {
  return small_c_pixel_offset(g, s, small_c_pixel(t, r), offset);
}

// The region word (32-bit: a channel pair) of tile position m's window origin: position (m /
// tile_w, m % tile_w) reads region pixel (0, ph * stride1, pw * stride2) at window tap (0, 0, 0).
GEMMKIT_CONV_HD int small_c_row_base(const ConvGeometry& g, const SmallCPlan& t, int m) {
  const int ph = m / t.tile_w, pw = m - ph * t.tile_w;
  return (ph * static_cast<int>(g.stride[1]) * t.region_w + pw * static_cast<int>(g.stride[2])) *
         t.pixel_stride;
}

// The region word offset (from a row base) of k pair kp (k = 2 kp, 2 kp + 1: one tap, channels
// ci, ci + 1), or -1 for the K padding (kp >= k_pairs), which A takes as zeros. Weight tap
// k / c_pad multiplies window tap weight_tap(...) in each dim (flip).
GEMMKIT_CONV_HD int small_c_k_pair_offset(const ConvGeometry& g, const SmallCPlan& t, int kp) {
  if (kp >= t.k_pairs) return -1;
  const int k = 2 * kp;
  const int tap = k / t.c_pad, ci = k - tap * t.c_pad;
  const int k1 = static_cast<int>(g.kernel[1]), k2 = static_cast<int>(g.kernel[2]);
  const int w0 = tap / (k1 * k2);
  const int rest = tap - w0 * k1 * k2;
  const int w1 = rest / k2, w2 = rest - w1 * k2;
  const int z = static_cast<int>(weight_tap(g, 0, w0) * g.kdil[0]);
  const int y = static_cast<int>(weight_tap(g, 1, w1) * g.kdil[1]);
  const int x = static_cast<int>(weight_tap(g, 2, w2) * g.kdil[2]);
  return ((z * t.region_h + y) * t.region_w + x) * t.pixel_stride + ci / 2;
}

// Weight element of staged row n (output channel oc) at k: false for channels ci >= c/groups
// (zeros), else its offset in the weight. k < taps * c_pad.
GEMMKIT_CONV_HD bool small_c_weight(const ConvGeometry& g, const SmallCPlan& t, int64_t oc, int k,
                                    int64_t& offset) {
  const int tap = k / t.c_pad, ci = k - tap * t.c_pad;
  if (ci >= g.cpg) return false;
  const int k1 = static_cast<int>(g.kernel[1]), k2 = static_cast<int>(g.kernel[2]);
  const int w0 = tap / (k1 * k2);
  const int rest = tap - w0 * k1 * k2;
  const int w1 = rest / k2, w2 = rest - w1 * k2;
  offset = oc * g.w_stride[0] + w0 * g.w_stride[1] + w1 * g.w_stride[2] + w2 * g.w_stride[3] +
           ci * g.w_stride[4];
  return true;
}

// Fragment rows and columns (PTX mma.m16n8k16 .row.col; lane = 4 q + k4):
//   A: reg 0 (row q, k pair k4), 1 (row q + 8, pair k4), 2 (row q, pair k4 + 4), 3 (row q + 8,
//      pair k4 + 4) of the k16 step; D: element e at (row q + 8 (e / 2), column 2 k4 + e % 2).
// Warp w owns tile rows (w / warps_n) * 32 .. + 31 and columns (w % warps_n) * 32 .. + 31.

// Output element (tile position m, tile column n) of tile s: false outside out (M and N tails),
// else its offset in out.
// Tile position m as (row, column) in the tile, packed (row << 16) | column (tile sides < 2^15).
GEMMKIT_CONV_HD int small_c_position(const SmallCPlan& t, int m) {
  const int ph = m / t.tile_w;
  return (ph << 16) | (m - ph * t.tile_w);
}
GEMMKIT_CONV_HD bool small_c_out_offset_at(const ConvGeometry& g, const SmallCPlan& t,
                                           const SmallCTile& s, int position, int n,
                                           int64_t& offset) {
  const int ph = position >> 16, pw = position & 0xFFFF;
  const int64_t oc = int64_t{s.col_block} * t.tile_n() + n;
  if (s.oh0 + ph >= g.out[1] || s.ow0 + pw >= g.out[2] || oc >= g.o) return false;
  offset = s.out_base + ph * g.out_stride[2] + pw * g.out_stride[3] + oc * g.out_stride[4];
  return true;
}
GEMMKIT_CONV_HD bool small_c_out_offset(const ConvGeometry& g, const SmallCPlan& t,
                                        const SmallCTile& s, int m, int n, int64_t& offset) {
  return small_c_out_offset_at(g, t, s, small_c_position(t, m), n, offset);
}

}  // namespace gemmkit::cuda::conv_impl
