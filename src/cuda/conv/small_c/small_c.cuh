// Small-c convolution (the "small-c kernel"): few input channels per group from 16-bit x — c <= 8
// with one group, e.g. ResNet's 7x7 / stride-2 stem or a VAE encoder's conv_in over RGB (c = 3),
// or groups of 8 channels, e.g. ResNeXt's 3x3 with 32 groups of 8 -> 8.
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
// type; groups 1 and c <= 8, or c/groups == 8 with o/groups in {8, .., 128} dividing tile_n() and
// x in 16-byte channel octets; no input dilation; any stride, kernel dilation, padding (asymmetric,
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
// With groups, the region holds the column block's groups side by side (16 bytes each, copied by
// cp.async into one of two buffers during the previous tile) and each n8 tile's A fragments read
// its own group's words.
//
// When it wins: the channel counts no 16-byte-vector GEMM takes (c = 3), where an unfold or a
// GEMM over whole channel blocks per tap spends most of its K on zeros, and groups too narrow
// for a GEMM's channel block (8 of 64); the kernel is bound by the instructions of each tile.
#pragma once

#include <cstdint>

#include "cuda/common/ptx.cuh"
#include "cuda/common/round_pair.cuh"
#include "cuda/conv/common/dtype.cuh"
#include "cuda/conv/small_c/layout.h"

namespace gemmkit::cuda::conv_impl {

template <typename T, typename TOut, int kWarpsN, int kPixelWords, bool kGrouped>
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
  int* pixel_s = w_k_s + 2 * t.b_words;   // with groups: SmallCPixel of each region pixel
  if (static_cast<int64_t>(blockIdx.x) >= t.tiles) return;  // uniform: never with plan's grid

  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, warp = tid >> 5;
  const int warp_m = (warp / kWarpsN) * kSmallCWarpM, warp_n = (warp % kWarpsN) * kSmallCWarpN;
  const int c = static_cast<int>(g.c), pixel_stride = t.pixel_stride;
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
  if constexpr (kGrouped) {
    for (int r = tid; r < t.region_pixels(); r += kSmallCThreads) {
      pixel_s[r] = small_c_pixel(t, r).packed;
    }
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
      if (j < pixel_stride) region[r * pixel_stride + j] = words[j];
    }
  };
  const auto load_held = [&](const SmallCTile& at) {
    if constexpr (!kGrouped) {  // grouped regions are copied by cp.async instead
#pragma unroll
      for (int i = 0; i < kSmallCHeldRounds; ++i) {
        load_pixel(at, held_pixel[i], tid + i * kSmallCThreads < t.region_pixels(), held[i]);
      }
    }
  };
  // With groups: the region of tile `at` into buffer `b`, each pixel's 16 bytes per group of the
  // column block by cp.async (zeros outside x and past the last group), one commit group. A thread
  // copies one group (groups_per_block, a power of two <= 16, divides the block) of pixels
  // copy_pixel0, + copy_pixel_step, ..., their coordinates from pixel_s.
  const int region_buffer_words = static_cast<int>(t.region_buffer_bytes / 4);
  const int copy_group = tid % t.groups_per_block;
  const int copy_pixel0 = tid / t.groups_per_block;
  const int copy_pixel_step = kSmallCThreads / t.groups_per_block;
  const auto copy_region = [&](const SmallCTile& at, int b) {
    const int64_t group = small_c_block_group0(t, at.col_block) + copy_group;
    const bool real_group = group < g.groups;
    const T* x_group = x + group * kSmallCMaxC;
    uint32_t address = ptx::smem_address(region + b * region_buffer_words) +
                       static_cast<uint32_t>((copy_pixel0 * pixel_stride + copy_group * 4) * 4);
    const uint32_t address_step = static_cast<uint32_t>(copy_pixel_step * pixel_stride * 4);
    for (int r = copy_pixel0; r < t.region_pixels(); r += copy_pixel_step) {
      SmallCPixel q;
      q.packed = pixel_s[r];
      int64_t offset = 0;
      const bool real = real_group && small_c_pixel_offset(g, at, q, offset);
      ptx::cp_async_cg16(address, real ? x_group + offset : x, real ? 16u : 0u);
      address += address_step;
    }
    ptx::cp_async_commit();
  };
  SmallCTile next = small_c_tile(g, t, blockIdx.x);
  if constexpr (kGrouped) {
    copy_region(next, 0);
  } else {
    load_held(next);
  }
  int buffer = 0;  // the region buffer of the current tile (always 0 without groups)
  // With groups, the A fragments of n8 tile j read its group's channels: this word further on.
  int group_word[4];
#pragma unroll
  for (int n8 = 0; n8 < 4; ++n8) group_word[n8] = small_c_group_word(t, warp_n + n8 * 8);

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
    if constexpr (kGrouped) {
      // This tile's copies (issued during the previous tile, or just before the loop) complete;
      // the barrier below publishes them.
      ptx::cp_async_wait<0>();
    } else {
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
    }
    __syncthreads();  // region (and a new weight block) complete
    if (tile + gridDim.x < t.tiles) {
      next = small_c_tile(g, t, tile + gridDim.x);
      if constexpr (kGrouped) {
        copy_region(next, buffer ^ 1);  // every thread is past the MMAs that read it last
      } else {
        load_held(next);
      }
    }
    const uint32_t* region_now = region + buffer * region_buffer_words;

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
      // A fragments of the n8 tiles' group (all one group without groups), at word offset gw.
      uint32_t a[2][4];
      const auto gather = [&](int gw) {
#pragma unroll
        for (int m16 = 0; m16 < 2; ++m16) {
          a[m16][0] = pair_lo >= 0 ? region_now[row_base[m16][0] + pair_lo + gw] : 0u;
          a[m16][1] = pair_lo >= 0 ? region_now[row_base[m16][1] + pair_lo + gw] : 0u;
          a[m16][2] = pair_hi >= 0 ? region_now[row_base[m16][0] + pair_hi + gw] : 0u;
          a[m16][3] = pair_hi >= 0 ? region_now[row_base[m16][1] + pair_hi + gw] : 0u;
        }
      };
      if constexpr (!kGrouped) gather(0);
#pragma unroll
      for (int pair = 0; pair < 2; ++pair) {
        uint32_t b[4];
        ptx::ldmatrix_x4(b, b_lane + static_cast<uint32_t>((pair * 16 * t.b_words + step * 8) * 4));
#pragma unroll
        for (int half = 0; half < 2; ++half) {
          if constexpr (kGrouped) gather(group_word[2 * pair + half]);
#pragma unroll
          for (int m16 = 0; m16 < 2; ++m16) {
            ptx::mma_m16n8k16<T>(acc[m16][2 * pair + half], a[m16], b[2 * half], b[2 * half + 1]);
          }
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
    if constexpr (kGrouped) buffer ^= 1;
  }
}

}  // namespace gemmkit::cuda::conv_impl
