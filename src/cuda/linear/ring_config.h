// Configuration of the linear ring kernel (tma_ring_kernel.cuh): its shared memory, its forced
// names, the k split over a cluster, the stages, consumer warps and slice batch; pure, host-tested
// (tests/test_linear_dispatch.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "cuda/linear/linear_contract.h"
#include "cuda/linear/linear_types.h"
#include "cuda/linear/ring_schedule.h"
#include "gemmkit/gemmkit.h"

namespace gemmkit::cuda::linear_family {

constexpr int kRingMaxCluster = 16;  // above 8 needs the non-portable cluster opt-in

// Dynamic shared memory of the ring kernel (the layout at the top of linear_tma_ring_kernel):
// 1024 bytes of alignment slack, the ring stages, rank 0's fold buffer of the other ranks' fp32
// group sums (clustered launches only), the fp32 partials of the CTA's own slices, and
// 2 * stages + 1 mbarriers.
inline int64_t ring_shared_bytes_host(int stages, int mt, int nt, int64_t groups, int cluster,
                                      int64_t groups_per_rank) {
  const int64_t stage_bytes = 2 * (16 * mt + 8 * nt) * 128;
  const int64_t tile_sum_bytes = int64_t{16} * mt * 8 * nt * 4;
  const int64_t remote_slots = cluster > 1 ? groups - groups_per_rank : 0;
  return 1024 + stages * stage_bytes +
         (remote_slots + groups_per_rank * kGroupSlices) * tile_sum_bytes + (2 * stages + 1) * 8;
}

// GEMMKIT_LINEAR_PRODUCERS and GEMMKIT_LINEAR_FOLD as the device settings (LinearDevice), read
// through detail::env_setting by the launcher: empty means the default.
inline int parse_ring_producers(const std::string& text) {
  if (text.empty()) return kRingMaxProducerWarps;
  if (text != "1" && text != "4") {
    throw Error("gemmkit::linear: GEMMKIT_LINEAR_PRODUCERS '" + text + "': must be 1 or 4");
  }
  return std::stoi(text);
}
inline bool parse_ring_async_fold(const std::string& text) {
  if (text.empty()) return true;
  if (text != "async" && text != "barrier") {
    throw Error("gemmkit::linear: GEMMKIT_LINEAR_FOLD '" + text + "': must be async or barrier");
  }
  return text == "async";
}

// Output tiles the ring kernel is built for, (mt, nt): 16 * mt weight rows by 8 * nt batch rows.
struct RingTileShape {
  int mt = 0, nt = 0;
};
inline bool ring_tile_built(RingTileShape t) {
  return (t.mt == 1 && (t.nt == 1 || t.nt == 2 || t.nt == 4)) || (t.mt == 2 && t.nt == 4);
}

// A forced ring variant as the names print: "ring<stages>[.t<mt>x<nt>][.w<consumers>][.b<batch>]
// [.p<producers>][.fa|.fb][.c<cluster>]" (.w: consumer warps, printed only when not 4, and 4 when
// left out of a forced name; .b: the
// slices a consumer warp waits for at a time, printed only where it is not ring_slice_batch's;
// .fa / .fb: the async or barrier fold of a cluster's group sums; .c: the ranks the k groups are
// split over). Fields left out stay 0: chosen as auto would.
enum class RingFold { device = 0, async = 1, barrier = 2 };
struct RingName {
  int stages = 0;
  RingTileShape tile;
  int consumers = 0;
  int batch = 0;
  int producers = 0;
  RingFold fold = RingFold::device;
  int cluster = 0;
};
inline bool parse_ring_name(const std::string& name, RingName& out) {
  RingName r;
  std::size_t at = 0;
  // A positive decimal without a leading zero, at `at`.
  const auto number = [&](int& value) {
    std::size_t end = at;
    while (end < name.size() && end - at < 3 && name[end] >= '0' && name[end] <= '9') ++end;
    if (end == at || name[at] == '0') return false;
    value = std::stoi(name.substr(at, end - at));
    at = end;
    return true;
  };
  const auto literal = [&](const char* text) {
    const std::string t(text);
    if (name.compare(at, t.size(), t) != 0) return false;
    at += t.size();
    return true;
  };
  if (!literal("ring") || !number(r.stages)) return false;
  if (r.stages != 4 && r.stages != 8 && r.stages != 16) return false;
  if (literal(".t") && (!number(r.tile.mt) || !literal("x") || !number(r.tile.nt))) return false;
  if (literal(".w") && !number(r.consumers)) return false;
  if (literal(".b") && !number(r.batch)) return false;
  if (literal(".p") && !number(r.producers)) return false;
  if (literal(".fa")) {
    r.fold = RingFold::async;
  } else if (literal(".fb")) {
    r.fold = RingFold::barrier;
  }
  if (literal(".c") && !number(r.cluster)) return false;
  if (at != name.size()) return false;
  out = r;
  return true;
}

// The ranks a cluster of (at most) `cluster` splits `groups` over: each takes ceil(groups /
// cluster) groups and no rank is left empty.
inline int64_t ring_cluster_ranks(int64_t groups, int64_t cluster) {
  return ceil_div(groups, ceil_div(groups, cluster));
}

// CTAs of config `c` one multiprocessor holds, 1 or 2 (two standing for two or more): its
// shared memory (plus the 1 KiB the device reserves per block) and threads decide; registers do
// not bind (the ring instances take at most 128 registers, 256 threads where they take 128).
inline int ring_ctas_per_sm(const LinearConfig& c, const LinearDevice& d) {
  const int64_t by_shared = d.shared_per_sm / (c.shared_bytes + 1024);
  const int64_t by_threads = c.threads > 0 ? 2048 / c.threads : 2;
  return std::min<int64_t>(by_shared, by_threads) >= 2 ? 2 : 1;
}

// Whether every cluster of config `c` runs at once (one wave): c.tiles clusters of c.cluster
// CTAs against the clusters the device co-schedules at c's CTAs per SM (true where not known).
inline bool ring_clusters_one_wave(const LinearConfig& c, const LinearDevice& d) {
  if (c.cluster <= 1 || c.cluster > kRingMaxCluster) return true;
  const int coresident = d.coresident_clusters[static_cast<std::size_t>(ring_ctas_per_sm(c, d) - 1)]
                                              [static_cast<std::size_t>(c.cluster)];
  return coresident == 0 || c.tiles <= coresident;
}

// Ring variant with `stages` (0 = choose), `tile` (mt = 0: choose), `producers` and `fold` (0 /
// device: the device's setting), `cluster` (0 = choose; else an exact split the caller checked
// with ring_cluster_ranks), `batch` (0 = ring_slice_batch; else one the caller checked with
// ring_batch_allowed at the stages it forced), `consumers` (0 = choose; else one the caller
// checked with ring_consumers_allowed), or a config with an empty name when it cannot serve.
// The cluster chosen (cluster 0) runs in one wave: where the device co-schedules fewer clusters of
// that size than there are tiles (ring_clusters_one_wave), the split goes to fewer ranks, and the
// reason says so. H100 SXM, PDL: 16 x 128 x 14336 (16 tiles, one CTA per SM, 15 clusters of 7 at
// once) took 5.00 us over clusters of 7, 3.47 over 6, 3.34 over 5.
inline LinearConfig ring_config_for_cluster(const LinearShape& s, const LinearDevice& d, int stages,
                                            bool pdl, RingTileShape tile, int producers,
                                            RingFold fold, int forced_cluster, int batch,
                                            int consumers);
inline LinearConfig ring_config(const LinearShape& s, const LinearDevice& d, int stages, bool pdl,
                                RingTileShape tile = {}, int producers = 0,
                                RingFold fold = RingFold::device, int forced_cluster = 0,
                                int batch = 0, int consumers = 0) {
  LinearConfig c = ring_config_for_cluster(s, d, stages, pdl, tile, producers, fold, forced_cluster,
                                           batch, consumers);
  if (forced_cluster != 0 || c.name.empty() || ring_clusters_one_wave(c, d)) return c;
  const int chosen = c.cluster;
  const int coresident = d.coresident_clusters[static_cast<std::size_t>(ring_ctas_per_sm(c, d) - 1)]
                                              [static_cast<std::size_t>(chosen)];
  const int64_t groups = ceil_div(s.k, kGroupK);
  for (int64_t want = chosen - 1; want >= 1; --want) {
    const int ranks = static_cast<int>(ring_cluster_ranks(groups, want));
    if (ranks >= c.cluster) continue;  // the same split as the last one tried
    LinearConfig fewer =
        ring_config_for_cluster(s, d, stages, pdl, tile, producers, fold, ranks, batch, consumers);
    if (fewer.name.empty()) break;
    c = std::move(fewer);
    if (ring_clusters_one_wave(c, d)) break;
  }
  if (c.cluster != chosen) {
    c.reason = "; cluster " + std::to_string(c.cluster) + ", not " + std::to_string(chosen) +
               ": the device runs " + std::to_string(coresident) + " clusters of " +
               std::to_string(chosen) + " at once, fewer than the " + std::to_string(c.tiles) +
               " tiles";
  }
  return c;
}

inline LinearConfig ring_config_for_cluster(const LinearShape& s, const LinearDevice& d, int stages,
                                            bool pdl, RingTileShape tile, int producers,
                                            RingFold fold, int forced_cluster, int batch,
                                            int consumers) {
  LinearConfig c;
  c.path = LinearPath::tma_ring;
  c.pdl = pdl;
  c.producers = producers != 0 ? producers : d.ring_producers;
  c.async_fold = fold == RingFold::device ? d.async_fold : fold == RingFold::async;
  // One 16 x 8 tile per CTA whatever n: wider batch tiles measured slower at every n the family
  // serves (H200, docs/perf.md: 1 x 128 x 2880 takes 2.46 us at t1x1 against 3.52 at t1x4; at
  // n = 16..64 more, smaller tiles beat fewer, wider ones by 0.3-1.6 us).
  c.nt = 1;
  c.mt = 1;
  if (tile.mt != 0) {
    c.mt = tile.mt;
    c.nt = tile.nt;
  }
  c.m_tiles = ceil_div(s.m, 16 * c.mt);
  c.tiles = c.m_tiles * ceil_div(s.n, 8 * c.nt);
  const int64_t groups = ceil_div(s.k, kGroupK);
  const int64_t slices = ceil_div(s.k, kSliceK);
  // Eight consumer warps are possible (and chosen by `consumers` = 0 where they pay) for the
  // 16 x 8 tile taking one slice at a time on 8 stages or more.
  const bool eight_possible = c.mt * c.nt == 1 && batch <= 1 && (stages == 0 || stages >= 8) &&
                              (consumers == 0 || consumers == kRingMaxConsumerWarps);
  // Split k over a cluster until the grid covers the multiprocessors once (twice measured
  // slower: 1 x 256 x 7168 took 12.1 us at cluster 14 against 8.6 us at cluster 7).
  // Two groups split too with four consumer warps: 1 x 128 x 720 took 1.75 us over a cluster of
  // 2 (ring4) against 1.88 us in one CTA (ring8; H200, PDL, same binary). With eight, a k of 5 to
  // 8 slices stays in one CTA, a slice per warp, and skips the cluster hand-off: 1 x 128 x 720
  // 1.41 us against 1.49 over a cluster of 2 (ring8.w8.c1 against ring4.c2; 2.45 against 2.53
  // without PDL).
  int64_t cluster = 1;
  if (forced_cluster != 0) {
    cluster = forced_cluster;
  } else if (eight_possible && slices > kRingConsumerWarps && slices <= kRingMaxConsumerWarps) {
    cluster = 1;
  } else if (d.cluster_launch && groups > 1) {
    cluster = std::max<int64_t>(1, std::min<int64_t>({kRingMaxCluster, d.max_cluster, groups,
                                                      d.multiprocessors / c.tiles}));
  }
  c.groups_per_rank = static_cast<int>(ceil_div(groups, cluster));
  c.cluster = static_cast<int>(ring_cluster_ranks(groups, cluster));  // no rank left empty
  const int64_t local_slices = std::min<int64_t>(int64_t{c.groups_per_rank} * kGroupSlices, slices);
  // Eight consumer warps where a CTA reduces more than four slices (four warps would run two
  // MMA chains or more one after another) and the CTAs do not share SMs (two CTAs on one SM
  // already run eight). H200, PDL / without, graphs of 200 calls, same binary, against four:
  // 16 x 1024 x 1024 (8 slices) 1.76 / 2.95 against 1.88 / 3.01 us; 128 x 128 x 2880 (23) 2.77 /
  // 4.02 against 2.83 / 4.23; 64 x 128 x 7168 (28 per rank) 4.06 / 5.16 against 4.24 / 5.22;
  // 1 x 128 x 14336 (8 per rank) 2.58 / 4.45 against 2.73 / 4.42; even within 1% at 64 x 128 x
  // 2880, 8 x 384 x 7168 and 1 x 256 x 7168; 256 x 128 x 2880 (256 CTAs) 4.69 / 5.55 against
  // 4.69 / 5.43.
  c.consumers = consumers != 0 ? consumers : kRingConsumerWarps;
  if (consumers == 0 && eight_possible && local_slices > kRingConsumerWarps &&
      c.tiles * c.cluster <= d.multiprocessors) {
    c.consumers = kRingMaxConsumerWarps;
  }
  if (stages == 0) {
    stages = local_slices > 8 ? 16 : local_slices > 4 ? 8 : 4;
    // Several batch tiles and more CTAs than multiprocessors (CTAs share SMs and each weight
    // tile is streamed by several of them): 8 stages (H200, A/B of two builds: 256 x 128 x 2880,
    // 256 CTAs, 5.95 against 6.05 us with PDL, 6.48 against 6.99 without; 128 x 128 x 2880, 128
    // CTAs, stays at 16: 3.80 against 4.03). One batch tile keeps 16: at n = 1, 2880 x 2880 and
    // 3072 x 3072 took 6.70 / 7.01 us at 8 stages against 5.99 / 6.32 at 16 with PDL (n = 8
    // went the other way; not understood, so left as it was).
    if (c.tiles > c.m_tiles && c.tiles * c.cluster > d.multiprocessors) {
      stages = std::min(stages, 8);
    }
    stages = std::max(stages, c.consumers);  // a slice per consumer warp and round
  }
  for (; stages >= 4; stages /= 2) {
    if (ring_shared_bytes_host(stages, c.mt, c.nt, groups, c.cluster, c.groups_per_rank) <=
        d.shared_optin)
      break;
  }
  if (stages < 4) return LinearConfig{};
  // Only four stages fit (very long k): eight chosen consumers go back to four.
  if (stages < c.consumers && consumers == 0) c.consumers = kRingConsumerWarps;
  if (stages < c.consumers) return LinearConfig{};
  c.stages = stages;
  c.threads = 32 * (c.consumers + c.producers);
  const int default_batch = ring_slice_batch(c.mt, c.nt, stages);
  c.batch = batch != 0 ? batch : default_batch;
  if (!ring_consumers_allowed(c.consumers, c.mt, c.nt, c.stages, c.batch)) return LinearConfig{};
  c.shared_bytes = ring_shared_bytes_host(stages, c.mt, c.nt, groups, c.cluster, c.groups_per_rank);
  c.grid_x = c.tiles * c.cluster;
  if (c.grid_x > d.max_grid_x) return LinearConfig{};
  c.name = "ring" + std::to_string(stages) + ".t" + std::to_string(c.mt) + "x" +
           std::to_string(c.nt) +
           (c.consumers != kRingConsumerWarps ? ".w" + std::to_string(c.consumers) : "") +
           (c.batch != default_batch ? ".b" + std::to_string(c.batch) : "") + ".p" +
           std::to_string(c.producers) + (c.cluster > 1 && !c.async_fold ? ".fb" : "") + ".c" +
           std::to_string(c.cluster);
  return c;
}

}  // namespace gemmkit::cuda::linear_family
