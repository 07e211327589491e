// Implicit-GEMM convolution on tensor cores (bf16 / f16 inputs, fp32 accumulation).
//
// Computes conv_general (stride, asymmetric / negative padding, kernel dilation, input dilation,
// flip, groups; 1-3 spatial dims) as, per group g, the GEMM
//   out[m][g * opg + n] = round( sum_k A[m][k] * B[k][n] (+ bias[g * opg + n]) )
// with M = output positions, N = o / groups, K = taps * c / groups, without materializing A:
// each 16-byte vector of A (8 consecutive channels of one window tap of one output position) is
// gathered from x straight into shared memory with cp.async, zero-filled (src-size 0) where the
// tap falls on padding, cropped input or an input-dilation hole. B rows are weight rows (OHWI:
// row o is contiguous over (taps, c/groups)), read in place, flipped taps included.
//
// Contract (why_not_implicit_gemm, plan.h): x and weight bf16 or f16, out x's
// dtype or f32; c/groups % 8 == 0; x and weight with unit channel stride, 16-byte aligned, other
// strides multiples of 8 elements; out any strides; spatial coordinates < 2^29 (32-bit gather
// arithmetic); tensor offsets int64. Dynamic shared memory kImplicitSmemBytes (opt-in).
//
// Tiles: a CTA of 256 threads computes a (TILE_M, TILE_N) = (128, 128) output tile of one group;
// its 8 warps form a 2 x 4 grid of (64, 32) warp tiles, each 4 x 4 mma.sync.m16n8k16 fragments
// (acc[4][4][4]: 64 fp32 registers). K advances in stages of TILE_K = 64 elements through a
// 3-stage cp.async ring (A (TILE_M, TILE_K) + B (TILE_N, TILE_K) = 32 KiB a stage). Tile rows
// are 128 bytes = 8 vectors; vector v of row r is stored at slot v ^ (r % 8), so the 8 rows an
// ldmatrix phase reads (and the 8 vectors a cp.async phase writes) hit 8 different bank groups.
// Grid: 1-D, CTAs loop over linear tile indices (implicit_gemm_tile: groups, bands of 8 M tiles,
// M fastest in a band) with stride gridDim.x, so no count has a launch limit.
//
// Numerics: each output is owned by one thread; its accumulator starts at +0 and receives, for
// K stages in ascending order (K index k = tap * cpg + ci, taps row-major over the window, the
// group's channels ascending), four m16n8k16 MMAs of 16 consecutive k each, ascending; inside
// an MMA the additions are the hardware's (fp32). Padding / hole taps and the K tail enter as
// zero products (as in the CPU reference's reduction vector: NaN when the weight is Inf/NaN).
// Then + bias (fp32, when there is one), then one rounding to out's dtype. No split of K, no
// atomics: the same bits on every run, whatever the grid.
//
// When it wins: every convolution with enough output positions and channels to fill 128 x 128
// tiles (the VAE / U-Net 3x3 convs with c, o >= 128): it streams x and the weight once per tile
// from L2 with no unfold workspace and no second pass over out, where unfold + GEMM writes and
// re-reads taps * c elements per position. It loses to specialized paths for o / groups << 128
// (N-tile waste), depthwise convs (c/groups = 1) and 1x1 convs (plain GEMM).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/common/ptx.cuh"
#include "cuda/conv/common/dtype.cuh"
#include "cuda/conv/implicit_gemm/layout.h"

namespace gemmkit::cuda::conv_impl {
namespace implicit_gemm {

// Two consecutive channels as one aligned store, each rounded once (round to nearest even).
__device__ __forceinline__ void store_pair(float* p, float a, float b) {
  *reinterpret_cast<float2*>(p) = make_float2(a, b);
}
__device__ __forceinline__ void store_pair(__nv_bfloat16* p, float a, float b) {
  *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(a, b);
}
__device__ __forceinline__ void store_pair(__half* p, float a, float b) {
  *reinterpret_cast<__half2*>(p) = __floats2half2_rn(a, b);
}

constexpr int kRowBytes = kImplicitTileK * 2;                             // 128: one tile row
constexpr int kLoaderRows = kImplicitThreads / kImplicitVectorsPerStage;  // 32 rows a pass
constexpr int kLoaderPasses = kImplicitTileM / kLoaderRows;               // 4
constexpr int kMmaM = kImplicitWarpM / 16;                                // 4 fragments along M
constexpr int kMmaN = kImplicitWarpN / 8;                                 // 4 fragments along N
constexpr int kKSteps = kImplicitTileK / 16;                              // 4 MMAs along K a stage

static_assert(kImplicitTileM == kImplicitTileN, "the loader maps A and B rows alike");
static_assert(kImplicitWarpsM * kImplicitWarpsN * 32 == kImplicitThreads, "8 warps");
static_assert(kRowBytes == 128, "the XOR swizzle assumes 8 vectors a row");

}  // namespace implicit_gemm

template <typename T, typename TOut, bool kInputDilation>
__global__ void __launch_bounds__(kImplicitThreads, 2)
    conv_implicit_gemm_kernel(const ImplicitGemmPlan p, const T* __restrict__ x,
                              const T* __restrict__ w, const T* __restrict__ bias,
                              TOut* __restrict__ out) {
  using namespace implicit_gemm;
  extern __shared__ __align__(128) unsigned char implicit_smem[];
  // [stage][A (TILE_M, TILE_K) | B (TILE_N, TILE_K)], then the row table of the current tile.
  int4* row_q = reinterpret_cast<int4*>(implicit_smem + kImplicitStages * kImplicitStageBytes);
  int64_t* row_x = reinterpret_cast<int64_t*>(row_q + kImplicitTileM);  // (TILE_M)
  int64_t* row_out = row_x + kImplicitTileM;                            // (TILE_M)
  const uint32_t smem0 = ptx::smem_address(implicit_smem);

  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31, warp = tid >> 5;
  const int warp_m = warp / kImplicitWarpsN, warp_n = warp % kImplicitWarpsN;
  // Loader: vector column ld_col of rows ld_row + kLoaderRows * i of both tiles (a warp writes
  // 4 whole rows: 512 contiguous bytes). Those rows share row % 8, hence one swizzled slot.
  const int ld_col = tid & 7, ld_row = tid >> 3;
  const uint32_t ld_offset = ld_row * kRowBytes + ((ld_col ^ (ld_row & 7)) << 4);
  // ldmatrix row addresses. A: lanes 0-15 rows 0-15 of a 16-row fragment at k 0-7, lanes 16-31
  // the same rows at k 8-15 (a0..a3 of m16n8k16). B (stored (TILE_N, TILE_K)): lanes 0-7 / 8-15
  // n 0-7 at k 0-7 / 8-15 (b0, b1 of one n8 fragment), lanes 16-31 the same for n 8-15.
  // Every fragment row is a multiple of 8 plus (lane & 7), so the swizzle key is lane & 7.
  const uint32_t a_lane = (warp_m * kImplicitWarpM + (lane & 15)) * kRowBytes;
  const uint32_t a_slot = ((lane >> 4) ^ (lane & 7)) << 4;
  const uint32_t b_lane = (warp_n * kImplicitWarpN + (lane & 7) + ((lane >> 4) << 3)) * kRowBytes;
  const uint32_t b_slot = (((lane >> 3) & 1) ^ (lane & 7)) << 4;

  for (int64_t tile = blockIdx.x; tile < p.tiles; tile += gridDim.x) {
    const ImplicitTile at = implicit_gemm_tile(p, tile);
    const int64_t m0 = at.m_tile * kImplicitTileM;
    const int32_t n0 = static_cast<int32_t>(at.n_tile) * kImplicitTileN;
    // Position decompositions once per tile (div / mod stay out of the K loop).
    if (tid < kImplicitTileM) {
      const ImplicitRow r = implicit_row(p, m0 + tid);
      row_q[tid] = make_int4(r.q[0], r.q[1], r.q[2], 0);
      row_x[tid] = r.x_base;
      row_out[tid] = r.out_base;
    }
    __syncthreads();

    const T* x_group = x + at.group * p.cpg;
    const int64_t oc0 = at.group * p.opg;  // the group's first output channel
    const T* w_rows = w + (oc0 + n0 + ld_row) * p.w_stride[0];
    const int64_t w_pass = int64_t{kLoaderRows} * p.w_stride[0];
    uint32_t b_rows = 0;  // bit i: B row ld_row + kLoaderRows * i is an output channel
#pragma unroll
    for (int i = 0; i < kLoaderPasses; ++i) {
      if (n0 + ld_row + kLoaderRows * i < p.opg) b_rows |= 1u << i;
    }
    ImplicitKCursor cursor = implicit_k_start(p, ld_col);

    const auto load_stage = [&](int stage) {
      const uint32_t a_dst = smem0 + stage * static_cast<uint32_t>(kImplicitStageBytes) + ld_offset;
      const uint32_t b_dst = a_dst + static_cast<uint32_t>(kImplicitTileABytes);
      const ImplicitTap k = implicit_tap(p, cursor);
#pragma unroll
      for (int i = 0; i < kLoaderPasses; ++i) {
        const int r = ld_row + kLoaderRows * i;
        const int4 q = row_q[r];
        int64_t offset = 0;
        const bool a_ok = implicit_a_offset<kInputDilation>(p, k, q.x, q.y, q.z, row_x[r], offset);
        ptx::cp_async_ca16(a_dst + i * kLoaderRows * kRowBytes, a_ok ? x_group + offset : x,
                           a_ok ? 16u : 0u);
        const bool b_ok = k.valid && ((b_rows >> i) & 1u) != 0;
        ptx::cp_async_cg16(b_dst + i * kLoaderRows * kRowBytes,
                           b_ok ? w_rows + i * w_pass + k.w_offset : w, b_ok ? 16u : 0u);
      }
      implicit_k_advance(p, cursor);
    };

    float acc[kMmaM][kMmaN][4];
#pragma unroll
    for (int mt = 0; mt < kMmaM; ++mt) {
#pragma unroll
      for (int nt = 0; nt < kMmaN; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[mt][nt][e] = 0.0f;
      }
    }

#pragma unroll
    for (int s = 0; s < kImplicitStages - 1; ++s) {
      if (s < p.k_blocks) load_stage(s);
      ptx::cp_async_commit();  // empty groups keep the wait count uniform
    }
    int compute_stage = 0, load_slot = kImplicitStages - 1;
    for (int32_t kb = 0; kb < p.k_blocks; ++kb) {
      ptx::cp_async_wait<kImplicitStages - 2>();
      // Stage kb has landed for every thread, and every warp is done with stage kb - 1, which
      // the next load overwrites.
      __syncthreads();
      if (kb + kImplicitStages - 1 < p.k_blocks) load_stage(load_slot);
      ptx::cp_async_commit();
      const uint32_t a_stage = smem0 + compute_stage * static_cast<uint32_t>(kImplicitStageBytes);
      const uint32_t b_stage = a_stage + static_cast<uint32_t>(kImplicitTileABytes);
#pragma unroll
      for (int ks = 0; ks < kKSteps; ++ks) {
        uint32_t af[kMmaM][4];
        uint32_t bf[kMmaN][2];
#pragma unroll
        for (int mt = 0; mt < kMmaM; ++mt) {
          ptx::ldmatrix_x4(af[mt], a_stage + a_lane + mt * 16 * kRowBytes + (a_slot ^ (ks << 5)));
        }
#pragma unroll
        for (int np = 0; np < kMmaN / 2; ++np) {
          uint32_t r[4];
          ptx::ldmatrix_x4(r, b_stage + b_lane + np * 16 * kRowBytes + (b_slot ^ (ks << 5)));
          bf[2 * np][0] = r[0];
          bf[2 * np][1] = r[1];
          bf[2 * np + 1][0] = r[2];
          bf[2 * np + 1][1] = r[3];
        }
#pragma unroll
        for (int mt = 0; mt < kMmaM; ++mt) {
#pragma unroll
          for (int nt = 0; nt < kMmaN; ++nt)
            ptx::mma_m16n8k16<T>(acc[mt][nt], af[mt], bf[nt][0], bf[nt][1]);
        }
      }
      compute_stage = compute_stage == kImplicitStages - 1 ? 0 : compute_stage + 1;
      load_slot = load_slot == kImplicitStages - 1 ? 0 : load_slot + 1;
    }
    ptx::cp_async_wait<0>();

    // Epilogue: fragment element e of acc[mt][nt] is row (lane / 4) + 8 * (e / 2) of M fragment
    // mt and column 2 * (lane % 4) + e % 2 of N fragment nt.
    float bias_v[kMmaN][2];
#pragma unroll
    for (int nt = 0; nt < kMmaN; ++nt) {
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int32_t n = n0 + warp_n * kImplicitWarpN + nt * 8 + (lane & 3) * 2 + e;
        bias_v[nt][e] = p.has_bias && n < p.opg ? to_float(bias[(oc0 + n) * p.bias_stride]) : 0.0f;
      }
    }
    const int64_t oc_stride = p.out_stride[kDims + 1];
#pragma unroll
    for (int mt = 0; mt < kMmaM; ++mt) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int row = warp_m * kImplicitWarpM + mt * 16 + (lane >> 2) + h * 8;
        if (m0 + row >= p.positions) continue;
        TOut* out_row = out + row_out[row] + oc0 * oc_stride;
#pragma unroll
        for (int nt = 0; nt < kMmaN; ++nt) {
          const int32_t n = n0 + warp_n * kImplicitWarpN + nt * 8 + (lane & 3) * 2;
          if (n >= p.opg) continue;
          float v0 = acc[mt][nt][2 * h], v1 = acc[mt][nt][2 * h + 1];
          if (p.has_bias) {  // no +0 without a bias: it would turn a -0 sum into +0
            v0 += bias_v[nt][0];
            v1 += bias_v[nt][1];
          }
          if (p.out_pairs && n + 1 < p.opg) {
            store_pair(out_row + n, v0, v1);
          } else {
            out_row[n * oc_stride] = from_float<TOut>(v0);
            if (n + 1 < p.opg) out_row[(n + 1) * oc_stride] = from_float<TOut>(v1);
          }
        }
      }
    }
    __syncthreads();  // the next tile rewrites the row table
  }
}

}  // namespace gemmkit::cuda::conv_impl
