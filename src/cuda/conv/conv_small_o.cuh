// Small-o direct convolution: o <= kSmallOMaxO (8) output channels, groups == 1 (output heads
// such as a VAE's conv_out: 128 channels in, 3 out).
//
// Computes out[n, p..., oc] = sum over window taps t and channels ci of x[n, src(p, t)..., ci] *
// w[oc, wt(t)..., ci] + bias[oc]. Order: each of the `lanes` lanes sharing an output accumulates,
// in one fp32 register per output with fused multiply-adds from +0, over taps (row-major; taps
// on padding / dilation holes skipped), then its channel vectors cv = lane, lane + lanes, ...
// ascending, then the kV channels of a vector ascending; the lanes' partial sums are then
// combined by a butterfly (xor offsets lanes/2, ..., 1; each level computes a + b, which is
// commutative, so every lane holds the same bits), then + bias, then one rounding.
// Deterministic; not the generic kernel's order.
//
// Contract: groups == 1, o <= kO (4 or kSmallOMaxO), x has unit channel stride (other strides
// arbitrary, int64 offsets), kV divides c and suits x's alignment and strides
// (vector_width_for); the weight (any strides) is staged in dynamic shared memory in x's type,
// o * taps * c elements (<= 48 KiB, why_not_small_o). Grid-stride over strips on gridDim.x
// only; blockDim.x = 256 (whole warps take part in the shuffles).
// Tiles (SmallOTiling): `lanes` = 2^lanes_log2 consecutive lanes own a strip of
// kSmallOPositions consecutive outputs along the last spatial dim; per lane
//   acc[kSmallOPositions][kO]  (4 x 4 or 4 x 8 fp32 registers)
// so each shared-memory weight vector feeds 4 outputs, and a warp reads the channels of one
// input element as consecutive kV-element vectors (16 bytes when aligned).
// When it wins: few outputs per position with a long reduction (c * taps), where a GEMM has
// m = o <= 8 and wastes nearly all of its tile; the kernel streams x once per tap.
#pragma once

#include "cuda/conv/conv_dtype.cuh"
#include "cuda/conv/conv_geometry.h"

namespace gemmkit::cuda::conv_impl {

template <typename T, typename TOut, int kV, int kO>
__global__ void __launch_bounds__(256, 2)
    conv_small_o_kernel(const ConvGeometry g, const SmallOTiling t, const T* __restrict__ x,
                        const T* __restrict__ w, const T* __restrict__ bias,
                        TOut* __restrict__ out) {
  extern __shared__ __align__(16) unsigned char small_o_smem[];
  T* w_s = reinterpret_cast<T*>(small_o_smem);  // [o][tap][c], window-tap order
  constexpr int kP = kSmallOPositions;
  const int64_t taps = g.kernel_positions();
  const int64_t per_oc = taps * g.c;
  for (int64_t i = threadIdx.x; i < g.o * per_oc; i += blockDim.x) {
    const int64_t oc = div_nonneg(i, per_oc);
    const int64_t rest = i - oc * per_oc;
    const int64_t tap = div_nonneg(rest, g.c);
    const int64_t ci = rest - tap * g.c;
    const Tap k = decode_tap(g, tap);
    w_s[i] = w[oc * g.w_stride[0] + weight_tap(g, 0, k.d[0]) * g.w_stride[1] +
               weight_tap(g, 1, k.d[1]) * g.w_stride[2] + weight_tap(g, 2, k.d[2]) * g.w_stride[3] +
               ci * g.w_stride[4]];
  }
  __syncthreads();

  const int lanes = 1 << t.lanes_log2;
  const int lane = static_cast<int>(threadIdx.x) & (lanes - 1);
  const int64_t strip_in_block = threadIdx.x >> t.lanes_log2;
  const int64_t warp_first_strip = (threadIdx.x & ~31u) >> t.lanes_log2;
  for (int64_t iteration = 0;; ++iteration) {
    const int64_t warp_item =
        grid_stride_index(blockIdx.x, warp_first_strip, iteration, gridDim.x, t.strips_per_block);
    if (warp_item >= t.strips) break;  // uniform over the warp
    const int64_t strip =
        grid_stride_index(blockIdx.x, strip_in_block, iteration, gridDim.x, t.strips_per_block);
    const bool active = strip < t.strips;
    const int64_t row = div_nonneg(active ? strip : 0, t.strips_per_row);
    const int64_t ow0 = ((active ? strip : 0) - row * t.strips_per_row) * kP;
    const int64_t q1 = div_nonneg(row, g.out[1]);
    const int64_t od1 = row - q1 * g.out[1];
    const int64_t n = div_nonneg(q1, g.out[0]);
    const int64_t od0 = q1 - n * g.out[0];

    float acc[kP][kO];
#pragma unroll
    for (int j = 0; j < kP; ++j) {
#pragma unroll
      for (int oc = 0; oc < kO; ++oc) acc[j][oc] = 0.0f;
    }
    if (active) {
      const T* x_n = x + n * g.x_stride[0];
      for (int64_t t0 = 0; t0 < g.kernel[0]; ++t0) {
        int64_t i0;
        if (!tap_source(g, 0, od0, t0, i0)) continue;
        for (int64_t t1 = 0; t1 < g.kernel[1]; ++t1) {
          int64_t i1;
          if (!tap_source(g, 1, od1, t1, i1)) continue;
          const T* x_row = x_n + i0 * g.x_stride[1] + i1 * g.x_stride[2];
          for (int64_t t2 = 0; t2 < g.kernel[2]; ++t2) {
            const T* xp[kP];
            unsigned valid = 0;
#pragma unroll
            for (int j = 0; j < kP; ++j) {
              int64_t i2 = 0;
              if (ow0 + j < g.out[2] && tap_source(g, 2, ow0 + j, t2, i2)) valid |= 1u << j;
              xp[j] = x_row + i2 * g.x_stride[3];
            }
            if (valid == 0) continue;
            const T* w_tap = w_s + ((t0 * g.kernel[1] + t1) * g.kernel[2] + t2) * g.c;
            for (int64_t cv = lane; cv < t.channel_vectors; cv += lanes) {
              const int64_t ci = cv * kV;
              float xv[kP][kV];
#pragma unroll
              for (int j = 0; j < kP; ++j) {
                if ((valid >> j) & 1u) {
                  const Vec<T, kV> raw = *reinterpret_cast<const Vec<T, kV>*>(xp[j] + ci);
#pragma unroll
                  for (int v = 0; v < kV; ++v) xv[j][v] = to_float(raw.v[v]);
                } else {
#pragma unroll
                  for (int v = 0; v < kV; ++v) xv[j][v] = 0.0f;
                }
              }
#pragma unroll
              for (int oc = 0; oc < kO; ++oc) {
                if (oc >= g.o) break;
                const Vec<T, kV> raw =
                    *reinterpret_cast<const Vec<T, kV>*>(w_tap + oc * per_oc + ci);
#pragma unroll
                for (int j = 0; j < kP; ++j) {
                  if (((valid >> j) & 1u) == 0) continue;
#pragma unroll
                  for (int v = 0; v < kV; ++v) {
                    acc[j][oc] = fmaf(xv[j][v], to_float(raw.v[v]), acc[j][oc]);
                  }
                }
              }
            }
          }
        }
      }
    }
    // Combine the lanes of each strip (the whole warp takes part; inactive strips add zeros).
    for (int offset = lanes >> 1; offset > 0; offset >>= 1) {
#pragma unroll
      for (int j = 0; j < kP; ++j) {
#pragma unroll
        for (int oc = 0; oc < kO; ++oc) {
          if (oc < g.o) acc[j][oc] += __shfl_xor_sync(0xffffffffu, acc[j][oc], offset);
        }
      }
    }
    if (active) {
      TOut* out_row = out + n * g.out_stride[0] + od0 * g.out_stride[1] + od1 * g.out_stride[2];
#pragma unroll
      for (int j = 0; j < kP; ++j) {
        if (ow0 + j >= g.out[2]) break;
        TOut* out_p = out_row + (ow0 + j) * g.out_stride[3];
#pragma unroll
        for (int oc = 0; oc < kO; ++oc) {
          if (oc >= g.o) break;
          if (((j * kO + oc) & (lanes - 1)) != lane) continue;  // spread the stores over lanes
          float value = acc[j][oc];
          if (g.has_bias) value += to_float(bias[oc * g.bias_stride]);
          out_p[oc * g.out_stride[4]] = from_float<TOut>(value);
        }
      }
    }
  }
}

}  // namespace gemmkit::cuda::conv_impl
