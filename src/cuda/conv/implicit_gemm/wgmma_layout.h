// Tile constants, the launch plan (ImplicitWgmmaPlan), the stride phases' geometry and the index
// helpers of the Hopper implicit-GEMM convolution kernel (wgmma.cuh). The plan is filled by
// implicit_wgmma_plan (wgmma_plan.h) and held in ConvConfig from selection to the launch. The
// GEMMKIT_CONV_HD helpers are the ones the kernel calls, so the host tests that emulate its TMA
// boxes and MMAs exercise the device's index arithmetic. Pure and header-only.
//
// GEMM view, per group g: M = the group's output channels (weight rows: the MMA's M side, block_o
// per tile), N = output positions (a tile is a box of tile_w x tile_h x tile_d positions of one
// image, kBN in all), K = taps x channel blocks of block_c = 64 or 32 (zero-filled past
// c / groups), in the k block order of WgmmaConvKPlace (wgmma_k_order.h): per tap along d and h,
// per 64-channel group, the taps along w, each over the group's blocks. Both operands reach shared
// memory as TMA boxes of the tensors themselves, 5-D maps innermost first:
//   x:      (c, w, h, d, n), box (block_c, tile_w * stride_w, tile_h * stride_h,
//           tile_d * stride_d, 1) with traversal strides (1, stride_w, stride_h, stride_d, 1), so
//           that the box holds exactly the inputs one tap reads for the tile's positions, one
//           swizzled row (128 or 64 bytes) per position; padding and cropping are out-of-bounds (or
//           in-bounds) box coordinates, read as zeros by TMA;
//   weight: (c / groups, kw, kh, kd, o), box (block_c, 1, 1, 1, block_o).
// A tile's two consumer warpgroups split it by channels (block_o 128: 64 channels each, over all
// kBN positions) or, in the narrow-o form (block_o 64: for o / groups <= 64, where half of a
// 128-channel tile's MMAs would multiply zero rows, and where the plan's cost model prefers more,
// smaller tiles), by positions (both on the tile's 64 channels, each on kBN / 2 of its
// positions); implicit_wgmma_consumer_part says which.
//
// Transposed convolutions (input dilation s, stride 1) run as stride phases, up to 4 per launch:
// the outputs q = ph + s * u of phase ph (per dim) read only the taps t with ph + t * kdil - pad_lo
// a multiple of s, an arithmetic progression t0 + j * (s / g) (g = gcd(kdil, s)), and those read
// input u + (ph + t0 * kdil - pad_lo) / s + j * (kdil / g): a dense stride-1 convolution of x with
// that tap subset, whose outputs land every s-th position of out. The plan of a phase holds it in
// those terms (kernel = the phase's taps, pad_lo and kdil of x's steps, the weight tap of step j at
// w_first + j * w_step, out's strides times s from out_base), so no input-dilation zero is loaded
// or multiplied.
#pragma once

#include <cstdint>

#include "cuda/conv/common/geometry.h"

namespace gemmkit::cuda::conv_impl {

constexpr int kWgmmaConvBlockO = 128;  // output channels per tile: two consumer warpgroups of 64
constexpr int kWgmmaConvNarrowBlockO = 64;  // the narrow-o form's: both warpgroups on 64 channels
constexpr int kWgmmaConvBlockK = 64;        // channels per k block: one 128-byte swizzled row
constexpr int kWgmmaConvHalfBlockK = 32;    // or 32 in one 64-byte swizzled row (plan.block_c)
constexpr int kWgmmaConvThreads = 384;      // one producer and two consumer warpgroups
// TMA limits the plan respects: box extents, traversal strides.
constexpr int kWgmmaConvMaxBox = 256;
constexpr int kWgmmaConvMaxStride = 8;

// The epilogue through TMA stores (16-bit out): each consumer warpgroup stages its 64 channels of
// kWgmmaConvStoreChunk positions at a time in one of two 128-byte-swizzled buffers (a position per
// 128-byte row) and stores the chunk as one box of the out map.
constexpr int kWgmmaConvStoreChunk = 64;
constexpr int kWgmmaConvChunkBytes = kWgmmaConvStoreChunk * 64 * 2;
constexpr int64_t kWgmmaConvStagingBytes = int64_t{2} * 2 * kWgmmaConvChunkBytes;

// Shared memory of a (kBN, stages) instance: 1024 bytes of alignment slack, the stages (room for a
// weight box of 128 x 64, of which the narrow-o form fills 64 rows, and the activation box
// kBN x 64, 16-bit), the store staging where the epilogue stores by
// TMA, then full and empty mbarriers per stage and the two order mbarriers of the ping-pong
// schedule.
constexpr int64_t implicit_wgmma_stage_bytes(int block_n) {
  return int64_t{kWgmmaConvBlockO + block_n} * kWgmmaConvBlockK * 2;
}
constexpr int64_t implicit_wgmma_smem_bytes(int block_n, int stages, bool tma_store) {
  return 1024 + stages * implicit_wgmma_stage_bytes(block_n) +
         (tma_store ? kWgmmaConvStagingBytes : 0) + 2 * int64_t{stages + 1} * 8;
}
// The stages each instance is built with (the shared memory of one CTA per SM).
constexpr int implicit_wgmma_stages(int block_n) {
  return block_n == 256 ? 4 : 6;
}

// The halo form (wgmma_halo.cuh; ImplicitWgmmaPlan::halo): a stage holds one channel block of the
// input row the three taps along w of one (d, h) tap read for a tile of 256 positions along w
// (256 + 2 * kdil_w rows, room for kWgmmaConvHaloRows) and the three taps' weight boxes; each tap's
// MMAs read the row from its own first position (a descriptor kdil_w rows further per tap). So a
// stage of three k blocks loads 256 + 2 * kdil_w activation rows where the other forms load
// 3 * 256.
constexpr int kWgmmaConvHaloTapsW = 3;
constexpr int kWgmmaConvHaloRows = 264;  // 256 + 2 * kdil_w for kdil_w <= 4
constexpr int kWgmmaConvHaloStages = 2;
constexpr int64_t implicit_wgmma_halo_stage_bytes() {
  return int64_t{kWgmmaConvHaloTapsW * kWgmmaConvBlockO + kWgmmaConvHaloRows} * kWgmmaConvBlockK *
         2;
}
constexpr int64_t implicit_wgmma_halo_smem_bytes() {
  return 1024 + kWgmmaConvHaloStages * implicit_wgmma_halo_stage_bytes() + kWgmmaConvStagingBytes +
         2 * int64_t{kWgmmaConvHaloStages} * 8;
}

// Everything the kernel needs besides the two tensor maps. Plain data (kernel argument).
struct ImplicitWgmmaPlan {
  // Geometry, normalized to 3 spatial dims (d, h, w: leading dims of size 1).
  int32_t out[kDims] = {1, 1, 1};
  int32_t kernel[kDims] = {1, 1, 1};
  int32_t stride[kDims] = {1, 1, 1};
  int32_t pad_lo[kDims] = {0, 0, 0};
  int32_t kdil[kDims] = {1, 1, 1};
  int64_t out_stride[kDims + 2] = {};  // elements: n, d, h, w, channel
  int64_t out_base = 0;                // element offset of the (phase's) first output position
  int32_t w_first[kDims] = {0, 0, 0};  // the weight tap (per dim) of the first window tap
  int32_t w_step[kDims] = {1, 1, 1};   // and its step per window tap (-1 when flipped)
  int64_t bias_stride = 0;
  bool has_bias = false;
  // Epilogue: TMA stores of out's map (implicit_wgmma_out_map) in boxes of store_box positions
  // (d, h, w; kWgmmaConvStoreChunk in all), else a store per element.
  bool tma_store = false;
  int32_t store_box[kDims] = {1, 1, 1};
  // The ping-pong schedule (wgmma_pingpong.cuh: each consumer warpgroup on its own tiles, in
  // turn): block_n 128, one reduction segment and TMA stores only; else the cooperative one.
  bool pingpong = false;
  // The halo form of the cooperative schedule (wgmma_halo.cuh, implicit_wgmma_can_halo): a stage
  // per (d, h) tap and channel block, its input row read by the three taps along w.
  bool halo = false;
  // Stride phases of a transposed convolution (input dilation per dim; 1 = none), and the phase
  // this plan is of.
  int32_t phases[kDims] = {1, 1, 1};
  int32_t phase[kDims] = {0, 0, 0};

  int64_t batch = 1, groups = 1;
  int32_t cpg = 0, opg = 0;
  int32_t taps = 1;
  // Channels per k block: 64 (128-byte rows, the 128-byte swizzle) or 32 (64-byte rows, the
  // 64-byte swizzle), where c / groups leaves a last block of 32 channels or fewer
  // (implicit_wgmma_auto_block_c): the boxes then carry half the zeros, or none. Either way the
  // MMAs issue the same k16 steps in the same order (the same bits), and a stage keeps room for
  // 64-channel boxes.
  int32_t block_c = kWgmmaConvBlockK;
  int32_t c_blocks = 0;  // ceil(cpg / block_c)
  int32_t k_blocks = 0;  // taps * c_blocks
  // The k16 steps of the last channel block that hold channels (ceil of its channels / 16, 1 ..
  // block_c / 16): the MMAs skip the rest, whose products are zero (implicit_wgmma_block_steps).
  int32_t last_block_steps = 4;
  // The reduction in k_segments segments of segment_blocks k blocks (the last one shorter), each
  // a chain from zero, summed in segment order: fixed by one image's shape (never by the batch),
  // so the bits are the same whether one CTA runs a tile's segments in turn (chained) or
  // split_parallel work items do, writing fp32 partials to the workspace that the fold kernel
  // sums. 1 segment: one chain over K.
  int32_t k_segments = 1;
  int32_t segment_blocks = 0;
  bool split_parallel = false;
  int64_t workspace_bytes = 0;  // split_parallel: k_segments x base_tiles partial tiles

  // Tiles: tile[d] positions along spatial dim d (d, h, w), product block_n; tiles_of[d] of them;
  // block_o output channels (kWgmmaConvBlockO, or kWgmmaConvNarrowBlockO: the narrow-o form, one
  // reduction segment, a single stride phase and the cooperative schedule only).
  int block_n = 256;
  int32_t block_o = kWgmmaConvBlockO;
  int stages = 4;
  int32_t tile[kDims] = {1, 1, 1};
  int32_t tile_shift[kDims] = {0, 0, 0};  // log2(tile[d]): every extent is a power of two
  int64_t tiles_of[kDims] = {1, 1, 1};
  int64_t o_tiles = 0;
  int64_t base_tiles = 0;   // groups * batch * tiles_of[0..2] * o_tiles
  int64_t tiles = 0;        // work items: base_tiles, times k_segments when split_parallel
  int64_t grid = 0;         // persistent CTAs: min(tiles, multiprocessors)
  int multiprocessors = 1;  // of the device planned for
  int64_t smem_bytes = 0;
  // Share of the issued MMA work that is useful (position, channel and k tails), and with the
  // last wave counted; guides for the dispatcher, not launch parameters.
  double tile_efficiency = 0.0;
  double efficiency = 0.0;
};

// ---- Stride phases -----------------------------------------------------------------------------

// Most stride phases (launches) a transposed convolution runs as.
constexpr int64_t kWgmmaConvMaxPhases = 64;

// Spatial dim d of phase `ph` (0 <= ph < idil[d]; 0 without input dilation) in dense stride-1
// terms (the header comment): the window taps it reads, x's padding and step per tap, the weight
// tap of the first and its step, and where its outputs go in out.
struct WgmmaConvPhaseDim {
  int64_t taps = 0;  // 0: no tap of the phase meets an input element
  int64_t stride = 1, pad_lo = 0, x_step = 1;
  int64_t w_first = 0, w_step = 1;
  int64_t out = 0, out_first = 0, out_step = 1;
};

inline WgmmaConvPhaseDim wgmma_conv_phase_dim(const ConvGeometry& g, int d, int64_t ph) {
  WgmmaConvPhaseDim r;
  const int64_t s = g.idil[d], k = g.kernel[d];
  if (s == 1) {
    r.taps = k;
    r.stride = g.stride[d];
    r.pad_lo = g.pad_lo[d];
    r.x_step = g.kdil[d];
    r.w_first = g.flip ? k - 1 : 0;
    r.w_step = g.flip ? -1 : 1;
    r.out = g.out[d];
    return r;
  }
  r.out_first = ph;
  r.out_step = s;
  r.out = g.out[d] > ph ? ceil_div(g.out[d] - ph, s) : 0;
  int64_t first = -1, second = -1;
  for (int64_t t = 0; t < k; ++t) {
    const int64_t q = ph + t * g.kdil[d] - g.pad_lo[d];  // in the dilated input
    if (q % s != 0) continue;
    if (first < 0) {
      first = t;
    } else if (second < 0) {
      second = t;
    }
    ++r.taps;
  }
  if (r.taps == 0) return r;
  const int64_t step = second >= 0 ? second - first : 1;     // s / gcd(kdil, s)
  r.pad_lo = -((ph + first * g.kdil[d] - g.pad_lo[d]) / s);  // an exact division
  r.x_step = step * g.kdil[d] / s;
  r.w_first = g.flip ? k - 1 - first : first;
  r.w_step = g.flip ? -step : step;
  return r;
}

// ---- Index helpers shared by the kernel and the host tests -------------------------------------

// Tile `tile` < p.tiles: the output-channel tile fastest (the CTAs resident at one time read the
// same activation boxes), then w, h, d tiles, the image, the group outermost.
struct WgmmaConvTile {
  int64_t group = 0, n = 0, o_tile = 0;
  int32_t p0[kDims] = {0, 0, 0};  // first output position of the box, per spatial dim
};

GEMMKIT_CONV_HD WgmmaConvTile implicit_wgmma_tile(const ImplicitWgmmaPlan& p, int64_t tile) {
  WgmmaConvTile t;
  int64_t rest = div_nonneg(tile, p.o_tiles);
  t.o_tile = tile - rest * p.o_tiles;
  for (int d = kDims - 1; d >= 0; --d) {
    const int64_t q = div_nonneg(rest, p.tiles_of[d]);
    t.p0[d] = static_cast<int32_t>((rest - q * p.tiles_of[d]) * p.tile[d]);
    rest = q;
  }
  const int64_t g = div_nonneg(rest, p.batch);
  t.n = rest - g * p.batch;
  t.group = g;
  return t;
}

// One launch of the phases kernel (wgmma_phases.cuh) runs up to kWgmmaConvMaxMergedPhases
// consecutive stride phases of a transposed convolution (each a dense convolution whose outputs
// are every s-th position of out) in turn. Launch item i belongs to the first plan j with
// i < item_end[j] (item_end: the plans' running totals of tiles) as its item i - item_end[j - 1].
// One persistent grid over all of them: each CTA's tiles run back to back, the next one's loads
// overlapping this one's epilogue, in place of a partly filled wave and a drain per phase.
constexpr int kWgmmaConvMaxMergedPhases = 4;
struct WgmmaConvLaunchItem {
  int plan = 0;      // index of the launch's plan
  int64_t item = 0;  // the item within that plan
};
template <int kPlans>
GEMMKIT_CONV_HD WgmmaConvLaunchItem implicit_wgmma_launch_item(const int64_t (&item_end)[kPlans],
                                                               int plans, int64_t item) {
  WgmmaConvLaunchItem r;
  while (r.plan + 1 < plans && item >= item_end[r.plan]) ++r.plan;
  r.item = r.plan == 0 ? item : item - item_end[r.plan - 1];
  return r;
}

// Work item `item` < p.tiles: its tile and the k blocks [kb_begin, kb_end) it reduces (a segment
// when split_parallel, outermost, else all of K).
struct WgmmaConvItem {
  int64_t tile = 0;
  int32_t segment = 0, kb_begin = 0, kb_end = 0;
};

GEMMKIT_CONV_HD WgmmaConvItem implicit_wgmma_item(const ImplicitWgmmaPlan& p, int64_t item) {
  WgmmaConvItem r;
  r.kb_end = p.k_blocks;
  r.tile = item;
  if (p.split_parallel) {
    r.segment = static_cast<int32_t>(div_nonneg(item, p.base_tiles));
    r.tile = item - int64_t{r.segment} * p.base_tiles;
    r.kb_begin = r.segment * p.segment_blocks;
    r.kb_end =
        r.kb_begin + p.segment_blocks < p.k_blocks ? r.kb_begin + p.segment_blocks : p.k_blocks;
  }
  return r;
}

// The k16 steps the MMAs of channel block c_block (0 .. c_blocks - 1) issue: block_c / 16, or in
// the last block only those holding channels (last_block_steps). Steps past c / groups would
// multiply the zeros TMA fills in and leave the accumulators as they are, so every kernel skips
// them alike.
GEMMKIT_CONV_HD int implicit_wgmma_block_steps(const ImplicitWgmmaPlan& p, int32_t c_block) {
  return c_block == p.c_blocks - 1 ? p.last_block_steps : p.block_c / 16;
}

// Whether every k block issues all of its k16 steps (64-channel blocks, c / groups a multiple of
// 64): the ping-pong kernel then issues them as one straight-line sequence, without the branch
// over step counts around which ptxas serializes its two accumulators' MMAs.
GEMMKIT_CONV_HD bool implicit_wgmma_full_k_blocks(const ImplicitWgmmaPlan& p) {
  return p.block_c == kWgmmaConvBlockK && p.last_block_steps == kWgmmaConvBlockK / 16;
}

// The channels per tap whose k16 steps the MMAs issue (c / groups rounded up to 16).
GEMMKIT_CONV_HD int32_t implicit_wgmma_issued_channels(const ImplicitWgmmaPlan& p) {
  return (p.c_blocks - 1) * p.block_c + p.last_block_steps * 16;
}

// Bytes of one box row (a position's or a weight row's channels of a k block) in shared memory.
GEMMKIT_CONV_HD int implicit_wgmma_row_bytes(const ImplicitWgmmaPlan& p) {
  return 2 * p.block_c;
}

// Float4 `v` (accumulators 4 v .. 4 v + 3) of consumer thread `thread` (0 .. 255) of segment
// `segment`'s partial tile `tile` in the split_parallel workspace: [segment][tile][v][thread].
GEMMKIT_CONV_HD int64_t implicit_wgmma_partial_index(const ImplicitWgmmaPlan& p, int32_t segment,
                                                     int64_t tile, int v, int thread) {
  return ((int64_t{segment} * p.base_tiles + tile) * (p.block_n / 8) + v) * 256 + thread;
}

// Position `column` (0 .. block_n - 1) of a tile's box: its output coordinates, and whether it is
// an output (boxes overhang the output at its far edges). The box extents are powers of two
// (tile_shift their logarithms): shifts and masks, no division.
GEMMKIT_CONV_HD bool implicit_wgmma_position(const ImplicitWgmmaPlan& p, const WgmmaConvTile& t,
                                             int32_t column, int32_t (&position)[kDims]) {
  position[2] = t.p0[2] + (column & (p.tile[2] - 1));
  position[1] = t.p0[1] + ((column >> p.tile_shift[2]) & (p.tile[1] - 1));
  position[0] = t.p0[0] + (column >> (p.tile_shift[2] + p.tile_shift[1]));
  return position[0] < p.out[0] && position[1] < p.out[1] && position[2] < p.out[2];
}

// The element offset in out of tile t's image and group (output channel 0 of the group, spatial
// position 0), and of a spatial position within an image.
GEMMKIT_CONV_HD int64_t implicit_wgmma_tile_out_base(const ImplicitWgmmaPlan& p,
                                                     const WgmmaConvTile& t) {
  return p.out_base + t.n * p.out_stride[0] + t.group * p.opg * p.out_stride[kDims + 1];
}
GEMMKIT_CONV_HD int64_t implicit_wgmma_position_offset(const ImplicitWgmmaPlan& p,
                                                       const int32_t (&position)[kDims]) {
  return int64_t{position[0]} * p.out_stride[1] + int64_t{position[1]} * p.out_stride[2] +
         int64_t{position[2]} * p.out_stride[3];
}

// What consumer warpgroup `consumer` (0 or 1) of a tile reduces and stores: the tile's channels
// 64 half .. + 63 at its positions (box columns) first_column .. + columns - 1.
struct WgmmaConvConsumerPart {
  int half = 0;
  int first_column = 0;
  int columns = 0;
};
GEMMKIT_CONV_HD WgmmaConvConsumerPart implicit_wgmma_consumer_part(const ImplicitWgmmaPlan& p,
                                                                   int consumer) {
  WgmmaConvConsumerPart r;
  if (p.block_o == kWgmmaConvNarrowBlockO) {
    r.columns = p.block_n / 2;
    r.first_column = consumer * r.columns;
  } else {
    r.half = consumer;
    r.columns = p.block_n;
  }
  return r;
}

// The out-map box coordinates (channel, w, h, d, n) of store chunk `chunk` (positions
// chunk * kWgmmaConvStoreChunk .., of the whole tile) of channel half `half` (64 channels) of tile
// t: the chunk is a sub-box of the tile's power-of-two box, its columns in the box's order.
GEMMKIT_CONV_HD void implicit_wgmma_store_coords(const ImplicitWgmmaPlan& p, const WgmmaConvTile& t,
                                                 int half, int chunk, int32_t (&c)[5]) {
  const int32_t column = chunk * kWgmmaConvStoreChunk;
  c[0] = static_cast<int32_t>(t.group) * p.opg + static_cast<int32_t>(t.o_tile) * p.block_o +
         half * 64;
  c[1] = t.p0[2] + (column & (p.tile[2] - 1));
  c[2] = t.p0[1] + ((column >> p.tile_shift[2]) & (p.tile[1] - 1));
  c[3] = t.p0[0] + (column >> (p.tile_shift[2] + p.tile_shift[1]));
  c[4] = static_cast<int32_t>(t.n);
}

// A consumer's position in the ring of kStages stages: the stage and the parity of its pass. The
// producer fills k blocks in order, position q at stage q % kStages, pass q / kStages.
template <int kStages>
struct WgmmaConvRing {
  int stage = 0;
  uint32_t phase = 0;
  GEMMKIT_CONV_HD void next() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1;
    }
  }
  // `count` positions on (k blocks another consumer warpgroup reduces).
  GEMMKIT_CONV_HD void skip(int32_t count) {
    const int32_t to = stage + count;
    const int32_t passes = to / kStages;
    stage = to - passes * kStages;
    phase ^= static_cast<uint32_t>(passes) & 1u;
  }
};

}  // namespace gemmkit::cuda::conv_impl
