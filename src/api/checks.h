// Overflow-checked size arithmetic and error formatting for the validation layer.
#pragma once

#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "gemmkit/gemmkit.h"

namespace gemmkit::detail {

inline std::string format_dims(const std::vector<int64_t>& dims) {
  std::ostringstream s;
  s << '[';
  for (std::size_t i = 0; i < dims.size(); ++i) s << (i ? ", " : "") << dims[i];
  s << ']';
  return s.str();
}

inline int64_t saturating_mul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::numeric_limits<int64_t>::max();
  return r;
}

// a * b, or Error("<what()>: <a> * <b> overflows int64").
template <typename What>
int64_t checked_mul(int64_t a, int64_t b, What what) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) {
    throw Error(what() + ": " + std::to_string(a) + " * " + std::to_string(b) + " overflows int64");
  }
  return r;
}

template <typename What>
int64_t checked_add(int64_t a, int64_t b, What what) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) {
    throw Error(what() + ": " + std::to_string(a) + " + " + std::to_string(b) + " overflows int64");
  }
  return r;
}

}  // namespace gemmkit::detail
