// Host tests of the staged depthwise variant (depthwise/staged.cuh, planned by
// plan_depthwise_staged in depthwise/plan_staged.h): which problems take it and how it tiles the
// suite rows, and a host emulation of the kernel that walks its blocks, tiles, cp.async chunks,
// warps and lanes with the same geometry functions and index formulas: the staged window (zeros
// outside x and past c), the weight layout, each thread's reads in the kernel's order (zeros read
// as taps, or skipped on the exact path that a non-finite weight forces) and its stores. The
// outputs must equal a direct loop over the valid taps bit for bit, every output written exactly
// once. Runs without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "conv/problem_spec.h"
#include "conv/select_util.h"
#include "cuda/conv/common/geometry.h"
#include "cuda/conv/select.h"

namespace gemmkit::cuda::conv_impl {
namespace {

// "staged": these tests are about the staged variant; auto takes the tensor-core one first where
// it applies (depthwise_mma_test.cpp).
ConvRequest request(const std::string& depthwise = "staged") {
  return request_of("depthwise", kDefaultWorkspaceBytes, "", depthwise);
}

TEST(ConvDepthwiseStaged, WhatTakesIt) {
  const auto variant = [](const Spec& s, const std::string& depthwise = "staged") {
    return depthwise_config_of(s, depthwise);
  };
  // ConvNeXt / MobileNet stride-1 layers, 3-D with one tap along dim 0, 5x5.
  for (const Spec& s :
       {depthwise_spec({8, 56, 56, 96}, 7, 1, 3), depthwise_spec({8, 56, 56, 144}, 3, 1, 1),
        depthwise_spec({2, 19, 23, 40}, 5, 1, 2)}) {
    const ConvConfig c = variant(s);
    EXPECT_EQ(c.depthwise.variant, DepthwiseVariant::staged) << to_string(c);
    EXPECT_NE(to_string(c).find("variant=staged"), std::string::npos);
    EXPECT_LE(c.smem_bytes, kMaxKernelSmem);
    EXPECT_EQ(c.block, 32 * c.depthwise.rows_per_block);
    EXPECT_LE(c.depthwise.rows_per_block, kDepthwiseStagedMaxWarps);
  }
  // Weights staged as 16-byte vectors where each channel tile's weights are one aligned run of w.
  {
    const Spec s = depthwise_spec({8, 56, 56, 96}, 7, 1, 3);
    ConvProblem p = make_problem(s);
    EXPECT_EQ(select_conv_config(p, kH200, request()).depthwise.w_vector_bytes, 16);
    p.weight.data = static_cast<char*>(const_cast<void*>(p.weight.data)) + 2;  // 2-byte aligned
    EXPECT_EQ(select_conv_config(p, kH200, request()).depthwise.w_vector_bytes, 0);
  }
  // GEMMKIT_CONV_DEPTHWISE=blocked keeps it out.
  const ConvConfig blocked = variant(depthwise_spec({8, 56, 56, 96}, 7, 1, 3), "blocked");
  EXPECT_EQ(blocked.depthwise.variant, DepthwiseVariant::blocked);
  EXPECT_NE(blocked.reason.find("GEMMKIT_CONV_DEPTHWISE=blocked"), std::string::npos);
  // What it does not serve, and the reason says why.
  struct Miss {
    Spec spec;
    const char* why;
  };
  Spec f32 = depthwise_spec({2, 9, 9, 16}, 3, 1, 1);
  f32.dtype = f32.out_dtype = DType::f32;
  Spec flat = depthwise_spec({2, 9, 9, 16}, 3, 1, 1);
  flat.w_shape = {16, 3, 5, 1};
  Spec dilated = depthwise_spec({2, 9, 9, 16}, 3, 1, 1);
  dilated.params.kernel_dilation = {2};
  Spec three_d = depthwise_spec({2, 3, 9, 9, 16}, 3, 1, 1);
  const Miss misses[] = {
      {depthwise_spec({2, 9, 9, 16}, 3, 2, 1), "stride or dilation"},
      {dilated, "stride or dilation"},
      {depthwise_spec({2, 9, 9, 12}, 3, 1, 1), "c % 8"},
      {depthwise_spec({2, 9, 9, 16}, 3, 1, 1, 2), "multiplier"},
      {depthwise_spec({2, 9, 9, 16}, 9, 1, 4), "9x9 kernel"},
      {flat, "3x5 kernel"},
      {f32, "f32 x"},
      {three_d, "first of 3 spatial dims"},
      {depthwise_spec({2, 37, 16}, 3, 1, 1), "one spatial dim"},
      {depthwise_spec({1, 1 << 16, 1 << 12, 8}, 3, 1, 1), "2^31 or more elements"},
  };
  for (const Miss& m : misses) {
    const ConvConfig c = variant(m.spec);
    EXPECT_NE(c.depthwise.variant, DepthwiseVariant::staged) << to_string(c);
    EXPECT_NE(c.reason.find(std::string("not the staged variant: ")), std::string::npos)
        << c.reason;
    EXPECT_NE(c.reason.find(m.why), std::string::npos) << c.reason;
  }
}

// The suite rows' tilings (conv-models.csv): whole 7-column thread tiles of the 56- and 14-wide
// planes, no padded channel tile, the issue / latency estimate's choices, and two tiles per
// block where there are at least 4 per SM.
TEST(ConvDepthwiseStaged, SuiteRows) {
  struct Row {
    Spec spec;
    int64_t channels, rows, cols, tiles_per_block;
    int registers;
  };
  const Row rows[] = {
      // 384 tiles of 7 warps: two waves at 96 registers (2 blocks per SM), one at 80 (3).
      {depthwise_spec({8, 56, 56, 96}, 7, 1, 3), 16, 14, 28, 1, kDepthwiseStagedLeanRegisters},
      // A tile per plane and 32 channels: 96 blocks, under a wave either way.
      {depthwise_spec({8, 14, 14, 384}, 7, 1, 3), 32, 14, 14, 1, kDepthwiseStagedRegisters},
      // 1008 tiles of 4 warps, 2 per block (>= 4 per SM): 504 blocks, 5 per SM at 96 registers.
      {depthwise_spec({8, 56, 56, 144}, 3, 1, 1), 16, 8, 28, 2, kDepthwiseStagedRegisters},
  };
  for (const Row& r : rows) {
    const ConvProblem p = make_problem(r.spec);
    const ConvConfig c = select_conv_config(p, kH200, request());
    SCOPED_TRACE(to_string(c));
    const DepthwiseTiling& t = c.depthwise;
    ASSERT_EQ(t.variant, DepthwiseVariant::staged);
    EXPECT_EQ(depthwise_staged_channels(t), r.channels);
    EXPECT_EQ(kDepthwiseStagedRows * t.rows_per_block, r.rows);
    EXPECT_EQ(kDepthwiseStagedRun * t.runs_per_block, r.cols);
    EXPECT_EQ(p.out_channels % depthwise_staged_channels(t), 0);
    EXPECT_EQ(t.tiles_per_block, r.tiles_per_block);
    EXPECT_EQ(depthwise_staged_buffers(t), r.tiles_per_block);
    EXPECT_EQ(int64_t{c.grid.x}, ceil_div(t.tiles(), t.tiles_per_block));
    EXPECT_EQ(t.registers, r.registers);
  }
}

// Resident blocks by registers, as cuda_occupancy.h counts them: warps take their registers from
// one of 4 sub-partitions of 16 K, in units of 256 per warp.
TEST(ConvDepthwiseStaged, BlocksPerSmByRegisters) {
  EXPECT_EQ(blocks_per_sm_by_registers(96, 224), 2);  // 5 warps per sub-partition: 20 / 7
  EXPECT_EQ(blocks_per_sm_by_registers(80, 224), 3);  // 6: 24 / 7
  EXPECT_EQ(blocks_per_sm_by_registers(96, 128), 5);
  EXPECT_EQ(blocks_per_sm_by_registers(96, 192), 3);
  EXPECT_EQ(blocks_per_sm_by_registers(88, 224), 2);  // 2816 per warp: still 5 per sub-partition
  EXPECT_EQ(blocks_per_sm_by_registers(32, 1024), 2);
  EXPECT_EQ(blocks_per_sm_by_registers(255, 256), 1);  // 8160 -> 8192 per warp: 2 per partition
  EXPECT_EQ(blocks_per_sm_by_registers(255, 512), 0);
  EXPECT_EQ(blocks_per_sm_by_registers(1, 32), 256);  // the register bound alone (64 warps bind)
}

// ---- Emulation --------------------------------------------------------------------------------

// What conv_depthwise_staged_kernel computes for problem s (x, w, bias as fp32 values of 16-bit
// numbers), walking its loops; every output must equal `direct` bit for bit.
void emulate_staged(const Spec& s, const DeviceDescription& dev, uint64_t seed,
                    bool non_finite_weight = false) {
  const ConvProblem p = make_problem(s);
  const ConvConfig c = select_conv_config(p, dev, request());
  SCOPED_TRACE(to_string(c));
  const DepthwiseTiling& t = c.depthwise;
  ASSERT_EQ(t.variant, DepthwiseVariant::staged);
  const ConvGeometry g = normalize(p);
  const int64_t k = g.kernel[2], ct = depthwise_staged_channels(t), groups = t.runs_per_block;
  const int64_t ww = depthwise_staged_window_cols(g, t), chunks_per_pixel = ct / 8;
  const int64_t window_chunks = depthwise_staged_window_chunks(g, t);
  ASSERT_EQ(ww, groups * kDepthwiseStagedRun + k - 1);
  ASSERT_EQ(window_chunks, depthwise_staged_window_rows(g, t) * ww * chunks_per_pixel);
  ASSERT_EQ(t.cvt * groups, 32);

  // Inputs: bf16-representable values (8 significant bits), so products are exact in fp32 and
  // only the order of the sums decides the bits.
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int> mant(-255, 255), expo(-6, 2);
  const auto value = [&] { return std::ldexp(static_cast<float>(mant(rng)), expo(rng) - 7); };
  const int64_t x_size = g.batch * g.x_stride[0];
  std::vector<float> x(static_cast<std::size_t>(x_size)),
      w(static_cast<std::size_t>(g.o * g.w_stride[0]));
  std::vector<float> bias(static_cast<std::size_t>(g.o));
  for (float& v : x) v = value();
  for (float& v : w) v = value();
  for (float& v : bias) v = value();
  if (non_finite_weight)
    w[static_cast<std::size_t>(3 * g.w_stride[0])] = std::numeric_limits<float>::infinity();
  const auto x_at = [&](int64_t n, int64_t i0, int64_t ih, int64_t iw, int64_t ch) {
    return x[static_cast<std::size_t>(n * g.x_stride[0] + i0 * g.x_stride[1] + ih * g.x_stride[2] +
                                      iw * g.x_stride[3] + ch * g.x_stride[4])];
  };
  const auto w_at = [&](int64_t oc, int64_t t1, int64_t t2) {
    return w[static_cast<std::size_t>(oc * g.w_stride[0] + weight_tap(g, 1, t1) * g.w_stride[2] +
                                      weight_tap(g, 2, t2) * g.w_stride[3])];
  };
  // The direct kernel: valid taps only, row-major, from +0, + bias.
  const auto direct = [&](int64_t n, int64_t d0, int64_t oh, int64_t ow, int64_t oc) {
    float acc = 0.0f;
    int64_t i0 = 0, ih = 0, iw = 0;
    if (!tap_source(g, 0, d0, 0, i0))
      return g.has_bias ? acc + bias[static_cast<std::size_t>(oc)] : acc;
    for (int64_t t1 = 0; t1 < k; ++t1) {
      if (!tap_source(g, 1, oh, t1, ih)) continue;
      for (int64_t t2 = 0; t2 < k; ++t2) {
        if (!tap_source(g, 2, ow, t2, iw)) continue;
        acc = std::fma(x_at(n, i0, ih, iw, oc), w_at(oc, t1, t2), acc);
      }
    }
    return g.has_bias ? acc + bias[static_cast<std::size_t>(oc)] : acc;
  };

  std::vector<int> written(static_cast<std::size_t>(g.batch * g.out[0] * g.out[1] * g.out[2] * g.o),
                           0);
  int64_t mismatches = 0, exact_tiles = 0, run_tiles = 0;
  for (int64_t b = 0; b < int64_t{c.grid.x}; ++b) {
    const int64_t first = b * t.tiles_per_block;
    const int64_t last = std::min(first + t.tiles_per_block, t.tiles());
    for (int64_t tile = first; tile < last; ++tile) {
      const DepthwiseStagedTile st = depthwise_staged_tile(g, t, tile);
      if (depthwise_staged_decode32(t)) {  // the kernel's 32-bit decode gives the same tile
        const DepthwiseStagedTile s32 = depthwise_staged_tile<uint32_t>(g, t, tile);
        ASSERT_EQ(s32.c0, st.c0);
        ASSERT_EQ(s32.n, st.n);
        ASSERT_EQ(s32.d0, st.d0);
        ASSERT_EQ(s32.oh0, st.oh0);
        ASSERT_EQ(s32.ow0, st.ow0);
        ASSERT_EQ(s32.i0, st.i0);
        ASSERT_EQ(s32.plane_ok, st.plane_ok);
      }
      // The window, chunk by chunk as the copies write it.
      std::vector<float> window(static_cast<std::size_t>(window_chunks * 8), -1.0f);
      for (int64_t q = 0; q < window_chunks; ++q) {
        const int64_t pixel = q / chunks_per_pixel, octet = q % chunks_per_pixel;
        const int64_t r = pixel / ww, col = pixel % ww;
        const int64_t ih = st.ih0 + r, iw = st.iw0 + col;
        const bool inside = st.plane_ok && ih >= 0 && ih < g.in[1] && iw >= 0 && iw < g.in[2] &&
                            st.c0 + 8 * octet < g.c;
        for (int64_t e = 0; e < 8; ++e) {
          window[static_cast<std::size_t>(q * 8 + e)] =
              inside ? x_at(st.n, st.i0, ih, iw, st.c0 + 8 * octet + e) : 0.0f;
        }
      }
      // The weights, [tap][channel], and the block's non-finite flag.
      std::vector<float> w_s(static_cast<std::size_t>(k * k * ct));
      bool exact = false;
      for (int64_t i = 0; i < k * k * ct; ++i) {
        const int64_t ch = i / (k * k), tap = i % (k * k);
        const float v = st.c0 + ch < g.o ? w_at(st.c0 + ch, tap / k, tap % k) : 0.0f;
        exact = exact || !std::isfinite(v);
        w_s[static_cast<std::size_t>(tap * ct + ch)] = v;
      }
      if (t.w_vector_bytes == 16) {
        // The kernel's 16-byte staging (depthwise_staged_load_weight_run): vector v holds weights
        // 8v .. 8v + 7 of the tile's run of w, each written to its window tap, incrementally.
        std::vector<float> run_s(w_s.size(), -1.0f);
        const int64_t taps = k * k;
        const int64_t vectors = std::min(ct, g.o - st.c0) * taps / 8;
        for (int64_t v = 0; v < ct * taps / 8; ++v) {
          int64_t ch = 8 * v / taps, tap = 8 * v - ch * taps;
          for (int64_t j = 0; j < 8; ++j) {
            const float staged =
                v < vectors ? w[static_cast<std::size_t>(st.c0 * taps + 8 * v + j)] : 0.0f;
            const int64_t window_tap = g.flip ? taps - 1 - tap : tap;
            run_s[static_cast<std::size_t>(window_tap * ct + ch)] = staged;
            if (++tap == taps) {
              tap = 0;
              ++ch;
            }
          }
        }
        ASSERT_EQ(std::memcmp(run_s.data(), w_s.data(), w_s.size() * sizeof(float)), 0)
            << "16-byte weight staging of channel tile " << st.channel_tile;
        ++run_tiles;
      }
      exact_tiles += exact ? 1 : 0;
      for (int64_t tid = 0; tid < 32 * t.rows_per_block; ++tid) {
        const int64_t lane = tid % 32, warp = tid / 32;
        const int64_t pair = lane % t.cvt, group = lane / t.cvt;
        const int64_t row0 = kDepthwiseStagedRows * warp, col0 = kDepthwiseStagedRun * group;
        const int64_t base = (row0 * ww + col0) * ct + 2 * pair;  // element of the window
        const int64_t cols = kDepthwiseStagedRun + k - 1;
        const auto clamp = [](int64_t v, int64_t hi) { return v < 0 ? 0 : (v > hi ? hi : v); };
        const int64_t ih = st.ih0 + row0, iw = st.iw0 + col0;
        const int64_t row_lo = clamp(-ih, k + 1),
                      row_hi = st.plane_ok ? clamp(g.in[1] - ih, k + 1) : 0;
        const int64_t col_lo = clamp(-iw, cols), col_hi = clamp(g.in[2] - iw, cols);
        float acc[kDepthwiseStagedRows][kDepthwiseStagedRun][2] = {};
        for (int64_t ir = 0; ir <= k; ++ir) {
          if (exact && (ir < row_lo || ir >= row_hi)) continue;
          for (int64_t u = 0; u < cols; ++u) {
            if (exact && (u < col_lo || u >= col_hi)) continue;
            for (int64_t r = 0; r < kDepthwiseStagedRows; ++r) {
              if (ir - r < 0 || ir - r >= k) continue;
              for (int64_t j = 0; j < kDepthwiseStagedRun; ++j) {
                const int64_t t2 = u - j;
                if (t2 < 0 || t2 >= k) continue;
                for (int64_t v = 0; v < 2; ++v) {
                  const float xv = window[static_cast<std::size_t>(base + (ir * ww + u) * ct + v)];
                  const float wv =
                      w_s[static_cast<std::size_t>(((ir - r) * k + t2) * ct + 2 * pair + v)];
                  acc[r][j][v] = std::fma(xv, wv, acc[r][j][v]);
                }
              }
            }
          }
        }
        const int64_t oc = st.c0 + 2 * pair;
        if (oc >= g.o) continue;
        for (int64_t r = 0; r < kDepthwiseStagedRows; ++r) {
          const int64_t oh = st.oh0 + row0 + r;
          if (oh >= g.out[1]) break;
          for (int64_t j = 0; j < kDepthwiseStagedRun; ++j) {
            const int64_t ow = st.ow0 + col0 + j;
            if (ow >= g.out[2]) break;
            for (int64_t v = 0; v < 2; ++v) {
              const float got =
                  g.has_bias ? acc[r][j][v] + bias[static_cast<std::size_t>(oc + v)] : acc[r][j][v];
              const float want = direct(st.n, st.d0, oh, ow, oc + v);
              const bool same = std::memcmp(&got, &want, sizeof(float)) == 0 ||
                                (std::isnan(got) && std::isnan(want));
              mismatches += same ? 0 : 1;
              ++written[static_cast<std::size_t>(
                  (((st.n * g.out[0] + st.d0) * g.out[1] + oh) * g.out[2] + ow) * g.o + oc + v)];
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
  // Packed weights at aligned addresses (every case here) take the 16-byte staging.
  EXPECT_EQ(t.w_vector_bytes, 16);
  EXPECT_GT(run_tiles, 0);
  if (non_finite_weight) {
    EXPECT_GT(exact_tiles, 0);
  }
  for (std::size_t i = 0; i < written.size(); ++i) ASSERT_EQ(written[i], 1) << "output " << i;
}

TEST(ConvDepthwiseStaged, EmulationMatchesDirectBits) {
  uint64_t seed = 17;
  // Kernel sizes, odd sizes that leave partial row / column / channel tiles, both warp layouts.
  emulate_staged(depthwise_spec({2, 15, 17, 24}, 3, 1, 1), kH200, ++seed);
  emulate_staged(depthwise_spec({1, 14, 14, 64}, 7, 1, 3), kH200, ++seed);
  emulate_staged(depthwise_spec({2, 9, 30, 40}, 5, 1, 2), kH200, ++seed);
  emulate_staged(depthwise_spec({1, 23, 11, 8}, 7, 1, 3), kH200, ++seed);
  // Asymmetric and negative padding, flip, bias.
  Spec odd = depthwise_spec({2, 12, 19, 16}, 3, 1, 0);
  odd.params.padding_lo = {2, -1};
  odd.params.padding_hi = {0, 3};
  odd.params.flip = true;
  odd.bias = true;
  emulate_staged(odd, kH200, ++seed);
  // 3-D with one tap along dim 0 (stride and padding along it: planes of padding).
  Spec three_d;
  three_d.x_shape = {1, 3, 10, 12, 16};
  three_d.w_shape = {16, 1, 5, 5, 1};
  three_d.params.groups = 16;
  three_d.params.stride = {2, 1, 1};
  three_d.params.padding_lo = {1, 2, 2};
  three_d.params.padding_hi = {1, 2, 2};
  emulate_staged(three_d, kH200, ++seed);
  // One SM: blocks take several tiles (two windows, restaging across channel tiles).
  DeviceDescription one_sm;
  one_sm.multiprocessors = 1;
  emulate_staged(depthwise_spec({2, 30, 33, 48}, 3, 1, 1), one_sm, ++seed);
  // An Inf weight: its channel tile runs the exact path (padding taps skipped), still the direct
  // kernel's bits.
  emulate_staged(depthwise_spec({1, 15, 16, 32}, 7, 1, 3), kH200, ++seed, true);
}

}  // namespace
}  // namespace gemmkit::cuda::conv_impl
