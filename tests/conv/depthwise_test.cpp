// Host tests of the blocked depthwise variant (depthwise/blocked.cuh, planned by depthwise_config
// in depthwise/plan.h): its configuration for the suite rows and extreme shapes, and a host
// emulation of the kernel's index mapping that walks blocks, tiles, threads, input rows, kernel
// rows and columns exactly as the kernel does (with the same geometry functions) and checks that
// every output is written exactly once, that every x element read and every staged weight slot is
// in bounds (32-bit plane offsets included), and that each output receives exactly its valid taps
// in row-major order (the bitwise contract with the generic direct kernel). Runs without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "common/problems.h"
#include "conv/problem_spec.h"
#include "conv/select_util.h"
#include "cuda/conv/common/geometry.h"
#include "cuda/conv/select.h"
#include "gemmkit/gemmkit.h"

namespace gemmkit::cuda::conv_impl {
namespace {

// A device with one multiprocessor: the same problems get 2-row thread tiles (the thread-count
// rule) and blocks that take several tiles each (max_blocks = 16), so small shapes exercise both.
DeviceDescription one_sm() {
  DeviceDescription d;
  d.multiprocessors = 1;
  return d;
}

// These tests are about the blocked variant and the window / generic ones: the staged variant,
// which takes many of their shapes first, is kept out (GEMMKIT_CONV_DEPTHWISE=blocked;
// depthwise_staged_test.cpp covers it).
ConvRequest request(const std::string& algo = "auto") {
  return request_of(algo, kDefaultWorkspaceBytes, "", "blocked");
}

// Emulates conv_depthwise_blocked_kernel (see the file comment).
void emulate_blocked(const ConvProblem& p, const DeviceDescription& dev = kH200) {
  const ConvConfig c = select_conv_config(p, dev, request("depthwise"));
  SCOPED_TRACE(to_string(c));
  EXPECT_EQ(c.path, ConvPath::depthwise);
  const DepthwiseTiling& t = c.depthwise;
  EXPECT_EQ(t.variant, DepthwiseVariant::blocked);
  if (c.path != ConvPath::depthwise || t.variant != DepthwiseVariant::blocked) return;
  const ConvGeometry g = normalize(p);
  const int64_t kv = c.vector, kw = g.kernel[2], ks = g.stride[2], th = t.th, tw = t.run;
  const int64_t cols = (tw - 1) * ks + kw, kh = g.kernel[1], sh = g.stride[1];
  const int64_t taps = g.kernel_positions();
  EXPECT_TRUE(kv == 1 || kv == 2);
  EXPECT_TRUE(th == 1 || th == kDepthwiseBlockedRows);
  EXPECT_EQ(tw, depthwise_blocked_tw(kw, ks));
  EXPECT_EQ(cols, depthwise_blocked_span(g, t));
  EXPECT_EQ(t.channel_vectors * kv, g.o);
  EXPECT_LE(t.cvt, kDepthwiseBlockedMaxCvt);
  EXPECT_LE(t.threads(), kDepthwiseBlockedThreads);
  EXPECT_EQ(c.smem_bytes, t.cvt * t.w_cv_stride * 4);
  EXPECT_LE(c.smem_bytes, kMaxKernelSmem);
  EXPECT_EQ(t.w_cv_stride % kv, 0);
  EXPECT_EQ((t.w_cv_stride / kv) % 2, 1);  // odd: a warp's LDS of one tap hits distinct banks
  EXPECT_GE(t.w_cv_stride, taps * kv);
  EXPECT_TRUE(depthwise_blocked_offsets_fit(g, t));

  // Staging: the kernel's (lc, tap) walk over the block's threads fills every slot of the tile
  // once, each with the weight of channel lc at window tap `tap` (flip applied).
  const int64_t width = t.cvt * kv, threads = t.threads();
  std::vector<int64_t> slot_lc(static_cast<std::size_t>(t.cvt * t.w_cv_stride), -1);
  std::vector<int64_t> slot_tap(slot_lc.size(), -1);
  {
    const int64_t items = width * taps, step_lc = threads / taps, step_tap = threads % taps;
    for (int64_t thread = 0; thread < threads; ++thread) {
      int64_t lc = thread / taps, tap = thread % taps;
      for (int64_t j = thread; j < items; j += threads) {
        const int64_t at = (lc / kv) * t.w_cv_stride + tap * kv + lc % kv;
        ASSERT_GE(at, 0);
        ASSERT_LT(at, static_cast<int64_t>(slot_lc.size()));
        EXPECT_EQ(slot_lc[static_cast<std::size_t>(at)], -1) << "slot " << at << " twice";
        slot_lc[static_cast<std::size_t>(at)] = lc;
        slot_tap[static_cast<std::size_t>(at)] = tap;
        // The linear source offset is the weight element of window tap `tap`.
        const int64_t linear = (g.flip ? taps - 1 - tap : tap) * g.w_stride[3];
        const Tap d = decode_tap(g, tap);
        int64_t expected = 0;
        for (int k = 0; k < kDims; ++k) expected += weight_tap(g, k, d.d[k]) * g.w_stride[1 + k];
        EXPECT_EQ(linear, expected);
        EXPECT_LE(lc * g.w_stride[0] + linear, kMaxInt32);
        lc += step_lc;
        tap += step_tap;
        if (tap >= taps) {
          tap -= taps;
          ++lc;
        }
      }
    }
    for (int64_t lc = 0; lc < width; ++lc) {
      for (int64_t tap = 0; tap < taps; ++tap) {
        const int64_t at = (lc / kv) * t.w_cv_stride + tap * kv + lc % kv;
        ASSERT_EQ(slot_lc[static_cast<std::size_t>(at)], lc) << "slot " << at << " not staged";
      }
    }
  }
  // Vector staging (w_vector_bytes): the kernel's walk over the tile's run of w — element e read
  // from run + e in whole aligned loads, staged at the slot of its channel and window tap — fills
  // every slot once, with the element the element walk above puts there.
  EXPECT_EQ(t.w_vector_bytes, depthwise_blocked_w_vector_bytes(p, g, t, kv));
  if (t.w_vector_bytes > 0) {
    const int64_t per = t.w_vector_bytes / static_cast<int64_t>(dtype_size(p.weight.dtype));
    constexpr int64_t kBatch = 2;  // stage_blocked_weights_vector
    const int64_t total = width * taps, step = threads * per;
    EXPECT_EQ(total % per, 0);
    EXPECT_EQ(g.w_stride[0], taps);
    EXPECT_EQ(g.w_stride[3], 1);
    EXPECT_EQ(pointer_alignment(p.weight.data) % t.w_vector_bytes, 0);
    EXPECT_EQ((width * taps * static_cast<int64_t>(dtype_size(p.weight.dtype))) % t.w_vector_bytes,
              0);  // every tile's run starts aligned
    std::vector<int> filled(slot_lc.size(), 0);
    for (int64_t thread = 0; thread < threads; ++thread) {
      for (int64_t e0 = thread * per; e0 < total; e0 += kBatch * step) {
        for (int64_t b = 0; b < kBatch; ++b) {
          const int64_t e = e0 + b * step;
          if (e >= total) break;
          int64_t lc = e / taps, tap = e % taps;
          for (int64_t i = 0; i < per; ++i) {
            const int64_t window_tap = g.flip ? taps - 1 - tap : tap;
            const int64_t at = (lc / kv) * t.w_cv_stride + window_tap * kv + lc % kv;
            ASSERT_LT(at, static_cast<int64_t>(filled.size()));
            ++filled[static_cast<std::size_t>(at)];
            EXPECT_EQ(slot_lc[static_cast<std::size_t>(at)], lc);
            EXPECT_EQ(slot_tap[static_cast<std::size_t>(at)], window_tap);
            // The element walk reads channel lc at w offset lc * w_stride[0] + (flip ? taps - 1 -
            // window_tap : window_tap) * w_stride[3]: run element lc * taps + tap.
            EXPECT_EQ(
                lc * g.w_stride[0] + (g.flip ? taps - 1 - window_tap : window_tap) * g.w_stride[3],
                e + i);
            if (++tap == taps) {
              tap = 0;
              ++lc;
            }
          }
        }
      }
    }
    for (int64_t lc = 0; lc < width; ++lc) {
      for (int64_t tap = 0; tap < taps; ++tap) {
        ASSERT_EQ(filled[static_cast<std::size_t>((lc / kv) * t.w_cv_stride + tap * kv + lc % kv)],
                  1);
      }
    }
  }

  const int64_t out_count = g.positions() * g.o;
  const auto out_index = [&](int64_t n, int64_t d0, int64_t oh, int64_t ow, int64_t oc) {
    return (((n * g.out[0] + d0) * g.out[1] + oh) * g.out[2] + ow) * g.o + oc;
  };
  std::vector<std::vector<int64_t>> got(static_cast<std::size_t>(out_count));
  std::vector<int> writes(static_cast<std::size_t>(out_count), 0);
  int64_t interior_tiles = 0, edge_tiles = 0;
  for (int64_t b = 0; b < int64_t{c.grid.x}; ++b) {
    const int64_t first = b * t.tiles_per_block;
    const int64_t last = std::min(first + t.tiles_per_block, t.tiles());
    for (int64_t tile = first; tile < last; ++tile) {
      for (int64_t ty = 0; ty < t.spb(); ++ty) {
        for (int64_t tx = 0; tx < t.cvt; ++tx) {
          const DepthwiseItem item = depthwise_item(g, t, tile, tx, ty);
          if (!item.valid) continue;
          const int64_t oc0 = item.channel_vector * kv;
          // The kernel's input channel: oc0 (vector 2, multiplier 1), else oc0 / multiplier.
          const int64_t ci = kv == 2 ? oc0 : oc0 / g.opg;
          const bool interior = depthwise_blocked_interior(g, t, item.ow0);
          int64_t lo = 0, hi = cols;
          if (interior) {
            ++interior_tiles;
          } else {
            ++edge_tiles;
            const DepthwiseColumns cl = depthwise_blocked_columns(g, t, item.ow0);
            lo = cl.lo;
            hi = cl.hi;
          }
          const int64_t q0 = item.ow0 * ks - g.pad_lo[2];
          const int64_t ih0 = item.d1 * sh - g.pad_lo[1];
          if (interior) {
            ASSERT_GE(q0, 0);
            ASSERT_LE(q0 + cols, g.in[2]);
            ASSERT_LE(item.ow0 + tw, g.out[2]);
          }
          for (int64_t t0 = 0; t0 < g.kernel[0]; ++t0) {
            int64_t i0 = 0;
            if (!tap_source(g, 0, item.d0, t0, i0)) continue;
            for (int64_t ir = 0; ir < depthwise_blocked_rows(g, t); ++ir) {
              const int64_t ih = ih0 + ir;
              if (ih < 0 || ih >= g.in[1]) continue;
              // The row's 32-bit offset (q0 may be negative on edge tiles).
              const int64_t row_offset = ih * g.x_stride[2] + q0 * g.x_stride[3];
              ASSERT_LE(std::max(row_offset, -row_offset), kMaxInt32);
              for (int64_t r = 0; r < th; ++r) {
                const int64_t kr = ir - r * sh;
                if (kr < 0 || kr >= kh) continue;
                for (int64_t u = lo; u < hi; ++u) {
                  const int64_t q = q0 + u;
                  ASSERT_GE(q, 0);
                  ASSERT_LT(q, g.in[2]);
                  for (int64_t v = 0; v < kv; ++v) {
                    const int64_t channel = kv == 2 ? ci + v : ci;
                    ASSERT_EQ(channel, (oc0 + v) / g.opg);
                    ASSERT_LT(channel, g.c);
                    ASSERT_LE(ih * g.x_stride[2] + q * g.x_stride[3] + channel, kMaxInt32);
                  }
                  for (int64_t j = 0; j < tw; ++j) {
                    const int64_t t2 = u - j * ks;
                    if (t2 < 0 || t2 >= kw) continue;
                    const int64_t tap = (t0 * kh + kr) * kw + t2;
                    for (int64_t v = 0; v < kv; ++v) {
                      // The thread reads w_s[tx * w_cv_stride + tap * kv + v]: that slot holds
                      // its channel's weight of this tap.
                      const int64_t at = tx * t.w_cv_stride + tap * kv + v;
                      ASSERT_EQ(slot_lc[static_cast<std::size_t>(at)], tx * kv + v);
                      ASSERT_EQ(slot_tap[static_cast<std::size_t>(at)], tap);
                      const int64_t oh = item.d1 + r, ow = item.ow0 + j;
                      if (oh < g.out[1] && ow < g.out[2]) {
                        got[static_cast<std::size_t>(out_index(item.n, item.d0, oh, ow, oc0 + v))]
                            .push_back(tap);
                      }
                    }
                  }
                }
              }
            }
          }
          for (int64_t r = 0; r < th && item.d1 + r < g.out[1]; ++r) {
            for (int64_t j = 0; j < tw; ++j) {
              if (!interior && item.ow0 + j >= g.out[2]) break;
              ASSERT_LT(item.ow0 + j, g.out[2]);
              const int64_t offset =
                  (item.d1 + r) * g.out_stride[2] + (item.ow0 + j) * g.out_stride[3] + oc0 + kv - 1;
              ASSERT_LE(offset, kMaxInt32);
              for (int64_t v = 0; v < kv; ++v) {
                ++writes[static_cast<std::size_t>(
                    out_index(item.n, item.d0, item.d1 + r, item.ow0 + j, oc0 + v))];
              }
            }
          }
        }
      }
    }
  }
  // Every output once, with its valid taps in row-major order.
  for (int64_t n = 0; n < g.batch; ++n) {
    for (int64_t d0 = 0; d0 < g.out[0]; ++d0) {
      for (int64_t oh = 0; oh < g.out[1]; ++oh) {
        for (int64_t ow = 0; ow < g.out[2]; ++ow) {
          std::vector<int64_t> want;
          const int64_t at[kDims] = {d0, oh, ow};
          for (int64_t tap = 0; tap < taps; ++tap) {
            const Tap d = decode_tap(g, tap);
            bool valid = true;
            for (int k = 0; k < kDims; ++k) {
              int64_t i = 0;
              valid = valid && tap_source(g, k, at[k], d.d[k], i);
            }
            if (valid) want.push_back(tap);
          }
          for (int64_t oc = 0; oc < g.o; ++oc) {
            const auto i = static_cast<std::size_t>(out_index(n, d0, oh, ow, oc));
            ASSERT_EQ(writes[i], 1) << "output (" << n << ", " << d0 << ", " << oh << ", " << ow
                                    << ", " << oc << ") written " << writes[i] << " times";
            ASSERT_EQ(got[i], want) << "taps of output (" << n << ", " << d0 << ", " << oh << ", "
                                    << ow << ", " << oc << ")";
          }
        }
      }
    }
  }
  // Both paths of the kernel ran wherever the shape has edges and an interior.
  EXPECT_GT(interior_tiles + edge_tiles, 0);
}

// ---- Configuration ---------------------------------------------------------------------------

TEST(ConvDepthwiseBlocked, SuiteRows) {
  struct Row {
    Spec spec;
    int th;
    int64_t cvt;
  };
  const Row rows[] = {
      // ConvNeXt 7x7 c96: 75k threads in 2-row tiles would take 2 rounds of the 67.6k resident
      // threads (the second 11% full), 1-row tiles 3 cheaper ones; 48 channel vectors in 3 tiles
      // of 16.
      {depthwise_spec({8, 56, 56, 96}, 7, 1, 3), 1, 16},
      // ConvNeXt 7x7 c384 on 14x14: 2-row tiles would leave 163 threads per SM: 1-row tiles.
      {depthwise_spec({8, 14, 14, 384}, 7, 1, 3), 1, 32},
      // MobileNet 3x3 c144: 72 channel vectors in 4 tiles of 18 (7 thread tiles, 126 threads).
      {depthwise_spec({8, 56, 56, 144}, 3, 1, 1), 2, 18},
      {depthwise_spec({8, 56, 56, 144}, 3, 2, 1), 1, 18},
  };
  for (const Row& r : rows) {
    const ConvProblem p = make_problem(r.spec);
    const ConvConfig c = select_conv_config(p, kH200, request());
    SCOPED_TRACE(to_string(c));
    ASSERT_EQ(c.path, ConvPath::depthwise);
    EXPECT_EQ(c.depthwise.variant, DepthwiseVariant::blocked);
    EXPECT_EQ(c.vector, 2);
    EXPECT_EQ(c.depthwise.th, r.th);
    EXPECT_EQ(c.depthwise.cvt, r.cvt);
    EXPECT_EQ(c.depthwise.run, depthwise_blocked_tw(r.spec.w_shape[2], r.spec.params.stride[0]));
    EXPECT_GE(int64_t{c.grid.x}, 2 * kH200.multiprocessors);  // >= 2 blocks per SM
    EXPECT_EQ(c.depthwise.tiles_per_block, 1);
    EXPECT_LE(c.block, kDepthwiseBlockedThreads);
    EXPECT_LE(c.smem_bytes, kMaxKernelSmem);
    // No idle thread tiles on these shapes.
    const DepthwiseTiling& t = c.depthwise;
    EXPECT_EQ(t.row_tiles * t.rows_per_block * t.th,
              ceil_div(r.spec.x_shape[1] / r.spec.params.stride[0], t.th) * t.th);
    EXPECT_NE(to_string(c).find("variant=blocked"), std::string::npos);
    EXPECT_NE(c.reason.find("blocked variant"), std::string::npos);
  }
  // The causal conv1d keeps the narrow window variant (one spatial dim).
  Spec mamba = depthwise_spec({8, 2048, 8192}, 4, 1, 0);
  mamba.params.padding_lo = {3};
  const ConvConfig cm = select_conv_config(make_problem(mamba), kH200, request());
  EXPECT_EQ(cm.depthwise.variant, DepthwiseVariant::narrow) << to_string(cm);
  EXPECT_NE(cm.reason.find("one spatial dim"), std::string::npos) << cm.reason;
}

TEST(ConvDepthwiseBlocked, WhatTakesTheBlockedVariant) {
  const auto variant = [](const Spec& s) {
    return select_conv_config(make_problem(s), kH200, request("depthwise"));
  };
  for (const int64_t k : {3, 5, 7}) {
    for (const int64_t stride : {1, 2}) {
      const ConvConfig c = variant(depthwise_spec({2, 20, 21, 32}, k, stride, k / 2));
      EXPECT_EQ(c.depthwise.variant, DepthwiseVariant::blocked) << to_string(c);
      EXPECT_EQ(c.vector, 2);
    }
  }
  // Multiplier 2, odd o, f32: the blocked variant with 1 or 2 channels per thread.
  EXPECT_EQ(variant(depthwise_spec({1, 9, 9, 8}, 3, 1, 1, 2)).vector, 1);
  EXPECT_EQ(variant(depthwise_spec({1, 9, 9, 7}, 3, 1, 1)).vector, 1);
  Spec f32 = depthwise_spec({1, 9, 9, 8}, 3, 1, 1);
  f32.dtype = f32.out_dtype = DType::f32;
  EXPECT_EQ(variant(f32).vector, 2);
  // Not the blocked variant, saying why: widths other than 3 / 5 / 7, stride 3 along the last
  // dim, dilations along the last two dims.
  const auto not_blocked = [&](const Spec& s, const std::string& why) {
    const ConvConfig c = variant(s);
    EXPECT_NE(c.depthwise.variant, DepthwiseVariant::blocked) << to_string(c);
    EXPECT_NE(c.reason.find(why), std::string::npos) << c.reason;
  };
  not_blocked(depthwise_spec({1, 9, 9, 8}, 4, 1, 1), "kernel width 4");
  not_blocked(depthwise_spec({1, 19, 19, 8}, 3, 3, 1), "stride > 2");
  Spec dil = depthwise_spec({1, 9, 9, 8}, 3, 1, 2);
  dil.params.kernel_dilation = {2};
  not_blocked(dil, "dilation");
  Spec idil = depthwise_spec({1, 9, 9, 8}, 3, 1, 1);
  idil.params.input_dilation = {1, 2};
  not_blocked(idil, "dilation");
  // A stride of 3 along rows is fine (run time), as is any geometry along dim 0 of a 3-D conv.
  Spec rows3 = depthwise_spec({1, 19, 9, 8}, 3, 1, 1);
  rows3.params.stride = {3, 1};
  EXPECT_EQ(variant(rows3).depthwise.variant, DepthwiseVariant::blocked);
  Spec three_d = depthwise_spec({1, 7, 6, 9, 8}, 3, 1, 1);
  three_d.params.stride = {2, 1, 2};
  three_d.params.kernel_dilation = {2, 1, 1};
  EXPECT_EQ(variant(three_d).depthwise.variant, DepthwiseVariant::blocked);
}

TEST(ConvDepthwiseBlocked, ExtremeShapes) {
  // c = 70,000: 35,000 channel vectors in 1,094 tiles of 32; every limit holds.
  {
    const ConvProblem p = make_problem(depthwise_spec({1, 5, 5, 70000}, 3, 1, 1));
    const ConvConfig c = select_conv_config(p, kH200, request());
    SCOPED_TRACE(to_string(c));
    EXPECT_EQ(c.depthwise.variant, DepthwiseVariant::blocked);
    EXPECT_EQ(c.depthwise.cvt, 32);
    EXPECT_EQ(c.depthwise.channel_tiles, 1094);
    EXPECT_LE(c.block, kDepthwiseBlockedThreads);
    EXPECT_LE(int64_t{c.grid.x}, max_blocks(kH200));
    EXPECT_GE(int64_t{c.grid.x} * c.depthwise.tiles_per_block, c.depthwise.tiles());
  }
  // Multiplier 3 with c = 70,000 (210,000 outputs channels, 1 per thread).
  {
    const ConvProblem p = make_problem(depthwise_spec({1, 4, 4, 70000}, 3, 1, 1, 3));
    const ConvConfig c = select_conv_config(p, kH200, request());
    EXPECT_EQ(c.depthwise.variant, DepthwiseVariant::blocked) << to_string(c);
    EXPECT_EQ(c.vector, 1);
    EXPECT_EQ(c.depthwise.channel_vectors, 210000);
  }
  // 2^31 output positions in 2^17 small planes: 32-bit offsets inside a plane, tile counts past
  // 2^31 / 256 ride on tiles_per_block; the first and last tiles decode to the first and last
  // outputs.
  {
    const ConvProblem p = make_problem(depthwise_spec({int64_t{1} << 17, 128, 128, 2}, 3, 1, 1));
    EXPECT_EQ(p.out_positions(), int64_t{1} << 31);
    const ConvConfig c = select_conv_config(p, kH200, request());
    SCOPED_TRACE(to_string(c));
    ASSERT_EQ(c.depthwise.variant, DepthwiseVariant::blocked);
    const DepthwiseTiling& t = c.depthwise;
    const ConvGeometry g = normalize(p);
    EXPECT_LE(int64_t{c.grid.x}, max_blocks(kH200));
    EXPECT_GT(int64_t{c.grid.x}, max_blocks(kH200) * 99 / 100);
    EXPECT_GT(t.tiles_per_block, 1);
    EXPECT_GE(int64_t{c.grid.x} * t.tiles_per_block, t.tiles());
    EXPECT_LT((int64_t{c.grid.x} - 1) * t.tiles_per_block, t.tiles());
    const DepthwiseItem first = depthwise_item(g, t, 0, 0, 0);
    EXPECT_TRUE(first.valid);
    EXPECT_EQ(first.n, 0);
    EXPECT_EQ(first.d1, 0);
    EXPECT_EQ(first.ow0, 0);
    int64_t last_n = -1, reach_h = 0, reach_w = 0;
    for (int64_t ty = 0; ty < t.spb(); ++ty) {
      const DepthwiseItem item = depthwise_item(g, t, t.tiles() - 1, t.cvt - 1, ty);
      if (!item.valid) continue;
      last_n = std::max(last_n, item.n);
      reach_h = std::max(reach_h, item.d1 + t.th);
      reach_w = std::max(reach_w, item.ow0 + t.run);
    }
    EXPECT_EQ(last_n, g.batch - 1);
    EXPECT_GE(reach_h, g.out[1]);
    EXPECT_GE(reach_w, g.out[2]);
  }
  // One plane of 2^31 elements: the 32-bit offsets would not hold; the 64-bit window variants
  // serve it, saying why.
  {
    const ConvProblem p =
        make_problem(depthwise_spec({1, int64_t{1} << 15, int64_t{1} << 15, 2}, 3, 1, 1));
    const ConvConfig c = select_conv_config(p, kH200, request());
    EXPECT_NE(c.depthwise.variant, DepthwiseVariant::blocked);
    EXPECT_NE(c.reason.find("2^31"), std::string::npos) << c.reason;
    EXPECT_LE(int64_t{c.grid.x}, max_blocks(kH200));
  }
  // Every grid limit: a device allowing 7 blocks gets 7 blocks with more tiles each.
  {
    DeviceDescription tiny;
    tiny.max_grid_x = 7;
    const ConvConfig c =
        select_conv_config(make_problem(depthwise_spec({2, 30, 30, 64}, 3, 1, 1)), tiny, request());
    EXPECT_EQ(c.depthwise.variant, DepthwiseVariant::blocked);
    EXPECT_LE(c.grid.x, 7u);
    EXPECT_GE(int64_t{c.grid.x} * c.depthwise.tiles_per_block, c.depthwise.tiles());
    EXPECT_EQ(c.grid.y, 1u);
    EXPECT_EQ(c.grid.z, 1u);
  }
}

TEST(ConvDepthwiseBlocked, WeightStagingLoadWidth) {
  const auto bytes = [](const gemmkit_test::Spec& s, void* w = gemmkit_test::fake(0x20000000)) {
    const ConvConfig c = select_conv_config(make_problem(s, gemmkit_test::fake(0x10000000), w),
                                            kH200, request("depthwise"));
    EXPECT_EQ(c.depthwise.variant, DepthwiseVariant::blocked);
    return c.depthwise.w_vector_bytes;
  };
  // convnext-dw7x7-96: tiles of 32 channels x 49 taps x 2 bytes = 3136 bytes, 16-byte loads.
  EXPECT_EQ(bytes(depthwise_spec({8, 56, 56, 96}, 7, 1, 3)), 16);
  // mobilenet-dw3x3-144: 36 x 9 x 2 = 648 bytes per tile, a multiple of 8 only.
  EXPECT_EQ(bytes(depthwise_spec({8, 56, 56, 144}, 3, 1, 1)), 8);
  // w only 8-byte aligned: 8-byte loads; 2-byte aligned: element by element.
  EXPECT_EQ(bytes(depthwise_spec({8, 56, 56, 96}, 7, 1, 3), gemmkit_test::fake(0x20000008)), 8);
  EXPECT_EQ(bytes(depthwise_spec({8, 56, 56, 96}, 7, 1, 3), gemmkit_test::fake(0x20000002)), 0);
  // A channel multiplier (1 channel per thread) keeps the run layout.
  EXPECT_GT(bytes(depthwise_spec({2, 28, 28, 16}, 3, 1, 1, 2)), 0);
  // Taps not contiguous (a weight view with padded rows): element by element.
  {
    gemmkit_test::Spec s = depthwise_spec({2, 28, 28, 16}, 3, 1, 1);
    const ConvProblem p = make_problem(s);
    ConvProblem strided = p;
    strided.weight.strides[0] = 12;  // (o, 3, 3, 1) rows 12 apart: 3 unused elements per channel
    const ConvConfig c = select_conv_config(strided, kH200, request("depthwise"));
    EXPECT_EQ(c.depthwise.variant, DepthwiseVariant::blocked);
    EXPECT_EQ(c.depthwise.w_vector_bytes, 0);
    emulate_blocked(strided);
  }
}

// The shapes of GpuConv.DepthwiseAndSmallOKernelVariants (tests/gpu/conv/depthwise_test.cpp) reach
// the variants they are named for on an H200: both thread-tile heights, both vector widths, and the
// window variants for 1-D and for kernel widths the blocked variant does not take.
TEST(ConvDepthwiseBlocked, GpuTestShapesReachEveryVariant) {
  struct Case {
    Spec spec;
    DepthwiseVariant variant;
    int th, vector;
  };
  Spec multiplier = depthwise_spec({2, 13, 15, 12}, 3, 1, 1, 2);
  Spec k4 = depthwise_spec({2, 13, 23, 16}, 4, 2, 1);
  k4.params.padding_hi = {2};
  Spec k8 = depthwise_spec({1, 17, 19, 8}, 8, 1, 3);
  k8.params.padding_hi = {4};
  Spec k6 = depthwise_spec({2, 9, 45, 40}, 6, 2, 2);
  k6.params.padding_hi = {3};
  const Case cases[] = {
      {depthwise_spec({2, 30, 33, 96}, 7, 1, 3), DepthwiseVariant::blocked, 1, 2},
      {depthwise_spec({4, 96, 96, 128}, 7, 1, 3), DepthwiseVariant::blocked, 2, 2},
      {depthwise_spec({4, 64, 64, 256}, 3, 1, 1), DepthwiseVariant::blocked, 2, 2},
      {depthwise_spec({2, 17, 23, 40}, 3, 2, 1), DepthwiseVariant::blocked, 1, 2},
      {depthwise_spec({2, 12, 13, 7}, 3, 1, 1), DepthwiseVariant::blocked, 1, 1},
      {multiplier, DepthwiseVariant::blocked, 1, 1},
      {k4, DepthwiseVariant::narrow, 1, 8},
      {k8, DepthwiseVariant::wide, 1, 4},
      {k6, DepthwiseVariant::wide, 1, 4},
      {depthwise_spec({2, 53, 16}, 3, 2, 1), DepthwiseVariant::narrow, 1, 8},
  };
  for (const Case& k : cases) {
    const ConvConfig c = select_conv_config(make_problem(k.spec), kH200, request("depthwise"));
    SCOPED_TRACE(to_string(c));
    EXPECT_EQ(c.depthwise.variant, k.variant);
    EXPECT_EQ(c.depthwise.th, k.th);
    EXPECT_EQ(c.vector, k.vector);
  }
}

// ---- Emulation ---------------------------------------------------------------------------------

TEST(ConvDepthwiseBlocked, EmulationSuiteShapesScaledDown) {
  // The suite rows' geometry on fewer images and channels (edges and interior alike).
  emulate_blocked(make_problem(depthwise_spec({1, 56, 56, 8}, 7, 1, 3)));
  emulate_blocked(make_problem(depthwise_spec({1, 14, 14, 40}, 7, 1, 3)));
  emulate_blocked(make_problem(depthwise_spec({2, 28, 28, 18}, 3, 1, 1)));
  emulate_blocked(make_problem(depthwise_spec({2, 28, 28, 18}, 3, 2, 1)));
  emulate_blocked(make_problem(depthwise_spec({2, 15, 17, 70}, 3, 1, 1)));  // partial tiles
  emulate_blocked(make_problem(depthwise_spec({1, 15, 17, 46}, 7, 1, 3)));
  // 2-row thread tiles and multi-tile blocks (one SM).
  emulate_blocked(make_problem(depthwise_spec({1, 56, 56, 8}, 7, 1, 3)), one_sm());
  emulate_blocked(make_problem(depthwise_spec({2, 28, 28, 18}, 3, 2, 1)), one_sm());
}

TEST(ConvDepthwiseBlocked, EmulationEdgesOddSizesStridesMultipliers) {
  for (const DeviceDescription& dev : {kH200, one_sm()}) {
    for (const int64_t k : {3, 5, 7}) {
      for (const int64_t stride : {1, 2}) {
        // Odd sizes, c not a multiple of a warp's 64 channels, several column tiles.
        emulate_blocked(make_problem(depthwise_spec({2, 11, 19, 40}, k, stride, k / 2)), dev);
        // Narrower than a tile and than the kernel's padding reach.
        emulate_blocked(make_problem(depthwise_spec({1, 5, 3, 6}, k, stride, k / 2)), dev);
        // Multiplier 2 (1 channel per thread), odd c.
        emulate_blocked(make_problem(depthwise_spec({1, 9, 13, 5}, k, stride, k / 2, 2)), dev);
      }
    }
    // Asymmetric and negative padding, a row stride of 3, flip, f32.
    Spec s = depthwise_spec({1, 17, 23, 16}, 5, 2, 0);
    s.params.padding_lo = {3, -1};
    s.params.padding_hi = {0, 4};
    s.params.stride = {3, 2};
    emulate_blocked(make_problem(s), dev);
    s.params.flip = true;
    s.dtype = s.out_dtype = DType::f32;
    emulate_blocked(make_problem(s), dev);
    // 3-D: stride and kernel dilation along dim 0, bias, a 7-wide kernel on a 2-D slice.
    Spec v = depthwise_spec({2, 5, 6, 9, 6}, 3, 1, 1);
    v.w_shape = {6, 2, 3, 7, 1};
    v.params.stride = {2, 1, 1};
    v.params.kernel_dilation = {2, 1, 1};
    v.params.padding_lo = {1, 1, 3};
    v.params.padding_hi = {1, 1, 3};
    v.bias = true;
    emulate_blocked(make_problem(v), dev);
  }
}

}  // namespace
}  // namespace gemmkit::cuda::conv_impl
