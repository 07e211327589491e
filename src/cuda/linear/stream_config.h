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
// The ring stages of a tile: as many 128-wide k slices of both operands as fit 192 KiB, at most 8
// (stream_stages in stream_kernel.cuh, which the launcher checks against this).
inline int64_t stream_stage_bytes_host(int consumers, int nt) {
  return 2 * (16 * consumers + 8 * nt) * 128;
}
inline int stream_stages_host(int consumers, int nt) {
  return static_cast<int>(
      std::min<int64_t>(8, (192 * 1024) / stream_stage_bytes_host(consumers, nt)));
}
inline int64_t stream_shared_bytes_host(int consumers, int nt) {
  const int stages = stream_stages_host(consumers, nt);
  return 1024 + stages * stream_stage_bytes_host(consumers, nt) + 2 * int64_t{stages} * 8;
}

// The tile for n batch rows: the fewest batch tiles that cover n (1, 2, 4 or 8), with two consumer
// warps (32 weight rows a CTA: m / 32 CTAs, 128 at m = 4096) up to n = 16, four from n = 17 on
// (64 rows: the activation slices, re-read by every CTA, stay under the weight's bytes).
inline int stream_batch_tiles(int64_t n) {
  return n <= 8 ? 1 : n <= 16 ? 2 : n <= 32 ? 4 : 8;
}
inline int stream_consumers(int nt) {
  return nt <= 2 ? 2 : 4;
}

// A streaming config with tile (consumers, nt) (0: chosen for n), or one with an empty name when
// the tile is not built or the grid does not fit. One CTA per tile (grid-stride beyond the grid
// limit), 32 * (consumers + 1) threads.
inline LinearConfig stream_config(const LinearShape& s, const LinearDevice& d, bool pdl,
                                  int consumers = 0, int nt = 0) {
  if (nt == 0) nt = stream_batch_tiles(s.n);
  if (consumers == 0) consumers = stream_consumers(nt);
  if (!stream_tile_built(consumers, nt)) return LinearConfig{};
  LinearConfig c;
  c.path = LinearPath::stream;
  c.pdl = pdl;
  c.one_chain = true;
  c.consumers = consumers;
  c.nt = nt;
  c.stages = stream_stages_host(consumers, nt);
  c.threads = 32 * (consumers + 1);
  c.m_tiles = ceil_div(s.m, 16 * consumers);
  c.tiles = c.m_tiles * ceil_div(s.n, 8 * nt);
  c.grid_x = std::min(c.tiles, d.max_grid_x);
  c.shared_bytes = stream_shared_bytes_host(consumers, nt);
  if (c.shared_bytes > d.shared_optin) return LinearConfig{};
  if (!tma_box_rows_fit(s, 8 * nt, 16 * consumers)) return LinearConfig{};
  c.name = "stream.t" + std::to_string(consumers) + "x" + std::to_string(nt);
  return c;
}

// A forced streaming name as the names print: "stream[.t<c>x<nt>]" (tile 0 x 0: chosen for n).
inline bool parse_stream_name(const std::string& name, int& consumers, int& nt) {
  consumers = nt = 0;
  if (name == "stream") return true;
  if (name.rfind("stream.t", 0) != 0) return false;
  const std::string tile = name.substr(8);
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
