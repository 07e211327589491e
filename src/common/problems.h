// Validated, normalized problem descriptions shared by the API layer and the backends.
// Built only by src/api (after every check passed); backends may assume every invariant below.
#pragma once

#include <cstdint>
#include <optional>

#include "gemmkit/gemmkit.h"

namespace gemmkit::detail {

constexpr int kMaxSpatial = 3;

// out[n, m] = x[n, k] . w[m, k]^T (+ bias[m]).
struct LinearProblem {
  int64_t n = 0, m = 0, k = 0;
  Tensor x;  // [n, k], strides >= 1 (any layout)
  Tensor w;  // [m, k]
  bool has_bias = false;
  Tensor bias;  // [m] when has_bias
  Tensor out;   // [n, m], non-overlapping
};

// conv_general, every vector expanded to `spatial` entries.
struct ConvProblem {
  int spatial = 0;           // 1, 2 or 3
  int64_t batch = 0;         // n
  int64_t in_channels = 0;   // c
  int64_t out_channels = 0;  // o
  int64_t groups = 1;
  int64_t in_channels_per_group = 0;   // c / groups
  int64_t out_channels_per_group = 0;  // o / groups
  int64_t in_size[kMaxSpatial] = {};
  int64_t kernel_size[kMaxSpatial] = {};
  int64_t out_size[kMaxSpatial] = {};
  int64_t stride[kMaxSpatial] = {};
  int64_t padding_lo[kMaxSpatial] = {};
  int64_t padding_hi[kMaxSpatial] = {};
  int64_t kernel_dilation[kMaxSpatial] = {};
  int64_t input_dilation[kMaxSpatial] = {};
  bool flip = false;

  Tensor x;       // (n, in_size..., c)
  Tensor weight;  // (o, kernel_size..., c / groups)
  bool has_bias = false;
  Tensor bias;  // (o)
  Tensor out;   // (n, out_size..., o), non-overlapping

  // The operands, after conv_geometry filled every other field.
  void set_tensors(const Tensor& x_in, const Tensor& weight_in, const std::optional<Tensor>& b,
                   const Tensor& out_in) {
    x = x_in;
    weight = weight_in;
    has_bias = b.has_value();
    if (b) bias = *b;
    out = out_in;
  }

  int64_t out_positions() const {  // n * prod(out_size); fits int64 (checked at validation)
    int64_t p = batch;
    for (int d = 0; d < spatial; ++d) p *= out_size[d];
    return p;
  }
  int64_t kernel_positions() const {
    int64_t p = 1;
    for (int d = 0; d < spatial; ++d) p *= kernel_size[d];
    return p;
  }
  // Multiply-adds of the direct form (each output sums kernel_positions * c/groups products,
  // counting the zeros that input dilation and padding insert).
  double macs() const {
    return static_cast<double>(out_positions()) * static_cast<double>(out_channels) *
           static_cast<double>(kernel_positions()) * static_cast<double>(in_channels_per_group);
  }
};

}  // namespace gemmkit::detail
