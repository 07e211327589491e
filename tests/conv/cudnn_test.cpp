// Host tests of the transposed convolution's cuDNN form (cudnn/plan.h: cudnn_dgrad_form,
// dgrad_weight_source): which problems have one, its strides and paddings for the suite row, and
// an emulation, in double, of cuDNN's backward-data over exactly the parameters and the packed
// filter the cuDNN path hands it, against the double reference of conv_general. Runs without a
// GPU and without cuDNN.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/problems.h"
#include "conv/problem_spec.h"
#include "cuda/conv/common/request.h"
#include "cuda/conv/cudnn/plan.h"
#include "gemmkit/gemmkit.h"
#include "reference_double.h"

namespace gemmkit::cuda::conv_impl {
namespace {

using detail::ConvProblem;
using gemmkit_test::HostTensor;
using gemmkit_test::make_problem;
using gemmkit_test::Spec;

DeviceDescription with_cudnn() {
  DeviceDescription d{};
  d.cudnn = true;
  d.cudnn_why_not.clear();
  return d;
}

// dx = backward-data(dy = x, W) as cuDNN defines it, over `form` and the packed filter built with
// dgrad_weight_source: dx[n, i, k'] for out's shape.
std::vector<double> emulate_dgrad(const ConvProblem& p, const CudnnDgradForm& form,
                                  const HostTensor& x, const HostTensor& w) {
  const std::vector<double> xd = gemmkit_test::dense(x), wd = gemmkit_test::dense(w);
  const DgradWeightIndex wi = dgrad_weight_index(p);
  const int64_t c = p.in_channels, o = p.out_channels, opg = wi.opg, cpg = wi.cpg;
  // The packed filter W[k][taps][cc] (w is contiguous: its offsets are dense indices).
  std::vector<double> packed(static_cast<std::size_t>(c * wi.taps * opg));
  for (int64_t i = 0; i < static_cast<int64_t>(packed.size()); ++i) {
    packed[static_cast<std::size_t>(i)] = wd[static_cast<std::size_t>(dgrad_weight_source(wi, i))];
  }
  int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1}, kk[3] = {1, 1, 1};
  for (int d = 0; d < p.spatial; ++d) {
    in[d] = p.in_size[d];
    out[d] = p.out_size[d];
    kk[d] = p.kernel_size[d];
  }
  std::vector<double> dx(static_cast<std::size_t>(p.batch * out[0] * out[1] * out[2] * o), 0.0);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t q0 = 0; q0 < in[0]; ++q0)
      for (int64_t q1 = 0; q1 < in[1]; ++q1)
        for (int64_t q2 = 0; q2 < in[2]; ++q2)
          for (int64_t t0 = 0; t0 < kk[0]; ++t0)
            for (int64_t t1 = 0; t1 < kk[1]; ++t1)
              for (int64_t t2 = 0; t2 < kk[2]; ++t2) {
                const int64_t q[3] = {q0, q1, q2}, t[3] = {t0, t1, t2};
                int64_t i[3] = {0, 0, 0}, tap = 0;
                bool inside = true;
                for (int d = 0; d < 3; ++d) {
                  if (d < p.spatial) {
                    i[d] = q[d] * form.stride[d] + t[d] * form.dilation[d] - form.pad_lo[d];
                    if (i[d] < 0 || i[d] >= out[d]) inside = false;
                  }
                  // Convolution mode: cuDNN reverses the filter's taps.
                  const int64_t used = form.cross_correlation ? t[d] : kk[d] - 1 - t[d];
                  tap = tap * kk[d] + used;
                }
                if (!inside) continue;
                for (int64_t k = 0; k < c; ++k) {
                  const double xv = xd[static_cast<std::size_t>(
                      (((b * in[0] + q0) * in[1] + q1) * in[2] + q2) * c + k)];
                  const int64_t g = k / cpg;
                  for (int64_t cc = 0; cc < opg; ++cc) {
                    const double wv =
                        packed[static_cast<std::size_t>((k * wi.taps + tap) * opg + cc)];
                    dx[static_cast<std::size_t>(
                        (((b * out[0] + i[0]) * out[1] + i[1]) * out[2] + i[2]) * o + g * opg +
                        cc)] += xv * wv;
                  }
                }
              }
  return dx;
}

struct DgradCase {
  std::string name;
  std::vector<int64_t> x_shape, w_shape;
  ConvParams params;
};

std::vector<DgradCase> dgrad_cases() {
  std::vector<DgradCase> cases;
  // PyTorch ConvTranspose2d(k 4, stride 2, padding 1): the suite row's form, small.
  cases.push_back({"k4 s2 p1",
                   {2, 5, 6, 8},
                   {6, 4, 4, 8},
                   conv_transpose_params({4, 4}, {2}, {1}, {0}, {1}, 1)});
  cases.push_back({"k3 s2 p1 output_padding 1",
                   {1, 4, 5, 4},
                   {3, 3, 3, 4},
                   conv_transpose_params({3, 3}, {2}, {1}, {1}, {1}, 1)});
  cases.push_back({"k3 s3 p0 dilation 2",
                   {1, 3, 4, 4},
                   {5, 3, 3, 4},
                   conv_transpose_params({3, 3}, {3}, {0}, {0}, {2}, 1)});
  cases.push_back(
      {"groups 2, 1-D", {2, 7, 6}, {4, 5, 3}, conv_transpose_params({5}, {2}, {2}, {1}, {1}, 2)});
  cases.push_back({"3-D k2 s2",
                   {1, 2, 3, 3, 4},
                   {2, 2, 2, 2, 4},
                   conv_transpose_params({2, 2, 2}, {2}, {0}, {0}, {1}, 1)});
  // Without flip (cuDNN's convolution mode reverses the filter instead), asymmetric padding.
  ConvParams noflip = conv_transpose_params({3, 3}, {2}, {1}, {1}, {1}, 1);
  noflip.flip = false;
  noflip.padding_lo = {0, 2};
  cases.push_back({"no flip, asymmetric", {1, 4, 4, 4}, {3, 3, 3, 4}, noflip});
  return cases;
}

// The f32 problem of case k.
ConvProblem problem_of(const DgradCase& k) {
  Spec spec;
  spec.x_shape = k.x_shape;
  spec.w_shape = k.w_shape;
  spec.params = k.params;
  spec.dtype = DType::f32;
  spec.out_dtype = DType::f32;
  return make_problem(spec);
}

// Outputs of the emulation that differ from conv_general's double reference.
int64_t mismatches(const std::vector<double>& got, const gemmkit_test::Reference& ref) {
  int64_t bad = 0;
  for (std::size_t e = 0; e < got.size(); ++e) {
    if (std::fabs(got[e] - ref.value[e]) > 1e-9 * (1.0 + ref.scale[e])) ++bad;
  }
  return bad;
}

TEST(ConvCudnnDgrad, EmulatedBackwardDataEqualsConvGeneral) {
  uint64_t seed = 500;
  for (const DgradCase& k : dgrad_cases()) {
    SCOPED_TRACE(k.name);
    const ConvProblem p = problem_of(k);
    CudnnDgradForm form;
    ASSERT_EQ(cudnn_dgrad_form(p, form), "");
    EXPECT_EQ(form.cross_correlation, k.params.flip);
    const HostTensor x = gemmkit_test::random_tensor(DType::f32, k.x_shape, seed += 7);
    const HostTensor w = gemmkit_test::random_tensor(DType::f32, k.w_shape, seed += 7);
    const gemmkit_test::Reference ref = gemmkit_test::reference_conv(x, w, nullptr, k.params);
    const std::vector<double> got = emulate_dgrad(p, form, x, w);
    ASSERT_EQ(got.size(), ref.value.size());
    EXPECT_EQ(mismatches(got, ref), 0) << "of " << got.size() << " outputs";
  }
}

// The packing kernel's tiled traversal (dgrad_tile, dgrad_packed_index, dgrad_source) writes
// every packed element exactly once, from the element dgrad_weight_source (the proved mapping)
// names: the suite cases, partial tiles with groups, and a strided weight.
TEST(ConvCudnnDgrad, PackingTilesCoverTheMappingOnce) {
  std::vector<DgradWeightIndex> indices;
  for (const DgradCase& k : dgrad_cases()) indices.push_back(dgrad_weight_index(problem_of(k)));
  DgradWeightIndex odd;  // groups 3 of 23 channels, 41 outputs per group, 2x3 taps
  odd.cpg = 23;
  odd.c = 3 * odd.cpg;
  odd.opg = 41;
  odd.taps = 6;
  odd.spatial = 2;
  odd.kernel[0] = 2;
  odd.kernel[1] = 3;
  odd.w_c_stride = 2;  // a strided weight: (o, 2, 3, cpg) with gaps
  odd.w_tap_stride[1] = 2 * odd.cpg + 5;
  odd.w_tap_stride[0] = 3 * odd.w_tap_stride[1] + 7;
  odd.w_o_stride = 2 * odd.w_tap_stride[0] + 11;
  indices.push_back(odd);
  for (const DgradWeightIndex& x : indices) {
    SCOPED_TRACE("c " + std::to_string(x.c) + " cpg " + std::to_string(x.cpg) + " opg " +
                 std::to_string(x.opg) + " taps " + std::to_string(x.taps));
    const int64_t count = x.c * x.taps * x.opg;
    // The scalar kernel's tiles and the vector kernel's (16-bit and 32-bit elements).
    for (const int64_t edge :
         {int64_t{kDgradTile}, int64_t{dgrad_vector_edge(2)}, int64_t{dgrad_vector_edge(4)}}) {
      SCOPED_TRACE("edge " + std::to_string(edge));
      std::vector<int> written(static_cast<std::size_t>(count), 0);
      for (int64_t t = 0; t < dgrad_tiles(x, edge); ++t) {
        const DgradTile d = dgrad_tile(x, t, edge);
        for (int64_t kk = d.kk0; kk < std::min(x.cpg, d.kk0 + edge); ++kk) {
          for (int64_t cc = d.cc0; cc < std::min(x.opg, d.cc0 + edge); ++cc) {
            const int64_t i = dgrad_packed_index(x, d, kk, cc);
            ASSERT_TRUE(i >= 0 && i < count) << i;
            ++written[static_cast<std::size_t>(i)];
            ASSERT_EQ(dgrad_source(x, d, kk, cc), dgrad_weight_source(x, i)) << "packed " << i;
          }
        }
      }
      for (int64_t i = 0; i < count; ++i) {
        ASSERT_EQ(written[static_cast<std::size_t>(i)], 1) << i;
      }
    }
  }
}

// The suite row's weight (o 128, 4x4, c 256), contiguous OHWI, as the index of its packing.
DgradWeightIndex suite_row_index() {
  DgradWeightIndex x;
  x.c = x.cpg = 256;
  x.opg = 128;
  x.taps = 16;
  x.spatial = 2;
  x.kernel[0] = x.kernel[1] = 4;
  x.w_c_stride = 1;
  x.w_tap_stride[1] = 256;
  x.w_tap_stride[0] = 4 * 256;
  x.w_o_stride = 16 * 256;
  return x;
}

TEST(ConvCudnnDgrad, WeightReadInPlaceOnlyWhenItIsThePackedFilter) {
  DgradWeightIndex x = suite_row_index();
  EXPECT_FALSE(dgrad_weight_in_place(x));  // OHWI: must be packed
  // PyTorch's (c, o, 4, 4) channels-last, i.e. memory (c, 4, 4, o), viewed as (o, 4, 4, c).
  x.w_o_stride = 1;
  x.w_tap_stride[1] = 128;
  x.w_tap_stride[0] = 4 * 128;
  x.w_c_stride = 16 * 128;
  EXPECT_TRUE(dgrad_weight_in_place(x));
  // Then every packed element is its own source: the packing would be the identity.
  for (int64_t i = 0; i < x.c * x.taps * x.opg; i += 97) {
    ASSERT_EQ(dgrad_weight_source(x, i), i);
  }
  DgradWeightIndex gap = x;  // rows of the view padded: not the packed filter
  gap.w_c_stride += 8;
  EXPECT_FALSE(dgrad_weight_in_place(gap));
  DgradWeightIndex swapped = x;  // taps in the other order
  std::swap(swapped.w_tap_stride[0], swapped.w_tap_stride[1]);
  EXPECT_FALSE(dgrad_weight_in_place(swapped));
  DgradWeightIndex grouped = x;  // two groups never share W's layout with a strided view
  grouped.cpg = 128;
  EXPECT_FALSE(dgrad_weight_in_place(grouped));
  // A unit dim's stride is free: 1x1 kernel, any tap strides.
  DgradWeightIndex unit = x;
  unit.taps = 1;
  unit.kernel[0] = unit.kernel[1] = 1;
  unit.w_tap_stride[0] = 12345;
  unit.w_tap_stride[1] = 7;
  unit.w_c_stride = 128;
  EXPECT_TRUE(dgrad_weight_in_place(unit));
}

TEST(ConvCudnnDgrad, VectorPackingNeedsWholeAlignedVectors) {
  const DgradWeightIndex x = suite_row_index();
  EXPECT_TRUE(dgrad_vector_fits(x, 2, 256));
  EXPECT_TRUE(dgrad_vector_fits(x, 4, 16));
  EXPECT_FALSE(dgrad_vector_fits(x, 2, 8));  // w only 8-byte aligned
  DgradWeightIndex odd_o = x;                // 8-element vectors would cross cc rows
  odd_o.opg = 100;
  EXPECT_FALSE(dgrad_vector_fits(odd_o, 2, 256));
  EXPECT_TRUE(dgrad_vector_fits(odd_o, 4, 256));  // 4-element vectors fit 100
  DgradWeightIndex strided_c = x;
  strided_c.w_c_stride = 2;
  EXPECT_FALSE(dgrad_vector_fits(strided_c, 2, 256));
  DgradWeightIndex odd_tap = x;
  odd_tap.w_tap_stride[1] = 260 + 1;
  EXPECT_FALSE(dgrad_vector_fits(odd_tap, 2, 256));
  DgradWeightIndex odd_c = x;  // groups of 12 channels: a vector would cross a group
  odd_c.cpg = 12;
  odd_c.c = 48;
  EXPECT_FALSE(dgrad_vector_fits(odd_c, 2, 256));
  EXPECT_TRUE(dgrad_vector_fits(odd_c, 4, 256));
}

TEST(ConvCudnnDgrad, TheModelCatchesAWrongPadding) {
  // The emulation with P_lo off by one disagrees with conv_general: the test can fail.
  const DgradCase k = dgrad_cases()[0];
  const ConvProblem p = problem_of(k);
  CudnnDgradForm form;
  ASSERT_EQ(cudnn_dgrad_form(p, form), "");
  form.pad_lo[0] += 1;
  const HostTensor x = gemmkit_test::random_tensor(DType::f32, k.x_shape, 11);
  const HostTensor w = gemmkit_test::random_tensor(DType::f32, k.w_shape, 12);
  const gemmkit_test::Reference ref = gemmkit_test::reference_conv(x, w, nullptr, k.params);
  EXPECT_GT(mismatches(emulate_dgrad(p, form, x, w), ref), 0);
}

TEST(ConvCudnnDgrad, FormOfTheSuiteRowAndWhatHasNone) {
  // convtranspose2d-k4s2-256 (conv-models.csv): n1 128x128 c256 -> o128, k4, pad 2, idil 2, flip.
  Spec row;
  row.x_shape = {1, 128, 128, 256};
  row.w_shape = {128, 4, 4, 256};
  row.params.padding_lo = {2};
  row.params.padding_hi = {2};
  row.params.input_dilation = {2};
  row.params.flip = true;
  const ConvProblem p = make_problem(row);
  CudnnDgradForm form;
  ASSERT_EQ(cudnn_dgrad_form(p, form), "");
  for (int d = 0; d < 2; ++d) {
    EXPECT_EQ(form.stride[d], 2);
    EXPECT_EQ(form.dilation[d], 1);
    EXPECT_EQ(form.pad_lo[d], 1);
    EXPECT_EQ(form.pad_hi[d], 1);
  }
  EXPECT_TRUE(form.cross_correlation);
  ConvConfig c;
  EXPECT_EQ(why_not_cudnn(p, with_cudnn(), kDefaultWorkspaceBytes, c), "");
  EXPECT_TRUE(c.cudnn_dgrad);
  EXPECT_FALSE(c.dgrad_weight_in_place);
  EXPECT_EQ(c.weight_t_bytes, 128 * 16 * 256 * 2);
  EXPECT_GE(c.lt_offset, c.weight_t_offset + c.weight_t_bytes);
  // The same weight handed over as PyTorch stores it, (c, o, 4, 4) channels-last: read in place,
  // nothing copied into the workspace.
  {
    using gemmkit::Tensor;
    const gemmkit::Device gpu = gemmkit::Device::cuda(0);
    const Tensor w_view = Tensor::strided(gemmkit_test::fake(0x20000000), DType::bf16, gpu,
                                          {128, 4, 4, 256}, {1, 4 * 128, 128, 16 * 128});
    const ConvProblem in_place = gemmkit_test::conv_problem(
        Tensor::contiguous(gemmkit_test::fake(0x10000000), DType::bf16, gpu, row.x_shape), w_view,
        std::nullopt,
        Tensor::contiguous(gemmkit_test::fake(0x40000000), DType::bf16, gpu, {1, 256, 256, 128}),
        row.params);
    ConvConfig ci;
    EXPECT_EQ(why_not_cudnn(in_place, with_cudnn(), kDefaultWorkspaceBytes, ci), "");
    EXPECT_TRUE(ci.cudnn_dgrad);
    EXPECT_TRUE(ci.dgrad_weight_in_place);
    EXPECT_EQ(ci.weight_t_bytes, 0);
    EXPECT_EQ(ci.lt_offset, 0);
  }
  // Stride with input dilation, padding beyond the kernel's reach: no form, a reason.
  Spec strided = row;
  strided.params.stride = {2};
  c = ConvConfig{};
  EXPECT_NE(
      why_not_cudnn(make_problem(strided), with_cudnn(), kDefaultWorkspaceBytes, c).find("stride"),
      std::string::npos);
  Spec wide = row;
  wide.params.padding_lo = {4};
  c = ConvConfig{};
  EXPECT_NE(
      why_not_cudnn(make_problem(wide), with_cudnn(), kDefaultWorkspaceBytes, c).find("reach"),
      std::string::npos);
  // A forward convolution keeps the forward operation.
  Spec fwd;
  fwd.x_shape = {1, 16, 16, 32};
  fwd.w_shape = {32, 3, 3, 32};
  c = ConvConfig{};
  EXPECT_EQ(why_not_cudnn(make_problem(fwd), with_cudnn(), kDefaultWorkspaceBytes, c), "");
  EXPECT_FALSE(c.cudnn_dgrad);
  EXPECT_EQ(c.weight_t_bytes, 0);
}

}  // namespace
}  // namespace gemmkit::cuda::conv_impl
