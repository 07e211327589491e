// Pure arithmetic of the benchmarks: medians, work and traffic of a problem, hardware floors.
// Header-only (the unit tests include it).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "suite.h"

namespace gemmkit::bench {

// H200 figures (measured, see bench/peers/*.csv): a
// device-to-device copy moves 4.3 TB/s counting bytes read and written, and an 8192^3 bf16
// matrix product runs at about 790 TFLOP/s.
constexpr double kH200CopyBytesPerSecond = 4.3e12;
constexpr double kH200Bf16FlopsPerSecond = 790e12;
// h200-conv.csv computes its floor_us with a rounder 4.0 TB/s; conv floors use the same figure
// so that our "% of floor" and the published table agree.
constexpr double kH200ConvFloorBytesPerSecond = 4.0e12;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Median (mean of the two middle values for an even count); NaN when empty.
inline double median(std::vector<double> values) {
  if (values.empty()) return kNaN;
  const std::size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  const double upper = values[mid];
  if (values.size() % 2 == 1) return upper;
  const double lower =
      *std::max_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid));
  return 0.5 * (lower + upper);
}

// Work and compulsory memory traffic of one call.
struct Cost {
  double flops = 0;  // 2 per multiply-add
  double bytes = 0;  // every operand read once, the output written once
};

inline double product(const std::vector<int64_t>& values) {
  double result = 1;
  for (int64_t value : values) result *= static_cast<double>(value);
  return result;
}

inline Cost linear_cost(const LinearRow& row) {
  const double n = static_cast<double>(row.n), m = static_cast<double>(row.m),
               k = static_cast<double>(row.k);
  const double in_size = static_cast<double>(dtype_size(row.dtype));
  Cost cost;
  cost.flops = 2 * n * m * k;
  cost.bytes = (n * k + m * k + (row.bias ? m : 0)) * in_size +
               n * m * static_cast<double>(dtype_size(row.out_dtype));
  return cost;
}

// FLOPs of the direct form: each output sums kernel_positions * c/groups products, counting the
// zeros that input dilation inserts (as h200-conv.csv does for transposed convolutions).
inline Cost conv_cost(const ConvRow& row) {
  const double element = static_cast<double>(dtype_size(row.dtype));
  const double out_elements = product(conv_out_shape(row));
  const double c_per_group = static_cast<double>(row.c / std::max<int64_t>(row.groups, 1));
  Cost cost;
  cost.flops = 2 * out_elements * product(row.kernel) * c_per_group;
  cost.bytes = (product(conv_x_shape(row)) + product(conv_weight_shape(row)) + out_elements +
                (row.bias ? static_cast<double>(row.o) : 0)) *
               element;
  return cost;
}

// Time no H200 kernel can beat: the larger of moving the bytes and doing the math.
inline double linear_floor_us(const Cost& cost) {
  return 1e6 * std::max(cost.bytes / kH200CopyBytesPerSecond, cost.flops / kH200Bf16FlopsPerSecond);
}

inline double conv_floor_us(const Cost& cost) {
  return 1e6 *
         std::max(cost.bytes / kH200ConvFloorBytesPerSecond, cost.flops / kH200Bf16FlopsPerSecond);
}

// Input copies to rotate through so that one pass over them is more than twice the L2 size (the
// next call then finds its inputs evicted): at least 2, at most what fits in `memory_cap`
// bytes (1 when even two copies do not fit, and then the "cold" figure is as warm as it gets).
inline int cold_copy_count(double input_bytes, double l2_bytes, double memory_cap) {
  if (input_bytes <= 0) return 1;
  const double wanted = std::max(2.0, std::floor(2 * l2_bytes / input_bytes) + 1);
  const double fitting = std::floor(memory_cap / input_bytes);
  return static_cast<int>(std::max(1.0, std::min(wanted, fitting)));
}

// Calls in one cold-L2 graph: at least `calls`, a whole number of passes over the copies.
inline int cold_graph_calls(int calls, int copies) {
  const int passes = (std::max(calls, copies) + copies - 1) / copies;
  return passes * copies;
}

}  // namespace gemmkit::bench
