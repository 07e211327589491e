// Host tests of the GEMM paths (gemm/plan.h, gemm/layout.h): a host emulation of the 1x1 and
// unfold + GEMM paths (unfold_source and gemm_call, the very functions the kernels and the
// cuBLASLt calls use) against the double reference, and the unfold's vector reads against scalar
// ones. Runs without a GPU and without CUDA.
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
#include "cuda/conv/common/operands.h"
#include "cuda/conv/gemm/layout.h"
#include "cuda/conv/select.h"
#include "gemmkit/gemmkit.h"
#include "reference_double.h"

namespace gemmkit::cuda::conv_impl {
namespace {

// ---- Host emulation of the GEMM paths -------------------------------------------------------

// Runs a GEMM-path configuration on the host with f32 tensors: the unfold through
// unfold_source (as gemm/unfold.cuh), the batched column-major GEMM through gemm_call's
// operands (as the cuBLASLt calls), chunk by chunk; accumulates in double.
void emulate_gemm_path(const ConvProblem& p, const ConvConfig& c) {
  const ConvGeometry g = normalize(p);
  const auto* x = static_cast<const float*>(p.x.data);
  const auto* w = static_cast<const float*>(p.weight.data);
  const auto* bias = static_cast<const float*>(p.has_bias ? p.bias.data : nullptr);
  auto* out = static_cast<float*>(p.out.data);
  const int64_t positions = p.out_positions();
  std::vector<float> unfold(static_cast<std::size_t>(c.chunk_rows * c.unfold_row_elements));
  std::vector<float> scratch(static_cast<std::size_t>(c.scratch_bytes / 4));
  for (int64_t row0 = 0; row0 < positions; row0 += c.chunk_rows) {
    const int64_t rows = std::min(c.chunk_rows, positions - row0);
    const GemmCall call = gemm_call(p, c, row0, rows);
    const float* b = x + call.b_offset;
    if (c.path == ConvPath::unfold_gemm) {
      std::fill(unfold.begin(), unfold.end(), -12345.0f);  // every element must be written
      const int64_t vectors = rows * c.unfold_row_elements / c.vector;
      for (int64_t e = 0; e < vectors; ++e) {
        int64_t offset = 0;
        const bool inside = unfold_source(g, row0, e, c.vector, offset);
        for (int64_t i = 0; i < c.vector; ++i) {
          unfold[static_cast<std::size_t>(e * c.vector + i)] =
              inside ? x[offset + i * g.x_stride[4]] : 0.0f;
        }
      }
      b = unfold.data();
    }
    std::fill(scratch.begin(), scratch.end(), -54321.0f);
    float* d = (call.d_scratch ? scratch.data() : out) + call.d_offset;
    for (int64_t batch = 0; batch < call.batch; ++batch) {
      for (int64_t col = 0; col < call.n; ++col) {
        for (int64_t row = 0; row < call.m; ++row) {
          double sum = 0;
          for (int64_t k = 0; k < call.k; ++k) {
            sum += static_cast<double>(w[batch * call.a_batch_stride + row * call.lda + k]) *
                   static_cast<double>(b[batch * call.b_batch_stride + col * call.ldb + k]);
          }
          if (c.bias == BiasMode::epilogue) {
            sum += static_cast<double>(bias[batch * call.bias_batch_stride + row]);
          }
          d[batch * call.d_batch_stride + col * call.ldd + row] = static_cast<float>(sum);
        }
      }
    }
    if (c.bias == BiasMode::pass || c.bias == BiasMode::scratch) {  // common/bias.cuh
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t oc = 0; oc < p.out_channels; ++oc) {
          out[call.out_offset + r * call.out_ld + oc] =
              d[r * call.ldd + oc] + bias[oc * p.bias.strides[0]];
        }
      }
    }
  }
}

struct EmulationCase {
  std::string name;
  std::vector<int64_t> x_shape, w_shape;
  ConvParams params;
  bool bias = false;
  gemmkit_test::Layout x_layout, out_layout;
  int64_t workspace_bytes = kDefaultWorkspaceBytes;
  ConvPath expected = ConvPath::unfold_gemm;
  BiasMode bf16_bias = BiasMode::scratch;  // the bias mode of a bf16 output
};

TEST(ConvEmulation, GemmPathsMatchTheDefinition) {
  std::vector<EmulationCase> cases;
  {
    EmulationCase e;
    e.name = "2d 3x3 pad 1, chunks of a few rows";
    e.x_shape = {2, 5, 6, 4};
    e.w_shape = {3, 3, 3, 4};
    e.params.padding_lo = {1};
    e.params.padding_hi = {1};
    e.bias = true;
    e.workspace_bytes = 7 * 9 * 4 * 4 * 8 / 7;  // 7 rows of unfold after cuBLASLt's eighth
    cases.push_back(e);
  }
  {
    EmulationCase e;
    e.name = "1d stride 2, dilations, negative padding, flip";
    e.x_shape = {3, 19, 6};
    e.w_shape = {4, 3, 6};
    e.params.stride = {2};
    e.params.padding_lo = {-1};
    e.params.padding_hi = {4};
    e.params.kernel_dilation = {2};
    e.params.input_dilation = {3};
    e.params.flip = true;
    e.bias = true;
    cases.push_back(e);
  }
  {
    EmulationCase e;
    e.name = "3d groups 3, asymmetric padding, strided x and out";
    e.x_shape = {2, 3, 4, 5, 6};
    e.w_shape = {9, 2, 3, 2, 2};
    e.params.groups = 3;
    e.params.padding_lo = {1, 0, 2};
    e.params.padding_hi = {0, 2, -1};
    e.params.stride = {1, 2, 1};
    e.x_layout.pad = {0, 1, 0, 2, 3};  // x: gaps everywhere (the unfold reads any strides)
    e.out_layout.offset = 5;           // out: offset view, still one position stride
    e.workspace_bytes = 4096;
    cases.push_back(e);
  }
  {
    EmulationCase e;
    e.name = "grouped transposed conv (input dilation + flip)";
    e.x_shape = {1, 5, 4, 8};
    e.params = conv_transpose_params({3, 2}, {2, 3}, {1, 0}, {1, 2}, {1, 1}, 2);
    e.w_shape = {6, 3, 2, 4};
    cases.push_back(e);
  }
  {
    EmulationCase e;
    e.name = "1x1 GEMM on x with a position stride > c, groups 2, chunked";
    e.x_shape = {2, 3, 5, 6};
    e.w_shape = {4, 1, 1, 3};
    e.params.groups = 2;
    e.bias = true;
    e.x_layout.pad = {0, 0, 0, 2};  // position stride 8
    e.expected = ConvPath::gemm_1x1;
    cases.push_back(e);
  }
  {
    EmulationCase e;
    e.name = "o16 bias: 32-byte output rows take the epilogue";
    e.x_shape = {2, 5, 4, 8};
    e.w_shape = {16, 3, 3, 8};
    e.params.padding_lo = {1};
    e.params.padding_hi = {1};
    e.bias = true;
    e.bf16_bias = BiasMode::epilogue;
    e.workspace_bytes = 8192;
    cases.push_back(e);
  }
  for (const EmulationCase& e : cases) {
    SCOPED_TRACE(e.name);
    gemmkit_test::HostTensor x = gemmkit_test::random_tensor(DType::f32, e.x_shape, 11, e.x_layout);
    gemmkit_test::HostTensor w = gemmkit_test::random_tensor(DType::f32, e.w_shape, 12);
    gemmkit_test::HostTensor bias = gemmkit_test::random_tensor(DType::f32, {e.w_shape[0]}, 13);
    const std::vector<int64_t> out_shape = conv_output_shape(e.x_shape, e.w_shape, e.params);
    gemmkit_test::HostTensor out = gemmkit_test::make_tensor(DType::f32, out_shape, e.out_layout);
    out.poison();

    Spec s;
    s.x_shape = e.x_shape;
    s.w_shape = e.w_shape;
    s.params = e.params;
    s.dtype = s.out_dtype = DType::f32;
    s.bias = e.bias;
    ConvProblem p =
        make_problem(s, x.view().data, w.view().data, bias.view().data, out.view().data);
    const Tensor xv = x.view(), ov = out.view();
    std::copy(xv.strides, xv.strides + xv.rank, p.x.strides);
    std::copy(ov.strides, ov.strides + ov.rank, p.out.strides);
    const gemmkit_test::Reference ref =
        gemmkit_test::reference_conv(x, w, e.bias ? &bias : nullptr, e.params);
    // As f32 (bias pass in place), then with out labelled bf16 (the storage stays f32) so that
    // the bias goes through the epilogue or the f32 scratch as a 16-bit output's would.
    std::vector<BiasMode> modes;
    for (const DType label : {DType::f32, DType::bf16}) {
      p.out.dtype = label;
      const ConvConfig c = select_conv_config(p, kH200, request_of("gemm", e.workspace_bytes));
      ASSERT_EQ(c.path, e.expected) << to_string(c);
      expect_gemm_chunks_valid(p, c);
      modes.push_back(c.bias);
      out.poison();
      emulate_gemm_path(p, c);
      gemmkit_test::check_output(out, ref, e.name + " (" + to_string(c) + ")");
    }
    if (e.bias) {
      EXPECT_EQ(modes[0], BiasMode::pass);
      EXPECT_EQ(modes[1], e.bf16_bias);
    }
  }
}

// The unfold's vectorized copies (kV > 1) read the same elements as scalar ones.
TEST(ConvEmulation, UnfoldVectorsMatchScalars) {
  Spec s;
  s.x_shape = {2, 6, 7, 16};
  s.w_shape = {8, 3, 2, 8};
  s.params.groups = 2;
  s.params.padding_lo = {1, 0};
  s.params.padding_hi = {2, 1};
  s.params.stride = {2, 1};
  s.params.flip = true;
  const ConvGeometry g = normalize(make_problem(s));
  const int64_t row = g.kernel_positions() * g.c;
  for (const int64_t v : {2, 4, 8}) {
    for (int64_t r = 0; r < g.positions(); ++r) {
      for (int64_t j = 0; j < row / v; ++j) {
        int64_t vector_offset = -1;
        const bool inside = unfold_source(g, 0, r * (row / v) + j, v, vector_offset);
        for (int64_t i = 0; i < v; ++i) {
          int64_t scalar_offset = -1;
          ASSERT_EQ(unfold_source(g, 0, (r * row + j * v + i), 1, scalar_offset), inside);
          if (inside) {
            ASSERT_EQ(scalar_offset, vector_offset + i);
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace gemmkit::cuda::conv_impl
