// Depthwise convolution: groups == c (c/groups == 1), any channel multiplier m = o / c.
//
// Computes out[n, p..., oc] = sum over window taps t (row-major) of x[n, src(p, t)..., oc / m] *
// w[oc, wt(t)..., 0], one fp32 accumulator per output with fused multiply-adds from +0, taps on
// padding / dilation holes skipped, then + bias[oc], then one rounding. That is the generic
// direct kernel's order for c/groups == 1, so every variant gives bits identical to it.
//
// Contract: x and out have unit channel strides (other strides arbitrary); kV divides o, out's
// address and non-channel strides suit kV-element stores, x kV-element loads when kV > 1 reads
// x as vectors (depthwise_config checks). The grid is 1-D: block b takes tiles [b *
// tiles_per_block, ...) of DepthwiseTiling (depthwise/layout.h), so any count fits gridDim.x.
// Variants (DepthwiseTiling::variant, chosen by depthwise_config, depthwise/plan.h):
//   blocked  2-D / 3-D, kernel width 3, 5 or 7, stride 1 or 2 along the last dim, no dilation
//            along the last two dims (dim 0: anything), weight taps one stride apart, 32-bit
//            offsets inside a plane: every 2-D depthwise layer of MobileNet / EfficientNet /
//            ConvNeXt (blocked.cuh).
//   narrow / wide  the window variants below: 1-D (Mamba's causal conv1d) and 2-D kernel widths
//            <= 8 that the blocked variant does not instantiate; generic: anything else
//            (dilations, last-dim strides > 2, planes of 2^31 elements: int64 offsets).
//
// The blocked variant's kernel is in blocked.cuh, the staged one's in staged.cuh, the
// tensor-core one's in mma.cuh; this header holds the window and generic variants and the loads,
// stores and weight staging they share.
#pragma once

#include <cstring>
#include <type_traits>

#include "cuda/conv/common/dtype.cuh"
#include "cuda/conv/depthwise/layout.h"

namespace gemmkit::cuda::conv_impl {

// The kV inputs that output channels oc0 .. oc0 + kV - 1 read at the x element at `p` (its
// channel 0): input channel (oc0 + v) / multiplier.
template <typename T, int kV>
__device__ __forceinline__ void depthwise_load_x(const T* p, bool x_vector, int64_t oc0,
                                                 int64_t multiplier, float (&xv)[kV]) {
  if constexpr (kV > 1) {
    if (x_vector) {  // multiplier 1
      const Vec<T, kV> raw = *reinterpret_cast<const Vec<T, kV>*>(p + oc0);
#pragma unroll
      for (int v = 0; v < kV; ++v) xv[v] = to_float(raw.v[v]);
      return;
    }
  }
#pragma unroll
  for (int v = 0; v < kV; ++v) {
    xv[v] = to_float(p[multiplier == 1 ? oc0 + v : div_nonneg(oc0 + v, multiplier)]);
  }
}

// kV consecutive fp32 weights of thread tx at `tap` from the staged layout
// [tap][kV / kP][cvt][kP] (kP = min(kV, 4): float4 pieces, a warp's reads consecutive).
template <int kV>
__device__ __forceinline__ void load_weights(const float* w_s, int tap, int cvt, int tx,
                                             float (&wv)[kV]) {
  constexpr int kP = kV < 4 ? kV : 4;
#pragma unroll
  for (int piece = 0; piece < kV / kP; ++piece) {
    const float* p = w_s + ((tap * (kV / kP) + piece) * cvt + tx) * kP;
    if constexpr (kP == 4) {
      const float4 w4 = *reinterpret_cast<const float4*>(p);
      wv[piece * 4 + 0] = w4.x;
      wv[piece * 4 + 1] = w4.y;
      wv[piece * 4 + 2] = w4.z;
      wv[piece * 4 + 3] = w4.w;
    } else if constexpr (kP == 2) {
      const float2 w2 = *reinterpret_cast<const float2*>(p);
      wv[0] = w2.x;
      wv[1] = w2.y;
    } else {
      wv[0] = p[0];
    }
  }
}

// Stores kV consecutive values (16-byte pieces; the caller guarantees alignment).
template <typename TOut, int kV>
__device__ __forceinline__ void store_vector(TOut* p, const float (&values)[kV]) {
  constexpr int kPiece =
      static_cast<int>(16 / sizeof(TOut)) < kV ? static_cast<int>(16 / sizeof(TOut)) : kV;
#pragma unroll
  for (int base = 0; base < kV; base += kPiece) {
    Vec<TOut, kPiece> piece;
#pragma unroll
    for (int i = 0; i < kPiece; ++i) piece.v[i] = from_float<TOut>(values[base + i]);
    *reinterpret_cast<Vec<TOut, kPiece>*>(p + base) = piece;
  }
}

// Stages the weights of channel tile `channel_tile` (cvt * kV output channels) as fp32
// [tap][kV / kP][cvt][kP], taps in window order (flip applied), zeros past o. 32-bit index
// math: taps * cvt * kV <= 12288 floats (48 KiB).
template <typename T, int kV>
__device__ __forceinline__ void stage_depthwise_weights(const ConvGeometry& g, int cvt,
                                                        int64_t channel_tile, const T* w,
                                                        float* w_s) {
  constexpr int kP = kV < 4 ? kV : 4;
  const int width = cvt * kV;
  const int k1 = static_cast<int>(g.kernel[1]), k2 = static_cast<int>(g.kernel[2]);
  const int kernel_rows = static_cast<int>(g.kernel[0]) * k1;
  const int threads = static_cast<int>(blockDim.x * blockDim.y);
  const int64_t c0 = channel_tile * width;
  for (int i = static_cast<int>(threadIdx.y * blockDim.x + threadIdx.x); i < kernel_rows * width;
       i += threads) {
    const int row = i / width;
    const int lc = i - row * width;  // channel in the tile: thread lc / kV, element lc % kV
    const int t0 = row / k1;
    const int t1 = row - t0 * k1;
    const int tx = lc / kV;
    const int v = lc - tx * kV;
    const int64_t oc = c0 + lc;
    const T* w_row = w + oc * g.w_stride[0] + weight_tap(g, 0, t0) * g.w_stride[1] +
                     weight_tap(g, 1, t1) * g.w_stride[2];
    for (int t2 = 0; t2 < k2; ++t2) {
      const int tap = row * k2 + t2;
      const float value = oc < g.o ? to_float(w_row[weight_tap(g, 2, t2) * g.w_stride[3]]) : 0.0f;
      w_s[((tap * (kV / kP) + v / kP) * cvt + tx) * kP + v % kP] = value;
    }
  }
}

// ---- Two-channel loads and stores (blocked and staged variants) ------------------------------

// The two 16-bit channels of the 4-byte word `raw` as fp32 (exact): bf16 widens with a shift and
// a mask, f16 with two conversions.
template <typename T>
__device__ __forceinline__ void widen_pair(uint32_t raw, float (&xv)[2]) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    xv[0] = __uint_as_float(raw << 16);
    xv[1] = __uint_as_float(raw & 0xffff0000u);
  } else {
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&raw));
    xv[0] = f.x;
    xv[1] = f.y;
  }
}

// Stores kV rounded values at p (one 4-byte store for two 16-bit values, 8 bytes for two f32;
// each value rounded to nearest even on its own, as from_float does). In PTX because the compiler
// splits a pair store through a reinterpreted pointer into two.
template <typename TOut, int kV>
__device__ __forceinline__ void store_channels(TOut* p, const float (&values)[kV]) {
  if constexpr (kV == 2 && std::is_same_v<TOut, float>) {
    asm volatile("st.global.v2.f32 [%0], {%1, %2};" ::"l"(p), "f"(values[0]), "f"(values[1])
                 : "memory");
  } else if constexpr (kV == 2) {
    const uint32_t bits = round_pair<TOut>(values[0], values[1]);
    asm volatile("st.global.b32 [%0], %1;" ::"l"(p), "r"(bits) : "memory");
  } else {
    *p = from_float<TOut>(values[0]);
  }
}

// ---- Window and generic variants ---------------------------------------------------------------
//
// Work of a thread: kV consecutive output channels (threadIdx.x: a warp reads a position's
// channels as consecutive vectors) x kRun consecutive outputs of one output row:
//   acc[kRun][kV]   (TILE_H, TILE_W, CHANNELS) = (1, 4, 8) narrow bf16, (1, 8, 4) wide
// The block stages its channel tile's weights once (fp32, flip applied, [tap][piece][cvt][4]:
// a warp's 16-byte reads are consecutive, conflict-free); per kernel row the thread holds that
// row's weights in registers (wr[kMaxK][kV]) and streams the row's input window of
// (kRun - 1) * kS + kernel columns once, each column feeding every output whose tap it is.
// int64 offsets; x_vector only when m == 1 and x suits kV-element loads; dynamic shared memory
// = taps * cvt * kV floats. Window variants (kMaxK > 0): m == 1, x_vector, and along the last
// dim stride kS, no kernel or input dilation, kernel <= kMaxK.

// kMaxK == 0: the generic variant (any stride / dilation along the last dim, per-tap loads);
// else the window variant for last-dim stride kS and kernels up to kMaxK wide.
template <typename T, typename TOut, int kV, int kRun, int kMaxK, int kS>
__global__ void __launch_bounds__(256, 2)
    conv_depthwise_kernel(const ConvGeometry g, const DepthwiseTiling t, const T* __restrict__ x,
                          const T* __restrict__ w, const T* __restrict__ bias,
                          TOut* __restrict__ out) {
  extern __shared__ float4 depthwise_smem[];
  float* w_s = reinterpret_cast<float*>(depthwise_smem);
  const int tx = static_cast<int>(threadIdx.x);
  const int cvt = static_cast<int>(t.cvt);
  const int k1 = static_cast<int>(g.kernel[1]), k2 = static_cast<int>(g.kernel[2]);
  const int64_t first = static_cast<int64_t>(blockIdx.x) * t.tiles_per_block;
  const int64_t last =
      first + t.tiles_per_block < t.tiles() ? first + t.tiles_per_block : t.tiles();
  int64_t staged = -1;  // channel tile whose weights are in shared memory
  for (int64_t tile = first; tile < last; ++tile) {
    const DepthwiseItem item = depthwise_item(g, t, tile, tx, threadIdx.y);
    if (item.channel_tile != staged) {  // uniform over the block
      __syncthreads();                  // the previous tile's readers are done
      stage_depthwise_weights<T, kV>(g, cvt, item.channel_tile, w, w_s);
      __syncthreads();
      staged = item.channel_tile;
    }
    if (!item.valid) continue;

    const int64_t oc0 = item.channel_vector * kV;
    float acc[kRun][kV];
#pragma unroll
    for (int j = 0; j < kRun; ++j) {
#pragma unroll
      for (int v = 0; v < kV; ++v) acc[j][v] = 0.0f;
    }
    const T* x_n = x + item.n * g.x_stride[0];
    const int64_t xs3 = g.x_stride[3];
    for (int t0 = 0; t0 < static_cast<int>(g.kernel[0]); ++t0) {
      int64_t i0;
      if (!tap_source(g, 0, item.d0, t0, i0)) continue;
      for (int t1 = 0; t1 < k1; ++t1) {
        int64_t i1;
        if (!tap_source(g, 1, item.d1, t1, i1)) continue;
        const T* x_row = x_n + i0 * g.x_stride[1] + i1 * g.x_stride[2];
        const int tap_row = (t0 * k1 + t1) * k2;
        if constexpr (kMaxK > 0) {
          // Window: input column q0 + u feeds output j at tap u - j * kS; per output, u
          // ascending is tap ascending, so each accumulator sees the taps in row-major order.
          float wr[kMaxK][kV];
#pragma unroll
          for (int t2 = 0; t2 < kMaxK; ++t2) {
            if (t2 < k2) load_weights<kV>(w_s, tap_row + t2, cvt, tx, wr[t2]);
          }
          constexpr int kSpan = (kRun - 1) * kS + kMaxK;
          const int span = (kRun - 1) * kS + k2;
          const int64_t q0 = item.ow0 * kS - g.pad_lo[2];
          const T* x_q0 = x_row + q0 * xs3 + oc0;
#pragma unroll
          for (int u = 0; u < kSpan; ++u) {
            const int64_t q = q0 + u;
            if (u >= span || q < 0 || q >= g.in[2]) continue;  // padding: skipped
            const Vec<T, kV> raw = *reinterpret_cast<const Vec<T, kV>*>(x_q0 + u * xs3);
            float xv[kV];
#pragma unroll
            for (int v = 0; v < kV; ++v) xv[v] = to_float(raw.v[v]);
#pragma unroll
            for (int j = 0; j < kRun; ++j) {
              constexpr int kNone = -1;
              const int t2 = u - j * kS >= 0 && u - j * kS < kMaxK ? u - j * kS : kNone;
              if (t2 == kNone || t2 >= k2) continue;
#pragma unroll
              for (int v = 0; v < kV; ++v) acc[j][v] = fmaf(xv[v], wr[t2][v], acc[j][v]);
            }
          }
        } else {
          for (int t2 = 0; t2 < k2; ++t2) {
            float wv[kV];
            load_weights<kV>(w_s, tap_row + t2, cvt, tx, wv);
#pragma unroll
            for (int j = 0; j < kRun; ++j) {
              int64_t i2;
              if (!tap_source(g, 2, item.ow0 + j, t2, i2)) continue;
              float xv[kV];
              depthwise_load_x<T, kV>(x_row + i2 * xs3, t.x_vector, oc0, g.opg, xv);
#pragma unroll
              for (int v = 0; v < kV; ++v) acc[j][v] = fmaf(xv[v], wv[v], acc[j][v]);
            }
          }
        }
      }
    }

    float b[kV];
#pragma unroll
    for (int v = 0; v < kV; ++v) {
      b[v] = g.has_bias ? to_float(bias[(oc0 + v) * g.bias_stride]) : 0.0f;
    }
    TOut* out_row = out + item.n * g.out_stride[0] + item.d0 * g.out_stride[1] +
                    item.d1 * g.out_stride[2] + oc0;
#pragma unroll
    for (int j = 0; j < kRun; ++j) {
      if (item.ow0 + j >= g.out[2]) break;
      float values[kV];
#pragma unroll
      for (int v = 0; v < kV; ++v) values[v] = g.has_bias ? acc[j][v] + b[v] : acc[j][v];
      store_vector<TOut, kV>(out_row + (item.ow0 + j) * g.out_stride[3], values);
    }
  }
}

}  // namespace gemmkit::cuda::conv_impl
