// Constants of the tiny-GEMM bitwise contract (docs/linear.md). Changing any of them changes
// the bits every variant returns; they are shared by host (dispatch, tests) and device code.
#pragma once

#include <cstdint>

namespace gemmkit::cuda::linear_family {

constexpr int64_t kSliceK = 128;     // k elements per slice (8 chained k16 MMAs)
constexpr int64_t kGroupSlices = 4;  // slices per group
constexpr int64_t kGroupK = kSliceK * kGroupSlices;

}  // namespace gemmkit::cuda::linear_family
