// The TMA tensor maps of the Hopper implicit-GEMM convolution kernel (wgmma.cuh), as plain data
// the launcher encodes (wgmma.cu) and the host tests check: the activation map of a plan (its tile
// box and traversal strides), the weight map and the TMA-store epilogue's out map. The GEMM view
// they load is described in wgmma_layout.h. Pure and header-only.
#pragma once

#include <cstdint>

#include "cuda/conv/common/geometry.h"
#include "cuda/conv/implicit_gemm/wgmma_layout.h"

namespace gemmkit::cuda::conv_impl {

// What the launcher encodes: a 5-D map of 16-bit elements, innermost first.
struct WgmmaConvMap {
  int64_t dims[5] = {};
  int64_t byte_strides[4] = {};  // of dims 1 .. 4
  int box[5] = {};
  int element_strides[5] = {1, 1, 1, 1, 1};
};

// Byte strides of a 5-D map from element strides `strides` (dim 1 .. 4): a dim of extent 1 gets
// the span of the dims inside it (rounded up to 16 bytes), since TMA wants every stride a nonzero
// multiple of 16 whatever the tensor's own stride of an extent-1 dim is.
inline void wgmma_conv_byte_strides(const int64_t (&dims)[5], const int64_t (&strides)[5],
                                    int64_t (&byte_strides)[4]) {
  int64_t span = dims[0] * 2;
  for (int d = 1; d < 5; ++d) {
    byte_strides[d - 1] = dims[d] > 1 ? strides[d] * 2 : ceil_div(span, 16) * 16;
    span = byte_strides[d - 1] * dims[d];
  }
}

// The activation map of g (x: (n, d, h, w, c) strides in g.x_stride) for plan p.
inline WgmmaConvMap implicit_wgmma_x_map(const ConvGeometry& g, const ImplicitWgmmaPlan& p) {
  WgmmaConvMap m;
  const int64_t dims[5] = {g.c, g.in[2], g.in[1], g.in[0], g.batch};
  const int64_t strides[5] = {1, g.x_stride[3], g.x_stride[2], g.x_stride[1], g.x_stride[0]};
  for (int d = 0; d < 5; ++d) m.dims[d] = dims[d];
  wgmma_conv_byte_strides(dims, strides, m.byte_strides);
  m.box[0] = p.block_c;
  for (int d = 0; d < kDims; ++d) {
    m.box[3 - d] = p.tile[d] * p.stride[d];
    m.element_strides[3 - d] = p.stride[d];
  }
  m.box[4] = 1;
  return m;
}

// The halo form's second activation map (implicit_wgmma_can_halo plans): x_map's with a box of
// 2 * kdil_w positions along w, the row's positions past the first 256.
inline WgmmaConvMap implicit_wgmma_x_tail_map(const ConvGeometry& g, const ImplicitWgmmaPlan& p) {
  WgmmaConvMap m = implicit_wgmma_x_map(g, p);
  m.box[1] = (kWgmmaConvHaloTapsW - 1) * p.kdil[kDims - 1];
  return m;
}

// The weight map of g (weight: (o, kd, kh, kw, c / groups) strides in g.w_stride) for tiles of
// block_o output channels and k blocks of block_c channels.
inline WgmmaConvMap implicit_wgmma_w_map(const ConvGeometry& g, int block_o, int block_c) {
  WgmmaConvMap m;
  const int64_t dims[5] = {g.cpg, g.kernel[2], g.kernel[1], g.kernel[0], g.o};
  const int64_t strides[5] = {1, g.w_stride[3], g.w_stride[2], g.w_stride[1], g.w_stride[0]};
  for (int d = 0; d < 5; ++d) m.dims[d] = dims[d];
  wgmma_conv_byte_strides(dims, strides, m.byte_strides);
  m.box[0] = block_c;
  m.box[1] = m.box[2] = m.box[3] = 1;
  m.box[4] = block_o;
  return m;
}

// The out map of plan p (out with `o` channels in all): (o, w, h, d, n) of the plan's outputs
// (a phase's: every s-th position from out_base), box (64, store_box), no swizzle beyond the
// staging's 128-byte one.
inline WgmmaConvMap implicit_wgmma_out_map(const ImplicitWgmmaPlan& p, int64_t o) {
  WgmmaConvMap m;
  const int64_t dims[5] = {o, p.out[2], p.out[1], p.out[0], p.batch};
  const int64_t strides[5] = {1, p.out_stride[3], p.out_stride[2], p.out_stride[1],
                              p.out_stride[0]};
  for (int d = 0; d < 5; ++d) m.dims[d] = dims[d];
  wgmma_conv_byte_strides(dims, strides, m.byte_strides);
  m.box[0] = 64;
  for (int d = 0; d < kDims; ++d) m.box[3 - d] = p.store_box[d];
  m.box[4] = 1;
  return m;
}

}  // namespace gemmkit::cuda::conv_impl
