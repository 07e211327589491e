// AVX2 variant of the dot-product kernels (x86-64 with GCC or Clang), selected at run time.
// Only the instruction set changes (wider registers, more of them): the arithmetic is the one of
// kernels_impl.h, without FMA, so results are bitwise identical to the generic variant.
#include <cstdint>

#include "cpu/cpu_internal.h"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define GK_HAVE_AVX2_VARIANT 1
#endif

namespace gemmkit::cpu::avx2 {

#if defined(GK_HAVE_AVX2_VARIANT)

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2")
#endif

#define GK_TILE_ROWS 3  // 16 YMM registers: 3 x 4 accumulators + operands
#define GK_TILE_COLS 4
#include "cpu/kernels_impl.h"
#undef GK_TILE_ROWS
#undef GK_TILE_COLS

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

bool compiled() {
  return true;
}

#else

bool compiled() {
  return false;
}
void gemm_block(const float*, int64_t, int64_t, const float*, int64_t, int64_t, int64_t, int64_t,
                float*, int64_t, float*) {}

#endif

}  // namespace gemmkit::cpu::avx2
