// Staged depthwise convolution (variant DepthwiseVariant::staged): 2-D depthwise layers with
// multiplier 1, square 3x3 / 5x5 / 7x7 kernels, stride 1 and no dilation along the last two dims
// (one tap along dim 0), 16-bit x whose channels load as 16-byte octets: ConvNeXt's 7x7 and
// MobileNet's 3x3 stride-1 layers.
//
// What it computes: the depthwise contract of depthwise.cuh, with the direct kernel's bits:
// per output an fp32 FMA chain from +0 over the window's taps in row-major order, + bias, one
// rounding. Taps on padding are not skipped but read staged zeros: fma(0, w, acc) == acc for
// every finite w, because acc is never -0 (it starts at +0, and a sum that cancels exactly
// rounds to +0). So the bits could only differ where a weight is Inf or NaN; a block that stages
// such a weight runs its tiles with the padding taps skipped (kExact), as the direct kernel does.
//
// How. A block tile is 2 * cvt channels x 2 * warps output rows x 7 * groups output columns of
// one plane (DepthwiseTiling; depthwise/layout.h says why 7). The block stages the tile's input
// window, pixels x channel octets, with cp.async (zeros outside x and past c) and its channel
// tile's weights as fp32 [tap][channel]; a block with several tiles streams the next window in
// while it computes the current one. Thread (pair, group) of warp `row pair` owns
//   acc[2][7][2]  (rows, columns, channels)
// and walks the k + 1 window rows of its two output rows; each window column is one 4-byte shared
// load (its 2 channels) and two widenings, reused by up to 2 x 7 outputs. 7x7: 13 columns, 14
// weight pairs (LDS.64) and 196 FMAs per inner row (254 instructions); no edge tiles. The middle
// window rows are a rolled loop (unrolled, the tile overflowed the instruction cache).
// Shared reads are conflict-free: a warp reads one window row, its thread tiles 7 pixels apart
// (32- or 64-byte pixels: distinct banks), its channel pairs side by side.
//
// When it wins (docs/perf.md): over the blocked variant on every 2-D stride-1 row measured
// (ConvNeXt 7x7, MobileNet 3x3), and over cuDNN on the 7x7 rows; at ~2 instructions per FMA it is
// bound by issue and latency, not bytes.
//
// Registers: kRegisters per thread (__maxnreg__), 96 or the lean 80 (t.registers, chosen by the
// planner: 3 blocks of 7 warps per SM instead of 2, depthwise/layout.h).
//
// Contract (plan_depthwise_staged, depthwise_config): blockDim.x = 32 * t.rows_per_block;
// cvt = 32 / kGroups; dynamic shared memory depthwise_staged_smem_bytes(g, t) <= 48 KiB; x
// 16-byte aligned with unit channel stride and other strides multiples of 8 elements, c % 8 == 0;
// out with unit channel stride, suited to 2-channel stores. Offsets inside a plane of x and
// inside the weight are 32-bit (the host checks that they fit), plane bases and out 64-bit.
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/common/ptx.cuh"
#include "cuda/conv/common/dtype.cuh"
#include "cuda/conv/depthwise/depthwise.cuh"
#include "cuda/conv/depthwise/layout.h"

namespace gemmkit::cuda::conv_impl {

// Issues the cp.async copies of tile s's input window into the window at shared address `dst`:
// chunk q is window row q / kRowChunks, pixel (q % kRowChunks) / kChunks, channel octet q %
// kChunks. A thread's chunks advance by blockDim with the row and the in-row index stepped
// (no division per chunk); offsets inside the plane are 32-bit (why_not_depthwise_staged).
template <typename T, int kK, int kGroups>
__device__ __forceinline__ void depthwise_staged_load_window(const ConvGeometry& g,
                                                             const DepthwiseStagedTile& s,
                                                             const T* x, int window_chunks,
                                                             uint32_t dst) {
  constexpr int kChunks = 8 / kGroups;  // 2 or 4: a power of two
  constexpr int kChunksLog2 = kChunks == 2 ? 1 : 2;
  constexpr int kRowChunks = (kGroups * kDepthwiseStagedRun + kK - 1) * kChunks;
  const T* plane = x + s.n * g.x_stride[0] + s.i0 * g.x_stride[1] + s.c0;
  const int threads = static_cast<int>(blockDim.x);
  const int step_rows = threads / kRowChunks, step_rest = threads - step_rows * kRowChunks;
  const int tid = static_cast<int>(threadIdx.x);
  int r = tid / kRowChunks, rest = tid - r * kRowChunks;
  const int ih0 = static_cast<int>(s.ih0), iw0 = static_cast<int>(s.iw0);
  const int in_h = static_cast<int>(g.in[1]), in_w = static_cast<int>(g.in[2]);
  const int xs2 = static_cast<int>(g.x_stride[2]), xs3 = static_cast<int>(g.x_stride[3]);
  const int octets = static_cast<int>((g.c - s.c0 + 7) / 8);  // channel octets inside c
  for (int q = tid; q < window_chunks; q += threads) {
    const int col = rest >> kChunksLog2, octet = rest & (kChunks - 1);
    const int ih = ih0 + r, iw = iw0 + col;
    const bool inside = s.plane_ok && static_cast<unsigned>(ih) < static_cast<unsigned>(in_h) &&
                        static_cast<unsigned>(iw) < static_cast<unsigned>(in_w) && octet < octets;
    const T* src = inside ? plane + (ih * xs2 + iw * xs3 + 8 * octet) : x;
    ptx::cp_async_cg16(dst + static_cast<uint32_t>(q) * 16u, src, inside ? 16u : 0u);
    r += step_rows;
    rest += step_rest;
    if (rest >= kRowChunks) {
      rest -= kRowChunks;
      ++r;
    }
  }
}

// Stages the weights of the channel tile starting at c0 as fp32 [tap][channel] (window taps,
// flip applied; 0 past o). Item i reads channel i / taps at tap i % taps, so a warp's loads run
// along one channel's taps; 32-bit offsets (why_not_depthwise_staged). Returns whether this
// thread staged a weight that is Inf or NaN.
template <typename T, int kK, int kGroups>
__device__ __forceinline__ bool depthwise_staged_load_weights(const ConvGeometry& g, int64_t c0,
                                                              const T* w, float* w_s) {
  constexpr int kCT = 64 / kGroups, kTaps = kK * kK;
  const T* w_tile = w + c0 * g.w_stride[0] + weight_tap(g, 0, 0) * g.w_stride[1];
  const int ws0 = static_cast<int>(g.w_stride[0]), ws2 = static_cast<int>(g.w_stride[2]);
  const int ws3 = static_cast<int>(g.w_stride[3]);
  const int channels = static_cast<int>(g.o - c0 < kCT ? g.o - c0 : kCT);
  bool non_finite = false;
  for (int i = static_cast<int>(threadIdx.x); i < kTaps * kCT; i += static_cast<int>(blockDim.x)) {
    const int ch = i / kTaps, tap = i - ch * kTaps;
    const int t1 = tap / kK, t2 = tap - t1 * kK;
    const int w1 = g.flip ? kK - 1 - t1 : t1, w2 = g.flip ? kK - 1 - t2 : t2;
    const float value = ch < channels ? to_float(w_tile[ch * ws0 + w1 * ws2 + w2 * ws3]) : 0.0f;
    non_finite = non_finite || !isfinite(value);
    w_s[tap * kCT + ch] = value;
  }
  return non_finite;
}

// The same staging where the tile's weights are one 16-byte aligned run of w (t.w_vector_bytes
// == 16: taps and channels packed, depthwise_staged_w_run): each thread loads one 16-byte
// vector (8 weights in w's order) and writes its 8 values to their window taps, so the block
// waits for one global load instead of a chain of 4-7 element loads (the chain held ~16% of the
// warp samples on ConvNeXt 7x7 c96, Nsight Compute; H200, A/B: 7x7 c384 7.06 -> 5.75 us, 7x7 c96
// 13.6 -> 12.7, MobileNet 3x3 c144 8.46 -> 7.99). Vectors past o stage zeros.
template <typename T, int kK, int kGroups>
__device__ __forceinline__ bool depthwise_staged_load_weight_run(const ConvGeometry& g, int64_t c0,
                                                                 const T* w, float* w_s) {
  constexpr int kCT = 64 / kGroups, kTaps = kK * kK;
  constexpr int kVectors = kCT * kTaps / 8;  // 16 * taps * 2 bytes: whole vectors
  const int channels = static_cast<int>(g.o - c0 < kCT ? g.o - c0 : kCT);
  const int vectors = channels * kTaps / 8;  // channels % 8 == 0 (c % 8 == 0)
  const uint4* run = reinterpret_cast<const uint4*>(w + c0 * kTaps);
  bool non_finite = false;
  for (int v = static_cast<int>(threadIdx.x); v < kVectors; v += static_cast<int>(blockDim.x)) {
    const uint4 bits = v < vectors ? run[v] : make_uint4(0u, 0u, 0u, 0u);
    const uint32_t words[4] = {bits.x, bits.y, bits.z, bits.w};
    int ch = 8 * v / kTaps, tap = 8 * v - ch * kTaps;  // of the vector's first weight
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      float pair[2];
      widen_pair<T>(words[q], pair);
#pragma unroll
      for (const float value : pair) {
        non_finite = non_finite || !isfinite(value);
        const int window_tap = g.flip ? kTaps - 1 - tap : tap;  // tap: w's; flip reverses both
        w_s[window_tap * kCT + ch] = value;
        if (++tap == kTaps) {
          tap = 0;
          ++ch;
        }
      }
    }
  }
  return non_finite;
}

// The FMAs of window row ir for output rows [kR0, kR1) of a thread tile (x_s: its pixel (0, 0),
// channel pair; w_s: its channel pair of tap 0): output row r takes kernel row ir - r, whose kK
// weight pairs it loads first; column u feeds output column j at tap u - j, so per output the
// taps come in order. kExact: columns outside [col_lo, col_hi) (padding) are skipped instead of
// read as zeros.
template <typename T, int kK, int kGroups, bool kExact, int kR0, int kR1>
__device__ __forceinline__ void depthwise_staged_row(
    const uint32_t* x_s, const float2* w_s, int ir, int col_lo, int col_hi,
    float (&acc)[kDepthwiseStagedRows][kDepthwiseStagedRun][2]) {
  constexpr int kRun = kDepthwiseStagedRun;
  constexpr int kPixelWords = 32 / kGroups;  // 4-byte words per staged pixel
  constexpr int kRowWords = (kGroups * kRun + kK - 1) * kPixelWords;
  constexpr int kTapStride = 32 / kGroups;  // float2 per tap (the tile's channel pairs)
  constexpr int kCols = kRun + kK - 1;
  float2 wr[kR1 - kR0][kK];
#pragma unroll
  for (int r = kR0; r < kR1; ++r) {
    const float2* w_row = w_s + (ir - r) * kK * kTapStride;
#pragma unroll
    for (int t2 = 0; t2 < kK; ++t2) wr[r - kR0][t2] = w_row[t2 * kTapStride];
  }
  const uint32_t* x_row = x_s + ir * kRowWords;
#pragma unroll
  for (int u = 0; u < kCols; ++u) {
    if (kExact && (u < col_lo || u >= col_hi)) continue;
    float xv[2];
    widen_pair<T>(x_row[u * kPixelWords], xv);
#pragma unroll
    for (int r = kR0; r < kR1; ++r) {
#pragma unroll
      for (int j = 0; j < kRun; ++j) {
        const int t2 = u - j;
        if (t2 < 0 || t2 >= kK) continue;
        acc[r][j][0] = fmaf(xv[0], wr[r - kR0][t2].x, acc[r][j][0]);
        acc[r][j][1] = fmaf(xv[1], wr[r - kR0][t2].y, acc[r][j][1]);
      }
    }
  }
}

// The FMAs of one thread tile: window row 0 feeds output row 0 (kernel row 0), rows 1 .. kK - 1
// both output rows (kernel rows ir and ir - 1), row kK output row 1 (kernel row kK - 1); per
// output, ir ascending then u ascending is the row-major tap order. The middle rows are a rolled
// loop: fully unrolled, a 7x7 tile is ~3000 instructions, and warps at different points of it
// missed the instruction cache (Nsight Compute: 3.2 cycles per issue stalled on "no
// instruction"). kExact: rows outside [row_lo, row_hi) and columns outside [col_lo, col_hi)
// (padding) are skipped instead of read as zeros.
template <typename T, int kK, int kGroups, bool kExact>
__device__ __forceinline__ void depthwise_staged_fma(
    const uint32_t* x_s, const float2* w_s, int row_lo, int row_hi, int col_lo, int col_hi,
    float (&acc)[kDepthwiseStagedRows][kDepthwiseStagedRun][2]) {
  static_assert(kDepthwiseStagedRows == 2, "window rows 0 and kK feed one output row each");
#pragma unroll
  for (int r = 0; r < kDepthwiseStagedRows; ++r) {
#pragma unroll
    for (int j = 0; j < kDepthwiseStagedRun; ++j) acc[r][j][0] = acc[r][j][1] = 0.0f;
  }
  const auto row_in = [&](int ir) { return !kExact || (ir >= row_lo && ir < row_hi); };
  if (row_in(0)) {
    depthwise_staged_row<T, kK, kGroups, kExact, 0, 1>(x_s, w_s, 0, col_lo, col_hi, acc);
  }
#pragma unroll 1
  for (int ir = 1; ir < kK; ++ir) {
    if (row_in(ir)) {
      depthwise_staged_row<T, kK, kGroups, kExact, 0, 2>(x_s, w_s, ir, col_lo, col_hi, acc);
    }
  }
  if (row_in(kK)) {
    depthwise_staged_row<T, kK, kGroups, kExact, 1, 2>(x_s, w_s, kK, col_lo, col_hi, acc);
  }
}

template <typename T, typename TOut, int kK, int kGroups, int kRegisters>
__global__ void __maxnreg__(kRegisters)
    conv_depthwise_staged_kernel(const ConvGeometry g, const DepthwiseTiling t,
                                 const T* __restrict__ x, const T* __restrict__ w,
                                 const T* __restrict__ bias, TOut* __restrict__ out) {
  constexpr int kPairs = 32 / kGroups, kRun = kDepthwiseStagedRun, kRows = kDepthwiseStagedRows;
  constexpr int kPixelWords = kPairs;
  constexpr int kWW = kGroups * kRun + kK - 1;
  constexpr int kCols = kRun + kK - 1;
  extern __shared__ __align__(16) unsigned char depthwise_staged_smem[];
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const int pair = lane % kPairs, group = lane / kPairs;
  const int window_chunks = static_cast<int>(depthwise_staged_window_chunks(g, t));
  const int window_words = window_chunks * 4;
  uint32_t* windows = reinterpret_cast<uint32_t*>(depthwise_staged_smem);
  float* w_s = reinterpret_cast<float*>(windows + depthwise_staged_buffers(t) * window_words);
  const uint32_t windows_at = ptx::smem_address(windows);
  const int64_t first = static_cast<int64_t>(blockIdx.x) * t.tiles_per_block;
  const int64_t last =
      first + t.tiles_per_block < t.tiles() ? first + t.tiles_per_block : t.tiles();
  if (first >= last) return;

  const bool decode32 = depthwise_staged_decode32(t);  // uniform
  const auto decode = [&](int64_t tile) {
    return decode32 ? depthwise_staged_tile<uint32_t>(g, t, tile)
                    : depthwise_staged_tile<int64_t>(g, t, tile);
  };
  int staged = -1;          // channel tile whose weights are in shared memory
  bool non_finite = false;  // this thread staged an Inf / NaN weight of that tile
  int buffer = 0;
  const int row0 = kRows * warp, col0 = kRun * group;  // this thread's outputs in the tile
  bool initial = true;                                 // the block's first tile
  for (int64_t tile = first; tile < last; ++tile, buffer ^= 1, initial = false) {
    // Only what the stores need stays live through the FMAs: the decode is recomputed for the
    // next tile's copies (32-bit: a few dozen instructions).
    // The outputs inside out: rows (bits 0-3) and columns (bits 4-7) of the thread tile, 0 when
    // its channels are past o (one register through the FMAs).
    int inside, row_lo = 0, row_hi = 0, col_lo = 0, col_hi = 0;
    int oc;  // o < 2^31 (c % 8 == 0 and x's plane offsets are 32-bit)
    TOut* out_p;
    {
      const DepthwiseStagedTile s = decode(tile);
      if (initial) {  // later windows were issued one iteration ahead
        depthwise_staged_load_window<T, kK, kGroups>(g, s, x, window_chunks, windows_at);
        ptx::cp_async_commit();
      }
      const int64_t oh = s.oh0 + row0, ow = s.ow0 + col0;
      oc = static_cast<int>(s.c0) + 2 * pair;
      const auto clamp = [](int64_t v, int64_t hi) {
        return static_cast<int>(v < 0 ? 0 : (v > hi ? hi : v));
      };
      inside = oc < g.o ? clamp(g.out[1] - oh, kRows) | clamp(g.out[2] - ow, kRun) << 4 : 0;
      out_p = out + s.n * g.out_stride[0] + s.d0 * g.out_stride[1] + oh * g.out_stride[2] +
              ow * g.out_stride[3] + oc;
      // The exact path's bounds: window rows / columns of this thread inside x.
      const int64_t ih = s.ih0 + row0, iw = s.iw0 + col0;
      row_lo = clamp(-ih, kK + 1);
      row_hi = s.plane_ok ? clamp(g.in[1] - ih, kK + 1) : 0;
      col_lo = clamp(-iw, kCols);
      col_hi = clamp(g.in[2] - iw, kCols);
      if (s.channel_tile != staged) {  // uniform; the previous tile's readers passed the barrier
        non_finite = t.w_vector_bytes == 16
                         ? depthwise_staged_load_weight_run<T, kK, kGroups>(g, s.c0, w, w_s)
                         : depthwise_staged_load_weights<T, kK, kGroups>(g, s.c0, w, w_s);
        staged = static_cast<int>(s.channel_tile);
      }
    }
    if (tile + 1 < last) {
      depthwise_staged_load_window<T, kK, kGroups>(
          g, decode(tile + 1), x, window_chunks,
          windows_at + static_cast<uint32_t>((buffer ^ 1) * window_words * 4));
    }
    ptx::cp_async_commit();   // possibly empty: one group per iteration
    ptx::cp_async_wait<1>();  // all groups but the newest: this tile's window has landed
    const bool exact = __syncthreads_or(non_finite) != 0;

    // This thread's window: rows 2 * warp .., columns 7 * group .., channel pair `pair`.
    const uint32_t* x_s =
        windows + buffer * window_words + (row0 * kWW + col0) * kPixelWords + pair;
    const float2* w_pair = reinterpret_cast<const float2*>(w_s) + pair;
    float acc[kRows][kRun][2];
    if (!exact) {
      depthwise_staged_fma<T, kK, kGroups, false>(x_s, w_pair, 0, 0, 0, 0, acc);
    } else {
      depthwise_staged_fma<T, kK, kGroups, true>(x_s, w_pair, row_lo, row_hi, col_lo, col_hi, acc);
    }

    // + bias, one rounding, 2-channel stores of the outputs inside out.
    if (inside != 0) {
      float b[2] = {0.0f, 0.0f};
      if (g.has_bias) {
        b[0] = to_float(bias[oc * g.bias_stride]);
        b[1] = to_float(bias[(oc + 1) * g.bias_stride]);
      }
      const int rows_in = inside & 15, cols_in = inside >> 4;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (r >= rows_in) break;
#pragma unroll
        for (int j = 0; j < kRun; ++j) {
          if (j >= cols_in) break;
          float values[2];
#pragma unroll
          for (int v = 0; v < 2; ++v) values[v] = g.has_bias ? acc[r][j][v] + b[v] : acc[r][j][v];
          store_channels<TOut, 2>(out_p + (r * g.out_stride[2] + j * g.out_stride[3]), values);
        }
      }
    }
    __syncthreads();  // every read of this window and of the weights is done
  }
}

}  // namespace gemmkit::cuda::conv_impl
