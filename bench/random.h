// Deterministic test data. Header-only (the unit tests include it).
#pragma once

#include <algorithm>
#include <cstdint>

#include "gemmkit/gemmkit.h"

namespace gemmkit::bench {

// splitmix64 (Steele, Lea, Flood 2014): tiny state, good enough statistics for test data, and
// the same sequence on every platform.
class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }

  // Uniform in [-1, 1), never exactly zero: zeros would hide indexing bugs (a wrong element
  // that happens to be 0 contributes the same as the right one).
  double next_signed_unit() {
    const double unit = static_cast<double>(next() >> 11) * 0x1.0p-53;  // [0, 1)
    const double value = 2 * unit - 1;
    return value == 0 ? 0.5 : value;
  }

 private:
  uint64_t state_;
};

// Seed of an independent stream (tensor `stream` of a problem, chunk `stream` of a tensor).
inline uint64_t derive_seed(uint64_t seed, uint64_t stream) {
  SplitMix64 mixer(seed ^ (stream * 0xD1B54A32D192ED03ull));
  mixer.next();
  return mixer.next();
}

// Tensors are filled in fixed-size chunks, each from its own stream, so the values do not
// depend on how many threads fill them.
constexpr int64_t kRandomChunkElements = int64_t{1} << 16;

inline int64_t random_chunk_count(int64_t numel) {
  return (numel + kRandomChunkElements - 1) / kRandomChunkElements;
}

// Fills chunk `chunk` of a host tensor of `numel` elements with values in [-scale, scale).
inline void fill_random_chunk(void* data, DType dtype, int64_t numel, int64_t chunk, uint64_t seed,
                              double scale) {
  SplitMix64 generator(derive_seed(seed, static_cast<uint64_t>(chunk)));
  const int64_t begin = chunk * kRandomChunkElements;
  const int64_t end = std::min(numel, begin + kRandomChunkElements);
  for (int64_t i = begin; i < end; ++i) {
    float value = static_cast<float>(generator.next_signed_unit() * scale);
    if (value == 0) value = static_cast<float>(scale);  // scale can push tiny values to zero
    store_from_float(data, dtype, i, value);
  }
}

// Single-threaded fill of a whole host tensor (bench/data.h has the threaded one).
inline void fill_random(void* data, DType dtype, int64_t numel, uint64_t seed, double scale) {
  for (int64_t chunk = 0; chunk < random_chunk_count(numel); ++chunk)
    fill_random_chunk(data, dtype, numel, chunk, seed, scale);
}

}  // namespace gemmkit::bench
