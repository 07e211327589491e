// Fast inline host conversions for the CPU backend. Same semantics as the public
// gemmkit::bf16_to_float / float_to_bf16 / f16_to_float / float_to_f16 (round to nearest even,
// overflow to infinity, subnormals kept); NaNs are handed to the public functions so that NaN
// results carry exactly the bits the API layer produces.
#pragma once

#include <cstdint>
#include <cstring>

#include "gemmkit/gemmkit.h"

namespace gemmkit::cpu {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline float bf16_load(uint16_t h) {
  return bits_float(static_cast<uint32_t>(h) << 16);
}

inline uint16_t bf16_store(float f) {
  uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return gemmkit::float_to_bf16(f);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

// Exact f16 -> float (every f16 value is a float).
inline float f16_decode(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t e = (h >> 10) & 0x1fu;
  const uint32_t m = h & 0x3ffu;
  if (e == 0x1f) return bits_float(sign | 0x7f800000u | (m << 13));
  if (e == 0) {
    // m * 2^-24, exact in float.
    const float v = static_cast<float>(m) * 5.9604644775390625e-08f;
    return bits_float(sign | float_bits(v));
  }
  return bits_float(sign | ((e + 112u) << 23) | (m << 13));
}

// Table-driven f16 -> float (256 KiB, built on first use).
const float* f16_table();
inline float f16_load(uint16_t h, const float* table) {
  return table[h];
}

inline uint16_t f16_store(float f) {
  const uint32_t u = float_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  if (a > 0x7f800000u) return gemmkit::float_to_f16(f);                // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 -> inf
  if (a >= 0x38800000u) {                                              // normal f16 (>= 2^-14)
    const uint32_t b = a - 0x38000000u;
    return static_cast<uint16_t>(sign | ((b + 0xfffu + ((b >> 13) & 1u)) >> 13));
  }
  if (a <= 0x33000000u) return static_cast<uint16_t>(sign);  // <= 2^-25 rounds to zero
  // Subnormal: value / 2^-24 = mant * 2^(e - 126) with shift 126 - e in [14, 24].
  const uint32_t e = a >> 23;
  const uint32_t mant = (a & 0x7fffffu) | 0x800000u;
  const uint32_t shift = 126u - e;
  uint32_t r = mant >> shift;
  const uint32_t rem = mant & ((1u << shift) - 1u);
  const uint32_t half = 1u << (shift - 1u);
  if (rem > half || (rem == half && (r & 1u))) ++r;
  return static_cast<uint16_t>(sign | r);
}

}  // namespace gemmkit::cpu
