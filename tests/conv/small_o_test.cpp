// Host tests of the small-o taps kernel (small_o/taps.cuh) without a GPU: eligibility and
// tiling (plan_small_o_taps) for the VAE conv_out rows, 1-D problems, dilation, padding extremes
// and 2^31+ positions; the GEMMKIT_CONV_SMALL_O setting; and a host emulation that executes the
// kernel's index math step by step (block -> tiles -> warp steps and their prefetch order ->
// per-lane load addresses and zero-fill predicates -> MMA fragment registers, interpreted with
// PTX's m16n8k16 layout -> Y in "shared memory" -> the shift-add) through the very functions of
// small_o/taps_layout.h the kernel calls, on small random problems, against the double reference.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "common/problems.h"
#include "conv/problem_spec.h"
#include "conv/select_util.h"
#include "cuda/conv/common/geometry.h"
#include "cuda/conv/select.h"
#include "gemmkit/gemmkit.h"
#include "reference_double.h"

namespace gemmkit::cuda::conv_impl {
namespace {

using gemmkit_test::HostTensor;
using gemmkit_test::Layout;

DeviceDescription few_sms(int multiprocessors) {
  DeviceDescription d;
  d.multiprocessors = multiprocessors;
  return d;
}

ConvRequest request(const std::string& algo = "auto", const std::string& small_o = "") {
  return request_of(algo, -1, small_o);
}

// VAE conv_out's form: 3x3, padding 1, a bias.
Spec conv_out(int64_t n, int64_t h, int64_t w, int64_t c = 128, int64_t o = 3) {
  return gemmkit_test::padded_spec({n, h, w, c}, {o, 3, 3, c}, 1, true);
}

SmallOTapsTiling taps_plan(const Spec& s, const DeviceDescription& dev = kH200) {
  SmallOTapsTiling t;
  const std::string why = why_not_small_o_taps(gemmkit_test::make_problem(s), dev, t);
  EXPECT_EQ(why, "");
  return t;
}

// ---- Eligibility and tiling -----------------------------------------------------------------

// The TMA form's plan (plan_small_o_taps_tma) on VAE conv_out and at its limits.
TEST(ConvSmallOTaps, TmaFormPlan) {
  struct Row {
    int64_t hw, tile_h, tile_w, tiles, grid;
  };
  for (const Row& row :
       {Row{256, 16, 16, 256, 128}, Row{1024, 16, 32, 2048, 128}, Row{2048, 16, 32, 8192, 131}}) {
    SCOPED_TRACE(row.hw);
    const ConvGeometry g = normalize(gemmkit_test::make_problem(conv_out(1, row.hw, row.hw)));
    SmallOTapsTiling t;
    ASSERT_EQ(plan_small_o_taps_tma(g, kH200.multiprocessors, kH200.shared_per_block_optin, t), "");
    EXPECT_TRUE(t.active);
    EXPECT_EQ(t.tile_h, row.tile_h);
    EXPECT_EQ(t.tile_w, row.tile_w);
    EXPECT_EQ(t.tiles, row.tiles);
    EXPECT_EQ(t.grid, row.grid);  // at most one block per SM, each tiles_per_block or one fewer
    EXPECT_GE(t.tiles_per_block * t.grid, t.tiles);
    EXPECT_LT((t.tiles_per_block - 1) * t.grid, t.tiles);
    EXPECT_LE(t.m_tiles, kSmallOTapsWarps * kSmallOTapsTmaWarpMTiles);
    EXPECT_EQ(t.tma_stages, 3);
    EXPECT_EQ(t.stage_bytes % 128, 0);
    EXPECT_GE(t.stage_bytes, t.m_tiles * 16 * kSmallOTapsChunk * 2);  // every m-tile row
    EXPECT_EQ(t.smem_bytes(), t.weight_bytes + t.y_bytes + 128 + 3 * t.stage_bytes + 2 * 3 * 8);
    EXPECT_LE(t.smem_bytes(), kH200.shared_per_block_optin);
    EXPECT_LE(t.region_h, kSmallOTapsTmaMaxBox);
    EXPECT_LE(t.region_w, kSmallOTapsTmaMaxBox);
  }
  // One output row: tiles whose region passes 256 pixels (a TMA box's extent) are skipped.
  {
    const ConvGeometry g = normalize(gemmkit_test::make_problem(conv_out(1, 1, 100000)));
    SmallOTapsTiling t;
    ASSERT_EQ(plan_small_o_taps_tma(g, kH200.multiprocessors, kH200.shared_per_block_optin, t), "");
    EXPECT_LE(t.region_w, kSmallOTapsTmaMaxBox);
    EXPECT_EQ(t.region_h, 3);
  }
  // More than 4 n-tiles of accumulators (taps * o > 32): the register form only.
  {
    SmallOTapsTiling t;  // o = 7: 63 columns
    EXPECT_NE(
        plan_small_o_taps_tma(normalize(gemmkit_test::make_problem(conv_out(1, 64, 64, 128, 7))),
                              kH200.multiprocessors, kH200.shared_per_block_optin, t)
            .find("taps * o > 32"),
        std::string::npos);
  }
  // Auto takes it from kSmallOTapsTmaMinTilesPerBlock tiles per block on (1024^2: 16, 2048^2:
  // 63), the register form below (256^2: 2); GEMMKIT_CONV_SMALL_O=tma forces it, =taps never
  // takes it. Before sm_90 there is no TMA.
  for (const int64_t hw : {256, 1024, 2048}) {
    SCOPED_TRACE(hw);
    const ConvProblem p = gemmkit_test::make_problem(conv_out(1, hw, hw));
    const ConvConfig a = select_conv_config(p, kH200, request());
    ASSERT_TRUE(a.small_o_taps.active) << to_string(a);
    EXPECT_EQ(a.small_o_taps.tma_stages > 0, hw >= 1024) << to_string(a);
    EXPECT_EQ(a.block, hw >= 1024 ? kSmallOTapsTmaThreads : kSmallOTapsThreads);
    EXPECT_EQ(int64_t{a.grid.x}, a.small_o_taps.grid);
    EXPECT_EQ(a.smem_bytes, a.small_o_taps.smem_bytes());
    const std::string log = to_string(a);
    EXPECT_NE(log.find(hw >= 1024 ? "small_o=taps_tma" : "tiles per block < 8"), std::string::npos)
        << log;
    EXPECT_GT(select_conv_config(p, kH200, request("auto", "tma")).small_o_taps.tma_stages, 0);
    EXPECT_EQ(select_conv_config(p, kH200, request("auto", "taps")).small_o_taps.tma_stages, 0);
    DeviceDescription ampere = kH200;
    ampere.sm_major = 8;
    const ConvConfig old = select_conv_config(p, ampere, request());
    EXPECT_TRUE(old.small_o_taps.active);
    EXPECT_EQ(old.small_o_taps.tma_stages, 0) << to_string(old);
  }
}

TEST(ConvSmallOTaps, VaeConvOutTiling) {
  struct Row {
    int64_t hw, tile_h, tile_w, tiles, tiles_per_block, grid;
  };
  // 1024^2 and 2048^2: 16 x 32 tiles; 256^2: 16 x 16 (16 x 32 would leave SMs idle: 128 tiles).
  for (const Row& row : {Row{256, 16, 16, 256, 1, 256}, Row{1024, 16, 32, 2048, 8, 256},
                         Row{2048, 16, 32, 8192, 32, 256}}) {
    SCOPED_TRACE(row.hw);
    const ConvProblem p = gemmkit_test::make_problem(conv_out(1, row.hw, row.hw));
    const ConvConfig c = select_conv_config(p, kH200, request("auto", "taps"));  // register form
    ASSERT_EQ(c.path, ConvPath::small_o) << to_string(c);
    const SmallOTapsTiling& t = c.small_o_taps;
    ASSERT_TRUE(t.active) << to_string(c);
    EXPECT_FALSE(c.small_o.mma);
    EXPECT_EQ(t.n_cols, 27);
    EXPECT_EQ(t.n_tiles, 4);
    EXPECT_EQ(t.y_stride % 32, 4);  // Y's column stride: conflict-free stores and reads
    EXPECT_GE(t.y_stride, t.m_tiles * 16);
    EXPECT_EQ(t.chunks, 4);
    EXPECT_EQ(t.channel_groups, 1);
    EXPECT_EQ(t.weight_bytes, 4 * 4 * 512);
    EXPECT_EQ(t.tile_h, row.tile_h);
    EXPECT_EQ(t.tile_w, row.tile_w);
    EXPECT_EQ(t.region_h, row.tile_h + 2);
    EXPECT_EQ(t.region_w, row.tile_w + 2);
    EXPECT_EQ(t.m_tiles, ceil_div(t.region(), 16));
    EXPECT_EQ(t.y_bytes, 32 * t.y_stride * 4);  // 32 columns (27 used)
    EXPECT_EQ(t.pixel_bytes, t.m_tiles * 16 * 4);
    EXPECT_EQ(t.tiles, row.tiles);
    EXPECT_EQ(t.blocks_per_sm, 2);
    EXPECT_EQ(t.tiles_per_block, row.tiles_per_block);
    EXPECT_EQ(t.grid, row.grid);
    EXPECT_EQ(int64_t{c.grid.x}, t.grid);
    EXPECT_EQ(c.block, kSmallOTapsThreads);
    EXPECT_EQ(c.smem_bytes, t.weight_bytes + t.y_bytes + t.pixel_bytes);
    EXPECT_LE(2 * (c.smem_bytes + kSmallOTapsSmemReserve), kH200.shared_per_multiprocessor);
    const std::string log = to_string(c);
    EXPECT_NE(log.find("small_o=taps tile=" + std::to_string(row.tile_h) + "x" +
                       std::to_string(row.tile_w)),
              std::string::npos)
        << log;
    EXPECT_NE(log.find("taps kernel"), std::string::npos) << log;
  }
  // 16 x 32: 18 x 34 = 612 region pixels, 39 m-tiles (624 rows of the pixel table; Y's columns
  // 644 apart, 644 % 32 = 4), 8,192 + 82,432 + 2,496 bytes of shared memory.
  const SmallOTapsTiling t = taps_plan(conv_out(1, 1024, 1024));
  EXPECT_EQ(t.region(), 612);
  EXPECT_EQ(t.m_tiles, 39);
  EXPECT_EQ(t.y_stride, 644);
  EXPECT_EQ(t.smem_bytes(), 93120);
  // direct takes it too; reference never does.
  EXPECT_TRUE(select_conv_config(gemmkit_test::make_problem(conv_out(1, 256, 256)), kH200,
                                 request("direct"))
                  .small_o_taps.active);
  EXPECT_EQ(select_conv_config(gemmkit_test::make_problem(conv_out(1, 256, 256)), kH200,
                               request("reference"))
                .path,
            ConvPath::direct);
}

TEST(ConvSmallOTaps, OneDimensionalDilationAndPaddingExtremes) {
  {
    Spec s;  // 1-D: one row of 512-output tiles
    s.x_shape = {2, 100000, 64};
    s.w_shape = {3, 5, 64};
    s.params.padding_lo = {4};
    s.params.padding_hi = {-1};
    const SmallOTapsTiling t = taps_plan(s);
    EXPECT_EQ(t.tile_h, 1);
    EXPECT_EQ(t.tile_w, 512);
    EXPECT_EQ(t.region_h, 1);
    EXPECT_EQ(t.region_w, 516);
    EXPECT_EQ(t.row_tiles, 1);
    EXPECT_EQ(t.tiles, 2 * ceil_div(100000 + 4 - 1 - 4, 512));
    EXPECT_EQ(t.n_cols, 15);
  }
  {
    Spec s = conv_out(1, 64, 64, 32, 3);  // kernel dilation 2 (and 3 along the width)
    s.params.kernel_dilation = {2, 3};
    s.params.padding_lo = {2, 3};
    s.params.padding_hi = {2, 3};
    const SmallOTapsTiling t = taps_plan(s);
    EXPECT_EQ(t.region_h, t.tile_h + 4);
    EXPECT_EQ(t.region_w, t.tile_w + 6);
  }
  {
    Spec s = conv_out(1, 64, 64, 32, 2);  // stride 2
    s.params.stride = {2};
    const SmallOTapsTiling t = taps_plan(s);
    EXPECT_EQ(t.region_h, (t.tile_h - 1) * 2 + 3);
    EXPECT_EQ(t.region_w, (t.tile_w - 1) * 2 + 3);
  }
  {
    Spec s = conv_out(1, 40, 40, 16, 3);  // negative padding crops 7 rows and columns
    s.params.padding_lo = {-3, 0};
    s.params.padding_hi = {-4, -7};
    EXPECT_TRUE(taps_plan(s).active);
    Spec big = conv_out(1, 8, 8, 16, 3);  // every output of the border on padding
    big.params.padding_lo = {20};
    big.params.padding_hi = {20};
    EXPECT_TRUE(taps_plan(big).active);
  }
  {
    // A dilation whose region outgrows shared memory: not the taps kernel, nor the region kernel
    // (dilation), so the CUDA-core kernel.
    Spec s = conv_out(1, 4000, 4000, 16, 3);
    s.params.kernel_dilation = {1000};
    s.params.padding_lo = {1000};
    s.params.padding_hi = {1000};
    SmallOTapsTiling t;
    const std::string why = why_not_small_o_taps(gemmkit_test::make_problem(s), kH200, t);
    EXPECT_NE(why.find("do not fit"), std::string::npos) << why;
    EXPECT_FALSE(t.active);
    const ConvConfig c = select_conv_config(gemmkit_test::make_problem(s), kH200, request());
    EXPECT_EQ(c.path, ConvPath::small_o);
    EXPECT_FALSE(c.small_o_taps.active);
    EXPECT_FALSE(c.small_o.mma);
  }
  {
    Spec s = conv_out(1, 5, 30000, 16, 3);  // a short image: the tile grows along the width
    const SmallOTapsTiling t = taps_plan(s);
    EXPECT_EQ(t.tile_h, 5);
    EXPECT_EQ(t.tile_w, 16 * 32 / 5);
  }
}

TEST(ConvSmallOTaps, WhoServesWhat) {
  const auto why = [](const Spec& s, const ConvProblem* problem = nullptr) {
    SmallOTapsTiling t;
    return why_not_small_o_taps(problem ? *problem : gemmkit_test::make_problem(s), kH200, t);
  };
  Spec base = conv_out(1, 32, 32, 64, 3);
  EXPECT_EQ(why(base), "");
  Spec f16 = base;
  f16.dtype = f16.out_dtype = DType::f16;
  EXPECT_EQ(why(f16), "");
  Spec f32 = base;
  f32.dtype = f32.out_dtype = DType::f32;
  EXPECT_NE(why(f32).find("f32"), std::string::npos);
  Spec odd = conv_out(1, 32, 32, 12, 3);
  EXPECT_NE(why(odd).find("c % 8"), std::string::npos);
  Spec wide = conv_out(1, 32, 32, 64, 8);  // 72 columns
  EXPECT_NE(why(wide).find("72 > 64"), std::string::npos);
  Spec seven = conv_out(1, 32, 32, 64, 7);  // 63 columns: 8 n-tiles
  EXPECT_EQ(why(seven), "");
  Spec transposed = base;
  transposed.params.input_dilation = {2};
  EXPECT_NE(why(transposed).find("input dilation"), std::string::npos);
  Spec three_d;
  three_d.x_shape = {1, 4, 8, 8, 16};
  three_d.w_shape = {2, 3, 3, 3, 16};
  EXPECT_NE(why(three_d).find("first of 3"), std::string::npos);
  three_d.w_shape = {2, 1, 3, 3, 16};  // one tap along dim 0: served
  three_d.params.stride = {2, 1, 1};
  EXPECT_EQ(why(three_d), "");
  // x layouts: misaligned, strides not multiples of 8, channels not innermost.
  ConvProblem p = gemmkit_test::make_problem(base, gemmkit_test::fake(0x10000008));
  EXPECT_NE(why(base, &p).find("16-byte"), std::string::npos);
  p = gemmkit_test::make_problem(base);
  p.x.strides[2] = 68;
  p.x.strides[1] = 68 * 32;
  p.x.strides[0] = 68 * 32 * 32;
  EXPECT_NE(why(base, &p).find("multiples of 8"), std::string::npos);
  p.x.strides[2] = 72;  // gaps of 8 channels: served
  p.x.strides[1] = 72 * 32;
  p.x.strides[0] = 72 * 32 * 32;
  EXPECT_EQ(why(base, &p), "");
  p.x.strides[3] = 2;
  EXPECT_NE(why(base, &p).find("channel stride"), std::string::npos);
  // Out and weight with any strides (out: a view with gaps; weight: channels outermost).
  p = gemmkit_test::make_problem(base);
  p.out.strides[3] = 5;
  p.out.strides[2] = 5 * 32;
  p.out.strides[1] = 5 * 32 * 32;
  p.weight.strides[0] = 1;  // (o, kh, kw, c) stored c-major, o innermost
  p.weight.strides[1] = 9;
  p.weight.strides[2] = 3;
  p.weight.strides[3] = 27;
  EXPECT_EQ(why(base, &p), "");
  // A device with little shared memory per SM: smaller tiles.
  DeviceDescription small_smem;
  small_smem.shared_per_multiprocessor = 64 * 1024;
  SmallOTapsTiling t;
  EXPECT_EQ(
      why_not_small_o_taps(gemmkit_test::make_problem(conv_out(1, 1024, 1024)), small_smem, t), "");
  EXPECT_LE(2 * (t.smem_bytes() + kSmallOTapsSmemReserve), 64 * 1024);
  EXPECT_LT(t.tile_h * t.tile_w, 512);
}

TEST(ConvSmallOTaps, PastTwoToTheThirtyOnePositions) {
  {
    Spec s;  // 1-D, 2^31 + 100 positions: tile indices and x offsets past 32 bits
    const int64_t width = (int64_t{1} << 31) + 100;
    s.x_shape = {1, width, 8};
    s.w_shape = {1, 3, 8};
    s.params.padding_lo = {1};
    s.params.padding_hi = {1};
    const ConvProblem p = gemmkit_test::make_problem(s);
    const ConvConfig c = select_conv_config(p, kH200, request());
    ASSERT_TRUE(c.small_o_taps.active) << to_string(c);
    const SmallOTapsTiling& t = c.small_o_taps;
    EXPECT_EQ(t.tile_w, 512);
    EXPECT_EQ(t.tiles, ceil_div(width, 512));
    EXPECT_EQ(t.grid * t.tiles_per_block >= t.tiles, true);
    const ConvGeometry g = normalize(p);
    const SmallOTapsTile last = small_o_taps_tile(g, t, t.tiles - 1);
    EXPECT_EQ(last.ow0, (t.tiles - 1) * 512);
    EXPECT_EQ(last.iw0, last.ow0 - 1);
    int64_t offset = 0;
    ASSERT_TRUE(small_o_taps_pixel(g, t, last, 1, offset));
    EXPECT_EQ(offset, last.ow0 * 8);
    EXPECT_GT(offset, int64_t{1} << 31);
    // The last tile's positions stop at the output's edge.
    const SmallOTapsShift sh = small_o_taps_shift(g, t, last);
    EXPECT_EQ(sh.rows, 1);
    EXPECT_EQ(sh.cols, width - last.ow0);
    EXPECT_EQ(small_o_taps_out_offset(g, sh, 0, sh.cols - 1, 0), width - 1);
    // The block of the last tile takes it last; its warps' steps end there.
    const int64_t b = (t.tiles - 1) % t.grid;
    int64_t tile = b;
    while (tile + t.grid < t.tiles) tile += t.grid;
    EXPECT_EQ(tile, t.tiles - 1);
    const int last_m = static_cast<int>((t.m_tiles - 1) / kSmallOTapsWarps * kSmallOTapsWarps);
    const SmallOTapsStep within = small_o_taps_next_step(t, t.grid, 0, {tile, 0, 0});
    EXPECT_EQ(within.tile, tile);
    EXPECT_EQ(within.m_tile, 8);
    const SmallOTapsStep after = small_o_taps_next_step(
        t, t.grid, 0, {tile, last_m, static_cast<int>(t.channel_groups) - 1});
    EXPECT_GE(after.tile, t.tiles);
  }
  {
    Spec s = conv_out(3, 32768, 32768, 8, 3);  // 3 * 2^30 positions over batches
    const ConvProblem p = gemmkit_test::make_problem(s);
    const SmallOTapsTiling t = taps_plan(s);
    EXPECT_EQ(t.tiles, 3 * 2048 * 1024);
    const ConvGeometry g = normalize(p);
    const SmallOTapsTile last = small_o_taps_tile(g, t, t.tiles - 1);
    EXPECT_EQ(last.n, 2);
    EXPECT_EQ(last.oh0, 32768 - 16);
    EXPECT_EQ(last.ow0, 32768 - 32);
    EXPECT_EQ(small_o_taps_out_offset(g, small_o_taps_shift(g, t, last), 15, 31, 2),
              3 * int64_t{32768} * 32768 * 3 - 1);
    int64_t offset = 0;
    ASSERT_TRUE(small_o_taps_pixel(g, t, last, 0, offset));
    EXPECT_EQ(offset, ((2 * int64_t{32768} + 32768 - 17) * 32768 + 32768 - 33) * 8);
  }
}

TEST(ConvSmallOTaps, VariantSetting) {
  EXPECT_EQ(request().small_o, SmallOChoice::automatic);
  for (const char* v : {"auto", "tma", "taps", "mma", "cuda"}) {
    EXPECT_EQ(std::string(small_o_choice_name(request("auto", v).small_o)), v);
  }
  try {
    request("auto", "fast");
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("GEMMKIT_CONV_SMALL_O"), std::string::npos) << m;
    EXPECT_NE(m.find("'fast'"), std::string::npos) << m;
  }
  const ConvProblem p = gemmkit_test::make_problem(conv_out(1, 64, 64));
  EXPECT_TRUE(select_conv_config(p, kH200, request("auto", "taps")).small_o_taps.active);
  EXPECT_EQ(select_conv_config(p, kH200, request("auto", "taps")).small_o_taps.tma_stages, 0);
  // tma: the TMA-fed form where it serves (its own block, grid and shared memory)...
  const ConvConfig tma = select_conv_config(p, kH200, request("direct", "tma"));
  ASSERT_TRUE(tma.small_o_taps.active) << to_string(tma);
  EXPECT_GT(tma.small_o_taps.tma_stages, 0);
  EXPECT_EQ(tma.block, kSmallOTapsTmaThreads);
  EXPECT_EQ(int64_t{tma.grid.x}, tma.small_o_taps.grid);
  EXPECT_EQ(tma.smem_bytes, tma.small_o_taps.smem_bytes());
  EXPECT_LE(tma.smem_bytes, kH200.shared_per_block_optin);
  EXPECT_NE(to_string(tma).find("small_o=taps_tma stages="), std::string::npos) << to_string(tma);
  EXPECT_NE(tma.reason.find("TMA-fed form"), std::string::npos) << tma.reason;
  // ... else the register form, saying why.
  const ConvConfig wide = select_conv_config(
      gemmkit_test::make_problem(conv_out(1, 64, 64, 128, 7)), kH200, request("direct", "tma"));
  EXPECT_TRUE(wide.small_o_taps.active) << to_string(wide);
  EXPECT_EQ(wide.small_o_taps.tma_stages, 0);
  EXPECT_NE(wide.reason.find("TMA form: taps * o > 32"), std::string::npos) << wide.reason;
  const ConvConfig mma = select_conv_config(p, kH200, request("direct", "mma"));
  EXPECT_FALSE(mma.small_o_taps.active);
  EXPECT_TRUE(mma.small_o.mma);
  EXPECT_NE(mma.reason.find("GEMMKIT_CONV_SMALL_O=mma"), std::string::npos) << mma.reason;
  const ConvConfig cuda = select_conv_config(p, kH200, request("auto", "cuda"));
  EXPECT_EQ(cuda.path, ConvPath::small_o);
  EXPECT_FALSE(cuda.small_o_taps.active);
  EXPECT_FALSE(cuda.small_o.mma);
  EXPECT_EQ(cuda.smem_bytes, small_o_weight_bytes(p));
  // A weight too large for the CUDA-core kernel: with taps allowed, small-o; with cuda only, not.
  const ConvProblem big = gemmkit_test::make_problem(conv_out(1, 64, 64, 1024, 3));
  EXPECT_GT(small_o_weight_bytes(big), kMaxKernelSmem);
  EXPECT_EQ(why_not_small_o(big, kH200, SmallOChoice::automatic), "");
  EXPECT_NE(why_not_small_o(big, kH200, SmallOChoice::cuda).find("GEMMKIT_CONV_SMALL_O=cuda"),
            std::string::npos);
}

// ---- Host emulation of conv_small_o_taps_kernel ---------------------------------------------

float decode16(DType dt, uint16_t bits) {
  unsigned char raw[4] = {};  // decode_bits' f32 branch (never taken here) reads 4 bytes
  std::memcpy(raw, &bits, 2);
  return static_cast<float>(gemmkit_test::decode_bits(dt, raw));
}

// Storage-index masks of a host tensor's view elements (reads must land on them).
std::vector<char> view_mask(const HostTensor& t) {
  std::vector<char> mask(static_cast<std::size_t>(t.storage_elems()), 0);
  for (int64_t e = 0; e < t.numel(); ++e) {
    mask[static_cast<std::size_t>(t.storage_index(t.unravel(e)))] = 1;
  }
  return mask;
}

// D += A * B of one warp-wide mma.m16n8k16 (.row.col, 16-bit A / B, fp32 D), from the 32 lanes'
// fragment registers, with PTX's fragment layout (written out here independently of
// small_o/taps_layout.h's helpers).
void emulate_mma(DType dt, const uint32_t (&a)[32][4], const uint32_t (&b)[32][2],
                 float (&d)[32][4]) {
  float A[16][16], B[16][8];
  const auto lo = [&](uint32_t r) { return decode16(dt, static_cast<uint16_t>(r & 0xffffu)); };
  const auto hi = [&](uint32_t r) { return decode16(dt, static_cast<uint16_t>(r >> 16)); };
  for (int lane = 0; lane < 32; ++lane) {
    const int q = lane / 4, k = lane % 4;
    A[q][2 * k] = lo(a[lane][0]);
    A[q][2 * k + 1] = hi(a[lane][0]);
    A[q + 8][2 * k] = lo(a[lane][1]);
    A[q + 8][2 * k + 1] = hi(a[lane][1]);
    A[q][2 * k + 8] = lo(a[lane][2]);
    A[q][2 * k + 9] = hi(a[lane][2]);
    A[q + 8][2 * k + 8] = lo(a[lane][3]);
    A[q + 8][2 * k + 9] = hi(a[lane][3]);
    B[2 * k][q] = lo(b[lane][0]);
    B[2 * k + 1][q] = hi(b[lane][0]);
    B[2 * k + 8][q] = lo(b[lane][1]);
    B[2 * k + 9][q] = hi(b[lane][1]);
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int q = lane / 4, k = lane % 4;
    for (int e = 0; e < 4; ++e) {
      const int row = q + 8 * (e / 2), col = 2 * k + e % 2;
      float s = d[lane][e];
      for (int kk = 0; kk < 16; ++kk) s += A[row][kk] * B[kk][col];
      d[lane][e] = s;
    }
  }
}

// Runs the kernel's schedule for configuration `c` on host tensors (x, w, bias in x's 16-bit
// dtype; out f32, poisoned), checking every address and index on the way.
void emulate_taps_kernel(const ConvProblem& p, const ConvConfig& c, const HostTensor& x,
                         const HostTensor& w, const HostTensor* bias, HostTensor& out) {
  ASSERT_TRUE(c.small_o_taps.active) << to_string(c);
  const ConvGeometry g = normalize(p);
  const SmallOTapsTiling& t = c.small_o_taps;
  const DType dt = x.dtype;
  const int64_t grid = c.grid.x;
  ASSERT_EQ(grid, t.grid);
  ASSERT_EQ(c.smem_bytes, t.weight_bytes + t.y_bytes + t.pixel_bytes);
  const int n_tiles = t.n_tiles;
  const std::vector<char> x_ok = view_mask(x), w_ok = view_mask(w), out_ok = view_mask(out);
  const auto bits_at = [&](const HostTensor& h, const std::vector<char>& ok, int64_t offset) {
    const int64_t i = h.offset + offset;
    EXPECT_TRUE(i >= 0 && i < h.storage_elems() && ok[static_cast<std::size_t>(i)])
        << "read outside the view at element offset " << offset;
    if (!(i >= 0 && i < h.storage_elems())) return uint16_t{0};
    uint16_t v = 0;
    std::memcpy(&v, h.storage.data() + i * 2, 2);
    return v;
  };
  const auto pack = [](uint16_t lo16, uint16_t hi16) {
    return static_cast<uint32_t>(lo16) | (static_cast<uint32_t>(hi16) << 16);
  };

  // B fragments: the staging loop.
  const int64_t units = t.chunks * n_tiles * 32;
  ASSERT_EQ(units * 16, t.weight_bytes);
  std::vector<std::array<uint32_t, 4>> w_s(static_cast<std::size_t>(units));
  std::vector<int> w_written(static_cast<std::size_t>(units), 0);
  for (int i = 0; i < units; ++i) {
    const int l = i & 31, chunk = (i >> 5) / n_tiles, n_tile = (i >> 5) - chunk * n_tiles;
    int64_t offset = 0;
    std::array<uint32_t, 4> v{0, 0, 0, 0};
    if (small_o_taps_weight(g, n_tile * 8 + (l >> 2), chunk * kSmallOTapsChunk + (l & 3) * 8,
                            offset)) {
      for (int j = 0; j < 4; ++j) {
        v[static_cast<std::size_t>(j)] =
            pack(bits_at(w, w_ok, offset + 2 * j * g.w_stride[4]),
                 bits_at(w, w_ok, offset + (2 * j + 1) * g.w_stride[4]));
      }
    }
    const int unit = small_o_taps_b_unit(t, chunk, n_tile, l);
    ASSERT_TRUE(unit >= 0 && unit < units);
    w_s[static_cast<std::size_t>(unit)] = v;
    ++w_written[static_cast<std::size_t>(unit)];
  }
  for (const int n : w_written) ASSERT_EQ(n, 1);

  // Per-warp register state: a[k][h][4] of each lane, the row sources, and the step they hold.
  struct WarpState {
    uint32_t a[kSmallOTapsGroupChunks][2][32][4] = {};
    int64_t src[2][32] = {};
    SmallOTapsStep loaded{-1, -1, -1};
  };
  std::vector<WarpState> warps(kSmallOTapsWarps);
  // The block's pixel table (region offsets from the tile base) and the tile it was filled for.
  const int y_rows = static_cast<int>(t.y_rows());
  ASSERT_EQ(int64_t{y_rows} * 4, t.pixel_bytes);
  std::vector<int> pixels(static_cast<std::size_t>(y_rows), -2);
  int64_t pixels_tile = -1;
  const auto fill_pixels = [&](int64_t tile) {
    const SmallOTapsTile s = small_o_taps_tile(g, t, tile);
    for (int r = 0; r < y_rows; ++r) {
      pixels[static_cast<std::size_t>(r)] = small_o_taps_region_offset(g, t, s, r);
    }
    pixels_tile = tile;
  };
  // A tile's first step computes its rows' offsets; the other steps read the pixel table.
  const auto locate = [&](WarpState& ws, int64_t tile, int m_tile, bool first) {
    const SmallOTapsTile s = small_o_taps_tile(g, t, tile);
    const int64_t base = small_o_taps_tile_base(g, s);
    if (!first) {
      ASSERT_EQ(pixels_tile, tile) << "pixel table of another tile";
    }
    for (int lane = 0; lane < 32; ++lane) {
      for (int h = 0; h < 2; ++h) {
        const int r = m_tile * kSmallOTapsMRows + small_o_taps_a_row(lane, h);
        ASSERT_LT(r, y_rows);
        const int rel =
            first ? small_o_taps_region_offset(g, t, s, r) : pixels[static_cast<std::size_t>(r)];
        ASSERT_GE(rel, -1);
        int64_t offset = 0;
        const bool real = small_o_taps_pixel(g, t, s, r, offset);
        EXPECT_EQ(rel >= 0, real) << "row " << r;
        if (real) {
          EXPECT_EQ(base + rel, offset) << "row " << r;
        }
        ws.src[h][lane] = rel >= 0 ? base + rel : -1;
        // The m-tail past the region loads nothing.
        EXPECT_TRUE(r < t.region() || ws.src[h][lane] < 0) << "row " << r << " past the region";
      }
    }
  };
  const auto load = [&](WarpState& ws, int k, int group) {
    for (int lane = 0; lane < 32; ++lane) {
      const int ch = small_o_taps_channel(group, k, lane);
      for (int h = 0; h < 2; ++h) {
        uint32_t* r = ws.a[k][h][lane];
        r[0] = r[1] = r[2] = r[3] = 0;
        const int64_t src = ws.src[h][lane];
        if (src >= 0 && ch < g.c) {
          EXPECT_EQ(ch % 8, 0);
          for (int j = 0; j < 4; ++j) {
            r[j] = pack(bits_at(x, x_ok, src + ch + 2 * j), bits_at(x, x_ok, src + ch + 2 * j + 1));
          }
        }
      }
    }
  };

  const int region = static_cast<int>(t.region());
  const int y_size = n_tiles * 8 * static_cast<int>(t.y_stride);
  ASSERT_GE(t.y_stride, y_rows);
  ASSERT_EQ(t.y_stride % 32, 4);
  ASSERT_EQ(int64_t{y_size} * 4, t.y_bytes);
  std::vector<float> y(static_cast<std::size_t>(y_size));
  std::vector<char> y_written(static_cast<std::size_t>(y_size));
  // Region rows whose x was loaded from a real pixel in this tile (the shift-add may read no
  // other: taps on padding are skipped, not added as zero products).
  std::vector<char> row_real(static_cast<std::size_t>(y_rows));
  std::vector<int> out_writes(static_cast<std::size_t>(out.storage_elems()), 0);
  int64_t tiles_done = 0;
  int64_t prefetches = 0;  // lanes that considered a prefetch (the schedule must issue some)
  for (int64_t block = 0; block < grid; ++block) {
    for (int warp = 0; warp < kSmallOTapsWarps; ++warp) {
      if (warp >= t.m_tiles) continue;
      WarpState& ws = warps[static_cast<std::size_t>(warp)];
      locate(ws, block, warp, true);
      for (int k = 0; k < kSmallOTapsGroupChunks; ++k) load(ws, k, 0);
      ws.loaded = {block, warp, 0};
    }
    fill_pixels(block);
    for (int64_t tile = block; tile < t.tiles; tile += grid) {
      ++tiles_done;
      const SmallOTapsTile s = small_o_taps_tile(g, t, tile);
      std::fill(y_written.begin(), y_written.end(), 0);
      std::fill(row_real.begin(), row_real.end(), 0);
      for (int warp = 0; warp < kSmallOTapsWarps; ++warp) {
        WarpState& ws = warps[static_cast<std::size_t>(warp)];
        for (int m_tile = warp; m_tile < t.m_tiles; m_tile += kSmallOTapsWarps) {
          float acc[8][32][4] = {};
          for (int group = 0; group < t.channel_groups; ++group) {
            // The registers hold the step the previous one prefetched.
            ASSERT_EQ(ws.loaded.tile, tile);
            ASSERT_EQ(ws.loaded.m_tile, m_tile);
            ASSERT_EQ(ws.loaded.group, group);
            for (int lane = 0; lane < 32; ++lane) {
              for (int h = 0; h < 2; ++h) {
                const int r = m_tile * kSmallOTapsMRows + small_o_taps_a_row(lane, h);
                if (ws.src[h][lane] >= 0 && r < region) row_real[static_cast<std::size_t>(r)] = 1;
              }
            }
            const SmallOTapsStep next =
                small_o_taps_next_step(t, grid, warp, {tile, m_tile, group});
            const bool prefetch = next.tile == tile;
            if (prefetch && next.group == 0) locate(ws, tile, next.m_tile, false);
            if (prefetch) {  // the L2 prefetch of the step two ahead: real pixels of x only
              const SmallOTapsStep ahead = small_o_taps_next_step(t, grid, warp, next);
              if (ahead.tile == tile) {
                ASSERT_EQ(pixels_tile, tile);
                const int64_t base = small_o_taps_tile_base(g, s);
                for (int lane = 0; lane < 32; ++lane) {
                  const int r = small_o_taps_prefetch_row(ahead.m_tile, lane);
                  ASSERT_LT(r, y_rows);
                  const int rel = pixels[static_cast<std::size_t>(r)];
                  const int ch = small_o_taps_prefetch_channel(ahead.group, lane);
                  if (rel >= 0 && ch < g.c) bits_at(x, x_ok, base + rel + ch);
                  ++prefetches;
                }
              }
            }
            for (int k = 0; k < kSmallOTapsGroupChunks; ++k) {
              const int chunk = group * kSmallOTapsGroupChunks + k;
              if (chunk < t.chunks) {
                for (int half = 0; half < 2; ++half) {
                  uint32_t frag_a[32][4];
                  for (int lane = 0; lane < 32; ++lane) {
                    small_o_taps_a_fragment(ws.a[k][0][lane], ws.a[k][1][lane], half, frag_a[lane]);
                  }
                  for (int j = 0; j < n_tiles; ++j) {
                    uint32_t frag_b[32][2];
                    for (int lane = 0; lane < 32; ++lane) {
                      const int unit = small_o_taps_b_unit(t, chunk, j, lane);
                      ASSERT_TRUE(unit >= 0 && unit < units);
                      uint32_t u[4];
                      for (int q = 0; q < 4; ++q) {
                        u[q] = w_s[static_cast<std::size_t>(unit)][static_cast<std::size_t>(q)];
                      }
                      small_o_taps_b_fragment(u, half, frag_b[lane][0], frag_b[lane][1]);
                    }
                    emulate_mma(dt, frag_a, frag_b, acc[j]);
                  }
                }
              }
              if (prefetch) load(ws, k, next.group);
            }
            if (prefetch) ws.loaded = next;
          }
          for (int j = 0; j < n_tiles; ++j) {
            for (int lane = 0; lane < 32; ++lane) {
              for (int e = 0; e < 4; ++e) {
                // Every row of the m-tile and column of the n-tile: Y has room for all.
                const int r = m_tile * kSmallOTapsMRows + small_o_taps_acc_row(lane, e);
                const int n = j * 8 + small_o_taps_acc_col(lane, e);
                const int i = small_o_taps_y(t, r, n);
                ASSERT_TRUE(i >= 0 && i < y_size);
                ASSERT_EQ(y_written[static_cast<std::size_t>(i)], 0) << "Y written twice";
                y[static_cast<std::size_t>(i)] = acc[j][lane][e];
                y_written[static_cast<std::size_t>(i)] = 1;
              }
            }
          }
        }
        if (warp < t.m_tiles) {  // the step after the warp's last one: the block's next tile
          const int last_m =
              warp + (static_cast<int>(t.m_tiles) - 1 - warp) / kSmallOTapsWarps * kSmallOTapsWarps;
          const SmallOTapsStep after = small_o_taps_next_step(
              t, grid, warp, {tile, last_m, static_cast<int>(t.channel_groups) - 1});
          EXPECT_EQ(after.tile, tile + grid);
          EXPECT_EQ(after.m_tile, warp);
          EXPECT_EQ(after.group, 0);
        }
        if (warp < t.m_tiles && tile + grid < t.tiles) {
          locate(ws, tile + grid, warp, true);
          for (int k = 0; k < kSmallOTapsGroupChunks; ++k) load(ws, k, 0);
          ws.loaded = {tile + grid, warp, 0};
        }
      }
      // After the barrier that ends the steps: the next tile's pixel table.
      if (tile + grid < t.tiles) fill_pixels(tile + grid);
      // The shift-add, both loops as the kernel runs them; the interior one must read what the
      // general one reads.
      const int k1 = static_cast<int>(g.kernel[1]), k2 = static_cast<int>(g.kernel[2]);
      const int o = static_cast<int>(g.o);
      const SmallOTapsShift sh = small_o_taps_shift(g, t, s);
      // Interior: every region pixel is real.
      EXPECT_EQ(sh.interior, s.plane_ok && s.ih0 >= 0 && s.ih0 + t.region_h <= g.in[1] &&
                                 s.iw0 >= 0 && s.iw0 + t.region_w <= g.in[2]);
      int step1 = 0, step2 = 0;
      small_o_taps_y_steps(g, t, step1, step2);
      const auto read_y = [&](int i) {
        EXPECT_TRUE(i >= 0 && i < y_size && y_written[static_cast<std::size_t>(i)])
            << "Y entry " << i << " read before this tile wrote it";
        EXPECT_TRUE(i >= 0 && i < y_size &&
                    row_real[static_cast<std::size_t>(i % static_cast<int>(t.y_stride))])
            << "Y entry " << i << " of a padding pixel read";
        return i >= 0 && i < y_size ? y[static_cast<std::size_t>(i)] : 0.0f;
      };
      // Positions as the kernel's threads take them (consecutive positions of a tile row), each
      // position's channels in turn.
      for (int px = 0; px < t.tile_h * t.tile_w; ++px) {
        const int ph = px / static_cast<int>(t.tile_w);
        const int pw = px - ph * static_cast<int>(t.tile_w);
        const bool inside = s.oh0 + ph < g.out[1] && s.ow0 + pw < g.out[2];
        ASSERT_EQ(ph < sh.rows && pw < sh.cols, inside) << "position " << px;
        if (!inside) continue;
        for (int oc = 0; oc < o; ++oc) {
          float sum = 0.0f;
          if (sh.interior) {
            const int base =
                small_o_taps_y_base(g, t, ph, pw, 0) + oc * static_cast<int>(t.y_stride);
            for (int t1 = 0; t1 < k1; ++t1) {
              for (int t2 = 0; t2 < k2; ++t2) {
                int r = 0;
                EXPECT_TRUE(small_o_taps_tap(g, t, sh, ph, pw, t1, t2, r));
                const int i = base + t1 * step1 + t2 * step2;
                EXPECT_EQ(i, small_o_taps_y(t, r, (t1 * k2 + t2) * o + oc));
                sum += read_y(i);
              }
            }
          } else {
            for (int t1 = 0; t1 < k1; ++t1) {
              for (int t2 = 0; t2 < k2; ++t2) {
                int r = 0;
                const bool valid = small_o_taps_tap(g, t, sh, ph, pw, t1, t2, r);
                // Valid exactly when the tap's input pixel is real.
                const int64_t ih = s.ih0 + ph * g.stride[1] + t1 * g.kdil[1];
                const int64_t iw = s.iw0 + pw * g.stride[2] + t2 * g.kdil[2];
                EXPECT_EQ(valid, s.plane_ok && ih >= 0 && ih < g.in[1] && iw >= 0 && iw < g.in[2]);
                if (valid) sum += read_y(small_o_taps_y(t, r, (t1 * k2 + t2) * o + oc));
              }
            }
          }
          if (g.has_bias) sum += static_cast<float>(bias->at({oc}));
          const int64_t i = out.offset + small_o_taps_out_offset(g, sh, ph, pw, oc);
          ASSERT_TRUE(i >= 0 && i < out.storage_elems() && out_ok[static_cast<std::size_t>(i)]);
          ++out_writes[static_cast<std::size_t>(i)];
          std::memcpy(out.storage.data() + i * 4, &sum, 4);
        }
      }
    }
  }
  EXPECT_EQ(tiles_done, t.tiles);
  if (t.m_tiles > 2 * kSmallOTapsWarps) {
    EXPECT_GT(prefetches, 0);
  }
  for (std::size_t i = 0; i < out_writes.size(); ++i) {
    ASSERT_EQ(out_writes[i], out_ok[i] ? 1 : 0) << "output storage element " << i;
  }
}

struct EmulatedCase {
  std::string name;
  Spec spec;
  Layout x_layout, w_layout, out_layout;
  int n_tiles = 4;  // expected
};

// Fake device addresses with the host tensors' layouts (x's view at a 16-byte aligned address
// when its element offset is a multiple of 8).
ConvProblem problem_for(const Spec& s, const HostTensor& x, const HostTensor& w,
                        const HostTensor* bias, const HostTensor& out) {
  const Device gpu = Device::cuda(0);
  const auto at = [&](uintptr_t base, const HostTensor& h) {
    return Tensor::strided(
        gemmkit_test::fake(base + static_cast<uintptr_t>(h.offset) * gemmkit_test::esize(h.dtype)),
        h.dtype, gpu, h.shape, h.strides);
  };
  std::optional<Tensor> b;
  if (bias) b = at(0x30000000, *bias);
  return gemmkit_test::conv_problem(at(0x10000000, x), at(0x20000000, w), b, at(0x40000000, out),
                                    s.params);
}

void run_emulated(const EmulatedCase& k, const DeviceDescription& dev, uint64_t seed) {
  SCOPED_TRACE(k.name + " on " + std::to_string(dev.multiprocessors) + " SMs");
  const Spec& s = k.spec;
  HostTensor x = gemmkit_test::random_tensor(s.dtype, s.x_shape, seed, k.x_layout);
  HostTensor w = gemmkit_test::random_tensor(s.dtype, s.w_shape, seed + 1, k.w_layout);
  HostTensor b = gemmkit_test::random_tensor(s.dtype, {s.w_shape[0]}, seed + 2);
  const std::vector<int64_t> out_shape = conv_output_shape(s.x_shape, s.w_shape, s.params);
  HostTensor out = gemmkit_test::make_tensor(DType::f32, out_shape, k.out_layout);
  out.poison();
  const ConvProblem p = problem_for(s, x, w, s.bias ? &b : nullptr, out);
  const ConvConfig c = select_conv_config(p, dev, request("direct", "taps"));  // register form
  ASSERT_TRUE(c.small_o_taps.active) << to_string(c);
  EXPECT_EQ(c.small_o_taps.n_tiles, k.n_tiles);
  EXPECT_EQ(int64_t{c.grid.x}, c.small_o_taps.grid);
  EXPECT_LE(c.small_o_taps.grid, int64_t{dev.multiprocessors} * c.small_o_taps.blocks_per_sm);
  emulate_taps_kernel(p, c, x, w, s.bias ? &b : nullptr, out);
  gemmkit_test::Reference ref = gemmkit_test::reference_conv(x, w, s.bias ? &b : nullptr, s.params);
  ref.reduction_length *= 8;  // any summation order: (len + 6) u (tests/gpu's any_order)
  gemmkit_test::check_output(out, ref, k.name + " " + to_string(c));
}

std::vector<EmulatedCase> emulated_cases() {
  std::vector<EmulatedCase> v;
  const auto add = [&](const std::string& name, Spec s, int n_tiles = 4) {
    EmulatedCase k;
    k.name = name;
    k.spec = std::move(s);
    k.n_tiles = n_tiles;
    v.push_back(k);
    return &v.back();
  };
  add("conv_out c128 o3 bias, partial tiles", conv_out(1, 20, 37));
  {
    Spec s = conv_out(2, 19, 45, 40, 1);  // c = 40: the second chunk is 8 channels
    s.bias = false;
    add("o1 c40 batch 2", s);
  }
  {
    Spec s = conv_out(1, 13, 17, 16, 3);
    s.w_shape = {3, 2, 3, 16};
    s.params.padding_lo = {-1, 2};
    s.params.padding_hi = {-2, -1};
    add("negative and asymmetric padding, 2x3 kernel", s);
  }
  {
    Spec s = conv_out(1, 23, 21, 64, 2);
    s.params.kernel_dilation = {2};
    s.params.padding_lo = {2};
    s.params.padding_hi = {2};
    add("kernel dilation 2", s);
  }
  {
    Spec s;
    s.x_shape = {3, 300, 64};
    s.w_shape = {3, 5, 64};
    s.params.padding_lo = {4};
    s.params.padding_hi = {-1};
    s.bias = true;
    add("1-D k5 negative pad", s);
  }
  {
    Spec s = conv_out(2, 15, 18, 24, 5);  // 45 columns: 8 n-tiles
    s.params.stride = {2};
    add("stride 2, o5 (8 n-tiles)", s, 8);
  }
  {
    // 3-D, one tap along dim 0 with padding 1 there: the first and last output planes read a
    // padding plane (zeros; the TMA form's dim-0 coordinate -1).
    Spec s;
    s.x_shape = {1, 3, 9, 11, 16};
    s.w_shape = {3, 1, 3, 3, 16};
    s.params.padding_lo = {1};
    s.params.padding_hi = {1};
    s.bias = true;
    add("3-D, padding planes", s);
  }
  add("o7 c32 (63 columns)", conv_out(1, 9, 20, 32, 7), 8);
  add("o6 c72 (54 columns, 3 chunks)", conv_out(1, 10, 11, 72, 6), 8);
  // Tiles whose region ends exactly at the input's last row / column (interior) or one past it
  // (padding: not interior), and interior tiles with stride 2.
  add("regions ending at the input's edge", conv_out(1, 40, 64, 16, 3));
  {
    Spec s = conv_out(1, 41, 75, 16, 3);
    s.params.stride = {2};
    add("stride 2 with interior tiles", s);
  }
  {
    Spec s = conv_out(1, 11, 13, 160, 2);  // two channel groups, the second of one chunk
    s.params.flip = true;
    add("c160 (two channel groups) flip", s);
  }
  {
    Spec s = conv_out(1, 4, 5, 8, 3);  // most outputs on padding
    s.params.padding_lo = {4, 2};
    s.params.padding_hi = {3, 5};
    add("c8, outputs on padding only", s);
  }
  {
    Spec s;  // 3-D, one tap along dim 0, stride 2 and padding there: planes of padding
    s.x_shape = {1, 3, 9, 10, 16};
    s.w_shape = {2, 1, 3, 3, 16};
    s.params.stride = {2, 1, 1};
    s.params.padding_lo = {1, 1, 1};
    s.params.padding_hi = {1, 0, 2};
    s.bias = true;
    add("3-D one tap along dim 0", s);
  }
  {
    Spec s = conv_out(2, 9, 14, 32, 3);
    EmulatedCase* k = add("strided x, weight and out", s);
    k->x_layout.pad = {1, 2, 1, 8};  // position stride 40, row gaps
    k->x_layout.offset = 16;
    k->w_layout.order = {3, 0, 1, 2};  // channels outermost
    k->out_layout.pad = {0, 1, 3, 2};
    k->out_layout.offset = 5;
    EmulatedCase* m = add("out channels outermost", conv_out(1, 7, 9, 16, 3));
    m->out_layout.order = {3, 0, 1, 2};
    m->out_layout.pad = {0, 0, 1, 0};
  }
  {
    Spec s = conv_out(1, 10, 12, 16, 4);
    s.dtype = s.out_dtype = DType::f16;
    add("f16 o4 (36 columns)", s, 8);
  }
  return v;
}

TEST(ConvSmallOTaps, HostEmulationMatchesTheReference) {
  uint64_t seed = 700;
  for (const EmulatedCase& k : emulated_cases()) {
    run_emulated(k, kH200, seed += 10);
    // Few SMs: blocks loop over several tiles (the tile stride and the cross-tile prefetch).
    run_emulated(k, few_sms(1), seed += 10);
    run_emulated(k, few_sms(3), seed += 10);
  }
}

// The TMA form's stages, filled as TMA fills a box (coordinates and strides of
// small_o_taps_tma_map / small_o_taps_tma_coords, zeros outside x), hold at each consumer read
// the bytes the register form loads into the same lane's registers: rows q and q + 8 of every
// m-tile (real region pixels), channels 8k .. 8k + 7 of every chunk.
TEST(ConvSmallOTaps, TmaStagesHoldTheRegisterFormsOperands) {
  uint64_t seed = 900;
  int served = 0;
  for (const EmulatedCase& k : emulated_cases()) {
    SCOPED_TRACE(k.name);
    const Spec& s = k.spec;
    HostTensor x = gemmkit_test::random_tensor(s.dtype, s.x_shape, seed += 10, k.x_layout);
    HostTensor w = gemmkit_test::random_tensor(s.dtype, s.w_shape, seed + 1, k.w_layout);
    HostTensor out = gemmkit_test::make_tensor(
        DType::f32, conv_output_shape(s.x_shape, s.w_shape, s.params), k.out_layout);
    const ConvGeometry g = normalize(problem_for(s, x, w, nullptr, out));
    SmallOTapsTiling t;
    if (!plan_small_o_taps_tma(g, kH200.multiprocessors, kH200.shared_per_block_optin, t).empty())
      continue;
    ++served;
    const SmallOTapsTmaMap m = small_o_taps_tma_map(g, t);
    for (int d = 0; d < 4; ++d) {
      EXPECT_EQ(m.byte_strides[d] % 16, 0) << "dim " << d + 1;
      EXPECT_GT(m.byte_strides[d], 0) << "dim " << d + 1;
    }
    const std::vector<char> x_ok = view_mask(x);
    // Element (coords) of x as TMA reads it: 0 outside the dims.
    const auto tma_element = [&](const int64_t(&coords)[5]) {
      int64_t bytes = 0;
      for (int d = 0; d < 5; ++d) {
        if (coords[d] < 0 || coords[d] >= m.dims[d]) return uint16_t{0};
        bytes += coords[d] * (d == 0 ? 2 : m.byte_strides[d - 1]);
      }
      const int64_t i = x.offset + bytes / 2;
      EXPECT_TRUE(i >= 0 && i < x.storage_elems() && x_ok[static_cast<std::size_t>(i)]);
      uint16_t v = 0;
      if (i >= 0 && i < x.storage_elems()) std::memcpy(&v, x.storage.data() + i * 2, 2);
      return v;
    };
    const int region_w = static_cast<int>(t.region_w);
    for (int64_t tile = 0; tile < t.tiles; ++tile) {
      const SmallOTapsTile st = small_o_taps_tile(g, t, tile);
      const int64_t base = small_o_taps_tile_base(g, st);
      for (int chunk = 0; chunk < t.chunks; ++chunk) {
        int32_t c[5];
        small_o_taps_tma_coords(st, chunk, c);
        for (int m_tile = 0; m_tile < t.m_tiles; ++m_tile) {
          for (int lane = 0; lane < 32; ++lane) {
            for (int h = 0; h < 2; ++h) {
              const int r = m_tile * kSmallOTapsMRows + small_o_taps_a_row(lane, h);
              if (r >= t.region()) continue;  // the m-tail: read, never used
              // The kernel's read: uint4 (r * 4 + k) of the stage = box element (8k.., rw, rh).
              const int rh = r / region_w, rw = r - rh * region_w, k8 = (lane & 3) * 8;
              const int offset = small_o_taps_region_offset(g, t, st, r);
              const int ch0 = small_o_taps_channel(chunk / kSmallOTapsGroupChunks,
                                                   chunk % kSmallOTapsGroupChunks, lane);
              ASSERT_EQ(ch0, chunk * kSmallOTapsChunk + k8);
              for (int e = 0; e < 8; ++e) {
                const int64_t coords[5] = {c[0] + k8 + e, c[1] + rw, c[2] + rh, c[3], c[4]};
                uint16_t loaded = 0;  // the register form's load
                if (offset >= 0 && ch0 < g.c) {
                  std::memcpy(&loaded, x.storage.data() + (x.offset + base + offset + ch0 + e) * 2,
                              2);
                }
                ASSERT_EQ(tma_element(coords), loaded) << "tile " << tile << " chunk " << chunk
                                                       << " pixel " << r << " channel " << ch0 + e;
              }
            }
          }
        }
      }
    }
  }
  EXPECT_GE(served, 4);
}

// A mutation of the index math must fail the emulation: a sanity check of the test itself.
TEST(ConvSmallOTaps, EmulationCatchesAWrongFragment) {
  const uint32_t row_q[4] = {1, 2, 3, 4}, row_q8[4] = {5, 6, 7, 8};
  uint32_t lo[4], hi[4];
  small_o_taps_a_fragment(row_q, row_q8, 0, lo);
  small_o_taps_a_fragment(row_q, row_q8, 1, hi);
  // The PTX A layout: reg 0 row q, reg 1 row q + 8, reg 2 row q (k + 8), reg 3 row q + 8 (k + 8).
  EXPECT_EQ(lo[0], 1u);
  EXPECT_EQ(lo[1], 5u);
  EXPECT_EQ(lo[2], 2u);
  EXPECT_EQ(lo[3], 6u);
  EXPECT_EQ(hi[0], 3u);
  EXPECT_EQ(hi[3], 8u);
  // Channels 8k + 0..3 of x meet channels 8k + 0..3 of w: a full MMA with one nonzero channel
  // pair per lane gives exactly that product.
  uint32_t a[32][4] = {}, b[32][2] = {};
  float d[32][4] = {};
  const uint16_t one = 0x3f80, two = 0x4000;  // bf16 1 and 2
  for (int lane = 0; lane < 32; ++lane) {
    const uint32_t x_row[4] = {lane == 0 ? uint32_t{one} : 0u, 0, 0, 0}, zero_row[4] = {};
    small_o_taps_a_fragment(x_row, zero_row, 0, a[lane]);
    const uint32_t w_unit[4] = {lane == 0 ? uint32_t{two} : 0u, 0, 0, 0};
    small_o_taps_b_fragment(w_unit, 0, b[lane][0], b[lane][1]);
  }
  emulate_mma(DType::bf16, a, b, d);
  // Row 0 (lane 0's row q), column 0 (lane 0's column): 1 * 2.
  EXPECT_EQ(d[0][0], 2.0f);
  float total = 0;
  for (const auto& lane : d) {
    for (const float v : lane) total += v;
  }
  EXPECT_EQ(total, 2.0f);
  EXPECT_EQ(small_o_taps_acc_row(0, 0), 0);
  EXPECT_EQ(small_o_taps_acc_col(0, 0), 0);
  EXPECT_EQ(small_o_taps_acc_row(5, 3), 9);
  EXPECT_EQ(small_o_taps_acc_col(5, 3), 3);
}

}  // namespace
}  // namespace gemmkit::cuda::conv_impl
