// Double-precision references at sampled output elements, and the pass/fail rule.
// Header-only (the unit tests include it). Operands are contiguous host tensors.
//
// Error measure: |got - ref| / max(|ref|, magnitude), where magnitude = sqrt(sum of the squared
// products, and the squared bias). Dividing by |ref| alone explodes where the products cancel
// to nearly zero; dividing by the sum of |products| would let a missing term (about
// 1/sqrt(K) of the magnitude) slip under the tolerance.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "random.h"
#include "suite.h"

namespace gemmkit::bench {

struct Reference {
  double value = 0;
  double magnitude = 0;  // sqrt of the sum of squared terms
};

// ---- Linear -------------------------------------------------------------------------------

struct LinearHostView {
  const void* x = nullptr;     // [n, k]
  const void* w = nullptr;     // [m, k]
  const void* bias = nullptr;  // [m] or null
  DType dtype = DType::bf16;
  int64_t n = 0, m = 0, k = 0;
};

inline Reference linear_reference(const LinearHostView& view, int64_t out_index) {
  const int64_t row = out_index / view.m, col = out_index % view.m;
  double sum = 0, squares = 0;
  for (int64_t i = 0; i < view.k; ++i) {
    const double term = static_cast<double>(load_as_float(view.x, view.dtype, row * view.k + i)) *
                        static_cast<double>(load_as_float(view.w, view.dtype, col * view.k + i));
    sum += term;
    squares += term * term;
  }
  if (view.bias) {
    const double bias = load_as_float(view.bias, view.dtype, col);
    sum += bias;
    squares += bias * bias;
  }
  return {sum, std::sqrt(squares)};
}

// ---- Convolution --------------------------------------------------------------------------

constexpr int kMaxConvDims = 3;

// A conv row with every per-dim value in fixed arrays (the inner loop of the reference).
struct ConvGeometry {
  int dims = 0;
  int64_t n = 0, c = 0, o = 0, groups = 1;
  int64_t in[kMaxConvDims] = {}, kernel[kMaxConvDims] = {}, out[kMaxConvDims] = {};
  int64_t stride[kMaxConvDims] = {}, pad_lo[kMaxConvDims] = {};
  int64_t kdil[kMaxConvDims] = {}, idil[kMaxConvDims] = {};
  bool flip = false;

  static ConvGeometry from_row(const ConvRow& row) {
    ConvGeometry g;
    g.dims = row.spatial_dims();
    g.n = row.n;
    g.c = row.c;
    g.o = row.o;
    g.groups = row.groups;
    g.flip = row.flip;
    const auto out_spatial = conv_out_spatial(row);
    for (int d = 0; d < g.dims; ++d) {
      g.in[d] = row.in_spatial[d];
      g.kernel[d] = row.kernel[d];
      g.out[d] = out_spatial[d];
      g.stride[d] = row.stride[d];
      g.pad_lo[d] = row.pad_lo[d];
      g.kdil[d] = row.kdil[d];
      g.idil[d] = row.idil[d];
    }
    return g;
  }

  int64_t kernel_positions() const {
    int64_t p = 1;
    for (int d = 0; d < dims; ++d) p *= kernel[d];
    return p;
  }
};

struct ConvHostView {
  const void* x = nullptr;       // (n, in..., c)
  const void* weight = nullptr;  // (o, kernel..., c / groups)
  const void* bias = nullptr;    // (o) or null
  DType dtype = DType::bf16;
};

// conv_general at one output element (flat index into (n, out..., o)), straight from the
// definition in gemmkit.h: dilate the input, pad it, correlate with the dilated (maybe flipped)
// kernel.
inline Reference conv_reference(const ConvGeometry& g, const ConvHostView& view,
                                int64_t out_index) {
  int64_t rest = out_index;
  const int64_t oc = rest % g.o;
  rest /= g.o;
  int64_t out_coord[kMaxConvDims] = {};
  for (int d = g.dims - 1; d >= 0; --d) {
    out_coord[d] = rest % g.out[d];
    rest /= g.out[d];
  }
  const int64_t batch = rest;
  const int64_t c_per_group = g.c / g.groups;
  const int64_t channel_base = (oc / (g.o / g.groups)) * c_per_group;

  double sum = 0, squares = 0;
  const int64_t positions = g.kernel_positions();
  for (int64_t position = 0; position < positions; ++position) {
    // Decode the kernel tap; find the input element it reads (if it is not a zero of the
    // padding or the input dilation).
    int64_t tap_rest = position;
    int64_t x_offset = batch;
    int64_t w_offset = oc;
    bool reads_zero = false;
    int64_t tap[kMaxConvDims] = {};
    for (int d = g.dims - 1; d >= 0; --d) {
      tap[d] = tap_rest % g.kernel[d];
      tap_rest /= g.kernel[d];
    }
    for (int d = 0; d < g.dims; ++d) {
      const int64_t dilated = out_coord[d] * g.stride[d] + tap[d] * g.kdil[d] - g.pad_lo[d];
      const int64_t dilated_extent = (g.in[d] - 1) * g.idil[d] + 1;
      if (dilated < 0 || dilated >= dilated_extent || dilated % g.idil[d] != 0) reads_zero = true;
      x_offset = x_offset * g.in[d] + dilated / g.idil[d];
      const int64_t weight_tap = g.flip ? g.kernel[d] - 1 - tap[d] : tap[d];
      w_offset = w_offset * g.kernel[d] + weight_tap;
    }
    if (reads_zero) continue;
    for (int64_t ic = 0; ic < c_per_group; ++ic) {
      const double term =
          static_cast<double>(
              load_as_float(view.x, view.dtype, x_offset * g.c + channel_base + ic)) *
          static_cast<double>(load_as_float(view.weight, view.dtype, w_offset * c_per_group + ic));
      sum += term;
      squares += term * term;
    }
  }
  if (view.bias) {
    const double bias = load_as_float(view.bias, view.dtype, oc);
    sum += bias;
    squares += bias * bias;
  }
  return {sum, std::sqrt(squares)};
}

// ---- Sampling and the pass/fail rule ------------------------------------------------------

// Every output is checked up to this many elements; larger outputs are sampled.
constexpr int64_t kCheckAllUpTo = 16384;
constexpr int64_t kCheckSamples = 4096;

// Output elements to check: all of them when numel <= max_all, else the first, the last and
// `samples - 2` pseudo-random others (sorted, so device reads walk forward).
inline std::vector<int64_t> sample_indices(int64_t numel, uint64_t seed,
                                           int64_t max_all = kCheckAllUpTo,
                                           int64_t samples = kCheckSamples) {
  std::vector<int64_t> indices;
  if (numel <= 0) return indices;
  if (numel <= max_all) {
    indices.resize(static_cast<std::size_t>(numel));
    for (int64_t i = 0; i < numel; ++i) indices[static_cast<std::size_t>(i)] = i;
    return indices;
  }
  SplitMix64 generator(seed);
  indices.push_back(0);
  indices.push_back(numel - 1);
  while (static_cast<int64_t>(indices.size()) < samples)
    indices.push_back(static_cast<int64_t>(generator.next() % static_cast<uint64_t>(numel)));
  std::sort(indices.begin(), indices.end());
  indices.erase(std::unique(indices.begin(), indices.end()), indices.end());
  return indices;
}

// Allowed error: half an ulp of the output format (relative), plus 2^-10 for fp32
// accumulation over long reductions in any order (and TF32-style rounding of f32 inputs).
inline double check_tolerance(DType out_dtype) {
  double half_ulp = 0x1.0p-24;
  if (out_dtype == DType::bf16) half_ulp = 0x1.0p-8;
  if (out_dtype == DType::f16) half_ulp = 0x1.0p-11;
  return half_ulp + 0x1.0p-10;
}

inline double scaled_error(double got, const Reference& ref) {
  if (!std::isfinite(got)) return std::numeric_limits<double>::infinity();
  const double scale = std::max(std::fabs(ref.value), ref.magnitude);
  const double diff = std::fabs(got - ref.value);
  return scale > 0 ? diff / scale : diff;  // all terms zero (padding only): must be exactly 0
}

struct CheckResult {
  bool ran = false;
  int64_t samples = 0;
  int64_t total = 0;  // output elements
  double max_error = 0;
  double tolerance = 0;
  int64_t worst_index = -1;
  double worst_got = 0, worst_expected = 0;

  bool passed() const { return ran && max_error <= tolerance; }
  // "PASS", "FAIL", or "-" when no check ran.
  const char* verdict() const { return !ran ? "-" : passed() ? "PASS" : "FAIL"; }

  std::string summary() const {
    if (!ran) return "not checked";
    char text[256];
    std::snprintf(text, sizeof(text), "%s  max rel err %.2e (tol %.2e, %lld of %lld outputs)",
                  verdict(), max_error, tolerance, static_cast<long long>(samples),
                  static_cast<long long>(total));
    std::string result = text;
    if (!passed() && worst_index >= 0) {
      std::snprintf(text, sizeof(text), "; worst at [%lld]: got %.6g, expected %.6g",
                    static_cast<long long>(worst_index), worst_got, worst_expected);
      result += text;
    }
    return result;
  }
};

// Compares got[i] with expected[i], both at output element indices[i].
inline CheckResult check_outputs(const std::vector<int64_t>& indices,
                                 const std::vector<double>& got,
                                 const std::vector<Reference>& expected, int64_t total,
                                 DType out_dtype) {
  CheckResult result;
  result.ran = true;
  result.total = total;
  result.tolerance = check_tolerance(out_dtype);
  result.samples = static_cast<int64_t>(indices.size());
  for (std::size_t i = 0; i < indices.size(); ++i) {
    const double error = scaled_error(got[i], expected[i]);  // never NaN: non-finite gives inf
    if (result.worst_index < 0 || error > result.max_error) {
      result.max_error = error;
      result.worst_index = indices[i];
      result.worst_got = got[i];
      result.worst_expected = expected[i].value;
    }
  }
  return result;
}

}  // namespace gemmkit::bench
