// Small-o direct convolution: o <= kSmallOMaxO (8) output channels, groups == 1 (output heads
// such as a VAE's conv_out: 128 channels in, 3 out). Two kernels; the tap-GEMM kernel of
// taps.cuh runs before both where it applies (16-bit x, taps * o <= 64).
//
// Tensor-core kernel (conv_small_o_mma_kernel, 16-bit x): a block owns an output tile of one
// plane and multiplies its whole input region (tile + kernel - 1 per dim) by every tap's
// weights at once, P[r][tap * o + oc] = sum_ci x[r][ci] * w[oc][tap][ci]: an implicit GEMM with
// M = region positions (16 per MMA row block), N = taps * o (27 of 32 columns used for a 3x3
// conv to 3 channels, instead of 3 of 8 when N = o), K = c, in chunks of 32 channels (two
// m16n8k16 MMAs, fp32 accumulation, chunks ascending). So every input element is read once per
// tile (no per-tap re-read) and the MMAs run at N utilisation taps * o / 8-rounded. P goes to
// shared memory; each output then sums, in fp32 from +0, the P entries of its valid taps in
// row-major tap order (taps on padding are skipped), then + bias[oc], then one rounding.
// Deterministic; the MMA's internal summation order is the hardware's.
// Contract: kernel of one tap along dim 0, stride / dilations 1 along dims 1 and 2, c % 8 == 0,
// x 16-byte aligned with non-channel strides multiples of 8 (16-byte loads of 8 channels);
// smem = SmallOTiling::weight_bytes + region * p_stride * 4 (plan_small_o_mma).
// Tile (REGION_H, REGION_W, CHANNELS) = (16, 16, c) for 2-D: 256 region positions = 2 M-tiles
// of 16 for each of the 8 warps; the output tile is (14, 14) for a 3x3 kernel, so the halo
// costs 31% more MMA work and L2 reads, not DRAM reads (neighbour tiles hit L2).
// Weights as MMA B fragments in shared memory, [n_tile][chunk][lane] 16-byte units (a warp
// reads 512 consecutive bytes); A fragments come straight from global memory as one 16-byte
// load per (row, chunk): k-slots {2t, 2t+1, 2t+8, 2t+9} of lane t of a quad hold channels
// 8t .. 8t + 3 of the chunk in the first MMA, 8t + 4 .. 8t + 7 in the second, and B uses the
// same permutation, so the product is unchanged.
//
// CUDA-core kernel (conv_small_o_kernel, f32 x and every other problem): each of the `lanes`
// lanes sharing an output accumulates, in one fp32 register per output with fused
// multiply-adds from +0, over taps (row-major; taps on padding / dilation holes skipped), then
// its channel vectors cv = lane, lane + lanes, ... ascending, then the kV channels of a vector
// ascending; the lanes' partial sums are then combined by a butterfly (xor offsets lanes/2, ...,
// 1; each level computes a + b, which is commutative, so every lane holds the same bits), then
// + bias, then one rounding. Deterministic; not the generic kernel's order.
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
// When they win: few outputs per position with a long reduction (c * taps), where a GEMM has
// m = o <= 8 and wastes nearly all of its tile; both stream x once per tile or tap.
#pragma once

#include <type_traits>

#include "cuda/common/ptx.cuh"
#include "cuda/conv/common/dtype.cuh"
#include "cuda/conv/small_o/layout.h"

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

template <typename T, typename TOut>
__global__ void __launch_bounds__(kSmallOMmaThreads, 2)
    conv_small_o_mma_kernel(const ConvGeometry g, const SmallOTiling t, const T* __restrict__ x,
                            const T* __restrict__ w, const T* __restrict__ bias,
                            TOut* __restrict__ out) {
  extern __shared__ __align__(16) unsigned char small_o_smem[];
  uint4* w_s = reinterpret_cast<uint4*>(small_o_smem);                   // [n_tile][chunk][lane]
  float* p_s = reinterpret_cast<float*>(small_o_smem + t.weight_bytes);  // P, small_o_p_index
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, warp = tid >> 5;
  const int quad_row = lane >> 2, quad_lane = lane & 3;
  const int o = static_cast<int>(g.o), c = static_cast<int>(g.c);
  const int k1 = static_cast<int>(g.kernel[1]), k2 = static_cast<int>(g.kernel[2]);
  const int n_cols = static_cast<int>(t.n_cols), n_tiles = static_cast<int>(t.n_tiles);
  const int chunks = static_cast<int>(t.chunks);

  // Weights once per block: unit (nt, chunk, lane) = 8 channels of column nt * 8 + lane / 4.
  const T zero = from_float<T>(0.0f);
  for (int i = tid; i < n_tiles * chunks * 32; i += kSmallOMmaThreads) {
    const int l = i & 31;
    const int unit = i >> 5;
    const int nt = unit / chunks;
    const int chunk = unit - nt * chunks;
    const int n = nt * 8 + (l >> 2);
    const int ch0 = chunk * kSmallOMmaChunk + (l & 3) * 8;
    Vec<T, 8> v;
#pragma unroll
    for (int e = 0; e < 8; ++e) v.v[e] = zero;
    if (n < n_cols) {
      const int tap = n / o;
      const int oc = n - tap * o;
      const int t1 = tap / k2;
      const int t2 = tap - t1 * k2;
      const T* wp = w + oc * g.w_stride[0] + weight_tap(g, 1, t1) * g.w_stride[2] +
                    weight_tap(g, 2, t2) * g.w_stride[3];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        if (ch0 + e < c) v.v[e] = wp[static_cast<int64_t>(ch0 + e) * g.w_stride[4]];
      }
    }
    w_s[i] = *reinterpret_cast<const uint4*>(&v);
  }
  __syncthreads();

  const int region_w = static_cast<int>(t.region_w);
  const int m_pairs = static_cast<int>(t.region()) / 32;
  const int tile_w = static_cast<int>(t.tile_w);
  const int outputs = static_cast<int>(t.tile_h) * tile_w * o;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * t.tiles_per_block;
  const int64_t last = first + t.tiles_per_block < t.tiles ? first + t.tiles_per_block : t.tiles;
  for (int64_t tile = first; tile < last; ++tile) {
    const SmallOTile s = small_o_tile(g, t, tile);
    int64_t i0 = 0;
    const bool plane_ok = tap_source(g, 0, s.d0, 0, i0);  // else every tap is padding
    const T* x_plane = x + s.n * g.x_stride[0] + i0 * g.x_stride[1];
    const int64_t ih0 = s.oh0 - g.pad_lo[1], iw0 = s.ow0 - g.pad_lo[2];
    for (int mp = warp; plane_ok && mp < m_pairs; mp += kSmallOMmaThreads / 32) {
      // Fragment rows: region positions mp * 32 + mt * 16 + half * 8 + quad_row.
      const T* src[2][2];
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          const int r = mp * 32 + mt * 16 + half * 8 + quad_row;
          const int rh = r / region_w;
          const int64_t ih = ih0 + rh, iw = iw0 + (r - rh * region_w);
          const bool inside = ih >= 0 && ih < g.in[1] && iw >= 0 && iw < g.in[2];
          src[mt][half] =
              inside ? x_plane + ih * g.x_stride[2] + iw * g.x_stride[3] + quad_lane * 8 : nullptr;
        }
      }
      for (int ng = 0; ng < n_tiles; ng += 4) {
        float acc[2][4][4];
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[mt][j][e] = 0.0f;
          }
        }
        for (int chunk = 0; chunk < chunks; ++chunk) {
          const int ch0 = chunk * kSmallOMmaChunk;
          uint4 a[2][2];
#pragma unroll
          for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
            for (int half = 0; half < 2; ++half) {
              a[mt][half] = make_uint4(0u, 0u, 0u, 0u);
              if (src[mt][half] != nullptr && ch0 + quad_lane * 8 < c) {
                a[mt][half] = *reinterpret_cast<const uint4*>(src[mt][half] + ch0);
              }
            }
          }
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            if (ng + j >= n_tiles) break;
            const uint4 b = w_s[((ng + j) * chunks + chunk) * 32 + lane];
#pragma unroll
            for (int mt = 0; mt < 2; ++mt) {
              const uint32_t lo[4] = {a[mt][0].x, a[mt][1].x, a[mt][0].y, a[mt][1].y};
              ptx::mma_m16n8k16<T>(acc[mt][j], lo, b.x, b.y);
              const uint32_t hi[4] = {a[mt][0].z, a[mt][1].z, a[mt][0].w, a[mt][1].w};
              ptx::mma_m16n8k16<T>(acc[mt][j], hi, b.z, b.w);
            }
          }
        }
#pragma unroll
        for (int mt = 0; mt < 2; ++mt) {
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            if (ng + j >= n_tiles) break;
            const int r = mp * 32 + mt * 16 + quad_row;
            const int col = (ng + j) * 8 + quad_lane * 2;
            *reinterpret_cast<float2*>(p_s + small_o_p_index(t, r, col)) =
                make_float2(acc[mt][j][0], acc[mt][j][1]);
            *reinterpret_cast<float2*>(p_s + small_o_p_index(t, r + 8, col)) =
                make_float2(acc[mt][j][2], acc[mt][j][3]);
          }
        }
      }
    }
    __syncthreads();
    for (int i = tid; i < outputs; i += kSmallOMmaThreads) {
      const int pos = i / o;
      const int oc = i - pos * o;
      const int ph = pos / tile_w;
      const int pw = pos - ph * tile_w;
      const int64_t oh = s.oh0 + ph, ow = s.ow0 + pw;
      if (oh >= g.out[1] || ow >= g.out[2]) continue;
      float sum = 0.0f;
      for (int t1 = 0; plane_ok && t1 < k1; ++t1) {
        const int64_t ih = ih0 + ph + t1;
        if (ih < 0 || ih >= g.in[1]) continue;
        for (int t2 = 0; t2 < k2; ++t2) {
          const int64_t iw = iw0 + pw + t2;
          if (iw < 0 || iw >= g.in[2]) continue;
          sum += p_s[small_o_p_index(t, (ph + t1) * region_w + pw + t2, (t1 * k2 + t2) * o + oc)];
        }
      }
      if (g.has_bias) sum += to_float(bias[oc * g.bias_stride]);
      out[s.n * g.out_stride[0] + s.d0 * g.out_stride[1] + oh * g.out_stride[2] +
          ow * g.out_stride[3] + oc * g.out_stride[4]] = from_float<TOut>(sum);
    }
    __syncthreads();  // P is rewritten by the next tile
  }
}

}  // namespace gemmkit::cuda::conv_impl
