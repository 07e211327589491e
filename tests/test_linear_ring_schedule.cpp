// Host model of the ring kernel's producer/consumer protocol (ring_schedule.h), run under many
// random interleavings: no deadlock, no parity wait that passes before its loads landed, every
// slice consumed once, by its warp. Also checks that the model catches a schedule that breaks
// the rule.
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <string>
#include <vector>

#include "cuda/linear/ring_schedule.h"

namespace gemmkit::cuda::linear_family {
namespace {

struct Barrier {
  int completed = 0;  // phases completed so far
  bool arrived = false;
  bool pending_load = false;
};

// mbarrier try_wait.parity: passes when the phase of that parity is the last completed one.
bool passes(const Barrier& b, unsigned parity) {
  return (b.completed & 1) != static_cast<int>(parity);
}

struct Outcome {
  bool deadlock = false;
  std::string violation;  // empty when every check held
};

// One run of a CTA with `slices` local slices: `producers` warps, producer p issuing slices p,
// p + producers, ... in order (ring_producer), and `consumers` warps, warp w taking slices w,
// w + consumers, ... (ring_consumer), waiting for `batch` of them before releasing them, as the
// kernel does. Random interleaving from `seed`.
Outcome simulate(int stages, int slices, int consumers, int batch, uint64_t seed,
                 int producers = 1) {
  std::mt19937_64 rng(seed);
  std::vector<Barrier> full(static_cast<std::size_t>(stages)), empty(full.size());
  std::vector<int> landed(static_cast<std::size_t>(slices), 0), consumed(landed.size(), 0);
  std::vector<int> in_flight;  // slices whose loads are issued and not landed
  std::vector<int> next_issue(static_cast<std::size_t>(producers));  // per producer
  for (int p = 0; p < producers; ++p) next_issue[static_cast<std::size_t>(p)] = p;
  struct Consumer {
    int next = 0;    // next slice to wait for
    int waited = 0;  // slices of the current batch already waited for
  };
  std::vector<Consumer> warps(static_cast<std::size_t>(consumers));
  for (int w = 0; w < consumers; ++w) warps[static_cast<std::size_t>(w)].next = w;
  Outcome out;
  const auto fail = [&](const std::string& what) {
    if (out.violation.empty()) out.violation = what;
  };
  // Releases the batch that ends before slice `end` (exclusive) of a warp.
  const auto release = [&](Consumer& c, int end) {
    for (int j = 0; j < c.waited; ++j) {
      const int s = end - (c.waited - j) * consumers;
      if (consumed[static_cast<std::size_t>(s)]++)
        fail("slice " + std::to_string(s) + " consumed twice");
      // Only the stages that are refilled are released (the kernel skips the others' arrives).
      if (ring_stage_refilled(s, slices, stages)) {
        ++empty[static_cast<std::size_t>(ring_stage(s, stages))].completed;
      }
    }
    c.waited = 0;
  };
  for (int step = 0; step < 100000; ++step) {
    // Collect the actors that can make progress now.
    // 0 = a load lands, 1 + w = consumer w, 1 + consumers + p = producer p.
    std::vector<int> runnable;
    bool issued_all = true;
    for (int p = 0; p < producers; ++p) {
      const int i = next_issue[static_cast<std::size_t>(p)];
      if (i >= slices) continue;
      issued_all = false;
      if (i < stages || passes(empty[static_cast<std::size_t>(ring_stage(i, stages))],
                               ring_empty_parity(i, stages))) {
        runnable.push_back(1 + consumers + p);
      }
    }
    if (!in_flight.empty()) runnable.push_back(0);
    for (int w = 0; w < consumers; ++w) {
      const int i = warps[static_cast<std::size_t>(w)].next;
      if (i < slices && passes(full[static_cast<std::size_t>(ring_stage(i, stages))],
                               ring_full_parity(i, stages))) {
        runnable.push_back(1 + w);
      }
    }
    bool done = issued_all && in_flight.empty();
    for (const Consumer& c : warps) done = done && c.next >= slices;
    if (done) break;
    if (runnable.empty()) {
      out.deadlock = true;
      return out;
    }
    const int actor =
        runnable[std::uniform_int_distribution<std::size_t>(0, runnable.size() - 1)(rng)];
    if (actor > consumers) {
      const int p = actor - 1 - consumers;
      const int i = next_issue[static_cast<std::size_t>(p)];
      if (ring_producer(i, producers) != p)
        fail("slice " + std::to_string(i) + " issued by " + std::to_string(p));
      Barrier& f = full[static_cast<std::size_t>(ring_stage(i, stages))];
      if (i >= stages) {
        // The stage's previous round must have been consumed.
        if (!consumed[static_cast<std::size_t>(i - stages)]) {
          fail("producer refilled stage of slice " + std::to_string(i - stages) +
               " before it was consumed");
        }
      }
      if (f.arrived || f.pending_load)
        fail("slice " + std::to_string(i) + " issued into a stage still in flight");
      f.arrived = true;
      f.pending_load = true;
      in_flight.push_back(i);
      next_issue[static_cast<std::size_t>(p)] += producers;
    } else if (actor == 0) {
      const std::size_t pick =
          std::uniform_int_distribution<std::size_t>(0, in_flight.size() - 1)(rng);
      const int i = in_flight[pick];
      in_flight.erase(in_flight.begin() + static_cast<std::ptrdiff_t>(pick));
      Barrier& f = full[static_cast<std::size_t>(ring_stage(i, stages))];
      landed[static_cast<std::size_t>(i)] = 1;
      f.pending_load = false;
      if (f.arrived) {  // arrival and transaction both done: the phase completes
        f.arrived = false;
        ++f.completed;
      }
    } else {
      const int w = actor - 1;
      Consumer& c = warps[static_cast<std::size_t>(w)];
      const int i = c.next;
      if (ring_consumer(i, consumers) != w)
        fail("slice " + std::to_string(i) + " taken by warp " + std::to_string(w));
      if (!landed[static_cast<std::size_t>(i)]) {
        fail("consumer passed the full barrier of slice " + std::to_string(i) +
             " before its load landed");
      }
      c.next += consumers;
      ++c.waited;
      // After a batch (or the warp's last slice), the MMAs run and the stages are released.
      if (c.waited == batch || c.next >= slices) release(c, c.next);
    }
  }
  for (int i = 0; i < slices; ++i) {
    if (!consumed[static_cast<std::size_t>(i)])
      fail("slice " + std::to_string(i) + " never consumed");
  }
  return out;
}

TEST(LinearRingSchedule, EveryDepthBatchAndLengthIsSafeUnderRandomInterleavings) {
  for (int producers : {1, kRingMaxProducerWarps}) {
    for (int stages : {4, 8, 16}) {
      for (int batch : {1, 2, 4}) {  // every batch a 16 x 8 tile may be forced to (.b<N>)
        if (!ring_batch_allowed(batch, 1, 1, stages)) continue;
        for (int slices = 1; slices <= 40; ++slices) {
          for (uint64_t seed = 0; seed < 20; ++seed) {
            const Outcome o = simulate(stages, slices, kRingConsumerWarps, batch, seed, producers);
            ASSERT_FALSE(o.deadlock) << "producers " << producers << " stages " << stages
                                     << " batch " << batch << " slices " << slices;
            ASSERT_EQ(o.violation, "") << "producers " << producers << " stages " << stages
                                       << " batch " << batch << " slices " << slices;
          }
        }
      }
    }
  }
  // Eight consumer warps (batch 1, 8 or 16 stages), fed by one or four producers.
  for (int producers : {1, kRingMaxProducerWarps}) {
    for (int stages : {8, 16}) {
      ASSERT_TRUE(ring_consumers_allowed(kRingMaxConsumerWarps, 1, 1, stages, 1));
      for (int slices = 1; slices <= 40; ++slices) {
        for (uint64_t seed = 0; seed < 20; ++seed) {
          const Outcome o = simulate(stages, slices, kRingMaxConsumerWarps, 1, seed, producers);
          ASSERT_FALSE(o.deadlock) << "eight consumers, stages " << stages << " slices " << slices;
          ASSERT_EQ(o.violation, "")
              << "eight consumers, stages " << stages << " slices " << slices;
        }
      }
    }
  }
  EXPECT_FALSE(ring_consumers_allowed(8, 1, 1, 4, 1));
  EXPECT_FALSE(ring_consumers_allowed(8, 1, 1, 16, 2));
  EXPECT_FALSE(ring_consumers_allowed(8, 1, 2, 16, 1));
  EXPECT_FALSE(ring_consumers_allowed(2, 1, 1, 16, 1));
  EXPECT_TRUE(ring_consumers_allowed(4, 2, 4, 4, 1));
  EXPECT_EQ(ring_consumer(13, 8), 5);
  // With four producers, producer p issues exactly consumer p's slices.
  for (int i = 0; i < 64; ++i)
    EXPECT_EQ(ring_producer(i, kRingMaxProducerWarps), ring_consumer(i)) << i;
  EXPECT_EQ(ring_slice_batch(1, 1, 4), 1);
  EXPECT_EQ(ring_slice_batch(1, 1, 8), 1);
  EXPECT_EQ(ring_slice_batch(1, 1, 16), 1);
  EXPECT_EQ(ring_slice_batch(1, 2, 8), 2);
  EXPECT_EQ(ring_slice_batch(1, 4, 16), 4);
  EXPECT_EQ(ring_slice_batch(2, 4, 16), 1);
  // The defaults are allowed batches; forced ones stay within stages / 4, and wide tiles at 1.
  for (int stages : {4, 8, 16}) {
    for (const auto& [mt, nt] : {std::pair{1, 1}, {1, 2}, {1, 4}, {2, 4}})
      EXPECT_TRUE(ring_batch_allowed(ring_slice_batch(mt, nt, stages), mt, nt, stages));
  }
  EXPECT_TRUE(ring_batch_allowed(2, 1, 1, 16));
  EXPECT_FALSE(ring_batch_allowed(2, 1, 1, 4));
  EXPECT_FALSE(ring_batch_allowed(4, 1, 1, 8));
  EXPECT_FALSE(ring_batch_allowed(3, 1, 1, 16));
  EXPECT_FALSE(ring_batch_allowed(2, 2, 4, 16));
  EXPECT_EQ(ring_consumer(0), 0);
  EXPECT_EQ(ring_consumer(7), 3);
}

TEST(LinearRingSchedule, TheModelCatchesBatchesLargerThanTheRingAllows) {
  // Batches of 2 on a 4-stage ring, or eight consumer warps on it: a warp waits on a slice a
  // round ahead of its stage (its parity wait passes before the load lands) or holds the stage
  // its next slice needs.
  for (const auto& [consumers, batch] : {std::pair{kRingConsumerWarps, 2}, {8, 1}}) {
    bool caught = false;
    for (uint64_t seed = 0; seed < 200 && !caught; ++seed) {
      const Outcome o = simulate(4, 32, consumers, batch, seed);
      caught = o.deadlock || !o.violation.empty();
    }
    EXPECT_TRUE(caught) << consumers << " consumers, batch " << batch;
  }
}

// The fragment-order layout of slice partials and group sums (ring_partial_slot): a lane's four
// accumulators of an m16n8k16 MMA (rows lane / 4 and + 8, batch columns 2 (lane % 4) and + 1)
// are one 16-byte chunk; every element has one slot; the lanes' 16-byte stores and the final
// fold's element-order loads (thread e: batch row e / rows_w, weight row e % rows_w) are free of
// shared-memory bank conflicts.
TEST(LinearRingSchedule, PartialLayoutMatchesTheFragmentsWithoutBankConflicts) {
  for (const auto& [mt_count, nt_count] :
       std::vector<std::pair<int, int>>{{1, 1}, {1, 2}, {1, 4}, {2, 4}}) {
    const int rows_w = 16 * mt_count, elements = 128 * mt_count * nt_count;
    std::set<int> slots;
    for (int mt = 0; mt < mt_count; ++mt)
      for (int nt = 0; nt < nt_count; ++nt)
        for (int lane = 0; lane < 32; ++lane)
          for (int e = 0; e < 4; ++e) {
            const int row_w = mt * 16 + lane / 4 + (e >= 2 ? 8 : 0);
            const int row_x = nt * 8 + (lane % 4) * 2 + (e & 1);
            const int written = ((mt * nt_count + nt) * 32 + ring_lane_chunk(lane)) * 4 + e;
            EXPECT_EQ(ring_partial_slot(row_w, row_x, nt_count), written)
                << mt_count << "x" << nt_count << " lane " << lane << " e " << e;
            slots.insert(written);
          }
    EXPECT_EQ(static_cast<int>(slots.size()), elements);
    EXPECT_EQ(*slots.rbegin(), elements - 1);
    // 16-byte stores go out a quarter warp at a time: its 8 chunks in 8 different bank groups.
    for (int quarter = 0; quarter < 4; ++quarter) {
      std::set<int> groups;
      for (int lane = quarter * 8; lane < quarter * 8 + 8; ++lane)
        groups.insert(ring_lane_chunk(lane) % 8);
      EXPECT_EQ(groups.size(), 8u) << "quarter " << quarter;
    }
    // The 16 x 8 tile's element-order fold: each warp's 32 loads hit 32 different banks.
    if (mt_count == 1) {
      for (int warp = 0; warp < elements / 32; ++warp) {
        std::set<int> banks;
        for (int e = warp * 32; e < warp * 32 + 32; ++e)
          banks.insert(ring_partial_slot(e % rows_w, e / rows_w, nt_count) % 32);
        EXPECT_EQ(banks.size(), 32u) << mt_count << "x" << nt_count << " warp " << warp;
      }
    }
  }
}

}  // namespace
}  // namespace gemmkit::cuda::linear_family
