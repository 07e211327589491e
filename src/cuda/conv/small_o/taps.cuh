// Tap-GEMM small-o convolution (the "taps kernel"): few output channels (o <= 8, taps * o <= 64)
// from 16-bit x, e.g. a VAE's conv_out (3x3, 128 channels in, 3 out).
//
// What it computes. A block owns an output tile (tile_h x tile_w positions of one plane, dims 1
// and 2) and the input region it reads (SmallOTapsTiling in small_o/taps_layout.h: (tile - 1) *
// stride + (kernel - 1) * dilation + 1 pixels per dim). First a 1x1 GEMM of the region by every
// tap's weights,
//   Y[r][tap * o + oc] = sum_ci x[r][ci] * w[oc][tap][ci]
// (M = region pixels, N = taps * o padded to 32 or 64, K = c) with mma.sync m16n8k16, fp32
// accumulators, Y in shared memory as fp32; then a shift-add,
//   out[p][oc] = round(sum over the valid window taps, row-major, of Y[src(p, tap)][tap * o + oc]
//                      + bias[oc])
// in fp32 from +0, taps on padding or cropped input skipped. Per tap the MMAs sum the channels in
// chunks of 32 ascending (two k-steps each; channels past c enter as zeros): the same products
// and order as the tensor-core region kernel of small_o.cuh. Deterministic (no atomics; a
// tile's result does not depend on the block or grid that computes it).
//
// Contract (why_not_small_o_taps, plan_small_o_taps): bf16 / f16 x and weight, out in x's type
// or f32; groups 1, one kernel tap along dim 0, no input dilation; any stride, kernel dilation,
// padding (asymmetric, negative); x with unit channel stride, c % 8 == 0, 16-byte aligned, other
// strides multiples of 8 elements (16-byte loads of 8 channels); weight, out and bias with any
// strides; 64-bit tile indices and offsets (a region's offsets from its base are int32: the plan
// checks). blockDim = kSmallOTapsThreads, gridDim.x = t.grid (block b takes tiles b, b + grid,
// ...), dynamic shared memory t.smem_bytes() = B fragments (chunks, n_tiles, 32 lanes) x 16 bytes
//   + Y (n_tiles x 8 columns of y_stride >= m_tiles x 16 rows, column-major) fp32 + the pixel
//   table (m_tiles x 16) int32.
//
// How. Warp w takes the region's m-tiles w, w + 8, ... (16 consecutive region pixels each). For
// rows q = lane / 4 and q + 8 of its m-tile and each of the 4 chunks of a 128-channel group,
// lane (q, k = lane % 4) loads channels 8k .. 8k + 7 of the chunk as one 16-byte vector: 8 loads
// per lane, 4 KiB per warp, issued together. The chunk's first MMA takes the {x, y} halves as
// k-slots {2k, 2k+1, 2k+8, 2k+9}, the second the {z, w} halves; B is staged with the same
// permutation (small_o_taps_b_fragment), so the sum is the convolution's. Register double
// buffer: right after a chunk's MMAs the lane loads that chunk of the warp's next step in the
// tile (small_o_taps_next_step: next group or next m-tile); after its last step of a tile, the
// first step of the block's next tile, which stays in flight through the barriers and the
// shift-add. Each step also asks L2 for the warp's step after next in the tile (one 128-byte line
// per lane, prefetch.global.L2), so the register loads, one step ahead of their MMAs, find their
// lines in L2. A step finds its rows' x
// offsets in the tile's pixel table (filled by the whole block during the previous tile's
// shift-add; the first step of a tile computes its own), and stores its accumulators to Y without
// checks (Y has a row per m-tile row and a column per MMA column; the shift-add reads real pixels'
// entries only). B fragments come from shared memory (staged once per block, conflict-free 16-byte
// reads); 2 blocks of 8 warps per SM (__launch_bounds__(256, 2), <= 128 registers, no spills).
// Per 16 x 32 output tile of conv_out (c = 128): 612 region pixels = 39 m-tiles x (8 k-steps x
// 4 n-tiles) = 1248 MMAs; 156,672 bytes of x (1.20x the tile's own input: the halo, read from L2).
//
// When it wins: small o with a long reduction (c x taps), where x is nearly all the traffic: it
// reads each x element once per covering block (the region kernel's 16 x 16 regions re-read 31%
// halo and issue one chunk's loads at a time) and keeps ~4 KiB of loads in flight per warp, 16
// warps per SM (~64 KiB against the ~30 KiB DRAM latency x bandwidth per SM), so the input can
// stream at DRAM speed; an implicit GEMM with N = o would waste most of its tile.
#pragma once

#include <cstdint>

#include "cuda/common/ptx.cuh"
#include "cuda/conv/common/dtype.cuh"
#include "cuda/conv/small_o/taps_layout.h"

namespace gemmkit::cuda::conv_impl {

// Both forms: the B fragments of every chunk and n-tile into shared memory (unit
// small_o_taps_b_unit; zeros past taps * o columns and past c), by kThreads threads.
template <int kNTiles, int kThreads, typename T>
__device__ __forceinline__ void small_o_taps_stage_b(const ConvGeometry& g,
                                                     const SmallOTapsTiling& t,
                                                     const T* __restrict__ w, uint4* w_s, int tid) {
  const int chunks = static_cast<int>(t.chunks);
  for (int i = tid; i < chunks * kNTiles * 32; i += kThreads) {
    const int l = i & 31;
    const int chunk = (i >> 5) / kNTiles;
    const int n_tile = (i >> 5) - chunk * kNTiles;
    int64_t offset = 0;
    uint4 v = make_uint4(0u, 0u, 0u, 0u);
    if (small_o_taps_weight(g, n_tile * 8 + (l >> 2), chunk * kSmallOTapsChunk + (l & 3) * 8,
                            offset)) {
      Vec<T, 8> e;
#pragma unroll
      for (int j = 0; j < 8; ++j) e.v[j] = w[offset + j * g.w_stride[4]];
      v = *reinterpret_cast<const uint4*>(&e);
    }
    w_s[small_o_taps_b_unit(t, chunk, n_tile, l)] = v;
  }
}

// The shift-add of tile s, shared by both forms, by kThreads threads (tid < kThreads) once Y is
// complete: a thread per output position (consecutive threads on consecutive positions of a
// tile row, so a warp's Y reads fall in consecutive banks) and all its o channels at once (kO
// independent sums per tap: instruction-level parallelism where one chain of adds would wait on
// each other); per output the valid window taps row-major from +0, then the bias. Interior tiles
// (all taps valid) step through Y without checks; the others skip taps on padding
// (small_o_taps_tap). Channels oc0 .. oc0 + kO - 1; kExact: o == kO (oc0 = 0); else those
// below o.
template <int kO, bool kExact, int kThreads, typename T, typename TOut>
__device__ __forceinline__ void small_o_taps_shift_add_o(const ConvGeometry& g,
                                                         const SmallOTapsTiling& t,
                                                         const SmallOTapsTile& s,
                                                         const float* __restrict__ y_s,
                                                         const T* __restrict__ bias,
                                                         TOut* __restrict__ out, int tid, int oc0) {
  const SmallOTapsShift sh = small_o_taps_shift(g, t, s);
  const int o = kExact ? kO : static_cast<int>(g.o);
  const int channels = kExact ? kO : o - oc0;  // of this call
  const int k1 = static_cast<int>(g.kernel[1]), k2 = static_cast<int>(g.kernel[2]);
  const int y_stride = static_cast<int>(t.y_stride);
  int step1 = 0, step2 = 0;
  small_o_taps_y_steps(g, t, step1, step2);
  float bias_r[kO];
#pragma unroll
  for (int oc = 0; oc < kO; ++oc) {
    bias_r[oc] = g.has_bias && oc < channels ? to_float(bias[(oc0 + oc) * g.bias_stride]) : 0.0f;
  }
  const int tile_w = static_cast<int>(t.tile_w);
  const int pixels = static_cast<int>(t.tile_h) * tile_w;
  // (ph, pw) of position px, advanced by kThreads positions per step without dividing.
  const int step_rows = kThreads / tile_w, step_cols = kThreads - step_rows * tile_w;
  int ph = tid / tile_w, pw = tid - ph * tile_w;
  for (int px = tid; px < pixels; px += kThreads) {
    if (ph < sh.rows && pw < sh.cols) {
      float sum[kO];
#pragma unroll
      for (int oc = 0; oc < kO; ++oc) sum[oc] = 0.0f;
      if (sh.interior) {
        const float* y_row = y_s + small_o_taps_y_base(g, t, ph, pw, oc0);
        for (int t1 = 0; t1 < k1; ++t1, y_row += step1) {
#pragma unroll 3
          for (int t2 = 0; t2 < k2; ++t2) {
            const float* y_tap = y_row + t2 * step2;
#pragma unroll
            for (int oc = 0; oc < kO; ++oc) {
              if (kExact || oc < channels) sum[oc] += y_tap[oc * y_stride];
            }
          }
        }
      } else {
        for (int t1 = 0; t1 < k1; ++t1) {
          for (int t2 = 0; t2 < k2; ++t2) {
            int r = 0;
            if (!small_o_taps_tap(g, t, sh, ph, pw, t1, t2, r)) continue;
            const float* y_tap = y_s + small_o_taps_y(t, r, (t1 * k2 + t2) * o + oc0);
#pragma unroll
            for (int oc = 0; oc < kO; ++oc) {
              if (kExact || oc < channels) sum[oc] += y_tap[oc * y_stride];
            }
          }
        }
      }
      TOut* out_px = out + small_o_taps_out_offset(g, sh, ph, pw, oc0);
#pragma unroll
      for (int oc = 0; oc < kO; ++oc) {
        if (kExact || oc < channels) {
          if (g.has_bias) sum[oc] += bias_r[oc];
          out_px[oc * g.out_stride[4]] = from_float<TOut>(sum[oc]);
        }
      }
    }
    ph += step_rows;
    pw += step_cols;
    if (pw >= tile_w) {
      pw -= tile_w;
      ++ph;
    }
  }
}

// small_o_taps_shift_add_o with o as a constant for o <= 4 (a VAE's RGB conv_out: 3), else in
// two passes of up to 4 channels. kLean: a pass per channel (the register form with 8 n-tiles
// keeps the next tile's loads live through the shift-add, and has no registers to spare).
template <int kThreads, bool kLean, typename T, typename TOut>
__device__ __forceinline__ void small_o_taps_shift_add(
    const ConvGeometry& g, const SmallOTapsTiling& t, const SmallOTapsTile& s,
    const float* __restrict__ y_s, const T* __restrict__ bias, TOut* __restrict__ out, int tid) {
  if (kLean) {
    for (int oc = 0; oc < g.o; ++oc) {
      small_o_taps_shift_add_o<1, false, kThreads>(g, t, s, y_s, bias, out, tid, oc);
    }
    return;
  }
  switch (g.o) {
    case 1:
      small_o_taps_shift_add_o<1, true, kThreads>(g, t, s, y_s, bias, out, tid, 0);
      break;
    case 2:
      small_o_taps_shift_add_o<2, true, kThreads>(g, t, s, y_s, bias, out, tid, 0);
      break;
    case 3:
      small_o_taps_shift_add_o<3, true, kThreads>(g, t, s, y_s, bias, out, tid, 0);
      break;
    case 4:
      small_o_taps_shift_add_o<4, true, kThreads>(g, t, s, y_s, bias, out, tid, 0);
      break;
    default:
      static_assert(kSmallOMaxO <= 8, "two passes of 4 channels");
      small_o_taps_shift_add_o<4, false, kThreads>(g, t, s, y_s, bias, out, tid, 0);
      small_o_taps_shift_add_o<4, false, kThreads>(g, t, s, y_s, bias, out, tid, 4);
  }
}

template <typename T, typename TOut, int kNTiles>
__global__ void __launch_bounds__(kSmallOTapsThreads, kSmallOTapsMinBlocks)
    conv_small_o_taps_kernel(const ConvGeometry g, const SmallOTapsTiling t,
                             const T* __restrict__ x, const T* __restrict__ w,
                             const T* __restrict__ bias, TOut* __restrict__ out) {
  static_assert(kNTiles == 4 || kNTiles == 8, "4 or 8 n-tiles");
  extern __shared__ __align__(16) unsigned char small_o_taps_smem[];
  uint4* w_s = reinterpret_cast<uint4*>(small_o_taps_smem);  // (chunks, kNTiles, 32) B fragments
  float* y_s = reinterpret_cast<float*>(small_o_taps_smem + t.weight_bytes);  // (n, y_stride)
  // (y_rows): the current tile's region pixel offsets from its base, -1 for zero rows.
  int* pixel_s = reinterpret_cast<int*>(small_o_taps_smem + t.weight_bytes + t.y_bytes);
  if (static_cast<int64_t>(blockIdx.x) >= t.tiles) return;  // uniform: never with plan's grid
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, warp = tid >> 5;
  const int64_t grid = gridDim.x;
  const int c = static_cast<int>(g.c), chunks = static_cast<int>(t.chunks);
  const int m_tiles = static_cast<int>(t.m_tiles), y_rows = m_tiles * kSmallOTapsMRows;

  // x of one warp step: (chunk of the group, row q / q + 8) 16-byte vectors, 32 registers.
  uint32_t a[kSmallOTapsGroupChunks][2][4];
  // The step being loaded: its tile's x base and rows q / q + 8's offsets from it (-1: zeros).
  const T* x_tile = x;
  int src[2] = {-1, -1};
  // A tile's first step (prefetched before the tile's pixel table exists): offsets computed.
  const auto locate_first = [&](const SmallOTapsTile& s, int m_tile) {
    x_tile = x + small_o_taps_tile_base(g, s);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      src[h] = small_o_taps_region_offset(g, t, s,
                                          m_tile * kSmallOTapsMRows + small_o_taps_a_row(lane, h));
    }
  };
  const auto fill_pixels = [&](const SmallOTapsTile& s) {
    for (int r = tid; r < y_rows; r += kSmallOTapsThreads) {
      pixel_s[r] = small_o_taps_region_offset(g, t, s, r);
    }
  };
  const auto load = [&](int k, int group) {
    const int ch = small_o_taps_channel(group, k, lane);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      uint4 v = make_uint4(0u, 0u, 0u, 0u);
      if (src[h] >= 0 && ch < c) v = ptx::ld_global_nc_na_v4(x_tile + src[h] + ch);
      a[k][h][0] = v.x;
      a[k][h][1] = v.y;
      a[k][h][2] = v.z;
      a[k][h][3] = v.w;
    }
  };

  // The first step's loads, then the B fragments (once per block) and the first tile's pixel
  // table while they are in flight.
  SmallOTapsTile s = small_o_taps_tile(g, t, blockIdx.x);
  if (warp < m_tiles) {
    locate_first(s, warp);
#pragma unroll
    for (int k = 0; k < kSmallOTapsGroupChunks; ++k) load(k, 0);
  }
  small_o_taps_stage_b<kNTiles, kSmallOTapsThreads>(g, t, w, w_s, tid);
  fill_pixels(s);
  __syncthreads();

  const int groups = static_cast<int>(t.channel_groups);
  for (int64_t tile = blockIdx.x; tile < t.tiles; tile += grid) {
    for (int m_tile = warp; m_tile < m_tiles; m_tile += kSmallOTapsWarps) {
      float acc[kNTiles][4];
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[j][e] = 0.0f;
      }
      for (int group = 0; group < groups; ++group) {
        // The next step's loads go into the registers each chunk frees; a step of the block's
        // next tile is loaded after the last MMAs instead (below).
        const SmallOTapsStep next = small_o_taps_next_step(t, grid, warp, {tile, m_tile, group});
        const bool prefetch = next.tile == tile;  // warp-uniform
        if (prefetch && next.group == 0) {
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            src[h] = pixel_s[next.m_tile * kSmallOTapsMRows + small_o_taps_a_row(lane, h)];
          }
        }
        // The step after next into L2, so that the register loads issued during the next step
        // find it there (the loads of a step are only one step ahead of their MMAs).
        if (prefetch) {
          const SmallOTapsStep ahead = small_o_taps_next_step(t, grid, warp, next);
          if (ahead.tile == tile) {  // warp-uniform
            const int offset = pixel_s[small_o_taps_prefetch_row(ahead.m_tile, lane)];
            const int ch = small_o_taps_prefetch_channel(ahead.group, lane);
            if (offset >= 0 && ch < c) ptx::prefetch_l2(x_tile + offset + ch);
          }
        }
#pragma unroll
        for (int k = 0; k < kSmallOTapsGroupChunks; ++k) {
          const int chunk = group * kSmallOTapsGroupChunks + k;
          if (chunk < chunks) {  // warp-uniform
            uint32_t lo[4], hi[4];
            small_o_taps_a_fragment(a[k][0], a[k][1], 0, lo);
            small_o_taps_a_fragment(a[k][0], a[k][1], 1, hi);
#pragma unroll
            for (int j = 0; j < kNTiles; ++j) {
              const uint4 v = w_s[small_o_taps_b_unit(t, chunk, j, lane)];
              const uint32_t unit[4] = {v.x, v.y, v.z, v.w};
              uint32_t b0 = 0, b1 = 0;
              small_o_taps_b_fragment(unit, 0, b0, b1);
              ptx::mma_m16n8k16<T>(acc[j], lo, b0, b1);
              small_o_taps_b_fragment(unit, 1, b0, b1);
              ptx::mma_m16n8k16<T>(acc[j], hi, b0, b1);
            }
          }
          if (prefetch) load(k, next.group);  // chunk k of the next step, into the freed registers
        }
      }
      // Accumulator fragment: rows q, q + 8 of the m-tile, columns 2k, 2k + 1 of each n-tile. Y
      // has a row per m-tile row and a column per MMA column: no checks.
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int r = m_tile * kSmallOTapsMRows + small_o_taps_acc_row(lane, e);
          y_s[small_o_taps_y(t, r, j * 8 + small_o_taps_acc_col(lane, e))] = acc[j][e];
        }
      }
    }
    // The first step of the block's next tile: in flight during the barriers and the shift-add.
    const bool more = tile + grid < t.tiles;
    const SmallOTapsTile s_next = more ? small_o_taps_tile(g, t, tile + grid) : s;
    if (warp < m_tiles && more) {
      locate_first(s_next, warp);
#pragma unroll
      for (int k = 0; k < kSmallOTapsGroupChunks; ++k) load(k, 0);
    }
    __syncthreads();  // Y complete; the pixel table is read no more for this tile
    if (more) fill_pixels(s_next);

    small_o_taps_shift_add<kSmallOTapsThreads, kNTiles == 8>(g, t, s, y_s, bias, out, tid);
    s = s_next;
    __syncthreads();  // Y is rewritten for the next tile, whose pixel table is complete
  }
}

}  // namespace gemmkit::cuda::conv_impl
