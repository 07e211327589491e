// CPU backend convolution, through the public API, against plain double-precision references:
// the literal conv_general definition (dilate + pad the input, dilate + flip the kernel,
// correlate) and, for transposed convolutions, a direct scatter formula. Plus the documented
// fp32 summation order (bitwise), determinism across runs, thread counts and kernel variants.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cpu/cpu_internal.h"
#include "gemmkit/gemmkit.h"
#include "reference_double.h"

namespace {

using gemmkit::ConvParams;
using gemmkit::DType;
using gemmkit_test::HostTensor;
using gemmkit_test::Layout;
using gemmkit_test::Reference;

struct ConvCase {
  const char* name;
  int64_t batch;
  std::vector<int64_t> in;  // spatial sizes (1-3 entries)
  int64_t c, o;
  std::vector<int64_t> kernel;  // spatial sizes
  ConvParams params;
  bool bias;
  Layout x_layout{};    // storage of x (n, in..., c)
  Layout w_layout{};    // storage of weight (o, kernel..., c / groups)
  Layout out_layout{};  // storage of out
};

ConvParams P(std::vector<int64_t> stride, std::vector<int64_t> lo, std::vector<int64_t> hi,
             std::vector<int64_t> kdil, std::vector<int64_t> idil, int64_t groups = 1,
             bool flip = false) {
  ConvParams p;
  p.stride = std::move(stride);
  p.padding_lo = std::move(lo);
  p.padding_hi = std::move(hi);
  p.kernel_dilation = std::move(kdil);
  p.input_dilation = std::move(idil);
  p.groups = groups;
  p.flip = flip;
  return p;
}

std::vector<ConvCase> conv_cases() {
  std::vector<ConvCase> v;
  // ---- 1-D
  v.push_back({"1d_basic", 2, {13}, 5, 7, {3}, P({}, {}, {}, {}, {}), true});
  v.push_back({"1d_stride2_pad_kdil2", 1, {19}, 4, 3, {3}, P({2}, {1}, {2}, {2}, {}), false});
  v.push_back({"1d_crop", 2, {17}, 3, 5, {3}, P({1}, {-2}, {1}, {}, {}), true});
  v.push_back({"1d_idil3_flip", 1, {6}, 3, 4, {3}, P({}, {2}, {2}, {}, {3}, 1, true), true});
  v.push_back({"1d_groups3", 2, {11}, 9, 6, {5}, P({}, {2}, {2}, {}, {}, 3), true});
  v.push_back({"1d_depthwise", 1, {23}, 6, 6, {7}, P({}, {3}, {3}, {}, {}, 6), false});
  v.push_back({"1d_long_multiblock", 3, {200}, 8, 16, {5}, P({}, {2}, {2}, {}, {}), true});
  v.push_back({"1d_stride_gt_kernel", 2, {29}, 3, 2, {2}, P({5}, {0}, {3}, {}, {}), true});
  // ---- 2-D
  v.push_back({"2d_3x3_pad1", 2, {9, 11}, 3, 4, {3, 3}, P({}, {1}, {1}, {}, {}), true});
  v.push_back(
      {"2d_stride21_asym_pad", 1, {10, 9}, 4, 5, {3, 2}, P({2, 1}, {0, 2}, {1, 0}, {}, {}), false});
  v.push_back({"2d_kdil23", 1, {12, 13}, 4, 5, {3, 3}, P({}, {1, 0}, {0, 2}, {2, 3}, {}), true});
  v.push_back(
      {"2d_idil22_flip", 2, {5, 6}, 3, 4, {3, 3}, P({}, {2, 1}, {1, 2}, {}, {2}, 1, true), true});
  v.push_back({"2d_crop_both", 1, {9, 10}, 3, 3, {2, 3}, P({}, {-1, -2}, {2, -1}, {}, {}), true});
  v.push_back({"2d_groups2_odd", 2, {7, 8}, 6, 4, {3, 3}, P({}, {1}, {1}, {}, {}, 2), true});
  v.push_back({"2d_depthwise_mult2", 1, {8, 9}, 5, 10, {3, 3}, P({}, {1}, {1}, {}, {}, 5), true});
  v.push_back({"2d_pointwise_stride2", 2, {7, 6}, 17, 33, {1, 1}, P({2}, {}, {}, {}, {}), false});
  v.push_back({"2d_medium_threads", 1, {16, 16}, 32, 48, {3, 3}, P({}, {1}, {1}, {}, {}), true});
  v.push_back({"2d_kernel_gt_input", 1, {3, 3}, 2, 3, {5, 5}, P({}, {2}, {2}, {}, {}), true});
  v.push_back({"2d_full_window", 2, {7, 7}, 16, 8, {7, 7}, P({}, {}, {}, {}, {}), false});
  v.push_back({"2d_odd_channels_1x1", 1, {5, 4}, 67, 5, {1, 1}, P({}, {}, {}, {}, {}), true});
  v.push_back({"2d_all_features",
               2,
               {6, 7},
               6,
               9,
               {3, 2},
               P({2, 1}, {2, -1}, {0, 3}, {1, 2}, {2, 1}, 3, true),
               true});
  v.push_back({"2d_many_out_channels", 1, {5, 6}, 7, 150, {2, 2}, P({}, {0}, {1}, {}, {}), true});
  // ---- 3-D
  v.push_back({"3d_3x3x3_pad1", 2, {5, 6, 7}, 3, 4, {3, 3, 3}, P({}, {1}, {1}, {}, {}), true});
  v.push_back({"3d_stride2_kdil_groups2",
               1,
               {7, 9, 6},
               4,
               6,
               {2, 3, 2},
               P({2}, {1, 0, 1}, {0, 2, 1}, {1, 2, 1}, {}, 2),
               false});
  v.push_back({"3d_idil_flip",
               1,
               {3, 4, 3},
               2,
               3,
               {2, 3, 2},
               P({}, {1, 2, 1}, {1, 2, 2}, {}, {2, 1, 3}, 1, true),
               true});
  v.push_back({"3d_depthwise_mult2",
               2,
               {3, 5, 5},
               3,
               6,
               {1, 3, 3},
               P({}, {0, 1, 1}, {0, 1, 1}, {}, {}, 3),
               true});
  v.push_back(
      {"3d_long_reduction", 1, {3, 3, 3}, 700, 3, {3, 3, 3}, P({}, {1}, {1}, {}, {}), true});
  v.push_back({"3d_crop",
               1,
               {6, 5, 6},
               2,
               2,
               {2, 2, 2},
               P({1, 2, 1}, {-1, 0, 1}, {0, -1, -2}, {}, {}),
               true});
  // ---- Strided views
  {
    ConvCase c{"2d_x_channel_slice", 2, {6, 7}, 5, 6, {3, 3}, P({}, {1}, {1}, {}, {}), true};
    c.x_layout = Layout{{}, {0, 1, 2, 3}, 2};  // x[..., 0:5] of a (n, 7, 9, 8) tensor
    c.out_layout = Layout{{}, {0, 0, 1, 2}, 1};
    v.push_back(c);
  }
  {
    ConvCase c{
        "2d_x_channels_first", 2, {6, 5}, 4, 3, {3, 2}, P({1, 2}, {1, 0}, {1, 1}, {}, {}), false};
    c.x_layout = Layout{{0, 3, 1, 2}, {}, 0};  // stored (n, c, h, w)
    c.w_layout = Layout{{3, 1, 2, 0}, {}, 0};  // stored (c, kh, kw, o)
    c.out_layout = Layout{{0, 3, 1, 2}, {}, 0};
    v.push_back(c);
  }
  {
    ConvCase c{"1d_x_slice_groups", 1, {15}, 6, 4, {3}, P({2}, {1}, {1}, {}, {}, 2), true};
    c.x_layout = Layout{{}, {0, 3, 2}, 5};
    c.w_layout = Layout{{}, {1, 1, 1}, 3};
    v.push_back(c);
  }
  {
    ConvCase c{
        "3d_x_permuted", 1, {4, 3, 5}, 3, 4, {2, 2, 3}, P({}, {0, 1, 1}, {1, 0, 1}, {}, {}), true};
    c.x_layout = Layout{{4, 2, 0, 3, 1}, {0, 1, 0, 2, 1}, 4};
    v.push_back(c);
  }
  return v;
}

ConvCase find_case(const std::string& name) {
  for (const ConvCase& c : conv_cases())
    if (name == c.name) return c;
  ADD_FAILURE() << "no conv case " << name;
  return conv_cases().front();
}

struct DtypeCase {
  DType in, out;
};
const DtypeCase kDtypes[] = {{DType::bf16, DType::bf16},
                             {DType::bf16, DType::f32},
                             {DType::f16, DType::f16},
                             {DType::f16, DType::f32},
                             {DType::f32, DType::f32}};

std::vector<int64_t> x_shape_of(const ConvCase& c) {
  std::vector<int64_t> s{c.batch};
  s.insert(s.end(), c.in.begin(), c.in.end());
  s.push_back(c.c);
  return s;
}
std::vector<int64_t> w_shape_of(const ConvCase& c) {
  std::vector<int64_t> s{c.o};
  s.insert(s.end(), c.kernel.begin(), c.kernel.end());
  s.push_back(c.c / c.params.groups);
  return s;
}

uint64_t seed_of(const std::string& name, int salt) {
  uint64_t h = 1469598103934665603ull;
  for (char ch : name)
    h = (h ^ static_cast<uint64_t>(static_cast<unsigned char>(ch))) * 1099511628211ull;
  return h + static_cast<uint64_t>(salt) * 7919u;
}

struct ConvRun {
  HostTensor x, w, bias, out;
  bool has_bias = false;
  gemmkit::CallInfo info;
};

ConvRun make_run(const ConvCase& c, DtypeCase dt) {
  ConvRun r;
  const std::string base = std::string(c.name) + gemmkit::dtype_name(dt.in);
  r.x = gemmkit_test::random_tensor(dt.in, x_shape_of(c), seed_of(base, 1), c.x_layout);
  r.w = gemmkit_test::random_tensor(dt.in, w_shape_of(c), seed_of(base, 2), c.w_layout);
  r.has_bias = c.bias;
  if (c.bias) r.bias = gemmkit_test::random_tensor(dt.in, {c.o}, seed_of(base, 3));
  const std::vector<int64_t> out_shape = gemmkit::conv_output_shape(r.x.shape, r.w.shape, c.params);
  r.out = gemmkit_test::make_tensor(dt.out, out_shape, c.out_layout);
  return r;
}

void call_conv(ConvRun& r, const ConvParams& params, const char* algo = "auto") {
  r.out.poison();
  std::optional<gemmkit::Tensor> bias;
  if (r.has_bias) bias = r.bias.view();
  gemmkit::ConvOptions options;
  options.info = &r.info;
  options.algo = algo;
  gemmkit::conv(r.x.view(), r.w.view(), bias, r.out.view(), params, options);
}

std::string case_label(const ConvCase& c, DtypeCase dt) {
  return std::string(c.name) + "_" + gemmkit::dtype_name(dt.in) + "_to_" +
         gemmkit::dtype_name(dt.out);
}

// ---- The parameter matrix against the literal definition ----

class CpuConvMatrix : public ::testing::TestWithParam<std::tuple<int, int>> {};

// `auto` runs the FMA chain on the avx2 and avx512 ISAs (the 8-lane order otherwise).
bool auto_is_fma() {
  return gemmkit::cpu::fma_path_isa(gemmkit::cpu::active_isa());
}

// Every ISA this machine has, both algos: within the bound of the order that ran.
TEST_P(CpuConvMatrix, MatchesDoubleReference) {
  const ConvCase c = conv_cases()[static_cast<std::size_t>(std::get<0>(GetParam()))];
  const DtypeCase dt = kDtypes[std::get<1>(GetParam())];
  for (const gemmkit::cpu::Isa isa : gemmkit::cpu::available_isas()) {
    gemmkit::cpu::set_isa_override(static_cast<int>(isa));
    for (const char* algo : {"auto", "reference"}) {
      const bool fma = gemmkit::cpu::fma_path_isa(isa) && std::string(algo) == "auto";
      ConvRun r = make_run(c, dt);
      call_conv(r, c.params, algo);
      EXPECT_EQ(r.info.backend, "cpu");
      EXPECT_EQ(r.info.kernel, fma ? "cpu.conv.patch-gemm.fma" : "cpu.conv.patch-gemm");
      EXPECT_NE(r.info.reason.find(gemmkit::cpu::isa_name(isa)), std::string::npos);
      const Reference ref =
          gemmkit_test::reference_conv(r.x, r.w, r.has_bias ? &r.bias : nullptr, c.params);
      gemmkit_test::check_output(
          r.out, ref, case_label(c, dt) + " " + gemmkit::cpu::isa_name(isa) + " " + algo, 5, fma);
    }
  }
  gemmkit::cpu::set_isa_override(-1);
}

std::string matrix_name(const ::testing::TestParamInfo<std::tuple<int, int>>& p) {
  return case_label(conv_cases()[static_cast<std::size_t>(std::get<0>(p.param))],
                    kDtypes[std::get<1>(p.param)]);
}

INSTANTIATE_TEST_SUITE_P(Cases, CpuConvMatrix,
                         ::testing::Combine(::testing::Range(0,
                                                             static_cast<int>(conv_cases().size())),
                                            ::testing::Range(0, 5)),
                         matrix_name);

// ---- Random configurations (fixed seed): every feature combined, random layouts ----

Layout random_layout(std::mt19937_64& rng, int rank) {
  Layout l;
  l.order.resize(static_cast<std::size_t>(rank));
  for (int i = 0; i < rank; ++i) l.order[static_cast<std::size_t>(i)] = i;
  if (rng() % 2) std::shuffle(l.order.begin(), l.order.end(), rng);
  if (rng() % 2) {
    l.pad.resize(static_cast<std::size_t>(rank));
    for (auto& p : l.pad) p = static_cast<int64_t>(rng() % 3);
  }
  l.offset = static_cast<int64_t>(rng() % 4);
  return l;
}

TEST(CpuConvRandom, MatchesDoubleReference) {
  std::mt19937_64 rng(20240601);
  const auto uni = [&](int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
  };
  int done = 0;
  while (done < 1000) {
    const int S = static_cast<int>(uni(1, 3));
    ConvCase c{"random", uni(1, 2), {}, 0, 0, {}, ConvParams{}, rng() % 2 == 0};
    const int64_t groups = uni(1, 3);
    c.c = groups * uni(1, 4);
    c.o = groups * uni(1, 4);
    c.params.groups = groups;
    c.params.flip = rng() % 2 == 0;
    bool ok = true;
    for (int d = 0; d < S; ++d) {
      const int64_t in = uni(1, S == 3 ? 5 : 9), k = uni(1, 3), st = uni(1, 3), kd = uni(1, 3),
                    id = uni(1, 3), lo = uni(-2, 3), hi = uni(-2, 3);
      c.in.push_back(in);
      c.kernel.push_back(k);
      c.params.stride.push_back(st);
      c.params.kernel_dilation.push_back(kd);
      c.params.input_dilation.push_back(id);
      c.params.padding_lo.push_back(lo);
      c.params.padding_hi.push_back(hi);
      if ((in - 1) * id + 1 + lo + hi < (k - 1) * kd + 1) ok = false;
    }
    if (!ok) continue;
    c.x_layout = random_layout(rng, S + 2);
    c.w_layout = random_layout(rng, S + 2);
    c.out_layout = random_layout(rng, S + 2);
    const DtypeCase dt = kDtypes[rng() % 5];
    ConvRun r = make_run(c, dt);
    call_conv(r, c.params);
    std::ostringstream label;
    label << "random config " << done << " (" << gemmkit::dtype_name(dt.in) << "->"
          << gemmkit::dtype_name(dt.out) << ", S=" << S << ", c=" << c.c << ", o=" << c.o
          << ", groups=" << groups << ", flip=" << c.params.flip << ")";
    const int64_t bad = gemmkit_test::check_output(
        r.out, gemmkit_test::reference_conv(r.x, r.w, r.has_bias ? &r.bias : nullptr, c.params),
        label.str(), 2, auto_is_fma());
    if (bad) break;  // one reported configuration is enough
    ++done;
  }
}

// ---- Transposed convolution: conv_transpose_params vs a direct scatter formula ----

struct TransposeCase {
  const char* name;
  int64_t batch;
  std::vector<int64_t> in;
  int64_t c, o;
  std::vector<int64_t> kernel, stride, padding, output_padding, dilation;
  int64_t groups;
  bool bias;
};

std::vector<TransposeCase> transpose_cases() {
  return {
      {"t1d_s2_p1_op1", 2, {7}, 3, 4, {3}, {2}, {1}, {1}, {1}, 1, true},
      {"t1d_k4_s3_p2_d2", 1, {6}, 2, 5, {4}, {3}, {2}, {0}, {2}, 1, false},
      {"t2d_3x3_s2_p1_op1", 2, {5, 6}, 4, 6, {3, 3}, {2}, {1}, {1}, {1}, 1, true},
      {"t2d_mixed", 1, {4, 5}, 3, 2, {2, 3}, {2, 3}, {0, 1}, {1, 2}, {1, 2}, 1, true},
      {"t2d_groups2", 2, {4, 4}, 6, 4, {3, 3}, {2}, {0}, {0}, {1}, 2, true},
      {"t2d_depthwise", 1, {5, 4}, 5, 5, {3, 3}, {2}, {1}, {1}, {1}, 5, false},
      {"t2d_stride1_p2", 1, {6, 5}, 3, 3, {5, 3}, {1}, {2, 1}, {0}, {1}, 1, true},
      {"t3d_mixed", 1, {3, 4, 3}, 2, 3, {2, 3, 2}, {2, 1, 2}, {0, 1, 1}, {1, 0, 0}, {1}, 1, true},
      {"t2d_large_stride", 2, {3, 3}, 2, 3, {3, 2}, {4, 3}, {1, 0}, {2, 1}, {1}, 1, true},
  };
}

class CpuConvTranspose : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(CpuConvTranspose, MatchesScatterFormula) {
  const TransposeCase t = transpose_cases()[static_cast<std::size_t>(std::get<0>(GetParam()))];
  const DType dt = std::get<1>(GetParam()) == 0   ? DType::bf16
                   : std::get<1>(GetParam()) == 1 ? DType::f16
                                                  : DType::f32;
  const int S = static_cast<int>(t.in.size());
  const ConvParams params = gemmkit::conv_transpose_params(t.kernel, t.stride, t.padding,
                                                           t.output_padding, t.dilation, t.groups);
  std::vector<int64_t> xs{t.batch};
  xs.insert(xs.end(), t.in.begin(), t.in.end());
  xs.push_back(t.c);
  std::vector<int64_t> ws{t.o};
  ws.insert(ws.end(), t.kernel.begin(), t.kernel.end());
  ws.push_back(t.c / t.groups);
  // With one group the weight is read in PyTorch's layout (c, o, kernel...) through a permuted
  // view, as a caller would pass it.
  Layout wl;
  if (t.groups == 1) {
    wl.order.push_back(S + 1);
    wl.order.push_back(0);
    for (int d = 0; d < S; ++d) wl.order.push_back(1 + d);
  }
  const std::string base = std::string(t.name) + gemmkit::dtype_name(dt);
  HostTensor x = gemmkit_test::random_tensor(dt, xs, seed_of(base, 1));
  HostTensor w = gemmkit_test::random_tensor(dt, ws, seed_of(base, 2), wl);
  HostTensor bias = gemmkit_test::random_tensor(dt, {t.o}, seed_of(base, 3));
  const std::vector<int64_t> out_shape = gemmkit::conv_output_shape(xs, ws, params);
  // PyTorch's output size: (in - 1) * stride - 2 * padding + dilation * (k - 1) + op + 1.
  for (int d = 0; d < S; ++d) {
    const auto g = [d](const std::vector<int64_t>& v) {
      return v.size() == 1 ? v[0] : v[static_cast<std::size_t>(d)];
    };
    EXPECT_EQ(out_shape[static_cast<std::size_t>(d + 1)],
              (t.in[static_cast<std::size_t>(d)] - 1) * g(t.stride) - 2 * g(t.padding) +
                  g(t.dilation) * (t.kernel[static_cast<std::size_t>(d)] - 1) +
                  g(t.output_padding) + 1);
  }
  HostTensor out = gemmkit_test::make_tensor(dt, out_shape);
  out.poison();
  std::optional<gemmkit::Tensor> b;
  if (t.bias) b = bias.view();
  gemmkit::conv(x.view(), w.view(), b, out.view(), params);
  const HostTensor* bp = t.bias ? &bias : nullptr;
  const std::string label = base;
  gemmkit_test::check_output(out,
                             gemmkit_test::reference_conv_transpose_scatter(
                                 x, w, bp, t.stride, t.padding, t.dilation, t.groups, out_shape),
                             label + " (scatter)", 5, auto_is_fma());
  gemmkit_test::check_output(out, gemmkit_test::reference_conv(x, w, bp, params),
                             label + " (conv_general)", 5, auto_is_fma());
}

std::string transpose_name(const ::testing::TestParamInfo<std::tuple<int, int>>& p) {
  static const char* const kNames[] = {"bf16", "f16", "f32"};
  return std::string(transpose_cases()[static_cast<std::size_t>(std::get<0>(p.param))].name) + "_" +
         kNames[std::get<1>(p.param)];
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CpuConvTranspose,
    ::testing::Combine(::testing::Range(0, static_cast<int>(transpose_cases().size())),
                       ::testing::Range(0, 3)),
    transpose_name);

// ---- The documented fp32 summation order, bit for bit ----

// Emulates docs/numerics.md for conv: r enumerates the taps in row-major order (tap t reads the
// input at q = p * stride + t * kernel_dilation - padding_lo, zero when outside or between
// dilated elements, and multiplies weight element t, or K - 1 - t per dim when flipped), and
// within a tap the group's channels ascending.
// `algo` on the active ISA: the FMA chain for auto on avx2, else the 8-lane order.
void expect_documented_conv_bits(const ConvCase& c, DtypeCase dt, const char* algo) {
  const bool fma = auto_is_fma() && std::string(algo) == "auto";
  ConvRun r = make_run(c, dt);
  call_conv(r, c.params, algo);
  const int S = static_cast<int>(c.in.size());
  const gemmkit_test::ConvDims pd = gemmkit_test::expand_params(c.params, S);
  const int64_t groups = c.params.groups, cpg = c.c / groups, opg = c.o / groups;
  int64_t in[3] = {1, 1, 1}, k[3] = {1, 1, 1}, out[3] = {1, 1, 1};
  for (int d = 0; d < S; ++d) {
    in[d] = c.in[static_cast<std::size_t>(d)];
    k[d] = c.kernel[static_cast<std::size_t>(d)];
    out[d] = r.out.shape[static_cast<std::size_t>(d + 1)];
  }
  const auto fval = [](const HostTensor& t, const std::vector<int64_t>& idx) {
    return static_cast<float>(t.at(idx));
  };
  int64_t mismatches = 0;
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t p0 = 0; p0 < out[0]; ++p0)
      for (int64_t p1 = 0; p1 < out[1]; ++p1)
        for (int64_t p2 = 0; p2 < out[2]; ++p2)
          for (int64_t oc = 0; oc < c.o; ++oc) {
            const int64_t g = oc / opg;
            const int64_t p[3] = {p0, p1, p2};
            std::vector<float> xs, ws;
            for (int64_t t0 = 0; t0 < k[0]; ++t0)
              for (int64_t t1 = 0; t1 < k[1]; ++t1)
                for (int64_t t2 = 0; t2 < k[2]; ++t2) {
                  const int64_t t[3] = {t0, t1, t2};
                  bool valid = true;
                  std::vector<int64_t> xi{b}, wi{oc};
                  for (int d = 0; d < S; ++d) {
                    const int64_t q = p[d] * pd.stride[d] + t[d] * pd.kdil[d] - pd.pad_lo[d];
                    if (q < 0 || q > (in[d] - 1) * pd.idil[d] || q % pd.idil[d] != 0) valid = false;
                    xi.push_back(valid ? q / pd.idil[d] : 0);
                    wi.push_back(c.params.flip ? k[d] - 1 - t[d] : t[d]);
                  }
                  for (int64_t ci = 0; ci < cpg; ++ci) {
                    std::vector<int64_t> xii = xi, wii = wi;
                    xii.push_back(g * cpg + ci);
                    wii.push_back(ci);
                    xs.push_back(valid ? fval(r.x, xii) : 0.0f);
                    ws.push_back(fval(r.w, wii));
                  }
                }
            const float bias = r.has_bias ? fval(r.bias, {oc}) : 0.0f;
            const float v = fma ? gemmkit_test::fma_chain_dot(xs, ws, bias)
                                : gemmkit_test::documented_dot(xs, ws, bias);
            std::vector<int64_t> oi{b};
            for (int d = 0; d < S; ++d) oi.push_back(p[d]);
            oi.push_back(oc);
            const unsigned char* got =
                r.out.storage.data() +
                r.out.storage_index(oi) * static_cast<int64_t>(gemmkit_test::esize(dt.out));
            bool same;
            if (dt.out == DType::f32) {
              same = std::memcmp(got, &v, 4) == 0;
            } else {
              const uint16_t want =
                  dt.out == DType::bf16 ? gemmkit::float_to_bf16(v) : gemmkit::float_to_f16(v);
              same = std::memcmp(got, &want, 2) == 0;
            }
            if (!same && ++mismatches <= 3)
              ADD_FAILURE() << case_label(c, dt) << ": element " << oc << " at batch " << b
                            << " differs from the documented order";
          }
  EXPECT_EQ(mismatches, 0) << case_label(c, dt);
}

TEST(CpuConvOrder, BitwiseDocumentedOrder) {
  for (const char* name : {"1d_idil3_flip", "2d_all_features", "2d_medium_threads", "3d_idil_flip",
                           "2d_x_channels_first", "2d_depthwise_mult2", "3d_crop",
                           "3d_long_reduction", "2d_many_out_channels"}) {
    const ConvCase c = find_case(name);
    for (const gemmkit::cpu::Isa isa : gemmkit::cpu::available_isas()) {
      gemmkit::cpu::set_isa_override(static_cast<int>(isa));
      for (const char* algo : {"auto", "reference"}) {
        expect_documented_conv_bits(c, {DType::f32, DType::f32}, algo);
        expect_documented_conv_bits(c, {DType::bf16, DType::bf16}, algo);
        expect_documented_conv_bits(c, {DType::f16, DType::f32}, algo);
      }
    }
    gemmkit::cpu::set_isa_override(-1);
  }
}

// ---- Determinism ----

ConvCase medium_case() {
  return {"det", 2, {13, 11}, 24, 40, {3, 3}, P({1}, {1}, {2}, {1, 2}, {}), true};
}

class ThreadCountGuard {
 public:
  ~ThreadCountGuard() {
    gemmkit::cpu::set_num_threads(0);
    gemmkit::cpu::set_generic_kernels(false);
  }
};

TEST(CpuConvDeterminism, RepeatedCallsBitwiseEqual) {
  const ConvCase c = medium_case();
  for (DtypeCase dt : kDtypes) {
    ConvRun a = make_run(c, dt);
    call_conv(a, c.params);
    HostTensor first = a.out;
    call_conv(a, c.params);
    EXPECT_TRUE(gemmkit_test::same_bits(first, a.out)) << case_label(c, dt);
  }
}

TEST(CpuConvDeterminism, ThreadCountsAndKernelVariantsBitwiseEqual) {
  ThreadCountGuard guard;
  for (const ConvCase& c :
       {medium_case(), find_case("2d_all_features"), find_case("3d_long_reduction")}) {
    for (DtypeCase dt : {kDtypes[0], kDtypes[4]}) {
      ConvRun r = make_run(c, dt);
      gemmkit::cpu::set_num_threads(1);
      call_conv(r, c.params);
      const HostTensor one = r.out;
      for (int threads : {2, 3, 7}) {
        gemmkit::cpu::set_num_threads(threads);
        EXPECT_EQ(gemmkit::cpu::num_threads(), threads);
        call_conv(r, c.params);
        EXPECT_TRUE(gemmkit_test::same_bits(one, r.out))
            << case_label(c, dt) << " threads " << threads;
      }
      // The reference algo: the same bits on every ISA (auto on generic is that order).
      call_conv(r, c.params, "reference");
      const HostTensor ref = r.out;
      gemmkit::cpu::set_generic_kernels(true);
      call_conv(r, c.params, "reference");
      EXPECT_TRUE(gemmkit_test::same_bits(ref, r.out)) << case_label(c, dt) << " generic reference";
      call_conv(r, c.params);
      EXPECT_NE(r.info.reason.find("generic"), std::string::npos) << r.info.reason;
      EXPECT_TRUE(gemmkit_test::same_bits(ref, r.out)) << case_label(c, dt) << " generic auto";
      gemmkit::cpu::set_generic_kernels(false);
      // auto on every ISA of the FMA path (avx2, avx512): the same bits.
      std::vector<HostTensor> fma_outs;
      for (const gemmkit::cpu::Isa isa : gemmkit::cpu::available_isas()) {
        if (!gemmkit::cpu::fma_path_isa(isa)) continue;
        gemmkit::cpu::set_isa_override(static_cast<int>(isa));
        call_conv(r, c.params);
        EXPECT_EQ(r.info.kernel, "cpu.conv.patch-gemm.fma") << gemmkit::cpu::isa_name(isa);
        fma_outs.push_back(r.out);
        EXPECT_TRUE(gemmkit_test::same_bits(fma_outs.front(), r.out))
            << case_label(c, dt) << " auto on " << gemmkit::cpu::isa_name(isa);
      }
      gemmkit::cpu::set_isa_override(-1);
    }
  }
}

TEST(CpuConvDeterminism, ConcurrentCallersBitwiseEqual) {
  const ConvCase c = medium_case();
  ConvRun want = make_run(c, kDtypes[0]);
  call_conv(want, c.params);
  std::vector<ConvRun> runs;
  for (int i = 0; i < 3; ++i) runs.push_back(make_run(c, kDtypes[0]));
  std::vector<std::thread> threads;
  std::vector<int> ok(runs.size(), 1);
  for (std::size_t i = 0; i < runs.size(); ++i)
    threads.emplace_back([&, i] {
      for (int rep = 0; rep < 5; ++rep) {
        call_conv(runs[i], c.params);
        if (!gemmkit_test::same_bits(runs[i].out, want.out)) ok[i] = 0;
      }
    });
  for (auto& t : threads) t.join();
  for (std::size_t i = 0; i < runs.size(); ++i) EXPECT_TRUE(ok[i]) << "caller " << i;
}

// ---- Special values ----

TEST(CpuConvSpecial, NonFiniteInputsPropagate) {
  ConvCase c{"nan", 1, {6}, 3, 2, {3}, P({}, {1}, {1}, {}, {}), false};
  ConvRun r = make_run(c, kDtypes[4]);
  // x[0, 2, 1] = NaN: outputs at positions 1..3 (taps covering input 2) become NaN.
  const float nan = std::nanf("");
  std::memcpy(r.x.storage.data() + r.x.storage_index({0, 2, 1}) * 4, &nan, 4);
  call_conv(r, c.params);
  for (int64_t p = 0; p < 6; ++p)
    for (int64_t oc = 0; oc < 2; ++oc) {
      const bool covered = p >= 1 && p <= 3;
      EXPECT_EQ(std::isnan(r.out.at({0, p, oc})), covered) << p << " " << oc;
    }
}

}  // namespace
