// AVX2 + FMA register-blocked kernel of the CPU backend's fast linear path (GEMMKIT_CPU_ISA avx2,
// the `auto` kernel). Its order: every output element is one fp32 accumulator that starts at
// +0.0f and takes acc = fma(a_i, b_i, acc) (one rounding) for i = 0 .. k-1 ascending; nothing
// else. Blocking k, the tile a row falls in and the thread that runs it change no operation.
#include <cstdint>

#include "cpu/cpu_internal.h"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#define GK_HAVE_FMA_VARIANT 1
#include <immintrin.h>
#endif

namespace gemmkit::cpu::avx2 {

#if defined(GK_HAVE_FMA_VARIANT)

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,fma"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#endif

namespace {

// R rows (1..kFmaRows) x one panel of 16 columns over kc values of k. acc[r * ldacc + j]
// (j < 16) holds the running sums between calls: +0.0f when `first`.
// Named accumulators (not arrays) so that they stay in registers; rows >= R are compiled out.
template <int R>
void fma_tile(const float* a, int64_t lda, const float* panel, int64_t kc, float* acc,
              int64_t ldacc, bool first) {
  __m256 c00, c01, c10, c11, c20, c21, c30, c31, c40, c41, c50, c51;
  c00 = c01 = c10 = c11 = c20 = c21 = c30 = c31 = c40 = c41 = c50 = c51 = _mm256_setzero_ps();
#define GK_LOAD(r)                                  \
  if (R > r) {                                      \
    c##r##0 = _mm256_loadu_ps(acc + r * ldacc);     \
    c##r##1 = _mm256_loadu_ps(acc + r * ldacc + 8); \
  }
  if (!first) {
    GK_LOAD(0) GK_LOAD(1) GK_LOAD(2) GK_LOAD(3) GK_LOAD(4) GK_LOAD(5)
  }
#undef GK_LOAD
  const float* a0 = a;
  const float* a1 = a + (R > 1 ? 1 : 0) * lda;
  const float* a2 = a + (R > 2 ? 2 : 0) * lda;
  const float* a3 = a + (R > 3 ? 3 : 0) * lda;
  const float* a4 = a + (R > 4 ? 4 : 0) * lda;
  const float* a5 = a + (R > 5 ? 5 : 0) * lda;
  for (int64_t i = 0; i < kc; ++i) {
    const __m256 b0 = _mm256_loadu_ps(panel + i * kFmaPanel);
    const __m256 b1 = _mm256_loadu_ps(panel + i * kFmaPanel + 8);
#define GK_STEP(r)                                   \
  if (R > r) {                                       \
    const __m256 av = _mm256_broadcast_ss(a##r + i); \
    c##r##0 = _mm256_fmadd_ps(av, b0, c##r##0);      \
    c##r##1 = _mm256_fmadd_ps(av, b1, c##r##1);      \
  }
    GK_STEP(0) GK_STEP(1) GK_STEP(2) GK_STEP(3) GK_STEP(4) GK_STEP(5)
#undef GK_STEP
  }
#define GK_STORE(r)                                 \
  if (R > r) {                                      \
    _mm256_storeu_ps(acc + r * ldacc, c##r##0);     \
    _mm256_storeu_ps(acc + r * ldacc + 8, c##r##1); \
  }
  GK_STORE(0) GK_STORE(1) GK_STORE(2) GK_STORE(3) GK_STORE(4) GK_STORE(5)
#undef GK_STORE
}

// 8 x 8 transpose: rows r[0..7] (8 values of k each) -> out[i] = (r[0][i], ..., r[7][i]).
inline void transpose8(__m256 r[8]) {
  const __m256 t0 = _mm256_unpacklo_ps(r[0], r[1]), t1 = _mm256_unpackhi_ps(r[0], r[1]);
  const __m256 t2 = _mm256_unpacklo_ps(r[2], r[3]), t3 = _mm256_unpackhi_ps(r[2], r[3]);
  const __m256 t4 = _mm256_unpacklo_ps(r[4], r[5]), t5 = _mm256_unpackhi_ps(r[4], r[5]);
  const __m256 t6 = _mm256_unpacklo_ps(r[6], r[7]), t7 = _mm256_unpackhi_ps(r[6], r[7]);
  const __m256 u0 = _mm256_shuffle_ps(t0, t2, 0x44), u1 = _mm256_shuffle_ps(t0, t2, 0xEE);
  const __m256 u2 = _mm256_shuffle_ps(t1, t3, 0x44), u3 = _mm256_shuffle_ps(t1, t3, 0xEE);
  const __m256 u4 = _mm256_shuffle_ps(t4, t6, 0x44), u5 = _mm256_shuffle_ps(t4, t6, 0xEE);
  const __m256 u6 = _mm256_shuffle_ps(t5, t7, 0x44), u7 = _mm256_shuffle_ps(t5, t7, 0xEE);
  r[0] = _mm256_permute2f128_ps(u0, u4, 0x20);
  r[1] = _mm256_permute2f128_ps(u1, u5, 0x20);
  r[2] = _mm256_permute2f128_ps(u2, u6, 0x20);
  r[3] = _mm256_permute2f128_ps(u3, u7, 0x20);
  r[4] = _mm256_permute2f128_ps(u0, u4, 0x31);
  r[5] = _mm256_permute2f128_ps(u1, u5, 0x31);
  r[6] = _mm256_permute2f128_ps(u2, u6, 0x31);
  r[7] = _mm256_permute2f128_ps(u3, u7, 0x31);
}

inline __m256 load8(const void* p, bool bf16) {
  if (!bf16) return _mm256_loadu_ps(static_cast<const float*>(p));
  const __m128i h = _mm_loadu_si128(static_cast<const __m128i*>(p));
  return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

inline float load1(const void* p, int64_t i, bool bf16) {
  if (!bf16) return static_cast<const float*>(p)[i];
  const uint32_t bits = static_cast<uint32_t>(static_cast<const uint16_t*>(p)[i]) << 16;
  float v;
  __builtin_memcpy(&v, &bits, 4);
  return v;
}

// R w rows (1..8) against the 8 x columns of xt: acc j holds rows j's 8 sums (one per x row).
template <int R>
void fma_narrow_tile(const float* xt, int64_t k, const float* w, int64_t ldw, float* out,
                     bool first) {
  __m256 c0, c1, c2, c3, c4, c5, c6, c7;
  c0 = c1 = c2 = c3 = c4 = c5 = c6 = c7 = _mm256_setzero_ps();
#define GK_LOAD(j) \
  if (R > j) c##j = _mm256_loadu_ps(out + j * 8);
  if (!first) {
    GK_LOAD(0) GK_LOAD(1) GK_LOAD(2) GK_LOAD(3) GK_LOAD(4) GK_LOAD(5) GK_LOAD(6) GK_LOAD(7)
  }
#undef GK_LOAD
  const float* w0 = w;
  const float* w1 = w + (R > 1 ? 1 : 0) * ldw;
  const float* w2 = w + (R > 2 ? 2 : 0) * ldw;
  const float* w3 = w + (R > 3 ? 3 : 0) * ldw;
  const float* w4 = w + (R > 4 ? 4 : 0) * ldw;
  const float* w5 = w + (R > 5 ? 5 : 0) * ldw;
  const float* w6 = w + (R > 6 ? 6 : 0) * ldw;
  const float* w7 = w + (R > 7 ? 7 : 0) * ldw;
  for (int64_t i = 0; i < k; ++i) {
    const __m256 xv = _mm256_loadu_ps(xt + i * 8);
#define GK_STEP(j) \
  if (R > j) c##j = _mm256_fmadd_ps(xv, _mm256_broadcast_ss(w##j + i), c##j);
    GK_STEP(0) GK_STEP(1) GK_STEP(2) GK_STEP(3) GK_STEP(4) GK_STEP(5) GK_STEP(6) GK_STEP(7)
#undef GK_STEP
  }
#define GK_STORE(j) \
  if (R > j) _mm256_storeu_ps(out + j * 8, c##j);
  GK_STORE(0) GK_STORE(1) GK_STORE(2) GK_STORE(3) GK_STORE(4) GK_STORE(5) GK_STORE(6) GK_STORE(7)
#undef GK_STORE
}

}  // namespace

void fma_narrow(const float* xt, int64_t k, const float* w, int64_t ldw, int64_t rows, float* out,
                bool first) {
  switch (rows) {
    case 8:
      return fma_narrow_tile<8>(xt, k, w, ldw, out, first);
    case 7:
      return fma_narrow_tile<7>(xt, k, w, ldw, out, first);
    case 6:
      return fma_narrow_tile<6>(xt, k, w, ldw, out, first);
    case 5:
      return fma_narrow_tile<5>(xt, k, w, ldw, out, first);
    case 4:
      return fma_narrow_tile<4>(xt, k, w, ldw, out, first);
    case 3:
      return fma_narrow_tile<3>(xt, k, w, ldw, out, first);
    case 2:
      return fma_narrow_tile<2>(xt, k, w, ldw, out, first);
    default:
      return fma_narrow_tile<1>(xt, k, w, ldw, out, first);
  }
}

void widen_bf16(const uint16_t* src, int64_t len, float* dst) {
  int64_t i = 0;
  for (; i + 8 <= len; i += 8) _mm256_storeu_ps(dst + i, load8(src + i, true));
  for (; i < len; ++i) dst[i] = load1(src, i, true);
}

void fma_pack_panel(const void* src, bool bf16, int64_t ld, int64_t rows, int64_t kc,
                    float* panel) {
  const int64_t esize = bf16 ? 2 : 4;
  const char* base = static_cast<const char*>(src);
  for (int64_t g = 0; g < kFmaPanel; g += 8) {
    const int64_t nr = rows - g < 0 ? 0 : (rows - g < 8 ? rows - g : 8);
    const char* rp[8];
    for (int64_t r = 0; r < 8; ++r) rp[r] = r < nr ? base + (g + r) * ld * esize : nullptr;
    int64_t i = 0;
    for (; i + 8 <= kc; i += 8) {
      __m256 v[8];
      for (int r = 0; r < 8; ++r)
        v[r] = rp[r] ? load8(rp[r] + i * esize, bf16) : _mm256_setzero_ps();
      transpose8(v);
      for (int t = 0; t < 8; ++t) _mm256_storeu_ps(panel + (i + t) * kFmaPanel + g, v[t]);
    }
    for (; i < kc; ++i)
      for (int64_t r = 0; r < 8; ++r)
        panel[i * kFmaPanel + g + r] = rp[r] ? load1(rp[r], i, bf16) : 0.0f;
  }
}

void fma_block(const float* a, int64_t lda, int64_t rows, const float* panels, int64_t npanels,
               int64_t panel_ld, int64_t kc, float* acc, int64_t ldacc, bool first) {
  for (int64_t r0 = 0; r0 < rows; r0 += kFmaRows) {
    const int64_t nr = rows - r0 < kFmaRows ? rows - r0 : kFmaRows;
    const float* ar = a + r0 * lda;
    float* accr = acc + r0 * ldacc;
    for (int64_t p = 0; p < npanels; ++p) {
      const float* panel = panels + p * panel_ld;
      float* accp = accr + p * kFmaPanel;
      switch (nr) {
        case 6:
          fma_tile<6>(ar, lda, panel, kc, accp, ldacc, first);
          break;
        case 5:
          fma_tile<5>(ar, lda, panel, kc, accp, ldacc, first);
          break;
        case 4:
          fma_tile<4>(ar, lda, panel, kc, accp, ldacc, first);
          break;
        case 3:
          fma_tile<3>(ar, lda, panel, kc, accp, ldacc, first);
          break;
        case 2:
          fma_tile<2>(ar, lda, panel, kc, accp, ldacc, first);
          break;
        default:
          fma_tile<1>(ar, lda, panel, kc, accp, ldacc, first);
          break;
      }
    }
  }
}

#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif

#else

void fma_block(const float*, int64_t, int64_t, const float*, int64_t, int64_t, int64_t, float*,
               int64_t, bool) {}
void fma_pack_panel(const void*, bool, int64_t, int64_t, int64_t, float*) {}
void fma_narrow(const float*, int64_t, const float*, int64_t, int64_t, float*, bool) {}
void widen_bf16(const uint16_t*, int64_t, float*) {}

#endif

}  // namespace gemmkit::cpu::avx2
