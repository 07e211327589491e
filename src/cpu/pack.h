// Operand conversion helpers of the CPU backend: strided bf16/f16/f32 -> contiguous float, and
// float -> output dtype stores. All index math in int64_t.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "cpu/convert.h"
#include "gemmkit/gemmkit.h"

namespace gemmkit::cpu {

// Reads element `index` (elements from `base`) of a typed host buffer as float.
class ElementReader {
 public:
  ElementReader(const void* base, DType dtype)
      : base_(base), dtype_(dtype), f16_(dtype == DType::f16 ? f16_table() : nullptr) {}

  float operator()(int64_t index) const {
    switch (dtype_) {
      case DType::bf16:
        return bf16_load(static_cast<const uint16_t*>(base_)[index]);
      case DType::f16:
        return f16_[static_cast<const uint16_t*>(base_)[index]];
      case DType::f32:
      default:
        return static_cast<const float*>(base_)[index];
    }
  }

  // dst[i] = element(offset + i * stride), i < len.
  void row(int64_t offset, int64_t stride, int64_t len, float* dst) const {
    switch (dtype_) {
      case DType::bf16: {
        const uint16_t* p = static_cast<const uint16_t*>(base_) + offset;
        if (stride == 1)
          for (int64_t i = 0; i < len; ++i) dst[i] = bf16_load(p[i]);
        else
          for (int64_t i = 0; i < len; ++i) dst[i] = bf16_load(p[i * stride]);
        return;
      }
      case DType::f16: {
        const uint16_t* p = static_cast<const uint16_t*>(base_) + offset;
        if (stride == 1)
          for (int64_t i = 0; i < len; ++i) dst[i] = f16_[p[i]];
        else
          for (int64_t i = 0; i < len; ++i) dst[i] = f16_[p[i * stride]];
        return;
      }
      case DType::f32:
      default: {
        const float* p = static_cast<const float*>(base_) + offset;
        if (stride == 1)
          std::memcpy(dst, p, static_cast<std::size_t>(len) * sizeof(float));
        else
          for (int64_t i = 0; i < len; ++i) dst[i] = p[i * stride];
        return;
      }
    }
  }

 private:
  const void* base_;
  DType dtype_;
  const float* f16_;
};

// Packs rows [r0, r0 + nrows) of the 2-D strided matrix (row stride rs, column stride cs, `len`
// columns) into dst (row r at dst + r * ld), zero-filling columns [len, ld). Walks memory in the
// order of the smaller stride so that transposed views are read line by line.
inline void pack_matrix_rows(const ElementReader& read, int64_t rs, int64_t cs, int64_t r0,
                             int64_t nrows, int64_t len, float* dst, int64_t ld) {
  if (cs <= rs || nrows == 1) {
    for (int64_t r = 0; r < nrows; ++r) read.row((r0 + r) * rs, cs, len, dst + r * ld);
  } else {
    // Column-major-ish: for a band of rows, walk k outer and the rows inner (adjacent in memory).
    constexpr int64_t kBand = 16;
    for (int64_t rb = 0; rb < nrows; rb += kBand) {
      const int64_t nb = std::min(kBand, nrows - rb);
      for (int64_t k = 0; k < len; ++k) {
        const int64_t base = (r0 + rb) * rs + k * cs;
        for (int64_t r = 0; r < nb; ++r) dst[(rb + r) * ld + k] = read(base + r * rs);
      }
    }
  }
  if (ld > len)
    for (int64_t r = 0; r < nrows; ++r) std::fill(dst + r * ld + len, dst + (r + 1) * ld, 0.0f);
}

// Writes float values to a typed host buffer with one rounding (round to nearest even).
class ElementWriter {
 public:
  ElementWriter(void* base, DType dtype) : base_(base), dtype_(dtype) {}
  void operator()(int64_t index, float value) const {
    switch (dtype_) {
      case DType::bf16:
        static_cast<uint16_t*>(base_)[index] = bf16_store(value);
        return;
      case DType::f16:
        static_cast<uint16_t*>(base_)[index] = f16_store(value);
        return;
      case DType::f32:
      default:
        static_cast<float*>(base_)[index] = value;
        return;
    }
  }

 private:
  void* base_;
  DType dtype_;
};

}  // namespace gemmkit::cpu
