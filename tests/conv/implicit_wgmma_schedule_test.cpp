// Host tests of the Hopper implicit GEMM's schedules (implicit_gemm/wgmma_plan.h, wgmma_layout.h,
// wgmma_pingpong.cuh): which plans run the ping-pong schedule and how GEMMKIT_CONV_WGMMA_SCHEDULE
// is parsed, which take 64-channel tiles (the narrow-o form) and GEMMKIT_CONV_WGMMA_O_TILE, and a
// step-by-step emulation of the ping-pong kernel's ring — the producer, the two consumer
// warpgroups, their mbarriers with the hardware's parity waits, in random interleavings — that
// checks every k block a consumer reduces is the one the producer put in the stage, and that
// without the order turns between the consumers' mainloops it is not. Runs without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "common/problems.h"
#include "conv/problem_spec.h"
#include "conv/select_util.h"
#include "cuda/conv/implicit_gemm/wgmma_maps.h"
#include "cuda/conv/implicit_gemm/wgmma_plan.h"
#include "cuda/conv/select.h"
#include "gemmkit/gemmkit.h"

namespace gemmkit::cuda::conv_impl {
namespace {

using gemmkit_test::make_problem;
using gemmkit_test::Spec;

Spec padded(std::vector<int64_t> x, std::vector<int64_t> w, int64_t pad) {
  Spec s;
  s.x_shape = std::move(x);
  s.w_shape = std::move(w);
  s.params.padding_lo = {pad};
  s.params.padding_hi = {pad};
  return s;
}

TEST(ConvImplicitWgmmaSchedule, PingPongWhereThePlanAllows) {
  // FLUX.2 VAE up3.res0.conv2 at 1024x1024 (c = 128, K = 18 k blocks).
  const Spec layer = padded({1, 1024, 1024, 128}, {128, 3, 3, 128}, 1);
  const ImplicitWgmmaPlan pp = implicit_wgmma_plan(
      make_problem(layer), kH200, kDefaultWorkspaceBytes, WgmmaScheduleChoice::pingpong);
  EXPECT_TRUE(pp.pingpong) << to_string(pp);
  EXPECT_EQ(pp.block_n, 128);
  EXPECT_EQ(pp.k_segments, 1);
  EXPECT_TRUE(pp.tma_store);
  EXPECT_EQ(pp.smem_bytes, implicit_wgmma_smem_bytes(128, implicit_wgmma_stages(128), true));
  EXPECT_LE(pp.smem_bytes, kH200.shared_per_block_optin);
  EXPECT_NE(to_string(pp).find("schedule=pingpong"), std::string::npos) << to_string(pp);
  const ImplicitWgmmaPlan co = implicit_wgmma_plan(
      make_problem(layer), kH200, kDefaultWorkspaceBytes, WgmmaScheduleChoice::cooperative);
  EXPECT_FALSE(co.pingpong);
  EXPECT_NE(to_string(co).find("schedule=cooperative"), std::string::npos) << to_string(co);
  const ImplicitWgmmaPlan automatic =
      implicit_wgmma_plan(make_problem(layer), kH200, kDefaultWorkspaceBytes);
  EXPECT_EQ(automatic.pingpong, implicit_wgmma_prefers_pingpong(pp));

  // f32 out stores element by element: the cooperative schedule only.
  Spec f32 = layer;
  f32.out_dtype = DType::f32;
  EXPECT_FALSE(implicit_wgmma_plan(make_problem(f32), kH200, kDefaultWorkspaceBytes,
                                   WgmmaScheduleChoice::pingpong)
                   .pingpong);
  // A layer in reduction segments (VAE mid layer at 256x256) keeps them, cooperative.
  const Spec mid = padded({1, 32, 32, 512}, {512, 3, 3, 512}, 1);
  const ImplicitWgmmaPlan seg = implicit_wgmma_plan(
      make_problem(mid), kH200, kDefaultWorkspaceBytes, WgmmaScheduleChoice::pingpong);
  EXPECT_GT(seg.k_segments, 1);
  EXPECT_FALSE(seg.pingpong);
  // Stride phases of a transposed convolution inherit the schedule.
  Spec transposed = padded({1, 64, 64, 256}, {128, 4, 4, 256}, 0);
  transposed.params = conv_transpose_params({4, 4}, {2, 2}, {1, 1}, {0, 0}, {1, 1}, 1);
  const detail::ConvProblem tp = make_problem(transposed);
  const ImplicitWgmmaPlan phased =
      implicit_wgmma_plan(tp, kH200, kDefaultWorkspaceBytes, WgmmaScheduleChoice::pingpong);
  ASSERT_EQ(implicit_wgmma_phase_count(phased), 4);
  EXPECT_TRUE(phased.pingpong);
  EXPECT_TRUE(implicit_wgmma_phase_plan(tp, phased, {0, 1, 1}).pingpong);
  EXPECT_FALSE(implicit_wgmma_phase_plan(tp, co, {0, 1, 1}).pingpong);

  // Through selection: the request's schedule reaches the plan.
  ConvRequest r = request_of("implicit", kDefaultWorkspaceBytes);
  r.wgmma_schedule = WgmmaScheduleChoice::pingpong;
  const ConvConfig c = select_conv_config(make_problem(layer), kH200, r);
  ASSERT_EQ(c.path, ConvPath::implicit_wgmma) << to_string(c);
  EXPECT_TRUE(c.implicit_wgmma.pingpong);
  EXPECT_NE(c.reason.find("schedule=pingpong"), std::string::npos) << c.reason;
}

TEST(ConvImplicitWgmmaSchedule, SettingIsParsedOnce) {
  expect_choice_setting(&ConvRequestSettings::env_wgmma_schedule, &ConvRequest::wgmma_schedule,
                        "GEMMKIT_CONV_WGMMA_SCHEDULE",
                        {{"pingpong", WgmmaScheduleChoice::pingpong},
                         {"cooperative", WgmmaScheduleChoice::cooperative}},
                        "ping-pong", "auto, cooperative, pingpong");
}

TEST(ConvImplicitWgmmaSchedule, NarrowOTilesWhereOIsAtMost64) {
  // ResNet-50 3x3 at 56x56, c = o = 64: 64-channel tiles, the consumers on half the positions each.
  const Spec r50 = padded({8, 56, 56, 64}, {64, 3, 3, 64}, 1);
  const ImplicitWgmmaPlan narrow =
      implicit_wgmma_plan(make_problem(r50), kH200, kDefaultWorkspaceBytes);
  EXPECT_EQ(narrow.block_o, kWgmmaConvNarrowBlockO) << to_string(narrow);
  EXPECT_EQ(narrow.o_tiles, 1);
  EXPECT_NE(to_string(narrow).find("tile=64x"), std::string::npos) << to_string(narrow);
  EXPECT_EQ(implicit_wgmma_consumer_part(narrow, 1).first_column, narrow.block_n / 2);
  // Forced 128: half of the tile's channels past o.
  const ImplicitWgmmaPlan wide =
      implicit_wgmma_plan(make_problem(r50), kH200, kDefaultWorkspaceBytes,
                          WgmmaScheduleChoice::automatic, WgmmaOTileChoice::o128);
  EXPECT_EQ(wide.block_o, kWgmmaConvBlockO);
  EXPECT_EQ(wide.block_n, narrow.block_n);
  EXPECT_DOUBLE_EQ(narrow.tile_efficiency, 2 * wide.tile_efficiency);
  // ResNet-50 3x3 stride 2 (8 x 28 x 28 positions, c = o = 128): 56 tiles of 128 channels would
  // split K in two through the workspace; 112 tiles of 64 channels in one chain cost less.
  const Spec s2 = [] {
    Spec s = padded({8, 56, 56, 128}, {128, 3, 3, 128}, 1);
    s.params.stride = {2};
    return s;
  }();
  const ImplicitWgmmaPlan s2_auto =
      implicit_wgmma_plan(make_problem(s2), kH200, kDefaultWorkspaceBytes);
  EXPECT_EQ(s2_auto.block_o, kWgmmaConvNarrowBlockO) << to_string(s2_auto);
  EXPECT_EQ(s2_auto.o_tiles, 2);
  EXPECT_EQ(s2_auto.k_segments, 1);
  EXPECT_FALSE(s2_auto.split_parallel);
  EXPECT_EQ(s2_auto.workspace_bytes, 0);
  const ImplicitWgmmaPlan s2_wide =
      implicit_wgmma_plan(make_problem(s2), kH200, kDefaultWorkspaceBytes,
                          WgmmaScheduleChoice::automatic, WgmmaOTileChoice::o128);
  EXPECT_EQ(s2_wide.block_o, kWgmmaConvBlockO);
  EXPECT_GT(s2_wide.k_segments, 1) << to_string(s2_wide);
  EXPECT_LT(implicit_wgmma_cost(s2_auto, s2_auto.tiles),
            implicit_wgmma_cost(s2_wide, s2_wide.tiles));
  // Segments or one chain (different bits) is decided per image: the same for any batch and
  // workspace.
  for (const int64_t n : {1, 2, 8, 64, 512}) {
    for (const int64_t budget : {kDefaultWorkspaceBytes, int64_t{0}}) {
      for (Spec layer : {s2, padded({1, 32, 32, 512}, {512, 3, 3, 512}, 1)}) {
        const int expected = layer.w_shape[0] == 128 ? 1 : 4;
        layer.x_shape[0] = n;
        const ImplicitWgmmaPlan t = implicit_wgmma_plan(make_problem(layer), kH200, budget);
        EXPECT_EQ(t.k_segments, expected)
            << "n " << n << " budget " << budget << ": " << to_string(t);
      }
    }
  }
  // Layers that keep 128-channel tiles (each measured slower in 64-channel ones): the VAE's
  // 128-channel layer at 1024^2, wan-vae's c = o = 96 3-D layer, the VAE mid layer at 256^2 (four
  // parallel reduction segments), whisper's conv1 (o = 1280).
  for (const Spec& keep :
       {padded({1, 1024, 1024, 128}, {128, 3, 3, 128}, 1),
        padded({1, 5, 128, 128, 96}, {96, 3, 3, 3, 96}, 1),
        padded({1, 32, 32, 512}, {512, 3, 3, 512}, 1), padded({1, 3000, 128}, {1280, 3, 128}, 1)}) {
    const ImplicitWgmmaPlan t =
        implicit_wgmma_plan(make_problem(keep), kH200, kDefaultWorkspaceBytes);
    EXPECT_EQ(t.block_o, kWgmmaConvBlockO) << to_string(t);
  }
  // Forced 64 drops the reduction segments.
  const Spec mid = padded({1, 32, 32, 512}, {512, 3, 3, 512}, 1);
  const ImplicitWgmmaPlan mid_narrow =
      implicit_wgmma_plan(make_problem(mid), kH200, kDefaultWorkspaceBytes,
                          WgmmaScheduleChoice::automatic, WgmmaOTileChoice::o64);
  EXPECT_EQ(mid_narrow.block_o, kWgmmaConvNarrowBlockO);
  EXPECT_EQ(mid_narrow.k_segments, 1);
  EXPECT_FALSE(mid_narrow.split_parallel);
  // The ping-pong schedule and transposed convolutions keep 128-channel tiles.
  const Spec small_o = padded({1, 256, 256, 128}, {64, 3, 3, 128}, 1);
  EXPECT_FALSE(implicit_wgmma_plan(make_problem(small_o), kH200, kDefaultWorkspaceBytes,
                                   WgmmaScheduleChoice::pingpong, WgmmaOTileChoice::o64)
                   .pingpong);
  EXPECT_TRUE(implicit_wgmma_plan(make_problem(small_o), kH200, kDefaultWorkspaceBytes,
                                  WgmmaScheduleChoice::pingpong, WgmmaOTileChoice::o128)
                  .pingpong);
  Spec transposed = padded({1, 64, 64, 256}, {64, 4, 4, 256}, 0);
  transposed.params = conv_transpose_params({4, 4}, {2, 2}, {1, 1}, {0, 0}, {1, 1}, 1);
  const ImplicitWgmmaPlan phased =
      implicit_wgmma_plan(make_problem(transposed), kH200, kDefaultWorkspaceBytes,
                          WgmmaScheduleChoice::automatic, WgmmaOTileChoice::o64);
  EXPECT_EQ(phased.block_o, kWgmmaConvBlockO);

  // Through selection, and the setting.
  ConvRequest r = request_of("implicit", kDefaultWorkspaceBytes);
  r.wgmma_o_tile = WgmmaOTileChoice::o64;
  const ConvConfig c = select_conv_config(make_problem(mid), kH200, r);
  ASSERT_EQ(c.path, ConvPath::implicit_wgmma) << to_string(c);
  EXPECT_EQ(c.implicit_wgmma.block_o, kWgmmaConvNarrowBlockO);
  EXPECT_NE(c.reason.find("tile=64x"), std::string::npos) << c.reason;
  expect_choice_setting(&ConvRequestSettings::env_wgmma_o_tile, &ConvRequest::wgmma_o_tile,
                        "GEMMKIT_CONV_WGMMA_O_TILE",
                        {{"64", WgmmaOTileChoice::o64}, {"128", WgmmaOTileChoice::o128}}, "32",
                        "auto, 128, 64");
}

TEST(ConvImplicitWgmmaSchedule, RingSkipMatchesTheProducersOrder) {
  constexpr int kStages = 6;
  for (int32_t k_blocks : {1, 2, 5, 6, 7, 18, 72}) {
    WgmmaConvRing<kStages> ring;
    int64_t position = 0;
    for (int tile = 0; tile < 9; ++tile) {
      if (tile % 3 == 1) {  // another consumer's tile
        ring.skip(k_blocks);
        position += k_blocks;
        continue;
      }
      for (int32_t kb = 0; kb < k_blocks; ++kb, ++position) {
        ASSERT_EQ(ring.stage, position % kStages) << k_blocks << " " << position;
        ASSERT_EQ(ring.phase, static_cast<uint32_t>((position / kStages) & 1));
        ring.next();
      }
    }
  }
}

// ---- Emulation of the ping-pong kernel's synchronization ---------------------------------------

// An mbarrier: completed phases, and what the hardware's parity wait sees.
struct Barrier {
  int64_t completed = 0;
  bool passes(uint32_t parity) const { return static_cast<uint32_t>(completed & 1) != parity; }
};

struct Emulation {
  int stages = 6;
  int32_t k_blocks = 1;
  int64_t tiles = 1;  // of the CTA
  bool order_turns = true;
};

// Runs the producer and the two consumers of one CTA in a random interleaving, one barrier step
// at a time, as wgmma_pingpong.cuh does them. Returns "" when every k block reduced was the one
// filled for it and everything finished, else what went wrong.
std::string emulate(const Emulation& e, uint32_t seed) {
  std::vector<Barrier> full(e.stages), empty(e.stages);
  std::vector<int64_t> content(e.stages, -1);  // the position a stage holds
  Barrier order[2];
  const int64_t positions = e.tiles * e.k_blocks;
  // Producer.
  int64_t produced = 0;
  int p_stage = 0;
  uint32_t p_phase = 0;
  // Consumers: their tile (2 round + c), k block, ring, previous stage to free.
  struct Consumer {
    int64_t round = 0;
    int32_t kb = 0;
    bool started = false;  // the order wait of the tile passed
    int stage = 0;
    uint32_t phase = 0;
    int previous = -1;
  } consumer[2];
  consumer[1].stage = static_cast<int>(e.k_blocks % e.stages);
  consumer[1].phase = static_cast<uint32_t>((e.k_blocks / e.stages) & 1);
  std::mt19937 random(seed);
  const auto advance = [&](int& stage, uint32_t& phase, int64_t count) {
    const int64_t to = stage + count;
    stage = static_cast<int>(to % e.stages);
    phase ^= static_cast<uint32_t>((to / e.stages) & 1);
  };
  for (int64_t steps = 0; steps < 1000000; ++steps) {
    std::vector<int> runnable;
    if (produced < positions && empty[p_stage].passes(p_phase ^ 1)) runnable.push_back(2);
    for (int c = 0; c < 2; ++c) {
      Consumer& s = consumer[c];
      const int64_t tile = 2 * s.round + c;
      if (tile >= e.tiles) continue;
      if (!s.started) {
        const bool wait = e.order_turns && (c == 1 || s.round > 0);
        const uint32_t parity = static_cast<uint32_t>((c == 1 ? s.round : s.round - 1) & 1);
        if (!wait || order[1 - c].passes(parity)) runnable.push_back(c);
      } else if (full[s.stage].passes(s.phase)) {
        runnable.push_back(c);
      }
    }
    if (runnable.empty()) {
      const bool done = produced == positions && 2 * consumer[0].round >= e.tiles &&
                        2 * consumer[1].round + 1 >= e.tiles;
      return done ? "" : "deadlock";
    }
    const int who = runnable[random() % runnable.size()];
    if (who == 2) {
      content[p_stage] = produced++;
      ++full[p_stage].completed;
      advance(p_stage, p_phase, 1);
      continue;
    }
    Consumer& s = consumer[who];
    if (!s.started) {
      s.started = true;
      continue;
    }
    const int64_t tile = 2 * s.round + who;
    const int64_t expected = tile * e.k_blocks + s.kb;
    if (content[s.stage] != expected) {
      return "consumer " + std::to_string(who) + " reduced position " +
             std::to_string(content[s.stage]) + " in place of " + std::to_string(expected);
    }
    if (s.previous >= 0) ++empty[s.previous].completed;  // freed once the next block is issued
    s.previous = s.stage;
    advance(s.stage, s.phase, 1);
    if (++s.kb == e.k_blocks) {
      ++order[who].completed;
      ++empty[s.previous].completed;
      s.previous = -1;
      advance(s.stage, s.phase, e.k_blocks);
      s.kb = 0;
      s.started = false;
      ++s.round;
    }
  }
  return "did not finish";
}

TEST(ConvImplicitWgmmaSchedule, EmulatedRingHandsEachConsumerItsBlocks) {
  for (int32_t k_blocks : {1, 2, 3, 5, 6, 7, 12, 18}) {
    for (int64_t tiles : {1, 2, 3, 8, 11}) {
      for (uint32_t seed = 0; seed < 40; ++seed) {
        Emulation e;
        e.k_blocks = k_blocks;
        e.tiles = tiles;
        ASSERT_EQ(emulate(e, seed), "")
            << "k_blocks " << k_blocks << ", tiles " << tiles << ", seed " << seed;
      }
    }
  }
}

TEST(ConvImplicitWgmmaSchedule, WithoutOrderTurnsAConsumerRunsAPassAhead) {
  // The emulation catches the hazard the order turns prevent: with tiles of at least as many k
  // blocks as stages, a consumer that starts its tile while the stage's previous pass (the other
  // consumer's block) is not filled yet sees that pass's parity and reduces a stale block.
  int wrong = 0;
  for (uint32_t seed = 0; seed < 200; ++seed) {
    Emulation e;
    e.k_blocks = 8;
    e.tiles = 6;
    e.order_turns = false;
    const std::string why = emulate(e, seed);
    if (why.find("reduced position") != std::string::npos) ++wrong;
  }
  EXPECT_GT(wrong, 0);
}

}  // namespace
}  // namespace gemmkit::cuda::conv_impl
