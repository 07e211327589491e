// Blocked depthwise variant (DepthwiseVariant::blocked): the contract of depthwise.cuh for 2-D /
// 3-D layers with kernel width 3, 5 or 7 and stride 1 or 2 along the last dim, no dilation along
// the last two dims (dim 0: anything), weight taps one stride apart and 32-bit offsets inside a
// plane: every 2-D depthwise layer of MobileNet / EfficientNet / ConvNeXt.
//
// A thread owns kV channels (2: one 4-byte bf16 / f16 load or an 8-byte f32 one,
// consecutive lanes on consecutive channel pairs; 1 for multipliers > 1, odd o or unaligned
// tensors) x a kTH x kTW tile of outputs of one plane:
//   acc[kTH][kTW][kV]  (rows, columns, channels) = (2, 8, 2) at stride 1, (2, 4, 2) at stride 2;
//                      kTH = 1 when 2-row tiles would leave < 512 threads per SM
// It walks the (kTH - 1) * sh + kh input rows of its window (rows outside x: skipped, padding);
// input row ir is kernel row kr = ir - r * sh of output row r. An inner row, which feeds all kTH
// output rows, loads each of its (kTW - 1) * kS + kw columns once (converted to fp32 once) and
// does the kw x kTW FMAs of every output row with that kernel row's weights; the first / last
// rows of the window feed one output row each. Per output, ir ascending is kr ascending, and
// within a row column u ascending is tap t2 = u - j * kS ascending: the contract's row-major order.
// Cost of an inner row, 7x7, stride 1, bf16, interior (SASS of the sm_90a build): 224 FFMA, 14
// LDG.32, 28 widenings (shift / mask), 28 address adds, 14 LDS.64 (the kw weights of 2 kernel
// rows, immediate offsets), ~28 row overhead = 336 instructions, 1.50 per FFMA; a first / last
// row 214 per 112 FFMA (1.91); a whole 2 x 8 tile ~1.6 per FFMA with its prologue and stores
// (the window and generic variants: ~4.6). Through L1 / shared memory an inner row moves 56
// bytes of x and 112 of weights, 0.75 bytes per FFMA: 96 of the 128 bytes per clock an SM's
// L1 delivers at 128 FFMA per clock. Registers: acc 32 + two kernel rows of weights 28 + 14 raw
// columns; 119 in all for this instantiation, no spills (a third row or 16 columns would not
// fit the 128 of the launch bounds: 4 blocks of 128 threads per SM).
// Weights: staged once per block and channel tile as fp32, flip applied, [cvt][taps | 1][kV]
// in shared memory: a thread's taps are contiguous (a kernel row is kw loads at immediate
// offsets) and the per-channel-vector stride of an odd number of kV-float vectors puts a
// half-warp's 16 LDS.64 (or a warp's 32 LDS.32) on distinct banks.
// Edges: interior tiles (every column of the span inside x, every output inside out) compile
// without any check along the last dim; edge tiles skip columns outside [lo, hi) with one
// uniform branch per column and store outputs < out[2] only. Offsets inside a plane (n, input
// index along dim 0) of x and (n, d0) of out are 32-bit (the planes' bases 64-bit); the host
// takes the variant only when they fit (depthwise_blocked_offsets_fit).
// When it wins: 7x7 is FMA-bound (ConvNeXt: 118 M FMAs in 8 x 56 x 56 x 96), 3x3 memory-bound;
// both against cuDNN's depthwise engines.
#pragma once

#include <cstdint>
#include <type_traits>

#include "cuda/conv/common/dtype.cuh"
#include "cuda/conv/depthwise/depthwise.cuh"
#include "cuda/conv/depthwise/layout.h"

namespace gemmkit::cuda::conv_impl {

// kV channels of the input column at `p` (its first channel) as fp32: a 16-bit pair is one
// 4-byte load (widen_pair), an f32 pair one 8-byte load.
template <typename T, int kV>
__device__ __forceinline__ void load_column(const T* p, float (&xv)[kV]) {
  if constexpr (kV == 2 && sizeof(T) == 2) {
    widen_pair<T>(__ldg(reinterpret_cast<const unsigned int*>(p)), xv);
  } else if constexpr (kV == 2) {
    const float2 f = __ldg(reinterpret_cast<const float2*>(p));
    xv[0] = f.x;
    xv[1] = f.y;
  } else {
    xv[0] = to_float(__ldg(p));
  }
}

// Stages the weights of channel tile `channel_tile` as fp32 [cvt][w_cv_stride / kV][kV]: channel
// vector cv's taps contiguous (window order, flip applied), zeros past o. Work item (lc, tap),
// lc = cv * kV + v the channel in the tile, loads one weight; a thread's items advance by
// blockDim without divisions, kBatch at a time so that kBatch loads are in flight. 32-bit offsets
// from the tile's first channel: the weight spans < 2^31 elements and its taps are one stride
// apart (depthwise_blocked_offsets_fit, t.w_linear); flipping every spatial dim of a row-major
// kernel reverses the taps.
template <typename T, int kV>
__device__ __forceinline__ void stage_blocked_weights(const ConvGeometry& g,
                                                      const DepthwiseTiling& t,
                                                      int64_t channel_tile, const T* w,
                                                      uint32_t w_s) {
  constexpr int kBatch = 8;
  const int taps = static_cast<int>(g.kernel_positions());
  const int threads = static_cast<int>(blockDim.x * blockDim.y);
  const int width = static_cast<int>(t.cvt) * kV;  // channels of a tile
  const int64_t oc_base = channel_tile * width;
  int channels = static_cast<int>(g.o - oc_base < width ? g.o - oc_base : width);
  // Loop invariants computed once and held in registers (opaque to the compiler, which would
  // otherwise re-derive them, the 64-bit tile pointer included, for every item).
  const T* w_tile = w + oc_base * g.w_stride[0];
  int ws0 = static_cast<int>(g.w_stride[0]), ws3 = static_cast<int>(g.w_stride[3]);
  int tap_first = g.flip ? (taps - 1) * ws3 : 0, tap_step = g.flip ? -ws3 : ws3;
  int w_cv_bytes = static_cast<int>(t.w_cv_stride) * 4;
  asm(""
      : "+l"(w_tile), "+r"(ws0), "+r"(tap_first), "+r"(tap_step), "+r"(w_cv_bytes), "+r"(channels));
  const int items = width * taps;
  const int step_lc = threads / taps, step_tap = threads - step_lc * taps;
  int j = static_cast<int>(threadIdx.y * blockDim.x + threadIdx.x);
  int lc = j / taps, tap = j - lc * taps;
  for (; j < items; j += kBatch * threads) {
    float value[kBatch];
    uint32_t at[kBatch];
    bool store[kBatch];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const unsigned ulc = static_cast<unsigned>(lc);
      store[b] = j + b * threads < items;
      at[b] = w_s + static_cast<uint32_t>(static_cast<int>(ulc / kV) * w_cv_bytes +
                                          (tap * kV + static_cast<int>(ulc % kV)) * 4);
      value[b] = store[b] && lc < channels
                     ? to_float(__ldg(w_tile + (lc * ws0 + tap_first + tap * tap_step)))
                     : 0.0f;
      lc += step_lc;
      tap += step_tap;
      if (tap >= taps) {
        tap -= taps;
        ++lc;
      }
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      if (store[b]) asm volatile("st.shared.f32 [%0], %1;" ::"r"(at[b]), "f"(value[b]));
    }
  }
}

// The same staging where the tile's weights are one run of w aligned to kBytes
// (t.w_vector_bytes, depthwise_blocked_w_vector_bytes): kBytes per load, kBatch loads in flight
// per thread. Element e of the run is channel lc = e / taps at w's tap e % taps, staged at window
// tap (flip ? taps - 1 - tap : tap) as above; elements of channels past o stage 0.
template <typename T, int kV, int kBytes>
__device__ __forceinline__ void stage_blocked_weights_vector(const ConvGeometry& g,
                                                             const DepthwiseTiling& t,
                                                             int64_t channel_tile, const T* w,
                                                             uint32_t w_s) {
  constexpr int kPer = kBytes / static_cast<int>(sizeof(T));
  constexpr int kBatch = 2;
  using Chunk = std::conditional_t<kBytes == 16, uint4, uint2>;
  static_assert(kBytes == 16 || kBytes == 8, "16- or 8-byte loads");
  const int taps = static_cast<int>(g.kernel_positions());
  const int threads = static_cast<int>(blockDim.x * blockDim.y);
  const int width = static_cast<int>(t.cvt) * kV;  // channels of a tile
  const int64_t oc_base = channel_tile * width;
  const int channels = static_cast<int>(g.o - oc_base < width ? g.o - oc_base : width);
  const int count = channels * taps;  // elements of w in the tile
  const int total = width * taps;     // staged slots, a multiple of kPer
  const T* run = w + oc_base * taps;
  const int w_cv_bytes = static_cast<int>(t.w_cv_stride) * 4;
  const int step = threads * kPer;
  for (int e0 = static_cast<int>(threadIdx.y * blockDim.x + threadIdx.x) * kPer; e0 < total;
       e0 += kBatch * step) {
    float value[kBatch][kPer];
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int e = e0 + b * step;
      if (e + kPer <= count) {
        const Chunk raw = __ldg(reinterpret_cast<const Chunk*>(run + e));
        T elements[kPer];
        memcpy(elements, &raw, sizeof(raw));
#pragma unroll
        for (int i = 0; i < kPer; ++i) value[b][i] = to_float(elements[i]);
      } else {  // the tile's last channels (past o: 0), or past the slots (not stored)
#pragma unroll
        for (int i = 0; i < kPer; ++i) value[b][i] = e + i < count ? to_float(run[e + i]) : 0.0f;
      }
    }
#pragma unroll
    for (int b = 0; b < kBatch; ++b) {
      const int e = e0 + b * step;
      if (e >= total) break;
      int lc = e / taps, tap = e - lc * taps;
#pragma unroll
      for (int i = 0; i < kPer; ++i) {
        const int window_tap = g.flip ? taps - 1 - tap : tap;
        const uint32_t at =
            w_s + static_cast<uint32_t>((lc / kV) * w_cv_bytes + (window_tap * kV + lc % kV) * 4);
        asm volatile("st.shared.f32 [%0], %1;" ::"r"(at), "f"(value[b][i]));
        if (++tap == taps) {
          tap = 0;
          ++lc;
        }
      }
    }
  }
}

// kV consecutive floats of shared memory at shared-window address `at` (8-byte aligned for kV 2).
// volatile: the compiler must neither merge these loads across tiles nor move them across the
// barriers around a restaging (the staged weights change under the same addresses); ptxas still
// schedules them freely among the global loads.
template <int kV>
__device__ __forceinline__ void load_shared(uint32_t at, float (&w)[kV]) {
  if constexpr (kV == 2) {
    asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(w[0]), "=f"(w[1]) : "r"(at));
  } else {
    asm volatile("ld.shared.f32 %0, [%1];" : "=f"(w[0]) : "r"(at));
  }
}

// p + a * b bytes, a and b 32-bit signed: one IMAD.WIDE. In PTX so that the compiler does not
// rewrite a chain of them into independent (base + u * stride) sums of three instructions each.
template <typename P>
__device__ __forceinline__ P* advance_bytes(P* p, int a, int b) {
  uint64_t r;
  asm("mad.wide.s32 %0, %1, %2, %3;"
      : "=l"(r)
      : "r"(a), "r"(b), "l"(reinterpret_cast<uint64_t>(p)));
  return reinterpret_cast<P*>(r);
}

// The FMAs of one input row for output rows [kR0, kR1) of a thread tile, all fed by this row:
// output row r takes kernel row ir - r * sh, whose weights are loaded first (kKW * kV floats per
// row: LDS.64 at immediate offsets). Column u of the window (x element q0 + u, at x_row + u * xs3
// bytes) feeds output j at tap t2 = u - j * kS: per output, u ascending is t2 ascending, so each
// accumulator takes the row's taps in order. Columns outside [lo, hi) (kEdge) are skipped.
template <typename T, int kV, int kKW, int kS, int kTH, int kTW, bool kEdge, int kR0, int kR1>
__device__ __forceinline__ void depthwise_blocked_row(const T* x_row, int xs3, uint32_t w_plane,
                                                      int ir, int sh, int lo, int hi,
                                                      float (&acc)[kTH][kTW][kV]) {
  constexpr int kCols = (kTW - 1) * kS + kKW;
  float wr[kR1 - kR0][kKW][kV];
#pragma unroll
  for (int r = kR0; r < kR1; ++r) {
    const uint32_t w_row = w_plane + static_cast<uint32_t>((ir - r * sh) * kKW * kV * 4);
#pragma unroll
    for (int t2 = 0; t2 < kKW; ++t2) load_shared<kV>(w_row + t2 * kV * 4, wr[r - kR0][t2]);
  }
  const T* x_col = x_row;
#pragma unroll
  for (int u = 0; u < kCols; ++u, x_col = advance_bytes(x_col, xs3, sizeof(T))) {
    if (kEdge && (u < lo || u >= hi)) continue;  // padding: skipped
    float xv[kV];
    load_column<T, kV>(x_col, xv);
#pragma unroll
    for (int r = kR0; r < kR1; ++r) {
#pragma unroll
      for (int j = 0; j < kTW; ++j) {
        const int t2 = u - j * kS;
        if (t2 < 0 || t2 >= kKW) continue;
#pragma unroll
        for (int v = 0; v < kV; ++v) {
          acc[r][j][v] = fmaf(xv[v], wr[r - kR0][t2][v], acc[r][j][v]);
        }
      }
    }
  }
}

// depthwise_blocked_row for the single output row r, a run-time index of a fully unrolled loop:
// tested against kR, kR + 1, ... at compile time.
template <typename T, int kV, int kKW, int kS, int kTH, int kTW, bool kEdge, int kR = 0>
__device__ __forceinline__ void depthwise_blocked_one_row(int r, const T* x_row, int xs3,
                                                          uint32_t w_plane, int ir, int sh, int lo,
                                                          int hi, float (&acc)[kTH][kTW][kV]) {
  if constexpr (kR < kTH) {
    if (r == kR) {
      depthwise_blocked_row<T, kV, kKW, kS, kTH, kTW, kEdge, kR, kR + 1>(x_row, xs3, w_plane, ir,
                                                                         sh, lo, hi, acc);
    } else {
      depthwise_blocked_one_row<T, kV, kKW, kS, kTH, kTW, kEdge, kR + 1>(r, x_row, xs3, w_plane, ir,
                                                                         sh, lo, hi, acc);
    }
  }
}

// The accumulators of one thread tile of the blocked variant: acc[kTH][kTW][kV] (rows x columns
// x channels) from +0 over the valid taps in row-major order. kEdge: the tile's span leaves x
// along the last dim (columns outside [lo, hi) are neither read nor used); otherwise no check
// along the last dim at all.
//   x_plane0  x + n * x_stride[0] + input channel (64-bit; offsets inside a plane are 32-bit)
//   w_cv      this thread's staged weights [tap][kV] (shared-window address)
template <typename T, int kV, int kKW, int kS, int kTH, int kTW, bool kEdge>
__device__ __forceinline__ void depthwise_blocked_tile(const ConvGeometry& g,
                                                       const DepthwiseTiling& t, const T* x_plane0,
                                                       uint32_t w_cv, int64_t d0, int oh0, int ow0,
                                                       float (&acc)[kTH][kTW][kV]) {
  constexpr int kCols = (kTW - 1) * kS + kKW;  // input columns of one row of the window
  constexpr int kSize = static_cast<int>(sizeof(T));
  const int q0 = ow0 * kS - static_cast<int>(g.pad_lo[2]);
  int lo = 0, hi = kCols;
  if constexpr (kEdge) {
    const DepthwiseColumns c = depthwise_blocked_columns(g, t, ow0);
    lo = static_cast<int>(c.lo);
    hi = static_cast<int>(c.hi);
  }
  const int sh = static_cast<int>(g.stride[1]);
  const int kh = static_cast<int>(g.kernel[1]);
  const int in_h = static_cast<int>(g.in[1]);
  const int xs2 = static_cast<int>(g.x_stride[2]);
  const int xs3 = static_cast<int>(g.x_stride[3]);
  const int rows = (kTH - 1) * sh + kh;
  const int ih0 = oh0 * sh - static_cast<int>(g.pad_lo[1]);

#pragma unroll
  for (int r = 0; r < kTH; ++r) {
#pragma unroll
    for (int j = 0; j < kTW; ++j) {
#pragma unroll
      for (int v = 0; v < kV; ++v) acc[r][j][v] = 0.0f;
    }
  }
  for (int t0 = 0; t0 < static_cast<int>(g.kernel[0]); ++t0) {
    int64_t i0;
    if (!tap_source(g, 0, d0, t0, i0)) continue;
    // Window row ir starts at x_row (element (i0, ih0 + ir, q0) of the plane; 64-bit arithmetic
    // here, as ih0 and q0 may be negative), advanced by one row per iteration.
    const T* x_row = x_plane0 + i0 * g.x_stride[1] + static_cast<int64_t>(ih0) * xs2 +
                     static_cast<int64_t>(q0) * xs3;
    const uint32_t w_plane = w_cv + static_cast<uint32_t>(t0 * kh * kKW * kV * 4);
    for (int ir = 0; ir < rows; ++ir, x_row = advance_bytes(x_row, xs2, kSize)) {
      const int ih = ih0 + ir;
      if (static_cast<unsigned>(ih) >= static_cast<unsigned>(in_h)) continue;  // padding
      // Input row ir is kernel row kr = ir - r * sh of output row r when 0 <= kr < kh.
      bool all_fed = true;
#pragma unroll
      for (int r = 0; r < kTH; ++r) all_fed = all_fed && ir - r * sh >= 0 && ir - r * sh < kh;
      if (all_fed) {  // the inner rows: each input column is loaded once for all kTH outputs
        depthwise_blocked_row<T, kV, kKW, kS, kTH, kTW, kEdge, 0, kTH>(x_row, xs3, w_plane, ir, sh,
                                                                       lo, hi, acc);
      } else {  // the first and last rows of the window: one output row at a time
#pragma unroll
        for (int r = 0; r < kTH; ++r) {
          if (ir - r * sh < 0 || ir - r * sh >= kh) continue;
          depthwise_blocked_one_row<T, kV, kKW, kS, kTH, kTW, kEdge>(r, x_row, xs3, w_plane, ir, sh,
                                                                     lo, hi, acc);
        }
      }
    }
  }
}

// Blocks per SM the blocked kernels are compiled for (their register cap): 7 for the 1-row 3x3
// tiles (<= 72 registers; their tile loop needs ~70, and without the cap the staging's loads
// lifted them to 77-80: one block per SM fewer), 4 for the rest (<= 128).
constexpr int depthwise_blocked_min_blocks(int kw, int th) {
  return kw == 3 && th == 1 ? 7 : 4;
}

// Blocked variant: see the file comment. Thread (tx, ty) of tile `tile` computes depthwise_item's
// channel vector x th rows x run columns.
template <typename T, typename TOut, int kV, int kKW, int kS, int kTH, int kTW>
__global__ void __launch_bounds__(kDepthwiseBlockedThreads, depthwise_blocked_min_blocks(kKW, kTH))
    conv_depthwise_blocked_kernel(const ConvGeometry g, const DepthwiseTiling t,
                                  const T* __restrict__ x, const T* __restrict__ w,
                                  const T* __restrict__ bias, TOut* __restrict__ out) {
  extern __shared__ float4 depthwise_smem[];
  const uint32_t w_s_addr = static_cast<uint32_t>(__cvta_generic_to_shared(depthwise_smem));
  const int64_t first = static_cast<int64_t>(blockIdx.x) * t.tiles_per_block;
  const int64_t last =
      first + t.tiles_per_block < t.tiles() ? first + t.tiles_per_block : t.tiles();
  int64_t staged = -1;  // channel tile whose weights are in shared memory
  for (int64_t tile = first; tile < last; ++tile) {
    const DepthwiseItem item = depthwise_item(g, t, tile, threadIdx.x, threadIdx.y);
    if (item.channel_tile != staged) {  // uniform over the block
      __syncthreads();                  // the previous tile's readers are done
      if (t.w_vector_bytes == 16) {
        stage_blocked_weights_vector<T, kV, 16>(g, t, item.channel_tile, w, w_s_addr);
      } else if (t.w_vector_bytes == 8) {
        stage_blocked_weights_vector<T, kV, 8>(g, t, item.channel_tile, w, w_s_addr);
      } else {
        stage_blocked_weights<T, kV>(g, t, item.channel_tile, w, w_s_addr);
      }
      __syncthreads();
      staged = item.channel_tile;
    }
    if (!item.valid) continue;
    const int64_t oc0 = item.channel_vector * kV;
    // Input channel: oc0 (multiplier 1, kV == 2), else oc0 / multiplier (kV == 1).
    const T* x_n = x + item.n * g.x_stride[0] + (kV == 2 ? oc0 : div_nonneg(oc0, g.opg));
    const uint32_t w_cv = w_s_addr + static_cast<uint32_t>(threadIdx.x * t.w_cv_stride * 4);
    const int oh0 = static_cast<int>(item.d1), ow0 = static_cast<int>(item.ow0);
    const bool interior = depthwise_blocked_interior(g, t, item.ow0);
    float acc[kTH][kTW][kV];
    if (interior) {
      depthwise_blocked_tile<T, kV, kKW, kS, kTH, kTW, false>(g, t, x_n, w_cv, item.d0, oh0, ow0,
                                                              acc);
    } else {
      depthwise_blocked_tile<T, kV, kKW, kS, kTH, kTW, true>(g, t, x_n, w_cv, item.d0, oh0, ow0,
                                                             acc);
    }
    // + bias, one rounding, stores (outputs past out[1] / out[2] skipped: interior tiles have
    // every column inside out).
    TOut* out_p = out + item.n * g.out_stride[0] + item.d0 * g.out_stride[1] + oc0;
    float b[kV];
#pragma unroll
    for (int v = 0; v < kV; ++v) {
      b[v] = g.has_bias ? to_float(bias[(oc0 + v) * g.bias_stride]) : 0.0f;
    }
    const int out_h = static_cast<int>(g.out[1]), out_w = static_cast<int>(g.out[2]);
    const int os2 = static_cast<int>(g.out_stride[2]), os3 = static_cast<int>(g.out_stride[3]);
#pragma unroll
    for (int r = 0; r < kTH; ++r) {
      if (oh0 + r >= out_h) break;
#pragma unroll
      for (int j = 0; j < kTW; ++j) {
        if (!interior && ow0 + j >= out_w) break;
        float values[kV];
#pragma unroll
        for (int v = 0; v < kV; ++v) values[v] = g.has_bias ? acc[r][j][v] + b[v] : acc[r][j][v];
        store_channels<TOut, kV>(out_p + ((oh0 + r) * os2 + (ow0 + j) * os3), values);
      }
    }
  }
}

}  // namespace gemmkit::cuda::conv_impl
