// Tensor-core depthwise convolution (variant DepthwiseVariant::mma): 2-D depthwise layers (or 3-D
// with one kernel tap along dim 0) with multiplier 1, stride 1 and no dilation along the last two
// dims, kernels up to 9 x 9 (ConvNeXt's 7x7, MobileNet's 3x3), 16-bit x and out of the same type.
//
// What it computes: out[n][d][h][w][c] = round(acc + bias[c]), where acc, fp32 from +0, takes for
// each kernel row i ascending one mma.m16n8k16 that adds the row's products x[n][d'][h + i -
// pad_h][w + t - pad_w][c] * weight[c][i][t] over its taps t (flip applied; taps on padding read
// zeros). The additions inside an MMA are the hardware's, so the bits are not the direct kernel's;
// they are the same on every run and for every grid. Each MMA row also multiplies 16 - kw other
// inputs of its window row by the Toeplitz matrix's zeros, so an Inf or NaN in x reaches, as NaN,
// outputs up to 15 columns beside the ones whose windows hold it (finite x: no effect).
//
// When it wins: the CUDA-core variants issue 1.5-3.3 instructions per FMA (docs/conv.md); here a
// kernel row costs one MMA (and 256-512 bytes of ldmatrix) per 16 x 8 outputs of a channel. But
// each block runs its phases back to back with no next tile to overlap, so auto takes it only
// for 7 x 7 and larger kernels whose 32-column tiles fill one wave of resident blocks
// (why_not_depthwise_mma_by_default); GEMMKIT_CONV_DEPTHWISE=mma forces it wherever it applies.
//
// How, per block tile (16 channels x 16 output rows x 8 * kPieces output columns of one plane):
//   1. each warp loads its two channels' weights (when the channel tile changes), staged after 2
//      as zero-padded rows;
//   2. cp.async stages the input window, (16 + kh - 1) rows x (8 * kPieces + 8) columns, as
//      pixels of two 16-byte channel chunks (zeros outside x);
//   3. each warp transposes whole window rows in place: ldmatrix.trans of 8 pixels x 8 channels,
//      stmatrix into 16 channel rows of 8-column blocks;
//   4. warp w takes channels w and w + 8: per kernel row i, the row's Toeplitz B fragment
//      (B[k][n] = w[i][k - n]) from the weight row, then per 8-column piece j one MMA of A =
//      window rows i .. i + 15, columns 8j .. 8j + 15 (one ldmatrix.x4 for the first piece, an
//      x2 of the new 8 columns for each next one);
//   5. + bias, rounded, staged as (channel, row, column) over the window;
//   6. ldmatrix.trans of 8 channels x 8 columns gives each lane 2 channels of one pixel, stored
//      as 32 bits.
//
// Registers: __launch_bounds__ at depthwise_mma_registers (80 for 2- and 4-piece tiles: 3 blocks
// of 8 warps per SM). ptxas then keeps 12-16 bytes of tile state in local memory, stored at the
// start and read once by the stores, so mma.cu is compiled without -warn-spills.
//
// Contract (why_not_depthwise_mma, plan_depthwise_mma): x with unit channel stride, 16-byte
// aligned, strides multiples of 8 elements, c % 8 == 0; out with unit channel stride, 4-byte
// aligned, strides multiples of 2; weight and bias any strides; 32-bit offsets inside a plane of
// x or out and inside the weight, 32-bit spatial coordinates. blockDim = kDepthwiseMmaThreads;
// block b takes tiles b * t.tiles_per_block ..; dynamic shared memory
// depthwise_mma_smem_bytes(g, kPieces) (<= 48 KiB).
#pragma once

#include <cstdint>

#include "cuda/common/ptx.cuh"
#include "cuda/conv/common/dtype.cuh"
#include "cuda/conv/depthwise/layout.h"

namespace gemmkit::cuda::conv_impl {

template <typename T, int kPieces>
__global__ void __launch_bounds__(kDepthwiseMmaThreads,
                                  65536 / (kDepthwiseMmaThreads * depthwise_mma_registers(kPieces)))
    conv_depthwise_mma_kernel(const ConvGeometry g, const DepthwiseTiling t,
                              const T* __restrict__ x, const T* __restrict__ w,
                              const T* __restrict__ bias, T* __restrict__ out) {
  extern __shared__ __align__(16) unsigned char depthwise_mma_smem[];
  constexpr int kWarps = kDepthwiseMmaThreads / 32;
  constexpr int kInCols = 8 * kPieces + 8;
  constexpr int kRowMatrices = kInCols / 4;  // 8 pixels x 8 channels each
  constexpr int kRowLoads = (kRowMatrices + 3) / 4;
  const int row_units = depthwise_mma_row_units(kPieces);
  const int channel_units = depthwise_mma_channel_units(kPieces);
  const int out_row_units = depthwise_mma_out_row_units(kPieces);
  const int out_channel_units = depthwise_mma_out_channel_units(kPieces);
  const int in_rows = depthwise_mma_in_rows(g);
  const int kh = static_cast<int>(g.kernel[1]), kw = static_cast<int>(g.kernel[2]);
  const uint32_t window = ptx::smem_address(depthwise_mma_smem);
  uint16_t* w_s =
      reinterpret_cast<uint16_t*>(depthwise_mma_smem + depthwise_mma_window_bytes(g, kPieces));
  const int tid = static_cast<int>(threadIdx.x), lane = tid & 31, warp = tid >> 5;
  const bool decode32 = depthwise_staged_decode32(t);
  const int64_t first = static_cast<int64_t>(blockIdx.x) * t.tiles_per_block;
  const int64_t last =
      first + t.tiles_per_block < t.tiles() ? first + t.tiles_per_block : t.tiles();
  int64_t staged_channel_tile = -1;
  for (int64_t tile = first; tile < last; ++tile) {
    const DepthwiseStagedTile s = decode32 ? depthwise_mma_tile<uint32_t>(g, t, tile)
                                           : depthwise_mma_tile<int64_t>(g, t, tile);

    // 1. Weights, when the channel tile changes: each warp stages the rows of its own two
    // channels (the ones it multiplies in step 4), lane l slot l (window tap l - 8; zeros around
    // the taps). The loads go out before the window's copies (they would queue behind them) and
    // land in registers; the stores follow the copies.
    const bool restage = s.channel_tile != staged_channel_tile;
    uint16_t wv[2][kDepthwiseMmaMaxKernel];
    if (restage) {
      const int tap = lane - 8;
      const bool real_tap = tap >= 0 && tap < kw;
      const int tap_offset = real_tap ? static_cast<int>(weight_tap(g, 2, tap) * g.w_stride[3]) : 0;
      const int w_h = static_cast<int>(g.w_stride[2]);
#pragma unroll
      for (int k = 0; k < 2; ++k) {
        const int64_t ch = s.c0 + warp + kWarps * k;
        const T* w_channel = w + ch * g.w_stride[0] + tap_offset;
#pragma unroll
        for (int r = 0; r < kDepthwiseMmaMaxKernel; ++r) {
          wv[k][r] = 0;
          if (r < kh && real_tap && ch < g.c) {
            const T v = w_channel[static_cast<int>(weight_tap(g, 1, r)) * w_h];
            wv[k][r] = *reinterpret_cast<const uint16_t*>(&v);
          }
        }
      }
    }

    // 2. The window as pixels: thread t copies chunk t % 2 of pixels t / 2, t / 2 + 128, ...
    // (row-major). Offsets inside the plane are 32-bit (why_not_depthwise_mma).
    const T* x_plane = x + s.n * g.x_stride[0] + s.i0 * g.x_stride[1] + s.c0 + 8 * (tid & 1);
    {
      const int ih0 = static_cast<int>(s.ih0), iw0 = static_cast<int>(s.iw0);
      const int x_h = static_cast<int>(g.x_stride[2]), x_w = static_cast<int>(g.x_stride[3]);
      const unsigned in_h =
          s.plane_ok && s.c0 + 8 * (tid & 1) < g.c ? static_cast<unsigned>(g.in[1]) : 0u;
      const unsigned in_w = static_cast<unsigned>(g.in[2]);
      for (int pixel = tid >> 1; pixel < in_rows * kInCols; pixel += kDepthwiseMmaThreads / 2) {
        const int r = pixel / kInCols, col = pixel - r * kInCols;
        const int ih = ih0 + r, iw = iw0 + col;
        const bool real = static_cast<unsigned>(ih) < in_h && static_cast<unsigned>(iw) < in_w;
        ptx::cp_async_cg16(window + 16 * (r * row_units + depthwise_mma_pixel_unit(col, tid & 1)),
                           real ? x_plane + (ih * x_h + iw * x_w) : x, real ? 16u : 0u);
      }
    }
    ptx::cp_async_commit();

    if (restage) {
      if (lane < kDepthwiseMmaWeightRow) {
#pragma unroll
        for (int k = 0; k < 2; ++k) {
#pragma unroll
          for (int r = 0; r < kDepthwiseMmaMaxKernel; ++r) {
            if (r < kh) {
              w_s[((warp + kWarps * k) * kh + r) * kDepthwiseMmaWeightRow + lane] = wv[k][r];
            }
          }
        }
      }
      staged_channel_tile = s.channel_tile;
    }
    ptx::cp_async_wait<0>();
    __syncthreads();

    // 3. Transpose whole rows in place: (pixel, channel) -> (channel, 8-column block). Matrix m
    // of a row is block m / 2, chunk m % 2; the last load repeats the last matrix where the
    // row's count is not a multiple of 4 (the same bytes stored twice).
    for (int r = warp; r < in_rows; r += kWarps) {
      const uint32_t row = window + 16 * r * row_units;
      uint32_t v[kRowLoads][4];
#pragma unroll
      for (int l = 0; l < kRowLoads; ++l) {
        const int m = min(4 * l + (lane >> 3), kRowMatrices - 1);
        ptx::ldmatrix_x4_trans(
            v[l], row + 16 * depthwise_mma_pixel_unit(8 * (m >> 1) + (lane & 7), m & 1));
      }
      __syncwarp();
#pragma unroll
      for (int l = 0; l < kRowLoads; ++l) {
        const int m = min(4 * l + (lane >> 3), kRowMatrices - 1);
        ptx::stmatrix_x4(row + 16 * ((8 * (m & 1) + (lane & 7)) * channel_units + (m >> 1)), v[l]);
      }
    }
    __syncthreads();

    // 4. MMAs: channels warp and warp + 8, kPieces pieces of 16 rows x 8 columns each.
    float acc[2][kPieces][4];
    const int slot = depthwise_mma_b_slot(lane, 0, 0);
    const int a_offset = depthwise_mma_a_row(lane) * row_units + depthwise_mma_a_block(lane);
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const int ch = warp + kWarps * k;
#pragma unroll
      for (int j = 0; j < kPieces; ++j) {
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[k][j][e] = 0.0f;
      }
      const uint16_t* wrow = w_s + ch * kh * kDepthwiseMmaWeightRow;
      uint32_t a_row = window + 16 * (a_offset + ch * channel_units);
      for (int i = 0; i < kh; ++i, wrow += kDepthwiseMmaWeightRow, a_row += 16 * row_units) {
        const uint32_t b0 = wrow[slot] | (static_cast<uint32_t>(wrow[slot + 1]) << 16);
        const uint32_t b1 = wrow[slot + 8] | (static_cast<uint32_t>(wrow[slot + 9]) << 16);
        // Piece j's A is 8-column blocks j and j + 1: block j + 1 (registers 2, 3) is the next
        // piece's block j (registers 0, 1), so later pieces load one block (ldmatrix.x2; lanes
        // 0-15 address it).
        uint32_t a[4];
        ptx::ldmatrix_x4(a, a_row);
        ptx::mma_m16n8k16<T>(acc[k][0], a, b0, b1);
#pragma unroll
        for (int j = 1; j < kPieces; ++j) {
          uint32_t next[2];
          ptx::ldmatrix_x2(next, a_row + 16 * (j + 1));
          a[0] = a[2];
          a[1] = a[3];
          a[2] = next[0];
          a[3] = next[1];
          ptx::mma_m16n8k16<T>(acc[k][j], a, b0, b1);
        }
      }
    }
    __syncthreads();  // every warp is done with the window: it becomes the output staging

    // 5. + bias, rounded, into (channel, row, 8-column block) over the window.
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const int ch = warp + kWarps * k;
      const float b =
          g.has_bias && s.c0 + ch < g.c ? to_float(bias[(s.c0 + ch) * g.bias_stride]) : 0.0f;
#pragma unroll
      for (int j = 0; j < kPieces; ++j) {
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
          const int row = (lane >> 2) + 8 * hh;
          const uint32_t address =
              window + 16 * (ch * out_channel_units + row * out_row_units + j) + 4 * (lane & 3);
          const uint32_t packed = round_pair<T>(acc[k][j][2 * hh] + b, acc[k][j][2 * hh + 1] + b);
          asm volatile("st.shared.u32 [%0], %1;" ::"r"(address), "r"(packed) : "memory");
        }
      }
    }
    __syncthreads();

    // 6. Out: items (row, piece), two per ldmatrix.x4.trans (lanes 0-15 address the first, as
    // channels 0-7 then 8-15); register 2e + h holds, for item 2u + e, channels 8h + 2 (l % 4)
    // .. + 1 of column 8 * piece + l / 4.
    T* out_plane = out + s.n * g.out_stride[0] + s.d0 * g.out_stride[1] + s.c0 + 2 * (lane & 3);
    const int out_h = static_cast<int>(g.out[1]), out_w = static_cast<int>(g.out[2]);
    const int o_h = static_cast<int>(g.out_stride[2]), o_w = static_cast<int>(g.out_stride[3]);
    const int oh0 = static_cast<int>(s.oh0), ow0 = static_cast<int>(s.ow0) + (lane >> 2);
    const bool second_octet = s.c0 + 8 < g.c;
    for (int u = warp; u < kDepthwiseMmaRows * kPieces / 2; u += kWarps) {
      const int mine = 2 * u + (lane >> 4);
      uint32_t v[4];
      ptx::ldmatrix_x4_trans(
          v, window + 16 * ((8 * ((lane >> 3) & 1) + (lane & 7)) * out_channel_units +
                            (mine / kPieces) * out_row_units + mine % kPieces));
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int item = 2 * u + e;
        const int oh = oh0 + item / kPieces, ow = ow0 + 8 * (item % kPieces);
        if (oh < out_h && ow < out_w) {
          T* dst = out_plane + (oh * o_h + ow * o_w);
          *reinterpret_cast<uint32_t*>(dst) = v[2 * e];
          if (second_octet) *reinterpret_cast<uint32_t*>(dst + 8) = v[2 * e + 1];
        }
      }
    }
    __syncthreads();  // the staging is the next tile's window
  }
}

}  // namespace gemmkit::cuda::conv_impl
