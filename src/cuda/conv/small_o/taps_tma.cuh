// TMA-fed tap-GEMM small-o convolution: the taps kernel (taps.cuh) with its input
// region streamed into shared memory by the tensor memory accelerator instead of loaded into
// registers, e.g. a VAE's conv_out (3x3, 128 channels in, 3 out).
//
// What it computes: the same as the register form, bit for bit. A block owns output tiles
// (tile_h x tile_w positions of one plane), Y[r][tap * o + oc] = sum_ci x[r][ci] * w[oc][tap][ci]
// over its input region by mma.sync m16n8k16 with fp32 accumulators, then the same shift-add.
// Per m-tile the MMAs run chunk by chunk ascending, each chunk's k-steps lo then hi with the
// register form's k-slot permutation (small_o_taps_a_fragment), so Y and the output are the
// register form's.
//
// Contract (plan_small_o_taps_tma): the register form's (16-bit x and weight, groups 1, one tap
// along dim 0, no input dilation, any stride, kernel dilation, padding), plus taps * o <= 32, a
// region of at most 8 * kSmallOTapsTmaWarpMTiles m-tiles and 256 pixels per dim, x extents below
// 2^31. blockDim = kSmallOTapsTmaThreads (8 consumer warps, 1 producer warp), gridDim.x = t.grid
// (block b takes tiles b, b + grid, ...), dynamic shared memory t.smem_bytes(): B fragments | Y
// (fp32) | 128-byte alignment | tma_stages ring stages of stage_bytes | full[stages] |
// empty[stages]. x_map: x as a 5-D tensor (c, in[2], in[1], in[0], batch), boxes of (32,
// region_w, region_h, 1, 1), zero fill outside.
//
// How. The producer warp's lane 0 walks the block's (tile, chunk) steps and issues one TMA box
// per step into stage step % stages, after the 8 consumer warps released that stage (empty
// mbarrier, one arrival per warp). A consumer warp waits for the stage (full mbarrier), reads the
// chunk's B fragments once, issues two 16-byte shared loads per lane for each of its m-tiles
// (rows q and q + 8, channels 8k .. 8k + 7 of the chunk: the bytes the register form loads from
// global memory), then 8 MMAs per m-tile. After a tile's last chunk the accumulators go to Y, the
// consumers meet at a named barrier and run the shift-add (small_o_taps_shift_add, the register
// form's) while the producer already streams the next tile's chunks.
//
// When it wins: with many tiles per block, where the register form's loads in registers (~4 KiB
// per warp) leave DRAM idle; the ring keeps up to 3 region chunks (117 KiB for conv_out's 16 x 32
// tiles) in flight per SM across tiles. With few tiles per block the register form's 2 blocks per
// SM win, so auto takes this form from kSmallOTapsTmaMinTilesPerBlock tiles per block on
// (docs/perf.md, VAE conv_out). The MMAs and the shift-add, serial in each block, take the time
// beyond the TMA stream's.
#pragma once

#include <cstdint>

#include "cuda/common/ptx.cuh"
#include "cuda/conv/common/dtype.cuh"
#include "cuda/conv/small_o/taps.cuh"
#include "cuda/conv/small_o/taps_layout.h"

namespace gemmkit::cuda::conv_impl {

template <typename T, typename TOut>
__global__ void __launch_bounds__(kSmallOTapsTmaThreads, 1)
    conv_small_o_taps_tma_kernel(const ConvGeometry g, const SmallOTapsTiling t,
                                 const __grid_constant__ CUtensorMap x_map, const T* __restrict__ w,
                                 const T* __restrict__ bias, TOut* __restrict__ out) {
  constexpr int kNTiles = 4;
  constexpr int kConsumerThreads = kSmallOTapsThreads;
  constexpr int kBarrierConsumers = 1;  // named barrier of the consumer warps (0: __syncthreads)
  extern __shared__ __align__(16) unsigned char taps_tma_smem[];
  uint4* w_s = reinterpret_cast<uint4*>(taps_tma_smem);  // (chunks, kNTiles, 32) B fragments
  float* y_s = reinterpret_cast<float*>(taps_tma_smem + t.weight_bytes);  // (n, y_stride)
  // The ring, 128-byte aligned, as an offset from the shared array (a pointer rebuilt from an
  // integer would lose its state space: generic loads instead of shared ones).
  const uint32_t smem_base = ptx::smem_address(taps_tma_smem);
  const uint32_t ring_offset =
      ((smem_base + static_cast<uint32_t>(t.weight_bytes + t.y_bytes) + 127u) & ~127u) - smem_base;
  unsigned char* ring = taps_tma_smem + ring_offset;
  const int stages = t.tma_stages;
  uint64_t* full = reinterpret_cast<uint64_t*>(ring + stages * t.stage_bytes);
  uint64_t* empty = full + stages;
  if (static_cast<int64_t>(blockIdx.x) >= t.tiles) return;  // uniform: never with plan's grid
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, warp = tid >> 5;
  const int64_t grid = gridDim.x;
  const int chunks = static_cast<int>(t.chunks);
  const int m_tiles = static_cast<int>(t.m_tiles);

  if (tid == 0) {
    for (int s = 0; s < stages; ++s) {
      ptx::mbarrier_init(&full[s], 1);
      ptx::mbarrier_init(&empty[s], kSmallOTapsWarps);
    }
    ptx::fence_barrier_init();
  }
  if (warp == kSmallOTapsWarps && lane == 0) ptx::prefetch_tensor_map(&x_map);
  // B fragments, once per block (the register form's staging).
  small_o_taps_stage_b<kNTiles, kSmallOTapsTmaThreads>(g, t, w, w_s, tid);
  __syncthreads();

  const uint32_t box_bytes =
      static_cast<uint32_t>(t.region_h * t.region_w * kSmallOTapsChunk * sizeof(T));
  if (warp == kSmallOTapsWarps) {
    // Producer: one TMA box per (tile, chunk) step into stage step % stages; the stage's
    // previous use (round - 1) must have been released.
    if (lane == 0) {
      int stage = 0, round = 0;
      for (int64_t tile = blockIdx.x; tile < t.tiles; tile += grid) {
        const SmallOTapsTile s = small_o_taps_tile(g, t, tile);
        for (int chunk = 0; chunk < chunks; ++chunk) {
          if (round > 0) ptx::mbarrier_wait(&empty[stage], (round - 1) & 1);
          ptx::mbarrier_arrive_expect_tx(&full[stage], box_bytes);
          int32_t c[5];
          small_o_taps_tma_coords(s, chunk, c);
          ptx::tma_load_5d(ring + stage * t.stage_bytes, &x_map, &full[stage], c[0], c[1], c[2],
                           c[3], c[4]);
          if (++stage == stages) stage = 0, ++round;
        }
      }
    }
    return;
  }

  // Consumers.
  const int q = lane >> 2, k = lane & 3;
  int stage = 0, round = 0;
  for (int64_t tile = blockIdx.x; tile < t.tiles; tile += grid) {
    float acc[kSmallOTapsTmaWarpMTiles][kNTiles][4];
#pragma unroll
    for (int i = 0; i < kSmallOTapsTmaWarpMTiles; ++i)
#pragma unroll
      for (int j = 0; j < kNTiles; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
    for (int chunk = 0; chunk < chunks; ++chunk) {
      ptx::mbarrier_wait(&full[stage], round & 1);
      // (region pixels, 32 channels) of this chunk: 64 bytes per pixel.
      const uint4* x_s = reinterpret_cast<const uint4*>(ring + stage * t.stage_bytes);
      uint32_t units[kNTiles][4];
#pragma unroll
      for (int j = 0; j < kNTiles; ++j) {
        const uint4 v = w_s[small_o_taps_b_unit(t, chunk, j, lane)];
        units[j][0] = v.x;
        units[j][1] = v.y;
        units[j][2] = v.z;
        units[j][3] = v.w;
      }
      // Rows q and q + 8 of each m-tile, channels 8k .. 8k + 7 of the chunk (4 vectors per
      // pixel): every m-tile's loads first, so that they are in flight together.
      uint4 vq[kSmallOTapsTmaWarpMTiles], vq8[kSmallOTapsTmaWarpMTiles];
#pragma unroll
      for (int i = 0; i < kSmallOTapsTmaWarpMTiles; ++i) {
        const int m_tile = warp + i * kSmallOTapsWarps;
        if (m_tile < m_tiles) {  // warp-uniform
          vq[i] = x_s[(m_tile * kSmallOTapsMRows + q) * 4 + k];
          vq8[i] = x_s[(m_tile * kSmallOTapsMRows + q + 8) * 4 + k];
        }
      }
#pragma unroll
      for (int i = 0; i < kSmallOTapsTmaWarpMTiles; ++i) {
        const int m_tile = warp + i * kSmallOTapsWarps;
        if (m_tile < m_tiles) {  // warp-uniform
          const uint32_t row_q[4] = {vq[i].x, vq[i].y, vq[i].z, vq[i].w};
          const uint32_t row_q8[4] = {vq8[i].x, vq8[i].y, vq8[i].z, vq8[i].w};
          uint32_t lo[4], hi[4];
          small_o_taps_a_fragment(row_q, row_q8, 0, lo);
          small_o_taps_a_fragment(row_q, row_q8, 1, hi);
#pragma unroll
          for (int j = 0; j < kNTiles; ++j) {
            uint32_t b0 = 0, b1 = 0;
            small_o_taps_b_fragment(units[j], 0, b0, b1);
            ptx::mma_m16n8k16<T>(acc[i][j], lo, b0, b1);
            small_o_taps_b_fragment(units[j], 1, b0, b1);
            ptx::mma_m16n8k16<T>(acc[i][j], hi, b0, b1);
          }
        }
      }
      __syncwarp();  // every lane's reads of the stage are done
      if (lane == 0) ptx::mbarrier_arrive(&empty[stage]);
      if (++stage == stages) stage = 0, ++round;
    }
    // Accumulators to Y: a row per m-tile row, a column per MMA column (no checks).
#pragma unroll
    for (int i = 0; i < kSmallOTapsTmaWarpMTiles; ++i) {
      const int m_tile = warp + i * kSmallOTapsWarps;
      if (m_tile < m_tiles) {
#pragma unroll
        for (int j = 0; j < kNTiles; ++j) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            const int r = m_tile * kSmallOTapsMRows + small_o_taps_acc_row(lane, e);
            y_s[small_o_taps_y(t, r, j * 8 + small_o_taps_acc_col(lane, e))] = acc[i][j][e];
          }
        }
      }
    }
    ptx::named_barrier_sync(kBarrierConsumers, kConsumerThreads);  // Y complete
    // (Decoded here, not before the chunks: it is not needed there, and would stay live.)
    const SmallOTapsTile s = small_o_taps_tile(g, t, tile);

    small_o_taps_shift_add<kConsumerThreads, false>(g, t, s, y_s, bias, out, tid);
    ptx::named_barrier_sync(kBarrierConsumers, kConsumerThreads);  // Y is rewritten next tile
  }
}

}  // namespace gemmkit::cuda::conv_impl
