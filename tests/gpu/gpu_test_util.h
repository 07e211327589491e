// Helpers shared by the GPU tests: device availability, random host data, uploads.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "gemmkit/gemmkit.h"

namespace gemmkit::testing {

#define GEMMKIT_REQUIRE_GPU()                                                    \
  do {                                                                           \
    if (::gemmkit::cuda_devices().empty()) {                                     \
      GTEST_SKIP() << "no usable GPU: " << ::gemmkit::cuda_unavailable_reason(); \
    }                                                                            \
  } while (0)

// Random values in [-scale, scale) stored as `dtype`; never all zeros.
inline std::vector<uint8_t> random_host(DType dtype, int64_t count, float scale, uint64_t seed) {
  std::vector<uint8_t> bytes(static_cast<std::size_t>(count) * dtype_size(dtype));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  for (int64_t i = 0; i < count; ++i) store_from_float(bytes.data(), dtype, i, dist(rng));
  return bytes;
}

inline Buffer upload(const std::vector<uint8_t>& host, Device device) {
  Buffer buffer(host.size(), device);
  buffer.copy_from_host(host.data(), host.size());
  return buffer;
}

inline std::vector<uint8_t> download(const Buffer& buffer) {
  std::vector<uint8_t> host(buffer.bytes());
  buffer.copy_to_host(host.data(), host.size());
  return host;
}

// Index of the first element (of `dtype`) where two output byte images differ, or -1.
inline int64_t first_difference(const std::vector<uint8_t>& a, const std::vector<uint8_t>& b,
                                DType dtype) {
  const std::size_t size = dtype_size(dtype);
  for (std::size_t i = 0; i < a.size(); i += size) {
    if (std::memcmp(&a[i], &b[i], size) != 0) return static_cast<int64_t>(i / size);
  }
  return -1;
}

}  // namespace gemmkit::testing
