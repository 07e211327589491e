// Host tests of the geometry every convolution kernel shares (common/geometry.h,
// common/operands.h): launch limits and exact coverage of the grid-stride mapping, integer helpers,
// the normalized problem and its decoding, merged strides, the weight as a matrix, alignments. Runs
// without a GPU and without CUDA.
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

// ---- Launch geometry ----------------------------------------------------------------------

TEST(ConvGeometry, GridForRespectsEveryLimit) {
  const int64_t counts[] = {0,
                            1,
                            255,
                            256,
                            257,
                            int64_t{1} << 16,
                            (int64_t{1} << 16) * 256,
                            int64_t{1} << 31,
                            (int64_t{1} << 31) * 70000,
                            int64_t{1} << 40,
                            int64_t{1} << 62};
  const int64_t caps[] = {1, 2112, kMaxGridX, std::numeric_limits<int64_t>::max()};
  for (const int64_t count : counts) {
    for (const int64_t block : {1, 32, 256, 1024}) {
      for (const int64_t cap : caps) {
        const LaunchGrid grid = grid_for(count, block, cap);
        SCOPED_TRACE("count " + std::to_string(count) + " block " + std::to_string(block) +
                     " cap " + std::to_string(cap));
        EXPECT_GE(grid.x, 1u);
        EXPECT_LE(int64_t{grid.x}, std::min(cap, kMaxGridX));
        EXPECT_LE(int64_t{grid.x},
                  std::max<int64_t>(1, ceil_div(std::max<int64_t>(count, 1), block)));
        EXPECT_EQ(grid.y, 1u);
        EXPECT_EQ(grid.z, 1u);
        const int64_t iterations = grid_iterations(count, grid.x, block);
        // Every item is reached: the last iteration's first item is still < count.
        if (count > 0) {
          EXPECT_GE(iterations * int64_t{grid.x} * block, count);
          EXPECT_LT((iterations - 1) * int64_t{grid.x} * block, count);
          // The largest index any thread forms stays far from int64 overflow.
          EXPECT_LT(grid_stride_index(grid.x - 1, block - 1, iterations - 1, grid.x, block),
                    count + int64_t{grid.x} * block);
        }
      }
    }
  }
}

// Simulates the kernels' loop `for (it = 0;; ++it) { e = grid_stride_index(...); if (e >=
// count) break; ... }` over every (block, thread, iteration) of scaled-down grids.
TEST(ConvGeometry, GridStrideCoversEachItemExactlyOnce) {
  for (const int64_t count : {1, 7, 31, 32, 33, 255, 256, 257, 1000, 4099}) {
    for (const int64_t block : {1, 32, 64, 256}) {
      for (const int64_t cap : {1, 3, 16, 1 << 20}) {
        const LaunchGrid grid = grid_for(count, block, cap);
        std::vector<int> hits(static_cast<std::size_t>(count), 0);
        int64_t max_iterations = 0;
        for (int64_t b = 0; b < int64_t{grid.x}; ++b) {
          for (int64_t t = 0; t < block; ++t) {
            for (int64_t it = 0;; ++it) {
              const int64_t e = grid_stride_index(b, t, it, grid.x, block);
              if (e >= count) break;
              ++hits[static_cast<std::size_t>(e)];
              max_iterations = std::max(max_iterations, it + 1);
            }
          }
        }
        for (int64_t e = 0; e < count; ++e) {
          ASSERT_EQ(hits[static_cast<std::size_t>(e)], 1)
              << "item " << e << " count " << count << " block " << block << " cap " << cap;
        }
        EXPECT_EQ(max_iterations, grid_iterations(count, grid.x, block));
      }
    }
  }
}

TEST(ConvGeometry, DivNonnegMatchesDivision) {
  const int64_t values[] = {0,
                            1,
                            2,
                            3,
                            7,
                            255,
                            65535,
                            (int64_t{1} << 31) - 1,
                            int64_t{1} << 31,
                            (int64_t{1} << 32) + 5,
                            int64_t{1} << 40,
                            (int64_t{1} << 62) + 3};
  for (const int64_t a : values) {
    for (const int64_t b : values) {
      if (b == 0) continue;
      EXPECT_EQ(div_nonneg(a, b), a / b) << a << " / " << b;
    }
  }
}

// tap_source against the definition: materialize the dilated, padded input's index map.
TEST(ConvGeometry, TapSourceMatchesTheDefinition) {
  int checked = 0;
  for (int64_t in = 1; in <= 5; ++in)
    for (int64_t kernel = 1; kernel <= 3; ++kernel)
      for (int64_t stride = 1; stride <= 3; ++stride)
        for (int64_t lo = -2; lo <= 3; ++lo)
          for (int64_t hi = -2; hi <= 2; ++hi)
            for (int64_t kdil = 1; kdil <= 2; ++kdil)
              for (int64_t idil = 1; idil <= 3; ++idil) {
                const int64_t padded = (in - 1) * idil + 1 + lo + hi;
                const int64_t extent = (kernel - 1) * kdil + 1;
                if (padded < extent) continue;
                const int64_t out = (padded - extent) / stride + 1;
                std::vector<int64_t> source(static_cast<std::size_t>(padded), -1);
                for (int64_t i = 0; i < in; ++i) {
                  const int64_t z = i * idil + lo;
                  if (z >= 0 && z < padded) source[static_cast<std::size_t>(z)] = i;
                }
                ConvGeometry g;
                g.in[2] = in;
                g.kernel[2] = kernel;
                g.out[2] = out;
                g.stride[2] = stride;
                g.pad_lo[2] = lo;
                g.kdil[2] = kdil;
                g.idil[2] = idil;
                for (int64_t o = 0; o < out; ++o) {
                  for (int64_t t = 0; t < kernel; ++t) {
                    const int64_t z = o * stride + t * kdil;
                    ASSERT_LT(z, padded);
                    int64_t i = -7;
                    const bool real = tap_source(g, 2, o, t, i);
                    ASSERT_EQ(real, source[static_cast<std::size_t>(z)] >= 0)
                        << "in " << in << " k " << kernel << " s " << stride << " pad " << lo << "/"
                        << hi << " kdil " << kdil << " idil " << idil << " o " << o << " t " << t;
                    if (real) {
                      ASSERT_EQ(i, source[static_cast<std::size_t>(z)]);
                    }
                    ++checked;
                  }
                }
              }
  EXPECT_GT(checked, 10000);
}

TEST(ConvGeometry, NormalizeWidensLeadingDims) {
  Spec s;
  s.x_shape = {2, 100, 8};
  s.w_shape = {16, 3, 8};
  s.params.padding_lo = {2};
  s.params.stride = {2};
  const ConvGeometry g = normalize(make_problem(s));
  EXPECT_EQ(g.in[0], 1);
  EXPECT_EQ(g.in[1], 1);
  EXPECT_EQ(g.in[2], 100);
  EXPECT_EQ(g.kernel[2], 3);
  EXPECT_EQ(g.stride[2], 2);
  EXPECT_EQ(g.pad_lo[2], 2);
  EXPECT_EQ(g.out[2], (100 + 2 - 3) / 2 + 1);
  EXPECT_EQ(g.x_stride[0], 800);
  EXPECT_EQ(g.x_stride[1], 0);
  EXPECT_EQ(g.x_stride[2], 0);
  EXPECT_EQ(g.x_stride[3], 8);
  EXPECT_EQ(g.x_stride[4], 1);
  EXPECT_EQ(g.w_stride[0], 24);
  EXPECT_EQ(g.w_stride[3], 8);
  EXPECT_EQ(g.positions(), 2 * g.out[2]);
  EXPECT_EQ(g.kernel_positions(), 3);

  Spec s3;
  s3.x_shape = {1, 5, 6, 7, 4};
  s3.w_shape = {4, 3, 2, 1, 4};
  const ConvGeometry g3 = normalize(make_problem(s3));
  EXPECT_EQ(g3.in[0], 5);
  EXPECT_EQ(g3.in[1], 6);
  EXPECT_EQ(g3.in[2], 7);
  EXPECT_EQ(g3.x_stride[1], 6 * 7 * 4);
  EXPECT_EQ(g3.kernel_positions(), 6);
}

TEST(ConvGeometry, DecodeRoundTrips) {
  ConvGeometry g;
  g.batch = 3;
  g.out[0] = 2;
  g.out[1] = 5;
  g.out[2] = 7;
  g.kernel[0] = 2;
  g.kernel[1] = 3;
  g.kernel[2] = 4;
  for (int64_t p = 0; p < g.positions(); ++p) {
    const OutCoord c = decode_position(g, p);
    EXPECT_EQ(((c.n * 2 + c.d[0]) * 5 + c.d[1]) * 7 + c.d[2], p);
    EXPECT_LT(c.d[0], 2);
    EXPECT_LT(c.d[1], 5);
    EXPECT_LT(c.d[2], 7);
  }
  for (int64_t t = 0; t < g.kernel_positions(); ++t) {
    const Tap k = decode_tap(g, t);
    EXPECT_EQ((k.d[0] * 3 + k.d[1]) * 4 + k.d[2], t);
  }
  // Positions beyond 2^32 decode with 64-bit arithmetic.
  g.batch = int64_t{1} << 20;
  g.out[0] = 1 << 10;
  g.out[1] = 1 << 10;
  g.out[2] = 3;
  const int64_t big = g.positions() - 2;
  const OutCoord c = decode_position(g, big);
  EXPECT_EQ(((c.n * g.out[0] + c.d[0]) * g.out[1] + c.d[1]) * g.out[2] + c.d[2], big);
}

TEST(ConvGeometry, MergedStrides) {
  const int64_t shape[] = {2, 3, 4};
  const int64_t contiguous[] = {12, 4, 1};
  EXPECT_EQ(merged_stride(shape, contiguous, 3), 1);
  const int64_t padded_rows[] = {24, 8, 1};  // dim 1 steps 8 > 4: no single stride
  EXPECT_EQ(merged_stride(shape, padded_rows, 3), -1);
  const int64_t scaled[] = {120, 40, 10};  // one stride of 10 over all 24 positions
  EXPECT_EQ(merged_stride(shape, scaled, 3), 10);
  const int64_t ones_shape[] = {1, 1, 1};
  EXPECT_EQ(merged_stride(ones_shape, contiguous, 3), 0);
  const int64_t inner_one_shape[] = {2, 3, 1};  // size-1 dims take any stride
  const int64_t inner_one[] = {3, 1, 999};
  EXPECT_EQ(merged_stride(inner_one_shape, inner_one, 3), 1);
  const int64_t permuted[] = {1, 8, 2};
  EXPECT_EQ(merged_stride(shape, permuted, 3), -1);
}

TEST(ConvGeometry, WeightRowStride) {
  Spec s;
  s.x_shape = {1, 8, 8, 6};
  s.w_shape = {4, 3, 3, 6};
  ConvProblem p = make_problem(s);
  EXPECT_EQ(weight_row_stride(p), 54);
  p.weight.strides[0] = 64;  // rows padded to 64 elements: fine
  EXPECT_EQ(weight_row_stride(p), 64);
  p.weight.strides[0] = 50;  // rows overlap
  EXPECT_EQ(weight_row_stride(p), -1);
  p = make_problem(s);
  p.weight.strides[3] = 2;  // channels not contiguous
  EXPECT_EQ(weight_row_stride(p), -1);
  p = make_problem(s);
  std::swap(p.weight.strides[1], p.weight.strides[2]);  // kernel dims permuted
  EXPECT_EQ(weight_row_stride(p), -1);
  Spec one;  // depthwise 1x1 with multiplier 2: rows of one element
  one.x_shape = {1, 4, 4, 3};
  one.w_shape = {6, 1, 1, 1};
  one.params.groups = 3;
  ConvProblem q = make_problem(one);
  q.weight.strides[3] = 77;  // a row of one element: any channel stride
  EXPECT_EQ(weight_row_stride(q), 1);
}

TEST(ConvGeometry, Alignment) {
  EXPECT_EQ(address_alignment(0), 256);
  EXPECT_EQ(address_alignment(0x1000), 256);
  EXPECT_EQ(address_alignment(0x1010), 16);
  EXPECT_EQ(address_alignment(6), 2);
  EXPECT_EQ(address_alignment(7), 1);
  EXPECT_EQ(pointer_alignment(fake(0x1008)), 8);
}

}  // namespace
}  // namespace gemmkit::cuda::conv_impl
