// Host staging of benchmark operands and reading results back.
#pragma once

#include <cstdint>
#include <vector>

#include "gemmkit/gemmkit.h"

namespace gemmkit::bench {

// A contiguous host tensor of raw dtype elements (the data the reference reads).
class HostTensor {
 public:
  HostTensor() = default;
  HostTensor(DType dtype, int64_t numel)
      : dtype_(dtype), numel_(numel), bytes_(static_cast<std::size_t>(numel) * dtype_size(dtype)) {}

  DType dtype() const { return dtype_; }
  int64_t numel() const { return numel_; }
  std::size_t bytes() const { return bytes_.size(); }
  void* data() { return bytes_.data(); }
  const void* data() const { return bytes_.data(); }

 private:
  DType dtype_ = DType::f32;
  int64_t numel_ = 0;
  std::vector<uint8_t> bytes_;
};

// Fills with deterministic values in [-scale, scale), never zero, on all cores; the values do not
// depend on the number of threads (see bench/random.h).
void fill_random_parallel(HostTensor& tensor, uint64_t seed, double scale);

// The elements at `indices` of a contiguous tensor held by `buffer` (host or device), as double.
std::vector<double> read_elements(const Buffer& buffer, DType dtype,
                                  const std::vector<int64_t>& indices);

}  // namespace gemmkit::bench
