// Tile constants and the launch plan (ImplicitGemmPlan) of the implicit-GEMM convolution kernel
// (conv_implicit_gemm.cuh); the plan is filled by implicit_gemm_plan (conv_implicit_config.h) and
// carried in ConvConfig from selection to the launch. Pure, no CUDA header.
#pragma once

#include <cstdint>

#include "cuda/conv/conv_geometry.h"

namespace gemmkit::cuda::conv_impl {

// CTA tile (TILE_M, TILE_N, TILE_K) = (128, 128, 64): 8 warps as 2 (M) x 4 (N) warp tiles of
// 64 x 32. Why: 64 fp32 accumulators per thread keep the kernel within 128 registers, so two
// CTAs (16 warps) share an SM and hide each other's barriers; 128 x 128 fits every o of the VAE
// suites (128 / 256 / 512) without an N tail; TILE_K = 64 makes a tile row 128 bytes, the
// width of the XOR swizzle that keeps both cp.async stores and ldmatrix reads conflict-free.
constexpr int kImplicitTileM = 128;
constexpr int kImplicitTileN = 128;
constexpr int kImplicitTileK = 64;
constexpr int kImplicitVector = 8;  // channels per 16-byte vector (16-bit inputs)
constexpr int kImplicitVectorsPerStage = kImplicitTileK / kImplicitVector;
constexpr int kImplicitThreads = 256;
constexpr int kImplicitWarpsM = 2;
constexpr int kImplicitWarpsN = 4;
constexpr int kImplicitWarpM = kImplicitTileM / kImplicitWarpsM;  // 64
constexpr int kImplicitWarpN = kImplicitTileN / kImplicitWarpsN;  // 32
// Three stages of 32 KiB: 96 KiB + the per-row table, two CTAs in an SM's 227 KiB.
constexpr int kImplicitStages = 3;
constexpr int64_t kImplicitTileABytes = int64_t{kImplicitTileM} * kImplicitTileK * 2;
constexpr int64_t kImplicitTileBBytes = int64_t{kImplicitTileN} * kImplicitTileK * 2;
constexpr int64_t kImplicitStageBytes = kImplicitTileABytes + kImplicitTileBBytes;
// Per output row of the tile: int4 {q0, q1, q2, -} (16 B), x offset (8 B), out offset (8 B).
constexpr int64_t kImplicitRowTableBytes = int64_t{kImplicitTileM} * (16 + 8 + 8);
constexpr int64_t kImplicitSmemBytes =
    kImplicitStages * kImplicitStageBytes + kImplicitRowTableBytes;
// Raster: tiles are visited in bands of this many M tiles, M fastest inside a band, so the CTAs
// resident at one time share a few M tiles (x rows) and every N tile (weight columns) in L2.
constexpr int64_t kImplicitRasterBand = 8;
// Every spatial coordinate the kernel forms (input, dilated input, output * stride, kernel
// extent, padding) must stay below this in magnitude: the gather does its index arithmetic in
// 32 bits. Larger problems go to other paths.
constexpr int64_t kImplicitMaxCoord = int64_t{1} << 29;
// q0 of a row past the last output position: every tap of it fails the bounds check.
constexpr int32_t kImplicitInvalidRow = -(int32_t{1} << 30);

// Everything the kernel needs, filled by implicit_gemm_plan. Plain data (kernel argument).
struct ImplicitGemmPlan {
  // Geometry, normalized to 3 spatial dims (leading dims of size 1).
  int32_t in[kDims] = {1, 1, 1};
  int32_t kernel[kDims] = {1, 1, 1};
  int32_t out[kDims] = {1, 1, 1};
  int32_t stride[kDims] = {1, 1, 1};
  int32_t pad_lo[kDims] = {0, 0, 0};
  int32_t kdil[kDims] = {1, 1, 1};
  int32_t idil[kDims] = {1, 1, 1};
  int64_t x_stride[kDims + 2] = {};  // elements; [4] (channels) is 1
  int64_t w_stride[kDims + 2] = {};  // [4] is 1
  int64_t out_stride[kDims + 2] = {};
  int64_t bias_stride = 0;
  bool flip = false;
  bool has_bias = false;
  bool input_dilation = false;  // some idil > 1: the gather's slow (divisibility) form
  bool out_pairs = false;       // out's channel pairs are aligned vectors (channel stride 1)

  // GEMM sizes.
  int64_t positions = 0;  // M
  int64_t groups = 1;
  int32_t cpg = 0, opg = 0;
  int32_t cpv = 0;  // channel vectors per tap: cpg / 8
  int32_t taps = 1;
  int64_t k_vectors = 0;  // taps * cpv
  int32_t k_blocks = 0;   // ceil(k_vectors / 8): pipeline stages of the reduction

  // Tiles and launch.
  int64_t m_tiles = 0, n_tiles = 0, tiles = 0;  // tiles = groups * m_tiles * n_tiles
  int64_t band = kImplicitRasterBand;
  LaunchGrid grid;  // gridDim.x = min(tiles, grid limit); CTAs loop over tiles
  int block = kImplicitThreads;
  int64_t smem_bytes = kImplicitSmemBytes;
  int split_k = 1;  // never split: deterministic without atomics or a second pass
  // Share of the issued MMA work that is useful: tile_efficiency counts the M, N, K tails and
  // input-dilation holes, efficiency also the last wave on `multiprocessors` x 2 CTAs. Guides
  // for the dispatcher, not launch parameters.
  double tile_efficiency = 0.0;
  double efficiency = 0.0;
};

}  // namespace gemmkit::cuda::conv_impl
