// Body of the 8-lane dot-product block kernel (see GemmBlockFn in cpu_internal.h). Included once
// per instruction set by kernels_*.cpp, inside a namespace of its own, after the including file
// defined GK_TILE_ROWS / GK_TILE_COLS (the register tile) and, for an ISA variant, switched the
// target. Uses no standard library so that it can sit inside a `#pragma GCC target` region.
//
// Every variant computes exactly the same float operations in the same order: per output element
// 8 lane accumulators starting at +0.0f; for i = 0, 8, 16, ...: lane t += a[i + t] * b[i + t]
// (a rounded multiply, then a rounded add: CPU sources are compiled with -ffp-contract=off and no
// variant enables FMA); then ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)).

#if defined(__GNUC__) || defined(__clang__)

// The 8-float vectors only travel between static inline helpers of this file (no ABI boundary).
#if defined(__clang__)
#pragma clang diagnostic ignored "-Wpsabi"
#else
#pragma GCC diagnostic ignored "-Wpsabi"
#endif

typedef float gk_v8 __attribute__((vector_size(32)));

static inline gk_v8 gk_load8(const float* p) {
  gk_v8 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}

static inline float gk_lane_sum(gk_v8 v) {
  return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
}

// One register tile over k in [k0, k1). The 8 lane accumulators of element (r, c) live in
// lanes[(r * lanes_ld + c) * 8 + t] between k blocks: they start at +0.0f when `first`, and when
// `last` they are combined into out[r * ldo + c] instead of being stored back. Splitting k into
// blocks therefore does not change any operation or its order.
template <int R, int C>
static void gk_tile(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t k0,
                    int64_t k1, float* lanes, int64_t lanes_ld, bool first, bool last, float* out,
                    int64_t ldo) {
  gk_v8 acc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c)
      acc[r][c] = first ? gk_v8{0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f}
                        : gk_load8(lanes + (r * lanes_ld + c) * 8);
  for (int64_t k = k0; k < k1; k += 8) {
    gk_v8 bv[C];
    for (int c = 0; c < C; ++c) bv[c] = gk_load8(b + c * ldb + k);
    for (int r = 0; r < R; ++r) {
      const gk_v8 av = gk_load8(a + r * lda + k);
      for (int c = 0; c < C; ++c) {
        const gk_v8 prod = av * bv[c];
        acc[r][c] = acc[r][c] + prod;
      }
    }
  }
  if (last) {
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) out[r * ldo + c] = gk_lane_sum(acc[r][c]);
  } else {
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) __builtin_memcpy(lanes + (r * lanes_ld + c) * 8, &acc[r][c], 32);
  }
}

#else  // portable scalar form of the same arithmetic

template <int R, int C>
static void gk_tile(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t k0,
                    int64_t k1, float* lanes, int64_t lanes_ld, bool first, bool last, float* out,
                    int64_t ldo) {
  float acc[R][C][8];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c)
      for (int t = 0; t < 8; ++t) acc[r][c][t] = first ? 0.0f : lanes[(r * lanes_ld + c) * 8 + t];
  for (int64_t k = k0; k < k1; k += 8)
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c)
        for (int t = 0; t < 8; ++t) {
          const float prod = a[r * lda + k + t] * b[c * ldb + k + t];
          acc[r][c][t] = acc[r][c][t] + prod;
        }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      float* l = acc[r][c];
      if (last)
        out[r * ldo + c] = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
      else
        for (int t = 0; t < 8; ++t) lanes[(r * lanes_ld + c) * 8 + t] = l[t];
    }
}

#endif

// Runtime (rows, cols) <= (GK_TILE_ROWS, GK_TILE_COLS) -> the matching instantiation.
struct GkTileArgs {
  const float* a;
  int64_t lda;
  const float* b;
  int64_t ldb, k0, k1;
  float* lanes;
  int64_t lanes_ld;
  bool first, last;
  float* out;
  int64_t ldo;
};

template <int R, int C>
static void gk_tile_cols(int cols, const GkTileArgs& t) {
  if constexpr (C >= 1) {
    if (cols == C)
      return gk_tile<R, C>(t.a, t.lda, t.b, t.ldb, t.k0, t.k1, t.lanes, t.lanes_ld, t.first, t.last,
                           t.out, t.ldo);
    return gk_tile_cols<R, C - 1>(cols, t);
  }
}

template <int R>
static void gk_tile_any(int rows, int cols, const GkTileArgs& t) {
  if constexpr (R >= 1) {
    if (rows == R) return gk_tile_cols<R, GK_TILE_COLS>(cols, t);
    return gk_tile_any<R - 1>(rows, cols, t);
  }
}

// k in blocks of kblock (see GemmBlockFn): the tile's operand rows stay in L1 and the block's
// panels in L2, while every element's lanes wait in `lanes` between blocks.
void gemm_block(const float* a, int64_t lda, int64_t rows, const float* b, int64_t ldb,
                int64_t cols, int64_t kpad, int64_t kblock, float* out, int64_t ldo, float* lanes) {
  if (kblock >= kpad || lanes == nullptr) kblock = kpad;
  int64_t k0 = 0;
  do {
    const int64_t k1 = kpad - k0 <= kblock ? kpad : k0 + kblock;
    for (int64_t c0 = 0; c0 < cols; c0 += GK_TILE_COLS) {
      const int64_t nc = cols - c0 < GK_TILE_COLS ? cols - c0 : GK_TILE_COLS;
      for (int64_t r0 = 0; r0 < rows; r0 += GK_TILE_ROWS) {
        const int64_t nr = rows - r0 < GK_TILE_ROWS ? rows - r0 : GK_TILE_ROWS;
        const GkTileArgs t{a + r0 * lda,
                           lda,
                           b + c0 * ldb,
                           ldb,
                           k0,
                           k1,
                           lanes ? lanes + (r0 * cols + c0) * 8 : nullptr,
                           cols,
                           k0 == 0,
                           k1 == kpad,
                           out + r0 * ldo + c0,
                           ldo};
        if (nr == GK_TILE_ROWS && nc == GK_TILE_COLS)
          gk_tile<GK_TILE_ROWS, GK_TILE_COLS>(t.a, t.lda, t.b, t.ldb, t.k0, t.k1, t.lanes,
                                              t.lanes_ld, t.first, t.last, t.out, t.ldo);
        else
          gk_tile_any<GK_TILE_ROWS>(static_cast<int>(nr), static_cast<int>(nc), t);
      }
    }
    k0 = k1;
  } while (k0 < kpad);
}
