// Convolution problems for the host tests of the CUDA path logic, built as src/api builds them
// from shapes and parameters, on fake 256-byte aligned device addresses (never dereferenced).
#pragma once

#include <cstdint>
#include <vector>

#include "common/problems.h"
#include "gemmkit/gemmkit.h"
#include "reference_double.h"

namespace gemmkit_test {

struct Spec {
  std::vector<int64_t> x_shape, w_shape;
  gemmkit::ConvParams params;
  gemmkit::DType dtype = gemmkit::DType::bf16;
  gemmkit::DType out_dtype = gemmkit::DType::bf16;
  bool bias = false;
};

// Addresses of fake tensors: 256-byte aligned, never dereferenced.
inline void* fake(uintptr_t address) {
  return reinterpret_cast<void*>(address);
}

// The problem of `s` on the given addresses (only aligned, never read).
inline gemmkit::detail::ConvProblem make_problem(const Spec& s, void* x = fake(0x10000000),
                                                 void* w = fake(0x20000000),
                                                 void* bias = fake(0x30000000),
                                                 void* out = fake(0x40000000)) {
  gemmkit::detail::ConvProblem p;
  const int spatial = static_cast<int>(s.x_shape.size()) - 2;
  const std::vector<int64_t> out_shape = gemmkit::conv_output_shape(s.x_shape, s.w_shape, s.params);
  const ConvDims dims = expand_params(s.params, spatial);
  p.spatial = spatial;
  p.batch = s.x_shape.front();
  p.in_channels = s.x_shape.back();
  p.out_channels = s.w_shape.front();
  p.groups = s.params.groups;
  p.in_channels_per_group = p.in_channels / p.groups;
  p.out_channels_per_group = p.out_channels / p.groups;
  for (int d = 0; d < spatial; ++d) {
    const auto i = static_cast<std::size_t>(d + 1);
    p.in_size[d] = s.x_shape[i];
    p.kernel_size[d] = s.w_shape[i];
    p.out_size[d] = out_shape[i];
    p.stride[d] = dims.stride[d];
    p.padding_lo[d] = dims.pad_lo[d];
    p.padding_hi[d] = dims.pad_hi[d];
    p.kernel_dilation[d] = dims.kdil[d];
    p.input_dilation[d] = dims.idil[d];
  }
  p.flip = s.params.flip;
  using gemmkit::Tensor;
  const gemmkit::Device gpu = gemmkit::Device::cuda(0);
  p.x = Tensor::contiguous(x, s.dtype, gpu, s.x_shape);
  p.weight = Tensor::contiguous(w, s.dtype, gpu, s.w_shape);
  p.has_bias = s.bias;
  if (s.bias) p.bias = Tensor::contiguous(bias, s.dtype, gpu, {p.out_channels});
  p.out = Tensor::contiguous(out, s.out_dtype, gpu, out_shape);
  return p;
}

}  // namespace gemmkit_test
