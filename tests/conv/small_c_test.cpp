// Host tests of the small-c path (small_c/plan.h, layout.h): eligibility and its reasons, the plans
// of the stems in the suites, auto's and algo 'implicit''s choice, and a host emulation of the
// kernel's data movement (region staging, row-base and k-pair tables, weight block, output
// offsets) against the double reference.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "common/problems.h"
#include "conv/emulation.h"
#include "conv/problem_spec.h"
#include "conv/select_util.h"
#include "cuda/conv/small_c/plan.h"
#include "gemmkit/gemmkit.h"
#include "reference_double.h"

namespace gemmkit::cuda::conv_impl {
namespace {

Spec stem_spec() {  // resnet50-stem-7x7s2 of conv-models.csv
  Spec s;
  s.x_shape = {8, 224, 224, 3};
  s.w_shape = {64, 7, 7, 3};
  s.params.stride = {2};
  s.params.padding_lo = {3};
  s.params.padding_hi = {3};
  return s;
}

Spec vae_conv_in_spec() {  // sd-vae-encoder-conv-in of conv-models.csv
  Spec s = gemmkit_test::padded_spec({1, 1024, 1024, 3}, {128, 3, 3, 3}, 1, true);
  return s;
}

Spec transposed_c3_spec() {  // input dilation: no small-c kernel
  Spec s;
  s.x_shape = {1, 9, 9, 3};
  s.w_shape = {16, 4, 4, 3};
  s.params = conv_transpose_params({4, 4}, {2, 2}, {1, 1}, {0, 0}, {1, 1});
  return s;
}

Spec resnext_spec() {  // resnext50-g32-3x3 of conv-models.csv: c/groups = o/groups = 8
  Spec s = gemmkit_test::padded_spec({8, 56, 56, 256}, {256, 3, 3, 8}, 1);
  s.params.groups = 32;
  return s;
}

std::string why_not(const Spec& s) {
  SmallCPlan t;
  return why_not_small_c(make_problem(s), kH200, t);
}

TEST(ConvSmallC, Eligibility) {
  EXPECT_EQ(why_not(stem_spec()), "");
  EXPECT_EQ(why_not(vae_conv_in_spec()), "");
  Spec f32 = stem_spec();
  f32.dtype = f32.out_dtype = DType::f32;
  EXPECT_EQ(why_not(f32), "x is f32 (the kernel takes bf16 / f16)");
  Spec wide = gemmkit_test::padded_spec({1, 9, 9, 16}, {32, 3, 3, 16}, 1);
  EXPECT_EQ(why_not(wide), "c = 16 > 8");
  Spec grouped = gemmkit_test::padded_spec({1, 9, 9, 8}, {32, 3, 3, 4}, 1);
  grouped.params.groups = 2;
  EXPECT_EQ(why_not(grouped), "groups = 2 with c/groups = 4 (grouped: c/groups must be 8)");
  Spec odd_opg = gemmkit_test::padded_spec({1, 9, 9, 16}, {24, 3, 3, 8}, 1);
  odd_opg.params.groups = 2;
  EXPECT_EQ(why_not(odd_opg),
            "groups = 2 with o/groups = 12 (grouped: o/groups must be 8, 16, 32, 64 or 128)");
  Spec resnext = resnext_spec();
  EXPECT_EQ(why_not(resnext), "");
  Spec unaligned = resnext;
  unaligned.x_shape.back() = 264;  // x channel stride 264: still 16-byte vectors ...
  unaligned.w_shape[0] = 264;
  unaligned.params.groups = 33;
  EXPECT_EQ(why_not(unaligned), "");
  ConvProblem misaligned = make_problem(resnext, fake(0x10000008));
  SmallCPlan t;
  EXPECT_EQ(why_not_small_c(misaligned, kH200, t), "grouped: x is not 16-byte aligned");
  EXPECT_EQ(why_not(transposed_c3_spec()), "input dilation");
  Spec long_k = gemmkit_test::padded_spec({1, 40, 40, 8}, {16, 9, 9, 8}, 4);  // 81 x 8 = 648
  EXPECT_EQ(why_not(long_k), "taps * c rounded up to even = 648 > 512");
  Spec far = gemmkit_test::padded_spec({1, 4000, 4000, 3}, {16, 3, 3, 3}, 0);
  far.params.kernel_dilation = {1500};
  EXPECT_NE(why_not(far).find("no tile's input region fits"), std::string::npos) << why_not(far);
}

TEST(ConvSmallC, PlansOfTheStems) {
  SmallCPlan t;
  ASSERT_EQ(why_not_small_c(make_problem(stem_spec()), kH200, t), "");
  EXPECT_EQ(t.c_pad, 4);
  EXPECT_EQ(t.taps, 49);
  EXPECT_EQ(t.k_pairs, 98);
  EXPECT_EQ(t.k_steps, 13);  // 196 of 208
  EXPECT_EQ(t.b_words, 108);
  EXPECT_EQ(t.warps_n, 2);  // o = 64
  EXPECT_EQ(t.tile_m(), 128);
  EXPECT_EQ(t.tile_h * t.tile_w, 128);
  // 112 x 112 outputs: 8 x 16 tiles divide them (784 tiles, region 21 x 37) and beat 4 x 32
  // (896 tiles, region 13 x 69).
  EXPECT_EQ(t.tile_h, 8);
  EXPECT_EQ(t.tile_w, 16);
  EXPECT_EQ(t.region_h, 21);
  EXPECT_EQ(t.region_w, 37);
  EXPECT_EQ(t.region_d, 1);
  EXPECT_EQ(t.tiles, 8 * 14 * 7);
  EXPECT_EQ(t.col_blocks, 1);
  EXPECT_TRUE(t.vector_out);
  EXPECT_LE(t.grid, t.tiles);
  EXPECT_EQ(t.smem_bytes, t.region_bytes + t.b_bytes + t.c_bytes + t.table_bytes);
  EXPECT_EQ(t.region_bytes, 21 * 37 * 4 * 2 + 8);  // rounded up to 16 bytes
  EXPECT_NEAR(t.tile_efficiency, 147.0 / 208.0, 1e-12);

  ASSERT_EQ(why_not_small_c(make_problem(vae_conv_in_spec()), kH200, t), "");
  EXPECT_EQ(t.warps_n, 4);  // o = 128
  EXPECT_EQ(t.tile_m(), 64);
  EXPECT_EQ(t.k_steps, 3);  // 36 of 48
  EXPECT_EQ(t.tile_h, 8);
  EXPECT_EQ(t.tile_w, 8);
  EXPECT_EQ(t.tiles, 128 * 128);

  ASSERT_EQ(why_not_small_c(make_problem(resnext_spec()), kH200, t), "");
  EXPECT_TRUE(t.grouped);
  EXPECT_EQ(t.warps_n, 4);
  EXPECT_EQ(t.groups_per_block, 16);  // 128 columns of 8 per group
  EXPECT_EQ(t.pixel_stride, 16 * 4 + 4);
  EXPECT_EQ(t.col_blocks, 2);
  EXPECT_EQ(t.k_steps, 5);  // 72 of 80
  EXPECT_EQ(t.tile_h * t.tile_w, 64);
  EXPECT_EQ(small_c_group_word(t, 0), 0);
  EXPECT_EQ(small_c_group_word(t, 15), 4);
  EXPECT_EQ(small_c_group_word(t, 127), 15 * 4);
  EXPECT_EQ(t.region_buffer_bytes, t.region_pixels() * 68 * 4);
  EXPECT_EQ(t.region_bytes, 2 * t.region_buffer_bytes);  // two buffers with groups

  // o > 128: column blocks; o = 3 x 32 + 1: four warps along N.
  Spec wide_o = gemmkit_test::padded_spec({1, 20, 20, 3}, {300, 3, 3, 3}, 1);
  ASSERT_EQ(why_not_small_c(make_problem(wide_o), kH200, t), "");
  EXPECT_EQ(t.warps_n, 4);
  EXPECT_EQ(t.col_blocks, 3);
  EXPECT_EQ(t.tiles, 3 * t.spatial_tiles);
  Spec odd_o = gemmkit_test::padded_spec({1, 20, 20, 3}, {97, 3, 3, 3}, 1);
  ASSERT_EQ(why_not_small_c(make_problem(odd_o), kH200, t), "");
  EXPECT_EQ(t.warps_n, 4);
  EXPECT_EQ(t.col_blocks, 1);
  Spec f32_out = stem_spec();
  f32_out.out_dtype = DType::f32;
  ASSERT_EQ(why_not_small_c(make_problem(f32_out), kH200, t), "");
  EXPECT_EQ(t.c_row_bytes, 64 * 4 + 16);
}

TEST(ConvSmallC, Selection) {
  const ConvRequest automatic = request_of("", kDefaultWorkspaceBytes);
  for (const Spec& s : {stem_spec(), vae_conv_in_spec(), resnext_spec()}) {
    const ConvConfig c = select_conv_config(make_problem(s), kH200, automatic);
    EXPECT_EQ(c.path, ConvPath::small_c) << to_string(c);
    expect_within_limits(c);
    EXPECT_NE(c.reason.find("small_c tile="), std::string::npos) << c.reason;
    EXPECT_TRUE(auto_races_cudnn(c));
    EXPECT_FALSE(auto_prefers_cudnn(make_problem(s), c));
  }
  const ConvConfig forced =
      select_conv_config(make_problem(stem_spec()), kH200, request_of("implicit", 0));
  EXPECT_EQ(forced.path, ConvPath::small_c) << to_string(forced);
  // c = 8: both the mma.sync implicit GEMM and the small-c kernel serve; a 3x3 kernel packs 72 of
  // K into 80 here against 128 there.
  const Spec c8 = gemmkit_test::padded_spec({2, 30, 30, 8}, {64, 3, 3, 8}, 1);
  EXPECT_EQ(select_conv_config(make_problem(c8), kH200, automatic).path, ConvPath::small_c);
  // Algo 'implicit' takes the small-c kernel where auto would (ResNeXt's c/groups = 8 too: the
  // mma.sync implicit GEMM serves it with 3% of its tiles' MMA work useful).
  EXPECT_EQ(select_conv_config(make_problem(c8), kH200, request_of("implicit", 0)).path,
            ConvPath::small_c);
  EXPECT_EQ(select_conv_config(make_problem(resnext_spec()), kH200, request_of("implicit", 0)).path,
            ConvPath::small_c);
  // c = 16 stays off the path.
  const Spec c16 = gemmkit_test::padded_spec({2, 30, 30, 16}, {64, 3, 3, 16}, 1);
  EXPECT_NE(select_conv_config(make_problem(c16), kH200, automatic).path, ConvPath::small_c);
  // The implicit algo names both reasons where no kernel serves (c = 3 with input dilation).
  const Spec transposed = transposed_c3_spec();
  try {
    select_conv_config(make_problem(transposed), kH200, request_of("implicit", 0));
    ADD_FAILURE() << "algo 'implicit' served a c = 3 transposed convolution";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("small-c kernel: input dilation"), std::string::npos)
        << e.what();
  }
}

// ---- Host emulation of the kernel ----------------------------------------------------------

using gemmkit_test::EmuCase;

// The kernel's data movement on the host: per tile (small_c_tile) the region staged pixel by pixel
// (small_c_region_pixel; zeros outside x and past c), the weight block (small_c_weight), the row
// bases and k-pair offsets (small_c_row_base, small_c_k_pair_offset) that the A fragments read
// through, products summed in double over every k pair of every k16 step; then the outputs
// through small_c_out_offset. Every output must be written exactly once, equal to the reference.
void emulate(const EmuCase& ec) {
  SCOPED_TRACE(ec.name);
  const Spec& s = ec.spec;
  const gemmkit_test::EmuData data(ec, 21);
  const ConvProblem& p = data.p;
  const gemmkit_test::HostTensor &b = data.b, &out = data.out;
  SmallCPlan t;
  ASSERT_EQ(why_not_small_c(p, kH200, t), "");
  const ConvGeometry g = normalize(p);
  const int k_real = t.taps * t.c_pad;
  std::vector<int> row_base(static_cast<std::size_t>(t.tile_m()));
  for (int m = 0; m < t.tile_m(); ++m)
    row_base[static_cast<std::size_t>(m)] = small_c_row_base(g, t, m);
  std::vector<int> k_pair(static_cast<std::size_t>(t.k_steps * 8));
  for (int kp = 0; kp < t.k_steps * 8; ++kp) {
    k_pair[static_cast<std::size_t>(kp)] = small_c_k_pair_offset(g, t, kp);
    EXPECT_EQ(k_pair[static_cast<std::size_t>(kp)] < 0, kp >= t.k_pairs);
  }
  std::map<int64_t, double> written;
  const int region_elems = t.region_pixels() * t.pixel_stride * 2;
  for (int64_t tile = 0; tile < t.tiles; ++tile) {
    const SmallCTile at = small_c_tile(g, t, tile);
    std::vector<double> region(static_cast<std::size_t>(region_elems), 0.0);
    for (int r = 0; r < t.region_pixels(); ++r) {
      int64_t offset = 0;
      if (!small_c_region_pixel(g, t, at, r, offset)) continue;
      const int64_t group0 = small_c_block_group0(t, at.col_block);
      for (int gi = 0; gi < t.groups_per_block; ++gi) {  // one group without groups
        if (group0 + gi >= g.groups) break;
        for (int ci = 0; ci < g.cpg; ++ci) {
          region[static_cast<std::size_t>(r * t.pixel_stride * 2 + gi * t.c_pad + ci)] =
              data.x_value(offset + ((group0 + gi) * g.cpg + ci) * g.x_stride[4]);
        }
      }
    }
    const int64_t oc0 = int64_t{at.col_block} * t.tile_n();
    for (int n = 0; n < t.tile_n(); ++n) {
      std::vector<double> bk(static_cast<std::size_t>(t.k_steps * 16), 0.0);
      for (int k = 0; k < k_real; ++k) {  // the kernel's per-k offsets within a row (oc 0)
        int64_t offset = 0;
        if (oc0 + n < g.o && small_c_weight(g, t, 0, k, offset)) {
          bk[static_cast<std::size_t>(k)] = data.w_value((oc0 + n) * g.w_stride[0] + offset);
        }
      }
      for (int m = 0; m < t.tile_m(); ++m) {
        int64_t out_index = 0;
        if (!small_c_out_offset(g, t, at, m, n, out_index)) continue;
        double sum = s.bias ? b.at({oc0 + n}) : 0.0;
        for (int kp = 0; kp < t.k_steps * 8; ++kp) {
          const int off = k_pair[static_cast<std::size_t>(kp)];
          if (off < 0) continue;
          const int word = row_base[static_cast<std::size_t>(m)] + off + small_c_group_word(t, n);
          ASSERT_LT(2 * word + 1, region_elems);
          for (int e = 0; e < 2; ++e) {
            sum += region[static_cast<std::size_t>(2 * word + e)] *
                   bk[static_cast<std::size_t>(2 * kp + e)];
          }
        }
        const int64_t index = out.offset + out_index;
        ASSERT_EQ(written.count(index), 0u) << "output written twice";
        written[index] = sum;
      }
    }
  }
  gemmkit_test::expect_emulated_outputs(written, out, data.ref);
}

std::vector<EmuCase> emulation_cases() {
  std::vector<EmuCase> v;
  const auto add = [&v](const std::string& name, std::vector<int64_t> xs, std::vector<int64_t> ws,
                        const std::function<void(EmuCase&)>& tweak = nullptr) {
    gemmkit_test::add_emu_case(v, name, std::move(xs), std::move(ws), tweak);
  };
  add("stem 7x7 stride 2 pad 3, c 3, bias", {2, 37, 30, 3}, {64, 7, 7, 3}, [](EmuCase& c) {
    c.spec.params.stride = {2};
    c.spec.params.padding_lo = {3};
    c.spec.params.padding_hi = {3};
    c.spec.bias = true;
  });
  add("3x3 pad 1, c 3, o 130 (column blocks and an N tail)", {1, 19, 21, 3}, {130, 3, 3, 3},
      [](EmuCase& c) {
        c.spec.params.padding_lo = {1};
        c.spec.params.padding_hi = {1};
      });
  add("1d c 1, kernel dilation 3, asymmetric padding", {3, 50, 1}, {20, 5, 1}, [](EmuCase& c) {
    c.spec.params.kernel_dilation = {3};
    c.spec.params.padding_lo = {4};
    c.spec.params.padding_hi = {1};
  });
  add("2d negative padding, stride 3x1, flip, c 5", {1, 23, 17, 5}, {24, 3, 4, 5}, [](EmuCase& c) {
    c.spec.params.padding_lo = {-1, 2};
    c.spec.params.padding_hi = {2, -2};
    c.spec.params.stride = {3, 1};
    c.spec.params.flip = true;
  });
  add("3d 3x3x3 pad 1, c 4, o 40", {1, 5, 9, 11, 4}, {40, 3, 3, 3, 4}, [](EmuCase& c) {
    c.spec.params.padding_lo = {1};
    c.spec.params.padding_hi = {1};
    c.spec.bias = true;
  });
  add("c 8, o 7, strided x, w and out views", {2, 9, 10, 8}, {7, 3, 3, 8}, [](EmuCase& c) {
    c.spec.params.padding_lo = {1};
    c.spec.params.padding_hi = {0};
    c.x_layout.pad = {0, 1, 3, 5};
    c.x_layout.offset = 3;
    c.w_layout.pad = {0, 0, 1, 2};
    c.out_layout.pad = {0, 1, 2, 3};
    c.out_layout.offset = 5;
  });
  add("c 2, out channels not innermost", {1, 6, 7, 2}, {33, 2, 2, 2}, [](EmuCase& c) {
    c.out_layout.order = {0, 3, 1, 2};
  });
  add("groups 4 of 8 -> 8, pad 1, bias", {2, 9, 10, 32}, {32, 3, 3, 8}, [](EmuCase& c) {
    c.spec.params.groups = 4;
    c.spec.params.padding_lo = {1};
    c.spec.params.padding_hi = {1};
    c.spec.bias = true;
  });
  add("groups 3 of 8 -> 8 (a column block's last group past o), stride 2", {1, 11, 9, 24},
      {24, 3, 3, 8}, [](EmuCase& c) {
        c.spec.params.groups = 3;
        c.spec.params.stride = {2};
        c.spec.params.padding_lo = {1};
        c.spec.params.padding_hi = {0};
      });
  add("groups 20 of 8 -> 16, flip, dilation 2 (column blocks)", {1, 10, 12, 160}, {320, 3, 3, 8},
      [](EmuCase& c) {
        c.spec.params.groups = 20;
        c.spec.params.flip = true;
        c.spec.params.kernel_dilation = {2};
        c.spec.params.padding_lo = {2};
        c.spec.params.padding_hi = {1};
      });
  add("groups 2 of 8 -> 64, strided out", {1, 7, 8, 16}, {128, 2, 3, 8}, [](EmuCase& c) {
    c.spec.params.groups = 2;
    c.out_layout.pad = {0, 1, 2, 8};
  });
  return v;
}

TEST(ConvSmallC, EmulatedKernelMatchesTheDefinition) {
  for (const EmuCase& c : emulation_cases()) emulate(c);
}

}  // namespace
}  // namespace gemmkit::cuda::conv_impl
