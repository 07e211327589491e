// Configuration of the linear streaming kernel (stream_kernel.cuh), the decode-batch kernel of the
// one-chain form: its tile, stages, shared memory and grid; pure, host-tested
// (tests/test_linear_dispatch.cpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "cuda/linear/linear_contract.h"
#include "cuda/linear/linear_types.h"

namespace gemmkit::cuda::linear_family {

// Largest batch auto gives the streaming kernel (it serves any n by name); above it the wgmma
// kernels. n = 16 takes stream.t2x2 (H200: 4096 x 4096 10.9 us against 16.9 for the transposed
// wgmma kernel's best tile, 8192 x 3584 16.2 against 21.6, 4096 x 14336 37.0 against 54.1); at n =
// 64 the wgmma kernels win (4096 x 4096: 15.6 against 19.8 for stream.t4x8). With batch invariance
// off, cuBLASLt takes n > 8 on these weights (kNonInvariantStreamMaxN, linear_config.h).
constexpr int64_t kStreamMaxN = 16;

// Tiles the kernel is built for, (consumer warps c, batch tiles nt): 16 * c weight rows by 8 * nt
// batch rows, as "stream.t<c>x<nt>".
inline bool stream_tile_built(int consumers, int nt) {
  return (consumers == 1 && (nt == 1 || nt == 2)) ||
         (consumers == 2 && (nt == 1 || nt == 2 || nt == 4 || nt == 8)) ||
         (consumers == 4 && (nt == 4 || nt == 8));
}
// The ring stages of a tile. The standard ring: as many 128-wide k slices of both operands as fit
// 192 KiB, at most kStreamStages (stream_stages_host, which also sizes the launcher's kernel
// instances); under 192 KiB, with PDL the next call's CTA fits on the SM beside this one and
// streams its first slices while this one ends. The long ring: kStreamLongStages stages of the
// tiles auto takes (t2x1, t2x2), for k of kStreamLongSlices slices and more where the tiles fit
// one wave (at most one CTA per SM). It leaves no room for the next call's CTA, which long k
// amortizes. H100, PDL, warm, 8 stages against 16: 8 x 4096 x 14336 44.0 us against 41.9, 1 x 4096
// x 8192 26.9 against 25.1; 8 x 4096 x 4096 (32 slices) 11.6 against 13.6; 8 x 4608 x 3584 (144
// tiles, two waves) 11.0 against 22.0.
constexpr int kStreamStages = 8;
constexpr int kStreamLongStages = 16;
constexpr int64_t kStreamLongSlices = 64;

constexpr int64_t stream_stage_bytes_host(int consumers, int nt) {
  return 2 * (16 * consumers + 8 * nt) * 128;
}
constexpr int stream_stages_host(int consumers, int nt) {
  return static_cast<int>(
      std::min<int64_t>(kStreamStages, (192 * 1024) / stream_stage_bytes_host(consumers, nt)));
}
inline bool stream_long_ring_built(int consumers, int nt) {
  return consumers == 2 && (nt == 1 || nt == 2);
}
inline int64_t stream_shared_bytes_host(int consumers, int nt, int stages) {
  return 1024 + stages * stream_stage_bytes_host(consumers, nt) + 2 * int64_t{stages} * 8;
}
// Whether auto takes the long ring for `tiles` tiles of (consumers, nt) over k.
inline bool stream_long_ring_preferred(int consumers, int nt, int64_t tiles, int64_t k,
                                       const LinearDevice& d) {
  return stream_long_ring_built(consumers, nt) && ceil_div(k, kSliceK) >= kStreamLongSlices &&
         tiles <= d.multiprocessors;
}

// The ring of a streaming config: chosen by stream_long_ring_preferred, or named.
enum class StreamRing { chosen, standard, long_ring };

// The tile for n batch rows: the fewest batch tiles that cover n (1, 2, 4 or 8), with two consumer
// warps (32 weight rows a CTA: m / 32 CTAs, 128 at m = 4096) up to n = 16, four from n = 17 on
// (64 rows: the activation slices, re-read by every CTA, stay under the weight's bytes).
inline int stream_batch_tiles(int64_t n) {
  return n <= 8 ? 1 : n <= 16 ? 2 : n <= 32 ? 4 : 8;
}
inline int stream_consumers(int nt) {
  return nt <= 2 ? 2 : 4;
}

// A streaming config with tile (consumers, nt) (0: chosen for n) and `ring`, or one with an empty
// name when the tile or ring is not built or the grid does not fit. One CTA per tile (grid-stride
// beyond the grid limit), 32 * (consumers + 1) threads.
inline LinearConfig stream_config(const LinearShape& s, const LinearDevice& d, bool pdl,
                                  int consumers = 0, int nt = 0,
                                  StreamRing ring = StreamRing::chosen) {
  if (nt == 0) nt = stream_batch_tiles(s.n);
  if (consumers == 0) consumers = stream_consumers(nt);
  if (!stream_tile_built(consumers, nt)) return LinearConfig{};
  if (ring == StreamRing::long_ring && !stream_long_ring_built(consumers, nt)) {
    return LinearConfig{};
  }
  LinearConfig c;
  c.path = LinearPath::stream;
  c.pdl = pdl;
  c.one_chain = true;
  c.consumers = consumers;
  c.nt = nt;
  c.threads = 32 * (consumers + 1);
  c.m_tiles = ceil_div(s.m, 16 * consumers);
  c.tiles = c.m_tiles * ceil_div(s.n, 8 * nt);
  c.grid_x = std::min(c.tiles, d.max_grid_x);
  const bool long_ring =
      ring == StreamRing::long_ring ||
      (ring == StreamRing::chosen && stream_long_ring_preferred(consumers, nt, c.tiles, s.k, d));
  c.stages = long_ring ? kStreamLongStages : stream_stages_host(consumers, nt);
  c.shared_bytes = stream_shared_bytes_host(consumers, nt, c.stages);
  if (c.shared_bytes > d.shared_optin) return LinearConfig{};
  if (!tma_box_rows_fit(s, 8 * nt, 16 * consumers)) return LinearConfig{};
  c.name = "stream.t" + std::to_string(consumers) + "x" + std::to_string(nt) +
           (long_ring ? ".s" + std::to_string(kStreamLongStages) : "");
  return c;
}

// A forced streaming name as the names print: "stream[.t<c>x<nt>[.s16]]" (tile 0 x 0: chosen for n,
// with the ring; a named tile: the standard ring, or the long one with .s16).
inline bool parse_stream_name(const std::string& name, int& consumers, int& nt, StreamRing& ring) {
  consumers = nt = 0;
  ring = StreamRing::chosen;
  if (name == "stream") return true;
  if (name.rfind("stream.t", 0) != 0) return false;
  std::string tile = name.substr(8);
  const std::string long_suffix = ".s" + std::to_string(kStreamLongStages);
  ring = StreamRing::standard;
  if (tile.size() > long_suffix.size() &&
      tile.compare(tile.size() - long_suffix.size(), long_suffix.size(), long_suffix) == 0) {
    ring = StreamRing::long_ring;
    tile.resize(tile.size() - long_suffix.size());
  }
  const std::size_t x = tile.find('x');
  if (x != 1 || tile.size() != 3 || tile[0] < '1' || tile[0] > '9' || tile[2] < '1' ||
      tile[2] > '9') {
    return false;
  }
  consumers = tile[0] - '0';
  nt = tile[2] - '0';
  return true;
}

}  // namespace gemmkit::cuda::linear_family
