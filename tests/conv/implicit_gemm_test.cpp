// Host tests of the implicit-GEMM convolution's pure logic (implicit_gemm/plan.h, layout.h):
// eligibility and plans for the suite rows, the reasons for problems it cannot serve, extreme
// shapes and grid limits, exact coverage of the tile raster, the K cursor, and a host emulation of
// the kernel's gathers and epilogue offsets (the very index functions the kernel calls) against the
// double reference. Runs without a GPU and without CUDA.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "common/problems.h"
#include "conv/emulation.h"
#include "conv/problem_spec.h"
#include "conv/select_util.h"
#include "cuda/conv/common/config.h"
#include "cuda/conv/common/geometry.h"
#include "cuda/conv/implicit_gemm/plan.h"
#include "gemmkit/gemmkit.h"
#include "reference_double.h"

namespace gemmkit::cuda::conv_impl {
namespace {

std::vector<int64_t> split_x(const std::string& v) {
  std::vector<int64_t> r;
  std::stringstream s(v);
  std::string item;
  while (std::getline(s, item, 'x')) r.push_back(std::stoll(item));
  return r;
}

// One suite row: name,count,n,in_spatial,c,o,kernel,stride,pad_lo,pad_hi,kdil,idil,groups,flip.
Spec spec_of_row(const std::string& line, std::string& name) {
  std::vector<std::string> f;
  std::stringstream s(line);
  std::string item;
  while (std::getline(s, item, ',')) f.push_back(item);
  name = f.at(0);
  Spec spec;
  const std::vector<int64_t> in = split_x(f.at(3)), kernel = split_x(f.at(6));
  const int64_t n = std::stoll(f.at(2)), c = std::stoll(f.at(4)), o = std::stoll(f.at(5));
  const int64_t groups = std::stoll(f.at(12));
  spec.x_shape.push_back(n);
  spec.x_shape.insert(spec.x_shape.end(), in.begin(), in.end());
  spec.x_shape.push_back(c);
  spec.w_shape.push_back(o);
  spec.w_shape.insert(spec.w_shape.end(), kernel.begin(), kernel.end());
  spec.w_shape.push_back(c / groups);
  spec.params.stride = split_x(f.at(7));
  spec.params.padding_lo = split_x(f.at(8));
  spec.params.padding_hi = split_x(f.at(9));
  spec.params.kernel_dilation = split_x(f.at(10));
  spec.params.input_dilation = split_x(f.at(11));
  spec.params.groups = groups;
  spec.params.flip = f.at(13) == "1";
  return spec;
}

// The rows of the benchmark suites conv-flux2-vae-1024.csv and conv-models.csv, hardcoded so the
// test runs anywhere; "" = eligible, else a word the reason must contain.
struct SuiteRow {
  const char* line;
  const char* ineligible;
};

const SuiteRow kSuiteRows[] = {
    {"post_quant_conv,1,1,128x128,32,32,1x1,1x1,0x0,0x0,1x1,1x1,1,0,bf16", ""},
    {"conv_in,1,1,128x128,32,512,3x3,1x1,1x1,1x1,1x1,1x1,1,0,bf16", ""},
    {"mid.res0.conv1,10,1,128x128,512,512,3x3,1x1,1x1,1x1,1x1,1x1,1,0,bf16", ""},
    {"up0.upsample.conv,7,1,256x256,512,512,3x3,1x1,1x1,1x1,1x1,1x1,1,0,bf16", ""},
    {"up1.upsample.conv,1,1,512x512,512,512,3x3,1x1,1x1,1x1,1x1,1x1,1,0,bf16", ""},
    {"up2.res0.conv1,1,1,512x512,512,256,3x3,1x1,1x1,1x1,1x1,1x1,1,0,bf16", ""},
    {"up2.res0.conv2,5,1,512x512,256,256,3x3,1x1,1x1,1x1,1x1,1x1,1,0,bf16", ""},
    {"up2.res0.shortcut,1,1,512x512,512,256,1x1,1x1,0x0,0x0,1x1,1x1,1,0,bf16", ""},
    {"up2.upsample.conv,1,1,1024x1024,256,256,3x3,1x1,1x1,1x1,1x1,1x1,1,0,bf16", ""},
    {"up3.res0.conv1,1,1,1024x1024,256,128,3x3,1x1,1x1,1x1,1x1,1x1,1,0,bf16", ""},
    {"up3.res0.conv2,5,1,1024x1024,128,128,3x3,1x1,1x1,1x1,1x1,1x1,1,0,bf16", ""},
    {"up3.res0.shortcut,1,1,1024x1024,256,128,1x1,1x1,0x0,0x0,1x1,1x1,1,0,bf16", ""},
    {"conv_out,1,1,1024x1024,128,3,3x3,1x1,1x1,1x1,1x1,1x1,1,0,bf16", ""},
    {"resnet50-stem-7x7s2,1,8,224x224,3,64,7x7,2x2,3x3,3x3,1x1,1x1,1,0,bf16", "multiple of 8"},
    {"resnet50-3x3-64,1,8,56x56,64,64,3x3,1x1,1x1,1x1,1x1,1x1,1,0,bf16", ""},
    {"resnet50-1x1-256to64,1,8,56x56,256,64,1x1,1x1,0x0,0x0,1x1,1x1,1,0,bf16", ""},
    {"resnet50-3x3s2-128,1,8,56x56,128,128,3x3,2x2,1x1,1x1,1x1,1x1,1,0,bf16", ""},
    {"resnext50-g32-3x3,1,8,56x56,256,256,3x3,1x1,1x1,1x1,1x1,1x1,32,0,bf16", ""},
    {"convnext-dw7x7-96,1,8,56x56,96,96,7x7,1x1,3x3,3x3,1x1,1x1,96,0,bf16", "multiple of 8"},
    {"convnext-dw7x7-384,1,8,14x14,384,384,7x7,1x1,3x3,3x3,1x1,1x1,384,0,bf16", "multiple of 8"},
    {"mobilenet-dw3x3-144,1,8,56x56,144,144,3x3,1x1,1x1,1x1,1x1,1x1,144,0,bf16", "multiple of 8"},
    {"mobilenet-dw3x3s2-144,1,8,56x56,144,144,3x3,2x2,1x1,1x1,1x1,1x1,144,0,bf16", "multiple of 8"},
    {"sd-vae-encoder-conv-in,1,1,1024x1024,3,128,3x3,1x1,1x1,1x1,1x1,1x1,1,0,bf16",
     "multiple of 8"},
    {"dilated-3x3-d2,1,4,128x128,256,256,3x3,1x1,2x2,2x2,2x2,1x1,1,0,bf16", ""},
    {"whisper-conv1,1,1,3000,128,1280,3,1,1,1,1,1,1,0,bf16", ""},
    {"whisper-conv2-s2,1,1,3000,1280,1280,3,2,1,1,1,1,1,0,bf16", ""},
    {"mamba-causal-dw-conv1d,1,8,2048,8192,8192,4,1,3,0,1,1,8192,0,bf16", "multiple of 8"},
    {"wan-vae-conv3d-3x3x3,1,1,5x128x128,96,96,3x3x3,1x1x1,1x1x1,1x1x1,1x1x1,1x1x1,1,0,bf16", ""},
    {"video-conv3d-3x3x3-256,1,1,9x64x64,256,256,3x3x3,1x1x1,1x1x1,1x1x1,1x1x1,1x1x1,1,0,bf16", ""},
    {"convtranspose2d-k4s2-256,1,1,128x128,256,128,4x4,1x1,2x2,2x2,1x1,2x2,1,1,bf16", ""},
};

// Every invariant of a plan.
void expect_plan_valid(const ConvProblem& p, const ImplicitGemmPlan& t, const std::string& what) {
  SCOPED_TRACE(what + ": " + to_string(t));
  EXPECT_EQ(t.positions, p.out_positions());
  EXPECT_EQ(t.groups, p.groups);
  EXPECT_EQ(t.cpg, p.in_channels_per_group);
  EXPECT_EQ(t.opg, p.out_channels_per_group);
  EXPECT_EQ(t.taps, p.kernel_positions());
  EXPECT_EQ(t.k_vectors * kImplicitVector, p.kernel_positions() * p.in_channels_per_group);
  EXPECT_GE(int64_t{t.k_blocks} * kImplicitVectorsPerStage, t.k_vectors);
  EXPECT_LT(int64_t{t.k_blocks - 1} * kImplicitVectorsPerStage, t.k_vectors);
  EXPECT_GE(t.m_tiles * kImplicitTileM, t.positions);
  EXPECT_LT((t.m_tiles - 1) * kImplicitTileM, t.positions);
  EXPECT_GE(t.n_tiles * kImplicitTileN, t.opg);
  EXPECT_EQ(t.tiles, t.groups * t.m_tiles * t.n_tiles);
  EXPECT_GE(t.grid.x, 1u);
  EXPECT_LE(int64_t{t.grid.x}, kMaxGridX);
  EXPECT_LE(int64_t{t.grid.x}, t.tiles);
  EXPECT_EQ(t.grid.y, 1u);
  EXPECT_EQ(t.grid.z, 1u);
  EXPECT_EQ(t.block, kImplicitThreads);
  EXPECT_EQ(t.smem_bytes, kImplicitSmemBytes);
  EXPECT_LE(t.smem_bytes * 2, 228 * 1024) << "two CTAs per H200 SM";
  EXPECT_EQ(t.split_k, 1);
  EXPECT_GT(t.efficiency, 0.0);
  EXPECT_LE(t.efficiency, 1.0);
}

TEST(ConvImplicit, SuiteRowsEligibilityAndPlans) {
  for (const SuiteRow& row : kSuiteRows) {
    std::string name;
    const Spec spec = spec_of_row(row.line, name);
    const ConvProblem p = make_problem(spec);
    const std::string why = why_not_implicit_gemm(p, kH200);
    SCOPED_TRACE(name);
    if (std::string(row.ineligible).empty()) {
      EXPECT_EQ(why, "");
      expect_plan_valid(p, implicit_gemm_plan(p, kH200), name);
    } else {
      EXPECT_NE(why.find(row.ineligible), std::string::npos) << why;
    }
  }
}

// The 3x3 VAE rows with c, o >= 128 fill the tiles: no M, N or K tail, < 2 % lost to the last
// wave; conv_in (c = 32) packs 2 taps per K stage; conv_out (o = 3) wastes the N tile.
TEST(ConvImplicit, VaeRowsFillTheTiles) {
  for (int i = 0; i < 13; ++i) {  // the VAE rows
    std::string name;
    const Spec spec = spec_of_row(kSuiteRows[i].line, name);
    if (spec.w_shape[1] != 3) continue;
    if (spec.x_shape[3] < 128 || spec.w_shape[0] < 128) continue;
    const ConvProblem p = make_problem(spec);
    const ImplicitGemmPlan t = implicit_gemm_plan(p, kH200);
    EXPECT_GE(t.efficiency, 0.9) << name << ": " << to_string(t);
  }
  std::string name;
  const ImplicitGemmPlan in = implicit_gemm_plan(
      make_problem(spec_of_row(kSuiteRows[1].line, name)), kH200);  // conv_in, c = 32
  EXPECT_EQ(in.k_blocks, 9 * 32 / kImplicitTileK + 1);              // 288 = 4.5 stages -> 5
  EXPECT_EQ(in.tiles, 128 * 4);
  const ImplicitGemmPlan conv_out =
      implicit_gemm_plan(make_problem(spec_of_row(kSuiteRows[12].line, name)), kH200);
  EXPECT_LT(conv_out.efficiency, 0.05);
}

// The suite files themselves (skipped when absent): every row is planned or refused with a
// reason. They are read from GEMMKIT_SUITES_DIR when set, else from bench/suites of the source
// tree (this file's folder, two levels up).
TEST(ConvImplicit, SuiteFilesWhenPresent) {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("GEMMKIT_SUITES_DIR")) dirs.push_back(env);
  const std::string here = __FILE__;
  const std::string tests_conv = "tests/conv/implicit_gemm_test.cpp";
  if (here.size() >= tests_conv.size() &&
      here.compare(here.size() - tests_conv.size(), tests_conv.size(), tests_conv) == 0) {
    dirs.push_back(here.substr(0, here.size() - tests_conv.size()) + "bench/suites");
  }
  int files = 0;
  for (const std::string& dir : dirs) {
    for (const char* file : {"conv-flux2-vae-256.csv", "conv-flux2-vae-1024.csv",
                             "conv-flux2-vae-2048.csv", "conv-models.csv"}) {
      std::ifstream in(dir + "/" + file);
      if (!in) continue;
      ++files;
      std::string line;
      while (std::getline(in, line)) {
        if (line.empty() || line[0] == '#' || line.rfind("name,", 0) == 0) continue;
        std::string name;
        const Spec spec = spec_of_row(line, name);
        const ConvProblem p = make_problem(spec);
        const std::string why = why_not_implicit_gemm(p, kH200);
        if (why.empty()) {
          expect_plan_valid(p, implicit_gemm_plan(p, kH200), std::string(file) + " " + name);
        } else {
          EXPECT_NE(why.find("multiple of 8"), std::string::npos)
              << file << " " << name << ": " << why;
        }
      }
    }
    if (files > 0) break;
  }
  if (files == 0) GTEST_SKIP() << "no suite files found";
}

TEST(ConvImplicit, IneligibleProblemsNameTheReason) {
  Spec base;
  base.x_shape = {1, 16, 16, 64};
  base.w_shape = {64, 3, 3, 64};
  base.params.padding_lo = {1};
  base.params.padding_hi = {1};
  const auto why = [](const ConvProblem& p, const DeviceDescription& dev = kH200) {
    return why_not_implicit_gemm(p, dev);
  };
  EXPECT_EQ(why(make_problem(base)), "");
  const auto expect_reason = [](const std::string& reason, const std::string& word) {
    EXPECT_NE(reason.find(word), std::string::npos) << "'" << reason << "' lacks '" << word << "'";
  };
  {
    Spec s = base;
    s.dtype = DType::f32;
    s.out_dtype = DType::f32;
    expect_reason(why(make_problem(s)), "f32");
  }
  {
    Spec s = base;
    s.params.groups = 16;  // c/groups = 4
    s.w_shape = {64, 3, 3, 4};
    expect_reason(why(make_problem(s)), "c/groups (4)");
  }
  {
    ConvProblem p = make_problem(base);
    p.x.data = fake(0x10000008);  // 8-byte aligned
    expect_reason(why(p), "x is not 16-byte aligned");
  }
  {
    ConvProblem p = make_problem(base);
    p.x.strides[2] = 68;  // row of 68 channels: 136 bytes, not a multiple of 16
    p.x.strides[1] = 68 * 16;
    expect_reason(why(p), "x stride");
  }
  {
    ConvProblem p = make_problem(base);
    p.x.strides[3] = 2;  // channels not contiguous
    expect_reason(why(p), "x's channel stride");
  }
  {
    ConvProblem p = make_problem(base);
    p.weight.strides[3] = 2;
    expect_reason(why(p), "weight's channel stride");
  }
  {
    ConvProblem p = make_problem(base);
    p.weight.strides[0] = 9 * 64 + 4;  // rows 1160 bytes apart
    expect_reason(why(p), "weight stride");
  }
  {
    ConvProblem p = make_problem(base);
    p.weight.data = fake(0x20000004);
    expect_reason(why(p), "weight is not 16-byte aligned");
  }
  {
    DeviceDescription turing = kH200;
    turing.sm_major = 7;
    turing.sm_minor = 5;
    expect_reason(why(make_problem(base), turing), "sm_80");
    DeviceDescription small = kH200;
    small.shared_per_block_optin = 48 * 1024;
    expect_reason(why(make_problem(base), small), "shared memory");
  }
  {
    Spec s = base;  // 1-D, 2^29 long: past the 32-bit gather arithmetic
    s.x_shape = {1, int64_t{1} << 29, 8};
    s.w_shape = {8, 3, 8};
    expect_reason(why(make_problem(s)), "2^29");
    EXPECT_EQ(why(make_problem(s)),
              "a spatial extent (536870912 in dim 0) reaches 2^29 (the gather indexes in 32 bits)");
  }
  {
    Spec s = base;  // K = 27 taps * 2^27 channels > 2^31
    s.x_shape = {1, 3, 3, 3, int64_t{1} << 27};
    s.w_shape = {8, 3, 3, 3, int64_t{1} << 27};
    s.params.padding_lo = {0};
    s.params.padding_hi = {0};
    expect_reason(why(make_problem(s)), "2^31");
  }
  // Eligible, though other paths may serve them better: strided / odd-channel out, odd o, 1x1.
  {
    Spec s = base;
    s.w_shape = {7, 3, 3, 64};
    EXPECT_EQ(why(make_problem(s)), "");
    EXPECT_FALSE(implicit_gemm_plan(make_problem(s), kH200).out_pairs);
  }
  {
    ConvProblem p = make_problem(base);
    p.out.strides[3] = 3;  // channel stride 3
    EXPECT_EQ(why(p), "");
    EXPECT_FALSE(implicit_gemm_plan(p, kH200).out_pairs);
    EXPECT_TRUE(implicit_gemm_plan(make_problem(base), kH200).out_pairs);
  }
}

// Output positions, channels and tiles past every 32-bit and launch limit.
TEST(ConvImplicit, ExtremeShapes) {
  {
    // 2^31 output positions (1 x 32768 x 65536), 8 -> 16 channels.
    Spec s;
    s.x_shape = {1, 32768, 65536, 8};
    s.w_shape = {16, 1, 1, 8};
    const ConvProblem p = make_problem(s);
    ASSERT_EQ(why_not_implicit_gemm(p, kH200), "");
    const ImplicitGemmPlan t = implicit_gemm_plan(p, kH200);
    expect_plan_valid(p, t, "2^31 positions");
    EXPECT_EQ(t.positions, int64_t{1} << 31);
    EXPECT_EQ(t.tiles, (int64_t{1} << 31) / kImplicitTileM);
    const ImplicitRow last = implicit_row(t, t.positions - 1);
    EXPECT_EQ(last.q[1], 32767);
    EXPECT_EQ(last.q[2], 65535);
    EXPECT_EQ(last.out_base, (t.positions - 1) * 16);
    EXPECT_EQ(last.x_base, (t.positions - 1) * 8);
  }
  {
    // 2^40 positions in a batch of 2^12 images of 2^14 x 2^14: 2^33 tiles, a capped grid.
    Spec s;
    s.x_shape = {int64_t{1} << 12, 16384, 16384, 8};
    s.w_shape = {8, 1, 1, 8};
    const ConvProblem p = make_problem(s);
    ASSERT_EQ(why_not_implicit_gemm(p, kH200), "");
    const ImplicitGemmPlan t = implicit_gemm_plan(p, kH200);
    expect_plan_valid(p, t, "2^40 positions");
    EXPECT_EQ(int64_t{t.grid.x}, kMaxGridX);
    EXPECT_EQ(t.tiles, int64_t{1} << 33);
    // The CTA loop `tile += gridDim.x` reaches the last tile.
    const int64_t last = t.tiles - 1;
    EXPECT_EQ((last % t.grid.x) + (last / t.grid.x) * int64_t{t.grid.x}, last);
    const ImplicitTile at = implicit_gemm_tile(t, last);
    EXPECT_EQ(at.m_tile, t.m_tiles - 1);
    EXPECT_EQ(at.n_tile, 0);
    const ImplicitRow row = implicit_row(t, t.positions - 1);
    EXPECT_EQ(row.x_base, (t.positions - 1) * 8);
    EXPECT_EQ(row.q[1], 16383);
    EXPECT_EQ(implicit_row(t, t.positions).q[0], kImplicitInvalidRow);
  }
  {
    // c = 70,000 (8750 vectors a tap), 3x3: 78,750 K stages.
    Spec s;
    s.x_shape = {1, 6, 5, 70000};
    s.w_shape = {16, 3, 3, 70000};
    s.params.padding_lo = {1};
    s.params.padding_hi = {1};
    const ConvProblem p = make_problem(s);
    ASSERT_EQ(why_not_implicit_gemm(p, kH200), "");
    const ImplicitGemmPlan t = implicit_gemm_plan(p, kH200);
    expect_plan_valid(p, t, "c = 70000");
    EXPECT_EQ(t.k_blocks, 9 * 70000 / kImplicitTileK + 1);
    // The cursor of the last stage's last column is on the last tap's last vector.
    ImplicitKCursor c = implicit_k_start(t, 5);
    for (int32_t kb = 1; kb < t.k_blocks; ++kb) implicit_k_advance(t, c);
    const int64_t kv = int64_t{t.k_blocks - 1} * 8 + 5;
    EXPECT_EQ(kv, t.k_vectors - 1);
    EXPECT_EQ(int64_t{c.cv}, kv % t.cpv);
    EXPECT_EQ(int64_t{c.t[1]} * 3 + c.t[2], kv / t.cpv);
  }
  {
    // 70,000 groups of 8 channels: tiles and channel offsets per group.
    Spec s;
    s.x_shape = {1, 4, 4, 560000};
    s.w_shape = {560000, 3, 3, 8};
    s.params.groups = 70000;
    const ConvProblem p = make_problem(s);
    ASSERT_EQ(why_not_implicit_gemm(p, kH200), "");
    const ImplicitGemmPlan t = implicit_gemm_plan(p, kH200);
    expect_plan_valid(p, t, "70000 groups");
    EXPECT_EQ(implicit_gemm_tile(t, t.tiles - 1).group, 69999);
  }
}

TEST(ConvImplicit, TileRasterCoversEachTileOnce) {
  for (const int64_t m_tiles : {1, 3, 8, 9, 17, 64}) {
    for (const int64_t n_tiles : {1, 2, 4, 5}) {
      for (const int64_t groups : {1, 3}) {
        for (const int64_t band : {1, 8}) {
          ImplicitGemmPlan t;
          t.m_tiles = m_tiles;
          t.n_tiles = n_tiles;
          t.groups = groups;
          t.band = band;
          t.tiles = groups * m_tiles * n_tiles;
          std::vector<int> seen(static_cast<std::size_t>(t.tiles), 0);
          for (int64_t tile = 0; tile < t.tiles; ++tile) {
            const ImplicitTile at = implicit_gemm_tile(t, tile);
            ASSERT_GE(at.group, 0);
            ASSERT_LT(at.group, groups);
            ASSERT_GE(at.m_tile, 0);
            ASSERT_LT(at.m_tile, m_tiles);
            ASSERT_GE(at.n_tile, 0);
            ASSERT_LT(at.n_tile, n_tiles);
            ++seen[static_cast<std::size_t>((at.group * m_tiles + at.m_tile) * n_tiles +
                                            at.n_tile)];
          }
          for (const int v : seen) ASSERT_EQ(v, 1);
        }
      }
    }
  }
}

TEST(ConvImplicit, KCursorWalksKInOrder) {
  for (const int32_t cpv : {1, 2, 3, 4, 7, 8, 9, 16, 64}) {
    for (const std::vector<int32_t>& kernel :
         std::vector<std::vector<int32_t>>{{1, 1, 1}, {1, 3, 3}, {3, 3, 3}, {2, 1, 5}, {1, 1, 4}}) {
      ImplicitGemmPlan t;
      t.cpv = cpv;
      for (int d = 0; d < 3; ++d) t.kernel[d] = kernel[static_cast<std::size_t>(d)];
      const int64_t k_vectors = int64_t{cpv} * kernel[0] * kernel[1] * kernel[2];
      for (int32_t j = 0; j < kImplicitVectorsPerStage; ++j) {
        ImplicitKCursor c = implicit_k_start(t, j);
        for (int64_t kv = j; kv < k_vectors + 16; kv += kImplicitVectorsPerStage) {
          const int64_t tap = kv / cpv;
          const int32_t t2 = static_cast<int32_t>(tap % kernel[2]);
          const int32_t t1 = static_cast<int32_t>((tap / kernel[2]) % kernel[1]);
          const int32_t t0 = static_cast<int32_t>(tap / kernel[2] / kernel[1]);
          ASSERT_EQ(c.cv, kv % cpv) << "cpv " << cpv << " kv " << kv;
          ASSERT_EQ(c.t[2], t2);
          ASSERT_EQ(c.t[1], t1);
          ASSERT_EQ(c.t[0], t0);
          ASSERT_EQ(implicit_tap(t, c).valid, kv < k_vectors);
          implicit_k_advance(t, c);
        }
      }
    }
  }
}

// ---- Host emulation of the kernel ----------------------------------------------------------

using gemmkit_test::EmuCase;

// Runs the kernel's data movement on the host: per tile the row table (implicit_row), per K
// stage and loader column the cursor (implicit_k_start / advance) and tap (implicit_tap), per row
// the A gather (implicit_a_offset) and the B row offset, products accumulated in double; then
// the epilogue's offsets (row table, channel stride) into out. Compares with the double
// reference; every output must be written exactly once.
void emulate(const EmuCase& ec) {
  SCOPED_TRACE(ec.name);
  const gemmkit_test::EmuData data(ec, 11);
  const ConvProblem& p = data.p;
  const gemmkit_test::HostTensor &b = data.b, &out = data.out;
  ASSERT_EQ(why_not_implicit_gemm(p, kH200), "");
  const ImplicitGemmPlan t = implicit_gemm_plan(p, kH200);
  expect_plan_valid(p, t, ec.name);

  const auto x_value = [&](int64_t element) { return data.x_value(element); };
  const auto w_value = [&](int64_t element) { return data.w_value(element); };
  std::map<int64_t, double> written;  // out storage index -> value
  for (int64_t tile = 0; tile < t.tiles; ++tile) {
    const ImplicitTile at = implicit_gemm_tile(t, tile);
    const int64_t m0 = at.m_tile * kImplicitTileM;
    const int64_t n0 = at.n_tile * kImplicitTileN;
    std::vector<ImplicitRow> rows;
    for (int r = 0; r < kImplicitTileM; ++r) rows.push_back(implicit_row(t, m0 + r));
    std::vector<double> acc(static_cast<std::size_t>(kImplicitTileM * kImplicitTileN), 0.0);
    const int64_t x_group = at.group * t.cpg;
    const int64_t oc0 = at.group * t.opg;
    for (int32_t col = 0; col < kImplicitVectorsPerStage; ++col) {
      ImplicitKCursor cursor = implicit_k_start(t, col);
      for (int32_t kb = 0; kb < t.k_blocks; ++kb) {
        const ImplicitTap k = implicit_tap(t, cursor);
        std::vector<double> a(static_cast<std::size_t>(kImplicitTileM * kImplicitVector), 0.0);
        std::vector<double> bv(static_cast<std::size_t>(kImplicitTileN * kImplicitVector), 0.0);
        for (int r = 0; r < kImplicitTileM; ++r) {
          int64_t offset = 0;
          const ImplicitRow& row = rows[static_cast<std::size_t>(r)];
          const bool ok = t.input_dilation ? implicit_a_offset<true>(t, k, row.q[0], row.q[1],
                                                                     row.q[2], row.x_base, offset)
                                           : implicit_a_offset<false>(t, k, row.q[0], row.q[1],
                                                                      row.q[2], row.x_base, offset);
          if (!ok) continue;
          for (int e = 0; e < kImplicitVector; ++e) {
            a[static_cast<std::size_t>(r * kImplicitVector + e)] = x_value(x_group + offset + e);
          }
        }
        for (int n = 0; n < kImplicitTileN; ++n) {
          if (!k.valid || n0 + n >= t.opg) continue;
          const int64_t base = (oc0 + n0 + n) * t.w_stride[0] + k.w_offset;
          for (int e = 0; e < kImplicitVector; ++e) {
            bv[static_cast<std::size_t>(n * kImplicitVector + e)] = w_value(base + e);
          }
        }
        for (int r = 0; r < kImplicitTileM; ++r) {
          for (int n = 0; n < kImplicitTileN; ++n) {
            double sum = 0;
            for (int e = 0; e < kImplicitVector; ++e) {
              sum += a[static_cast<std::size_t>(r * kImplicitVector + e)] *
                     bv[static_cast<std::size_t>(n * kImplicitVector + e)];
            }
            acc[static_cast<std::size_t>(r * kImplicitTileN + n)] += sum;
          }
        }
        implicit_k_advance(t, cursor);
      }
    }
    for (int r = 0; r < kImplicitTileM; ++r) {
      if (m0 + r >= t.positions) continue;
      for (int n = 0; n < kImplicitTileN; ++n) {
        if (n0 + n >= t.opg) continue;
        double v = acc[static_cast<std::size_t>(r * kImplicitTileN + n)];
        if (t.has_bias) v += b.at({oc0 + n0 + n});
        const int64_t index = out.offset + rows[static_cast<std::size_t>(r)].out_base +
                              (oc0 + n0 + n) * t.out_stride[4];
        ASSERT_EQ(written.count(index), 0u) << "output written twice";
        written[index] = v;
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
  add("2d 3x3 pad 1 bias, M and N tails", {2, 9, 11, 16}, {136, 3, 3, 16}, [](EmuCase& c) {
    c.spec.params.padding_lo = {1};
    c.spec.params.padding_hi = {1};
    c.spec.bias = true;
  });
  add("1d stride 2 asymmetric pad, c 8 (8 taps a stage)", {3, 41, 8}, {12, 5, 8}, [](EmuCase& c) {
    c.spec.params.stride = {2};
    c.spec.params.padding_lo = {3};
    c.spec.params.padding_hi = {1};
  });
  add("2d negative padding, kernel dilation 2", {1, 13, 12, 24}, {10, 3, 2, 24}, [](EmuCase& c) {
    c.spec.params.padding_lo = {-1, 2};
    c.spec.params.padding_hi = {2, -1};
    c.spec.params.kernel_dilation = {2};
  });
  add("transposed conv k4 s2 (input dilation + flip), groups 2", {1, 6, 5, 16}, {12, 4, 4, 8},
      [](EmuCase& c) {
        c.spec.params = conv_transpose_params({4, 4}, {2, 2}, {1, 1}, {0, 1}, {1, 1}, 2);
      });
  add("3d stride 1x2x1, groups 4, c/g 8", {1, 4, 7, 5, 32}, {8, 3, 2, 3, 8}, [](EmuCase& c) {
    c.spec.params.groups = 4;
    c.spec.params.stride = {1, 2, 1};
    c.spec.params.padding_lo = {1};
    c.spec.params.padding_hi = {1};
  });
  add("flip, odd sizes, c 72 (taps straddle stages)", {1, 7, 9, 72}, {9, 3, 3, 72}, [](EmuCase& c) {
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
  });
  add("out channels not innermost", {1, 5, 6, 8}, {16, 3, 3, 8}, [](EmuCase& c) {
    c.out_layout.order = {0, 3, 1, 2};
  });
  return v;
}

TEST(ConvImplicit, EmulatedKernelMatchesTheDefinition) {
  for (const EmuCase& c : emulation_cases()) emulate(c);
}

}  // namespace
}  // namespace gemmkit::cuda::conv_impl
