// AVX-512 variants of the CPU backend's kernels (x86-64 with GCC or Clang), selected at run time
// (GEMMKIT_CPU_ISA avx512, `auto` where cpuid and xgetbv report AVX-512 F and VL with the OS's
// ZMM state). Only the registers change, never an operation or its order, so each returns the
// bits of its AVX2 twin:
//   - fma_block: the FMA path's tile on 32 ZMM registers, 8 rows x three 16-column panels, against
//     AVX2's 6 x 16 on 16 YMM registers. Per element: acc = fma(a_i, b_i, acc), i ascending
//     (kernels_fma.cpp).
//   - gemm_block: the 8-lane kernel of kernels_impl.h on AVX-512 VL's 32 YMM registers (a 4 x 6
//     register tile against AVX2's 3 x 4), without FMA (-ffp-contract=off).
#include <cstdint>

#include "cpu/cpu_internal.h"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define GK_HAVE_AVX512_VARIANT 1
#include <immintrin.h>
#endif

namespace gemmkit::cpu::avx512 {

#if defined(GK_HAVE_AVX512_VARIANT)

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma,avx512f,avx512vl"))), \
                             apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma,avx512f,avx512vl")
#endif

#define GK_TILE_ROWS 4  // 32 YMM registers: 4 x 6 accumulators + 6 operands + 1
#define GK_TILE_COLS 6
#include "cpu/kernels_impl.h"
#undef GK_TILE_ROWS
#undef GK_TILE_COLS

namespace {

// The FMA tile: kFmaRows512 rows x kFmaPanels512 panels of 16 columns, 24 ZMM accumulators with
// three panel rows and one broadcast live (of 32 registers). Measured on a 2-core Xeon, f32 256 x
// 4096 x 4096: 8 x 3 32.7-34.3 ms, 9 x 3 33.1-37.5, 6 x 4 34.7-35.9, 12 x 2 38.3-38.4, 5 x 5
// 40.0-42.2 (AVX2's 6 x 16: 58.6-65.5).
constexpr int kFmaRows512 = 8;
constexpr int kFmaPanels512 = 3;

// R rows (1..kFmaRows512) x P panels (1..kFmaPanels512) of 16 columns over kc values of k; acc[r *
// ldacc + 16 * p + j] holds the running sums between calls (+0.0f when `first`). The loops over r
// and p unroll fully, so the accumulators live in registers.
template <int R, int P>
void fma_tile(const float* a, int64_t lda, const float* panel, int64_t panel_ld, int64_t kc,
              float* acc, int64_t ldacc, bool first) {
  __m512 c[R][P];
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p)
      c[r][p] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(acc + r * ldacc + 16 * p);
  for (int64_t i = 0; i < kc; ++i) {
    __m512 b[P];
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) b[p] = _mm512_loadu_ps(panel + p * panel_ld + i * kFmaPanel);
#pragma GCC unroll 12
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * lda + i]);
#pragma GCC unroll 4
      for (int p = 0; p < P; ++p) c[r][p] = _mm512_fmadd_ps(av, b[p], c[r][p]);
    }
  }
#pragma GCC unroll 12
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int p = 0; p < P; ++p) _mm512_storeu_ps(acc + r * ldacc + 16 * p, c[r][p]);
}

using TileFn = void (*)(const float*, int64_t, const float*, int64_t, int64_t, float*, int64_t,
                        bool);

// The tile for `rows` (1..R) rows and `panels` (1..P) panels.
template <int R, int P>
TileFn select_tile_panels(int64_t panels) {
  if constexpr (P > 1) {
    if (panels < P) return select_tile_panels<R, P - 1>(panels);
  }
  return &fma_tile<R, P>;
}
template <int R, int P>
TileFn select_tile(int64_t rows, int64_t panels) {
  if constexpr (R > 1) {
    if (rows < R) return select_tile<R - 1, P>(rows, panels);
  }
  return select_tile_panels<R, P>(panels);
}

}  // namespace

// Panel groups outer, row tiles inner: a group's panels (3 x 16 columns x kc) are read by every
// row tile in turn while they are in L1 / L2 (f32 conv 64 x 64 c128 3 x 3: 4.59-4.69 ms against
// 4.81-4.91 with row tiles outer; 256 x 4096 x 4096 linear median 33.1 against 34.3). The order
// of the tiles changes no element's chain.
void fma_block(const float* a, int64_t lda, int64_t rows, const float* panels, int64_t npanels,
               int64_t panel_ld, int64_t kc, float* acc, int64_t ldacc, bool first) {
  for (int64_t p = 0; p < npanels; p += kFmaPanels512) {
    const int64_t np = npanels - p < kFmaPanels512 ? npanels - p : kFmaPanels512;
    for (int64_t r0 = 0; r0 < rows; r0 += kFmaRows512) {
      const int64_t nr = rows - r0 < kFmaRows512 ? rows - r0 : kFmaRows512;
      select_tile<kFmaRows512, kFmaPanels512>(nr, np)(
          a + r0 * lda, lda, panels + p * panel_ld, panel_ld, kc, acc + r0 * ldacc + p * kFmaPanel,
          ldacc, first);
    }
  }
}

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
void fma_block(const float*, int64_t, int64_t, const float*, int64_t, int64_t, int64_t, float*,
               int64_t, bool) {}
void gemm_block(const float*, int64_t, int64_t, const float*, int64_t, int64_t, int64_t, int64_t,
                float*, int64_t, float*) {}

#endif

}  // namespace gemmkit::cpu::avx512
