// Host tests of the CUDA linear dispatch (select_linear_config): a pure function, so CI checks
// every choice and every launch limit without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cuda/common/recent_cache.h"
#include "cuda/linear/config_cache.h"
#include "cuda/linear/cublaslt_plans.h"
#include "cuda/linear/linear_config.h"
#include "cuda/linear/tile_order.h"

namespace gemmkit::cuda::linear_family {
namespace {

const LinearDevice kH200{};  // defaults describe the H200: sm_90, 132 SMs, 227 KiB opt-in

LinearShape bf16_shape(int64_t n, int64_t m, int64_t k) {
  LinearShape s;
  s.n = n;
  s.m = m;
  s.k = k;
  s.has_bias = true;
  s.tma_compatible = k % 8 == 0;
  return s;
}

// The text of the Error that `run` throws, or "no error".
template <typename Run>
std::string error_text(Run run) {
  try {
    run();
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

// select_linear_config's error for `forced` on `shape`, or "no error".
std::string forced_error(const LinearShape& shape, const std::string& forced,
                         const LinearDevice& device = kH200, bool pdl = true) {
  return error_text([&] { select_linear_config(shape, device, forced, pdl); });
}

void expect_within_limits(const LinearConfig& c, const LinearShape& s, const LinearDevice& d) {
  SCOPED_TRACE(c.to_string());
  EXPECT_FALSE(c.reason.empty());
  if (c.path == LinearPath::cublaslt) return;
  EXPECT_GE(c.grid_x, 1);
  EXPECT_LE(c.grid_x, d.max_grid_x);
  EXPECT_LE(c.threads, 1024);
  if (c.path == LinearPath::reference) {
    // One warp per 16 x 8 tile, grid-stride: every tile is visited.
    EXPECT_EQ(c.tiles, ceil_div(s.m, 16) * ceil_div(s.n, 8));
    EXPECT_GE(c.grid_x * (c.threads / 32), std::min<int64_t>(c.tiles, c.grid_x * (c.threads / 32)));
  }
  if (c.path == LinearPath::tma_ring) {
    const int64_t groups = ceil_div(s.k, kGroupK);
    EXPECT_TRUE(c.stages == 4 || c.stages == 8 || c.stages == 16);
    EXPECT_TRUE(ring_consumers_allowed(c.consumers, c.mt, c.nt, c.stages, c.batch));
    EXPECT_EQ(c.threads, 32 * (c.consumers + c.producers));
    EXPECT_GE(c.cluster, 1);
    EXPECT_LE(c.cluster, 16);
    EXPECT_LE(c.cluster, d.max_cluster);
    EXPECT_GE(int64_t{c.cluster} * c.groups_per_rank, groups) << "a group has no owner";
    EXPECT_LT(int64_t{c.cluster - 1} * c.groups_per_rank, groups) << "a rank owns no group";
    EXPECT_LE(c.shared_bytes, d.shared_optin);
    EXPECT_EQ(c.shared_bytes,
              ring_shared_bytes_host(c.stages, c.mt, c.nt, groups, c.cluster, c.groups_per_rank));
    EXPECT_EQ(c.grid_x, c.tiles * c.cluster);
    EXPECT_EQ(c.tiles, ceil_div(s.m, 16 * c.mt) * ceil_div(s.n, 8 * c.nt));
  }
  if (c.path == LinearPath::stream) {
    EXPECT_TRUE(canonical_one_chain(s.m));
    EXPECT_TRUE(stream_tile_built(c.consumers, c.nt));
    EXPECT_EQ(c.threads, 32 * (c.consumers + 1));
    EXPECT_EQ(c.tiles, ceil_div(s.m, 16 * c.consumers) * ceil_div(s.n, 8 * c.nt));
    EXPECT_EQ(c.grid_x, std::min(c.tiles, d.max_grid_x));
    if (c.stages == kStreamLongStages) {
      EXPECT_TRUE(stream_long_ring_built(c.consumers, c.nt)) << c.name;
      EXPECT_NE(c.name.find(".s16"), std::string::npos) << c.name;
    } else {
      EXPECT_EQ(c.stages, stream_stages_host(c.consumers, c.nt)) << c.name;
      EXPECT_EQ(c.name.find(".s"), std::string::npos) << c.name;
    }
    EXPECT_EQ(c.shared_bytes, stream_shared_bytes_host(c.consumers, c.nt, c.stages));
    EXPECT_LE(c.shared_bytes, d.shared_optin);
  }
  if (c.path == LinearPath::wgmma_swap) {
    EXPECT_TRUE(canonical_one_chain(s.m));
    EXPECT_TRUE(swap_variant_built(c.block_n, c.consumers));
    EXPECT_EQ(c.threads, 128 * (1 + c.consumers));
    EXPECT_EQ(c.tiles, ceil_div(s.m, c.block_n) * ceil_div(s.n, 64));
    EXPECT_EQ(c.grid_x, std::min<int64_t>(c.tiles, d.multiprocessors));
    EXPECT_EQ(c.shared_bytes, swap_shared_bytes_host(c.block_n));
    EXPECT_LE(c.shared_bytes, d.shared_optin);
  }
  if (c.path == LinearPath::wgmma) {
    const int64_t groups = ceil_div(s.k, kGroupK);
    EXPECT_EQ(c.one_chain, canonical_one_chain(s.m));
    if (c.one_chain) {
      EXPECT_EQ(c.splits, 1);
    }
    EXPECT_EQ(c.tiles, ceil_div(s.m, 128) * ceil_div(s.n, c.block_n));
    EXPECT_TRUE(wgmma_split_exact(groups, c.splits)) << groups << " groups";
    EXPECT_EQ(c.split_groups, ceil_div(groups, c.splits));
    EXPECT_GE(c.splits * c.split_groups, groups) << "a group has no run";
    EXPECT_LT((c.splits - 1) * c.split_groups, groups) << "a run has no group";
    EXPECT_LE(c.grid_x, d.multiprocessors);  // persistent: at most one CTA per SM
    EXPECT_LE(c.grid_x, c.tiles * c.splits);
    EXPECT_LE(c.shared_bytes, d.shared_optin);
    if (c.splits > 1) {
      EXPECT_EQ(c.workspace_bytes, c.tiles * (groups - c.split_groups + 1) * 128 * c.block_n * 4);
      EXPECT_LE(c.workspace_bytes, kWgmmaSplitWorkspaceBytes);
      EXPECT_EQ(c.fold_grid_x, c.tiles * (c.block_n / 8));
      EXPECT_LE(c.fold_grid_x, d.max_grid_x);
      EXPECT_NE(c.name.find(".k" + std::to_string(c.splits)), std::string::npos);
    } else {
      EXPECT_EQ(c.workspace_bytes, 0);
      EXPECT_EQ(c.name.find(".k"), c.splits_forced ? c.name.size() - 3 : std::string::npos);
    }
  }
}

TEST(LinearDispatch, RoutersTakeTheRing) {
  for (int64_t n : {1, 2, 4, 8, 16, 32, 64}) {
    const LinearShape s = bf16_shape(n, 128, 2880);
    const LinearConfig c = select_linear_config(s, kH200, "", true);
    EXPECT_EQ(c.path, LinearPath::tma_ring) << c.to_string();
    EXPECT_TRUE(c.pdl);
    expect_within_limits(c, s, kH200);
  }
}

TEST(LinearDispatch, ClusterSpreadsSmallProblemsOverTheMachine) {
  const LinearConfig c = select_linear_config(bf16_shape(1, 128, 2880), kH200, "", false);
  // 8 tiles of 16 rows, 6 groups of 512: the split uses 6 ranks of one group each.
  EXPECT_EQ(c.tiles, 8);
  EXPECT_EQ(c.cluster, 6);
  EXPECT_EQ(c.groups_per_rank, 1);
  // Two groups (k = 720, 6 slices): one CTA whose eight consumer warps take a slice each; with
  // four consumer warps, a split into one group of four slices per rank.
  const LinearConfig tiny = select_linear_config(bf16_shape(1, 128, 720), kH200, "", true);
  EXPECT_EQ(tiny.cluster, 1) << tiny.to_string();
  EXPECT_EQ(tiny.name, "ring8.t1x1.w8.p4.c1");
  EXPECT_EQ(select_linear_config(bf16_shape(1, 128, 720), kH200, "ring4", true).name,
            "ring4.t1x1.p4.c2");
  EXPECT_EQ(select_linear_config(bf16_shape(1, 128, 720), kH200, "ring8.w4", true).cluster, 2);
  // One group (k <= 512) has nothing to split.
  EXPECT_EQ(select_linear_config(bf16_shape(1, 128, 512), kH200, "", true).cluster, 1);
}

// An H100 SXM's co-resident clusters by size (cudaOccupancyMaxActiveClusters at one and at two
// CTAs per SM): 15 clusters of 7 fit at once at one CTA per SM, not 132 / 7 = 18.
LinearDevice with_measured_clusters(LinearDevice d) {
  d.coresident_clusters = {{{0, 132, 66, 39, 30, 22, 17, 15, 15, 9, 7, 7, 7, 7, 7, 7, 7},
                            {0, 264, 132, 79, 62, 47, 39, 32, 30, 23, 21, 16, 16, 14, 14, 14, 14}}};
  return d;
}

TEST(LinearDispatch, ClustersRunInOneWave) {
  const LinearDevice measured = with_measured_clusters(kH200);
  // 16 x 128 x 14336: 16 tiles, 28 groups; clusters of 7 take one CTA per SM (4 groups a rank:
  // ~120 KiB) and 15 of them run at once, so 7 ranks would need a second wave; 6 fit (17).
  const LinearShape long_k = bf16_shape(16, 128, 14336);
  const LinearConfig unknown = select_linear_config(long_k, kH200, "", true);
  EXPECT_EQ(unknown.cluster, 7) << unknown.to_string();
  const LinearConfig bounded = select_linear_config(long_k, measured, "", true);
  EXPECT_EQ(bounded.cluster, 6) << bounded.to_string();
  EXPECT_EQ(bounded.groups_per_rank, 5);
  EXPECT_EQ(ring_ctas_per_sm(bounded, measured), 1);
  EXPECT_TRUE(ring_clusters_one_wave(bounded, measured));
  EXPECT_NE(bounded.reason.find("cluster 6, not 7"), std::string::npos) << bounded.reason;
  expect_within_limits(bounded, long_k, measured);
  // Named clusters stay as named.
  EXPECT_EQ(select_linear_config(long_k, measured, "ring16.w8.c7", true).cluster, 7);
  // The same 16 tiles x 7 ranks at two CTAs per SM (1 x 256 x 7168: 2 groups a rank, ~64 KiB):
  // 32 clusters of 7 at once, so 7 stay.
  const LinearConfig two_per_sm =
      select_linear_config(bf16_shape(1, 256, 7168), measured, "", true);
  EXPECT_EQ(two_per_sm.cluster, 7) << two_per_sm.to_string();
  EXPECT_EQ(ring_ctas_per_sm(two_per_sm, measured), 2);
  EXPECT_EQ(two_per_sm.reason.find("not 7"), std::string::npos);
  // Every router and decode shape the ring takes keeps its clusters in one wave.
  for (int64_t n : {1, 8, 16, 32, 64, 128}) {
    for (const auto& [m, k] : std::vector<std::pair<int64_t, int64_t>>{{32, 2880},
                                                                       {128, 2880},
                                                                       {128, 7168},
                                                                       {256, 7168},
                                                                       {384, 7168},
                                                                       {128, 14336},
                                                                       {128, 4096},
                                                                       {256, 2048},
                                                                       {1024, 1024}}) {
      const LinearConfig c = select_linear_config(bf16_shape(n, m, k), measured, "", true);
      if (c.path != LinearPath::tma_ring) continue;
      EXPECT_TRUE(ring_clusters_one_wave(c, measured))
          << n << "x" << m << "x" << k << " " << c.to_string();
    }
  }
}

TEST(LinearDispatch, FamilyBoundFollowsTheMeasuredCrossovers) {
  EXPECT_EQ(family_max_n(128, 2880), 256);
  EXPECT_EQ(family_max_n(32, 2880), 256);
  EXPECT_EQ(family_max_n(128, 7168), 64);
  EXPECT_EQ(family_max_n(256, 7168), 32);
  EXPECT_EQ(family_max_n(256, 4096), 64);
  EXPECT_EQ(family_max_n(256, 4104), 32);
  EXPECT_EQ(family_max_n(257, 4096), 16);
  EXPECT_EQ(family_max_n(384, 7168), 16);
  EXPECT_EQ(family_max_n(1024, 1024), 16);
  EXPECT_EQ(family_max_n(1024, 1032), 8);
  EXPECT_EQ(family_max_n(4096, 3072), 8);
  EXPECT_EQ(family_max_n(2048, 7168), 8);  // just below 2^24 elements
  // From 2^24 weight elements on, none: bandwidth-bound, cuBLASLt at every n.
  EXPECT_EQ(family_max_n(4096, 4096), 0);
  EXPECT_EQ(family_max_n(16384, 53248), 0);
  EXPECT_EQ(family_max_n(1, int64_t{1} << 24), 0);
  for (const LinearShape& big :
       {bf16_shape(1, 2048, 8192), bf16_shape(8, 1024, 28672), bf16_shape(1, 2048, 53248)}) {
    const LinearConfig lt = select_linear_config(big, kH200, "", true);
    EXPECT_EQ(lt.path, LinearPath::cublaslt) << lt.to_string();
    EXPECT_NE(lt.reason.find("bandwidth-bound at every n"), std::string::npos) << lt.reason;
    EXPECT_NE(lt.reason.find("batch-invariance"), std::string::npos) << lt.reason;
  }
  // Weights of 4096 rows and more are the one-chain form's: the streaming kernel at decode.
  for (const LinearShape& big :
       {bf16_shape(1, 4096, 4096), bf16_shape(8, 8192, 28672), bf16_shape(1, 16384, 53248)}) {
    const LinearConfig c = select_linear_config(big, kH200, "", true);
    EXPECT_EQ(c.path, LinearPath::stream) << c.to_string();
    EXPECT_NE(c.reason.find("one-chain form"), std::string::npos) << c.reason;
  }
  // A forced ring still runs a sliced weight above the bound (with the contract's bits), and is
  // refused for a one-chain weight, whose bits it cannot produce.
  EXPECT_EQ(select_linear_config(bf16_shape(8, 2048, 28672), kH200, "ring16", true).path,
            LinearPath::tma_ring);
  EXPECT_NE(forced_error(bf16_shape(8, 8192, 28672), "ring16").find("sliced form"),
            std::string::npos);
  EXPECT_EQ(select_linear_config(bf16_shape(16, 1024, 1024), kH200, "", true).path,
            LinearPath::tma_ring);
  EXPECT_EQ(select_linear_config(bf16_shape(17, 1024, 1024), kH200, "", true).path,
            LinearPath::cublaslt);
  EXPECT_EQ(select_linear_config(bf16_shape(8, 3072, 4096), kH200, "", true).path,
            LinearPath::tma_ring);
  EXPECT_EQ(select_linear_config(bf16_shape(8, 4096, 3072), kH200, "", true).path,
            LinearPath::stream);
  EXPECT_EQ(select_linear_config(bf16_shape(64, 256, 7168), kH200, "", true).path,
            LinearPath::cublaslt);
  // A router-sized weight at n = 128: 128 tiles of 16 x 8, one CTA each (no split).
  const LinearConfig n128 = select_linear_config(bf16_shape(128, 128, 2880), kH200, "", true);
  EXPECT_EQ(n128.path, LinearPath::tma_ring);
  EXPECT_EQ(n128.tiles, 128);
  EXPECT_EQ(n128.cluster, 1);
}

TEST(LinearDispatch, LongReductionsUseNonPortableClustersUnlessCapped) {
  const LinearShape s = bf16_shape(1, 128, 14336);  // 28 groups, 8 tiles
  EXPECT_EQ(select_linear_config(s, kH200, "", true).cluster, 14);
  LinearDevice capped = kH200;
  capped.max_cluster = 8;
  const LinearConfig c = select_linear_config(s, capped, "", true);
  EXPECT_EQ(c.cluster, 7);
  EXPECT_EQ(c.groups_per_rank, 4);
}

TEST(LinearDispatch, AboveTheFamilyGoesToCublasLt) {
  for (int64_t n : {int64_t{257}, int64_t{512}, int64_t{1} << 20, (int64_t{1} << 31) - 1}) {
    const LinearConfig c = select_linear_config(bf16_shape(n, 128, 2880), kH200, "", true);
    EXPECT_EQ(c.path, LinearPath::cublaslt) << n;
    EXPECT_NE(c.reason.find("batch-invariance"), std::string::npos);
  }
}

TEST(LinearDispatch, ReferenceLaunchesForExtremeShapes) {
  for (const auto& [n, m, k] : std::vector<std::tuple<int64_t, int64_t, int64_t>>{
           {(int64_t{1} << 31) - 1, 1, 1},
           {1, (int64_t{1} << 31) - 1, 8},
           {1 << 20, 1 << 20, 3},
           {1, 1, (int64_t{1} << 40)},
           {int64_t{1} << 40, int64_t{1} << 20, 1}}) {
    LinearShape s = bf16_shape(n, m, k);
    const LinearConfig c = select_linear_config(s, kH200, "reference", false);
    EXPECT_EQ(c.path, LinearPath::reference);
    expect_within_limits(c, s, kH200);
  }
}

TEST(LinearDispatch, ReductionsTooLongForTheFoldBufferTakeTheReference) {
  // A CTA keeps the fp32 partial of every slice of its run in shared memory: 8192 slices over at
  // most 16 ranks (256 KiB each) cannot fit, so the family serves the shape (a weight below
  // kFamilyMaxWeight) through the reference kernel. Below that weight bound, only m < 128
  // reaches such a k: at m >= 128 (auto's cluster of 16 or k <= 2^17) the partials fit.
  const LinearShape s = bf16_shape(1, 8, int64_t{1} << 20);
  const LinearConfig c = select_linear_config(s, kH200, "", true);
  EXPECT_EQ(c.path, LinearPath::reference) << c.to_string();
  EXPECT_NE(c.reason.find("partials of its 8192 slices"), std::string::npos) << c.reason;
  EXPECT_NE(forced_error(s, "ring4").find("shared memory"), std::string::npos);
  // The longest reduction of the decode suites keeps the ring.
  EXPECT_EQ(select_linear_config(bf16_shape(1, 128, 14336), kH200, "", true).path,
            LinearPath::tma_ring);
  // Every weight the family serves at m >= 128 keeps the ring (the streaming kernel from 4096
  // rows on): the largest k for each m.
  for (int64_t m : {128, 256, 512, 1000, 1024, 2048, 4096, 16384}) {
    const int64_t k = (kFamilyMaxWeight - 1) / m / 8 * 8;
    for (int64_t n : {int64_t{1}, family_max_n(m, k)}) {
      const LinearConfig ring = select_linear_config(bf16_shape(n, m, k), kH200, "", true);
      EXPECT_EQ(ring.path, canonical_one_chain(m) ? LinearPath::stream : LinearPath::tma_ring)
          << n << "x" << m << "x" << k << ": " << ring.reason;
    }
  }
}

TEST(LinearDispatch, LayoutsTmaCannotLoadKeepTheFamilyThroughTheReference) {
  LinearShape s = bf16_shape(4, 128, 1003);
  EXPECT_FALSE(s.tma_compatible);
  const LinearConfig c = select_linear_config(s, kH200, "", true);
  EXPECT_EQ(c.path, LinearPath::reference);
  EXPECT_NE(c.reason.find("TMA"), std::string::npos);
}

TEST(LinearDispatch, OtherDtypesAndGpus) {
  LinearShape s = bf16_shape(4, 128, 1024);
  s.in = DType::f32;
  s.out = DType::f32;
  EXPECT_EQ(select_linear_config(s, kH200, "", true).path, LinearPath::simt_f32);
  s.in = DType::f16;
  s.out = DType::f16;
  EXPECT_EQ(select_linear_config(s, kH200, "", true).path, LinearPath::reference);
  LinearDevice ampere = kH200;
  ampere.sm_major = 8;
  EXPECT_EQ(select_linear_config(bf16_shape(4, 128, 1024), ampere, "", true).path,
            LinearPath::cublaslt);
  EXPECT_EQ(select_linear_config(bf16_shape(4, 128, 1024), ampere, "auto", true).reason,
            "portable path: the tensor-core family is built for sm_90");
}

TEST(LinearDispatch, ForcedKernelsAndTheirErrors) {
  const LinearShape s = bf16_shape(8, 256, 7168);
  for (const std::string name : {"ring4", "ring8", "ring16"}) {
    const LinearConfig c = select_linear_config(s, kH200, name, false);
    EXPECT_EQ(c.path, LinearPath::tma_ring);
    EXPECT_EQ("ring" + std::to_string(c.stages), name);
    expect_within_limits(c, s, kH200);
  }
  const auto message = [&](const LinearShape& shape, const std::string& forced) {
    return forced_error(shape, forced, kH200, false);
  };
  EXPECT_NE(message(s, "ring12").find("'ring12': unknown kernel"), std::string::npos);
  LinearShape f16 = s;
  f16.in = DType::f16;
  EXPECT_NE(message(f16, "ring8").find("ring kernels take bf16 operands only"), std::string::npos);
  EXPECT_NE(message(bf16_shape(8, 256, 7167), "ring8").find("cannot be loaded by TMA"),
            std::string::npos);
  EXPECT_NE(message(s, "simt_f32").find("f32 operands only"), std::string::npos);
  EXPECT_NE(message(s, "warp9").find("GEMMKIT_LINEAR_KERNEL"), std::string::npos);
}

TEST(LinearDispatch, ForcedRingBatches) {
  // .b<N>: the slices a consumer warp waits for at a time; printed only where it is not the
  // default (1 on the 16 x 8 tile; up to 4 on tiles of 2-4 MMA tiles), and the printed name forces
  // the same variant.
  const LinearShape s = bf16_shape(128, 128, 2880);
  for (const auto& [forced, batch, name] : std::vector<std::tuple<std::string, int, std::string>>{
           {"ring16.b1", 1, "ring16.t1x1.p4.c1"},
           {"ring16.b2", 2, "ring16.t1x1.b2.p4.c1"},
           {"ring16.b4", 4, "ring16.t1x1.b4.p4.c1"},
           {"ring8.t1x1.b2", 2, "ring8.t1x1.b2.p4.c1"},
           {"ring16", 1, "ring16.t1x1.p4.c1"},
           {"ring8.t1x4.b2", 2, "ring8.t1x4.p4.c3"}}) {
    const LinearConfig c = select_linear_config(s, kH200, forced, true);
    EXPECT_EQ(c.batch, batch) << forced;
    EXPECT_EQ(c.name, name) << forced;
    EXPECT_EQ(select_linear_config(s, kH200, c.name, true).batch, batch) << c.name;
  }
  EXPECT_EQ(select_linear_config(s, kH200, "", true).batch, 1);
  EXPECT_NE(forced_error(s, "ring8.b4", kH200).find("batch 4: a consumer waits for 1, 2 or 4"),
            std::string::npos);
  EXPECT_NE(forced_error(s, "ring8.b4", kH200).find("stages / 4 (2 here)"), std::string::npos);
  EXPECT_NE(forced_error(s, "ring16.b3", kH200).find("batch 3"), std::string::npos);
  EXPECT_NE(forced_error(s, "ring16.t2x4.b2", kH200).find("default batch only (1 here)"),
            std::string::npos);
  EXPECT_NE(forced_error(s, "ring16.b", kH200).find("unknown kernel"), std::string::npos);
  EXPECT_NE(forced_error(s, "ring16.p4.b2", kH200).find("unknown kernel"), std::string::npos);
}

TEST(LinearDispatch, EightConsumerWarpsWhereACtaReducesMoreThanFourSlices) {
  // Auto: eight where a CTA has more than four slices and the CTAs do not share SMs.
  for (const auto& [shape, name] : std::vector<std::pair<LinearShape, std::string>>{
           {bf16_shape(16, 1024, 1024), "ring8.t1x1.w8.p4.c1"},  // 128 CTAs of 8 slices
           {bf16_shape(1, 128, 14336), "ring8.t1x1.w8.p4.c14"},  // 2 groups per rank
           {bf16_shape(64, 128, 7168), "ring16.t1x1.w8.p4.c2"},  // 7 groups per rank
           {bf16_shape(1, 128, 2880), "ring4.t1x1.p4.c6"},       // one group per rank
           {bf16_shape(8, 128, 4096), "ring4.t1x1.p4.c8"},       // one group per rank
           {bf16_shape(256, 128, 2880), "ring8.t1x1.p4.c1"},     // 256 CTAs share the SMs
           {bf16_shape(1, 128, 512), "ring4.t1x1.p4.c1"}}) {     // 4 slices
    const LinearConfig c = select_linear_config(shape, kH200, "", true);
    EXPECT_EQ(c.name, name) << shape.n << "x" << shape.m << "x" << shape.k;
    expect_within_limits(c, shape, kH200);
    // The printed name forces the same variant.
    const LinearConfig again = select_linear_config(shape, kH200, c.name, true);
    EXPECT_EQ(again.name, c.name);
    EXPECT_EQ(again.consumers, c.consumers);
    EXPECT_EQ(again.threads, c.threads);
  }
  const LinearShape s = bf16_shape(128, 128, 2880);
  const LinearConfig eight = select_linear_config(s, kH200, "", true);
  EXPECT_EQ(eight.consumers, 8);
  EXPECT_EQ(eight.threads, 384);
  // Forced names without .w run four consumer warps; .w8 eight, on 8 or 16 stages.
  EXPECT_EQ(select_linear_config(s, kH200, "ring16", true).consumers, 4);
  EXPECT_EQ(select_linear_config(s, kH200, "ring16", true).threads, 256);
  EXPECT_EQ(select_linear_config(s, kH200, "ring16.w4", true).name, "ring16.t1x1.p4.c1");
  EXPECT_EQ(select_linear_config(s, kH200, "ring8.w8.p1", true).name, "ring8.t1x1.w8.p1.c1");
  EXPECT_EQ(select_linear_config(s, kH200, "ring8.w8.p1", true).threads, 288);
  for (const std::string bad : {"ring4.w8", "ring16.w8.b2", "ring8.t1x2.w8", "ring16.w2"}) {
    EXPECT_NE(forced_error(s, bad).find("consumer warps"), std::string::npos) << bad;
  }
  EXPECT_NE(forced_error(s, "ring16.w").find("unknown kernel"), std::string::npos);
  EXPECT_NE(forced_error(s, "ring16.p4.w8").find("unknown kernel"), std::string::npos);
  // A reduction so long that only 4 stages fit next to its partials keeps four consumer warps.
  LinearDevice one_cta = kH200;
  one_cta.max_cluster = 1;
  const LinearShape long_k = bf16_shape(1, 16, 48000);
  const LinearConfig c = select_linear_config(long_k, one_cta, "", true);
  EXPECT_EQ(c.stages, 4) << c.to_string();
  EXPECT_EQ(c.consumers, 4) << c.to_string();
  expect_within_limits(c, long_k, one_cta);
  EXPECT_NE(forced_error(long_k, "ring8.w8", one_cta).find("does not fit"), std::string::npos);
}

TEST(LinearDispatch, ForcedRingTiles) {
  // The variant names as they print select the tile too; the cluster is still chosen.
  const LinearShape s = bf16_shape(64, 128, 2880);
  for (const auto& [forced, mt, nt] :
       std::vector<std::tuple<std::string, int, int>>{{"ring4.t1x1", 1, 1},
                                                      {"ring8.t1x2", 1, 2},
                                                      {"ring4.t1x4", 1, 4},
                                                      {"ring8.t2x4", 2, 4}}) {
    const LinearConfig c = select_linear_config(s, kH200, forced, true);
    EXPECT_EQ(c.mt, mt) << forced;
    EXPECT_EQ(c.nt, nt) << forced;
    EXPECT_EQ(c.name.rfind(forced + ".p4.c", 0), 0u) << c.name;
    EXPECT_EQ(c.tiles, ceil_div(128, 16 * mt) * ceil_div(64, 8 * nt)) << forced;
    expect_within_limits(c, s, kH200);
  }
  // Unforced, every n the family serves takes 16 x 8 tiles (the measured crossovers).
  for (int64_t n : {1, 9, 16, 17, 32, 64}) {
    const LinearConfig c = select_linear_config(bf16_shape(n, 128, 2880), kH200, "", true);
    EXPECT_EQ(c.mt * 10 + c.nt, 11) << c.to_string();
    EXPECT_EQ(select_linear_config(bf16_shape(n, 128, 2880), kH200, "ring4", true).nt, 1);
  }
  EXPECT_EQ(select_linear_config(bf16_shape(64, 128, 2880), kH200, "", true).name,
            "ring16.t1x1.w8.p4.c2");  // 64 tiles: 2 ranks of 3 groups
  // One CTA per tile, whole k: 16 stages while the CTAs fit the SMs, 8 once they share them.
  EXPECT_EQ(select_linear_config(bf16_shape(128, 128, 2880), kH200, "", true).name,
            "ring16.t1x1.w8.p4.c1");
  EXPECT_EQ(select_linear_config(bf16_shape(256, 128, 2880), kH200, "", true).name,
            "ring8.t1x1.p4.c1");
  // One batch tile keeps 16 stages, however many weight tiles share the SMs.
  EXPECT_EQ(select_linear_config(bf16_shape(8, 3072, 3072), kH200, "", true).name,
            "ring16.t1x1.p4.c1");
  const auto message = [&](const std::string& forced) {
    return forced_error(s, forced, kH200, false);
  };
  EXPECT_NE(message("ring4.t2x2").find("no ring kernel is built for that tile"), std::string::npos);
  for (const std::string bad :
       {"ring4.t1x1x", "ring4.t1", "ring4.", "ring04", "ring 4", "ring4.tx1", "ring4.p",
        "ring4.p4.t1x1", "ring4.t1x1.p04", "ring4.c2.p4", "ring4.c", "ring4.c02"})
    EXPECT_NE(message(bad).find("unknown kernel"), std::string::npos) << bad;
}

TEST(LinearDispatch, ForcedClusterSplitsExactlyOrSaysWhy) {
  const LinearShape s = bf16_shape(128, 128, 2880);  // 6 groups of 512, 128 tiles
  EXPECT_EQ(select_linear_config(s, kH200, "", true).cluster, 1);
  for (int cluster : {1, 2, 3, 6}) {
    const LinearConfig c =
        select_linear_config(s, kH200, "ring8.c" + std::to_string(cluster), true);
    EXPECT_EQ(c.cluster, cluster) << c.to_string();
    EXPECT_EQ(c.groups_per_rank, 6 / cluster) << c.to_string();
    EXPECT_EQ(c.grid_x, 128 * cluster) << c.to_string();
    expect_within_limits(c, s, kH200);
  }
  // 6 groups over 4 or 5 ranks would leave a rank empty (2 + 2 + 2 + 0).
  EXPECT_NE(forced_error(s, "ring8.c4", kH200).find("does not split the 6 k groups"),
            std::string::npos);
  EXPECT_NE(forced_error(s, "ring8.c7", kH200).find("does not split"), std::string::npos);
  EXPECT_NE(forced_error(bf16_shape(1, 128, 14336), "ring8.c17", kH200).find("cluster 17 > 16"),
            std::string::npos);
  LinearDevice capped = kH200;
  capped.max_cluster = 8;
  EXPECT_NE(forced_error(bf16_shape(1, 128, 14336), "ring8.c14", capped).find("cluster 14 > 8"),
            std::string::npos);
  LinearDevice no_clusters = kH200;
  no_clusters.cluster_launch = false;
  EXPECT_NE(forced_error(s, "ring8.c2", no_clusters).find("launches no clusters"),
            std::string::npos);
  EXPECT_EQ(forced_error(s, "ring8.c1", no_clusters), "no error");
}

TEST(LinearDispatch, PrintedRingNamesSelectTheSameConfig) {
  // Every name auto prints, forced back, gives the same variant: the names are complete.
  for (int64_t n : {1, 8, 16, 64, 128}) {
    for (const auto& [m, k] : std::vector<std::pair<int64_t, int64_t>>{
             {128, 720}, {128, 2880}, {32, 2880}, {256, 7168}, {128, 14336}, {1024, 1024}}) {
      const LinearShape s = bf16_shape(n, m, k);
      const LinearConfig chosen = select_linear_config(s, kH200, "", true);
      if (chosen.path != LinearPath::tma_ring) continue;
      const LinearConfig forced = select_linear_config(s, kH200, chosen.name, true);
      EXPECT_EQ(forced.name, chosen.name);
      EXPECT_EQ(forced.grid_x, chosen.grid_x) << chosen.name;
      EXPECT_EQ(forced.shared_bytes, chosen.shared_bytes) << chosen.name;
    }
  }
}

TEST(LinearDispatch, DeviceSettingsFromTheEnvironment) {
  EXPECT_EQ(parse_ring_producers(""), 4);
  EXPECT_EQ(parse_ring_producers("1"), 1);
  EXPECT_EQ(parse_ring_producers("4"), 4);
  EXPECT_TRUE(parse_ring_async_fold(""));
  EXPECT_TRUE(parse_ring_async_fold("async"));
  EXPECT_FALSE(parse_ring_async_fold("barrier"));
  for (const std::string bad : {"2", "04", " 4"}) {
    EXPECT_NE(error_text([&] {
                parse_ring_producers(bad);
              }).find("GEMMKIT_LINEAR_PRODUCERS '" + bad + "': must be 1 or 4"),
              std::string::npos);
  }
  EXPECT_NE(error_text([] { parse_ring_async_fold("st.async"); }).find("must be async or barrier"),
            std::string::npos);
  EXPECT_TRUE(parse_pdl(""));
  EXPECT_TRUE(parse_pdl("1"));
  EXPECT_FALSE(parse_pdl("0"));
  for (const std::string bad : {"2", "off", "00", " 1"}) {
    EXPECT_NE(error_text([&] {
                parse_pdl(bad);
              }).find("GEMMKIT_LINEAR_PDL '" + bad + "': must be 0 or 1"),
              std::string::npos);
  }
  EXPECT_EQ(parse_max_cluster(""), 16);
  EXPECT_EQ(parse_max_cluster("1"), 1);
  EXPECT_EQ(parse_max_cluster("8"), 8);
  EXPECT_EQ(parse_max_cluster("16"), 16);
  for (const std::string bad : {"0", "17", "abc", "-2", "4x", " 4", "016", "99999999999"}) {
    EXPECT_NE(error_text([&] {
                parse_max_cluster(bad);
              }).find("GEMMKIT_LINEAR_MAX_CLUSTER '" + bad + "': must be an integer from 1 to 16"),
              std::string::npos);
  }
}

TEST(LinearDispatch, ClusterFoldIsTheDevicesUnlessNamed) {
  // The async fold by default; GEMMKIT_LINEAR_FOLD=barrier sets the racecheck twin on the device,
  // and .fa / .fb name either per call. Names print .fb only where a cluster folds that way.
  const LinearShape s = bf16_shape(8, 128, 2880);  // cluster of 6
  const LinearConfig async = select_linear_config(s, kH200, "", true);
  EXPECT_TRUE(async.async_fold);
  EXPECT_EQ(async.name, "ring4.t1x1.p4.c6");
  LinearDevice barrier_device = kH200;
  barrier_device.async_fold = false;
  const LinearConfig barrier = select_linear_config(s, barrier_device, "", true);
  EXPECT_FALSE(barrier.async_fold);
  EXPECT_EQ(barrier.name, "ring4.t1x1.p4.fb.c6");
  EXPECT_EQ(select_linear_config(s, kH200, "ring8.p1.fb", true).name, "ring8.t1x1.p1.fb.c6");
  EXPECT_EQ(select_linear_config(s, barrier_device, "ring8.fa", true).name, "ring8.t1x1.p4.c6");
  EXPECT_TRUE(select_linear_config(s, barrier_device, "ring8.fa", true).async_fold);
  // Without a cluster there is nothing to fold across CTAs: the name says nothing.
  EXPECT_EQ(select_linear_config(bf16_shape(1, 128, 512), kH200, "ring8.fb", true).name,
            "ring8.t1x1.p4.c1");
  for (const std::string bad : {"ring8.fc", "ring8.fb.p4", "ring8.f", "ring8.fbb"})
    EXPECT_NE(forced_error(s, bad).find("unknown kernel"), std::string::npos) << bad;
}

TEST(LinearDispatch, RingProducerWarps) {
  // Four producer warps by default (measured faster on every family row of the decode suite);
  // GEMMKIT_LINEAR_PRODUCERS=1 sets one on the device, and names always print the count.
  const LinearShape s = bf16_shape(8, 128, 2880);
  const LinearConfig four = select_linear_config(s, kH200, "", true);
  EXPECT_EQ(four.producers, 4);
  EXPECT_EQ(four.threads, 256);
  EXPECT_EQ(four.name, "ring4.t1x1.p4.c6");
  LinearDevice single = kH200;
  single.ring_producers = 1;
  const LinearConfig one = select_linear_config(s, single, "", true);
  EXPECT_EQ(one.producers, 1);
  EXPECT_EQ(one.threads, 160);
  EXPECT_EQ(one.name, "ring4.t1x1.p1.c6");
  // Forced names override the device's setting either way.
  EXPECT_EQ(select_linear_config(s, single, "ring8.p4", true).name, "ring8.t1x1.p4.c6");
  EXPECT_EQ(select_linear_config(s, kH200, "ring8.t1x2.p1", true).name, "ring8.t1x2.p1.c6");
  EXPECT_EQ(select_linear_config(s, kH200, "ring8.t1x2.p1", true).threads, 160);
  EXPECT_NE(forced_error(s, "ring8.p2").find("producer warps: 1 or 4"), std::string::npos);
}

TEST(LinearConfigCache, ARepeatedCallTakesTheConfigChosenBeforeAndEveryArgumentCounts) {
  LinearConfigCache cache;
  const LinearShape router = bf16_shape(8, 128, 2880);
  EXPECT_EQ(cache.find(0, router, "", true), nullptr);
  CachedLinearConfig& stored = cache.store(LinearConfigKey{0, router, "", true},
                                           select_linear_config(router, kH200, "", true));
  ASSERT_EQ(cache.find(0, router, "", true), &stored);
  EXPECT_EQ(stored.kernel, "cuda.linear." + stored.config.name);
  EXPECT_EQ(stored.config.to_string(), select_linear_config(router, kH200, "", true).to_string());
  // Each argument of the selection is part of the key.
  EXPECT_EQ(cache.find(1, router, "", true), nullptr);
  EXPECT_EQ(cache.find(0, router, "ring8", true), nullptr);
  EXPECT_EQ(cache.find(0, router, "", false), nullptr);
  const auto differs = [&](auto change) {
    LinearShape other = router;
    change(other);
    return cache.find(0, other, "", true) == nullptr;
  };
  EXPECT_TRUE(differs([](LinearShape& s) { s.n = 9; }));
  EXPECT_TRUE(differs([](LinearShape& s) { s.m = 256; }));
  EXPECT_TRUE(differs([](LinearShape& s) { s.k = 2888; }));
  EXPECT_TRUE(differs([](LinearShape& s) { s.in = DType::f16; }));
  EXPECT_TRUE(differs([](LinearShape& s) { s.out = DType::f32; }));
  EXPECT_TRUE(differs([](LinearShape& s) { s.has_bias = false; }));
  EXPECT_TRUE(differs([](LinearShape& s) { s.tma_compatible = false; }));
  // A replaced config (the launch fallback) is what the next call finds.
  LinearConfigCache::set(stored, select_linear_config(router, kH200, "reference", true));
  EXPECT_EQ(cache.find(0, router, "", true)->kernel, "cuda.linear.reference");
}

TEST(LinearConfigCache, ANewShapeReplacesTheOldestWhenFull) {
  LinearConfigCache cache;
  for (int64_t n = 1; n <= LinearConfigCache::kEntries; ++n) {
    cache.store(LinearConfigKey{0, bf16_shape(n, 128, 2880), "", true},
                select_linear_config(bf16_shape(n, 128, 2880), kH200, "", true));
  }
  EXPECT_EQ(cache.size(), LinearConfigCache::kEntries);
  for (int64_t n = 1; n <= LinearConfigCache::kEntries; ++n) {
    EXPECT_NE(cache.find(0, bf16_shape(n, 128, 2880), "", true), nullptr) << n;
  }
  const LinearShape extra = bf16_shape(LinearConfigCache::kEntries + 1, 128, 2880);
  cache.store(LinearConfigKey{0, extra, "", true}, select_linear_config(extra, kH200, "", true));
  EXPECT_EQ(cache.size(), LinearConfigCache::kEntries);
  EXPECT_EQ(cache.find(0, bf16_shape(1, 128, 2880), "", true), nullptr);  // the oldest
  EXPECT_NE(cache.find(0, bf16_shape(2, 128, 2880), "", true), nullptr);
  EXPECT_NE(cache.find(0, extra, "", true), nullptr);
}

// A plan that counts the live plans holding a resource, as the cuBLASLt objects are held.
struct CountedPlan {
  static int live;
  int id = 0;
  CountedPlan() = default;
  explicit CountedPlan(int i) : id(i) { ++live; }
  CountedPlan(CountedPlan&& o) noexcept : id(o.id) { o.id = 0; }
  CountedPlan& operator=(CountedPlan&& o) noexcept {
    std::swap(id, o.id);
    return *this;
  }
  ~CountedPlan() {
    if (id != 0) --live;
  }
};
int CountedPlan::live = 0;

detail::LinearProblem cublaslt_problem(int64_t n, int64_t m, int64_t k) {
  static uint16_t x[1], w[1], b[1];
  static float out[1];
  detail::LinearProblem p;
  p.n = n;
  p.m = m;
  p.k = k;
  p.x = Tensor::strided(x, DType::bf16, Device::cuda(0), {n, k}, {k, 1});
  p.w = Tensor::strided(w, DType::bf16, Device::cuda(0), {m, k}, {k, 1});
  p.has_bias = true;
  p.bias = Tensor::strided(b, DType::bf16, Device::cuda(0), {m}, {1});
  p.out = Tensor::strided(out, DType::f32, Device::cuda(0), {n, m}, {m, 1});
  return p;
}

TEST(CublasLtPlanCache, ARepeatedProblemFindsItsPlanAndEveryFieldCounts) {
  const detail::LinearProblem p = cublaslt_problem(512, 128, 2880);
  alignas(256) static float widened[4];
  const CublasLtPlanKey key = cublaslt_plan_key(p, 0, widened, 32 << 20);
  EXPECT_EQ(key.bias_alignment, 256);
  EXPECT_EQ(key.x_row_stride, 2880);
  EXPECT_EQ(key.out_row_stride, 128);
  CublasLtPlanCache<CountedPlan> cache;
  EXPECT_EQ(cache.find(key), nullptr);
  CountedPlan& stored = cache.store(key, CountedPlan(1));
  EXPECT_EQ(cache.find(key), &stored);
  EXPECT_EQ(cache.find(cublaslt_plan_key(p, 0, widened, 32 << 20)), &stored);
  const auto differs = [&](auto change) {
    CublasLtPlanKey other = key;
    change(other);
    return cache.find(other) == nullptr;
  };
  EXPECT_TRUE(differs([](CublasLtPlanKey& k) { k.device = 1; }));
  EXPECT_TRUE(differs([](CublasLtPlanKey& k) { k.in = DType::f16; }));
  EXPECT_TRUE(differs([](CublasLtPlanKey& k) { k.out = DType::bf16; }));
  EXPECT_TRUE(differs([](CublasLtPlanKey& k) { k.n = 513; }));
  EXPECT_TRUE(differs([](CublasLtPlanKey& k) { k.m = 256; }));
  EXPECT_TRUE(differs([](CublasLtPlanKey& k) { k.k = 2888; }));
  EXPECT_TRUE(differs([](CublasLtPlanKey& k) { k.x_row_stride = 2888; }));
  EXPECT_TRUE(differs([](CublasLtPlanKey& k) { k.w_row_stride = 2888; }));
  EXPECT_TRUE(differs([](CublasLtPlanKey& k) { k.out_row_stride = 136; }));
  EXPECT_TRUE(differs([](CublasLtPlanKey& k) { k.bias = false; }));
  EXPECT_TRUE(differs([](CublasLtPlanKey& k) { k.bias_alignment = 16; }));
  EXPECT_TRUE(differs([](CublasLtPlanKey& k) { k.workspace_bytes = 1 << 20; }));
  // The problem's own fields reach the key: a bias at a less aligned address, none at all.
  EXPECT_EQ(cublaslt_plan_key(p, 0, reinterpret_cast<char*>(widened) + 2, 32 << 20).bias_alignment,
            2);
  detail::LinearProblem no_bias = p;
  no_bias.has_bias = false;
  EXPECT_EQ(cublaslt_plan_key(no_bias, 0, widened, 32 << 20).bias_alignment, 0);
  EXPECT_EQ(cublaslt_address_alignment(nullptr), 256);
  EXPECT_EQ(cublaslt_address_alignment(reinterpret_cast<void*>(uintptr_t{48})), 16);
}

TEST(CublasLtPlanCache, ANewProblemReplacesTheOldestAndReleasesItsPlan) {
  CountedPlan::live = 0;
  {
    CublasLtPlanCache<CountedPlan> cache;
    const auto key_of = [](int64_t n) {
      return cublaslt_plan_key(cublaslt_problem(n, 128, 2880), 0, nullptr, 32 << 20);
    };
    for (int i = 1; i <= CublasLtPlanCache<CountedPlan>::kEntries; ++i) {
      cache.store(key_of(256 + i), CountedPlan(i));
    }
    EXPECT_EQ(cache.size(), CublasLtPlanCache<CountedPlan>::kEntries);
    EXPECT_EQ(CountedPlan::live, CublasLtPlanCache<CountedPlan>::kEntries);
    cache.store(key_of(1000), CountedPlan(100));
    EXPECT_EQ(CountedPlan::live, CublasLtPlanCache<CountedPlan>::kEntries);  // the oldest left
    EXPECT_EQ(cache.find(key_of(257)), nullptr);
    ASSERT_NE(cache.find(key_of(258)), nullptr);
    EXPECT_EQ(cache.find(key_of(258))->id, 2);
    EXPECT_EQ(cache.find(key_of(1000))->id, 100);
  }
  EXPECT_EQ(CountedPlan::live, 0);  // the cache releases what it holds
}

// The tensor maps' cache (tensor_map.cpp) is a RecentCache of 16 sets of 4.
TEST(RecentCache, FindsWhatItStoredAndAMissReplacesOnlyWithinItsSet) {
  using Cache = RecentCache<int64_t, int, 16, 4>;
  Cache cache;
  const auto hash = [](int64_t key) { return mix_hash(0, static_cast<uint64_t>(key)); };
  const auto store = [&](int64_t key) {
    Cache::Slot& slot = cache.replace(hash(key));
    slot.key = key;
    slot.value = static_cast<int>(key) * 10;
    slot.used = true;
  };
  // Distinct small keys spread over the sets: 48 fit at once (no set holds more than 4 of them).
  std::vector<int> per_set(16, 0);
  std::vector<int64_t> stored;
  for (int64_t key = 1; static_cast<int>(stored.size()) < 48; ++key) {
    const auto set = static_cast<std::size_t>(hash(key) & 15);
    if (per_set[set] == 4) continue;
    ++per_set[set];
    stored.push_back(key);
    store(key);
  }
  for (const int64_t key : stored) {
    const Cache::Slot* slot = cache.find(key, hash(key));
    ASSERT_NE(slot, nullptr) << key;
    EXPECT_EQ(slot->value, key * 10);
  }
  EXPECT_EQ(cache.find(1000003, hash(1000003)), nullptr);
  // A fifth key of one set replaces that set's oldest, and only it.
  const int64_t first = stored.front();
  const uint64_t set = hash(first) & 15;
  int64_t extra = 100000;
  while ((hash(extra) & 15) != set) ++extra;
  std::vector<int64_t> same_set;
  for (const int64_t key : stored) {
    if ((hash(key) & 15) == set) same_set.push_back(key);
  }
  for (int i = static_cast<int>(same_set.size()); i < 4; ++i) {  // fill the set to 4
    int64_t filler = extra + 1;
    while ((hash(filler) & 15) != set) ++filler;
    store(filler);
    same_set.push_back(filler);
    stored.push_back(filler);
    extra = filler;
  }
  int64_t fifth = extra + 1;
  while ((hash(fifth) & 15) != set) ++fifth;
  store(fifth);
  EXPECT_EQ(cache.find(same_set.front(), hash(same_set.front())), nullptr);  // the oldest
  for (std::size_t i = 1; i < same_set.size(); ++i) {
    EXPECT_NE(cache.find(same_set[i], hash(same_set[i])), nullptr) << same_set[i];
  }
  EXPECT_NE(cache.find(fifth, hash(fifth)), nullptr);
  for (const int64_t key : stored) {
    if ((hash(key) & 15) != set) {
      EXPECT_NE(cache.find(key, hash(key)), nullptr) << key;
    }
  }
  // A slot whose filling did not finish is never found.
  Cache::Slot& unfinished = cache.replace(hash(fifth));
  unfinished.key = 777;
  EXPECT_EQ(cache.find(777, hash(fifth)), nullptr);
}

TEST(LinearDispatch, SweepStaysWithinEveryLimit) {
  LinearDevice small = kH200;
  small.shared_optin = 101376;  // an sm_89-like budget: the ring must shrink or step aside
  for (const LinearDevice& d : {kH200, small}) {
    for (int64_t n : {1, 3, 8, 9, 16, 17, 64, 100, 128}) {
      for (int64_t m : {1, 17, 128, 1000, 4096, 65536}) {
        for (int64_t k : {8, 120, 512, 2880, 7168, 14336, 65536, 1 << 20}) {
          const LinearShape s = bf16_shape(n, m, k);
          const LinearConfig c = select_linear_config(s, d, "", n % 2 == 0);
          expect_within_limits(c, s, d);
        }
      }
    }
  }
}

}  // namespace
}  // namespace gemmkit::cuda::linear_family

namespace gemmkit::cuda::linear_family {
namespace {

// Batch-invariant mode (the default): auto never takes cuBLASLt for bf16 / f16 on sm_90, whatever
// n and the weight; the ring within its reach, the wgmma kernel beyond it, the reference where TMA
// cannot load and for f16 within the ring's bound.
TEST(LinearDispatch, BatchInvariantModeStaysInsideTheFamilyAtEveryBatch) {
  int wgmma = 0, ring = 0, ring_reach = 0, one_chain = 0, swap = 0;
  for (const auto& [m, k] : std::vector<std::pair<int64_t, int64_t>>{{128, 2880},
                                                                     {256, 7168},
                                                                     {1024, 4096},
                                                                     {4096, 4096},
                                                                     {28672, 8192},
                                                                     {100, 1000},
                                                                     {7, 8}}) {
    for (int64_t n : {1, 2, 3, 7, 8, 16, 31, 64, 65, 127, 128, 255, 256, 511, 1024, 4096, 16384}) {
      for (const DType in : {DType::bf16, DType::f16}) {
        LinearShape s = bf16_shape(n, m, k);
        s.in = in;
        s.batch_invariant = true;
        const LinearConfig c = select_linear_config(s, kH200, "", true);
        EXPECT_NE(c.path, LinearPath::cublaslt) << n << " x " << m << " x " << k;
        if (canonical_one_chain(m)) {
          // The one-chain form: the same choice in both modes, never cuBLASLt.
          EXPECT_NE(c.reason.find("one-chain form"), std::string::npos) << c.reason;
          EXPECT_TRUE(c.one_chain);
          if (n <= kStreamMaxN) {
            EXPECT_EQ(c.path, LinearPath::stream) << n << " x " << m << " x " << k;
            EXPECT_EQ(c.nt, stream_batch_tiles(n));
          } else if (swap_preferred(m, n, wgmma_one_chain_block_n(m, n, kH200.multiprocessors),
                                    kH200.multiprocessors)) {
            EXPECT_EQ(c.path, LinearPath::wgmma_swap) << n << " x " << m << " x " << k;
            EXPECT_EQ(c.block_n, swap_block_w(m, n, kH200.multiprocessors));
            ++swap;
          } else {
            EXPECT_EQ(c.path, LinearPath::wgmma) << n << " x " << m << " x " << k;
            EXPECT_EQ(c.block_n, wgmma_one_chain_block_n(m, n, kH200.multiprocessors));
            EXPECT_EQ(c.splits, 1);
          }
          expect_within_limits(c, s, kH200);
          // Batch invariance off: the same kernel where the family measured level with
          // cuBLASLt, cuBLASLt between (outside the contract).
          s.batch_invariant = false;
          const LinearConfig off = select_linear_config(s, kH200, "", true);
          if (n > kNonInvariantStreamMaxN && n < kNonInvariantWgmmaMinN) {
            EXPECT_EQ(off.path, LinearPath::cublaslt) << n << " x " << m << " x " << k;
            EXPECT_NE(off.reason.find("batch invariance off"), std::string::npos);
          } else {
            EXPECT_EQ(off.name, c.name);
          }
          one_chain += 1;
          continue;
        }
        EXPECT_NE(c.reason.find("batch-invariant mode"), std::string::npos) << c.reason;
        const bool ring_serves = batch_invariant_ring_serves(n, m, k, kH200.multiprocessors);
        if (in == DType::bf16 ? !ring_serves : n > batch_invariant_ring_max_n(m, k)) {
          EXPECT_EQ(c.path, LinearPath::wgmma) << n << " x " << m << " x " << k << ": " << c.reason;
          EXPECT_EQ(c.block_n, wgmma_sliced_block_n(s, kH200));
        } else if (in == DType::bf16) {
          EXPECT_EQ(c.path, LinearPath::tma_ring) << n << " x " << m << " x " << k;
          // Beyond the bound: few tiles of 16 x 8 and at most 7168 k per tile and SM.
          if (n > batch_invariant_ring_max_n(m, k)) {
            EXPECT_LE(c.tiles, kBatchInvariantRingMaxTiles);
            EXPECT_LE(c.tiles * k, kH200.multiprocessors * kBatchInvariantRingTileK);
            EXPECT_NE(c.reason.find("within the ring's reach"), std::string::npos) << c.reason;
            ++ring_reach;
          }
        } else {
          EXPECT_EQ(c.path, LinearPath::reference);
        }
        wgmma += c.path == LinearPath::wgmma;
        ring += c.path == LinearPath::tma_ring;
        // The same shape outside the mode is the family's choice as before.
        s.batch_invariant = false;
        const LinearConfig off = select_linear_config(s, kH200, "", true);
        EXPECT_EQ(off.reason.find("batch-invariant mode"), std::string::npos);
        if (n > family_max_n(m, k)) {
          EXPECT_EQ(off.path, LinearPath::cublaslt);
        }
      }
    }
  }
  EXPECT_GT(wgmma, 30);
  EXPECT_GT(ring, 20);
  EXPECT_GE(ring_reach, 5);
  // The ring's reach on measured shapes (H200): the ring where its tiles are few, the wgmma kernel
  // where they are many (128 x 1024 x 1024: 1024 tiles) or hold much k (32 x 576 x 7168: 144 tiles
  // x 7168 > 132 x 7168).
  for (const auto& [n, m, k, ring_expected] :
       std::vector<std::tuple<int64_t, int64_t, int64_t, bool>>{{64, 256, 7168, true},
                                                                {128, 128, 7168, true},
                                                                {32, 1536, 2048, true},
                                                                {64, 1024, 1024, true},
                                                                {512, 32, 2880, true},
                                                                {32, 576, 7168, false},
                                                                {128, 1024, 1024, false},
                                                                {512, 128, 2880, false},
                                                                {64, 1536, 2048, false}}) {
    LinearShape s = bf16_shape(n, m, k);
    s.batch_invariant = true;
    const LinearConfig c = select_linear_config(s, kH200, "", true);
    EXPECT_EQ(c.path, ring_expected ? LinearPath::tma_ring : LinearPath::wgmma)
        << n << " x " << m << " x " << k << ": " << c.reason;
  }
  EXPECT_EQ(one_chain, 2 * 17 * 2);
  EXPECT_GT(swap, 4);
  LinearShape strided = bf16_shape(4096, 4096, 4100);
  strided.tma_compatible = false;
  strided.batch_invariant = true;
  EXPECT_EQ(select_linear_config(strided, kH200, "", true).path, LinearPath::reference);
  // Other GPUs keep cuBLASLt (outside the contract, as documented).
  LinearDevice ampere = kH200;
  ampere.sm_major = 8;
  LinearShape s = bf16_shape(4096, 4096, 4096);
  s.batch_invariant = true;
  EXPECT_EQ(select_linear_config(s, ampere, "", true).path, LinearPath::cublaslt);
}

TEST(LinearConfigCache, TheModeIsPartOfTheKey) {
  LinearConfigCache cache;
  LinearShape s = bf16_shape(4096, 4096, 4096);
  cache.store(LinearConfigKey{0, s, "", true}, select_linear_config(s, kH200, "", true));
  LinearShape invariant = s;
  invariant.batch_invariant = true;
  EXPECT_EQ(cache.find(0, invariant, "", true), nullptr);
  EXPECT_NE(cache.find(0, s, "", true), nullptr);
}

TEST(LinearDispatch, WgmmaSlicedWidthOfLeastEstimatedTime) {
  // Measured on an H200 (docs/perf.md): the width each shape ran fastest at, and the estimate's.
  struct Expect {
    int64_t n, m, k;
    int width;
  };
  for (const Expect& e :
       {Expect{64, 1536, 7168, 64}, Expect{512, 128, 2880, 64}, Expect{1024, 128, 2880, 64},
        Expect{4096, 256, 7168, 64}, Expect{1024, 1536, 7168, 96}, Expect{1024, 1280, 8192, 96},
        Expect{4096, 576, 7168, 96}, Expect{4096, 1536, 7168, 128},
        Expect{4096, 1280, 8192, 128}}) {
    const LinearShape s = bf16_shape(e.n, e.m, e.k);
    SCOPED_TRACE(std::to_string(e.n) + " x " + std::to_string(e.m) + " x " + std::to_string(e.k));
    EXPECT_EQ(wgmma_sliced_block_n(s, kH200), e.width);
    LinearShape det = s;
    det.batch_invariant = true;
    const LinearConfig c = select_linear_config(det, kH200, "", true);
    EXPECT_EQ(c.block_n, e.width);
    EXPECT_NE(c.reason.find(std::to_string(e.width) + "-wide tiles"), std::string::npos)
        << c.reason;
    EXPECT_EQ(select_linear_config(s, kH200, "wgmma", true).block_n, e.width);
  }
  // The estimate: the longest CTA's groups, or the operand bytes at the L2's rate, plus a split's
  // workspace round trip and the fold's launch.
  const LinearShape s = bf16_shape(1024, 1536, 7168);  // 12 x 11 tiles of 96: one wave, 14 groups
  const LinearConfig c96 = wgmma_config(s, kH200, 96, true);
  EXPECT_EQ(c96.splits, 1);
  EXPECT_NEAR(wgmma_sliced_cost_us(c96, s, kH200), 14 * 3.0, 1e-9);
  const LinearShape big = bf16_shape(4096, 1280, 8192);  // 640 tiles of 64: bound by the L2
  const LinearConfig c64 = wgmma_config(big, kH200, 64, true);
  EXPECT_NEAR(wgmma_sliced_cost_us(c64, big, kH200), 640.0 * 16 * 32 * 192 * 32 / 11e6, 1e-6);
  const LinearShape few = bf16_shape(64, 1280, 8192);  // 8 runs of 2 groups
  const LinearConfig split = wgmma_config(few, kH200, 64, true);
  ASSERT_EQ(split.splits, 8);
  EXPECT_NEAR(wgmma_sliced_cost_us(split, few, kH200),
              2 * 2.1 + static_cast<double>(split.workspace_bytes) * 2 / 5e6 + 2, 1e-9);
}

TEST(LinearDispatch, ForcedWgmmaVariants) {
  const LinearShape s = bf16_shape(4096, 2048, 4096);
  // The width of least estimated time: 512 tiles of 128 in 4 waves (the L2 would take 98 us of
  // the 109 estimated), where 96 and 64 take 6 and 8 waves.
  EXPECT_EQ(select_linear_config(s, kH200, "wgmma", true).name, "wgmma.n128.s6");
  const LinearConfig c128 = select_linear_config(s, kH200, "wgmma.n128", true);
  EXPECT_EQ(c128.path, LinearPath::wgmma);
  EXPECT_EQ(c128.name, "wgmma.n128.s6");  // three accumulator sets, by name
  EXPECT_EQ(c128.tiles, 16 * 32);
  EXPECT_FALSE(c128.one_chain);
  EXPECT_EQ(c128.grid_x, kH200.multiprocessors);  // persistent: at most one CTA per SM
  EXPECT_LE(c128.shared_bytes, kH200.shared_optin);
  EXPECT_EQ(select_linear_config(bf16_shape(256, 3072, 4096), kH200, "wgmma", true).name,
            "wgmma.n64.s8");
  // The one-chain form (m >= 4096): 256-wide tiles where they cost least, never a k split.
  const LinearShape chain = bf16_shape(4096, 4096, 4096);
  const LinearConfig c256 = select_linear_config(chain, kH200, "wgmma", true);
  EXPECT_EQ(c256.name, "wgmma.n256.s4");
  EXPECT_TRUE(c256.one_chain);
  EXPECT_EQ(c256.tiles, 32 * 16);
  EXPECT_EQ(c256.splits, 1);
  EXPECT_LE(c256.shared_bytes, kH200.shared_optin);
  expect_within_limits(c256, chain, kH200);
  EXPECT_EQ(select_linear_config(chain, kH200, c256.name, true).name, c256.name);
  EXPECT_EQ(select_linear_config(chain, kH200, "wgmma.n64.k1", true).name, "wgmma.n64.s8.k1");
  EXPECT_NE(forced_error(chain, "wgmma.k2").find("never split"), std::string::npos);
  EXPECT_NE(forced_error(s, "wgmma.n256").find("one-chain form only"), std::string::npos);
  EXPECT_NE(forced_error(chain, "wgmma.n256.s6").find("unknown wgmma variant"), std::string::npos);
  const LinearConfig c64 =
      select_linear_config(bf16_shape(100, 129, 72), kH200, "wgmma.n64", false);
  EXPECT_EQ(c64.name, "wgmma.n64.s8");
  EXPECT_EQ(c64.tiles, 2 * 2);
  EXPECT_EQ(c64.grid_x, 4);
  EXPECT_LE(c64.shared_bytes, kH200.shared_optin);
  // 96-wide tiles (four accumulator sets): the sliced form only, 7 stages.
  const LinearConfig c96 = select_linear_config(s, kH200, "wgmma.n96", true);
  EXPECT_EQ(c96.name, "wgmma.n96.s7");
  EXPECT_EQ(c96.block_n, 96);
  EXPECT_EQ(c96.tiles, 16 * 43);  // 4096 batch rows in 43 blocks of 96
  EXPECT_EQ(c96.shared_bytes, 1024 + 7 * (128 + 96) * 128 + 7 * 16);
  expect_within_limits(c96, s, kH200);
  EXPECT_NE(forced_error(chain, "wgmma.n96").find("sliced form only"), std::string::npos);
  EXPECT_EQ(wgmma_config(chain, kH200, 96, true).name, "");
  // The printed name selects the same config.
  for (const LinearConfig& c : {c128, c96, c64}) {
    EXPECT_EQ(select_linear_config(s, kH200, c.name, true).name, c.name);
  }
  LinearShape f16 = s;
  f16.in = DType::f16;
  EXPECT_EQ(select_linear_config(f16, kH200, "wgmma.n64", true).path, LinearPath::wgmma);
  LinearShape f32 = s;
  f32.in = DType::f32;
  EXPECT_NE(forced_error(f32, "wgmma").find("bf16 or f16 operands only"), std::string::npos);
  LinearShape strided = s;
  strided.tma_compatible = false;
  EXPECT_NE(forced_error(strided, "wgmma.n128").find("cannot be loaded by TMA"), std::string::npos);
  for (const char* bad :
       {"wgmma.n32", "wgmma.n128.s4", "wgmma.n64.s6", "wgmma.n96.s8", "wgmma.s6", "wgmma.n128x"}) {
    EXPECT_NE(forced_error(s, bad).find("unknown wgmma variant"), std::string::npos) << bad;
  }
  LinearDevice ampere = kH200;
  ampere.sm_major = 8;
  EXPECT_NE(forced_error(s, "wgmma", ampere).find("sm_90a only"), std::string::npos);
}

}  // namespace
}  // namespace gemmkit::cuda::linear_family

namespace gemmkit::cuda::linear_family {
namespace {

// wgmma_config as select_linear_config's wgmma branches call it, with a reason.
LinearConfig wgmma_auto(const LinearShape& s, const LinearDevice& d, int block_n,
                        int64_t budget = kWgmmaSplitWorkspaceBytes) {
  LinearConfig c = wgmma_config(s, d, block_n, true, 0, budget);
  c.reason = "auto";
  return c;
}

// The wgmma kernel's k split (wgmma_auto_splits): the most splits that keep every (tile, run)
// unit in one wave, runs of at least two groups, equal runs, within the workspace budget.
TEST(LinearDispatch, WgmmaKSplitRule) {
  struct Case {
    int64_t n, m, k;
    int splits;
    int64_t split_groups;
  };
  for (const Case& e : {
           Case{64, 1280, 8192, 8, 2},    // 10 tiles, 16 groups: 13 runs wanted, 8 of 2
           Case{128, 3072, 4096, 2, 4},   // 48 tiles, 8 groups: 2 runs of 4
           Case{256, 3072, 4096, 1, 8},   // 96 tiles fill the SMs: no split
           Case{4096, 2048, 4096, 1, 8},  // 512 tiles
           Case{64, 1280, 512, 1, 1},     // one group
           Case{64, 1280, 520, 2, 1},     // two groups: runs of one
           Case{64, 1280, 1536, 3, 1},    // three groups
           Case{64, 1280, 2048, 4, 1},    // four groups
           Case{64, 1280, 8200, 9, 2},    // 17 groups: 13 runs wanted, 9 of 2 (the last of 1)
           Case{1, 128, 14336, 28, 1},    // one tile, 28 groups
           Case{65, 128, 2880, 6, 1},     // two tiles, 6 groups
           Case{128, 576, 7168, 7, 2},    // 10 tiles, 14 groups: 13 runs wanted, 7 of 2
       }) {
    LinearShape s = bf16_shape(e.n, e.m, e.k);
    // The split rule at the table's widths: 64 up to n = 256, 128 above.
    const LinearConfig c = wgmma_auto(s, kH200, e.n <= 256 ? 64 : 128);
    SCOPED_TRACE(std::to_string(e.n) + " x " + std::to_string(e.m) + " x " + std::to_string(e.k));
    ASSERT_FALSE(c.name.empty());
    EXPECT_EQ(c.splits, e.splits);
    EXPECT_EQ(c.split_groups, e.split_groups);
    EXPECT_EQ(c.grid_x, std::min<int64_t>(c.tiles * c.splits, kH200.multiprocessors));
    expect_within_limits(c, s, kH200);
    // Batch-invariant mode and the forced names without .k take the same split at their width.
    const LinearConfig same = wgmma_auto(s, kH200, wgmma_sliced_block_n(s, kH200));
    s.batch_invariant = true;
    if (e.n > batch_invariant_ring_max_n(e.m, e.k)) {
      const LinearConfig det = select_linear_config(s, kH200, "", true);
      EXPECT_EQ(det.name, same.name);
      if (same.splits > 1) {
        EXPECT_NE(det.reason.find("k split in " + std::to_string(same.splits)), std::string::npos)
            << det.reason;
      }
    }
    EXPECT_EQ(select_linear_config(s, kH200, "wgmma", true).name, same.name);
  }
  EXPECT_EQ(wgmma_config(bf16_shape(64, 1280, 8192), kH200, 64, true).name, "wgmma.n64.s8.k8");
  EXPECT_EQ(wgmma_config(bf16_shape(64, 1280, 8192), kH200, 64, true).workspace_bytes,
            10 * 15 * 128 * 64 * 4);  // slot 0 (groups 0-1) and one slot per later group
  // 64-wide tiles split down to runs of one group, wider ones to runs of two.
  EXPECT_EQ(wgmma_config(bf16_shape(64, 576, 7168), kH200, 64, true).splits, 14);
  EXPECT_EQ(wgmma_config(bf16_shape(128, 576, 7168), kH200, 128, true).splits, 7);
  EXPECT_EQ(wgmma_config(bf16_shape(256, 384, 7168), kH200, 96, true).splits, 7);
  // Half the SMs or more hold tiles: no split (66 tiles x 2 = 132 units would fit, 68 not).
  EXPECT_EQ(wgmma_config(bf16_shape(3 * 64, 22 * 128, 4096), kH200, 64, true).splits, 2);
  EXPECT_EQ(wgmma_config(bf16_shape(4 * 64, 17 * 128, 4096), kH200, 64, true).splits, 1);
  // The one-chain form never splits, however few its tiles.
  EXPECT_EQ(wgmma_config(bf16_shape(64, 4096, 65536), kH200, 64, true).splits, 1);
  // Fewer SMs: fewer splits.
  LinearDevice small = kH200;
  small.multiprocessors = 40;
  EXPECT_EQ(wgmma_config(bf16_shape(64, 1280, 8192), small, 64, true).splits, 4);
}

TEST(LinearDispatch, WgmmaKSplitStaysWithinTheWorkspace) {
  // 10 tiles, 128 groups: 13 runs of 10 would need 10 x 119 slots of 32 KiB, over 32 MiB; the
  // most that fit are 4 runs of 32 (10 x 97 slots).
  const LinearShape s = bf16_shape(64, 1280, 65536);
  const LinearConfig c = wgmma_auto(s, kH200, 64);
  EXPECT_EQ(c.splits, 4);
  EXPECT_EQ(c.split_groups, 32);
  EXPECT_LE(c.workspace_bytes, kWgmmaSplitWorkspaceBytes);
  expect_within_limits(c, s, kH200);
  // A smaller budget (a caller's workspace) takes fewer splits; none below one run's slots.
  const int64_t slot = 128 * 64 * 4;
  EXPECT_EQ(wgmma_config(s, kH200, 64, true, 0, 10 * 65 * slot).splits, 2);
  EXPECT_EQ(wgmma_config(s, kH200, 64, true, 0, 10 * 65 * slot - 1).splits, 1);
  EXPECT_EQ(wgmma_config(s, kH200, 64, true, 0, 0).splits, 1);
  EXPECT_EQ(wgmma_config(s, kH200, 64, true, 0, 0).name, "wgmma.n64.s8");
  // 64 tiles and 128 groups: even 2 runs need 64 x 65 slots, over the budget.
  EXPECT_EQ(wgmma_config(bf16_shape(256, 2048, 65536), kH200, 64, true).splits, 1);
  // A forced split that does not fit is refused with the reason.
  EXPECT_NE(forced_error(bf16_shape(256, 2048, 65536), "wgmma.n64.k2").find("workspace"),
            std::string::npos);
  EXPECT_NE(forced_error(bf16_shape(4096, 2048, 4096), "wgmma.k2").find("workspace"),
            std::string::npos);
  // Every auto choice over a sweep stays within the budget and the launch limits.
  for (int64_t n : {1, 7, 64, 65, 128, 129, 256, 300, 1024}) {
    for (int64_t m : {1, 100, 128, 1000, 1280, 4096, 6144}) {
      for (int64_t k : {8, 520, 2048, 2880, 4104, 8200, 65536, 1 << 20}) {
        const LinearShape shape = bf16_shape(n, m, k);
        for (const int block_n : {64, 128}) {
          const LinearConfig w = wgmma_auto(shape, kH200, block_n);
          ASSERT_FALSE(w.name.empty());
          expect_within_limits(w, shape, kH200);
          EXPECT_LE(w.tiles * w.splits, std::max<int64_t>(w.tiles, kH200.multiprocessors));
          if (w.splits > 1) {
            EXPECT_GE(w.split_groups, wgmma_min_split_groups(block_n));
            EXPECT_LE(w.tiles * 2, kH200.multiprocessors);
          }
        }
      }
    }
  }
}

// The two forms of the canonical reduction (linear_contract.h): one chain from 4096 weight rows
// on, a function of m alone.
TEST(LinearDispatch, TheFormIsChosenByTheWeightRowsAlone) {
  EXPECT_FALSE(canonical_one_chain(kOneChainMinRows - 1));
  EXPECT_TRUE(canonical_one_chain(kOneChainMinRows));
  EXPECT_EQ(canonical_slice_k(4095, 4096), kSliceK);
  EXPECT_EQ(canonical_slice_k(4096, 4096), 4096);
  EXPECT_EQ(canonical_slice_k(4096, 4100), 4112);  // all of k: its k16 blocks, rounded up
  for (int64_t n : {1, 8, 9, 64, 255, 1024, 16384}) {
    for (const DType in : {DType::bf16, DType::f16}) {
      LinearShape s = bf16_shape(n, 4096, 2048);
      s.in = in;
      s.batch_invariant = true;
      const LinearConfig c = select_linear_config(s, kH200, "", true);
      EXPECT_TRUE(c.one_chain) << c.to_string();
      expect_within_limits(c, s, kH200);
    }
  }
}

TEST(LinearDispatch, StreamingKernelNamesAndTiles) {
  const LinearShape s = bf16_shape(8, 4096, 4096);
  const LinearConfig c = select_linear_config(s, kH200, "", true);
  EXPECT_EQ(c.name, "stream.t2x1");
  EXPECT_EQ(c.tiles, 128);  // 32 weight rows a CTA
  EXPECT_EQ(c.threads, 96);
  EXPECT_EQ(c.stages, 8);
  EXPECT_EQ(c.shared_bytes, 1024 + 8 * 2 * (32 + 8) * 128 + 16 * 8);
  for (const char* name : {"stream.t1x1", "stream.t1x2", "stream.t2x1", "stream.t2x2",
                           "stream.t2x4", "stream.t2x8", "stream.t4x4", "stream.t4x8"}) {
    const LinearConfig forced = select_linear_config(bf16_shape(100, 4100, 200), kH200, name, true);
    EXPECT_EQ(forced.name, name);
    expect_within_limits(forced, bf16_shape(100, 4100, 200), kH200);
  }
  EXPECT_EQ(select_linear_config(s, kH200, "stream", true).name, "stream.t2x1");
  EXPECT_EQ(stream_batch_tiles(9), 2);
  EXPECT_EQ(stream_batch_tiles(64), 8);
  EXPECT_NE(forced_error(s, "stream.t3x1").find("no streaming kernel is built"), std::string::npos);
  EXPECT_NE(forced_error(s, "stream.x").find("unknown stream variant"), std::string::npos);
  for (const char* name : {"stream.t2x1.s8", "stream.t2x1.s", "stream.t2x1s16", "stream.t.s16",
                           "stream.s16", "stream.t2x1.s16.s16"}) {
    EXPECT_NE(forced_error(s, name).find("unknown stream variant"), std::string::npos) << name;
  }
  EXPECT_NE(forced_error(s, "stream.t1x1.s16").find("built for tiles t2x1 and t2x2 only"),
            std::string::npos);
  EXPECT_NE(forced_error(s, "stream.t3x1.s16").find("no streaming kernel is built"),
            std::string::npos);
  EXPECT_NE(forced_error(bf16_shape(8, 4095, 4096), "stream").find("one-chain form"),
            std::string::npos);
  LinearShape f32 = s;
  f32.in = DType::f32;
  EXPECT_NE(forced_error(f32, "stream").find("bf16 or f16"), std::string::npos);
  LinearShape strided = s;
  strided.tma_compatible = false;
  EXPECT_NE(forced_error(strided, "stream").find("TMA"), std::string::npos);
  EXPECT_EQ(select_linear_config(strided, kH200, "", true).path, LinearPath::reference);
}

// The long ring: 16 stages of t2x1 / t2x2 where k has 64 slices or more and the tiles fit one
// wave; the standard ring elsewhere; both by name.
TEST(LinearDispatch, StreamingKernelLongRing) {
  struct Expected {
    int64_t n, m, k;
    const char* name;
  };
  for (const Expected& e :
       {Expected{8, 4096, 14336, "stream.t2x1.s16"}, Expected{1, 4096, 8192, "stream.t2x1.s16"},
        Expected{16, 4096, 8192, "stream.t2x2.s16"},
        Expected{8, 4096, 8064, "stream.t2x1"},       // 63 slices
        Expected{8, 4096, 8072, "stream.t2x1.s16"},   // 64, the last partial
        Expected{8, 4224, 14336, "stream.t2x1.s16"},  // 132 tiles
        Expected{8, 4256, 14336, "stream.t2x1"},      // 133 tiles: two waves
        Expected{8, 28672, 4096, "stream.t2x1"}, Expected{16, 4096, 4096, "stream.t2x2"}}) {
    LinearShape s = bf16_shape(e.n, e.m, e.k);
    s.batch_invariant = true;
    const LinearConfig c = select_linear_config(s, kH200, "", true);
    EXPECT_EQ(c.name, e.name) << e.n << " x " << e.m << " x " << e.k;
    expect_within_limits(c, s, kH200);
    EXPECT_EQ(select_linear_config(s, kH200, "stream", true).name, e.name);
    if (c.stages == kStreamLongStages) {
      EXPECT_NE(c.reason.find("16 stages (k of 64 slices or more"), std::string::npos) << c.reason;
    }
  }
  const LinearConfig c = select_linear_config(bf16_shape(8, 4096, 14336), kH200, "", true);
  EXPECT_EQ(c.stages, 16);
  EXPECT_EQ(c.shared_bytes, 1024 + 16 * 2 * (32 + 8) * 128 + 32 * 8);
  // On 114 SMs (an H100 PCIe) 128 tiles take two waves: the standard ring.
  LinearDevice small = kH200;
  small.multiprocessors = 114;
  EXPECT_EQ(select_linear_config(bf16_shape(8, 4096, 14336), small, "", true).name, "stream.t2x1");
  // By name, either ring at any k.
  for (const char* name : {"stream.t2x1.s16", "stream.t2x2.s16", "stream.t2x1", "stream.t2x2"}) {
    for (int64_t k : {200, 14336}) {
      const LinearShape s = bf16_shape(100, 4100, k);
      const LinearConfig forced = select_linear_config(s, kH200, name, true);
      EXPECT_EQ(forced.name, name);
      expect_within_limits(forced, s, kH200);
    }
  }
  int consumers = 0, nt = 0;
  StreamRing ring = StreamRing::chosen;
  EXPECT_TRUE(parse_stream_name("stream.t2x2.s16", consumers, nt, ring));
  EXPECT_EQ(consumers, 2);
  EXPECT_EQ(nt, 2);
  EXPECT_EQ(ring, StreamRing::long_ring);
  EXPECT_TRUE(parse_stream_name("stream.t4x8", consumers, nt, ring));
  EXPECT_EQ(ring, StreamRing::standard);
  EXPECT_TRUE(parse_stream_name("stream", consumers, nt, ring));
  EXPECT_EQ(ring, StreamRing::chosen);
  EXPECT_EQ(consumers + nt, 0);
}

TEST(LinearDispatch, TransposedWgmmaNamesAndChoice) {
  // 4096 x 4096 at n = 64: 32 tiles of 128 rows would fill under half the SMs; 32-row tiles: 128.
  LinearShape s = bf16_shape(64, 4096, 4096);
  s.batch_invariant = true;
  const LinearConfig c = select_linear_config(s, kH200, "", true);
  EXPECT_EQ(c.name, "wgmma.t32.w1");  // one consumer warpgroup up to 64 weight rows a tile
  EXPECT_EQ(c.consumers, 1);
  EXPECT_EQ(c.threads, 256);
  EXPECT_EQ(select_linear_config(s, kH200, "wgmma.t", true).name, "wgmma.t32.w1");
  EXPECT_EQ(select_linear_config(s, kH200, "wgmma.t32", true).consumers, 2);
  EXPECT_EQ(swap_consumers(128), 2);
  EXPECT_EQ(c.tiles, 128);
  expect_within_limits(c, s, kH200);
  // 28672 rows fill the SMs with 128-row tiles: the wgmma kernel.
  s.m = 28672;
  EXPECT_EQ(select_linear_config(s, kH200, "", true).path, LinearPath::wgmma);
  EXPECT_EQ(swap_block_w(28672, 8, 132), 256);  // 112 tiles
  EXPECT_EQ(swap_block_w(7168, 64, 132), 64);   // 112 tiles, where 32 rows would take 224
  EXPECT_EQ(swap_block_w(4096, 128, 132), 64);  // 128 tiles
  EXPECT_EQ(swap_block_w(4096, 256, 132), 128);
  for (const char* name : {"wgmma.t32", "wgmma.t64", "wgmma.t128", "wgmma.t256"}) {
    const LinearShape t = bf16_shape(300, 4100, 1000 / 8 * 8);
    const LinearConfig forced = select_linear_config(t, kH200, name, true);
    EXPECT_EQ(forced.name, name);
    expect_within_limits(forced, t, kH200);
  }
  for (const char* name : {"wgmma.t32.w1", "wgmma.t64.w1", "wgmma.t128.w1"}) {
    const LinearShape t = bf16_shape(300, 4100, 1000 / 8 * 8);
    const LinearConfig forced = select_linear_config(t, kH200, name, true);
    EXPECT_EQ(forced.name, name);
    EXPECT_EQ(forced.consumers, 1);
    expect_within_limits(forced, t, kH200);
  }
  for (const char* bad : {"wgmma.t16", "wgmma.t48", "wgmma.t0", "wgmma.tx", "wgmma.t256.w1",
                          "wgmma.t.w1", "wgmma.t32.w2", "wgmma.t32.w1.w1", "wgmma.t32w1"}) {
    EXPECT_NE(forced_error(s, bad).find("unknown transposed wgmma variant"), std::string::npos)
        << bad;
  }
  EXPECT_NE(forced_error(bf16_shape(64, 2048, 4096), "wgmma.t32").find("one-chain form"),
            std::string::npos);
}

TEST(LinearDispatch, OneChainTileWidthModel) {
  EXPECT_EQ(wgmma_one_chain_block_n(4096, 256, 132), 64);
  EXPECT_EQ(wgmma_one_chain_block_n(4096, 1024, 132), 256);
  EXPECT_EQ(wgmma_one_chain_block_n(4096, 4096, 132), 256);
  EXPECT_EQ(wgmma_one_chain_block_n(6144, 1024, 132), 128);
  EXPECT_EQ(wgmma_one_chain_block_n(28672, 4096, 132), 256);
}

// The banded tile order visits every tile once, and a band's weight blocks run fastest.
TEST(LinearDispatch, WgmmaTileOrderIsABijection) {
  for (int64_t m_blocks : {1, 3, 16, 17, 32, 36, 224}) {
    for (int64_t n_blocks : {1, 2, 5, 16}) {
      std::vector<int> seen(static_cast<std::size_t>(m_blocks * n_blocks), 0);
      for (int64_t t = 0; t < m_blocks * n_blocks; ++t) {
        const WgmmaTileCoords at = wgmma_tile_coords(t, m_blocks, n_blocks);
        ASSERT_GE(at.m_block, 0);
        ASSERT_LT(at.m_block, m_blocks);
        ASSERT_GE(at.n_block, 0);
        ASSERT_LT(at.n_block, n_blocks);
        ++seen[static_cast<std::size_t>(at.n_block * m_blocks + at.m_block)];
      }
      for (const int count : seen) ASSERT_EQ(count, 1) << m_blocks << " x " << n_blocks;
    }
  }
  const WgmmaTileCoords second = wgmma_tile_coords(1, 224, 16);
  EXPECT_EQ(second.m_block, 1);
  EXPECT_EQ(second.n_block, 0);
  const WgmmaTileCoords next_batch = wgmma_tile_coords(16, 224, 16);
  EXPECT_EQ(next_batch.m_block, 0);  // after 16 weight blocks, the next batch block
  EXPECT_EQ(next_batch.n_block, 1);
}

TEST(LinearDispatch, WgmmaKSplitNames) {
  const LinearShape s = bf16_shape(64, 1280, 8200);  // 17 groups, auto: 9 runs of 2
  struct Named {
    const char* forced;
    const char* name;
    int splits;
  };
  for (const Named& e :
       {Named{"wgmma", "wgmma.n64.s8.k9", 9}, Named{"wgmma.n64", "wgmma.n64.s8.k9", 9},
        Named{"wgmma.n64.s8", "wgmma.n64.s8.k9", 9}, Named{"wgmma.n64.k1", "wgmma.n64.s8.k1", 1},
        Named{"wgmma.n64.s8.k2", "wgmma.n64.s8.k2", 2}, Named{"wgmma.k3", "wgmma.n64.s8.k3", 3},
        Named{"wgmma.n128.k17", "wgmma.n128.s6.k17", 17},
        Named{"wgmma.n64.s8.k9", "wgmma.n64.s8.k9", 9}}) {
    const LinearConfig c = select_linear_config(s, kH200, e.forced, true);
    EXPECT_EQ(c.name, e.name) << e.forced;
    EXPECT_EQ(c.splits, e.splits) << e.forced;
    EXPECT_EQ(c.splits_forced, std::string(e.forced).find(".k") != std::string::npos);
    expect_within_limits(c, s, kH200);
    // The printed name selects the same config.
    EXPECT_EQ(select_linear_config(s, kH200, c.name, true).name, c.name);
  }
  int block_n = -1, splits = -1;
  EXPECT_TRUE(parse_wgmma_name("wgmma.n128.s6.k12", block_n, splits));
  EXPECT_EQ(block_n, 128);
  EXPECT_EQ(splits, 12);
  EXPECT_TRUE(parse_wgmma_name("wgmma.k1", block_n, splits));
  EXPECT_EQ(block_n, 0);
  EXPECT_EQ(splits, 1);
  EXPECT_TRUE(parse_wgmma_name("wgmma", block_n, splits));
  EXPECT_EQ(splits, 0);
  for (const char* bad : {"wgmma.k0", "wgmma.k", "wgmma.k04", "wgmma.n64.k4x", "wgmma.k4.n64",
                          "wgmma.s8.k4", "wgmma.n64.k12345678", "wgmma.n64.k-1"}) {
    EXPECT_NE(forced_error(s, bad).find("unknown wgmma variant"), std::string::npos) << bad;
  }
  // Counts that do not cut the 17 groups into equal runs (or exceed them) are refused.
  for (const char* uneven : {"wgmma.n64.k7", "wgmma.n64.k8", "wgmma.n64.k10", "wgmma.n64.k18"}) {
    const std::string error = forced_error(s, uneven);
    EXPECT_NE(error.find("does not split the 17 k groups"), std::string::npos)
        << uneven << ": " << error;
  }
  // One group: only .k1.
  EXPECT_EQ(select_linear_config(bf16_shape(64, 1280, 512), kH200, "wgmma.k1", true).name,
            "wgmma.n64.s8.k1");
  EXPECT_NE(forced_error(bf16_shape(64, 1280, 512), "wgmma.k2").find("does not split"),
            std::string::npos);
}

TEST(LinearDispatch, BuildInfoListsTheKernelNames) {
  if (!built_with_cuda()) GTEST_SKIP() << "this build has no CUDA backend";
  const std::string info = build_info();
  for (const char* name : {"linear kernels (cuda): auto, reference", "ring{4,8,16}",
                           "wgmma[.n64|.n96|.n128|.n256][.k{N}]", "wgmma.t{32,64,128,256}[.w1]",
                           "stream[.t{C}x{N}]", "simt_f32, cublaslt"}) {
    EXPECT_NE(info.find(name), std::string::npos) << name << " in\n" << info;
  }
  // Every family name the line spells out in full is one the dispatcher accepts.
  const LinearShape s = bf16_shape(512, 256, 1024);
  for (const char* forced : {"auto", "reference", "ring8", "wgmma", "wgmma.n64", "wgmma.n96",
                             "wgmma.n128", "wgmma.n64.k2", "cublaslt"}) {
    EXPECT_EQ(forced_error(s, forced), "no error") << forced;
  }
  const LinearShape chain = bf16_shape(512, 4096, 1024);  // the one-chain form
  for (const char* forced : {"auto", "reference", "wgmma.n256", "wgmma.t32", "wgmma.t256",
                             "wgmma.t32.w1", "stream", "stream.t2x1"}) {
    EXPECT_EQ(forced_error(chain, forced), "no error") << forced;
  }
}

}  // namespace
}  // namespace gemmkit::cuda::linear_family
