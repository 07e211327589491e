// What the host emulations of the convolution kernels share (implicit_gemm_test.cpp,
// small_c_test.cpp; implicit_wgmma_test.cpp builds its own case type's list with add_emu_case): a
// case (a problem and its tensors' layouts), its tensors filled with random values, an f32 out,
// the double reference and the problem on those tensors.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/problems.h"
#include "conv/problem_spec.h"
#include "gemmkit/gemmkit.h"
#include "reference_double.h"

namespace gemmkit_test {

struct EmuCase {
  std::string name;
  Spec spec;
  Layout x_layout, w_layout, out_layout;
};

// Appends the case (name, x shape, weight shape), changed by `tweak`, to `cases` (EmuCase, or a
// kernel's own case type with the same name and spec fields).
template <typename Case = EmuCase>
inline void add_emu_case(std::vector<Case>& cases, const std::string& name,
                         std::vector<int64_t> x_shape, std::vector<int64_t> w_shape,
                         const std::function<void(Case&)>& tweak = nullptr) {
  Case c;
  c.name = name;
  c.spec.x_shape = std::move(x_shape);
  c.spec.w_shape = std::move(w_shape);
  if (tweak) tweak(c);
  cases.push_back(c);
}

// Case c's data: x, weight and bias random (seeds seed, seed + 1, seed + 2), out f32 in the case's
// layout, the reference, and the problem on these tensors (p.out f32).
struct EmuData {
  HostTensor x, w, b, out;
  Reference ref;
  gemmkit::detail::ConvProblem p;

  EmuData(const EmuCase& c, uint64_t seed)
      : x(random_tensor(c.spec.dtype, c.spec.x_shape, seed, c.x_layout)),
        w(random_tensor(c.spec.dtype, c.spec.w_shape, seed + 1, c.w_layout)),
        b(random_tensor(c.spec.dtype, {c.spec.w_shape[0]}, seed + 2)),
        out(make_tensor(gemmkit::DType::f32,
                        gemmkit::conv_output_shape(c.spec.x_shape, c.spec.w_shape, c.spec.params),
                        c.out_layout)),
        ref(reference_conv(x, w, c.spec.bias ? &b : nullptr, c.spec.params)),
        p(make_problem(c.spec)) {
    p.x = x.view();
    p.weight = w.view();
    p.out = out.view();
    if (c.spec.bias) p.bias = b.view();
  }
  // Element `element` of x or the weight, from the view's data pointer.
  double x_value(int64_t element) const { return value(x, element); }
  double w_value(int64_t element) const { return value(w, element); }

 private:
  static double value(const HostTensor& t, int64_t element) {
    return decode_bits(t.dtype, t.storage.data() + (t.offset + element) * int64_t{2});
  }
};

}  // namespace gemmkit_test
