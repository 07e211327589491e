// Depthwise convolution: groups == c (c/groups == 1), any channel multiplier m = o / c.
//
// Computes out[n, p..., oc] = sum over window taps t (row-major) of x[n, src(p, t)..., oc / m] *
// w[oc, wt(t)..., 0], one fp32 accumulator per output with fused multiply-adds from +0, taps on
// padding / dilation holes skipped, then + bias[oc], then one rounding. That is the generic
// direct kernel's order for c/groups == 1, so both paths give bitwise identical results.
//
// Contract: x and out have unit channel strides (other strides arbitrary, int64 offsets);
// kV (<= kDepthwiseMaxVector) divides o, out's address and non-channel strides suit kV-element
// stores, and t.x_vector only when m == 1 and x suits kV-element loads (depthwise_config
// checks); dynamic shared memory = taps * t.cvt * kV floats. kWindow requires stride 1, kernel
// dilation 1, input dilation 1 and kernel[2] <= kDepthwiseMaxRegisterTaps along the last dim.
// Grid-stride over tiles on gridDim.x only.
// Tiles (conv_geometry.h, DepthwiseTiling): thread (tx, ty) computes kV consecutive output
// channels (tx fastest: a warp covers up to 32 * kV consecutive channels) x kDepthwiseTile
// consecutive outputs along the last spatial dim:
//   acc[kDepthwiseTile][kV]  (4 x 4 fp32 registers)
// The tile's weights live in shared memory as fp32 [tap][cvt * kV] (flip applied while
// staging); a thread reads kV of them as one vector per tap and uses them for all its outputs.
// kWindow: per kernel row, the thread loads the kDepthwiseTile + kernel - 1 inputs of its window
// once into registers (xw[kDepthwiseTile + kDepthwiseMaxRegisterTaps - 1][kV]) instead of
// kDepthwiseTile * kernel loads; otherwise each (output, tap) pair loads its input (any stride
// and dilation).
// When it wins: every depthwise / channel-multiplier layer (MobileNet, ConvNeXt, Mamba's causal
// conv1d): it is memory-bound where GEMM formulations are not even applicable.
#pragma once

#include "cuda/conv/conv_dtype.cuh"
#include "cuda/conv/conv_geometry.h"

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

// kV consecutive fp32 weights from shared memory (aligned to kV * 4 bytes).
template <int kV>
__device__ __forceinline__ void load_weights(const float* p, float (&wv)[kV]) {
  if constexpr (kV == 4) {
    const float4 w4 = *reinterpret_cast<const float4*>(p);
    wv[0] = w4.x;
    wv[1] = w4.y;
    wv[2] = w4.z;
    wv[3] = w4.w;
  } else if constexpr (kV == 2) {
    const float2 w2 = *reinterpret_cast<const float2*>(p);
    wv[0] = w2.x;
    wv[1] = w2.y;
  } else {
#pragma unroll
    for (int v = 0; v < kV; ++v) wv[v] = p[v];
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

template <typename T, typename TOut, int kV, bool kWindow>
__global__ void __launch_bounds__(256, 2)
    conv_depthwise_kernel(const ConvGeometry g, const DepthwiseTiling t, const T* __restrict__ x,
                          const T* __restrict__ w, const T* __restrict__ bias,
                          TOut* __restrict__ out) {
  extern __shared__ float depthwise_weights[];  // [tap][t.cvt * kV], window-tap order
  constexpr int kTile = kDepthwiseTile;
  constexpr int kRegTaps = kDepthwiseMaxRegisterTaps;
  const int64_t taps = g.kernel_positions();
  const int64_t width = t.cvt * kV;  // channels per tile
  const int64_t tiles = t.channel_tiles * t.strip_tiles;
  const int64_t thread = threadIdx.y * blockDim.x + threadIdx.x;
  const int64_t threads = blockDim.x * blockDim.y;
  const int64_t k2 = g.kernel[2];
  int64_t staged = -1;  // channel tile whose weights are in shared memory
  for (int64_t iteration = 0;; ++iteration) {
    const int64_t tile = grid_stride_index(blockIdx.x, 0, iteration, gridDim.x, 1);
    if (tile >= tiles) break;  // uniform over the block
    const int64_t channel_tile = div_nonneg(tile, t.strip_tiles);
    if (channel_tile != staged) {
      __syncthreads();  // the previous tile's readers are done
      const int64_t c0 = channel_tile * width;
      for (int64_t i = thread; i < taps * width; i += threads) {
        const int64_t tap = div_nonneg(i, width);
        const int64_t oc = c0 + (i - tap * width);
        float value = 0.0f;
        if (oc < g.o) {
          const Tap k = decode_tap(g, tap);
          value = to_float(w[oc * g.w_stride[0] + weight_tap(g, 0, k.d[0]) * g.w_stride[1] +
                             weight_tap(g, 1, k.d[1]) * g.w_stride[2] +
                             weight_tap(g, 2, k.d[2]) * g.w_stride[3]]);
        }
        depthwise_weights[i] = value;
      }
      __syncthreads();
      staged = channel_tile;
    }
    const DepthwiseItem item = depthwise_item(t, tile, threadIdx.x, threadIdx.y);
    if (!item.valid) continue;

    const int64_t oc0 = item.channel_vector * kV;
    const int64_t row = div_nonneg(item.strip, t.strips_per_row);
    const int64_t ow0 = (item.strip - row * t.strips_per_row) * kTile;
    const int64_t q1 = div_nonneg(row, g.out[1]);
    const int64_t od1 = row - q1 * g.out[1];
    const int64_t n = div_nonneg(q1, g.out[0]);
    const int64_t od0 = q1 - n * g.out[0];
    const float* w_lane = depthwise_weights + threadIdx.x * kV;  // (tap, v) at [tap * width + v]

    float acc[kTile][kV];
#pragma unroll
    for (int j = 0; j < kTile; ++j) {
#pragma unroll
      for (int v = 0; v < kV; ++v) acc[j][v] = 0.0f;
    }
    const T* x_n = x + n * g.x_stride[0];
    for (int64_t t0 = 0; t0 < g.kernel[0]; ++t0) {
      int64_t i0;
      if (!tap_source(g, 0, od0, t0, i0)) continue;
      for (int64_t t1 = 0; t1 < g.kernel[1]; ++t1) {
        int64_t i1;
        if (!tap_source(g, 1, od1, t1, i1)) continue;
        const T* x_row = x_n + i0 * g.x_stride[1] + i1 * g.x_stride[2];
        const float* w_row = w_lane + (t0 * g.kernel[1] + t1) * k2 * width;
        if constexpr (kWindow) {
          // Stride 1, no dilation along the last dim: window position u reads input column
          // ow0 - pad + u once and feeds output j at tap u - j.
          const int64_t base = ow0 - g.pad_lo[2];
          float xw[kTile + kRegTaps - 1][kV];
          unsigned valid = 0;  // bit u: window position u is a real input element
#pragma unroll
          for (int u = 0; u < kTile + kRegTaps - 1; ++u) {
            const int64_t q = base + u;
            if (u < kTile + k2 - 1 && q >= 0 && q < g.in[2]) {
              depthwise_load_x<T, kV>(x_row + q * g.x_stride[3], t.x_vector, oc0, g.opg, xw[u]);
              valid |= 1u << u;
            } else {
#pragma unroll
              for (int v = 0; v < kV; ++v) xw[u][v] = 0.0f;
            }
          }
#pragma unroll
          for (int t2 = 0; t2 < kRegTaps; ++t2) {
            if (t2 >= k2) break;
            float wv[kV];
            load_weights<kV>(w_row + t2 * width, wv);
#pragma unroll
            for (int j = 0; j < kTile; ++j) {
              if ((valid >> (j + t2)) & 1u) {
#pragma unroll
                for (int v = 0; v < kV; ++v) acc[j][v] = fmaf(xw[j + t2][v], wv[v], acc[j][v]);
              }
            }
          }
        } else {
          for (int64_t t2 = 0; t2 < k2; ++t2) {
            float wv[kV];
            load_weights<kV>(w_row + t2 * width, wv);
#pragma unroll
            for (int j = 0; j < kTile; ++j) {
              int64_t i2;
              if (!tap_source(g, 2, ow0 + j, t2, i2)) continue;
              float xv[kV];
              depthwise_load_x<T, kV>(x_row + i2 * g.x_stride[3], t.x_vector, oc0, g.opg, xv);
#pragma unroll
              for (int v = 0; v < kV; ++v) acc[j][v] = fmaf(xv[v], wv[v], acc[j][v]);
            }
          }
        }
      }
    }

    float b[kV];
#pragma unroll
    for (int v = 0; v < kV; ++v)
      b[v] = g.has_bias ? to_float(bias[(oc0 + v) * g.bias_stride]) : 0.0f;
    TOut* out_row = out + n * g.out_stride[0] + od0 * g.out_stride[1] + od1 * g.out_stride[2] + oc0;
#pragma unroll
    for (int j = 0; j < kTile; ++j) {
      if (ow0 + j >= g.out[2]) break;
      float values[kV];
#pragma unroll
      for (int v = 0; v < kV; ++v) values[v] = g.has_bias ? acc[j][v] + b[v] : acc[j][v];
      store_vector<TOut, kV>(out_row + (ow0 + j) * g.out_stride[3], values);
    }
  }
}

}  // namespace gemmkit::cuda::conv_impl
