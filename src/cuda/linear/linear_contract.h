// Constants of the tiny-GEMM bitwise contract (docs/linear.md). Changing any of them changes
// the bits every variant returns; they are shared by host (dispatch, tests) and device code.
#pragma once

#include <cstdint>

namespace gemmkit::cuda::linear_family {

constexpr int64_t kSliceK = 128;     // k elements per slice (8 chained k16 MMAs)
constexpr int64_t kGroupSlices = 4;  // slices per group
constexpr int64_t kGroupK = kSliceK * kGroupSlices;

// The canonical reduction takes one of two forms, chosen by the weight's rows m alone (never by
// n, so a row's bits do not move with the batch):
//   - sliced (m < kOneChainMinRows): slices of kSliceK folded in groups (canonical.cuh); the k
//     parallelism a decode batch needs when the weight has few rows (routers, small projections);
//   - one chain (m >= kOneChainMinRows): a single chain of k16 MMAs over all of k, the form a
//     warpgroup MMA with one accumulator set (tiles up to 128 x 256) evaluates at full speed, and
//     a weight of this many rows still has m / 16 independent chains to stream at decode (the
//     chain of k / 16 dependent MMAs ends before the m x k weight has streamed from HBM).
constexpr int64_t kOneChainMinRows = 4096;
constexpr bool canonical_one_chain(int64_t m) {
  return m >= kOneChainMinRows;
}
// k elements per slice of a weight of m rows: kSliceK, or all of k (one slice) for one chain.
constexpr int64_t canonical_slice_k(int64_t m, int64_t k) {
  return canonical_one_chain(m) ? (k + 15) / 16 * 16 : kSliceK;
}

}  // namespace gemmkit::cuda::linear_family
