// Tolerances of the CUDA convolution tests against the CPU backend, shared by the GPU test files.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "reference_double.h"

namespace gemmkit_test {

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

}  // namespace gemmkit_test
