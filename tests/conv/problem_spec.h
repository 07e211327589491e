// Convolution problems for the host tests of the CUDA path logic, with src/api's geometry
// (detail::conv_geometry) on fake 256-byte aligned device addresses (never dereferenced).
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "api/validate.h"
#include "common/problems.h"
#include "gemmkit/gemmkit.h"

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

// The problem src/api builds for these tensors: its geometry (detail::conv_geometry), then the
// tensors themselves (no validation).
inline gemmkit::detail::ConvProblem conv_problem(const gemmkit::Tensor& x, const gemmkit::Tensor& w,
                                                 const std::optional<gemmkit::Tensor>& bias,
                                                 const gemmkit::Tensor& out,
                                                 const gemmkit::ConvParams& params) {
  gemmkit::detail::ConvProblem p =
      gemmkit::detail::conv_geometry("test", x.sizes(), w.sizes(), params);
  p.set_tensors(x, w, bias, out);
  return p;
}

// The problem of `s` on the given addresses (only aligned, never read).
inline gemmkit::detail::ConvProblem make_problem(const Spec& s, void* x = fake(0x10000000),
                                                 void* w = fake(0x20000000),
                                                 void* bias = fake(0x30000000),
                                                 void* out = fake(0x40000000)) {
  const std::vector<int64_t> out_shape = gemmkit::conv_output_shape(s.x_shape, s.w_shape, s.params);
  using gemmkit::Tensor;
  const gemmkit::Device gpu = gemmkit::Device::cuda(0);
  std::optional<Tensor> b;
  if (s.bias) b = Tensor::contiguous(bias, s.dtype, gpu, {s.w_shape[0]});
  return conv_problem(Tensor::contiguous(x, s.dtype, gpu, s.x_shape),
                      Tensor::contiguous(w, s.dtype, gpu, s.w_shape), b,
                      Tensor::contiguous(out, s.out_dtype, gpu, out_shape), s.params);
}

// A convolution of x_shape by w_shape (o, kernel..., c / groups) with symmetric padding `pad`,
// stride 1, one group, and a bias when asked.
inline Spec padded_spec(std::vector<int64_t> x_shape, std::vector<int64_t> w_shape, int64_t pad,
                        bool bias = false) {
  Spec s;
  s.x_shape = std::move(x_shape);
  s.w_shape = std::move(w_shape);
  s.params.padding_lo = {pad};
  s.params.padding_hi = {pad};
  s.bias = bias;
  return s;
}

// A depthwise problem: x (n, spatial..., c), a kernel of `kernel` per spatial dim, channel
// multiplier `multiplier` (o = c * multiplier), the same stride and symmetric padding per dim.
inline Spec depthwise_spec(std::vector<int64_t> x_shape, int64_t kernel, int64_t stride,
                           int64_t pad, int64_t multiplier = 1) {
  Spec s;
  const int64_t c = x_shape.back();
  s.w_shape = {c * multiplier};
  for (std::size_t d = 1; d + 1 < x_shape.size(); ++d) s.w_shape.push_back(kernel);
  s.w_shape.push_back(1);
  s.x_shape = std::move(x_shape);
  s.params.groups = c;
  s.params.stride = {stride};
  s.params.padding_lo = {pad};
  s.params.padding_hi = {pad};
  return s;
}

}  // namespace gemmkit_test
