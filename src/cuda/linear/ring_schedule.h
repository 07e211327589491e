// The schedule of the ring kernel (tma_ring_kernel.cuh) as pure functions shared by the kernel
// and the host model that checks it (tests/test_linear_ring_schedule.cpp): which warps consume,
// which stage a slice uses, and the mbarrier parities the producer and consumers wait on.
//
// Local slice i of a CTA uses stage i % stages in round i / stages; one producer warp issues
// every slice, or four issue slices p, p + 4, ... each (ring_producer). Its full barrier completes
// phase r when round r's loads land; a consumer waits with parity r & 1. The producer refills the
// stage for round r >= 1 after the consumer of round r - 1 arrives on the empty barrier, waiting
// with parity (r - 1) & 1. A parity wait passes at once when the barrier is one phase *behind*,
// so a consumer must never wait on a slice more than one round ahead of its stage. Of C consumer
// warps (4, or 8 for the 16 x 8 tile), warp c takes slices c, c + C, c + 2C, ... (with four,
// slice c of every group, so the four tensor-core units of the SM share every group), waiting for
// up to `batch` of them together with batch * C <= stages: slice i - stages is then the same
// warp's, of an earlier batch, already consumed.
#pragma once

#include "cuda/linear/linear_contract.h"

#if defined(__CUDACC__)
#define GEMMKIT_RING_HD __host__ __device__
#else
#define GEMMKIT_RING_HD
#endif

namespace gemmkit::cuda::linear_family {

constexpr int kRingConsumerWarps = 4;  // the default; the 16 x 8 tile may take 8 (.w8)
constexpr int kRingMaxConsumerWarps = 8;
constexpr int kRingMaxProducerWarps = 4;

// The consumer warp of local slice i, of `consumers`.
GEMMKIT_RING_HD constexpr int ring_consumer(int slice, int consumers = kRingConsumerWarps) {
  return slice % consumers;
}

// The producer warp (of `producers`: 1 or 4) that issues local slice i, in ascending order of its
// slices; with 4, producer p feeds consumer p (the stages p mod 4 are its alone).
GEMMKIT_RING_HD constexpr int ring_producer(int slice, int producers) {
  return slice % producers;
}

// Slices a consumer waits for before its MMAs, by default. The 16 x 8 tile takes one: each stage
// is released as soon as its own fragments are read (its last MMAs still to run), so the producer
// requests the ring's next round while the rest of the first still streams in. Batches of 2 or 4
// (side by side, to hide MMA latency) measured slower at every depth and on every row tried (H200,
// graphs of 200 calls, PDL: 128 x 128 x 2880 3.86 us at 4 slices, 3.26 at 2, 2.92 at 1; 256 x 128 x
// 2880 on 8 stages 5.87 at 2, 4.79 at 1; docs/perf.md). Wider tiles keep up to 4 when they have few
// accumulator chains (kMT * kNT <= 4), else one (not re-measured); never more than the ring holds
// per consumer (stages / 4).
GEMMKIT_RING_HD constexpr int ring_slice_batch(int mt, int nt, int stages) {
  const int wanted = mt * nt == 1 ? 1 : mt * nt <= 4 ? 4 : 1;
  const int room = stages / kRingConsumerWarps;
  return wanted < room ? wanted : room;
}

// Whether a consumer may wait for `batch` slices at a time (a forced `.b<batch>`): 1, 2 or 4, no
// more than the ring holds per consumer, and above 1 only for tiles of at most 4 MMA chains
// (their accumulators stay in registers).
GEMMKIT_RING_HD constexpr bool ring_batch_allowed(int batch, int mt, int nt, int stages,
                                                  int consumers = kRingConsumerWarps) {
  return (batch == 1 || batch == 2 || batch == 4) && batch * consumers <= stages &&
         (batch == 1 || mt * nt <= 4);
}

// Whether a ring runs `consumers` consumer warps: 4 always; 8 (a forced or chosen `.w8`) for the
// 16 x 8 tile taking one slice at a time on a ring of at least 8 stages (the kernels built).
GEMMKIT_RING_HD constexpr bool ring_consumers_allowed(int consumers, int mt, int nt, int stages,
                                                      int batch) {
  return consumers == kRingConsumerWarps ||
         (consumers == kRingMaxConsumerWarps && mt * nt == 1 && batch == 1 &&
          ring_batch_allowed(batch, mt, nt, stages, consumers));
}

// Slice partials and group sums live in fragment order: each (mt, nt) MMA tile holds 32 chunks of
// 16 bytes, chunk ring_lane_chunk(lane) holding the lane's four accumulators, so a lane writes
// them with one 16-byte store. The chunk swizzle keeps the element-order reads of the final fold
// free of bank conflicts too: the lanes a warp's elements come from (l % 4 fixed) land in eight
// different 16-byte bank groups (tests/test_linear_ring_schedule.cpp checks both).
GEMMKIT_RING_HD constexpr int ring_lane_chunk(int lane) {
  return lane ^ ((lane >> 3) & 3);
}

// The float index of tile element (row_w, row_x) (weight row, batch row) in that layout, for
// tiles of nt MMA tiles along the batch.
GEMMKIT_RING_HD constexpr int ring_partial_slot(int row_w, int row_x, int nt) {
  return (((row_w >> 4) * nt + (row_x >> 3)) * 32 +
          ring_lane_chunk((row_w & 7) * 4 + ((row_x & 7) >> 1))) *
             4 +
         ((row_w >> 3) & 1) * 2 + (row_x & 1);
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

// Whether the stage of local slice i (of `slices`) is refilled, i.e. slice i + stages exists: only
// then does its consumer release it (a proxy fence and the empty barrier's arrive); the stages of
// the last round are never waited for again.
GEMMKIT_RING_HD constexpr bool ring_stage_refilled(int slice, int slices, int stages) {
  return slice + stages < slices;
}

}  // namespace gemmkit::cuda::linear_family
