// CPU linear: out[n, m] = x[n, k] . w[m, k]^T (+ bias[m]).
//
// x and w are converted once to contiguous fp32 rows zero-padded to kpad = round_up(k, 8) (for a
// single block of x rows, each task packs just the w rows it uses instead of all of w; an operand
// whose copy would exceed kMaxStagedFloats, a view of overlapping rows, is packed per task), then
// blocks of (x rows) x (w rows) go through the 8-lane dot kernel on the thread pool. Each output
// element is computed by exactly one task with the order documented in docs/numerics.md, so the
// result does not depend on the thread count or the blocking. That is the `reference` kernel
// (cpu.linear.packed), and `auto` on the generic ISA.
//
// `auto` on the avx2 and avx512 ISAs (cpu.linear.fma): x packed once as above; tasks own blocks of
// w rows (output columns; never a split of k), pack them in k blocks of kFmaKc into 16-column
// panels (bf16 / f16 widened exactly), and run the FMA tile (6 x 16 on YMM, 8 x 48 on ZMM, the
// same bits) over every x row. Order: one fp32 FMA chain per element over k ascending, then
// + bias (docs/numerics.md).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cpu/cpu_internal.h"
#include "cpu/pack.h"

namespace gemmkit::cpu {

namespace {

// One operand of linear (x or w) as fp32 rows of kpad floats: packed whole, once, when `whole` is
// set up by pack_whole, else the rows a task needs packed into its thread scratch (`slot`).
class PackedRows {
 public:
  PackedRows(const Tensor& t, int64_t k, int64_t kpad, int scratch_slot)
      : read_(t.data, t.dtype),
        s0_(t.strides[0]),
        s1_(t.strides[1]),
        k_(k),
        kpad_(kpad),
        slot_(scratch_slot) {}

  // Packs all `rows` rows once, `block` rows per task.
  void pack_whole(const char* name, int64_t rows, int64_t block, bool parallel) {
    whole_ = staging_buffer("linear", name, rows, kpad_);
    packed_ = true;
    parallel_for((rows + block - 1) / block,
                 [&](int64_t b) {
                   const int64_t r0 = b * block, nr = std::min(block, rows - r0);
                   pack_matrix_rows(read_, s0_, s1_, r0, nr, k_, whole_.data() + r0 * kpad_, kpad_);
                 },
                 parallel);
  }

  // Rows [r0, r0 + nr), from the whole copy or packed now into this thread's scratch.
  const float* rows(int64_t r0, int64_t nr) const {
    if (packed_) return whole_.data() + r0 * kpad_;
    float* scratch = thread_scratch(slot_, nr * kpad_);
    pack_matrix_rows(read_, s0_, s1_, r0, nr, k_, scratch, kpad_);
    return scratch;
  }

 private:
  ElementReader read_;
  int64_t s0_, s1_, k_, kpad_;
  int slot_;
  bool packed_ = false;
  std::vector<float> whole_;
};

// k block of the FMA path: a 6-row x tile (6 KiB) stays in L1, a task's panels (kFmaCols x kFmaKc
// floats, 128 KiB) in L2. x rows go through a task kFmaRowChunk at a time (its accumulators).
constexpr int64_t kFmaKc = 256;
constexpr int64_t kFmaCols = 128;
constexpr int64_t kFmaRowChunk = 1024;
// Batches of at most this many rows take fma_narrow (w streamed, not packed): the same bits.
constexpr int64_t kFmaNarrowRows = 8;
// k block of the narrow kernel for operands it widens: 8 rows x 512 floats stay in L1.
constexpr int64_t kNarrowKb = 512;

void linear_fma(const detail::LinearProblem& problem, const std::vector<float>& bias,
                const PackedRows& xr, int64_t kpad, bool parallel, int threads,
                FmaBlockFn fma_block) {
  const int64_t n = problem.n, m = problem.m, k = problem.k;
  const Tensor& w = problem.w;
  const Tensor& out = problem.out;
  const ElementWriter write_out(out.data, out.dtype);
  const ElementReader read_w(w.data, w.dtype);
  const int64_t ws0 = w.strides[0], ws1 = w.strides[1];
  const int64_t os0 = out.strides[0], os1 = out.strides[1];

  // Column blocks: multiples of the panel width, enough of them to feed every thread.
  int64_t cb = kFmaCols;
  const int64_t want_blocks = 4 * static_cast<int64_t>(threads);
  if ((m + cb - 1) / cb < want_blocks)
    cb = std::max<int64_t>(
        kFmaPanel, ((m + want_blocks - 1) / want_blocks + kFmaPanel - 1) / kFmaPanel * kFmaPanel);
  const int64_t col_blocks = (m + cb - 1) / cb;
  const float* x = xr.rows(0, n);
  // Rows of contiguous f32 / bf16 values: vector packing; else element by element.
  const bool direct = ws1 == 1 && (w.dtype == DType::f32 || w.dtype == DType::bf16);

  if (n <= kFmaNarrowRows) {
    // Few rows: x transposed to k x 8 once, w rows widened 8 at a time and streamed once.
    std::vector<float> xt(static_cast<std::size_t>(k * kFmaNarrowRows), 0.0f);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t i = 0; i < k; ++i) xt[static_cast<std::size_t>(i * 8 + r)] = x[r * kpad + i];
    parallel_for(
        col_blocks,
        [&](int64_t task) {
          const int64_t c0 = task * cb, nc = std::min(cb, m - c0);
          float* wrows = thread_scratch(0, kFmaNarrowRows * kNarrowKb);
          float* sums = thread_scratch(1, kFmaNarrowRows * 8);
          for (int64_t j0 = 0; j0 < nc; j0 += kFmaNarrowRows) {
            const int64_t nj = std::min(kFmaNarrowRows, nc - j0);
            if (ws1 == 1 && w.dtype == DType::f32) {  // read in place
              avx2::fma_narrow(xt.data(), k, static_cast<const float*>(w.data) + (c0 + j0) * ws0,
                               ws0, nj, sums, true);
            } else {
              // Widened kNarrowKb values of the 8 rows at a time (in L1), the chain continued.
              for (int64_t k0 = 0; k0 < k; k0 += kNarrowKb) {
                const int64_t kb = std::min(kNarrowKb, k - k0);
                for (int64_t j = 0; j < nj; ++j) {
                  if (ws1 == 1 && w.dtype == DType::bf16)
                    avx2::widen_bf16(
                        static_cast<const uint16_t*>(w.data) + (c0 + j0 + j) * ws0 + k0, kb,
                        wrows + j * kNarrowKb);
                  else
                    read_w.row((c0 + j0 + j) * ws0 + k0 * ws1, ws1, kb, wrows + j * kNarrowKb);
                }
                avx2::fma_narrow(xt.data() + k0 * 8, kb, wrows, kNarrowKb, nj, sums, k0 == 0);
              }
            }
            for (int64_t j = 0; j < nj; ++j) {
              const float b = bias[static_cast<std::size_t>(c0 + j0 + j)];
              for (int64_t r = 0; r < n; ++r)
                write_out(r * os0 + (c0 + j0 + j) * os1, sums[j * 8 + r] + b);
            }
          }
        },
        parallel);
    return;
  }

  parallel_for(
      col_blocks,
      [&](int64_t task) {
        const int64_t c0 = task * cb, nc = std::min(cb, m - c0);
        const int64_t npanels = (nc + kFmaPanel - 1) / kFmaPanel, ncp = npanels * kFmaPanel;
        const int64_t kc_max = std::min(k, kFmaKc);
        float* panels = thread_scratch(0, ncp * kc_max);
        float* row = thread_scratch(3, kc_max);
        const int64_t chunk = std::min(n, kFmaRowChunk);
        float* acc = thread_scratch(1, chunk * ncp);
        for (int64_t r0 = 0; r0 < n; r0 += chunk) {
          const int64_t nr = std::min(chunk, n - r0);
          for (int64_t k0 = 0; k0 < k; k0 += kFmaKc) {
            const int64_t kc = std::min(kFmaKc, k - k0);
            if (direct) {
              const int64_t esize = w.dtype == DType::bf16 ? 2 : 4;
              for (int64_t p = 0; p < npanels; ++p)
                avx2::fma_pack_panel(
                    static_cast<const char*>(w.data) + ((c0 + p * kFmaPanel) * ws0 + k0) * esize,
                    w.dtype == DType::bf16, ws0, std::min(kFmaPanel, nc - p * kFmaPanel), kc,
                    panels + p * kc * kFmaPanel);
            }
            for (int64_t c = 0; c < (direct ? 0 : ncp); ++c) {
              float* dst = panels + (c / kFmaPanel) * kc * kFmaPanel + c % kFmaPanel;
              if (c < nc) {
                read_w.row((c0 + c) * ws0 + k0 * ws1, ws1, kc, row);
                for (int64_t i = 0; i < kc; ++i) dst[i * kFmaPanel] = row[i];
              } else {
                for (int64_t i = 0; i < kc; ++i) dst[i * kFmaPanel] = 0.0f;
              }
            }
            fma_block(x + (r0 * kpad) + k0, kpad, nr, panels, npanels, kc * kFmaPanel, kc, acc, ncp,
                      k0 == 0);
          }
          for (int64_t r = 0; r < nr; ++r) {
            const int64_t row_off = (r0 + r) * os0;
            for (int64_t c = 0; c < nc; ++c) {
              const float v = acc[r * ncp + c] + bias[static_cast<std::size_t>(c0 + c)];
              write_out(row_off + (c0 + c) * os1, v);
            }
          }
        }
      },
      parallel);
}

}  // namespace

void linear(const detail::LinearProblem& problem, bool reference, CallInfo* info) {
  const int64_t n = problem.n, m = problem.m, k = problem.k;
  const int64_t kpad = round_up8(k);
  const DotKernels& kernels = dot_kernels();
  const Isa isa = active_isa();
  const int64_t x_floats = staging_count(n, kpad);
  const bool x_staged = x_floats >= 0 && x_floats <= kMaxStagedFloats;
  // The FMA path reads x from its one packed copy.
  const FmaKernels* fma_path = fma_kernels(isa);
  const bool fma = !reference && fma_path != nullptr && x_staged && k > 0;

  const double macs = static_cast<double>(n) * static_cast<double>(m) * static_cast<double>(kpad);
  const bool parallel = macs >= 65536.0;
  const int threads = parallel ? num_threads() : 1;

  if (info != nullptr) {
    const std::string tail = std::to_string(threads) + " thread" + (threads == 1 ? ")" : "s)");
    info->backend = "cpu";
    if (fma) {
      info->kernel = "cpu.linear.fma";
      info->reason = std::string("auto on ISA ") + isa_name(isa) + " (packed 16-column w panels, " +
                     fma_path->tile + " fp32 FMA tile, " + tail;
    } else {
      info->kernel = "cpu.linear.packed";
      info->reason = std::string(reference ? "reference kernel" : "auto") + " on ISA " +
                     isa_name(isa) + " (fp32-packed operands, 8-lane fp32 dot, " + kernels.name +
                     " instructions, " + tail;
    }
  }
  if (n <= 0 || m <= 0) return;

  const Tensor& x = problem.x;
  const Tensor& w = problem.w;
  const Tensor& out = problem.out;
  const ElementWriter write_out(out.data, out.dtype);

  std::vector<float> bias(static_cast<std::size_t>(m), 0.0f);
  if (problem.has_bias)
    ElementReader(problem.bias.data, problem.bias.dtype)
        .row(0, problem.bias.strides[0], m, bias.data());

  // Blocking: row blocks of x, column blocks of w; enough tasks to feed every thread.
  const int64_t rb = std::min<int64_t>(n, 48);
  const int64_t row_blocks = (n + rb - 1) / rb;
  int64_t cb = 64;
  if (row_blocks < 4 * threads) {
    const int64_t want_col_blocks = (4 * threads + row_blocks - 1) / row_blocks;
    cb = std::clamp<int64_t>((m + want_col_blocks - 1) / want_col_blocks, 8, 64);
    cb = (cb + 3) / 4 * 4;
  }
  cb = std::min(cb, m);
  const int64_t col_blocks = (m + cb - 1) / cb;

  // x packed once, [n][kpad], unless that copy would exceed kMaxStagedFloats (x is a view whose
  // rows overlap: its logical size is not bounded by its memory); then each task packs its rows.
  PackedRows xr(x, k, kpad, 2), wr(w, k, kpad, 0);
  if (x_staged) xr.pack_whole("x", n, rb, parallel && x_floats >= 65536);
  if (fma) return linear_fma(problem, bias, xr, kpad, parallel, threads, fma_path->block);
  // w packed once when several row blocks reuse it (and the copy is bounded, as for x); else
  // per task.
  const int64_t w_floats = staging_count(m, kpad);
  if (row_blocks > 1 && w_floats >= 0 && w_floats <= kMaxStagedFloats) {
    wr.pack_whole("w", m, cb, parallel);
  }

  const int64_t os0 = out.strides[0], os1 = out.strides[1];
  parallel_for(
      row_blocks * col_blocks,
      [&](int64_t task) {
        const int64_t bc = task / row_blocks, br = task % row_blocks;
        const int64_t r0 = br * rb, nr = std::min(rb, n - r0);
        const int64_t c0 = bc * cb, nc = std::min(cb, m - c0);
        const float* wblock = wr.rows(c0, nc);
        const float* xblock = xr.rows(r0, nr);
        float* sums = thread_scratch(1, nr * nc);
        // One pass over k: measured faster here than k blocking for linear's panels.
        kernels.gemm_block(xblock, kpad, nr, wblock, kpad, nc, kpad, kpad, sums, nc, nullptr);
        for (int64_t r = 0; r < nr; ++r) {
          const int64_t row_off = (r0 + r) * os0;
          for (int64_t c = 0; c < nc; ++c) {
            const float v = sums[r * nc + c] + bias[static_cast<std::size_t>(c0 + c)];
            write_out(row_off + (c0 + c) * os1, v);
          }
        }
      },
      parallel);
}

}  // namespace gemmkit::cpu
