// Small-c convolution (the "small-c kernel"): few input channels (c <= 8, groups 1) from 16-bit x,
// e.g. ResNet's 7x7 / stride-2 stem or a VAE encoder's conv_in over RGB (c = 3).
//
// What it computes. The implicit GEMM of small_c/layout.h with K packed across taps: k = weight
// tap * c_pad + channel (c_pad = c rounded up to even), so a 3-channel 7x7 stem reduces over 196
// (13 k16 steps) instead of the 49 x 64 a GEMM with whole channel blocks per tap would multiply.
//   out[m][n] = round(sum over k16 steps s ascending of MMA_s(A, B) + bias[n])
// in fp32 from +0 (mma.sync m16n8k16, one chain per output), K's padding multiplying zeros, then
// one rounding to out's dtype. Deterministic and batch-invariant: an output's chain depends only
// on K, never on the tile, the grid or the batch.
//
// Contract (why_not_small_c, plan.h): bf16 / f16 x and weight, out in x's type or f32, bias in x's
// type; groups 1, c <= 8, no input dilation; any stride, kernel dilation, padding (asymmetric,
// negative), flip, 1-3 spatial dims; x, weight, out and bias with any strides (x and the weight
// are read element by element; out by 16-byte stores where plan.vector_out says so); 64-bit tile
// indices and offsets. blockDim = kSmallCThreads, gridDim.x = plan.grid (block b takes tiles b,
// b + grid, ...), dynamic shared memory plan.smem_bytes (layout in plan.h).
//
// How. Per tile, the block stages the input region as c_pad 16-bit channels per pixel (zeros
// outside x and past c), one pixel per thread and step, whose loads were issued during the previous
// tile (held in registers for up to 4 rounds of pixels); the weight block of its column block
// (tile_n() rows of K, zero-padded to whole k16 steps, rows of 8 k_steps + 4 words so ldmatrix
// reads are free of bank conflicts) when the column block changes. Each warp owns 32 positions x
// 32 channels: per k16 step it gathers its A fragments straight from the region (one 32-bit load
// per register: row base + k-pair offset, both from tables built once per block), loads B with two
// ldmatrix.x4 and issues 8 MMAs. The epilogue adds the bias, rounds into a staging tile in shared
// memory and writes each position's channels as 16-byte stores (contiguous rows of out).
//
// When it wins: the channel counts no 16-byte-vector GEMM takes (c = 3), where an unfold or a
// GEMM over whole channel blocks per tap spends most of its K on zeros; the kernel is bound by
// its output stores (a stem's output is 21x its input).
#pragma once

#include <cstdint>

#include "cuda/common/ptx.cuh"
#include "cuda/common/round_pair.cuh"
#include "cuda/conv/common/dtype.cuh"
#include "cuda/conv/small_c/layout.h"

namespace gemmkit::cuda::conv_impl {

template <typename T, typename TOut, int kWarpsN, int kPixelWords>
__global__ void __launch_bounds__(kSmallCThreads, kSmallCMinBlocks)
    conv_small_c_kernel(const ConvGeometry g, const SmallCPlan t, const T* __restrict__ x,
                        const T* __restrict__ w, const T* __restrict__ bias,
                        TOut* __restrict__ out) {
  static_assert(kWarpsN == 1 || kWarpsN == 2 || kWarpsN == 4, "1, 2 or 4 warps along N");
  static_assert(kPixelWords == 2 || kPixelWords == 4, "c_pad <= 4 or <= 8");
  constexpr int kTileM = kSmallCWarpM * (kSmallCWarps / kWarpsN);
  constexpr int kTileN = kSmallCWarpN * kWarpsN;
  constexpr bool kWideOut = sizeof(TOut) == 4;
  constexpr int kOutVector = 16 / static_cast<int>(sizeof(TOut));  // elements per 16-byte store
  constexpr int kRowChunks = kTileN / kOutVector;
  constexpr int kStoreChunks = kTileM * kRowChunks / kSmallCThreads;  // per thread and tile
  static_assert(kTileM * kRowChunks % kSmallCThreads == 0, "whole store rounds");
  extern __shared__ __align__(16) unsigned char small_c_smem[];
  uint32_t* region = reinterpret_cast<uint32_t*>(small_c_smem);  // channel pairs per pixel
  uint32_t* b_s = reinterpret_cast<uint32_t*>(small_c_smem + t.region_bytes);
  unsigned char* c_s = small_c_smem + t.region_bytes + t.b_bytes;
  int* row_base_s = reinterpret_cast<int*>(c_s + t.c_bytes);
  int* k_pair_s = row_base_s + kTileM;
  int* w_k_s = k_pair_s + t.k_steps * 8;  // weight offset of k within a row, -1 for zeros
  if (static_cast<int64_t>(blockIdx.x) >= t.tiles) return;  // uniform: never with plan's grid

  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, warp = tid >> 5;
  const int warp_m = (warp / kWarpsN) * kSmallCWarpM, warp_n = (warp % kWarpsN) * kSmallCWarpN;
  const int c = static_cast<int>(g.c), pixel_words = t.pixel_words();
  const int k_real = t.taps * t.c_pad;  // k < k_real holds data (channels past c read zeros)
  const uint16_t* x_bits = reinterpret_cast<const uint16_t*>(x);

  // What does not change from tile to tile: the row-base and k-pair tables, this lane's row bases
  // and ldmatrix address, the region pixels it stages and the output chunks it stores.
  for (int i = tid; i < kTileM; i += kSmallCThreads) row_base_s[i] = small_c_row_base(g, t, i);
  for (int i = tid; i < t.k_steps * 8; i += kSmallCThreads) {
    k_pair_s[i] = small_c_k_pair_offset(g, t, i);
  }
  for (int k = tid; k < 2 * t.b_words; k += kSmallCThreads) {
    int64_t offset = 0;
    w_k_s[k] = k < k_real && small_c_weight(g, t, 0, k, offset) ? static_cast<int>(offset) : -1;
  }
  __syncthreads();
  int row_base[2][2];
#pragma unroll
  for (int m16 = 0; m16 < 2; ++m16) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      row_base[m16][h] = row_base_s[warp_m + m16 * 16 + h * 8 + (lane >> 2)];
    }
  }
  // ldmatrix: lane l addresses row l % 8 of matrix l / 8 = (n8 tile 2 pair + l / 16, k words
  // 4 ((l / 8) % 2) of the step) in the weight block.
  const int b_row = warp_n + ((lane >> 4) << 3) + (lane & 7);
  const uint32_t b_lane = ptx::smem_address(b_s) +
                          static_cast<uint32_t>((b_row * t.b_words + ((lane >> 3) & 1) * 4) * 4);
  SmallCPixel held_pixel[kSmallCHeldRounds];
#pragma unroll
  for (int i = 0; i < kSmallCHeldRounds; ++i)
    held_pixel[i] = small_c_pixel(t, tid + i * kSmallCThreads);
  // (f32 outs, with twice the chunks, decode their positions per tile: registers.)
  constexpr int kHeldPositions = kWideOut ? 1 : kStoreChunks;
  int store_position[kHeldPositions];
#pragma unroll
  for (int j = 0; j < kHeldPositions; ++j) {
    store_position[j] = small_c_position(t, (tid + j * kSmallCThreads) / kRowChunks);
  }

  // The region pixels this thread stages (r = tid + i * kSmallCThreads, i < kSmallCHeldRounds),
  // loaded into registers one tile ahead: their loads are in flight through the previous tile's
  // MMAs, epilogue and stores. Pixels past those rounds load when they are stored.
  uint32_t held[kSmallCHeldRounds][kPixelWords];
  const auto load_pixel = [&](const SmallCTile& at, const SmallCPixel& q, bool real,
                              uint32_t(&words)[kPixelWords]) {
#pragma unroll
    for (int j = 0; j < kPixelWords; ++j) words[j] = 0u;
    int64_t offset = 0;
    if (real && small_c_pixel_offset(g, at, q, offset)) {
#pragma unroll
      for (int ci = 0; ci < 2 * kPixelWords; ++ci) {
        if (ci < c) {
          words[ci >> 1] |= static_cast<uint32_t>(__ldg(x_bits + offset + ci * g.x_stride[4]))
                            << (16 * (ci & 1));
        }
      }
    }
  };
  const auto store_pixel = [&](int r, const uint32_t(&words)[kPixelWords]) {
#pragma unroll
    for (int j = 0; j < kPixelWords; ++j) {
      if (j < pixel_words) region[r * pixel_words + j] = words[j];
    }
  };
  const auto load_held = [&](const SmallCTile& at) {
#pragma unroll
    for (int i = 0; i < kSmallCHeldRounds; ++i) {
      load_pixel(at, held_pixel[i], tid + i * kSmallCThreads < t.region_pixels(), held[i]);
    }
  };
  SmallCTile next = small_c_tile(g, t, blockIdx.x);
  load_held(next);

  int64_t staged_block = -1;
  float bias_r[4][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}, {0.0f, 0.0f}, {0.0f, 0.0f}};
  for (int64_t tile = blockIdx.x; tile < t.tiles; tile += gridDim.x) {
    const SmallCTile s = next;
    if (s.col_block != staged_block) {
      // The column block's weights (rows n, k pairs as words; zeros past o, c and K; the offsets
      // of k within a row from w_k_s), kSmallCWeightBatch words per thread with their loads issued
      // together; then the bias.
      staged_block = s.col_block;
      const int64_t oc0 = int64_t{s.col_block} * kTileN;
      const uint16_t* w_bits = reinterpret_cast<const uint16_t*>(w);
      const int words = kTileN * t.b_words;
      for (int base = tid; base < words; base += kSmallCThreads * kSmallCWeightBatch) {
        uint32_t v[kSmallCWeightBatch];
#pragma unroll
        for (int b = 0; b < kSmallCWeightBatch; ++b) {
          const int i = base + b * kSmallCThreads;
          const int n = i / t.b_words, word = i - n * t.b_words;
          const int64_t oc = oc0 + n;
          const int lo = i < words ? w_k_s[2 * word] : -1;
          const int hi = i < words ? w_k_s[2 * word + 1] : -1;
          const uint16_t* row = w_bits + (oc < g.o ? oc : 0) * g.w_stride[0];
          const uint32_t v_lo = oc < g.o && lo >= 0 ? __ldg(row + lo) : 0u;
          const uint32_t v_hi = oc < g.o && hi >= 0 ? __ldg(row + hi) : 0u;
          v[b] = v_lo | (v_hi << 16);
        }
#pragma unroll
        for (int b = 0; b < kSmallCWeightBatch; ++b) {
          const int i = base + b * kSmallCThreads;
          if (i < words) b_s[i] = v[b];
        }
      }
#pragma unroll
      for (int n8 = 0; n8 < 4; ++n8) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int64_t oc = oc0 + warp_n + n8 * 8 + 2 * (lane & 3) + e;
          bias_r[n8][e] = g.has_bias && oc < g.o ? to_float(bias[oc * g.bias_stride]) : 0.0f;
        }
      }
    }
    // The region: the held pixels, then any past them (loaded now).
#pragma unroll
    for (int i = 0; i < kSmallCHeldRounds; ++i) {
      const int r = tid + i * kSmallCThreads;
      if (r < t.region_pixels()) store_pixel(r, held[i]);
    }
    for (int r = tid + kSmallCHeldRounds * kSmallCThreads; r < t.region_pixels();
         r += kSmallCThreads) {
      uint32_t words[kPixelWords];
      load_pixel(s, small_c_pixel(t, r), true, words);
      store_pixel(r, words);
    }
    __syncthreads();  // region (and a new weight block) complete
    if (tile + gridDim.x < t.tiles) {
      next = small_c_tile(g, t, tile + gridDim.x);
      load_held(next);
    }

    float acc[2][4][4];
#pragma unroll
    for (int m16 = 0; m16 < 2; ++m16) {
#pragma unroll
      for (int n8 = 0; n8 < 4; ++n8) {
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[m16][n8][e] = 0.0f;
      }
    }
    for (int step = 0; step < t.k_steps; ++step) {
      const int pair_lo = k_pair_s[step * 8 + (lane & 3)];
      const int pair_hi = k_pair_s[step * 8 + (lane & 3) + 4];
      uint32_t a[2][4];
#pragma unroll
      for (int m16 = 0; m16 < 2; ++m16) {
        a[m16][0] = pair_lo >= 0 ? region[row_base[m16][0] + pair_lo] : 0u;
        a[m16][1] = pair_lo >= 0 ? region[row_base[m16][1] + pair_lo] : 0u;
        a[m16][2] = pair_hi >= 0 ? region[row_base[m16][0] + pair_hi] : 0u;
        a[m16][3] = pair_hi >= 0 ? region[row_base[m16][1] + pair_hi] : 0u;
      }
#pragma unroll
      for (int pair = 0; pair < 2; ++pair) {
        uint32_t b[4];
        ptx::ldmatrix_x4(b, b_lane + static_cast<uint32_t>((pair * 16 * t.b_words + step * 8) * 4));
#pragma unroll
        for (int m16 = 0; m16 < 2; ++m16) {
          ptx::mma_m16n8k16<T>(acc[m16][2 * pair], a[m16], b[0], b[1]);
          ptx::mma_m16n8k16<T>(acc[m16][2 * pair + 1], a[m16], b[2], b[3]);
        }
      }
    }

    // Epilogue: + bias, one rounding, into the staging tile (rows of c_row_bytes): 16-bit outs by
    // stmatrix (matrix l / 8 of lane l: rows + 8 ((l / 8) % 2), columns + 8 (l / 16) of an m16 x
    // n16 block), f32 outs as pairs.
#pragma unroll
    for (int m16 = 0; m16 < 2; ++m16) {
      if constexpr (kWideOut) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int row = warp_m + m16 * 16 + h * 8 + (lane >> 2);
#pragma unroll
          for (int n8 = 0; n8 < 4; ++n8) {
            const int col = warp_n + n8 * 8 + 2 * (lane & 3);
            *reinterpret_cast<float2*>(c_s + row * t.c_row_bytes + col * 4) = make_float2(
                acc[m16][n8][2 * h] + bias_r[n8][0], acc[m16][n8][2 * h + 1] + bias_r[n8][1]);
          }
        }
      } else {
        const int row = warp_m + m16 * 16 + ((lane >> 3) & 1) * 8 + (lane & 7);
#pragma unroll
        for (int pair = 0; pair < 2; ++pair) {
          uint32_t r[4];
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            const int n8 = 2 * pair + (j >> 1), h = j & 1;
            r[j] = round_pair<TOut>(acc[m16][n8][2 * h] + bias_r[n8][0],
                                    acc[m16][n8][2 * h + 1] + bias_r[n8][1]);
          }
          const int col = warp_n + pair * 16 + (lane >> 4) * 8;
          ptx::stmatrix_x4(ptx::smem_address(c_s + row * t.c_row_bytes + col * 2), r);
        }
      }
    }
    __syncthreads();  // staging tile complete; the region and weights are read no more

    if (t.vector_out) {
      const int64_t oc0 = int64_t{s.col_block} * kTileN;
#pragma unroll
      for (int j = 0; j < kStoreChunks; ++j) {
        const int i = tid + j * kSmallCThreads;
        const int m = i / kRowChunks, n = (i % kRowChunks) * kOutVector;
        int64_t offset = 0;
        const int position = kWideOut ? small_c_position(t, m) : store_position[j];
        if (!small_c_out_offset_at(g, t, s, position, n, offset)) continue;
        const unsigned char* src = c_s + m * t.c_row_bytes + n * static_cast<int>(sizeof(TOut));
        if (oc0 + n + kOutVector <= g.o) {
          *reinterpret_cast<uint4*>(out + offset) = *reinterpret_cast<const uint4*>(src);
        } else {
          for (int e = 0; oc0 + n + e < g.o; ++e) {
            out[offset + e] = reinterpret_cast<const TOut*>(src)[e];
          }
        }
      }
    } else {
      for (int i = tid; i < kTileM * kTileN; i += kSmallCThreads) {
        const int m = i / kTileN, n = i - m * kTileN;
        int64_t offset = 0;
        if (!small_c_out_offset(g, t, s, m, n, offset)) continue;
        out[offset] = *reinterpret_cast<const TOut*>(c_s + m * t.c_row_bytes +
                                                     n * static_cast<int>(sizeof(TOut)));
      }
    }
  }
}

}  // namespace gemmkit::cuda::conv_impl
