// Test-only helpers: host tensors with arbitrary layouts, random inputs, independent decoding of
// the stored formats, plainly written double-precision references of linear / conv (straight
// from the mathematical definitions, independent of the backends), and tolerance checks.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gemmkit/gemmkit.h"

namespace gemmkit_test {

using gemmkit::ConvParams;
using gemmkit::DType;

inline std::size_t esize(DType dt) {
  return dt == DType::f32 ? 4 : 2;
}

// ---- Independent decoding of stored values ---------------------------------------------------

inline double decode_bits(DType dt, const unsigned char* p) {
  if (dt == DType::f32) {
    float f;
    std::memcpy(&f, p, 4);
    return static_cast<double>(f);
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  if (dt == DType::bf16) {
    const uint32_t u = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return static_cast<double>(f);
  }
  const int sign = (h >> 15) & 1;
  const int e = (h >> 10) & 0x1f;
  const int m = h & 0x3ff;
  double v;
  if (e == 31)
    v = m ? std::nan("") : INFINITY;
  else if (e == 0)
    v = std::ldexp(static_cast<double>(m), -24);
  else
    v = std::ldexp(static_cast<double>(1024 + m), e - 25);
  return sign ? -v : v;
}

// ---- Host tensors with arbitrary layouts -----------------------------------------------------

// Storage layout of a tensor: `order` lists the dims from outermost to innermost in memory
// (empty: row-major), `pad` adds that many elements to each dim's extent in storage (a view of a
// slice of a larger tensor), `offset` elements precede the view.
struct Layout {
  std::vector<int> order;
  std::vector<int64_t> pad;
  int64_t offset = 0;
};

struct HostTensor {
  DType dtype = DType::f32;
  std::vector<int64_t> shape, strides;
  int64_t offset = 0;
  std::vector<unsigned char> storage;

  int rank() const { return static_cast<int>(shape.size()); }
  int64_t numel() const {
    return std::accumulate(shape.begin(), shape.end(), int64_t{1}, std::multiplies<int64_t>());
  }
  int64_t storage_elems() const { return static_cast<int64_t>(storage.size() / esize(dtype)); }
  gemmkit::Tensor view() {
    return gemmkit::Tensor::strided(storage.data() + offset * static_cast<int64_t>(esize(dtype)),
                                    dtype, gemmkit::Device::cpu(), shape, strides);
  }
  int64_t storage_index(const std::vector<int64_t>& idx) const {
    int64_t s = offset;
    for (std::size_t d = 0; d < idx.size(); ++d) s += idx[d] * strides[d];
    return s;
  }
  double at(const std::vector<int64_t>& idx) const {
    return decode_bits(dtype,
                       storage.data() + storage_index(idx) * static_cast<int64_t>(esize(dtype)));
  }
  // Logical (row-major) index -> multi-index.
  std::vector<int64_t> unravel(int64_t linear) const {
    std::vector<int64_t> idx(shape.size());
    for (int d = rank() - 1; d >= 0; --d) {
      idx[static_cast<std::size_t>(d)] = linear % shape[static_cast<std::size_t>(d)];
      linear /= shape[static_cast<std::size_t>(d)];
    }
    return idx;
  }
  void poison() { std::fill(storage.begin(), storage.end(), static_cast<unsigned char>(0xff)); }
};

inline HostTensor make_tensor(DType dt, const std::vector<int64_t>& shape,
                              const Layout& layout = {}) {
  HostTensor t;
  t.dtype = dt;
  t.shape = shape;
  const int r = static_cast<int>(shape.size());
  std::vector<int> order = layout.order;
  if (order.empty()) {
    order.resize(static_cast<std::size_t>(r));
    std::iota(order.begin(), order.end(), 0);
  }
  t.strides.assign(static_cast<std::size_t>(r), 0);
  int64_t stride = 1;
  for (int i = r - 1; i >= 0; --i) {
    const int d = order[static_cast<std::size_t>(i)];
    t.strides[static_cast<std::size_t>(d)] = stride;
    const int64_t pad = layout.pad.empty() ? 0 : layout.pad[static_cast<std::size_t>(d)];
    stride *= shape[static_cast<std::size_t>(d)] + pad;
  }
  t.offset = layout.offset;
  t.storage.assign(static_cast<std::size_t>(layout.offset + stride) * esize(dt), 0);
  return t;
}

// Random non-zero values exactly representable in the dtype, magnitudes in [1/16, 2).
inline void fill_random(HostTensor& t, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t count = t.storage_elems();
  unsigned char* p = t.storage.data();
  for (int64_t i = 0; i < count; ++i) {
    const uint64_t r = rng();
    const uint32_t sign = static_cast<uint32_t>(r & 1);
    if (t.dtype == DType::f32) {
      const uint32_t bits = (sign << 31) | ((123u + static_cast<uint32_t>((r >> 1) % 5)) << 23) |
                            static_cast<uint32_t>((r >> 8) & 0x7fffff);
      std::memcpy(p + i * 4, &bits, 4);
    } else if (t.dtype == DType::bf16) {
      const uint16_t bits = static_cast<uint16_t>(
          (sign << 15) | ((123u + static_cast<uint32_t>((r >> 1) % 5)) << 7) | ((r >> 8) & 0x7f));
      std::memcpy(p + i * 2, &bits, 2);
    } else {
      const uint16_t bits = static_cast<uint16_t>(
          (sign << 15) | ((11u + static_cast<uint32_t>((r >> 1) % 5)) << 10) | ((r >> 8) & 0x3ff));
      std::memcpy(p + i * 2, &bits, 2);
    }
  }
}

inline HostTensor random_tensor(DType dt, const std::vector<int64_t>& shape, uint64_t seed,
                                const Layout& layout = {}) {
  HostTensor t = make_tensor(dt, shape, layout);
  fill_random(t, seed);
  return t;
}

// The tensor's values in row-major order of its shape, as doubles.
inline std::vector<double> dense(const HostTensor& t) {
  const int64_t total = t.numel();
  std::vector<double> v(static_cast<std::size_t>(total));
  std::vector<int64_t> idx(t.shape.size(), 0);
  for (int64_t e = 0; e < total; ++e) {
    v[static_cast<std::size_t>(e)] = t.at(idx);
    for (int d = t.rank() - 1; d >= 0; --d) {
      if (++idx[static_cast<std::size_t>(d)] < t.shape[static_cast<std::size_t>(d)]) break;
      idx[static_cast<std::size_t>(d)] = 0;
    }
  }
  return v;
}

// ---- References --------------------------------------------------------------------------------

// Expected values and the scale sum |products| + |bias| of every output element, in row-major
// order of the output shape.
struct Reference {
  std::vector<int64_t> shape;
  std::vector<double> value, scale;
  int64_t reduction_length = 0;  // products per element (incl. zeros of padding/dilation)
};

// out[i, j] = sum_k x[i, k] w[j, k] + bias[j].
inline Reference reference_linear(const HostTensor& x, const HostTensor& w,
                                  const HostTensor* bias) {
  const int64_t n = x.shape[0], k = x.shape[1], m = w.shape[0];
  Reference ref;
  ref.shape = {n, m};
  ref.reduction_length = k;
  ref.value.assign(static_cast<std::size_t>(n * m), 0.0);
  ref.scale.assign(static_cast<std::size_t>(n * m), 0.0);
  const std::vector<double> xd = dense(x), wd = dense(w);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) {
      double s = 0, a = 0;
      for (int64_t kk = 0; kk < k; ++kk) {
        const double prod =
            xd[static_cast<std::size_t>(i * k + kk)] * wd[static_cast<std::size_t>(j * k + kk)];
        s += prod;
        a += std::fabs(prod);
      }
      if (bias) {
        const double b = bias->at({j});
        s += b;
        a += std::fabs(b);
      }
      ref.value[static_cast<std::size_t>(i * m + j)] = s;
      ref.scale[static_cast<std::size_t>(i * m + j)] = a;
    }
  return ref;
}

// Per-dim parameters with the API's defaults and broadcasting.
struct ConvDims {
  int spatial = 0;
  int64_t stride[3], pad_lo[3], pad_hi[3], kdil[3], idil[3];
};

inline ConvDims expand_params(const ConvParams& p, int spatial) {
  ConvDims d;
  d.spatial = spatial;
  const auto get = [&](const std::vector<int64_t>& v, int i, int64_t def) {
    if (v.empty()) return def;
    return v.size() == 1 ? v[0] : v[static_cast<std::size_t>(i)];
  };
  for (int i = 0; i < 3; ++i) {
    const bool real = i < spatial;
    d.stride[i] = real ? get(p.stride, i, 1) : 1;
    d.pad_lo[i] = real ? get(p.padding_lo, i, 0) : 0;
    d.pad_hi[i] = real ? get(p.padding_hi, i, 0) : 0;
    d.kdil[i] = real ? get(p.kernel_dilation, i, 1) : 1;
    d.idil[i] = real ? get(p.input_dilation, i, 1) : 1;
  }
  return d;
}

// conv_general, literally as the API documents it: materialize the input dilated by
// input_dilation and padded by padding_lo / padding_hi (negative = crop), materialize the kernel
// dilated by kernel_dilation (and flipped in every spatial dim when flip), then correlate at the
// stride. Groups: output channel oc reads input channels of group oc / (o / groups).
inline Reference reference_conv(const HostTensor& x, const HostTensor& w, const HostTensor* bias,
                                const ConvParams& params) {
  const int S = x.rank() - 2;
  const ConvDims pd = expand_params(params, S);
  const int64_t nb = x.shape[0], c = x.shape[static_cast<std::size_t>(S + 1)];
  const int64_t o = w.shape[0], cpg = w.shape[static_cast<std::size_t>(S + 1)];
  const int64_t groups = params.groups, opg = o / groups;
  int64_t in[3] = {1, 1, 1}, kk[3] = {1, 1, 1}, padded[3], kext[3], out[3];
  for (int d = 0; d < S; ++d) {
    in[d] = x.shape[static_cast<std::size_t>(d + 1)];
    kk[d] = w.shape[static_cast<std::size_t>(d + 1)];
  }
  for (int d = 0; d < 3; ++d) {
    padded[d] = (in[d] - 1) * pd.idil[d] + 1 + pd.pad_lo[d] + pd.pad_hi[d];
    kext[d] = (kk[d] - 1) * pd.kdil[d] + 1;
    out[d] = (padded[d] - kext[d]) / pd.stride[d] + 1;
  }
  const std::vector<double> xdense = dense(x), wdense = dense(w);
  // Dilated + padded input, (n, padded..., c).
  std::vector<double> xp(static_cast<std::size_t>(nb * padded[0] * padded[1] * padded[2] * c), 0.0);
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t z0 = 0; z0 < padded[0]; ++z0)
      for (int64_t z1 = 0; z1 < padded[1]; ++z1)
        for (int64_t z2 = 0; z2 < padded[2]; ++z2) {
          const int64_t z[3] = {z0, z1, z2};
          int64_t src[3];
          bool inside = true;
          for (int d = 0; d < 3; ++d) {
            const int64_t q = z[d] - pd.pad_lo[d];  // coordinate in the dilated input
            if (q < 0 || q > (in[d] - 1) * pd.idil[d] || q % pd.idil[d] != 0) inside = false;
            src[d] = inside ? q / pd.idil[d] : 0;
          }
          if (!inside) continue;
          for (int64_t ci = 0; ci < c; ++ci)
            xp[static_cast<std::size_t>(
                (((b * padded[0] + z0) * padded[1] + z1) * padded[2] + z2) * c + ci)] =
                xdense[static_cast<std::size_t>(
                    (((b * in[0] + src[0]) * in[1] + src[1]) * in[2] + src[2]) * c + ci)];
        }
  // Dilated (and flipped) kernel, (o, kext..., cpg).
  std::vector<double> wd(static_cast<std::size_t>(o * kext[0] * kext[1] * kext[2] * cpg), 0.0);
  for (int64_t oc = 0; oc < o; ++oc)
    for (int64_t e0 = 0; e0 < kext[0]; ++e0)
      for (int64_t e1 = 0; e1 < kext[1]; ++e1)
        for (int64_t e2 = 0; e2 < kext[2]; ++e2) {
          const int64_t e[3] = {e0, e1, e2};
          int64_t t[3];
          bool tap = true;
          for (int d = 0; d < 3; ++d) {
            const int64_t src = params.flip ? kext[d] - 1 - e[d] : e[d];  // flip the dilated kernel
            if (src % pd.kdil[d] != 0) tap = false;
            t[d] = src / pd.kdil[d];
          }
          if (!tap) continue;
          for (int64_t ci = 0; ci < cpg; ++ci)
            wd[static_cast<std::size_t>(
                (((oc * kext[0] + e0) * kext[1] + e1) * kext[2] + e2) * cpg + ci)] =
                wdense[static_cast<std::size_t>(
                    (((oc * kk[0] + t[0]) * kk[1] + t[1]) * kk[2] + t[2]) * cpg + ci)];
        }
  Reference ref;
  ref.shape = {nb};
  for (int d = 0; d < S; ++d) ref.shape.push_back(out[d]);
  ref.shape.push_back(o);
  ref.reduction_length = kk[0] * kk[1] * kk[2] * cpg;
  const int64_t total = nb * out[0] * out[1] * out[2] * o;
  ref.value.assign(static_cast<std::size_t>(total), 0.0);
  ref.scale.assign(static_cast<std::size_t>(total), 0.0);
  int64_t lin = 0;
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t p0 = 0; p0 < out[0]; ++p0)
      for (int64_t p1 = 0; p1 < out[1]; ++p1)
        for (int64_t p2 = 0; p2 < out[2]; ++p2)
          for (int64_t oc = 0; oc < o; ++oc, ++lin) {
            const int64_t g = oc / opg;
            double s = 0, a = 0;
            for (int64_t e0 = 0; e0 < kext[0]; ++e0)
              for (int64_t e1 = 0; e1 < kext[1]; ++e1)
                for (int64_t e2 = 0; e2 < kext[2]; ++e2) {
                  const int64_t z0 = p0 * pd.stride[0] + e0, z1 = p1 * pd.stride[1] + e1,
                                z2 = p2 * pd.stride[2] + e2;
                  const double* xr = &xp[static_cast<std::size_t>(
                      (((b * padded[0] + z0) * padded[1] + z1) * padded[2] + z2) * c + g * cpg)];
                  const double* wr = &wd[static_cast<std::size_t>(
                      (((oc * kext[0] + e0) * kext[1] + e1) * kext[2] + e2) * cpg)];
                  for (int64_t ci = 0; ci < cpg; ++ci) {
                    s += xr[ci] * wr[ci];
                    a += std::fabs(xr[ci] * wr[ci]);
                  }
                }
            if (bias) {
              s += bias->at({oc});
              a += std::fabs(bias->at({oc}));
            }
            ref.value[static_cast<std::size_t>(lin)] = s;
            ref.scale[static_cast<std::size_t>(lin)] = a;
          }
  return ref;
}

// Transposed convolution (PyTorch ConvTransposeNd) written as a scatter: every input element
// x[b, i, ci] and kernel tap t add x * W[oc, t, ci] into out[b, i * stride - padding + t *
// dilation, oc] for the output channels oc of ci's group, where W is the weight in conv()'s
// (o, kernel..., c / groups) layout (W[oc, t, ci] = PyTorch's w[g * cpg + ci, oc - g * opg, t]).
// out_shape is (n, out..., o).
inline Reference reference_conv_transpose_scatter(
    const HostTensor& x, const HostTensor& w, const HostTensor* bias,
    const std::vector<int64_t>& stride, const std::vector<int64_t>& padding,
    const std::vector<int64_t>& dilation, int64_t groups, const std::vector<int64_t>& out_shape) {
  const int S = x.rank() - 2;
  const int64_t nb = x.shape[0], c = x.shape[static_cast<std::size_t>(S + 1)];
  const int64_t o = w.shape[0], cpg = c / groups, opg = o / groups;
  int64_t in[3] = {1, 1, 1}, kk[3] = {1, 1, 1}, out[3] = {1, 1, 1}, s[3] = {1, 1, 1},
          p[3] = {0, 0, 0}, dl[3] = {1, 1, 1};
  const auto get = [](const std::vector<int64_t>& v, int i) {
    return v.size() == 1 ? v[0] : v[static_cast<std::size_t>(i)];
  };
  for (int d = 0; d < S; ++d) {
    in[d] = x.shape[static_cast<std::size_t>(d + 1)];
    kk[d] = w.shape[static_cast<std::size_t>(d + 1)];
    out[d] = out_shape[static_cast<std::size_t>(d + 1)];
    s[d] = get(stride, d);
    p[d] = get(padding, d);
    dl[d] = get(dilation, d);
  }
  Reference ref;
  ref.shape = out_shape;
  ref.reduction_length = kk[0] * kk[1] * kk[2] * cpg;
  const int64_t total = nb * out[0] * out[1] * out[2] * o;
  ref.value.assign(static_cast<std::size_t>(total), 0.0);
  ref.scale.assign(static_cast<std::size_t>(total), 0.0);
  const std::vector<double> xdense = dense(x), wdense = dense(w);
  const auto out_index = [&](int64_t b, const int64_t* q, int64_t oc) {
    return static_cast<std::size_t>((((b * out[0] + q[0]) * out[1] + q[1]) * out[2] + q[2]) * o +
                                    oc);
  };
  for (int64_t b = 0; b < nb; ++b)
    for (int64_t i0 = 0; i0 < in[0]; ++i0)
      for (int64_t i1 = 0; i1 < in[1]; ++i1)
        for (int64_t i2 = 0; i2 < in[2]; ++i2)
          for (int64_t ci = 0; ci < c; ++ci) {
            const int64_t i[3] = {i0, i1, i2};
            const double xv = xdense[static_cast<std::size_t>(
                (((b * in[0] + i0) * in[1] + i1) * in[2] + i2) * c + ci)];
            const int64_t g = ci / cpg;
            for (int64_t t0 = 0; t0 < kk[0]; ++t0)
              for (int64_t t1 = 0; t1 < kk[1]; ++t1)
                for (int64_t t2 = 0; t2 < kk[2]; ++t2) {
                  const int64_t t[3] = {t0, t1, t2};
                  int64_t q[3];
                  bool inside = true;
                  for (int d = 0; d < 3; ++d) {
                    q[d] = i[d] * s[d] - p[d] + t[d] * dl[d];
                    if (q[d] < 0 || q[d] >= out[d]) inside = false;
                  }
                  if (!inside) continue;
                  for (int64_t oc = g * opg; oc < (g + 1) * opg; ++oc) {
                    const double prod =
                        xv * wdense[static_cast<std::size_t>(
                                 (((oc * kk[0] + t0) * kk[1] + t1) * kk[2] + t2) * cpg +
                                 (ci - g * cpg))];
                    ref.value[out_index(b, q, oc)] += prod;
                    ref.scale[out_index(b, q, oc)] += std::fabs(prod);
                  }
                }
          }
  if (bias) {
    for (int64_t e = 0; e < total; ++e) {
      const double bv = bias->at({e % o});
      ref.value[static_cast<std::size_t>(e)] += bv;
      ref.scale[static_cast<std::size_t>(e)] += std::fabs(bv);
    }
  }
  return ref;
}

// ---- Checks ------------------------------------------------------------------------------------

// Unit roundoff of one rounding to the dtype.
inline double unit_roundoff(DType dt) {
  return dt == DType::bf16  ? std::ldexp(1.0, -8)
         : dt == DType::f16 ? std::ldexp(1.0, -11)
                            : std::ldexp(1.0, -24);
}

// Every element of `out` within: fp32 accumulation error bound (ceil(len / 8) + 6) * 2^-24 *
// scale (8 lane sums, 3 combining adds, the bias add, the product rounding), plus one rounding to
// the output dtype (and its subnormal spacing). Also checks that the storage outside the view
// still holds the poison bytes. Returns the number of mismatches (reported with the label).
// `fma_chain`: the bound of one FMA chain instead (the CPU avx2 `auto` order):
// (len + 2) * 2^-24 * scale.
inline int64_t check_output(const HostTensor& out, const Reference& ref, const std::string& label,
                            int max_reports = 5, bool fma_chain = false) {
  EXPECT_EQ(out.shape, ref.shape) << label;
  if (out.shape != ref.shape) return 1;
  const int64_t terms = fma_chain ? ref.reduction_length + 2 : (ref.reduction_length + 7) / 8 + 6;
  const double acc_rel = static_cast<double>(terms) * std::ldexp(1.0, -24) * 1.01;
  const double u_out = out.dtype == DType::f32 ? 0.0 : unit_roundoff(out.dtype);
  const double abs_out = out.dtype == DType::f16    ? std::ldexp(1.0, -25)
                         : out.dtype == DType::bf16 ? std::ldexp(1.0, -134)
                                                    : 0.0;
  int64_t bad = 0;
  const int64_t total = out.numel();
  std::vector<char> touched(static_cast<std::size_t>(out.storage_elems()), 0);
  for (int64_t e = 0; e < total; ++e) {
    const std::vector<int64_t> idx = out.unravel(e);
    touched[static_cast<std::size_t>(out.storage_index(idx))] = 1;
    const double got = out.at(idx);
    const double want = ref.value[static_cast<std::size_t>(e)];
    const double acc = acc_rel * ref.scale[static_cast<std::size_t>(e)];
    const double tol = acc + u_out * (std::fabs(want) + acc) + abs_out;
    if (!(std::fabs(got - want) <= tol)) {
      if (++bad <= max_reports) {
        std::ostringstream s;
        s << label << ": out[";
        for (std::size_t d = 0; d < idx.size(); ++d) s << (d ? ", " : "") << idx[d];
        s << "] = " << got << ", expected " << want << " (tolerance " << tol << ", scale "
          << ref.scale[static_cast<std::size_t>(e)] << ")";
        ADD_FAILURE() << s.str();
      }
    }
  }
  // Storage outside the view must be untouched (still 0xff bytes).
  int64_t clobbered = 0;
  const std::size_t es = esize(out.dtype);
  for (std::size_t i = 0; i < touched.size(); ++i) {
    if (touched[i]) continue;
    for (std::size_t b = 0; b < es; ++b)
      if (out.storage[i * es + b] != 0xff) {
        ++clobbered;
        break;
      }
  }
  EXPECT_EQ(clobbered, 0) << label << ": elements outside the output view were written";
  if (bad > max_reports) ADD_FAILURE() << label << ": " << bad << " mismatches in total";
  return bad + clobbered;
}

// Two results bitwise equal (the whole storage).
inline bool same_bits(const HostTensor& a, const HostTensor& b) {
  return a.storage == b.storage;
}

// The CPU backend's documented fp32 reduction (docs/numerics.md): 8 lane partial sums starting at
// +0.0f (lane t takes r[i] for i = t mod 8, ascending, multiply then add), combined as
// ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)), then + bias.
inline float documented_dot(const std::vector<float>& a, const std::vector<float>& b, float bias) {
  volatile float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (std::size_t i = 0; i < a.size(); ++i) {
    volatile float prod = a[i] * b[i];
    lane[i % 8] = lane[i % 8] + prod;
  }
  const float s01 = lane[0] + lane[1], s23 = lane[2] + lane[3], s45 = lane[4] + lane[5],
              s67 = lane[6] + lane[7];
  const float lo = s01 + s23, hi = s45 + s67;
  const float sum = lo + hi;
  return sum + bias;
}

// The CPU avx2 `auto` order (docs/numerics.md): one fp32 FMA chain from +0.0 over i ascending,
// then + bias.
inline float fma_chain_dot(const std::vector<float>& a, const std::vector<float>& b, float bias) {
  volatile float acc = 0.0f;
  for (std::size_t i = 0; i < a.size(); ++i) acc = std::fmaf(a[i], b[i], acc);
  return acc + bias;
}

inline std::string dtype_label(DType dt) {
  return gemmkit::dtype_name(dt);
}

// An emulated kernel's outputs (storage index of out -> value) against the double reference:
// exactly out's elements written, each within 1e-12 of its reference's scale (the first three
// misses reported).
inline void expect_emulated_outputs(const std::map<int64_t, double>& written, const HostTensor& out,
                                    const Reference& ref) {
  ASSERT_EQ(static_cast<int64_t>(written.size()), out.numel());
  int bad = 0;
  for (int64_t e = 0; e < out.numel(); ++e) {
    const int64_t index = out.storage_index(out.unravel(e));
    const auto it = written.find(index);
    ASSERT_NE(it, written.end()) << "output " << e << " not written";
    const double want = ref.value[static_cast<std::size_t>(e)];
    const double tol = 1e-12 * (ref.scale[static_cast<std::size_t>(e)] + 1.0);
    if (!(std::fabs(it->second - want) <= tol) && ++bad <= 3) {
      ADD_FAILURE() << "output " << e << ": emulated " << it->second << ", reference " << want;
    }
  }
}

}  // namespace gemmkit_test
