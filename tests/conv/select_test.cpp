// Host tests of path selection (select.h, with each path's plan.h): exact coverage of the
// depthwise and small-o tilings, the path auto and every forced algo take and their errors, the
// request's settings, chunking of huge problems, and where auto takes or races cuDNN. Runs without
// a GPU and without CUDA.
#include "cuda/conv/select.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "common/problems.h"
#include "conv/problem_spec.h"
#include "conv/select_util.h"
#include "cuda/conv/common/geometry.h"
#include "cuda/conv/gemm/layout.h"
#include "gemmkit/gemmkit.h"
#include "reference_double.h"

namespace gemmkit::cuda::conv_impl {
namespace {

// ---- Building problems (as src/api does, from shapes and parameters) ----------------------

ConvRequest request(const std::string& algo = "auto", int64_t workspace = kDefaultWorkspaceBytes,
                    const std::string& small_o = "") {
  return resolve(algo, "", workspace, "", "", small_o);
}

// ---- Depthwise and small-o tilings: exact coverage ---------------------------------------

// Simulates the depthwise kernels' loop: block b takes tiles [b * tiles_per_block, ...), thread
// (tx, ty) computes depthwise_item's channel vector x th rows x `run` outputs (the staged variant:
// lane (pair, group) of warp w computes channel pair c0 / 2 + pair x rows oh0 + 2w .. x columns
// ow0 + 7 * group ..). Every output element is computed exactly once, and a block restages its
// weights at most once per spatial_tiles tiles. (depthwise_test.cpp and
// depthwise_staged_test.cpp emulate the variants' reads and tap order too.)
void expect_depthwise_coverage(const ConvProblem& p, const std::string& algo = "depthwise") {
  const ConvConfig c = select_conv_config(p, kH200, request(algo));
  ASSERT_EQ(c.path, ConvPath::depthwise);
  expect_within_limits(c);
  const DepthwiseTiling& t = c.depthwise;
  SCOPED_TRACE(to_string(c));
  const ConvGeometry g = normalize(p);
  EXPECT_EQ(t.channel_vectors * c.vector, p.out_channels);
  EXPECT_EQ(c.tile, t.run);
  EXPECT_EQ(t.runs_per_row, ceil_div(g.out[2], t.run));
  if (t.variant == DepthwiseVariant::staged) {
    EXPECT_EQ(c.smem_bytes, depthwise_staged_smem_bytes(g, t));
    EXPECT_EQ(c.block, 32 * t.rows_per_block);
  } else if (t.variant == DepthwiseVariant::mma) {
    EXPECT_EQ(c.smem_bytes, depthwise_mma_smem_bytes(g, t.run / 8));
    EXPECT_EQ(c.vector, 8);
    EXPECT_EQ(t.cvt * 8, kDepthwiseMmaChannels);
  } else {
    EXPECT_EQ(c.smem_bytes, t.variant == DepthwiseVariant::blocked
                                ? t.cvt * t.w_cv_stride * 4
                                : p.kernel_positions() * t.cvt * c.vector * 4);
  }
  const int64_t rows = g.batch * g.out[0] * g.out[1];
  std::vector<int> hits(static_cast<std::size_t>(rows * g.out[2] * t.channel_vectors), 0);
  for (int64_t b = 0; b < int64_t{c.grid.x}; ++b) {
    int64_t stagings = 0, staged = -1;
    const int64_t first = b * t.tiles_per_block;
    const int64_t last = std::min(first + t.tiles_per_block, t.tiles());
    for (int64_t tile = first; tile < last; ++tile) {
      if (t.variant == DepthwiseVariant::mma) {
        const DepthwiseStagedTile st = depthwise_mma_tile(g, t, tile);
        if (st.channel_tile != staged) {
          staged = st.channel_tile;
          ++stagings;
        }
        ASSERT_LT(st.n, g.batch);
        ASSERT_LT(st.d0, g.out[0]);
        for (int64_t cv = st.c0 / 8; cv < st.c0 / 8 + t.cvt && cv < t.channel_vectors; ++cv) {
          for (int64_t oh = st.oh0; oh < st.oh0 + kDepthwiseMmaRows && oh < g.out[1]; ++oh) {
            const int64_t row = (st.n * g.out[0] + st.d0) * g.out[1] + oh;
            for (int64_t ow = st.ow0; ow < st.ow0 + t.run && ow < g.out[2]; ++ow) {
              ++hits[static_cast<std::size_t>((row * g.out[2] + ow) * t.channel_vectors + cv)];
            }
          }
        }
        continue;
      }
      if (t.variant == DepthwiseVariant::staged) {
        const DepthwiseStagedTile st = depthwise_staged_tile(g, t, tile);
        if (st.channel_tile != staged) {
          staged = st.channel_tile;
          ++stagings;
        }
        ASSERT_LT(st.n, g.batch);
        ASSERT_LT(st.d0, g.out[0]);
        for (int64_t lane = 0; lane < 32 * t.rows_per_block; ++lane) {
          const int64_t warp = lane / 32, pair = lane % 32 % t.cvt, group = lane % 32 / t.cvt;
          const int64_t cv = st.c0 / 2 + pair;
          if (cv >= t.channel_vectors) continue;
          for (int64_t r = 0; r < kDepthwiseStagedRows; ++r) {
            const int64_t oh = st.oh0 + kDepthwiseStagedRows * warp + r;
            if (oh >= g.out[1]) continue;
            const int64_t row = (st.n * g.out[0] + st.d0) * g.out[1] + oh;
            for (int64_t j = 0; j < kDepthwiseStagedRun; ++j) {
              const int64_t ow = st.ow0 + kDepthwiseStagedRun * group + j;
              if (ow < g.out[2]) {
                ++hits[static_cast<std::size_t>((row * g.out[2] + ow) * t.channel_vectors + cv)];
              }
            }
          }
        }
        continue;
      }
      for (int64_t ty = 0; ty < t.spb(); ++ty) {
        for (int64_t tx = 0; tx < t.cvt; ++tx) {
          const DepthwiseItem item = depthwise_item(g, t, tile, tx, ty);
          if (tx == 0 && ty == 0 && item.channel_tile != staged) {
            staged = item.channel_tile;
            ++stagings;
          }
          if (!item.valid) continue;
          ASSERT_LT(item.n, g.batch);
          ASSERT_LT(item.d0, g.out[0]);
          ASSERT_LT(item.d1, g.out[1]);
          ASSERT_LT(item.ow0, g.out[2]);
          for (int64_t r = 0; r < t.th && item.d1 + r < g.out[1]; ++r) {
            const int64_t row = (item.n * g.out[0] + item.d0) * g.out[1] + item.d1 + r;
            for (int64_t j = 0; j < t.run && item.ow0 + j < g.out[2]; ++j) {
              ++hits[static_cast<std::size_t>((row * g.out[2] + item.ow0 + j) * t.channel_vectors +
                                              item.channel_vector)];
            }
          }
        }
      }
    }
    EXPECT_LE(stagings, 1 + ceil_div(t.tiles_per_block, t.spatial_tiles));
  }
  for (std::size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i], 1) << "item " << i;
}

TEST(ConvTiling, DepthwiseCoversEachOutputOnce) {
  for (const int64_t c : {1, 3, 8, 96, 144, 384, 520}) {
    for (const int64_t mult : {1, 2, 3}) {
      Spec s;
      s.x_shape = {2, 9, 13, c};
      s.w_shape = {c * mult, 3, 3, 1};
      s.params.groups = c;
      s.params.padding_lo = {1};
      s.params.padding_hi = {1};
      expect_depthwise_coverage(make_problem(s));
    }
  }
  Spec big_kernel;  // 11x11: fewer channel vectors per tile (shared memory <= 48 KiB), and
                    // wider than the register window
  big_kernel.x_shape = {1, 20, 20, 4096};
  big_kernel.w_shape = {4096, 11, 11, 1};
  big_kernel.params.groups = 4096;
  expect_depthwise_coverage(make_problem(big_kernel));
  Spec conv1d;  // Mamba's causal conv1d
  conv1d.x_shape = {2, 37, 64};
  conv1d.w_shape = {64, 4, 1};
  conv1d.params.groups = 64;
  conv1d.params.padding_lo = {3};
  conv1d.params.padding_hi = {0};
  expect_depthwise_coverage(make_problem(conv1d));
}

// ConvNeXt 7x7 c96 takes the tensor-core variant, the other 2-D stride-1 suite rows the staged
// one, the stride-2 one the blocked variant and the 1-D one the narrow window variant, with enough
// blocks for 132 SMs (the 14 x 14 row: one block per 14 x 14 x 32 tile, 96 blocks, the fewest
// rounds); odd shapes, strides and multipliers are covered exactly once by every variant.
TEST(ConvTiling, DepthwiseVariantsAndSuiteRows) {
  struct Row {
    Spec spec;
    DepthwiseVariant variant;
    int64_t min_blocks;
  };
  Spec mamba = depthwise_spec({8, 2048, 8192}, 4, 1, 0);
  mamba.params.padding_lo = {3};
  const Row rows[] = {
      {depthwise_spec({8, 56, 56, 96}, 7, 1, 3), DepthwiseVariant::mma, 384},
      {depthwise_spec({8, 14, 14, 384}, 7, 1, 3), DepthwiseVariant::staged, 96},
      {depthwise_spec({8, 56, 56, 144}, 3, 1, 1), DepthwiseVariant::staged, 264},
      {depthwise_spec({8, 56, 56, 144}, 3, 2, 1), DepthwiseVariant::blocked, 264},
      {mamba, DepthwiseVariant::narrow, 1000},
  };
  for (const Row& r : rows) {
    const ConvProblem p = make_problem(r.spec);
    const ConvConfig c = select_conv_config(p, kH200, request());
    SCOPED_TRACE(to_string(c));
    ASSERT_EQ(c.path, ConvPath::depthwise);
    EXPECT_EQ(c.depthwise.variant, r.variant);
    EXPECT_GE(int64_t{c.grid.x}, r.min_blocks);
    expect_within_limits(c);
  }
  for (const int i : {0, 1, 2, 3}) expect_depthwise_coverage(make_problem(rows[i].spec));
  for (const int64_t stride : {1, 2, 3}) {
    for (const int64_t kernel : {1, 3, 4, 5, 7, 9}) {
      for (const int64_t c : {8, 24, 40}) {
        Spec s = depthwise_spec({2, 11, 19, c}, kernel, stride, kernel / 2);
        expect_depthwise_coverage(make_problem(s));
        s.dtype = s.out_dtype = DType::f32;
        expect_depthwise_coverage(make_problem(s));
      }
    }
  }
  Spec three_d = depthwise_spec({2, 3, 5, 9, 16}, 3, 1, 1);
  expect_depthwise_coverage(make_problem(three_d));
  Spec multiplier = depthwise_spec({1, 7, 30, 8}, 3, 1, 1);
  multiplier.w_shape[0] = 24;
  const ConvProblem pm = make_problem(multiplier);
  const ConvConfig cm = select_conv_config(pm, kH200, request());
  EXPECT_EQ(cm.depthwise.variant, DepthwiseVariant::blocked);
  EXPECT_EQ(cm.vector, 1);
  expect_depthwise_coverage(pm);
}

TEST(ConvTiling, DepthwiseExtremeShapes) {
  // 2^16 positions (batch 1, 256 x 256): covered exactly once.
  expect_depthwise_coverage(make_problem(depthwise_spec({1, 256, 256, 16}, 3, 1, 1)));
  // 2^31 positions of a causal conv1d: the grid stays within the cap; the first and the last
  // tile decode to the first and the last outputs, and the blocks' tile ranges reach the end.
  Spec s = depthwise_spec({1, int64_t{1} << 31, 64}, 4, 1, 0);
  s.params.padding_lo = {3};
  const ConvProblem p = make_problem(s);
  EXPECT_EQ(p.out_positions(), int64_t{1} << 31);
  const ConvConfig c = select_conv_config(p, kH200, request());
  ASSERT_EQ(c.path, ConvPath::depthwise);
  expect_within_limits(c);
  const DepthwiseTiling& t = c.depthwise;
  const ConvGeometry g = normalize(p);
  EXPECT_LE(int64_t{c.grid.x}, max_blocks(kH200));
  EXPECT_GE(int64_t{c.grid.x} * t.tiles_per_block, t.tiles());
  const DepthwiseItem first = depthwise_item(g, t, 0, 0, 0);
  EXPECT_TRUE(first.valid);
  EXPECT_EQ(first.ow0, 0);
  const int64_t last_tile = t.tiles() - 1;
  int64_t reach = 0;
  for (int64_t ty = 0; ty < t.spb(); ++ty) {
    for (int64_t tx = 0; tx < t.cvt; ++tx) {
      const DepthwiseItem item = depthwise_item(g, t, last_tile, tx, ty);
      if (!item.valid) continue;
      EXPECT_EQ(item.channel_vector / t.cvt, t.channel_tiles - 1);
      reach = std::max(reach, item.ow0 + t.run);
    }
  }
  EXPECT_GE(reach, g.out[2]);
  EXPECT_LT(reach - t.run, g.out[2]);
}

// Simulates conv_small_o_mma_kernel: tiles of the blocks' ranges cover every output once, and
// every P entry an output reads lies in the region that the MMAs wrote.
void expect_small_o_mma_coverage(const ConvProblem& p) {
  const ConvConfig c =
      select_conv_config(p, kH200, request("direct", kDefaultWorkspaceBytes, "mma"));
  ASSERT_EQ(c.path, ConvPath::small_o);
  ASSERT_TRUE(c.small_o.mma) << to_string(c);
  expect_within_limits(c);
  const SmallOTiling& t = c.small_o;
  const ConvGeometry g = normalize(p);
  EXPECT_LE(c.smem_bytes, kMaxKernelSmem);
  EXPECT_EQ(c.smem_bytes, t.weight_bytes + t.region() * t.p_stride * 4);
  std::vector<int> hits(static_cast<std::size_t>(g.positions()), 0);
  for (int64_t b = 0; b < int64_t{c.grid.x}; ++b) {
    const int64_t last = std::min(t.tiles, (b + 1) * t.tiles_per_block);
    for (int64_t tile = b * t.tiles_per_block; tile < last; ++tile) {
      const SmallOTile s = small_o_tile(g, t, tile);
      for (int64_t ph = 0; ph < t.tile_h; ++ph) {
        for (int64_t pw = 0; pw < t.tile_w; ++pw) {
          if (s.oh0 + ph >= g.out[1] || s.ow0 + pw >= g.out[2]) continue;
          ++hits[static_cast<std::size_t>(
              ((s.n * g.out[0] + s.d0) * g.out[1] + s.oh0 + ph) * g.out[2] + s.ow0 + pw)];
          for (int64_t t1 = 0; t1 < g.kernel[1]; ++t1) {
            for (int64_t t2 = 0; t2 < g.kernel[2]; ++t2) {
              const int64_t r = (ph + t1) * t.region_w + pw + t2;
              ASSERT_LT(r, t.region());
              for (int64_t oc = 0; oc < g.o; ++oc) {
                const int64_t i = small_o_p_index(t, r, (t1 * g.kernel[2] + t2) * g.o + oc);
                ASSERT_GE(i, r * t.p_stride);
                ASSERT_LT(i, (r + 1) * t.p_stride);
              }
            }
          }
        }
      }
    }
  }
  for (std::size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i], 1) << "position " << i;
}

TEST(ConvTiling, SmallOTensorCoreCoversEachOutputOnce) {
  for (const int64_t o : {1, 3, 8}) {
    for (const int64_t c : {8, 40, 128}) {
      Spec s;
      s.x_shape = {2, 19, 37, c};
      s.w_shape = {o, 3, 3, c};
      s.params.padding_lo = {1};
      s.params.padding_hi = {1};
      expect_small_o_mma_coverage(make_problem(s));
      Spec conv1d;  // 1-D, 5 taps, negative padding at the end
      conv1d.x_shape = {3, 300, c};
      conv1d.w_shape = {o, 5, c};
      conv1d.params.padding_lo = {4};
      conv1d.params.padding_hi = {-1};
      expect_small_o_mma_coverage(make_problem(conv1d));
    }
  }
  // The VAE conv_out row: 14 x 14 output tiles of 16 x 16 regions, 5476 tiles in ~1800 blocks.
  const Spec vae = gemmkit_test::padded_spec({1, 1024, 1024, 128}, {3, 3, 3, 128}, 1, true);
  const ConvConfig c = select_conv_config(make_problem(vae), kH200,
                                          request("direct", kDefaultWorkspaceBytes, "mma"));
  ASSERT_TRUE(c.small_o.mma);
  EXPECT_EQ(c.small_o.tile_h, 14);
  EXPECT_EQ(c.small_o.tiles, 74 * 74);
  EXPECT_GE(int64_t{c.grid.x}, 1000);
  // Not for the region kernel: f32, stride 2, c % 8 != 0. The taps kernel takes stride 2.
  const ConvRequest mma = request("auto", kDefaultWorkspaceBytes, "mma");
  Spec f32 = vae;
  f32.x_shape = {1, 32, 32, 128};
  f32.dtype = f32.out_dtype = DType::f32;
  EXPECT_FALSE(select_conv_config(make_problem(f32), kH200, mma).small_o.mma);
  EXPECT_FALSE(select_conv_config(make_problem(f32), kH200, request()).small_o_taps.active);
  Spec strided = vae;
  strided.x_shape = {1, 32, 32, 128};
  strided.params.stride = {2};
  EXPECT_FALSE(select_conv_config(make_problem(strided), kH200, mma).small_o.mma);
  EXPECT_TRUE(select_conv_config(make_problem(strided), kH200, request()).small_o_taps.active);
  Spec odd = vae;
  odd.x_shape = {1, 32, 32, 12};
  odd.w_shape = {3, 3, 3, 12};
  EXPECT_FALSE(select_conv_config(make_problem(odd), kH200, mma).small_o.mma);
  EXPECT_FALSE(select_conv_config(make_problem(odd), kH200, request()).small_o_taps.active);
}

// Simulates conv_small_o_kernel's loop: warps stop together, inactive lanes only shuffle.
TEST(ConvTiling, SmallOCoversEachStripOnce) {
  for (const int64_t c : {2, 3, 16, 24, 128, 1000}) {
    for (const int64_t width : {1, 3, 4, 5, 17}) {
      Spec s;  // f32: the CUDA-core kernel (16-bit x with c % 8 == 0 takes the tensor cores)
      s.x_shape = {2, 3, width, c};
      s.w_shape = {3, 1, 1, c};
      s.dtype = s.out_dtype = DType::f32;
      const ConvProblem p = make_problem(s);
      const ConvConfig cfg = select_conv_config(p, kH200, request("direct"));
      ASSERT_EQ(cfg.path, ConvPath::small_o) << to_string(cfg);
      expect_within_limits(cfg);
      const SmallOTiling& t = cfg.small_o;
      const int lanes = 1 << t.lanes_log2;
      EXPECT_EQ(lanes, cfg.lanes);
      EXPECT_LE(lanes, 32);
      EXPECT_GE(int64_t{lanes}, std::min<int64_t>(32, t.channel_vectors));
      EXPECT_EQ(t.channel_vectors * cfg.vector, c);
      EXPECT_EQ(t.strips, 2 * 3 * ceil_div(width, kSmallOPositions));
      std::vector<int> hits(static_cast<std::size_t>(t.strips), 0);
      for (int64_t b = 0; b < int64_t{cfg.grid.x}; ++b) {
        for (int64_t thread = 0; thread < cfg.block; ++thread) {
          const int64_t strip_in_block = thread >> t.lanes_log2;
          const int64_t warp_first = (thread & ~int64_t{31}) >> t.lanes_log2;
          for (int64_t it = 0;; ++it) {
            if (grid_stride_index(b, warp_first, it, cfg.grid.x, t.strips_per_block) >= t.strips) {
              break;
            }
            const int64_t strip =
                grid_stride_index(b, strip_in_block, it, cfg.grid.x, t.strips_per_block);
            if (strip < t.strips && (thread & (lanes - 1)) == 0) {
              ++hits[static_cast<std::size_t>(strip)];
            }
          }
        }
      }
      for (std::size_t i = 0; i < hits.size(); ++i) ASSERT_EQ(hits[i], 1) << "strip " << i;
    }
  }
}

// ---- Selection ----------------------------------------------------------------------------

Spec resnet_3x3(int64_t n = 8, int64_t hw = 56, int64_t c = 64, int64_t o = 64) {
  Spec s;
  s.x_shape = {n, hw, hw, c};
  s.w_shape = {o, 3, 3, c};
  s.params.padding_lo = {1};
  s.params.padding_hi = {1};
  return s;
}

TEST(ConvSelect, AutoPicksThePathThatFits) {
  {
    const ConvProblem p = make_problem(resnet_3x3());
    const ConvConfig implicit = select_conv_config(p, kH200, request());
    EXPECT_TRUE(is_implicit_path(implicit.path)) << to_string(implicit);
    // o = 64: 64-channel tiles (the narrow-o form).
    EXPECT_NE(implicit.reason.find("tile=64x"), std::string::npos) << implicit.reason;
    expect_within_limits(implicit);
    const ConvConfig c = select_conv_config(p, kH200, request("gemm"));
    EXPECT_EQ(c.path, ConvPath::unfold_gemm) << to_string(c);
    expect_within_limits(c);
    expect_gemm_chunks_valid(p, c);
    EXPECT_EQ(c.chunks, 1);
    EXPECT_EQ(c.vector, 8);  // 64 bf16 channels, 256-byte aligned: 16-byte copies
  }
  {
    Spec s;
    s.x_shape = {8, 56, 56, 256};
    s.w_shape = {64, 1, 1, 256};
    s.bias = true;
    const ConvProblem p = make_problem(s);
    const ConvConfig c = select_conv_config(p, kH200, request());
    EXPECT_EQ(c.path, ConvPath::gemm_1x1) << to_string(c);
    EXPECT_EQ(c.bias, BiasMode::epilogue);
    EXPECT_EQ(c.unfold_bytes, 0);
    expect_gemm_chunks_valid(p, c);
  }
  {
    Spec s;  // ConvNeXt depthwise 7x7
    s.x_shape = {8, 56, 56, 96};
    s.w_shape = {96, 7, 7, 1};
    s.params.groups = 96;
    s.params.padding_lo = {3};
    s.params.padding_hi = {3};
    const ConvConfig c = select_conv_config(make_problem(s), kH200, request());
    EXPECT_EQ(c.path, ConvPath::depthwise) << to_string(c);
    EXPECT_EQ(c.depthwise.variant, DepthwiseVariant::mma);
    EXPECT_EQ(c.vector, 8);
    EXPECT_TRUE(c.depthwise.x_vector);
    expect_within_limits(c);
  }
  {
    Spec s;  // VAE conv_out: 128 -> 3
    s.x_shape = {1, 64, 64, 128};
    s.w_shape = {3, 3, 3, 128};
    s.params.padding_lo = {1};
    s.params.padding_hi = {1};
    s.bias = true;
    const ConvConfig c = select_conv_config(make_problem(s), kH200, request());
    EXPECT_EQ(c.path, ConvPath::small_o) << to_string(c);
    EXPECT_EQ(c.vector, 8);
    EXPECT_TRUE(c.small_o_taps.active);  // bf16: the taps kernel, 27 of 32 Y columns
    EXPECT_EQ(c.small_o_taps.n_cols, 27);
    EXPECT_EQ(c.small_o_taps.n_tiles, 4);
    EXPECT_NE(to_string(c).find("small_o=taps"), std::string::npos) << to_string(c);
    expect_within_limits(c);
    // GEMMKIT_CONV_SMALL_O=mma: the region kernel, 16 x 16 regions.
    const ConvConfig m =
        select_conv_config(make_problem(s), kH200, request("auto", kDefaultWorkspaceBytes, "mma"));
    EXPECT_FALSE(m.small_o_taps.active);
    EXPECT_TRUE(m.small_o.mma);
    EXPECT_EQ(m.small_o.region_h, 16);
    EXPECT_EQ(m.small_o.region_w, 16);
    EXPECT_EQ(m.small_o.n_cols, 27);
    EXPECT_NE(to_string(m).find("small_o=mma"), std::string::npos) << to_string(m);
    expect_within_limits(m);
    // GEMMKIT_CONV_SMALL_O=cuda: the CUDA-core kernel.
    const ConvConfig k =
        select_conv_config(make_problem(s), kH200, request("auto", kDefaultWorkspaceBytes, "cuda"));
    EXPECT_FALSE(k.small_o_taps.active);
    EXPECT_FALSE(k.small_o.mma);
    EXPECT_NE(to_string(k).find("small_o=cuda"), std::string::npos) << to_string(k);
    expect_within_limits(k);
  }
  {
    Spec s;  // o = 5..8 with f32 x: the CUDA-core kernel reads 8-byte vectors (acc[4][8] with
             // 16-byte ones would spill)
    s.x_shape = {1, 8, 8, 128};
    s.w_shape = {8, 3, 3, 128};
    s.dtype = s.out_dtype = DType::f32;
    const ConvConfig c = select_conv_config(make_problem(s), kH200, request());
    EXPECT_EQ(c.path, ConvPath::small_o);
    EXPECT_FALSE(c.small_o.mma);
    EXPECT_EQ(c.vector, 2);
    Spec b = s;  // bf16: 72 P columns (> 64: not the taps kernel): the region kernel, 8 x 8
    b.dtype = b.out_dtype = DType::bf16;
    const ConvConfig m = select_conv_config(make_problem(b), kH200, request());
    EXPECT_FALSE(m.small_o_taps.active);
    EXPECT_NE(m.reason.find("taps * o = 72 > 64"), std::string::npos) << m.reason;
    EXPECT_TRUE(m.small_o.mma);
    EXPECT_EQ(m.small_o.region(), 64);
    EXPECT_EQ(m.small_o.p_stride, 96);
    expect_within_limits(m);
  }
  {
    Spec s;  // grouped (ResNeXt): auto takes the small-c kernel; algo 'gemm' one
             // strided-batched GEMM over the 32 groups
    s.x_shape = {8, 56, 56, 256};
    s.w_shape = {256, 3, 3, 8};
    s.params.groups = 32;
    s.params.padding_lo = {1};
    s.params.padding_hi = {1};
    const ConvProblem p = make_problem(s);
    EXPECT_EQ(select_conv_config(p, kH200, request()).path, ConvPath::small_c);
    const ConvConfig c = select_conv_config(p, kH200, request("gemm"));
    EXPECT_EQ(c.path, ConvPath::unfold_gemm);
    const GemmCall g = gemm_call(p, c, 0, c.chunk_rows);
    EXPECT_EQ(g.batch, 32);
    EXPECT_EQ(g.m, 8);
    EXPECT_EQ(g.k, 72);
    EXPECT_EQ(g.ldb, 9 * 256);
    EXPECT_EQ(g.b_batch_stride, 72);
    EXPECT_EQ(g.ldd, 256);
    EXPECT_EQ(g.d_batch_stride, 8);
    EXPECT_EQ(g.a_batch_stride, 8 * 72);
    expect_gemm_chunks_valid(p, c);
  }
}

TEST(ConvSelect, LayoutsTheGemmCannotTakeFallBackToDirect) {
  // The implicit GEMM takes any strides of 16-bit tensors; f32 ones (which it does not serve)
  // show the unfold's limits.
  for (const DType dtype : {DType::bf16, DType::f32}) {
    Spec s = resnet_3x3();
    s.dtype = s.out_dtype = dtype;
    ConvProblem p = make_problem(s);
    std::swap(p.weight.strides[1], p.weight.strides[2]);  // kernel dims permuted
    const ConvConfig c = select_conv_config(p, kH200, request());
    EXPECT_EQ(is_implicit_path(c.path), dtype == DType::bf16) << to_string(c);
    if (dtype == DType::f32) {
      EXPECT_EQ(c.path, ConvPath::direct);
    }
    if (dtype == DType::f32) {
      EXPECT_NE(c.reason.find("weight"), std::string::npos) << c.reason;
    }
    expect_within_limits(c);
  }
  for (const DType dtype : {DType::bf16, DType::f32}) {
    Spec s = resnet_3x3(2, 8, 16, 64);  // o = 64: half of the implicit GEMM's N tile is useful
    s.dtype = s.out_dtype = dtype;
    ConvProblem p = make_problem(s);
    p.out.strides[1] *= 2;  // rows of the output have gaps: no single position stride
    p.out.strides[0] *= 2;
    EXPECT_EQ(position_stride(p.out), -1);
    const ConvPath path = select_conv_config(p, kH200, request()).path;
    EXPECT_TRUE(dtype == DType::bf16 ? is_implicit_path(path) : path == ConvPath::direct);
  }
  {
    Spec s = resnet_3x3(2, 8, 16, 16);
    s.bias = true;
    ConvProblem p = make_problem(s);
    EXPECT_EQ(select_conv_config(p, kH200, request("gemm")).bias, BiasMode::epilogue);
    p.bias.strides[0] = 2;  // strided bias with a bf16 output: no epilogue, f32 scratch
    const ConvConfig scratch = select_conv_config(p, kH200, request("gemm"));
    EXPECT_EQ(scratch.path, ConvPath::unfold_gemm);
    EXPECT_EQ(scratch.bias, BiasMode::scratch);
    expect_gemm_chunks_valid(p, scratch);
    p.out.dtype = DType::f32;  // f32 output: the bias pass adds in place
    const ConvConfig c = select_conv_config(p, kH200, request("gemm"));
    EXPECT_EQ(c.path, ConvPath::unfold_gemm);
    EXPECT_EQ(c.bias, BiasMode::pass);
    EXPECT_EQ(c.scratch_bytes, 0);
  }
  {
    Spec s;  // odd o: unaligned bf16 output rows never take the epilogue
    s.x_shape = {1, 8, 8, 16};
    s.w_shape = {9, 3, 3, 16};
    s.bias = true;
    ConvProblem p = make_problem(s);
    EXPECT_EQ(select_conv_config(p, kH200, request("gemm")).bias, BiasMode::scratch);
    Spec s16 = s;  // o = 16 (32-byte rows), but out only 8-byte aligned: scratch too
    s16.w_shape = {16, 3, 3, 16};
    p = make_problem(s16);
    EXPECT_EQ(select_conv_config(p, kH200, request("gemm")).bias, BiasMode::epilogue);
    p.out.data = fake(0x40000008);
    EXPECT_EQ(select_conv_config(p, kH200, request("gemm")).bias, BiasMode::scratch);
    p.out.data = fake(0x40000010);
    EXPECT_EQ(select_conv_config(p, kH200, request("gemm")).bias, BiasMode::epilogue);
  }
  {
    Spec s = resnet_3x3(2, 8, 16, 16);
    s.dtype = s.out_dtype = DType::f32;
    s.bias = true;
    const ConvConfig c = select_conv_config(make_problem(s), kH200, request("gemm"));
    EXPECT_EQ(c.path, ConvPath::unfold_gemm);
    EXPECT_EQ(c.bias, BiasMode::pass);  // f32 output: in place
    EXPECT_EQ(c.vector, 4);
  }
  {
    ConvProblem p = make_problem(resnet_3x3(2, 8, 16, 16));
    p.x.data = fake(0x10000002);  // 2-byte aligned x: scalar unfold copies
    EXPECT_EQ(select_conv_config(p, kH200, request("gemm")).vector, 1);
    p.x.data = fake(0x10000008);
    EXPECT_EQ(select_conv_config(p, kH200, request("gemm")).vector, 4);
  }
}

TEST(ConvSelect, WorkspaceBoundsTheUnfold) {
  const ConvProblem p = make_problem(resnet_3x3(8, 56, 64, 64));
  const int64_t row_bytes = 9 * 64 * 2;
  for (const int64_t budget : {int64_t{1} << 20, int64_t{4} << 20, int64_t{256} << 20}) {
    const ConvConfig c = select_conv_config(p, kH200, request("gemm", budget));
    ASSERT_EQ(c.path, ConvPath::unfold_gemm) << to_string(c);
    expect_within_limits(c);
    expect_gemm_chunks_valid(p, c);
    EXPECT_EQ(c.lt_workspace_bytes, std::min<int64_t>(kMaxLtWorkspaceBytes, budget / 8));
    EXPECT_EQ(c.chunk_rows,
              std::min(p.out_positions(), (budget - c.lt_workspace_bytes - 512) / row_bytes));
  }
  // A workspace below one unfold row: auto takes the implicit GEMM (no workspace), forced gemm
  // names the reason.
  EXPECT_TRUE(is_implicit_path(select_conv_config(p, kH200, request("auto", 1000)).path));
  EXPECT_TRUE(is_implicit_path(select_conv_config(p, kH200, request("auto", 0)).path));
  try {
    select_conv_config(p, kH200, request("gemm", 1000));
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("options.algo"), std::string::npos) << m;
    EXPECT_NE(m.find("'gemm'"), std::string::npos) << m;
    EXPECT_NE(m.find("workspace"), std::string::npos) << m;
  }
  // Chunks of fewer than kMinChunkRows rows: auto prefers the implicit GEMM, and without it
  // (f32) the direct kernel.
  const ConvConfig tiny = select_conv_config(p, kH200, request("auto", 100 * row_bytes));
  EXPECT_TRUE(is_implicit_path(tiny.path)) << to_string(tiny);
  Spec f32 = resnet_3x3(8, 56, 64, 64);
  f32.dtype = f32.out_dtype = DType::f32;
  EXPECT_EQ(select_conv_config(make_problem(f32), kH200, request("auto", 1000)).path,
            ConvPath::direct);
  EXPECT_EQ(select_conv_config(p, kH200, request("gemm", 100 * row_bytes)).path,
            ConvPath::unfold_gemm);
}

TEST(ConvSelect, ForcedAlgos) {
  const ConvProblem p = make_problem(resnet_3x3(1, 8, 16, 16));
  EXPECT_EQ(select_conv_config(p, kH200, request("reference")).path, ConvPath::direct);
  EXPECT_EQ(select_conv_config(p, kH200, request("direct")).path, ConvPath::direct);
  EXPECT_EQ(select_conv_config(p, kH200, request("gemm")).path, ConvPath::unfold_gemm);
  const auto expect_error = [](const ConvProblem& problem, const ConvRequest& r,
                               const std::vector<std::string>& parts) {
    try {
      select_conv_config(problem, kH200, r);
      ADD_FAILURE() << "expected an Error for algo " << algo_name(r.algo);
    } catch (const Error& e) {
      const std::string m = e.what();
      for (const std::string& part : parts) EXPECT_NE(m.find(part), std::string::npos) << m;
    }
  };
  expect_error(p, request("depthwise"), {"options.algo", "'depthwise'", "groups (1) != c (16)"});
  try {  // an unknown name never reaches selection: the request holds a ConvAlgo
    resolve("fastest", "", -1, "");
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    const std::string m = e.what();
    for (const char* part : {"options.algo", "'fastest'", "must be one of"}) {
      EXPECT_NE(m.find(part), std::string::npos) << m;
    }
  }
  try {
    resolve("", "winograd", -1, "");
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("GEMMKIT_CONV_ALGO"), std::string::npos) << m;
    EXPECT_NE(m.find("'winograd'"), std::string::npos) << m;
  }
  // Depthwise with a channel stride of 2 cannot take the depthwise kernel.
  Spec dw;
  dw.x_shape = {1, 8, 8, 16};
  dw.w_shape = {16, 3, 3, 1};
  dw.params.groups = 16;
  ConvProblem q = make_problem(dw);
  EXPECT_EQ(select_conv_config(q, kH200, request()).path, ConvPath::depthwise);
  q.x.strides[3] = 2;
  q.x.strides[2] = 32;
  q.x.strides[1] = 256;
  q.x.strides[0] = 2048;
  expect_error(q, request("depthwise"), {"'depthwise'", "x's channel stride is not 1"});
  EXPECT_EQ(select_conv_config(q, kH200, request()).path, ConvPath::unfold_gemm);
  EXPECT_EQ(select_conv_config(q, kH200, request("direct")).path, ConvPath::direct);
  // "direct" takes the small-o kernel where it applies; "reference" never does.
  Spec small;
  small.x_shape = {1, 8, 8, 32};
  small.w_shape = {3, 3, 3, 32};
  EXPECT_EQ(select_conv_config(make_problem(small), kH200, request("direct")).path,
            ConvPath::small_o);
  EXPECT_EQ(select_conv_config(make_problem(small), kH200, request("reference")).path,
            ConvPath::direct);
}

TEST(ConvSelect, ResolveRequest) {
  EXPECT_EQ(resolve("", "", -1, "").algo, ConvAlgo::automatic);
  EXPECT_EQ(resolve("", "", -1, "").workspace_bytes, kDefaultWorkspaceBytes);
  EXPECT_EQ(resolve("", "gemm", -1, "").algo, ConvAlgo::gemm);
  EXPECT_NE(resolve("", "gemm", -1, "").algo_origin.find("GEMMKIT_CONV_ALGO"), std::string::npos);
  EXPECT_EQ(resolve("direct", "gemm", -1, "").algo, ConvAlgo::direct);  // options win
  EXPECT_EQ(resolve("direct", "gemm", -1, "").algo_origin, "options.algo");
  EXPECT_EQ(resolve("", "", -1, "64").workspace_bytes, int64_t{64} << 20);
  EXPECT_EQ(resolve("", "", -1, "0").workspace_bytes, 0);
  EXPECT_EQ(resolve("", "", 12345, "64").workspace_bytes, 12345);  // options win
  for (const char* bad : {"-1", "1.5", "64MB", " 64", "99999999999", "1073741825"}) {
    try {
      resolve("", "", -1, bad);
      ADD_FAILURE() << "expected an Error for '" << bad << "'";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("GEMMKIT_CONV_WORKSPACE_MB"), std::string::npos) << m;
      EXPECT_NE(m.find(bad), std::string::npos) << m;
    }
  }
}

TEST(ConvSelect, ToStringNamesTheChoice) {
  const ConvProblem p = make_problem(resnet_3x3());
  const std::string text = to_string(select_conv_config(p, kH200, request("gemm", 8 << 20)));
  for (const char* part : {"path=unfold_gemm", "algo=gemm",
                           "chunk_rows=", "chunks=", "workspace=", "bias=none", "reason:"}) {
    EXPECT_NE(text.find(part), std::string::npos) << text;
  }
  EXPECT_EQ(kernel_name(ConvPath::depthwise), "cuda.conv.depthwise");
  EXPECT_EQ(kernel_name(ConvPath::direct), "cuda.conv.direct");
}

// ---- Extreme shapes -------------------------------------------------------------------------

TEST(ConvExtreme, SixtyFiveThousandPositions) {
  // Batch 1, 256 x 256 output, 3x3: 2^16 output positions (gridDim.z would hold 65535).
  const ConvProblem p = make_problem(resnet_3x3(1, 256, 64, 64));
  EXPECT_EQ(p.out_positions(), int64_t{1} << 16);
  for (const char* algo : {"auto", "reference", "gemm", "direct"}) {
    const ConvConfig c = select_conv_config(p, kH200, request(algo));
    expect_within_limits(c);
    if (c.path == ConvPath::unfold_gemm) expect_gemm_chunks_valid(p, c);
  }
}

TEST(ConvExtreme, TwoToTheThirtyOnePositions) {
  // 2^31 output positions (a 1x1 conv over a 2^16 x 2^15 image, 4 channels in, 16 out).
  Spec s;
  s.x_shape = {1, int64_t{1} << 16, int64_t{1} << 15, 4};
  s.w_shape = {16, 1, 1, 4};
  const ConvProblem p = make_problem(s);
  EXPECT_EQ(p.out_positions(), int64_t{1} << 31);
  const ConvConfig gemm = select_conv_config(p, kH200, request());
  EXPECT_EQ(gemm.path, ConvPath::gemm_1x1);
  expect_within_limits(gemm);
  expect_gemm_chunks_valid(p, gemm);
  EXPECT_EQ(gemm.chunks, (int64_t{1} << 31) / kMaxGemmRows);
  const ConvConfig direct = select_conv_config(p, kH200, request("reference"));
  expect_within_limits(direct);
  const int64_t items = p.out_positions() * p.out_channels;  // 2^35 threads' worth of work
  EXPECT_GE(grid_iterations(items, direct.grid.x, direct.block) * direct.grid.x * direct.block,
            items);
  // The same with a 3x3 kernel: the small-c kernel on 2^23 tiles (64-bit tile indices), and
  // under algo 'gemm' the unfold in chunks bounded by the workspace.
  Spec s3 = s;
  s3.w_shape = {16, 3, 3, 4};
  s3.params.padding_lo = {1};
  s3.params.padding_hi = {1};
  const ConvProblem p3 = make_problem(s3);
  const ConvConfig small_c = select_conv_config(p3, kH200, request());
  EXPECT_EQ(small_c.path, ConvPath::small_c) << to_string(small_c);
  expect_within_limits(small_c);
  EXPECT_EQ(small_c.small_c.tiles * small_c.small_c.tile_m(), int64_t{1} << 31);
  const ConvConfig unfold = select_conv_config(p3, kH200, request("gemm"));
  EXPECT_EQ(unfold.path, ConvPath::unfold_gemm);
  expect_within_limits(unfold);
  expect_gemm_chunks_valid(p3, unfold);
  // o <= 8: the small-o kernel, grid-strided over 2^29 strips.
  Spec s8 = s;
  s8.w_shape = {8, 1, 1, 4};
  const ConvConfig small = select_conv_config(make_problem(s8), kH200, request());
  EXPECT_EQ(small.path, ConvPath::small_o);
  expect_within_limits(small);
}

TEST(ConvExtreme, SeventyThousandChannels) {
  {
    Spec s;  // 1x1, c = 70000 (gridDim.y would hold 65535)
    s.x_shape = {1, 4, 4, 70000};
    s.w_shape = {16, 1, 1, 70000};
    const ConvProblem p = make_problem(s);
    const ConvConfig c = select_conv_config(p, kH200, request());
    EXPECT_EQ(c.path, ConvPath::gemm_1x1) << to_string(c);
    expect_gemm_chunks_valid(p, c);
    Spec s1 = s;  // o = 1: the weight does not fit the small-o kernel's shared memory
    s1.w_shape = {1, 1, 1, 70000};
    const ConvConfig c1 = select_conv_config(make_problem(s1), kH200, request());
    EXPECT_EQ(c1.path, ConvPath::gemm_1x1) << to_string(c1);
    Spec so = s;  // ... but 70000 outputs of a 1x1 conv from 16 channels go through the GEMM
    so.x_shape = {1, 4, 4, 16};
    so.w_shape = {70000, 1, 1, 16};
    const ConvProblem po = make_problem(so);
    const ConvConfig co = select_conv_config(po, kH200, request());
    EXPECT_EQ(co.path, ConvPath::gemm_1x1);
    expect_gemm_chunks_valid(po, co);
  }
  {
    Spec s;  // depthwise, c = 70000 > 65535 groups: one GEMM batch cannot hold them
    s.x_shape = {1, 5, 5, 70000};
    s.w_shape = {70000, 3, 3, 1};
    s.params.groups = 70000;
    const ConvProblem p = make_problem(s);
    const ConvConfig c = select_conv_config(p, kH200, request());
    EXPECT_EQ(c.path, ConvPath::depthwise);
    expect_within_limits(c);
    expect_depthwise_coverage(p);
    EXPECT_THROW(select_conv_config(p, kH200, request("gemm")), Error);
    expect_within_limits(select_conv_config(p, kH200, request("reference")));
  }
}

TEST(ConvExtreme, UnfoldOfTwoToTheFortyElements) {
  // 2^28 positions x 9 taps x 512 channels = 1.2e12 > 2^40 unfold elements.
  Spec s;
  s.x_shape = {1, int64_t{1} << 14, int64_t{1} << 14, 512};
  s.w_shape = {512, 3, 3, 512};
  s.params.padding_lo = {1};
  s.params.padding_hi = {1};
  const ConvProblem p = make_problem(s);
  const double unfold_elements = static_cast<double>(p.out_positions()) * 9 * 512;
  EXPECT_GT(unfold_elements, std::ldexp(1.0, 40));
  EXPECT_TRUE(is_implicit_path(select_conv_config(p, kH200, request()).path));
  for (const int64_t budget : {kDefaultWorkspaceBytes, int64_t{16} << 30, int64_t{64} << 20}) {
    const ConvConfig c = select_conv_config(p, kH200, request("gemm", budget));
    ASSERT_EQ(c.path, ConvPath::unfold_gemm) << to_string(c);
    expect_within_limits(c);
    expect_gemm_chunks_valid(p, c);
    EXPECT_GE(static_cast<double>(c.chunks) * static_cast<double>(c.unfold_bytes),
              unfold_elements * 2);
  }
  // Even a 16 GiB workspace is cut at kMaxGemmSpan elements per chunk.
  const ConvConfig c = select_conv_config(p, kH200, request("gemm", int64_t{16} << 30));
  EXPECT_LE(c.chunk_rows * c.unfold_row_elements, kMaxGemmSpan);
}

TEST(ConvExtreme, EveryPathOnAwkwardShapes) {
  // Odd sizes, negative padding, dilations, flips, groups: every config stays within limits.
  const std::vector<Spec> specs = [] {
    std::vector<Spec> v;
    Spec a;
    a.x_shape = {3, 17, 5};
    a.w_shape = {6, 4, 5};
    a.params.stride = {3};
    a.params.padding_lo = {-2};
    a.params.padding_hi = {5};
    a.params.kernel_dilation = {2};
    a.params.input_dilation = {3};
    a.params.flip = true;
    v.push_back(a);
    Spec b;
    b.x_shape = {1, 3, 4, 5, 6};
    b.w_shape = {9, 2, 1, 3, 2};
    b.params.groups = 3;
    b.params.padding_lo = {1, 0, 2};
    b.params.padding_hi = {0, 1, -1};
    v.push_back(b);
    Spec d;
    d.x_shape = {2, 7, 9, 6};
    d.w_shape = {12, 3, 2, 1};
    d.params.groups = 6;
    d.params.stride = {2, 1};
    d.params.kernel_dilation = {1, 3};
    d.params.padding_lo = {1};
    d.params.padding_hi = {1};
    v.push_back(d);
    return v;
  }();
  for (const Spec& s : specs) {
    const ConvProblem p = make_problem(s);
    for (const char* algo : {"auto", "direct", "reference", "gemm"}) {
      const ConvConfig c = select_conv_config(p, kH200, request(algo, 4096));
      expect_within_limits(c);
      if (c.path == ConvPath::unfold_gemm || c.path == ConvPath::gemm_1x1) {
        expect_gemm_chunks_valid(p, c);
      }
    }
  }
}

// ---- cuDNN as a dispatched path ---------------------------------------------------------------

DeviceDescription with_cudnn() {
  DeviceDescription d = kH200;
  d.cudnn = true;
  d.cudnn_why_not.clear();
  return d;
}

// The Error of select_conv_config with `r` on `p` (and `dev`), or "" when there is none.
std::string selection_error(const ConvProblem& p, const DeviceDescription& dev,
                            const ConvRequest& r) {
  try {
    select_conv_config(p, dev, r);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ConvCudnn, AutoTakesCudnnExceptWhereOwnPathsWin) {
  const DeviceDescription dev = with_cudnn();
  // unfold_gemm, small_o and 2-D depthwise problems go to cuDNN (docs/perf.md).
  const ConvProblem unfold = make_problem(resnet_3x3());
  EXPECT_TRUE(is_implicit_path(select_conv_config(unfold, kH200, request()).path));
  const ConvConfig c = select_conv_config(unfold, dev, request());
  EXPECT_EQ(c.path, ConvPath::cudnn);
  EXPECT_EQ(kernel_name(c.path), "cuda.conv.cudnn");
  EXPECT_NE(c.reason.find("implicit_"), std::string::npos) << c.reason;
  EXPECT_EQ(c.bias, BiasMode::none);
  expect_within_limits(c);
  // The tensor-core small-o kernels beat cuDNN (VAE conv_out); the CUDA-core one does not.
  Spec small;
  small.x_shape = {1, 16, 16, 32};
  small.w_shape = {3, 3, 3, 32};
  const ConvConfig small_own = select_conv_config(make_problem(small), dev, request());
  EXPECT_EQ(small_own.path, ConvPath::small_o) << small_own.reason;
  EXPECT_TRUE(small_own.small_o_taps.active);
  EXPECT_NE(small_own.reason.find("not cuDNN"), std::string::npos) << small_own.reason;
  const ConvConfig small_mma =
      select_conv_config(make_problem(small), dev, request("auto", kDefaultWorkspaceBytes, "mma"));
  EXPECT_EQ(small_mma.path, ConvPath::small_o) << small_mma.reason;
  EXPECT_TRUE(small_mma.small_o.mma);
  EXPECT_EQ(
      select_conv_config(make_problem(small), dev, request("auto", kDefaultWorkspaceBytes, "cuda"))
          .path,
      ConvPath::cudnn);
  small.dtype = DType::f32;
  small.out_dtype = DType::f32;
  EXPECT_EQ(select_conv_config(make_problem(small), dev, request()).path, ConvPath::cudnn);
  Spec dw2;
  dw2.x_shape = {1, 16, 16, 64};
  dw2.w_shape = {64, 3, 3, 1};
  dw2.params.groups = 64;
  EXPECT_EQ(select_conv_config(make_problem(dw2), dev, request()).path, ConvPath::cudnn);
  // The 1x1 GEMM and 1-D depthwise (causal conv1d) stay on the own paths, saying why.
  Spec one;
  one.x_shape = {2, 16, 16, 64};
  one.w_shape = {128, 1, 1, 64};
  const ConvConfig own1x1 = select_conv_config(make_problem(one), dev, request());
  EXPECT_EQ(own1x1.path, ConvPath::gemm_1x1);
  EXPECT_NE(own1x1.reason.find("not cuDNN"), std::string::npos) << own1x1.reason;
  Spec dw1;
  dw1.x_shape = {1, 4096, 1536};
  dw1.w_shape = {1536, 4, 1};
  dw1.params.groups = 1536;
  dw1.params.padding_lo = {3};
  EXPECT_EQ(select_conv_config(make_problem(dw1), dev, request()).path, ConvPath::depthwise);
  ConvConfig own;
  own.path = ConvPath::direct;
  EXPECT_FALSE(auto_prefers_cudnn(make_problem(dw1), own));
  own.path = ConvPath::depthwise;
  EXPECT_TRUE(auto_prefers_cudnn(make_problem(dw2), own));
  own.path = ConvPath::gemm_1x1;
  EXPECT_FALSE(auto_prefers_cudnn(unfold, own));
  // GEMMKIT_CONV_CUDNN=0: own paths only.
  ConvRequest off = request();
  off.cudnn_in_auto = false;
  EXPECT_TRUE(is_implicit_path(select_conv_config(unfold, dev, off).path));
  // Without cuDNN, auto is unchanged and names why not.
  const ConvConfig none = select_conv_config(unfold, kH200, request());
  EXPECT_TRUE(is_implicit_path(none.path));
  EXPECT_NE(none.reason.find("cuDNN not built"), std::string::npos) << none.reason;
}

TEST(ConvCudnn, AutoRacesOwnPathsThatCanWinAgainstCudnnOnly) {
  const DeviceDescription dev = with_cudnn();
  // 2-D depthwise: cuDNN first, the own depthwise kernel the challenger.
  Spec dw2;
  dw2.x_shape = {8, 14, 14, 384};
  dw2.w_shape = {384, 7, 7, 1};
  dw2.params.groups = 384;
  dw2.params.padding_lo = {3};
  dw2.params.padding_hi = {3};
  ConvCandidates c = select_conv_candidates(make_problem(dw2), dev, request());
  EXPECT_TRUE(c.race);
  EXPECT_EQ(c.first.path, ConvPath::cudnn);
  EXPECT_EQ(c.second.path, ConvPath::depthwise);
  // The 1x1 GEMM: own first, cuDNN the challenger, with the cuDNN fields filled.
  Spec one;
  one.x_shape = {1, 64, 64, 512};
  one.w_shape = {256, 1, 1, 512};
  c = select_conv_candidates(make_problem(one), dev, request());
  EXPECT_TRUE(c.race);
  EXPECT_EQ(c.first.path, ConvPath::gemm_1x1);
  EXPECT_EQ(c.second.path, ConvPath::cudnn);
  EXPECT_EQ(c.second.workspace_budget, kDefaultWorkspaceBytes);
  // 3x3 convolutions race where the Hopper implicit GEMM serves them, not with the mma.sync
  // kernel (cuDNN is 2x faster on every measured row).
  c = select_conv_candidates(make_problem(resnet_3x3()), dev, request());
  EXPECT_EQ(c.first.path, ConvPath::cudnn);
  EXPECT_EQ(c.second.path, ConvPath::implicit_wgmma) << to_string(c.second);
  EXPECT_TRUE(c.race);
  ConvRequest mma = request();
  mma.implicit = ImplicitChoice::mma;
  c = select_conv_candidates(make_problem(resnet_3x3()), dev, mma);
  EXPECT_EQ(c.first.path, ConvPath::cudnn);
  EXPECT_FALSE(c.race) << to_string(c.second);
  // No race without cuDNN, with GEMMKIT_CONV_CUDNN=0, or when a path is forced.
  EXPECT_FALSE(select_conv_candidates(make_problem(dw2), kH200, request()).race);
  ConvRequest off = request();
  off.cudnn_in_auto = false;
  EXPECT_FALSE(select_conv_candidates(make_problem(dw2), dev, off).race);
  EXPECT_FALSE(select_conv_candidates(make_problem(dw2), dev, request("depthwise")).race);
  EXPECT_FALSE(select_conv_candidates(make_problem(one), dev, request("cudnn")).race);
  // cuDNN cannot serve negative padding: that depthwise problem does not race.
  dw2.params.padding_lo = {-1};
  EXPECT_FALSE(select_conv_candidates(make_problem(dw2), dev, request()).race);
}

TEST(ConvCudnn, TheRaceChallengerNeedsAClearMargin) {
  EXPECT_TRUE(challenger_wins(10.0, 9.0));
  EXPECT_FALSE(challenger_wins(10.0, 9.8));  // within the margin: the static choice stays
  EXPECT_FALSE(challenger_wins(10.0, 10.5));
  EXPECT_FALSE(challenger_wins(10.0, 10.0 * (1.0 - kRaceMargin)));
}

TEST(ConvCudnn, ProblemsCudnnCannotServe) {
  const DeviceDescription dev = with_cudnn();
  // A transposed conv within the kernel's reach goes to cuDNN's backward-data; input dilation
  // with padding beyond the reach, and negative padding: own paths under auto, Error forced.
  Spec transposed;
  transposed.x_shape = {1, 8, 8, 16};
  transposed.w_shape = {16, 3, 3, 16};
  transposed.params.input_dilation = {2};
  transposed.params.padding_lo = {2};
  transposed.params.padding_hi = {2};
  const ConvConfig dgrad = select_conv_config(make_problem(transposed), dev, request());
  EXPECT_EQ(dgrad.path, ConvPath::cudnn) << dgrad.reason;
  EXPECT_TRUE(dgrad.cudnn_dgrad);
  transposed.params.padding_lo = {3};
  const ConvProblem t = make_problem(transposed);
  EXPECT_NE(select_conv_config(t, dev, request()).path, ConvPath::cudnn);
  std::string m = selection_error(t, dev, request("cudnn"));
  EXPECT_NE(m.find("options.algo"), std::string::npos) << m;
  EXPECT_NE(m.find("'cudnn'"), std::string::npos) << m;
  EXPECT_NE(m.find("input dilation"), std::string::npos) << m;
  EXPECT_NE(m.find("reach"), std::string::npos) << m;
  Spec negative;
  negative.x_shape = {1, 10, 10, 16};
  negative.w_shape = {16, 3, 3, 16};
  negative.params.padding_lo = {-1};
  const ConvProblem n = make_problem(negative);
  EXPECT_NE(select_conv_config(n, dev, request()).path, ConvPath::cudnn);
  m = selection_error(n, dev, request("cudnn"));
  EXPECT_NE(m.find("negative padding"), std::string::npos) << m;
  // Not built: forced cudnn names it.
  m = selection_error(make_problem(resnet_3x3()), kH200, request("cudnn"));
  EXPECT_NE(m.find("cuDNN not built"), std::string::npos) << m;
  // Forced cudnn where it can serve.
  EXPECT_EQ(select_conv_config(make_problem(resnet_3x3()), dev, request("cudnn")).path,
            ConvPath::cudnn);
  // Tensors past 2^31 - 1 elements stay on own paths.
  Spec huge;
  huge.x_shape = {1, 2048, 2048, 1024};
  huge.w_shape = {16, 3, 3, 1024};
  huge.params.padding_lo = {1};
  huge.params.padding_hi = {1};
  m = selection_error(make_problem(huge), dev, request("cudnn"));
  EXPECT_NE(m.find("2^31"), std::string::npos) << m;
}

TEST(ConvCudnn, BiasLayoutAndWorkspace) {
  const DeviceDescription dev = with_cudnn();
  Spec s = resnet_3x3(2, 16, 16, 24);
  s.bias = true;
  // 16-bit out: the conv writes f32 scratch, the bias pass rounds once into out.
  const ConvProblem p = make_problem(s);
  const ConvConfig c = select_conv_config(p, dev, request("cudnn"));
  EXPECT_EQ(c.bias, BiasMode::scratch);
  EXPECT_EQ(c.scratch_bytes, p.out_positions() * p.out_channels * 4);
  EXPECT_EQ(c.scratch_offset, 0);
  EXPECT_GE(c.lt_offset, c.scratch_bytes);
  EXPECT_EQ(c.lt_offset % kWorkspaceAlign, 0);
  EXPECT_EQ(c.lt_workspace_bytes, kDefaultWorkspaceBytes - c.lt_offset);
  expect_within_limits(c);
  EXPECT_GE(int64_t{c.grid.x} * c.block, std::min(c.grid_cap * c.block, p.out_positions() * 24));
  // f32 out: in place, no scratch.
  s.out_dtype = DType::f32;
  const ConvConfig f = select_conv_config(make_problem(s), dev, request("cudnn"));
  EXPECT_EQ(f.bias, BiasMode::pass);
  EXPECT_EQ(f.scratch_bytes, 0);
  // A workspace too small for the scratch: auto stays own, forced names the workspace.
  s.out_dtype = DType::bf16;
  const ConvProblem q = make_problem(s);
  EXPECT_NE(select_conv_config(q, dev, request("auto", 1024)).path, ConvPath::cudnn);
  const std::string m = selection_error(q, dev, request("cudnn", 1024));
  EXPECT_NE(m.find("workspace"), std::string::npos) << m;
  // A bias with out's positions not one stride: no bias pass, so not cuDNN.
  ConvProblem gap = make_problem(s);
  gap.out.strides[1] *= 2;  // gaps between output rows
  gap.out.strides[0] *= 2;
  const std::string g = selection_error(gap, dev, request("cudnn"));
  EXPECT_NE(g.find("one stride"), std::string::npos) << g;
  // Without a bias, any out strides are cuDNN's.
  gap.has_bias = false;
  EXPECT_EQ(select_conv_config(gap, dev, request("cudnn")).path, ConvPath::cudnn);
}

TEST(ConvCudnn, EnvironmentSettings) {
  EXPECT_TRUE(resolve("", "", -1, "", "").cudnn_in_auto);
  EXPECT_TRUE(resolve("", "", -1, "", "1").cudnn_in_auto);
  EXPECT_FALSE(resolve("", "", -1, "", "0").cudnn_in_auto);
  EXPECT_EQ(resolve("", "cudnn", -1, "").algo, ConvAlgo::cudnn);
  for (const char* bad : {"2", "yes", "off", " 0"}) {
    try {
      resolve("", "", -1, "", bad);
      ADD_FAILURE() << "expected an Error for '" << bad << "'";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("GEMMKIT_CONV_CUDNN"), std::string::npos) << m;
      EXPECT_NE(m.find(std::string("'") + bad + "'"), std::string::npos) << m;
    }
  }
  EXPECT_TRUE(parse_cudnn_autotune(""));
  EXPECT_TRUE(parse_cudnn_autotune("1"));
  EXPECT_FALSE(parse_cudnn_autotune("0"));
  try {
    parse_cudnn_autotune("fast");
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("GEMMKIT_CONV_CUDNN_AUTOTUNE"), std::string::npos) << m;
    EXPECT_NE(m.find("'fast'"), std::string::npos) << m;
  }
  EXPECT_EQ(parse_algo("cudnn"), ConvAlgo::cudnn);
  EXPECT_EQ(std::string(path_name(ConvPath::cudnn)), "cudnn");
}

}  // namespace
}  // namespace gemmkit::cuda::conv_impl
