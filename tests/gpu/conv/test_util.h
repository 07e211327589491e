// What the GPU convolution test files share: device copies of host tensors, the tolerances
// against the CPU backend, and a case prepared for GPU runs (inputs, double reference, the CPU
// backend's result, a device output poisoned before every run).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "gemmkit/gemmkit.h"
#include "reference_double.h"

namespace gemmkit_test {

// ---- Device copies of host tensors ------------------------------------------------------

struct DeviceTensor {
  gemmkit::Buffer buffer;
  gemmkit::Tensor view;
};

// The whole storage of `t` (gaps included) on cuda:0, viewed with t's shape and strides.
inline DeviceTensor to_device(const HostTensor& t) {
  const gemmkit::Device gpu = gemmkit::Device::cuda(0);
  DeviceTensor d;
  d.buffer = gemmkit::Buffer(t.storage.size(), gpu);
  d.buffer.copy_from_host(t.storage.data(), t.storage.size());
  d.view = gemmkit::Tensor::strided(
      static_cast<char*>(d.buffer.data()) + t.offset * static_cast<int64_t>(esize(t.dtype)),
      t.dtype, gpu, t.shape, t.strides);
  return d;
}

// ---- Tolerances ---------------------------------------------------------------------------

// check_output's accumulation bound is written for the CPU's 8-lane order; the CUDA paths sum
// in other orders (one sequential FMA chain, lane trees, cuBLASLt's tiles), for which the
// order-free first-order bound (len - 1) u * sum |products| holds: scaling the reduction length
// by 8 turns check_output's (len / 8 + 6) u into (len + 6) u.
inline Reference any_order(Reference ref) {
  ref.reduction_length *= 8;
  return ref;
}

// |gpu - cpu| within both results' bounds: twice the accumulation bound plus a rounding of each.
inline int64_t expect_close_to_cpu(const HostTensor& gpu, const HostTensor& cpu,
                                   const Reference& ref, const std::string& label) {
  const double acc_rel = static_cast<double>(ref.reduction_length + 6) * std::ldexp(1.0, -24);
  const double u = gpu.dtype == gemmkit::DType::f32 ? 0.0 : unit_roundoff(gpu.dtype);
  const double tiny = gpu.dtype == gemmkit::DType::f16 ? std::ldexp(1.0, -24) : 0.0;
  int64_t bad = 0;
  for (int64_t e = 0; e < gpu.numel(); ++e) {
    const std::vector<int64_t> idx = gpu.unravel(e);
    const double a = gpu.at(idx), b = cpu.at(idx);
    const double acc = acc_rel * ref.scale[static_cast<std::size_t>(e)];
    const double tol = 2 * acc + 2 * u * (std::max(std::fabs(a), std::fabs(b)) + acc) + 2 * tiny;
    if (!(std::fabs(a - b) <= tol) && ++bad <= 3) {
      ADD_FAILURE() << label << ": element " << e << " gpu " << a << " cpu " << b << " (tol " << tol
                    << ")";
    }
  }
  return bad;
}

// ---- A case prepared for GPU runs -----------------------------------------------------------

// Shapes, parameters, bias and layouts of one convolution test case.
struct ConvSpec {
  std::string name;
  std::vector<int64_t> x_shape, w_shape;
  gemmkit::ConvParams params;
  bool bias = false;
  Layout x_layout, w_layout, out_layout;
};

// The spec of x (n, spatial..., c) by w (o, kernel..., c / groups), default parameters.
inline ConvSpec conv_spec(std::string name, std::vector<int64_t> x, std::vector<int64_t> w) {
  ConvSpec c;
  c.name = std::move(name);
  c.x_shape = std::move(x);
  c.w_shape = std::move(w);
  return c;
}

struct DtypePair {
  gemmkit::DType x, out;
};

// One case on one dtype pair: random inputs (host and cuda:0), the double reference, the CPU
// backend's result (the library's reference implementation) and the device output.
struct PreparedConv {
  HostTensor x, w, b;
  Reference ref;
  HostTensor cpu_out, out;
  DeviceTensor dx, dw, db, dout;
  std::optional<gemmkit::Tensor> device_bias;  // db's view when the case has a bias

  PreparedConv(const ConvSpec& c, const DtypePair& d, uint64_t seed)
      : x(random_tensor(d.x, c.x_shape, seed, c.x_layout)),
        w(random_tensor(d.x, c.w_shape, seed + 1, c.w_layout)),
        b(random_tensor(d.x, {c.w_shape[0]}, seed + 2)),
        ref(reference_conv(x, w, c.bias ? &b : nullptr, c.params)),
        cpu_out(make_tensor(d.out, gemmkit::conv_output_shape(c.x_shape, c.w_shape, c.params),
                            c.out_layout)),
        out(make_tensor(d.out, cpu_out.shape, c.out_layout)),
        dx(to_device(x)),
        dw(to_device(w)),
        db(to_device(b)),
        dout(to_device(out)) {
    cpu_out.poison();
    std::optional<gemmkit::Tensor> bias;
    if (c.bias) bias = b.view();
    gemmkit::conv(x.view(), w.view(), bias, cpu_out.view(), c.params);
    if (c.bias) device_bias = db.view;
  }

  // Poisons the device output (0xFF bytes: NaN in every dtype, so an unwritten element cannot
  // pass), runs `launch` (which must wait for its work), returns the output.
  template <typename Launch>
  HostTensor run(Launch&& launch) {
    dout.buffer.fill_bytes(0xFF);
    launch();
    HostTensor result = out;
    dout.buffer.copy_to_host(result.storage.data(), result.storage.size());
    return result;
  }
};

}  // namespace gemmkit_test
