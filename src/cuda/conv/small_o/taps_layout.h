// Work decomposition and index arithmetic of the tap-GEMM small-o kernel (taps.cuh) and its
// TMA-fed form (taps_tma.cuh). Pure and header-only; GEMMKIT_CONV_HD functions compile for the
// device too.
#pragma once

#include <cstdint>

#include "cuda/conv/common/geometry.h"
#include "cuda/conv/small_o/layout.h"

namespace gemmkit::cuda::conv_impl {

// Tap-GEMM small-o kernel (taps.cuh): a 1x1 GEMM of a block's input region by every
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
  // The TMA-fed form (taps_tma.cuh; plan_small_o_taps_tma): 0 for the register
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

// The TMA-fed taps kernel (taps_tma.cuh): one block per SM of kSmallOTapsWarps
// consumer warps and one producer warp whose lane 0 streams each tile's region, one 32-channel
// chunk at a time, into a ring of `tma_stages` stages (one TMA box of region_w x region_h pixels
// x 32 channels each; padding and channels >= c read as zeros), across tiles, so that the loads
// stay in flight through the shift-add. A consumer warp takes the m-tiles warp, warp + 8, ... of
// every chunk (at most kSmallOTapsTmaWarpMTiles, accumulators in registers), its MMAs in the
// register form's order (per m-tile: chunks ascending, each k-step lo then hi), so both forms
// return the same bits.
constexpr int kSmallOTapsTmaThreads = kSmallOTapsThreads + 32;
// Auto takes the TMA form from this many tiles per block (1 block per SM) on, else the register
// form (2 blocks per SM): the VAE conv_out rows of docs/perf.md put the crossover between 2 and 16
// tiles per block.
constexpr int64_t kSmallOTapsTmaMinTilesPerBlock = 8;
constexpr int kSmallOTapsTmaWarpMTiles = 5;
constexpr int kSmallOTapsTmaMaxBox = 256;  // TMA box extent per dim

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

}  // namespace gemmkit::cuda::conv_impl
