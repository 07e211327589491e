// Eligibility of the Hopper implicit-GEMM convolution kernel (wgmma.cuh): whether it can serve a
// problem on a device (why_not_implicit_wgmma says why not), and whether a plan's epilogue can
// store by TMA. Pure and header-only (no CUDA header), for the host tests as for the dispatcher.
#pragma once

#include <cstdint>
#include <string>

#include "common/problems.h"
#include "cuda/conv/common/occupancy.h"
#include "cuda/conv/common/operands.h"
#include "cuda/conv/implicit_gemm/layout.h"
#include "cuda/conv/implicit_gemm/wgmma_layout.h"

namespace gemmkit::cuda::conv_impl {

// Whether every stride of t past the channel dim is a multiple of 16 bytes (8 elements) and below
// 2^40 bytes, as TMA needs (strides of extent-1 dims are not read).
inline bool tma_strides_ok(const Tensor& t) {
  for (int d = 0; d + 1 < t.rank; ++d) {
    if (t.shape[d] == 1) continue;
    if (t.strides[d] % 8 != 0 || t.strides[d] <= 0 || t.strides[d] >= (int64_t{1} << 39)) {
      return false;
    }
  }
  return true;
}

// "" when the wgmma implicit-GEMM kernel can serve the problem on `dev`, else why not.
inline std::string why_not_implicit_wgmma(const detail::ConvProblem& p,
                                          const DeviceDescription& dev) {
  if (dev.sm_major != 9 || dev.sm_minor != 0) {
    return "built for sm_90a (TMA and wgmma), the device is sm_" + std::to_string(dev.sm_major) +
           std::to_string(dev.sm_minor);
  }
  const std::string no_mma = why_not_16bit_mma(p, dev.sm_major, dev.sm_minor);
  if (!no_mma.empty()) return no_mma;
  if (p.in_channels_per_group % 8 != 0) {
    return "c/groups (" + std::to_string(p.in_channels_per_group) +
           ") is not a multiple of 8 (TMA rows of 16 bytes)";
  }
  if (p.groups > 1 && p.in_channels_per_group % kWgmmaConvBlockK != 0) {
    return "groups > 1 with c/groups (" + std::to_string(p.in_channels_per_group) +
           ") not a multiple of 64 (a channel block would read the next group's channels)";
  }
  const ConvGeometry g = normalize(p);
  int64_t phases = 1;
  for (int d = 0; d < kDims; ++d) {
    if (g.idil[d] == 1) continue;
    if (g.stride[d] != 1) {
      return "input dilation with a stride above 1 (dim " + std::to_string(d) + ")";
    }
    phases *= g.idil[d];
    if (phases > kWgmmaConvMaxPhases) {
      return "input dilation of more than " + std::to_string(kWgmmaConvMaxPhases) +
             " stride phases";
    }
    for (int64_t ph = 0; ph < g.idil[d]; ++ph) {
      if (wgmma_conv_phase_dim(g, d, ph).taps == 0) {
        return "a stride phase of the input dilation (dim " + std::to_string(d) +
               ") meets no input element (kernel dilation and input dilation share a factor)";
      }
    }
  }
  for (int d = 0; d < p.spatial; ++d) {
    if (p.stride[d] > kWgmmaConvMaxStride) {
      return "stride " + std::to_string(p.stride[d]) + " in dim " + std::to_string(d) +
             " exceeds TMA's traversal stride limit (8)";
    }
    if (const std::string e = implicit_extent_past_max_coord(p, d); !e.empty()) {
      return "a spatial extent (" + e + ") reaches 2^29 (TMA box coordinates are 32-bit)";
    }
  }
  if (p.batch >= (int64_t{1} << 31) || p.out_channels >= (int64_t{1} << 31) - kWgmmaConvBlockO) {
    return "the batch or o reaches 2^31 (TMA box coordinates are 32-bit)";
  }
  if (channel_stride(p.x) != 1) return "x's channel stride is not 1";
  if (channel_stride(p.weight) != 1) return "the weight's channel stride is not 1";
  if (pointer_alignment(p.x.data) < 16) return "x is not 16-byte aligned";
  if (pointer_alignment(p.weight.data) < 16) return "the weight is not 16-byte aligned";
  if (!tma_strides_ok(p.x)) {
    return "an x stride is not a positive multiple of 8 elements below 2^39 (TMA)";
  }
  if (!tma_strides_ok(p.weight)) {
    return "a weight stride is not a positive multiple of 8 elements below 2^39 (TMA)";
  }
  const int64_t k_blocks =
      p.kernel_positions() * ceil_div(p.in_channels_per_group, kWgmmaConvHalfBlockK);
  if (k_blocks >= (int64_t{1} << 31)) return "the reduction's k blocks reach 2^31";
  const int64_t most_smem = implicit_wgmma_smem_bytes(256, implicit_wgmma_stages(256), true);
  if (dev.shared_per_block_optin < most_smem) {
    return "needs " + std::to_string(most_smem) +
           " bytes of shared memory per block, the device allows " +
           std::to_string(dev.shared_per_block_optin);
  }
  return "";
}

// Whether the epilogue of plan t (its tiles and out view chosen) can store by TMA: 16-bit out
// with unit channel stride, the view's first element 16-byte aligned, its position strides
// positive multiples of 8 elements below 2^39, and every 64-channel store box within one group
// (boxes that start past the group's channels are not stored).
inline bool implicit_wgmma_can_store_by_tma(const detail::ConvProblem& p,
                                            const ImplicitWgmmaPlan& t) {
  if (p.out.dtype != DType::bf16 && p.out.dtype != DType::f16) return false;
  if (channel_stride(p.out) != 1) return false;
  if (t.groups > 1 && t.opg % 64 != 0) return false;
  const uint64_t first = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p.out.data)) +
                         static_cast<uint64_t>(t.out_base) * 2;
  if (address_alignment(first) < 16) return false;
  const int64_t extents[kDims + 1] = {t.batch, t.out[0], t.out[1], t.out[2]};
  for (int d = 0; d <= kDims; ++d) {
    const int64_t stride = t.out_stride[d];
    if (extents[d] > 1 && (stride <= 0 || stride % 8 != 0 || stride >= (int64_t{1} << 39))) {
      return false;
    }
  }
  return true;
}

// The store box of a tile box (d, h, w extents, powers of two whose product is at least
// kWgmmaConvStoreChunk): the first kWgmmaConvStoreChunk positions in the box's order.
inline void implicit_wgmma_store_box(const int32_t (&tile)[kDims], int32_t (&box)[kDims]) {
  int32_t left = kWgmmaConvStoreChunk;
  for (int d = kDims - 1; d >= 0; --d) {
    box[d] = std::min(tile[d], left);
    left /= box[d];
  }
}

}  // namespace gemmkit::cuda::conv_impl
