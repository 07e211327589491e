// The records of the CUDA linear family's dispatch: the device, the problem's shape, the kernel
// paths and the chosen configuration (no CUDA header; linear_config.h chooses).
#pragma once

#include <array>
#include <cstdint>
#include <sstream>
#include <string>

#include "cuda/linear/ring_schedule.h"
#include "gemmkit/gemmkit.h"

namespace gemmkit::cuda::linear_family {

// Co-resident clusters by size at one and at two CTAs per SM (LinearDevice::coresident_clusters).
using CoresidentClusters = std::array<std::array<int, 17>, 2>;

struct LinearDevice {
  int sm_major = 9, sm_minor = 0;
  int multiprocessors = 132;
  int64_t shared_optin = 232448;   // bytes per block after opt-in
  int64_t shared_per_sm = 233472;  // bytes per multiprocessor
  bool cluster_launch = true;
  int64_t max_grid_x = 2147483647;
  int max_cluster = 16;    // largest k split across a cluster (GEMMKIT_LINEAR_MAX_CLUSTER)
  int ring_producers = 4;  // producer warps of the ring kernel, 1 or 4 (GEMMKIT_LINEAR_PRODUCERS)
  // How a cluster's ranks hand their group sums to rank 0 (GEMMKIT_LINEAR_FOLD): st.async onto an
  // mbarrier (async), or distributed stores and a cluster barrier phase (barrier: the twin that
  // compute-sanitizer's racecheck can follow). Same bits either way.
  bool async_fold = true;
  // Clusters of c CTAs (index c, 1 to 16) the device runs at once when each multiprocessor holds
  // one CTA ([0]) or two ([1]), as cudaOccupancyMaxActiveClusters reports them: the GPCs'
  // sizes, not SMs / c, bound them (an H100 SXM: 15 clusters of 7 at one CTA per SM, not 18).
  // 0: not known, no bound applied (the default, as in host tests that do not set them).
  CoresidentClusters coresident_clusters{};
};

struct LinearShape {
  int64_t n = 1, m = 1, k = 1;
  DType in = DType::bf16;
  DType out = DType::bf16;
  bool has_bias = false;
  bool tma_compatible = false;  // k % 8 == 0, unit k stride, 16-byte aligned bases and row strides
  // Batch invariance (LinearOptions::batch_invariant, GEMMKIT_LINEAR_BATCH_INVARIANT, on by
  // default; deterministic mode implies it): auto keeps bf16 and f16 inside the family at every n
  // and weight size, never cuBLASLt. Off: cuBLASLt where it measured faster.
  bool batch_invariant = false;
};

enum class LinearPath { reference, tma_ring, simt_f32, cublaslt, wgmma, stream, wgmma_swap };

struct LinearConfig {
  LinearPath path = LinearPath::reference;
  std::string name;    // kernel name, e.g. "ring16.t1x1.p4.c4"
  std::string reason;  // why it was chosen
  bool pdl = false;
  // tma_ring
  int stages = 0, mt = 0, nt = 0, cluster = 1, groups_per_rank = 0, producers = 1;
  int batch = 0;  // slices a consumer warp waits for at a time (ring_slice_batch, or .b<N>)
  int consumers = kRingConsumerWarps;  // MMA warps (4; 8 for .w8)
  bool async_fold = true;              // clusters only (see LinearDevice::async_fold)
  // wgmma: batch rows per tile (the MMA's N; 128 weight rows per tile); stages reuse `stages`;
  // one_chain: the one-chain form of the canonical reduction (weights of kOneChainMinRows rows
  // and more), no k split. stream: `consumers` warps of 16 weight rows, `nt` tiles of 8 batch rows.
  // wgmma_swap: block_n weight rows by 64 batch rows per tile (the roles exchanged), `consumers`
  // warpgroups (2, or 1 for .w1).
  int block_n = 0;
  bool one_chain = false;
  // wgmma k split (wgmma_auto_splits): k's groups cut into `splits` runs of `split_groups` each
  // (the last may be shorter; 1 split: none); their fp32 sums take `workspace_bytes` of scratch
  // and the fold kernel's grid; `splits_forced`: the count came from a forced name's .k<N>.
  int splits = 1;
  int64_t split_groups = 0;
  bool splits_forced = false;
  int64_t workspace_bytes = 0, fold_grid_x = 0;
  // every kernel path
  int threads = 0;
  int64_t m_tiles = 0, tiles = 0, grid_x = 0, shared_bytes = 0;

  std::string to_string() const {
    std::ostringstream s;
    s << name << " grid=" << grid_x << " threads=" << threads << " smem=" << shared_bytes
      << (pdl ? " pdl" : "") << " (" << reason << ")";
    return s.str();
  }
};

inline int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

// TMA box coordinates are 32-bit: every row index of x (boxes of batch_rows) and w (boxes of
// weight_rows) a kernel's boxes start at must fit.
inline bool tma_box_rows_fit(const LinearShape& s, int64_t batch_rows, int64_t weight_rows) {
  return s.n + batch_rows <= (int64_t{1} << 31) && s.m + weight_rows <= (int64_t{1} << 31);
}

}  // namespace gemmkit::cuda::linear_family
