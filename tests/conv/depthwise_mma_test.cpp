// Host tests of the tensor-core depthwise variant (depthwise/mma.cuh, planned by
// plan_depthwise_mma in depthwise/plan_mma.h): which problems take it, its shared-memory layout
// (odd pitches, every unit inside the window), and an emulation of the kernel that walks its
// blocks, tiles, copies, warps and lanes with the same geometry functions and index formulas: the
// window staged as pixels, the in-place transposition (ldmatrix.trans / stmatrix as PTX defines
// them), the Toeplitz B fragments, the A fragments of each MMA, the output staging and the stores.
// On small-integer values every sum is exact, so each output must equal the direct sum, and be
// written exactly once. Runs without a GPU.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "conv/problem_spec.h"
#include "conv/select_util.h"
#include "cuda/conv/common/geometry.h"
#include "cuda/conv/select.h"

namespace gemmkit::cuda::conv_impl {
namespace {

ConvRequest request(const std::string& depthwise = "auto") {
  return request_of("depthwise", kDefaultWorkspaceBytes, "", depthwise);
}

TEST(ConvDepthwiseMma, WhatTakesIt) {
  const auto config = [](const Spec& s, const std::string& depthwise = "auto") {
    return depthwise_config_of(s, depthwise);
  };
  // Auto: ConvNeXt 7x7 c96 at 8 x 56^2, 32-column tiles, 384 tiles in one wave of 396 blocks.
  {
    const Spec s = depthwise_spec({8, 56, 56, 96}, 7, 1, 3);
    const ConvConfig c = config(s);
    EXPECT_EQ(c.depthwise.variant, DepthwiseVariant::mma) << to_string(c);
    EXPECT_NE(to_string(c).find("variant=mma"), std::string::npos);
    EXPECT_EQ(c.tile, 32);
    EXPECT_EQ(c.depthwise.tiles(), 384);
    EXPECT_EQ(c.grid.x, 384u);
    EXPECT_EQ(c.block, kDepthwiseMmaThreads);
    EXPECT_EQ(c.smem_bytes, depthwise_mma_smem_bytes(normalize(make_problem(s)), 4));
    EXPECT_LE(c.smem_bytes, kMaxKernelSmem);
    // "staged" and "blocked" keep it out (the direct kernel's bits).
    EXPECT_EQ(config(s, "staged").depthwise.variant, DepthwiseVariant::staged);
    EXPECT_EQ(config(s, "blocked").depthwise.variant, DepthwiseVariant::blocked);
  }
  // Auto keeps the staged variant where it was measured faster, each with its reason: smaller
  // kernels, and grids that do not fill one wave (14^2 x 384, batch 1 112^2).
  const auto staged_by_default = [&](const Spec& s, const std::string& why) {
    const ConvConfig c = config(s);
    EXPECT_EQ(c.depthwise.variant, DepthwiseVariant::staged) << to_string(c);
    EXPECT_NE(c.reason.find("not the tensor-core variant: " + why), std::string::npos) << c.reason;
  };
  staged_by_default(depthwise_spec({8, 56, 56, 144}, 3, 1, 1), "a kernel smaller than 7 x 7");
  staged_by_default(depthwise_spec({8, 14, 14, 384}, 7, 1, 3), "its 32-column tiles (192)");
  staged_by_default(depthwise_spec({1, 112, 112, 96}, 7, 1, 3), "its 32-column tiles (168)");
  // GEMMKIT_CONV_DEPTHWISE=mma: wherever it applies, at the planner's tile width, within 48 KiB.
  for (const Spec& s :
       {depthwise_spec({8, 56, 56, 96}, 7, 1, 3), depthwise_spec({8, 14, 14, 384}, 7, 1, 3),
        depthwise_spec({8, 56, 56, 144}, 3, 1, 1), depthwise_spec({1, 20, 20, 8}, 9, 1, 4)}) {
    const ConvConfig c = config(s, "mma");
    EXPECT_EQ(c.depthwise.variant, DepthwiseVariant::mma) << to_string(c);
    EXPECT_LE(c.smem_bytes, kMaxKernelSmem);
    EXPECT_EQ(c.smem_bytes, depthwise_mma_smem_bytes(normalize(make_problem(s)), c.tile / 8));
  }
  EXPECT_EQ(config(depthwise_spec({8, 56, 56, 96}, 7, 1, 3), "mma").tile, 32);
  EXPECT_EQ(config(depthwise_spec({8, 14, 14, 384}, 7, 1, 3), "mma").tile, 8);
  // Declined even when forced, each with its reason: stride 2, dilation, multiplier 2, a 11 x 11
  // kernel, one spatial dim, fewer than 8 output rows, f32 x, f32 out, c % 8, a 3-tap dim 0.
  const auto declined = [&](Spec s, const std::string& why) {
    const ConvConfig c = config(s, "mma");
    EXPECT_NE(c.depthwise.variant, DepthwiseVariant::mma) << to_string(c);
    EXPECT_NE(c.reason.find("not the tensor-core variant: " + why), std::string::npos) << c.reason;
  };
  declined(depthwise_spec({1, 20, 20, 16}, 3, 2, 1), "a stride or dilation");
  Spec dilated = depthwise_spec({1, 20, 20, 16}, 3, 1, 2);
  dilated.params.kernel_dilation = {2};
  declined(dilated, "a stride or dilation");
  Spec multiplier = depthwise_spec({1, 20, 20, 16}, 3, 1, 1);
  multiplier.w_shape[0] = 32;
  declined(multiplier, "a channel multiplier");
  declined(depthwise_spec({1, 30, 30, 16}, 11, 1, 5), "a kernel wider or taller than 9");
  declined(depthwise_spec({1, 300, 16}, 4, 1, 3), "one spatial dim");
  declined(depthwise_spec({1, 7, 30, 16}, 3, 1, 1), "fewer than 8 output rows");
  Spec f32 = depthwise_spec({1, 20, 20, 16}, 3, 1, 1);
  f32.dtype = f32.out_dtype = DType::f32;
  declined(f32, "f32 x");
  Spec f32_out = depthwise_spec({1, 20, 20, 16}, 3, 1, 1);
  f32_out.out_dtype = DType::f32;
  declined(f32_out, "out's dtype is not x's");
  declined(depthwise_spec({1, 20, 20, 12}, 3, 1, 1), "c % 8 != 0");
  Spec three_taps;
  three_taps.x_shape = {1, 4, 10, 12, 16};
  three_taps.w_shape = {16, 3, 3, 3, 1};
  three_taps.params.groups = 16;
  three_taps.params.padding_lo = {1};
  three_taps.params.padding_hi = {1};
  declined(three_taps, "more than one kernel tap");
}

// Pitches: odd row and channel pitches (ldmatrix / stmatrix rows on distinct banks), the
// transposed row inside the pixel row's units, the output staging inside the window, and the
// largest plan (9 x 9, 32 columns) within 48 KiB.
TEST(ConvDepthwiseMma, SharedMemoryLayout) {
  for (const int pieces : {1, 2, 4}) {
    const int cols = depthwise_mma_in_cols(pieces);
    EXPECT_EQ(depthwise_mma_row_units(pieces) % 2, 1);
    EXPECT_EQ(depthwise_mma_channel_units(pieces) % 2, 1);
    EXPECT_EQ(depthwise_mma_out_row_units(pieces) % 2, 1);
    EXPECT_EQ(depthwise_mma_out_channel_units(pieces) % 2, 1);
    EXPECT_GE(depthwise_mma_channel_units(pieces), cols / 8);
    EXPECT_LE(2 * cols, depthwise_mma_row_units(pieces));
    EXPECT_LE(kDepthwiseMmaChannels * depthwise_mma_channel_units(pieces),
              depthwise_mma_row_units(pieces));
    EXPECT_GE(depthwise_mma_out_row_units(pieces), pieces);
    // The swizzle: 8 consecutive pixels' chunk h on 8 distinct 16-byte bank groups.
    for (int h = 0; h < 2; ++h) {
      for (int block = 0; block < cols / 8; ++block) {
        std::array<int, 8> seen{};
        for (int i = 0; i < 8; ++i) ++seen[depthwise_mma_pixel_unit(8 * block + i, h) % 8];
        for (const int n : seen) EXPECT_EQ(n, 1);
      }
    }
    for (const int64_t k : {1, 3, 7, 9}) {
      const ConvGeometry g = normalize(make_problem(depthwise_spec({1, 20, 40, 16}, k, 1, k / 2)));
      EXPECT_LE(int64_t{kDepthwiseMmaChannels} * depthwise_mma_out_channel_units(pieces) * 16,
                depthwise_mma_window_bytes(g, pieces));
      EXPECT_LE(depthwise_mma_smem_bytes(g, pieces), kMaxKernelSmem) << k << " " << pieces;
    }
  }
  // Every lane's Toeplitz slots fall inside a weight row.
  for (int lane = 0; lane < 32; ++lane) {
    for (int reg = 0; reg < 2; ++reg) {
      for (int half = 0; half < 2; ++half) {
        EXPECT_GE(depthwise_mma_b_slot(lane, reg, half), 0);
        EXPECT_LT(depthwise_mma_b_slot(lane, reg, half), kDepthwiseMmaWeightRow);
      }
    }
  }
}

// Shared memory of one block as 16-bit lanes (values exact in float), in 16-byte units.
struct Smem {
  std::vector<float> h;
  float& at(int64_t unit, int e) { return h[static_cast<std::size_t>(unit * 8 + e)]; }
};

// ldmatrix.x4 (trans or not) / stmatrix.x4 as PTX defines them: lane l addresses row l % 8 of
// matrix l / 8; non-transposed, lane t's register j holds (row t / 4, columns 2 (t % 4) + {0, 1})
// of matrix j; transposed, (rows 2 (t % 4) + {0, 1}, column t / 4).
using Fragments = std::array<std::array<std::array<float, 2>, 4>, 32>;  // [lane][reg][half]
Fragments ldmatrix(Smem& s, const std::array<int64_t, 32>& unit, bool trans) {
  Fragments f{};
  for (int t = 0; t < 32; ++t) {
    for (int j = 0; j < 4; ++j) {
      for (int e = 0; e < 2; ++e) {
        f[t][j][e] = trans ? s.at(unit[8 * j + 2 * (t % 4) + e], t / 4)
                           : s.at(unit[8 * j + t / 4], 2 * (t % 4) + e);
      }
    }
  }
  return f;
}
void stmatrix(Smem& s, const std::array<int64_t, 32>& unit, const Fragments& f) {
  for (int t = 0; t < 32; ++t) {
    for (int j = 0; j < 4; ++j) {
      for (int e = 0; e < 2; ++e) s.at(unit[8 * j + t / 4], 2 * (t % 4) + e) = f[t][j][e];
    }
  }
}

int x_value(int64_t n, int64_t i0, int64_t h, int64_t w, int64_t c) {
  return static_cast<int>((n * 7 + i0 * 2 + h * 3 + w * 5 + c * 2) % 11) - 5;
}
int w_value(int64_t c, int64_t i, int64_t j) {
  return static_cast<int>((c * 3 + i * 5 + j) % 7) - 3;
}

void emulate_mma(const Spec& s, const DeviceDescription& dev = kH200) {
  const ConvProblem p = make_problem(s);
  const ConvConfig c = select_conv_config(p, dev, request("mma"));
  SCOPED_TRACE(to_string(c));
  const DepthwiseTiling& t = c.depthwise;
  ASSERT_EQ(t.variant, DepthwiseVariant::mma);
  const ConvGeometry g = normalize(p);
  const int pieces = static_cast<int>(t.run / 8), in_cols = depthwise_mma_in_cols(pieces);
  const int in_rows = depthwise_mma_in_rows(g), kh = static_cast<int>(g.kernel[1]);
  const int kw = static_cast<int>(g.kernel[2]);
  const int row_units = depthwise_mma_row_units(pieces);
  const int channel_units = depthwise_mma_channel_units(pieces);
  const int out_row_units = depthwise_mma_out_row_units(pieces);
  const int out_channel_units = depthwise_mma_out_channel_units(pieces);
  const int64_t window_units = depthwise_mma_window_bytes(g, pieces) / 16;
  const auto bias_value = [](int64_t ch) { return static_cast<float>(ch % 5) - 2.0f; };
  const auto direct = [&](int64_t n, int64_t d0, int64_t oh, int64_t ow, int64_t ch) {
    float acc = 0.0f;
    int64_t i0 = 0, ih = 0, iw = 0;
    if (tap_source(g, 0, d0, 0, i0)) {
      for (int64_t t1 = 0; t1 < kh; ++t1) {
        if (!tap_source(g, 1, oh, t1, ih)) continue;
        for (int64_t t2 = 0; t2 < kw; ++t2) {
          if (!tap_source(g, 2, ow, t2, iw)) continue;
          acc += static_cast<float>(x_value(n, i0, ih, iw, ch) *
                                    w_value(ch, weight_tap(g, 1, t1), weight_tap(g, 2, t2)));
        }
      }
    }
    return g.has_bias ? acc + bias_value(ch) : acc;
  };
  std::vector<int> written(static_cast<std::size_t>(g.batch * g.out[0] * g.out[1] * g.out[2] * g.c),
                           0);
  int64_t mismatches = 0;
  for (int64_t b = 0; b < int64_t{c.grid.x}; ++b) {
    const int64_t first = b * t.tiles_per_block;
    const int64_t last = std::min(first + t.tiles_per_block, t.tiles());
    for (int64_t tile = first; tile < last; ++tile) {
      const DepthwiseStagedTile st = depthwise_mma_tile(g, t, tile);
      if (depthwise_staged_decode32(t)) {
        const DepthwiseStagedTile s32 = depthwise_mma_tile<uint32_t>(g, t, tile);
        ASSERT_EQ(s32.c0, st.c0);
        ASSERT_EQ(s32.n, st.n);
        ASSERT_EQ(s32.d0, st.d0);
        ASSERT_EQ(s32.oh0, st.oh0);
        ASSERT_EQ(s32.ow0, st.ow0);
      }
      Smem sm{std::vector<float>(static_cast<std::size_t>(window_units * 8), -99.0f)};
      // 1. The window as pixels.
      for (int i = 0; i < in_rows * in_cols * 2; ++i) {
        const int h = i & 1, pixel = i >> 1, r = pixel / in_cols, col = pixel % in_cols;
        const int64_t ih = st.ih0 + r, iw = st.iw0 + col;
        const bool real = st.plane_ok && ih >= 0 && ih < g.in[1] && iw >= 0 && iw < g.in[2] &&
                          st.c0 + 8 * h < g.c;
        const int64_t unit = int64_t{r} * row_units + depthwise_mma_pixel_unit(col, h);
        ASSERT_LT(unit, window_units);
        for (int e = 0; e < 8; ++e) {
          sm.at(unit, e) =
              real ? static_cast<float>(x_value(st.n, st.i0, ih, iw, st.c0 + 8 * h + e)) : 0.0f;
        }
      }
      // 2. Weights: the zeros around each row, then each weight at its slot.
      std::vector<float> w_s(
          static_cast<std::size_t>(kDepthwiseMmaChannels * kh * kDepthwiseMmaWeightRow), -99.0f);
      for (int i = 0; i < kDepthwiseMmaChannels * kh * kDepthwiseMmaWeightRow; ++i) {
        const int tap = i % kDepthwiseMmaWeightRow - 8;
        if (tap < 0 || tap >= kw) w_s[static_cast<std::size_t>(i)] = 0.0f;
      }
      const int taps = kh * kw;
      for (int e = 0; e < kDepthwiseMmaChannels * taps; ++e) {
        const int ch = e / taps, rs = e - ch * taps, row = rs / kw, tap = rs - row * kw;
        w_s[static_cast<std::size_t>((ch * kh + row) * kDepthwiseMmaWeightRow + 8 + tap)] =
            st.c0 + ch < g.c ? static_cast<float>(w_value(st.c0 + ch, weight_tap(g, 1, row),
                                                          weight_tap(g, 2, tap)))
                             : 0.0f;
      }
      // 3. The transposition, row by row.
      const int row_matrices = in_cols / 4, row_loads = (row_matrices + 3) / 4;
      for (int r = 0; r < in_rows; ++r) {
        std::vector<Fragments> v(static_cast<std::size_t>(row_loads));
        for (int l = 0; l < row_loads; ++l) {
          std::array<int64_t, 32> unit{};
          for (int lane = 0; lane < 32; ++lane) {
            const int m = std::min(4 * l + (lane >> 3), row_matrices - 1);
            unit[lane] =
                int64_t{r} * row_units + depthwise_mma_pixel_unit(8 * (m >> 1) + (lane & 7), m & 1);
          }
          v[l] = ldmatrix(sm, unit, true);
        }
        for (int l = 0; l < row_loads; ++l) {
          std::array<int64_t, 32> unit{};
          for (int lane = 0; lane < 32; ++lane) {
            const int m = std::min(4 * l + (lane >> 3), row_matrices - 1);
            unit[lane] =
                int64_t{r} * row_units + (8 * (m & 1) + (lane & 7)) * channel_units + (m >> 1);
            ASSERT_LT(unit[lane], int64_t{r + 1} * row_units);
          }
          stmatrix(sm, unit, v[l]);
        }
      }
      // 4. MMAs, warp by warp.
      std::vector<std::array<std::array<std::array<float, 4>, 4>, 32>> acc(
          kDepthwiseMmaChannels);  // [channel][lane][piece][e]
      for (int ch = 0; ch < kDepthwiseMmaChannels; ++ch) {
        for (auto& lane : acc[ch]) {
          for (auto& piece : lane) piece.fill(0.0f);
        }
        for (int i = 0; i < kh; ++i) {
          const float* wrow =
              &w_s[static_cast<std::size_t>((ch * kh + i) * kDepthwiseMmaWeightRow)];
          Fragments a{};
          for (int j = 0; j < pieces; ++j) {
            // Piece 0: ldmatrix.x4 of blocks 0 and 1; piece j: registers 2, 3 move to 0, 1 and an
            // x2 (lanes 0-15 address it) loads block j + 1.
            std::array<int64_t, 32> unit{};
            for (int lane = 0; lane < 32; ++lane) {
              const int addressing = j == 0 ? lane : lane % 16;
              unit[lane] = int64_t{depthwise_mma_a_row(addressing) + i} * row_units +
                           depthwise_mma_a_block(addressing) + ch * channel_units +
                           (j == 0 ? 0 : j + 1);
            }
            const Fragments loaded = ldmatrix(sm, unit, false);
            for (int lane = 0; lane < 32; ++lane) {
              if (j == 0) {
                a[lane] = loaded[lane];
              } else {
                a[lane][0] = a[lane][2];
                a[lane][1] = a[lane][3];
                a[lane][2] = loaded[lane][0];
                a[lane][3] = loaded[lane][1];
              }
            }
            float A[16][16], B[16][8];
            for (int lane = 0; lane < 32; ++lane) {
              const int gq = lane / 4, q = lane % 4;
              for (int e = 0; e < 2; ++e) {
                A[gq][2 * q + e] = a[lane][0][e];
                A[gq + 8][2 * q + e] = a[lane][1][e];
                A[gq][2 * q + 8 + e] = a[lane][2][e];
                A[gq + 8][2 * q + 8 + e] = a[lane][3][e];
                for (int reg = 0; reg < 2; ++reg) {
                  B[2 * q + 8 * reg + e][gq] = wrow[depthwise_mma_b_slot(lane, reg, e)];
                }
              }
            }
            for (int lane = 0; lane < 32; ++lane) {
              const int gq = lane / 4, q = lane % 4;
              for (int e = 0; e < 4; ++e) {
                const int row = gq + 8 * (e / 2), col = 2 * q + e % 2;
                float sum = 0.0f;
                for (int k = 0; k < 16; ++k) sum += A[row][k] * B[k][col];
                acc[ch][lane][j][e] += sum;
              }
            }
          }
        }
      }
      // 5. + bias into the staging (over the window).
      for (int ch = 0; ch < kDepthwiseMmaChannels; ++ch) {
        const float bias = g.has_bias && st.c0 + ch < g.c ? bias_value(st.c0 + ch) : 0.0f;
        for (int lane = 0; lane < 32; ++lane) {
          for (int j = 0; j < pieces; ++j) {
            for (int hh = 0; hh < 2; ++hh) {
              const int row = (lane >> 2) + 8 * hh;
              const int64_t unit = int64_t{ch} * out_channel_units + row * out_row_units + j;
              ASSERT_LT(unit, window_units);
              for (int e = 0; e < 2; ++e) {
                sm.at(unit, 2 * (lane & 3) + e) = acc[ch][lane][j][2 * hh + e] + bias;
              }
            }
          }
        }
      }
      // 6. Out.
      for (int u = 0; u < kDepthwiseMmaRows * pieces / 2; ++u) {
        std::array<int64_t, 32> unit{};
        for (int lane = 0; lane < 32; ++lane) {
          const int mine = 2 * u + (lane >> 4);
          unit[lane] = int64_t{8 * ((lane >> 3) & 1) + (lane & 7)} * out_channel_units +
                       (mine / pieces) * out_row_units + mine % pieces;
        }
        const Fragments v = ldmatrix(sm, unit, true);
        for (int lane = 0; lane < 32; ++lane) {
          for (int e = 0; e < 2; ++e) {
            const int item = 2 * u + e;
            const int64_t oh = st.oh0 + item / pieces;
            const int64_t ow = st.ow0 + 8 * (item % pieces) + (lane >> 2);
            if (oh >= g.out[1] || ow >= g.out[2]) continue;
            for (int h = 0; h < 2; ++h) {
              if (h == 1 && st.c0 + 8 >= g.c) continue;
              for (int half = 0; half < 2; ++half) {
                const int64_t ch = st.c0 + 8 * h + 2 * (lane & 3) + half;
                ASSERT_LT(ch, g.c);
                ++written[static_cast<std::size_t>(
                    (((st.n * g.out[0] + st.d0) * g.out[1] + oh) * g.out[2] + ow) * g.c + ch)];
                if (v[lane][2 * e + h][half] != direct(st.n, st.d0, oh, ow, ch)) ++mismatches;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(mismatches, 0);
  for (std::size_t i = 0; i < written.size(); ++i) ASSERT_EQ(written[i], 1) << "output " << i;
}

TEST(ConvDepthwiseMma, EmulationMatchesDirectSums) {
  emulate_mma(depthwise_spec({1, 14, 14, 32}, 7, 1, 3));  // 8-column tiles, partial rows
  emulate_mma(depthwise_spec({1, 20, 45, 24}, 7, 1, 3));  // partial channel tile
  emulate_mma(depthwise_spec({2, 17, 33, 16}, 3, 1, 1));
  emulate_mma(depthwise_spec({1, 12, 20, 8}, 9, 1, 4));  // one channel octet
  emulate_mma(depthwise_spec({1, 9, 17, 16}, 1, 1, 0));
  Spec odd = depthwise_spec({2, 12, 19, 16}, 3, 1, 0);
  odd.params.padding_lo = {2, -1};
  odd.params.padding_hi = {0, 3};
  odd.params.flip = true;
  odd.bias = true;
  emulate_mma(odd);
  Spec rect = depthwise_spec({1, 19, 40, 32}, 3, 1, 0);
  rect.w_shape = {32, 2, 5, 1};
  rect.params.padding_lo = {1, 2};
  rect.params.padding_hi = {0, 2};
  rect.params.flip = true;
  emulate_mma(rect);
  Spec three_d;
  three_d.x_shape = {1, 3, 10, 12, 16};
  three_d.w_shape = {16, 1, 5, 5, 1};
  three_d.params.groups = 16;
  three_d.params.stride = {2, 1, 1};
  three_d.params.padding_lo = {1, 2, 2};
  three_d.params.padding_hi = {1, 2, 2};
  three_d.bias = true;
  emulate_mma(three_d);
  // A 32- and a 16-column plan: force them through the widths of the planner's candidates.
  emulate_mma(depthwise_spec({2, 40, 60, 16}, 5, 1, 2));
  // One SM: blocks take several tiles and restage weights across channel tiles.
  DeviceDescription one_sm;
  one_sm.multiprocessors = 1;
  emulate_mma(depthwise_spec({2, 18, 30, 48}, 3, 1, 1), one_sm);
}

}  // namespace
}  // namespace gemmkit::cuda::conv_impl
