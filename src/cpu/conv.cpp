// CPU convolution (conv_general semantics, 1-3 spatial dims, groups, dilations, flip, padding of
// either sign) as a patch GEMM:
//   - the weight is packed once to fp32 [o][tap][c/groups] (tap row-major over the kernel window,
//     holding the weight element the tap multiplies: index K-1-t when flipped), each row padded
//     with zeros to kpad = round_up(taps * c/groups, 8);
//   - x is converted once to contiguous fp32 (n, in..., c) unless it is already f32 with unit
//     channel stride, in which case it is read in place through its strides (and unless the copy
//     would exceed kMaxStagedFloats, a view of overlapping rows: then the gather converts each
//     tap's channels from x);
//   - a task takes a block of consecutive output positions, one group and a chunk of that group's
//     output channels: it gathers the block's patches row by row into fp32 scratch (zeros for
//     taps in padding or between dilated input elements), then dots every patch with every
//     weight row of the chunk through the 8-lane kernel, adds the bias and stores.
// Each output element is computed by one task in the order documented in docs/numerics.md, so
// results do not depend on the thread count or the blocking. `auto` on the avx2 and avx512 ISAs:
// the same patches through the FMA tile of linear instead (the weight also packed once into
// 16-channel panels per group; the FMA chain order over the same reduction vector).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cpu/cpu_internal.h"
#include "cpu/pack.h"

namespace gemmkit::cpu {
namespace {

// k block of the FMA path (as linear's).
constexpr int64_t kFmaConvKc = 256;

constexpr int kDims = 3;  // problems are normalized to 3 spatial dims (trailing dims of size 1)

// Zero n floats; short runs (the common case for few channels per group) without a call.
inline void zero_floats(float* p, int64_t n) {
  if (n <= 16) {
    for (int64_t i = 0; i < n; ++i) p[i] = 0.0f;
  } else {
    std::memset(p, 0, static_cast<std::size_t>(n) * sizeof(float));
  }
}

struct Geometry {
  int64_t in[kDims], k[kDims], out[kDims], stride[kDims], pad_lo[kDims], kdil[kDims], idil[kDims];
};

}  // namespace

void conv(const detail::ConvProblem& problem, bool reference, CallInfo& info) {
  const int S = problem.spatial;
  Geometry geo;
  for (int d = 0; d < kDims; ++d) {
    const bool real = d < S;
    geo.in[d] = real ? problem.in_size[d] : 1;
    geo.k[d] = real ? problem.kernel_size[d] : 1;
    geo.out[d] = real ? problem.out_size[d] : 1;
    geo.stride[d] = real ? problem.stride[d] : 1;
    geo.pad_lo[d] = real ? problem.padding_lo[d] : 0;
    geo.kdil[d] = real ? problem.kernel_dilation[d] : 1;
    geo.idil[d] = real ? problem.input_dilation[d] : 1;
  }
  const int64_t batch = problem.batch;
  const int64_t c = problem.in_channels, o = problem.out_channels;
  const int64_t groups = problem.groups;
  const int64_t cpg = problem.in_channels_per_group, opg = problem.out_channels_per_group;
  const int64_t taps = geo.k[0] * geo.k[1] * geo.k[2];
  const int64_t klen = taps * cpg;
  const int64_t kpad = round_up8(klen);
  const int64_t positions = batch * geo.out[0] * geo.out[1] * geo.out[2];
  const DotKernels& kernels = dot_kernels();

  const double macs =
      static_cast<double>(positions) * static_cast<double>(o) * static_cast<double>(kpad);
  const bool parallel = macs >= 65536.0;
  const int threads = parallel ? num_threads() : 1;

  const Isa isa = active_isa();
  const FmaKernels* fma_path = fma_kernels(isa);
  const bool fma = !reference && fma_path != nullptr && klen > 0;
  const std::string tail = std::to_string(threads) + " thread" + (threads == 1 ? ")" : "s)");
  info.backend = "cpu";
  if (fma) {
    info.kernel = "cpu.conv.patch-gemm.fma";
    info.reason = std::string("auto on ISA ") + isa_name(isa) +
                  " (fp32 patches x 16-channel weight panels, " + fma_path->tile +
                  " fp32 FMA tile, " + tail;
  } else {
    info.kernel = "cpu.conv.patch-gemm";
    info.reason = std::string(reference ? "reference algo" : "auto") + " on ISA " + isa_name(isa) +
                  " (fp32 patches x packed weights, 8-lane fp32 dot, " + kernels.name +
                  " instructions, " + tail;
  }
  if (positions <= 0 || o <= 0) return;

  const Tensor& x = problem.x;
  const Tensor& wt = problem.weight;
  const Tensor& out = problem.out;

  // The FMA path reads a weight without flip whose rows (o) hold taps x channels contiguously
  // in bf16 or f32 straight into its panels; otherwise through the fp32 [o][tap][cpg] copy.
  const auto dense_rows = [&] {
    if (wt.strides[S + 1] != 1) return false;
    int64_t run = cpg;
    for (int d = S - 1; d >= 0; --d) {
      if (geo.k[d] > 1 && wt.strides[1 + d] != run) return false;
      run *= geo.k[d];
    }
    return true;
  };
  const bool panels_from_weight =
      fma && !problem.flip && (wt.dtype == DType::bf16 || wt.dtype == DType::f32) && dense_rows();

  // ---- Weight: [o][tap][cpg] fp32, tap row-major, flip applied, rows padded to kpad.
  const ReusedStaging wp_buffer(0, "conv", "weight", panels_from_weight ? 0 : o, kpad);
  float* const wp = wp_buffer.data();
  if (!panels_from_weight) {
    const ElementReader read_w(wt.data, wt.dtype);
    int64_t ws[kDims] = {0, 0, 0};
    for (int d = 0; d < S; ++d) ws[d] = wt.strides[1 + d];
    const int64_t ws_o = wt.strides[0], ws_c = wt.strides[S + 1];
    parallel_for(
        o,
        [&](int64_t oc) {
          float* row = wp + oc * kpad;
          int64_t tap = 0;
          for (int64_t t0 = 0; t0 < geo.k[0]; ++t0)
            for (int64_t t1 = 0; t1 < geo.k[1]; ++t1)
              for (int64_t t2 = 0; t2 < geo.k[2]; ++t2, ++tap) {
                const int64_t u0 = problem.flip ? geo.k[0] - 1 - t0 : t0;
                const int64_t u1 = problem.flip ? geo.k[1] - 1 - t1 : t1;
                const int64_t u2 = problem.flip ? geo.k[2] - 1 - t2 : t2;
                const int64_t off = oc * ws_o + u0 * ws[0] + u1 * ws[1] + u2 * ws[2];
                read_w.row(off, ws_c, cpg, row + tap * cpg);
              }
          std::fill(row + klen, row + kpad, 0.0f);
        },
        parallel && o * kpad >= 65536);
  }

  // ---- FMA path: each group's weight rows as 16-channel panels of klen x 16 floats (channels
  // past the group's opg are zeros), panel p of group g at (g * gpanels + p) * klen * 16.
  const int64_t gpanels = (opg + kFmaPanel - 1) / kFmaPanel;
  ReusedStaging wpan_buffer(1, "conv", "weight", fma ? groups * gpanels * kFmaPanel : 0, klen);
  float* const wpan = wpan_buffer.data();
  if (fma) {
    const bool bf16_weight = wt.dtype == DType::bf16;
    const int64_t esize = bf16_weight ? 2 : 4;
    parallel_for(
        groups * gpanels,
        [&](int64_t panel) {
          const int64_t g = panel / gpanels, p = panel % gpanels;
          const int64_t first = g * opg + p * kFmaPanel,
                        rows = std::min(kFmaPanel, opg - p * kFmaPanel);
          if (panels_from_weight) {
            avx2::fma_pack_panel(static_cast<const char*>(wt.data) + first * wt.strides[0] * esize,
                                 bf16_weight, wt.strides[0], rows, klen,
                                 wpan + panel * klen * kFmaPanel);
          } else {
            avx2::fma_pack_panel(wp + first * kpad, false, kpad, rows, klen,
                                 wpan + panel * klen * kFmaPanel);
          }
        },
        parallel && o * kpad >= 65536);
  }

  std::vector<float> bias(static_cast<std::size_t>(o), 0.0f);
  if (problem.has_bias)
    ElementReader(problem.bias.data, problem.bias.dtype)
        .row(0, problem.bias.strides[0], o, bias.data());

  // ---- Input: fp32 with unit channel stride, read in place when it is already, else converted
  // once into a contiguous copy — unless that copy would exceed kMaxStagedFloats (x is a view
  // whose rows overlap: its logical size is not bounded by its memory); then the gather converts
  // each tap's channels from x itself (same values, so the same bits).
  const float* xf = nullptr;
  int64_t xs_b = 0, xs[kDims] = {0, 0, 0}, xs_c = 1;
  std::optional<ReusedStaging> xbuf;
  const ElementReader read_x(x.data, x.dtype);
  const int64_t rows = batch * geo.in[0] * geo.in[1] * geo.in[2];  // <= x's element count
  const int64_t x_floats = staging_count(rows, c);
  const bool in_place = x.dtype == DType::f32 && x.strides[S + 1] == 1;
  const bool gather_from_x = !in_place && (x_floats < 0 || x_floats > kMaxStagedFloats);
  if (in_place || gather_from_x) {
    xf = in_place ? static_cast<const float*>(x.data) : nullptr;
    xs_b = x.strides[0];
    for (int d = 0; d < S; ++d) xs[d] = x.strides[1 + d];
    xs_c = x.strides[S + 1];
  } else {
    xbuf.emplace(2, "conv", "x", rows, c);
    xs[2] = c;
    xs[1] = xs[2] * geo.in[2];
    xs[0] = xs[1] * geo.in[1];
    xs_b = xs[0] * geo.in[0];
    int64_t src_s[kDims] = {0, 0, 0};
    for (int d = 0; d < S; ++d) src_s[d] = x.strides[1 + d];
    const int64_t src_b = x.strides[0], src_c = x.strides[S + 1];
    const int64_t rows_per_task = std::max<int64_t>(1, 16384 / std::max<int64_t>(c, 1));
    parallel_for((rows + rows_per_task - 1) / rows_per_task,
                 [&](int64_t task) {
                   const int64_t r_end = std::min(rows, (task + 1) * rows_per_task);
                   for (int64_t r = task * rows_per_task; r < r_end; ++r) {
                     int64_t rem = r;
                     const int64_t i2 = rem % geo.in[2];
                     rem /= geo.in[2];
                     const int64_t i1 = rem % geo.in[1];
                     rem /= geo.in[1];
                     const int64_t i0 = rem % geo.in[0];
                     const int64_t b = rem / geo.in[0];
                     const int64_t off = b * src_b + i0 * src_s[0] + i1 * src_s[1] + i2 * src_s[2];
                     read_x.row(off, src_c, c, xbuf->data() + r * c);
                   }
                 },
                 parallel && rows * c >= 65536);
    xf = xbuf->data();
  }

  // ---- Blocking: positions x group chunk x output-channel chunk. Groups with few channels
  // (depthwise and the like) are gathered several at a time: their channels are adjacent in x.
  // The FMA path takes up to 128 channels per task (panel-aligned) and more positions: each
  // weight panel block is reused by every 6-row tile of the task's patches.
  const int64_t oc_chunk = std::min<int64_t>(opg, fma ? 128 : 64);
  const int64_t oc_chunks = (opg + oc_chunk - 1) / oc_chunk;
  const int64_t gc = oc_chunks == 1 ? std::clamp<int64_t>(64 / cpg, 1, groups) : 1;
  const int64_t group_chunks = (groups + gc - 1) / gc;
  // Aim for ~1M multiply-adds per task, patch scratch <= ~256 KiB, and enough tasks for the pool.
  int64_t pb = std::clamp<int64_t>((1 << 20) / std::max<int64_t>(gc * kpad * oc_chunk, 1), 1, 256);
  pb = std::min(pb, std::max<int64_t>(1, (64 * 1024) / (gc * kpad)));
  if (fma) pb = std::clamp<int64_t>((128 * 1024) / (gc * kpad), 1, 120);
  while (pb > 4 && ((positions + pb - 1) / pb) * group_chunks * oc_chunks < 4 * threads) pb /= 2;
  pb = std::max<int64_t>(1, std::min(pb, positions));
  const int64_t pos_blocks = (positions + pb - 1) / pb;
  // k blocks of <= 1024 floats keep a tile's patch rows in L1 (measured ~15% faster for 3x3x128).
  const int64_t kblock = balanced_k_block(kpad, 1024);
  const int64_t tasks = pos_blocks * group_chunks * oc_chunks;

  const ElementWriter write_out(out.data, out.dtype);
  int64_t os[kDims] = {0, 0, 0};
  for (int d = 0; d < S; ++d) os[d] = out.strides[1 + d];
  const int64_t os_b = out.strides[0], os_c = out.strides[S + 1];
  // Largest valid dilated input coordinate per dim.
  int64_t qmax[kDims];
  for (int d = 0; d < kDims; ++d) qmax[d] = (geo.in[d] - 1) * geo.idil[d];

  parallel_for(
      tasks,
      [&](int64_t task) {
        // Task order: output-channel chunk fastest, then group chunk, then position block, so
        // that consecutive tasks share the gathered input region.
        const int64_t chunk = task % oc_chunks;
        const int64_t g0 = ((task / oc_chunks) % group_chunks) * gc;
        const int64_t ng = std::min(gc, groups - g0);
        const int64_t blk = task / (oc_chunks * group_chunks);
        const int64_t p0 = blk * pb, np = std::min(pb, positions - p0);
        const int64_t noc = std::min(oc_chunk, opg - chunk * oc_chunk);

        // The patch row of position r for group g0 + gi is at patches + r * lda + gi * kpad (the
        // groups of one position side by side: the gather writes one compact region per tap).
        const int64_t lda = ng * kpad;
        float* patches = thread_scratch(0, np * lda);
        const int64_t npanels = (noc + kFmaPanel - 1) / kFmaPanel;
        const int64_t ldsum = fma ? npanels * kFmaPanel : noc;
        float* sums = thread_scratch(1, np * ldsum);
        float* lanes = thread_scratch(2, gemm_block_lanes(np, noc, kpad, kblock));
        thread_local std::vector<int64_t> out_off_buf;
        if (static_cast<int64_t>(out_off_buf.size()) < np)
          out_off_buf.resize(static_cast<std::size_t>(np));
        int64_t* out_off = out_off_buf.data();

        // Coordinates of p0, then incremented position by position.
        int64_t coord[kDims], b;
        {
          int64_t rem = p0;
          coord[2] = rem % geo.out[2];
          rem /= geo.out[2];
          coord[1] = rem % geo.out[1];
          rem /= geo.out[1];
          coord[0] = rem % geo.out[0];
          b = rem / geo.out[0];
        }
        const int64_t xg = g0 * cpg * xs_c;  // element offset of the chunk's first channel
        const std::size_t cpg_bytes = static_cast<std::size_t>(cpg) * sizeof(float);
        for (int64_t r = 0; r < np; ++r) {
          out_off[r] = b * os_b + coord[0] * os[0] + coord[1] * os[1] + coord[2] * os[2];
          float* row = patches + r * lda;
          // Taps [tap, tap + count) of every group of the chunk read padding: zeros.
          const auto zero_taps = [&](int64_t tap, int64_t count) {
            for (int64_t gi = 0; gi < ng; ++gi)
              zero_floats(row + gi * kpad + tap * cpg, count * cpg);
          };
          // Tap `tap` of every group reads the ng * cpg channels at element offset `at` (from
          // xf, adjacent; or from x at its channel stride).
          const auto copy_tap = [&](int64_t tap, int64_t at) {
            if (gather_from_x) {
              for (int64_t gi = 0; gi < ng; ++gi)
                read_x.row(at + gi * cpg * xs_c, xs_c, cpg, row + gi * kpad + tap * cpg);
              return;
            }
            const float* src = xf + at;
            if (ng == 1) {
              std::memcpy(row + tap * cpg, src, cpg_bytes);
            } else if (cpg == 1) {
              for (int64_t gi = 0; gi < ng; ++gi) row[gi * kpad + tap] = src[gi];
            } else {
              for (int64_t gi = 0; gi < ng; ++gi)
                std::memcpy(row + gi * kpad + tap * cpg, src + gi * cpg, cpg_bytes);
            }
          };
          const int64_t xb = xg + b * xs_b;
          int64_t tap = 0;
          for (int64_t t0 = 0; t0 < geo.k[0]; ++t0) {
            const int64_t q0 = coord[0] * geo.stride[0] + t0 * geo.kdil[0] - geo.pad_lo[0];
            if (q0 < 0 || q0 > qmax[0] || q0 % geo.idil[0] != 0) {
              zero_taps(tap, geo.k[1] * geo.k[2]);
              tap += geo.k[1] * geo.k[2];
              continue;
            }
            const int64_t x0 = xb + (q0 / geo.idil[0]) * xs[0];
            for (int64_t t1 = 0; t1 < geo.k[1]; ++t1) {
              const int64_t q1 = coord[1] * geo.stride[1] + t1 * geo.kdil[1] - geo.pad_lo[1];
              if (q1 < 0 || q1 > qmax[1] || q1 % geo.idil[1] != 0) {
                zero_taps(tap, geo.k[2]);
                tap += geo.k[2];
                continue;
              }
              const int64_t x1 = x0 + (q1 / geo.idil[1]) * xs[1];
              for (int64_t t2 = 0; t2 < geo.k[2]; ++t2, ++tap) {
                const int64_t q2 = coord[2] * geo.stride[2] + t2 * geo.kdil[2] - geo.pad_lo[2];
                if (q2 < 0 || q2 > qmax[2] || q2 % geo.idil[2] != 0)
                  zero_taps(tap, 1);
                else
                  copy_tap(tap, x1 + (q2 / geo.idil[2]) * xs[2]);
              }
            }
          }
          for (int64_t gi = 0; gi < ng; ++gi) zero_floats(row + gi * kpad + klen, kpad - klen);
          // Next output position.
          if (++coord[2] == geo.out[2]) {
            coord[2] = 0;
            if (++coord[1] == geo.out[1]) {
              coord[1] = 0;
              if (++coord[0] == geo.out[0]) {
                coord[0] = 0;
                ++b;
              }
            }
          }
        }

        for (int64_t gi = 0; gi < ng; ++gi) {
          const int64_t oc0 = (g0 + gi) * opg + chunk * oc_chunk;
          if (fma) {
            // The chunk's first channel is a multiple of 128 within the group: a panel boundary.
            const float* pan =
                wpan + ((g0 + gi) * gpanels + chunk * oc_chunk / kFmaPanel) * klen * kFmaPanel;
            for (int64_t k0 = 0; k0 < klen; k0 += kFmaConvKc) {
              const int64_t kc = std::min(kFmaConvKc, klen - k0);
              fma_path->block(patches + gi * kpad + k0, lda, np, pan + k0 * kFmaPanel, npanels,
                              klen * kFmaPanel, kc, sums, ldsum, k0 == 0);
            }
          } else {
            kernels.gemm_block(patches + gi * kpad, lda, np, wp + oc0 * kpad, kpad, noc, kpad,
                               kblock, sums, noc, lanes);
          }
          const float* chunk_bias = bias.data() + oc0;
          if (out.dtype == DType::f32 && os_c == 1) {  // contiguous channels: a vector loop
            for (int64_t r = 0; r < np; ++r) {
              float* dst = static_cast<float*>(out.data) + out_off[r] + oc0;
              const float* src = sums + r * ldsum;
              for (int64_t j = 0; j < noc; ++j) dst[j] = src[j] + chunk_bias[j];
            }
            continue;
          }
          for (int64_t r = 0; r < np; ++r) {
            const int64_t base = out_off[r];
            for (int64_t j = 0; j < noc; ++j) {
              const float v = sums[r * ldsum + j] + chunk_bias[j];
              write_out(base + (oc0 + j) * os_c, v);
            }
          }
        }
      },
      parallel);
}

}  // namespace gemmkit::cpu
