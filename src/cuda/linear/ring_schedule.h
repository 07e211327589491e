// The schedule of the ring kernel (tma_ring_kernel.cuh) as pure functions shared by the kernel
// and the host model that checks it (tests/test_linear_ring_schedule.cpp): which warps consume,
// which stage a slice uses, and the mbarrier parities the producer and consumers wait on.
//
// Local slice i of a CTA uses stage i % stages in round i / stages; one producer warp issues
// every slice, or four issue slices p, p + 4, ... each (ring_producer). Its full barrier completes
// phase r when round r's loads land; a consumer waits with parity r & 1. The producer refills the
// stage for round r >= 1 after the consumer of round r - 1 arrives on the empty barrier, waiting
// with parity (r - 1) & 1. A parity wait passes at once when the barrier is one phase *behind*,
// so a consumer must never wait on a slice more than one round ahead of its stage. Consumer warp
// c takes slices c, c + 4, c + 8, ... (slice c of every group, so the four tensor-core units of
// the SM share every group), waiting for up to `batch` of them together with batch * 4 <= stages:
// slice i - stages is then the same warp's, of an earlier batch, already consumed.
#pragma once

#include "cuda/linear/linear_contract.h"

#if defined(__CUDACC__)
#define GEMMKIT_RING_HD __host__ __device__
#else
#define GEMMKIT_RING_HD
#endif

namespace gemmkit::cuda::linear_family {

constexpr int kRingConsumerWarps = 4;
constexpr int kRingMaxProducerWarps = 4;

// The consumer warp of local slice i.
GEMMKIT_RING_HD constexpr int ring_consumer(int slice) {
  return slice % kRingConsumerWarps;
}

// The producer warp (of `producers`: 1 or 4) that issues local slice i, in ascending order of its
// slices; with 4, producer p feeds consumer p (the stages p mod 4 are its alone).
GEMMKIT_RING_HD constexpr int ring_producer(int slice, int producers) {
  return slice % producers;
}

// Slices a consumer waits for before its MMAs: up to 4 side by side when the tile has few
// accumulator chains (kMT * kNT <= 4), to hide MMA latency, else one; never more than the ring
// holds per consumer (stages / 4).
GEMMKIT_RING_HD constexpr int ring_slice_batch(int mt, int nt, int stages) {
  const int wanted = mt * nt <= 4 ? 4 : 1;
  const int room = stages / kRingConsumerWarps;
  return wanted < room ? wanted : room;
}

GEMMKIT_RING_HD constexpr int ring_stage(int slice, int stages) {
  return slice % stages;
}

GEMMKIT_RING_HD constexpr unsigned ring_full_parity(int slice, int stages) {
  return static_cast<unsigned>((slice / stages) & 1);
}

// For slice >= stages: the parity of the empty-barrier phase that frees the stage.
GEMMKIT_RING_HD constexpr unsigned ring_empty_parity(int slice, int stages) {
  return static_cast<unsigned>((slice / stages - 1) & 1);
}

}  // namespace gemmkit::cuda::linear_family
