// Host tests of the Hopper implicit-GEMM convolution's pure logic (implicit_gemm/wgmma_plan.h,
// wgmma_layout.h): eligibility and plans for suite-like rows, the reasons for problems it cannot
// serve, the position box, exact coverage of the tile raster, the tensor maps TMA is given, and a
// host emulation of the kernel — TMA boxes (traversal strides, zero fill out of bounds) read
// through the very map descriptions and coordinate functions the launcher and kernel use, the
// MMAs in double, the epilogue's positions and offsets — against the double reference. Runs
// without a GPU and without CUDA.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/problems.h"
#include "conv/emulation.h"
#include "conv/problem_spec.h"
#include "conv/select_util.h"
#include "cuda/conv/implicit_gemm/wgmma_k_order.h"
#include "cuda/conv/implicit_gemm/wgmma_maps.h"
#include "cuda/conv/implicit_gemm/wgmma_plan.h"
#include "cuda/conv/select.h"
#include "gemmkit/gemmkit.h"
#include "reference_double.h"

namespace gemmkit::cuda::conv_impl {
namespace {

using gemmkit_test::make_problem;
using gemmkit_test::Spec;

Spec conv_spec(std::vector<int64_t> x, std::vector<int64_t> w, int64_t pad = 0,
               int64_t stride = 1) {
  Spec s;
  s.x_shape = std::move(x);
  s.w_shape = std::move(w);
  s.params.padding_lo = {pad};
  s.params.padding_hi = {pad};
  s.params.stride = {stride};
  return s;
}

// Every invariant of a plan.
void expect_plan_valid(const ConvProblem& p, const ImplicitWgmmaPlan& t, const std::string& what) {
  SCOPED_TRACE(what + ": " + to_string(t));
  const ConvGeometry g = normalize(p);
  EXPECT_TRUE(t.block_n == 128 || t.block_n == 256);
  if (t.halo) {
    EXPECT_TRUE(implicit_wgmma_can_halo(t));
    EXPECT_EQ(t.stages, kWgmmaConvHaloStages);
    EXPECT_EQ(t.smem_bytes, implicit_wgmma_halo_smem_bytes());
  } else {
    EXPECT_EQ(t.stages, implicit_wgmma_stages(t.block_n));
    EXPECT_EQ(t.smem_bytes, implicit_wgmma_smem_bytes(t.block_n, t.stages, t.tma_store));
  }
  EXPECT_EQ(t.tma_store, !t.split_parallel && implicit_wgmma_can_store_by_tma(p, t));
  EXPECT_EQ(int64_t{t.store_box[0]} * t.store_box[1] * t.store_box[2], kWgmmaConvStoreChunk);
  for (int d = 0; d < kDims; ++d) {
    EXPECT_LE(t.store_box[d], t.tile[d]);
    // A store chunk is whole rows of the tile box inside the dims it spans.
    if (d < kDims - 1 && t.store_box[d] > 1) {
      EXPECT_EQ(t.store_box[d + 1], t.tile[d + 1]);
    }
  }
  EXPECT_LE(t.smem_bytes, kH200.shared_per_block_optin);
  EXPECT_EQ(int64_t{t.tile[0]} * t.tile[1] * t.tile[2], t.block_n);
  for (int d = 0; d < kDims; ++d) EXPECT_EQ(int32_t{1} << t.tile_shift[d], t.tile[d]);
  for (int d = 0; d < kDims; ++d) {
    EXPECT_GE(t.tiles_of[d] * t.tile[d], t.out[d]);
    EXPECT_LT((t.tiles_of[d] - 1) * t.tile[d], std::max(t.out[d], 1));
    EXPECT_EQ(t.phases[d], g.idil[d]);
    EXPECT_LE(int64_t{t.tile[d]} * t.stride[d], kWgmmaConvMaxBox);
  }
  EXPECT_TRUE(t.block_o == kWgmmaConvBlockO || t.block_o == kWgmmaConvNarrowBlockO);
  EXPECT_GE(t.o_tiles * t.block_o, t.opg);
  EXPECT_LT((t.o_tiles - 1) * t.block_o, t.opg);
  if (t.block_o == kWgmmaConvNarrowBlockO) {
    // The narrow-o form: one chain over K, one stride phase, the cooperative schedule; the two
    // consumers' positions tile the box, whole store chunks each.
    EXPECT_EQ(t.k_segments, 1);
    EXPECT_EQ(implicit_wgmma_phase_count(t), 1);
    EXPECT_FALSE(t.pingpong);
    for (int consumer = 0; consumer < 2; ++consumer) {
      const WgmmaConvConsumerPart part = implicit_wgmma_consumer_part(t, consumer);
      EXPECT_EQ(part.half, 0);
      EXPECT_EQ(part.columns, t.block_n / 2);
      EXPECT_EQ(part.first_column, consumer * t.block_n / 2);
      EXPECT_EQ(part.first_column % kWgmmaConvStoreChunk, 0);
    }
  } else {
    for (int consumer = 0; consumer < 2; ++consumer) {
      const WgmmaConvConsumerPart part = implicit_wgmma_consumer_part(t, consumer);
      EXPECT_EQ(part.half, consumer);
      EXPECT_EQ(part.columns, t.block_n);
      EXPECT_EQ(part.first_column, 0);
    }
  }
  EXPECT_EQ(t.base_tiles,
            g.groups * g.batch * t.tiles_of[0] * t.tiles_of[1] * t.tiles_of[2] * t.o_tiles);
  EXPECT_EQ(t.k_blocks, t.taps * t.c_blocks);
  EXPECT_TRUE(t.block_c == kWgmmaConvBlockK || t.block_c == kWgmmaConvHalfBlockK) << t.block_c;
  EXPECT_GE(int64_t{t.c_blocks} * t.block_c, t.cpg);
  EXPECT_LT(int64_t{t.c_blocks - 1} * t.block_c, t.cpg);
  // The issued k16 steps cover c / groups and stop within 16 channels of it.
  EXPECT_GE(t.last_block_steps, 1);
  EXPECT_LE(t.last_block_steps, t.block_c / 16);
  EXPECT_GE(implicit_wgmma_issued_channels(t), t.cpg);
  EXPECT_LT(implicit_wgmma_issued_channels(t), t.cpg + 16);
  EXPECT_EQ(implicit_wgmma_block_steps(t, t.c_blocks - 1), t.last_block_steps);
  if (t.c_blocks > 1) {
    EXPECT_EQ(implicit_wgmma_block_steps(t, 0), t.block_c / 16);
  }
  // Full k blocks (the ping-pong kernel's straight-line form): 64-channel blocks, c / groups a
  // multiple of 64, every block 4 steps.
  EXPECT_EQ(implicit_wgmma_full_k_blocks(t), t.block_c == 64 && t.cpg % 64 == 0);
  if (implicit_wgmma_full_k_blocks(t)) {
    for (int32_t b = 0; b < t.c_blocks; ++b) EXPECT_EQ(implicit_wgmma_block_steps(t, b), 4);
  }
  EXPECT_GE(t.grid, 1);
  // (A transposed convolution's grid covers the tiles of all its phases.)
  EXPECT_LE(t.grid, implicit_wgmma_total_tiles(implicit_wgmma_phase_plans(p, t)));
  EXPECT_LE(t.grid, kH200.multiprocessors);
  EXPECT_GT(t.efficiency, 0.0);
  EXPECT_LE(t.efficiency, 1.0);
  EXPECT_LE(t.efficiency, t.tile_efficiency);
  // Reduction segments: the k blocks cut into k_segments runs of segment_blocks (the last
  // shorter), 128-position tiles; the parallel form's work items and partials.
  EXPECT_GE(t.k_segments, 1);
  EXPECT_GE(int64_t{t.k_segments} * t.segment_blocks, t.k_blocks);
  EXPECT_LT(int64_t{t.k_segments - 1} * t.segment_blocks, t.k_blocks);
  if (t.k_segments > 1) {
    EXPECT_EQ(t.block_n, 128);
  }
  EXPECT_EQ(t.tiles, t.base_tiles * (t.split_parallel ? t.k_segments : 1));
  if (t.split_parallel) {
    EXPECT_EQ(t.workspace_bytes,
              int64_t{t.k_segments} * t.base_tiles * kWgmmaConvBlockO * t.block_n * 4);
    const int64_t last =
        implicit_wgmma_partial_index(t, t.k_segments - 1, t.base_tiles - 1, t.block_n / 8 - 1, 255);
    EXPECT_EQ((last + 1) * 16, t.workspace_bytes);
    EXPECT_EQ(implicit_wgmma_partial_index(t, 0, 0, 1, 0), 256);
  } else {
    EXPECT_EQ(t.workspace_bytes, 0);
  }
}

TEST(ConvImplicitWgmma, SuiteRowsAreEligibleWithFullBoxes) {
  struct Row {
    const char* name;
    Spec spec;
    double min_efficiency;
  };
  Spec strided = conv_spec({8, 56, 56, 128}, {128, 3, 3, 128}, 1, 2);
  Spec dilated = conv_spec({4, 128, 128, 256}, {256, 3, 3, 256}, 2);
  dilated.params.kernel_dilation = {2};
  Spec grouped = conv_spec({8, 56, 56, 256}, {256, 3, 3, 128}, 1);
  grouped.params.groups = 2;
  const Row rows[] = {
      {"vae mid 3x3 512 at 128^2", conv_spec({1, 128, 128, 512}, {512, 3, 3, 512}, 1), 0.95},
      {"vae 3x3 256 at 512^2", conv_spec({1, 512, 512, 256}, {256, 3, 3, 256}, 1), 0.95},
      {"vae 3x3 128 at 1024^2", conv_spec({1, 1024, 1024, 128}, {128, 3, 3, 128}, 1), 0.95},
      {"resnet 3x3 64 at 56^2", conv_spec({8, 56, 56, 64}, {64, 3, 3, 64}, 1), 0.3},
      {"resnet 3x3 s2 128", strided, 0.5},
      {"dilated 3x3 d2", dilated, 0.9},
      {"grouped c/g 128", grouped, 0.5},
      {"whisper conv1 1-D", conv_spec({1, 3000, 128}, {1280, 3, 128}, 1), 0.9},
      {"3-D 3x3x3 256", conv_spec({1, 9, 64, 64, 256}, {256, 3, 3, 3, 256}, 1), 0.9},
  };
  for (const Row& r : rows) {
    const ConvProblem p = make_problem(r.spec);
    ASSERT_EQ(why_not_implicit_wgmma(p, kH200), "") << r.name;
    const ImplicitWgmmaPlan t = implicit_wgmma_plan(p, kH200, kDefaultWorkspaceBytes);
    expect_plan_valid(p, t, r.name);
    EXPECT_GE(t.tile_efficiency, r.min_efficiency) << r.name << ": " << to_string(t);
  }
  // The VAE's wide rows take a 256-wide box along w, the 128-wide ones two rows of 128.
  const ImplicitWgmmaPlan wide =
      implicit_wgmma_plan(make_problem(conv_spec({1, 1024, 1024, 128}, {128, 3, 3, 128}, 1)), kH200,
                          kDefaultWorkspaceBytes);
  EXPECT_EQ(wide.tile[2], 256);
  EXPECT_EQ(wide.tile[1], 1);
  const ImplicitWgmmaPlan mid =
      implicit_wgmma_plan(make_problem(conv_spec({1, 128, 128, 512}, {512, 3, 3, 512}, 1)), kH200,
                          kDefaultWorkspaceBytes);
  EXPECT_EQ(mid.tile[2] * mid.tile[1], mid.block_n);
  EXPECT_LE(mid.tile[2], 128);
}

TEST(ConvImplicitWgmma, IneligibleProblemsNameTheReason) {
  const auto why = [](const Spec& s, const DeviceDescription& dev = kH200) {
    return why_not_implicit_wgmma(make_problem(s), dev);
  };
  const auto has = [](const std::string& reason, const std::string& word) {
    return reason.find(word) != std::string::npos;
  };
  DeviceDescription ampere;
  ampere.sm_major = 8;
  EXPECT_TRUE(has(why(conv_spec({1, 8, 8, 64}, {64, 3, 3, 64}, 1), ampere), "sm_90a"));
  Spec f32 = conv_spec({1, 8, 8, 64}, {64, 3, 3, 64}, 1);
  f32.dtype = f32.out_dtype = DType::f32;
  EXPECT_TRUE(has(why(f32), "bf16 / f16"));
  EXPECT_TRUE(has(why(conv_spec({1, 8, 8, 3}, {64, 3, 3, 3}, 1)), "multiple of 8"));
  Spec grouped = conv_spec({1, 8, 8, 64}, {64, 3, 3, 32}, 1);
  grouped.params.groups = 2;
  EXPECT_TRUE(has(why(grouped), "multiple of 64"));
  Spec transposed = conv_spec({1, 8, 8, 64}, {64, 4, 4, 64});
  transposed.params = conv_transpose_params({4, 4}, {2, 2}, {1, 1}, {0, 0}, {1, 1}, 1);
  EXPECT_EQ(why(transposed), "");              // as stride phases
  transposed.params.kernel_dilation = {2, 2};  // every tap of odd phases falls between inputs
  EXPECT_TRUE(has(why(transposed), "meets no input element"));
  Spec strided_dilated = conv_spec({1, 8, 8, 64}, {64, 3, 3, 64}, 1, 2);
  strided_dilated.params.input_dilation = {2};
  EXPECT_TRUE(has(why(strided_dilated), "stride above 1"));
  EXPECT_TRUE(has(why(conv_spec({1, 64, 64, 64}, {64, 3, 3, 64}, 1, 9)), "traversal stride"));
  // 1-D, 2^29 long: past TMA's 32-bit box coordinates.
  EXPECT_EQ(why(conv_spec({1, int64_t{1} << 29, 64}, {64, 3, 64}, 1)),
            "a spatial extent (536870912 in dim 0) reaches 2^29 (TMA box coordinates are 32-bit)");
  Spec odd = conv_spec({1, 8, 8, 64}, {64, 3, 3, 64}, 1);
  ConvProblem p = make_problem(odd);
  p.x.strides[1] = 8 * 64 + 4;  // rows 8 bytes off the 16-byte grid
  EXPECT_TRUE(has(why_not_implicit_wgmma(p, kH200), "x stride"));
  p = make_problem(odd);
  p.x.data = fake(0x10000008);
  EXPECT_TRUE(has(why_not_implicit_wgmma(p, kH200), "16-byte aligned"));
}

TEST(ConvImplicitWgmma, BoxFitsStridesAndPrefersWideRows) {
  int32_t tile[kDims];
  const int64_t stride1[kDims] = {1, 1, 1}, stride2[kDims] = {1, 2, 2};
  const int64_t big[kDims] = {1, 1024, 1024}, row128[kDims] = {1, 128, 128},
                odd[kDims] = {1, 56, 56};
  EXPECT_DOUBLE_EQ(choose_wgmma_conv_box(big, stride1, 256, tile), 1.0);
  EXPECT_EQ(tile[2], 256);
  EXPECT_DOUBLE_EQ(choose_wgmma_conv_box(row128, stride1, 256, tile), 1.0);
  EXPECT_EQ(tile[2], 128);
  EXPECT_EQ(tile[1], 2);
  EXPECT_DOUBLE_EQ(choose_wgmma_conv_box(big, stride2, 256, tile), 1.0);
  EXPECT_EQ(tile[2], 128);  // box_w = 256 at stride 2
  const double useful = choose_wgmma_conv_box(odd, stride1, 256, tile);
  EXPECT_GT(useful, 0.6);
  EXPECT_EQ(int64_t{tile[0]} * tile[1] * tile[2], 256);
}

TEST(ConvImplicitWgmma, TileRasterCoversEachTileOnce) {
  Spec s = conv_spec({2, 5, 37, 19, 64}, {200, 3, 3, 3, 64}, 1);
  const ConvProblem p = make_problem(s);
  ASSERT_EQ(why_not_implicit_wgmma(p, kH200), "");
  for (const int block_n : {128, 256}) {
    const ImplicitWgmmaPlan t = implicit_wgmma_plan_for(p, kH200, block_n);
    std::map<std::vector<int64_t>, int> seen;
    for (int64_t tile = 0; tile < t.tiles; ++tile) {
      const WgmmaConvTile at = implicit_wgmma_tile(t, tile);
      EXPECT_EQ(at.o_tile, tile % t.o_tiles);  // output-channel tiles fastest
      ASSERT_LT(at.n, t.batch);
      ASSERT_LT(at.group, t.groups);
      for (int d = 0; d < kDims; ++d) {
        ASSERT_EQ(at.p0[d] % t.tile[d], 0);
        ASSERT_LT(at.p0[d], t.out[d]);
      }
      ++seen[{at.group, at.n, at.o_tile, at.p0[0], at.p0[1], at.p0[2]}];
    }
    EXPECT_EQ(static_cast<int64_t>(seen.size()), t.tiles);
  }
}

TEST(ConvImplicitWgmma, TensorMapsMeetTmaRules) {
  Spec s = conv_spec({3, 33, 47, 72}, {130, 3, 2, 72}, 1, 2);
  const ConvProblem p = make_problem(s);
  ASSERT_EQ(why_not_implicit_wgmma(p, kH200), "");
  const ConvGeometry g = normalize(p);
  const ImplicitWgmmaPlan t = implicit_wgmma_plan(p, kH200, kDefaultWorkspaceBytes);
  // 72 channels: blocks of 32 (two full, one of 8) carry 96 channels a tap, not 128.
  EXPECT_EQ(t.block_c, kWgmmaConvHalfBlockK);
  for (const WgmmaConvMap& m :
       {implicit_wgmma_x_map(g, t), implicit_wgmma_w_map(g, t.block_o, t.block_c)}) {
    EXPECT_EQ(m.box[0], t.block_c);  // one swizzled row of 64 bytes
    int64_t rows = 1;
    for (int d = 0; d < 5; ++d) {
      EXPECT_GE(m.dims[d], 1);
      EXPECT_LE(m.dims[d], int64_t{1} << 32);
      EXPECT_GE(m.box[d], 1);
      EXPECT_LE(m.box[d], kWgmmaConvMaxBox);
      EXPECT_GE(m.element_strides[d], 1);
      EXPECT_LE(m.element_strides[d], kWgmmaConvMaxStride);
      if (d > 0) rows *= (m.box[d] + m.element_strides[d] - 1) / m.element_strides[d];
    }
    for (int d = 0; d < 4; ++d) {
      EXPECT_EQ(m.byte_strides[d] % 16, 0);
      EXPECT_GT(m.byte_strides[d], 0);
    }
    EXPECT_TRUE(rows == t.block_n || rows == t.block_o) << rows;
  }
  const WgmmaConvMap x = implicit_wgmma_x_map(g, t);
  EXPECT_EQ(x.element_strides[1], 2);
  EXPECT_EQ(x.element_strides[2], 2);
  EXPECT_EQ(x.byte_strides[0], 72 * 2);            // w
  EXPECT_EQ(x.byte_strides[1], 47 * 72 * 2);       // h
  EXPECT_EQ(x.byte_strides[3], 33 * 47 * 72 * 2);  // n (d has extent 1)
}

// ---- Host emulation of the kernel ----------------------------------------------------------

struct EmuCase {
  std::string name;
  Spec spec;
  gemmkit_test::Layout x_layout, w_layout, out_layout;
  int block_n = 0;  // 0: as the plan chooses
  int64_t workspace_budget = kDefaultWorkspaceBytes;
  WgmmaOTileChoice o_tile = WgmmaOTileChoice::automatic;  // with block_n: o64 or 128 channels
  int block_c = 0;    // channels per k block: 0 as the plan chooses, else 64 or 32
  bool halo = false;  // with block_n 256: the halo form (the plan must allow it)
};

// A TMA box load on the host: box `m` of the 16-bit tensor at `base` from coordinates `c`
// (innermost first), rows of m.box[0] elements in box order (dim 1 fastest), zeros out of bounds.
std::vector<double> load_box(const WgmmaConvMap& m, const unsigned char* base, DType dtype,
                             const int32_t (&c)[5]) {
  int counts[5];
  for (int d = 0; d < 5; ++d)
    counts[d] = (m.box[d] + m.element_strides[d] - 1) / m.element_strides[d];
  std::vector<double> box;
  for (int i4 = 0; i4 < counts[4]; ++i4)
    for (int i3 = 0; i3 < counts[3]; ++i3)
      for (int i2 = 0; i2 < counts[2]; ++i2)
        for (int i1 = 0; i1 < counts[1]; ++i1)
          for (int i0 = 0; i0 < counts[0]; ++i0) {
            const int index[5] = {i0, i1, i2, i3, i4};
            bool inside = true;
            int64_t offset = 0;
            for (int d = 0; d < 5; ++d) {
              const int64_t coord = int64_t{c[d]} + int64_t{index[d]} * m.element_strides[d];
              inside = inside && coord >= 0 && coord < m.dims[d];
              offset += coord * (d == 0 ? 2 : m.byte_strides[d - 1]);
            }
            box.push_back(inside ? gemmkit_test::decode_bits(dtype, base + offset) : 0.0);
          }
  return box;
}

// Emulates case ec; counts the launches whose epilogue stores by TMA into *tma_stores.
void emulate(const EmuCase& ec, int* tma_stores) {
  SCOPED_TRACE(ec.name);
  const Spec& s = ec.spec;
  gemmkit_test::HostTensor x = gemmkit_test::random_tensor(s.dtype, s.x_shape, 21, ec.x_layout);
  gemmkit_test::HostTensor w = gemmkit_test::random_tensor(s.dtype, s.w_shape, 22, ec.w_layout);
  gemmkit_test::HostTensor b = gemmkit_test::random_tensor(s.dtype, {s.w_shape[0]}, 23);
  const std::vector<int64_t> out_shape = conv_output_shape(s.x_shape, s.w_shape, s.params);
  gemmkit_test::HostTensor out = gemmkit_test::make_tensor(s.out_dtype, out_shape, ec.out_layout);
  const gemmkit_test::Reference ref =
      gemmkit_test::reference_conv(x, w, s.bias ? &b : nullptr, s.params);

  ConvProblem p = make_problem(s);
  p.x = x.view();
  p.weight = w.view();
  p.out = out.view();
  if (s.bias) p.bias = b.view();
  ASSERT_EQ(why_not_implicit_wgmma(p, kH200), "");
  const int forced_block_o =
      ec.o_tile == WgmmaOTileChoice::o64 ? kWgmmaConvNarrowBlockO : kWgmmaConvBlockO;
  const WgmmaBlockCChoice block_c = ec.block_c == kWgmmaConvBlockK ? WgmmaBlockCChoice::c64
                                    : ec.block_c == kWgmmaConvHalfBlockK
                                        ? WgmmaBlockCChoice::c32
                                        : WgmmaBlockCChoice::automatic;
  const ImplicitWgmmaPlan base = implicit_wgmma_with_halo(
      ec.block_n
          ? implicit_wgmma_plan_for(p, kH200, ec.block_n, {0, 0, 0}, 1, 0, forced_block_o,
                                    ec.block_c)
          : implicit_wgmma_plan(p, kH200, ec.workspace_budget, WgmmaScheduleChoice::automatic,
                                ec.o_tile, block_c, WgmmaHaloChoice::off),
      ec.halo ? WgmmaHaloChoice::on : WgmmaHaloChoice::off);
  ASSERT_EQ(base.halo, ec.halo);
  expect_plan_valid(p, base, ec.name);
  if (ec.block_c != 0) {
    EXPECT_EQ(base.block_c, ec.block_c);
  }
  const ConvGeometry g = normalize(p);
  const WgmmaConvMap w_map = implicit_wgmma_w_map(g, base.block_o, base.block_c);
  const auto* x_base = static_cast<const unsigned char*>(p.x.data);
  const auto* w_base = static_cast<const unsigned char*>(p.weight.data);

  std::map<int64_t, double> written;  // out storage index -> value
  // One phase plan's work items.
  const auto run_plan = [&](const ImplicitWgmmaPlan& t) {
    const WgmmaConvMap x_map = implicit_wgmma_x_map(g, t);
    const WgmmaConvMap x_tail_map = implicit_wgmma_x_tail_map(g, t);
    *tma_stores += t.tma_store ? 1 : 0;
    // Work items (a tile, or one k segment of it when split_parallel) add into their tile's
    // accumulators; every k block of a tile must be reduced exactly once.
    std::map<int64_t, std::vector<double>> tile_acc;
    std::map<int64_t, std::vector<int>> reduced;  // per tile, per k block: times reduced
    for (int64_t item = 0; item < t.tiles; ++item) {
      const WgmmaConvItem it = implicit_wgmma_item(t, item);
      ASSERT_GE(it.tile, 0);
      ASSERT_LT(it.tile, t.base_tiles);
      ASSERT_LT(it.kb_begin, it.kb_end);
      if (t.split_parallel) {
        ASSERT_LE(it.kb_end - it.kb_begin, t.segment_blocks);
      }
      const WgmmaConvTile at = implicit_wgmma_tile(t, it.tile);
      std::vector<double>& acc = tile_acc[it.tile];
      acc.resize(static_cast<std::size_t>(t.block_o * t.block_n), 0.0);
      std::vector<int>& times = reduced[it.tile];
      times.resize(static_cast<std::size_t>(t.k_blocks), 0);
      // The producer's walk (adds and compares) gives the coordinates kb decodes to.
      WgmmaConvKCursor cursor = implicit_wgmma_k_cursor(t, at, it.kb_begin);
      // The consumers' walk gives each k block's issued k16 steps.
      WgmmaConvStepCursor step_cursor = implicit_wgmma_step_cursor(t, it.kb_begin);
      for (int32_t kb = it.kb_begin; kb < it.kb_end; ++kb) {
        ++times[static_cast<std::size_t>(kb)];
        const WgmmaConvCoords c = implicit_wgmma_coords(t, at, kb);
        for (int i = 0; i < 5; ++i) {
          ASSERT_EQ(cursor.coords.x[i], c.x[i]) << "k block " << kb << ", x dim " << i;
          ASSERT_EQ(cursor.coords.w[i], c.w[i]) << "k block " << kb << ", w dim " << i;
        }
        ASSERT_EQ(step_cursor.place.c_block, cursor.place.c_block) << "k block " << kb;
        implicit_wgmma_k_next(t, cursor);
        const int steps = step_cursor.steps(t);
        step_cursor.next(t);
        const int issued = steps * 16;
        const int row = t.block_c;  // a box row: the k block's channels
        const std::vector<double> wb = load_box(w_map, w_base, s.dtype, c.w);
        const std::vector<double> xb = load_box(x_map, x_base, s.dtype, c.x);
        ASSERT_EQ(wb.size(), static_cast<std::size_t>(t.block_o * row));
        ASSERT_EQ(xb.size(), static_cast<std::size_t>(t.block_n * row));
        if (t.halo) {
          // The halo form's operand: the stage's row (the box at the coordinates of its first k
          // block, then the tail box past it), read from position tap_w * kdil_w.
          const int tap_w = kb % kWgmmaConvHaloTapsW;
          ASSERT_EQ(implicit_wgmma_k_place(t, kb).tap[kDims - 1], tap_w) << "k block " << kb;
          WgmmaConvCoords first = implicit_wgmma_coords(t, at, kb - tap_w);
          std::vector<double> halo_row = load_box(x_map, x_base, s.dtype, first.x);
          first.x[1] += t.block_n;
          const std::vector<double> tail = load_box(x_tail_map, x_base, s.dtype, first.x);
          halo_row.insert(halo_row.end(), tail.begin(), tail.end());
          ASSERT_LE(halo_row.size(), static_cast<std::size_t>(kWgmmaConvHaloRows * row));
          const std::size_t shift = static_cast<std::size_t>(tap_w * t.kdil[kDims - 1] * row);
          ASSERT_LE(shift + xb.size(), halo_row.size());
          for (std::size_t e = 0; e < xb.size(); ++e) {
            ASSERT_EQ(halo_row[shift + e], xb[e]) << "k block " << kb << ", row element " << e;
          }
        }
        // The skipped steps' weights are TMA's zero fill past c / groups.
        for (int o = 0; o < t.block_o; ++o) {
          for (int e = issued; e < row; ++e) {
            ASSERT_EQ(wb[static_cast<std::size_t>(o * row + e)], 0.0)
                << "k block " << kb << ", weight row " << o << ", channel " << e;
          }
        }
        for (int o = 0; o < t.block_o; ++o) {
          for (int col = 0; col < t.block_n; ++col) {
            double sum = 0;
            for (int e = 0; e < issued; ++e) {
              sum += wb[static_cast<std::size_t>(o * row + e)] *
                     xb[static_cast<std::size_t>(col * row + e)];
            }
            acc[static_cast<std::size_t>(o * t.block_n + col)] += sum;
          }
        }
      }
    }
    ASSERT_EQ(static_cast<int64_t>(tile_acc.size()), t.base_tiles);
    for (const auto& [tile, times] : reduced) {
      for (const int n : times) ASSERT_EQ(n, 1) << "tile " << tile << ": a k block reduced " << n;
    }
    for (const auto& [tile, acc] : tile_acc) {
      const WgmmaConvTile at = implicit_wgmma_tile(t, tile);
      if (t.tma_store) {
        // TMA stores of the staged chunks through the out map: box element (channel i0, i1, i2,
        // i3) of chunk q of consumer cw (channel half h, its columns from first_column) is
        // accumulator row 64 h + i0, column 64 q + the element's place in box order; what lies
        // outside the map is dropped.
        const WgmmaConvMap m = implicit_wgmma_out_map(t, p.out_channels);
        for (int cw = 0; cw < 2; ++cw) {
          const WgmmaConvConsumerPart part = implicit_wgmma_consumer_part(t, cw);
          if (at.o_tile * t.block_o + 64 * part.half >= t.opg) continue;  // past the group
          const int first = part.first_column / kWgmmaConvStoreChunk;
          for (int q = first; q < first + part.columns / kWgmmaConvStoreChunk; ++q) {
            int32_t c[5];
            implicit_wgmma_store_coords(t, at, part.half, q, c);
            for (int i3 = 0; i3 < m.box[3]; ++i3)
              for (int i2 = 0; i2 < m.box[2]; ++i2)
                for (int i1 = 0; i1 < m.box[1]; ++i1)
                  for (int i0 = 0; i0 < m.box[0]; ++i0) {
                    const int64_t coord[5] = {int64_t{c[0]} + i0, int64_t{c[1]} + i1,
                                              int64_t{c[2]} + i2, int64_t{c[3]} + i3, c[4]};
                    bool inside = true;
                    int64_t bytes = 0;
                    for (int d = 0; d < 5; ++d) {
                      inside = inside && coord[d] >= 0 && coord[d] < m.dims[d];
                      bytes += coord[d] * (d == 0 ? 2 : m.byte_strides[d - 1]);
                    }
                    if (!inside) continue;
                    const int row = 64 * part.half + i0;
                    const int col = q * kWgmmaConvStoreChunk + i1 + m.box[1] * (i2 + m.box[2] * i3);
                    double v = acc[static_cast<std::size_t>(row * t.block_n + col)];
                    if (t.has_bias) v += b.at({coord[0]});
                    const int64_t index = out.offset + t.out_base + bytes / 2;
                    ASSERT_EQ(written.count(index), 0u) << "output written twice";
                    written[index] = v;
                  }
          }
        }
        continue;
      }
      // The per-element epilogue (and the fold kernel of split_parallel plans).
      for (int col = 0; col < t.block_n; ++col) {
        int32_t position[kDims];
        if (!implicit_wgmma_position(t, at, col, position)) continue;
        const int64_t at_out =
            implicit_wgmma_tile_out_base(t, at) + implicit_wgmma_position_offset(t, position);
        for (int o = 0; o < t.block_o; ++o) {
          const int64_t row = at.o_tile * t.block_o + o;
          if (row >= t.opg) continue;
          double v = acc[static_cast<std::size_t>(o * t.block_n + col)];
          if (t.has_bias) v += b.at({at.group * t.opg + row});
          const int64_t index = out.offset + at_out + row * t.out_stride[kDims + 1];
          ASSERT_EQ(written.count(index), 0u) << "output written twice";
          written[index] = v;
        }
      }
    }
  };
  // The launches as the launcher makes them: groups of up to kWgmmaConvMaxMergedPhases stride
  // phases of one epilogue sharing a grid, whose launch items map onto each phase's items once
  // and in order; every phase with outputs in exactly one group.
  const std::vector<ImplicitWgmmaPlan> phases = implicit_wgmma_phase_plans(p, base);
  std::vector<int> launched(phases.size(), 0);
  for (const WgmmaConvLaunchGroup& group : implicit_wgmma_launch_groups(phases, base)) {
    const int plans = group.end - group.begin;
    ASSERT_GE(plans, 1);
    ASSERT_LE(plans, kWgmmaConvMaxMergedPhases);
    ASSERT_GE(group.grid, 1);
    ASSERT_LE(group.grid, std::min(group.items, base.grid));
    int64_t item_end[kWgmmaConvMaxMergedPhases] = {};
    int64_t total = 0;
    for (int j = 0; j < plans; ++j) {
      const ImplicitWgmmaPlan& t = phases[static_cast<std::size_t>(group.begin + j)];
      ASSERT_GT(t.tiles, 0);
      ASSERT_EQ(t.tma_store, phases[static_cast<std::size_t>(group.begin)].tma_store);
      ASSERT_EQ(t.block_n, base.block_n);
      total += t.tiles;
      item_end[j] = total;
    }
    ASSERT_EQ(total, group.items);
    std::vector<int64_t> next(static_cast<std::size_t>(plans), 0);
    for (int64_t item = 0; item < group.items; ++item) {
      const WgmmaConvLaunchItem at = implicit_wgmma_launch_item(item_end, plans, item);
      ASSERT_GE(at.plan, 0);
      ASSERT_LT(at.plan, plans);
      ASSERT_EQ(at.item, next[static_cast<std::size_t>(at.plan)]++);
    }
    for (int j = 0; j < plans; ++j) {
      const std::size_t i = static_cast<std::size_t>(group.begin + j);
      ASSERT_EQ(next[static_cast<std::size_t>(j)], phases[i].tiles);
      ++launched[i];
      run_plan(phases[i]);
    }
  }
  for (std::size_t i = 0; i < phases.size(); ++i) {
    EXPECT_EQ(launched[i], phases[i].tiles > 0 ? 1 : 0) << "phase " << i;
  }
  gemmkit_test::expect_emulated_outputs(written, out, ref);
}

std::vector<EmuCase> emulation_cases() {
  std::vector<EmuCase> v;
  const auto add = [&v](const std::string& name, std::vector<int64_t> xs, std::vector<int64_t> ws,
                        const std::function<void(EmuCase&)>& tweak = nullptr) {
    gemmkit_test::add_emu_case(v, name, std::move(xs), std::move(ws), tweak);
  };
  add("2d 3x3 pad 1 bias, position and channel tails", {2, 9, 11, 16}, {136, 3, 3, 16},
      [](EmuCase& c) {
        c.spec.params.padding_lo = {1};
        c.spec.params.padding_hi = {1};
        c.spec.bias = true;
      });
  add("1d stride 3 asymmetric pad, c 72 (two channel blocks), f32 out", {2, 41, 72}, {12, 5, 72},
      [](EmuCase& c) {
        c.spec.out_dtype = DType::f32;
        c.spec.params.stride = {3};
        c.spec.params.padding_lo = {3};
        c.spec.params.padding_hi = {1};
        c.block_n = 128;
      });
  add("2d negative padding, kernel dilation 2, stride 2x1", {1, 13, 12, 24}, {10, 3, 2, 24},
      [](EmuCase& c) {
        c.spec.params.padding_lo = {-1, 2};
        c.spec.params.padding_hi = {2, -1};
        c.spec.params.kernel_dilation = {2};
        c.spec.params.stride = {2, 1};
      });
  add("2d groups 2, c/g 64, o/g 64 (a consumer's channels past the group)", {1, 9, 10, 128},
      {128, 3, 3, 64}, [](EmuCase& c) {
        c.spec.params.groups = 2;
        c.spec.params.padding_lo = {1};
        c.spec.params.padding_hi = {1};
        c.spec.bias = true;
      });
  add("2d 1024-wide rows, o 72 (a channel tail in the second store box)", {1, 3, 300, 64},
      {72, 1, 3, 64}, [](EmuCase& c) {
        c.spec.params.padding_lo = {0, 1};
        c.spec.params.padding_hi = {0, 1};
      });
  add("k split in 4 segments, parallel (partials and the fold), bias", {1, 8, 8, 256},
      {64, 3, 3, 256}, [](EmuCase& c) {
        c.spec.params.padding_lo = {1};
        c.spec.params.padding_hi = {1};
        c.spec.bias = true;
      });
  add("k split in 4 segments, chained (no workspace), 16-bit out by TMA", {1, 8, 8, 256},
      {64, 3, 3, 256}, [](EmuCase& c) {
        c.spec.params.padding_lo = {1};
        c.spec.params.padding_hi = {1};
        c.workspace_budget = 0;
      });
  add("3d stride 1x2x1, groups 2, c/g 64", {1, 4, 7, 5, 128}, {8, 3, 2, 3, 64}, [](EmuCase& c) {
    c.spec.params.groups = 2;
    c.spec.params.stride = {1, 2, 1};
    c.spec.params.padding_lo = {1};
    c.spec.params.padding_hi = {1};
  });
  add("flip, odd sizes", {1, 7, 9, 8}, {9, 3, 3, 8}, [](EmuCase& c) {
    c.spec.params.flip = true;
    c.spec.params.padding_lo = {2, 0};
    c.spec.params.padding_hi = {0, 1};
  });
  add("strided x, w and out views", {2, 6, 7, 16}, {20, 3, 3, 16}, [](EmuCase& c) {
    c.spec.params.padding_lo = {1};
    c.spec.params.padding_hi = {1};
    c.x_layout.pad = {0, 1, 3, 8};
    c.x_layout.offset = 8;
    c.w_layout.pad = {0, 0, 0, 8};
    c.out_layout.pad = {0, 1, 2, 3};
    c.out_layout.offset = 5;
    c.spec.bias = true;
  });
  add("out channels not innermost", {1, 5, 6, 8}, {16, 3, 3, 8}, [](EmuCase& c) {
    c.out_layout.order = {0, 3, 1, 2};
  });
  add("transposed k4 s2 p1 (4 stride phases of 2x2 taps), bias", {2, 5, 6, 16}, {24, 4, 4, 16},
      [](EmuCase& c) {
        c.spec.params = conv_transpose_params({4, 4}, {2, 2}, {1, 1}, {0, 0}, {1, 1}, 1);
        c.spec.bias = true;
      });
  add("transposed k3 s2 output padding 1 (phases of 2 and 1 taps)", {1, 6, 5, 8}, {12, 3, 3, 8},
      [](EmuCase& c) {
        c.spec.params = conv_transpose_params({3, 3}, {2, 2}, {1, 1}, {1, 1}, {1, 1}, 1);
      });
  add("transposed 1-D k5 s3, groups 2 (c/g 64)", {2, 9, 128}, {16, 5, 64},
      [](EmuCase& c) { c.spec.params = conv_transpose_params({5}, {3}, {2}, {1}, {1}, 2); });
  add("transposed 3-D k2 s2", {1, 3, 4, 3, 8}, {8, 2, 2, 2, 8}, [](EmuCase& c) {
    c.spec.params = conv_transpose_params({2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, 1);
  });
  add("o 12 in 128-channel tiles (forced), bias", {2, 9, 11, 16}, {12, 3, 3, 16}, [](EmuCase& c) {
    c.spec.params.padding_lo = {1};
    c.spec.params.padding_hi = {1};
    c.spec.bias = true;
    c.o_tile = WgmmaOTileChoice::o128;
  });
  add("narrow-o forced at o 136 (3 channel tiles, a tail), bias, 16-bit out by TMA", {2, 9, 11, 16},
      {136, 3, 3, 16}, [](EmuCase& c) {
        c.spec.params.padding_lo = {1};
        c.spec.params.padding_hi = {1};
        c.spec.bias = true;
        c.o_tile = WgmmaOTileChoice::o64;
      });
  add("narrow-o forced, 256 positions, o 100, f32 out, stride 2", {1, 40, 37, 64}, {100, 3, 3, 64},
      [](EmuCase& c) {
        c.spec.out_dtype = DType::f32;
        c.spec.params.stride = {2};
        c.spec.params.padding_lo = {1};
        c.spec.params.padding_hi = {0};
        c.block_n = 256;
        c.o_tile = WgmmaOTileChoice::o64;
      });
  add("narrow-o at o 64 (auto), 128 positions, 3d", {1, 3, 10, 13, 72}, {64, 3, 3, 3, 72},
      [](EmuCase& c) {
        c.spec.params.padding_lo = {1};
        c.spec.params.padding_hi = {1};
        c.block_n = 128;
        c.o_tile = WgmmaOTileChoice::o64;
      });
  add("narrow-o, groups 2 with o/g 96 (a channel tile past the group), f32 out", {1, 9, 10, 128},
      {192, 3, 3, 64}, [](EmuCase& c) {
        c.spec.params.groups = 2;
        c.spec.params.padding_lo = {1};
        c.spec.params.padding_hi = {1};
        c.spec.out_dtype = DType::f32;
        c.o_tile = WgmmaOTileChoice::o64;
      });
  add("c 32 in 32-channel blocks (auto), bias, 16-bit out by TMA", {1, 9, 11, 32}, {136, 3, 3, 32},
      [](EmuCase& c) {
        c.spec.params.padding_lo = {1};
        c.spec.params.padding_hi = {1};
        c.spec.bias = true;
      });
  add("c 96 in three 32-channel blocks (auto), 3d", {1, 3, 6, 7, 96}, {40, 3, 3, 3, 96},
      [](EmuCase& c) {
        c.spec.params.padding_lo = {1};
        c.spec.params.padding_hi = {1};
      });
  add("c 72 in 64-channel blocks (forced): a block of 64 and one of 8", {2, 9, 10, 72},
      {24, 3, 3, 72}, [](EmuCase& c) {
        c.spec.params.padding_lo = {1};
        c.spec.params.padding_hi = {1};
        c.block_c = 64;
      });
  add("c 16 in 64-channel blocks (forced), narrow-o, 256 positions", {1, 17, 19, 16},
      {48, 3, 3, 16}, [](EmuCase& c) {
        c.block_n = 256;
        c.o_tile = WgmmaOTileChoice::o64;
        c.block_c = 64;
      });
  add("c 128 in 32-channel blocks (forced), k split in segments, f32 out", {1, 8, 8, 128},
      {64, 3, 3, 128}, [](EmuCase& c) {
        c.spec.params.padding_lo = {1};
        c.spec.params.padding_hi = {1};
        c.spec.out_dtype = DType::f32;
        c.block_c = 32;
      });
  add("halo form: 3x3, kernel dilation 2 along w, bias, c 112 (a last block of 48)",
      {1, 3, 256, 112}, {24, 3, 3, 112}, [](EmuCase& c) {
        c.spec.params.kernel_dilation = {1, 2};
        c.spec.params.padding_lo = {1, 2};
        c.spec.params.padding_hi = {1, 2};
        c.spec.bias = true;
        c.block_n = 256;
        c.halo = true;
      });
  add("halo form: 3x3 pad 1, one row of 300 (tiles past the row's end), groups 2", {1, 1, 300, 128},
      {256, 3, 3, 64}, [](EmuCase& c) {
        c.spec.params.groups = 2;
        c.spec.params.padding_lo = {1};
        c.spec.params.padding_hi = {1};
        c.block_n = 256;
        c.halo = true;
      });
  add("transposed k4 s2, c 32 (32-channel blocks over 4 stride phases)", {1, 5, 6, 32},
      {24, 4, 4, 32}, [](EmuCase& c) {
        c.spec.params = conv_transpose_params({4, 4}, {2, 2}, {1, 1}, {0, 0}, {1, 1}, 1);
      });
  add("input dilation without flip, kernel dilation 3, asymmetric padding", {1, 7, 6, 8},
      {9, 3, 2, 8}, [](EmuCase& c) {
        c.spec.params.input_dilation = {2, 2};
        c.spec.params.kernel_dilation = {3, 1};
        c.spec.params.padding_lo = {2, 1};
        c.spec.params.padding_hi = {1, 0};
      });
  return v;
}

TEST(ConvImplicitWgmma, EmulatedKernelMatchesTheDefinition) {
  int tma_stores = 0;
  for (const EmuCase& c : emulation_cases()) emulate(c, &tma_stores);
  // Both epilogues are exercised: 16-bit outs with TMA-able strides, and the others.
  EXPECT_GE(tma_stores, 8);
}

TEST(ConvImplicitWgmma, ReductionSegmentsFollowOneImage) {
  // FLUX.2 VAE mid layer at 256x256 (32 x 32 positions, 512 -> 512): 32 tiles of 128 positions
  // per image fill a quarter of the H200, K = 72 blocks: 4 segments of 18, run in parallel.
  const Spec mid = conv_spec({1, 32, 32, 512}, {512, 3, 3, 512}, 1);
  const ImplicitWgmmaPlan one =
      implicit_wgmma_plan(make_problem(mid), kH200, kDefaultWorkspaceBytes);
  EXPECT_EQ(one.k_segments, 4) << to_string(one);
  EXPECT_EQ(one.segment_blocks, 18);
  EXPECT_TRUE(one.split_parallel);
  EXPECT_EQ(one.tiles, 128);
  EXPECT_NE(to_string(one).find("k_segments=4x18 split=parallel"), std::string::npos);
  // The same segments for a batch of 8 (bits of an image independent of the batch), chained in
  // the CTA once the tiles fill the machine; and without workspace.
  Spec batch = mid;
  batch.x_shape[0] = 8;
  const ImplicitWgmmaPlan eight =
      implicit_wgmma_plan(make_problem(batch), kH200, kDefaultWorkspaceBytes);
  EXPECT_EQ(eight.k_segments, 4);
  EXPECT_EQ(eight.segment_blocks, 18);
  EXPECT_FALSE(eight.split_parallel);
  EXPECT_EQ(eight.tiles, eight.base_tiles);
  const ImplicitWgmmaPlan tight = implicit_wgmma_plan(make_problem(mid), kH200, 1 << 20);
  EXPECT_EQ(tight.k_segments, 4);
  EXPECT_FALSE(tight.split_parallel);
  for (const ImplicitWgmmaPlan& t : {one, eight, tight}) {
    expect_plan_valid(make_problem(t.batch == 8 ? batch : mid), t, "segments");
  }
  // Layers whose image fills the machine, or with short K, keep one chain.
  EXPECT_EQ(implicit_wgmma_segments(
                make_problem(conv_spec({1, 128, 128, 512}, {512, 3, 3, 512}, 1)), kH200),
            1);
  EXPECT_EQ(
      implicit_wgmma_segments(make_problem(conv_spec({1, 8, 8, 64}, {64, 3, 3, 64}, 1)), kH200), 1);
  EXPECT_EQ(implicit_wgmma_segments_for(1, 100, 132), 8);   // capped
  EXPECT_EQ(implicit_wgmma_segments_for(40, 100, 132), 3);  // by the machine
  EXPECT_EQ(implicit_wgmma_segments_for(10, 20, 132), 2);   // by K
  EXPECT_EQ(implicit_wgmma_segments_for(70, 100, 132), 1);  // over half the machine
  EXPECT_EQ(implicit_wgmma_segments_for(40, 30, 132), 3);   // 30 blocks: segments of 10
}

TEST(ConvImplicitWgmma, ChannelBlocksOf32WhereTheLastBlockWouldBeHalfEmpty) {
  // 32-channel blocks where a 64-channel block would carry 32 channels or fewer, below 128.
  for (const int64_t cpg : {8, 16, 24, 32, 72, 96}) {
    EXPECT_EQ(implicit_wgmma_auto_block_c(cpg), kWgmmaConvHalfBlockK) << cpg;
  }
  for (const int64_t cpg : {40, 48, 64, 112, 128, 160, 256, 512}) {
    EXPECT_EQ(implicit_wgmma_auto_block_c(cpg), kWgmmaConvBlockK) << cpg;
  }
  // FLUX.2 VAE conv_in (c = 32 -> 512): one 32-channel block per tap, each box half the bytes.
  const ImplicitWgmmaPlan conv_in =
      implicit_wgmma_plan(make_problem(conv_spec({1, 256, 256, 32}, {512, 3, 3, 32}, 1)), kH200,
                          kDefaultWorkspaceBytes);
  EXPECT_EQ(conv_in.block_c, 32);
  EXPECT_EQ(conv_in.c_blocks, 1);
  EXPECT_EQ(conv_in.k_blocks, 9);
  EXPECT_EQ(conv_in.last_block_steps, 2);
  EXPECT_FALSE(implicit_wgmma_full_k_blocks(conv_in));
  EXPECT_NE(to_string(conv_in).find("x32 box="), std::string::npos) << to_string(conv_in);
  // wan-vae (c = o = 96, 3-D): three full blocks a tap; forced 64: two, the second half zeros.
  const ConvProblem wan = make_problem(conv_spec({1, 5, 128, 128, 96}, {96, 3, 3, 3, 96}, 1));
  const ImplicitWgmmaPlan half = implicit_wgmma_plan(wan, kH200, kDefaultWorkspaceBytes);
  EXPECT_EQ(half.block_c, 32);
  EXPECT_EQ(half.k_blocks, 27 * 3);
  EXPECT_EQ(implicit_wgmma_issued_channels(half), 96);
  const ImplicitWgmmaPlan full =
      implicit_wgmma_plan(wan, kH200, kDefaultWorkspaceBytes, WgmmaScheduleChoice::automatic,
                          WgmmaOTileChoice::automatic, WgmmaBlockCChoice::c64);
  EXPECT_EQ(full.block_c, 64);
  EXPECT_EQ(full.k_blocks, 27 * 2);
  EXPECT_EQ(full.last_block_steps, 2);
  EXPECT_EQ(implicit_wgmma_issued_channels(full), 96);
  EXPECT_FALSE(implicit_wgmma_full_k_blocks(full));
  // The environment's names.
  expect_choice_setting(&ConvRequestSettings::env_wgmma_block_c, &ConvRequest::wgmma_block_c,
                        "GEMMKIT_CONV_WGMMA_BLOCK_C",
                        {{"32", WgmmaBlockCChoice::c32}, {"64", WgmmaBlockCChoice::c64}}, "16",
                        "auto, 64, 32");
}

// The k16 steps every output's chain runs, in order, as (taps, first channel): the same at both
// channel widths (so the same bits), by the decoded places and by the stepped ones.
TEST(ConvImplicitWgmma, ChannelWidthsRunOneOrderOfK16Steps) {
  for (const int64_t cpg : {16, 32, 40, 64, 72, 96, 112, 128, 160, 200, 256}) {
    for (const std::vector<int64_t>& kernel :
         {std::vector<int64_t>{3, 3}, std::vector<int64_t>{2, 5}, std::vector<int64_t>{1, 1},
          std::vector<int64_t>{3, 1, 2}}) {
      std::vector<int64_t> xs{1}, ws{8};
      for (const int64_t k : kernel) {
        xs.push_back(9);
        ws.push_back(k);
      }
      xs.push_back(cpg);
      ws.push_back(cpg);
      const ConvProblem p = make_problem(conv_spec(xs, ws));
      std::vector<std::vector<int64_t>> runs;
      for (const int block_c : {kWgmmaConvBlockK, kWgmmaConvHalfBlockK}) {
        const ImplicitWgmmaPlan t =
            implicit_wgmma_plan_for(p, kH200, 128, {0, 0, 0}, 1, 0, kWgmmaConvBlockO, block_c);
        std::vector<int64_t> steps;
        WgmmaConvStepCursor stepped = implicit_wgmma_step_cursor(t, 0);
        for (int32_t kb = 0; kb < t.k_blocks; ++kb) {
          const WgmmaConvKPlace k = implicit_wgmma_k_place(t, kb);
          ASSERT_EQ(stepped.place.c_block, k.c_block) << "cpg " << cpg << " kb " << kb;
          ASSERT_EQ(stepped.place.half, k.half) << "cpg " << cpg << " kb " << kb;
          for (int d = 0; d < kDims; ++d) ASSERT_EQ(stepped.place.tap[d], k.tap[d]);
          for (int j = 0; j < implicit_wgmma_block_steps(t, k.c_block); ++j) {
            steps.push_back(((k.tap[0] * 16 + k.tap[1]) * 16 + k.tap[2]) * 4096 +
                            int64_t{k.c_block} * t.block_c + 16 * j);
          }
          stepped.next(t);
        }
        // Past the last k block the walk wraps to the first.
        EXPECT_EQ(stepped.place.c_block, 0);
        runs.push_back(steps);
      }
      EXPECT_EQ(runs[0], runs[1]) << "cpg " << cpg << ", " << kernel.size() << "-D kernel";
      EXPECT_EQ(static_cast<int64_t>(runs[0].size()),
                ceil_div(cpg, 16) * ws[1] * ws[2] * (kernel.size() > 2 ? ws[3] : 1));
    }
  }
}

TEST(ConvImplicitWgmma, HaloFormWhereTheTapsAlongWShareARow) {
  const auto plan = [](const Spec& s, WgmmaHaloChoice halo = WgmmaHaloChoice::automatic) {
    return implicit_wgmma_plan(make_problem(s), kH200, kDefaultWorkspaceBytes,
                               WgmmaScheduleChoice::automatic, WgmmaOTileChoice::automatic,
                               WgmmaBlockCChoice::automatic, halo);
  };
  // The VAE's large 3x3 layers: tiles along one output row, the halo form under auto and on.
  const Spec vae = conv_spec({1, 1024, 1024, 128}, {128, 3, 3, 128}, 1);
  const ImplicitWgmmaPlan t = plan(vae);
  EXPECT_TRUE(t.halo) << to_string(t);
  EXPECT_EQ(t.stages, kWgmmaConvHaloStages);
  EXPECT_EQ(t.smem_bytes, implicit_wgmma_halo_smem_bytes());
  EXPECT_LE(t.smem_bytes, kH200.shared_per_block_optin);
  EXPECT_NE(to_string(t).find(" halo"), std::string::npos) << to_string(t);
  EXPECT_TRUE(plan(vae, WgmmaHaloChoice::on).halo);
  const ImplicitWgmmaPlan off = plan(vae, WgmmaHaloChoice::off);
  EXPECT_FALSE(off.halo);
  EXPECT_EQ(off.stages, implicit_wgmma_stages(256));
  EXPECT_EQ(to_string(off).find(" halo"), std::string::npos) << to_string(off);
  // The same tiles and grid either way.
  EXPECT_EQ(off.tiles, t.tiles);
  EXPECT_EQ(off.grid, t.grid);
  EXPECT_TRUE(plan(conv_spec({1, 512, 512, 256}, {128, 3, 3, 256}, 1)).halo);
  // Where it cannot: boxes of several rows (128 x 128 outputs), stride 2, 5 taps along w, 1x1,
  // kernel dilation 5 along w (a row of 256 + 10), forced 128-position tiles.
  EXPECT_FALSE(plan(conv_spec({1, 128, 128, 512}, {512, 3, 3, 512}, 1)).halo);
  EXPECT_FALSE(plan(conv_spec({1, 1024, 1024, 128}, {128, 3, 3, 128}, 1, 2)).halo);
  EXPECT_FALSE(plan(conv_spec({1, 1024, 1024, 128}, {128, 5, 5, 128}, 2)).halo);
  EXPECT_FALSE(plan(conv_spec({1, 1024, 1024, 128}, {128, 1, 1, 128})).halo);
  Spec dilated = conv_spec({1, 1024, 1024, 128}, {128, 3, 3, 128});
  dilated.params.kernel_dilation = {1, 5};
  dilated.params.padding_lo = dilated.params.padding_hi = {1, 5};
  EXPECT_FALSE(plan(dilated).halo);
  dilated.params.kernel_dilation = {1, 4};
  dilated.params.padding_lo = dilated.params.padding_hi = {1, 4};
  EXPECT_TRUE(plan(dilated).halo);
  ImplicitWgmmaPlan narrow = implicit_wgmma_plan_for(make_problem(vae), kH200, 128);
  EXPECT_FALSE(implicit_wgmma_with_halo(narrow, WgmmaHaloChoice::on).halo);
  // The k blocks of a stage: its three taps along w, one channel block.
  const ConvGeometry g = normalize(make_problem(vae));
  const WgmmaConvTile tile = implicit_wgmma_tile(t, 5);
  for (int32_t kb = 0; kb < t.k_blocks; ++kb) {
    const WgmmaConvKPlace k = implicit_wgmma_k_cursor(t, tile, kb).place;
    EXPECT_EQ(k.tap[2], kb % 3);
    EXPECT_EQ(k.c_block, kb / 3 % t.c_blocks);
    EXPECT_EQ(k.tap[1], kb / 3 / t.c_blocks);
    EXPECT_EQ(implicit_wgmma_step_cursor(t, kb).place.c_block, k.c_block);
  }
  // The tail map: the row's last 2 * kdil_w positions.
  EXPECT_EQ(implicit_wgmma_x_tail_map(g, t).box[1], 2);
  EXPECT_EQ(implicit_wgmma_x_map(g, t).box[1], 256);
  // The environment's names.
  expect_choice_setting(
      &ConvRequestSettings::env_wgmma_halo, &ConvRequest::wgmma_halo, "GEMMKIT_CONV_WGMMA_HALO",
      {{"on", WgmmaHaloChoice::on}, {"off", WgmmaHaloChoice::off}}, "1", "auto, on, off");
}

TEST(ConvImplicitWgmma, SelectedWhereItAppliesAndPays) {
  const Spec s = conv_spec({1, 64, 64, 128}, {128, 3, 3, 128}, 1);
  ConvRequest r = request_of("implicit", kDefaultWorkspaceBytes);
  const ConvConfig c = select_conv_config(make_problem(s), kH200, r);
  EXPECT_EQ(c.path, ConvPath::implicit_wgmma) << to_string(c);
  EXPECT_NE(c.reason.find("implicit_wgmma"), std::string::npos) << c.reason;
  expect_within_limits(c);
  // Own paths under auto (cuDNN out): the same kernel.
  ConvRequest own = request_of("", kDefaultWorkspaceBytes);
  own.cudnn_in_auto = false;
  EXPECT_EQ(select_conv_config(make_problem(s), kH200, own).path, ConvPath::implicit_wgmma);
  // c = 32 and c = 16 (a k block of 64 channels, its steps past c skipped) run faster on it than
  // on the mma.sync kernel, which packs taps (c <= 8 goes to the small-c kernel).
  for (const int64_t channels : {32, 16}) {
    const Spec narrow_c = conv_spec({1, 128, 128, channels}, {512, 3, 3, channels}, 1);
    const ConvConfig n = select_conv_config(make_problem(narrow_c), kH200, own);
    EXPECT_EQ(n.path, ConvPath::implicit_wgmma) << "c " << channels << ": " << to_string(n);
  }
  const Spec narrow = conv_spec({1, 128, 128, 16}, {512, 3, 3, 16}, 1);
  r.implicit = ImplicitChoice::wgmma;
  EXPECT_EQ(select_conv_config(make_problem(narrow), kH200, r).path, ConvPath::implicit_wgmma);
  r.implicit = ImplicitChoice::mma;
  EXPECT_EQ(select_conv_config(make_problem(narrow), kH200, r).path, ConvPath::implicit_gemm);
  r.implicit = ImplicitChoice::mma;
  EXPECT_EQ(select_conv_config(make_problem(s), kH200, r).path, ConvPath::implicit_gemm);
  // Transposed convolutions run as stride phases under auto too; where it does not apply (another
  // GPU), the mma.sync kernel serves.
  r.implicit = ImplicitChoice::automatic;
  Spec transposed = conv_spec({1, 32, 32, 64}, {64, 4, 4, 64});
  transposed.params = conv_transpose_params({4, 4}, {2, 2}, {1, 1}, {0, 0}, {1, 1}, 1);
  const ConvConfig phased = select_conv_config(make_problem(transposed), kH200, r);
  EXPECT_EQ(phased.path, ConvPath::implicit_wgmma) << to_string(phased);
  EXPECT_NE(phased.reason.find("stride_phases=4"), std::string::npos) << phased.reason;
  r.implicit = ImplicitChoice::mma;
  EXPECT_EQ(select_conv_config(make_problem(transposed), kH200, r).path, ConvPath::implicit_gemm);
  r.implicit = ImplicitChoice::automatic;
  DeviceDescription ampere;
  ampere.sm_major = 8;
  EXPECT_EQ(select_conv_config(make_problem(s), ampere, r).path, ConvPath::implicit_gemm);
  // GEMMKIT_CONV_IMPLICIT is parsed once, into the request; unknown values name the rule.
  ConvRequestSettings settings;
  settings.env_implicit = "wgmma";
  EXPECT_EQ(resolve_request(settings).implicit, ImplicitChoice::wgmma);
  settings.env_implicit = "fast";
  expect_setting_error(settings, "GEMMKIT_CONV_IMPLICIT", "fast", "auto, wgmma, mma");
}

// A transposed convolution's stride phases share persistent grids: conv-models'
// convtranspose2d-k4s2-256 (4 phases of 64 tiles of 256 positions) in one launch on the whole
// machine, where alone each phase would fill under half of it; a 3-D one (8 phases) in two.
TEST(ConvImplicitWgmma, StridePhasesShareTheGrid) {
  Spec t2 = conv_spec({1, 128, 128, 256}, {128, 4, 4, 256});
  t2.params = conv_transpose_params({4, 4}, {2, 2}, {1, 1}, {0, 0}, {1, 1}, 1);
  const ConvProblem p2 = make_problem(t2);
  const ImplicitWgmmaPlan base = implicit_wgmma_plan(p2, kH200, kDefaultWorkspaceBytes);
  EXPECT_EQ(implicit_wgmma_phase_count(base), 4);
  EXPECT_EQ(base.block_n, 256);  // 256 tiles in 2 waves beat 512 of 128 positions in 4
  EXPECT_EQ(base.tiles, 64);
  EXPECT_EQ(base.grid, kH200.multiprocessors);
  const std::vector<ImplicitWgmmaPlan> phases = implicit_wgmma_phase_plans(p2, base);
  ASSERT_EQ(phases.size(), 4u);
  EXPECT_EQ(implicit_wgmma_total_tiles(phases), 256);
  const std::vector<WgmmaConvLaunchGroup> groups = implicit_wgmma_launch_groups(phases, base);
  ASSERT_EQ(groups.size(), 1u);
  EXPECT_EQ(groups[0].begin, 0);
  EXPECT_EQ(groups[0].end, 4);
  EXPECT_EQ(groups[0].items, 256);
  EXPECT_EQ(groups[0].grid, kH200.multiprocessors);
  // A caller's smaller grid holds for every launch; the ping-pong schedule launches each phase.
  ImplicitWgmmaPlan capped = base;
  capped.grid = 3;
  for (const WgmmaConvLaunchGroup& g : implicit_wgmma_launch_groups(phases, capped)) {
    EXPECT_EQ(g.grid, 3);
  }
  ImplicitWgmmaPlan pingpong = base;
  pingpong.pingpong = true;
  EXPECT_EQ(implicit_wgmma_launch_groups(phases, pingpong).size(), 4u);

  Spec t3 = conv_spec({1, 4, 6, 6, 64}, {64, 2, 2, 2, 64});
  t3.params = conv_transpose_params({2, 2, 2}, {2, 2, 2}, {0, 0, 0}, {0, 0, 0}, {1, 1, 1}, 1);
  const ConvProblem p3 = make_problem(t3);
  const ImplicitWgmmaPlan base3 = implicit_wgmma_plan(p3, kH200, kDefaultWorkspaceBytes);
  const std::vector<ImplicitWgmmaPlan> phases3 = implicit_wgmma_phase_plans(p3, base3);
  ASSERT_EQ(phases3.size(), 8u);
  const std::vector<WgmmaConvLaunchGroup> groups3 = implicit_wgmma_launch_groups(phases3, base3);
  ASSERT_EQ(groups3.size(), 2u);
  EXPECT_EQ(groups3[0].end, 4);
  EXPECT_EQ(groups3[1].begin, 4);
  EXPECT_EQ(groups3[1].end, 8);

  // Launch items onto plans: running totals 3, 3 (a phase without tiles), 7.
  const int64_t item_end[kWgmmaConvMaxMergedPhases] = {3, 3, 7, 0};
  EXPECT_EQ(implicit_wgmma_launch_item(item_end, 3, 0).plan, 0);
  EXPECT_EQ(implicit_wgmma_launch_item(item_end, 3, 2).item, 2);
  EXPECT_EQ(implicit_wgmma_launch_item(item_end, 3, 3).plan, 2);
  EXPECT_EQ(implicit_wgmma_launch_item(item_end, 3, 3).item, 0);
  EXPECT_EQ(implicit_wgmma_launch_item(item_end, 3, 6).item, 3);
  EXPECT_EQ(implicit_wgmma_launch_item(item_end, 1, 5).item, 5);  // one plan: the item itself
}

}  // namespace
}  // namespace gemmkit::cuda::conv_impl
