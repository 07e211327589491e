// Generic direct convolution: the CUDA reference path.
//
// Computes out[n, p..., oc] = sum over window taps t (row-major over the kernel dims), then over
// input channels ci of oc's group (ascending), of x[n, src(p, t)..., g * c/groups + ci] *
// w[oc, wt(t)..., ci], in one fp32 accumulator with fused multiply-adds starting at +0, then
// + bias[oc] (one fp32 add), then one rounding to out's dtype. Taps on padding or on
// input-dilation holes are skipped (src / wt / skipping: tap_source and weight_tap in
// common/geometry.h). That order is part of the contract: docs/conv.md.
//
// Contract: any problem ConvProblem allows (1-3 spatial dims normalized to 3, every stride,
// padding, dilation, flip, groups), any tensor strides (int64 element offsets), any element
// count (grid-stride loop over int64 indices; the grid only uses gridDim.x).
// Mapping: one thread per output element, output channel fastest, so consecutive threads write
// consecutive channels (coalesced for channels-last outputs) and read the same x row.
// When it wins: never on speed; it is the path that always works (odd strides, overlapping
// inputs, tiny problems where launch count matters more than the inner loop).
#pragma once

#include "cuda/conv/common/dtype.cuh"
#include "cuda/conv/common/geometry.h"

namespace gemmkit::cuda::conv_impl {

template <typename T, typename TOut>
__global__ void __launch_bounds__(256, 1)
    conv_direct_kernel(const ConvGeometry g, const T* __restrict__ x, const T* __restrict__ w,
                       const T* __restrict__ bias, TOut* __restrict__ out) {
  const int64_t count = g.positions() * g.o;
  for (int64_t iteration = 0;; ++iteration) {
    const int64_t e = grid_stride_index(blockIdx.x, threadIdx.x, iteration, gridDim.x, blockDim.x);
    if (e >= count) break;
    const int64_t position = div_nonneg(e, g.o);
    const int64_t oc = e - position * g.o;
    const OutCoord at = decode_position(g, position);
    const int64_t group = div_nonneg(oc, g.opg);
    const T* x_group = x + at.n * g.x_stride[0] + group * g.cpg * g.x_stride[4];
    const T* w_oc = w + oc * g.w_stride[0];
    float acc = 0.0f;
    for (int64_t t0 = 0; t0 < g.kernel[0]; ++t0) {
      int64_t i0;
      if (!tap_source(g, 0, at.d[0], t0, i0)) continue;
      const T* x0 = x_group + i0 * g.x_stride[1];
      const T* w0 = w_oc + weight_tap(g, 0, t0) * g.w_stride[1];
      for (int64_t t1 = 0; t1 < g.kernel[1]; ++t1) {
        int64_t i1;
        if (!tap_source(g, 1, at.d[1], t1, i1)) continue;
        const T* x1 = x0 + i1 * g.x_stride[2];
        const T* w1 = w0 + weight_tap(g, 1, t1) * g.w_stride[2];
        for (int64_t t2 = 0; t2 < g.kernel[2]; ++t2) {
          int64_t i2;
          if (!tap_source(g, 2, at.d[2], t2, i2)) continue;
          const T* xp = x1 + i2 * g.x_stride[3];
          const T* wp = w1 + weight_tap(g, 2, t2) * g.w_stride[3];
          for (int64_t ci = 0; ci < g.cpg; ++ci) {
            acc = fmaf(to_float(xp[ci * g.x_stride[4]]), to_float(wp[ci * g.w_stride[4]]), acc);
          }
        }
      }
    }
    if (g.has_bias) acc += to_float(bias[oc * g.bias_stride]);
    out[at.n * g.out_stride[0] + at.d[0] * g.out_stride[1] + at.d[1] * g.out_stride[2] +
        at.d[2] * g.out_stride[3] + oc * g.out_stride[4]] = from_float<TOut>(acc);
  }
}

}  // namespace gemmkit::cuda::conv_impl
