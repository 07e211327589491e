// The GEMM paths: gemm_1x1 (a 1x1 kernel, stride 1, no padding: x is the GEMM operand as it is)
// and unfold_gemm (im2col into a bounded workspace, then one strided-batched cuBLASLt GEMM per
// chunk of output rows, batch = groups): whether they serve a problem, their chunking, workspace
// layout and bias mode. Pure host code.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/problems.h"
#include "cuda/conv/common/config.h"
#include "cuda/conv/common/occupancy.h"
#include "cuda/conv/common/operands.h"

namespace gemmkit::cuda::conv_impl {

// cuBLASLt's own scratch (split-k), carved out of the workspace budget: budget / 8, at most this.
constexpr int64_t kMaxLtWorkspaceBytes = int64_t{32} << 20;
// Largest element span of one operand of one cuBLASLt call: larger GEMMs are split into chunks
// of output rows, so no library index can wrap at 2^31.
constexpr int64_t kMaxGemmSpan = (int64_t{1} << 31) - 1;
// auto takes unfold+GEMM only when a chunk holds at least this many output rows (or all of
// them): smaller chunks would spend the time in per-call overhead.
constexpr int64_t kMinChunkRows = 256;
// Workspace buffers start at multiples of this (cuBLASLt's preferred alignment).
constexpr int64_t kWorkspaceAlign = 256;
// cuBLASLt calls: at most this many groups per batched call and output rows per call, so that
// no library grid dimension (65535 on y / z) can overflow whichever axis it tiles.
constexpr int64_t kMaxGemmBatch = 65535;
constexpr int64_t kMaxGemmRows = int64_t{1} << 21;

// Largest element offset + 1 that one GEMM operand touches: `batch` matrices `batch_stride`
// apart, each `cols` columns of `rows` elements, `ld` apart.
inline int64_t operand_span(int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                            int64_t batch_stride) {
  return (batch - 1) * batch_stride + (cols - 1) * ld + rows;
}

// Alignment (bytes) of every output row and group the GEMM writes when it writes out directly.
inline int out_row_alignment(const detail::ConvProblem& p, const ConvConfig& c) {
  const int64_t eo = elem_size(p.out.dtype);
  int alignment = pointer_alignment(p.out.data);
  if (c.out_row_stride > 0) {
    alignment =
        std::min(alignment, address_alignment(static_cast<uint64_t>(c.out_row_stride * eo)));
  }
  if (p.groups > 1) {
    alignment = std::min(alignment,
                         address_alignment(static_cast<uint64_t>(p.out_channels_per_group * eo)));
  }
  return alignment;
}

// Conditions shared by both GEMM paths (weight and out as matrices, the bias); fills the layout
// fields and the bias mode of `c`.
inline std::string why_not_gemm_common(const detail::ConvProblem& p, ConvConfig& c) {
  if (p.groups > kMaxGemmBatch) {
    return "groups = " + std::to_string(p.groups) + " > " + std::to_string(kMaxGemmBatch) +
           " (one batched GEMM call)";
  }
  c.weight_row_stride = weight_row_stride(p);
  if (c.weight_row_stride < 0) {
    return "the weight is not a matrix of contiguous rows (o, kernel * c/groups)";
  }
  const int64_t k = p.kernel_positions() * p.in_channels_per_group;
  if (operand_span(k, p.out_channels_per_group, c.weight_row_stride, p.groups,
                   p.out_channels_per_group * c.weight_row_stride) > kMaxGemmSpan) {
    return "the weight spans more than 2^31 - 1 elements";
  }
  if (channel_stride(p.out) != 1 && p.out_channels > 1) return "out's channel stride is not 1";
  c.out_row_stride = position_stride(p.out);
  if (c.out_row_stride < 0) return "out's batch and spatial dims do not merge into one stride";
  if (c.out_row_stride != 0 && c.out_row_stride < p.out_channels) {
    return "out's positions overlap";
  }
  if (!p.has_bias) {
    c.bias = BiasMode::none;
  } else if (p.out.dtype == DType::f32) {
    c.bias = BiasMode::pass;
  } else if ((p.bias.strides[0] == 1 || p.out_channels == 1) && out_row_alignment(p, c) >= 16) {
    c.bias = BiasMode::epilogue;
  } else {
    c.bias = BiasMode::scratch;
  }
  return "";
}

// Rows per GEMM call so that an operand of `rows` rows `row_stride` apart, whose last row spans
// `fixed` elements (all groups), stays within kMaxGemmSpan: (rows - 1) * row_stride + fixed.
inline int64_t rows_within_span(int64_t row_stride, int64_t fixed) {
  if (row_stride <= 0) return int64_t{1} << 62;  // one position: no row stride involved
  if (fixed > kMaxGemmSpan) return 0;
  return (kMaxGemmSpan - fixed) / row_stride + 1;
}

inline int64_t lt_workspace_for(int64_t budget) {
  const int64_t lt = std::min(kMaxLtWorkspaceBytes, budget / 8);
  return lt / kWorkspaceAlign * kWorkspaceAlign;
}

// Chunking and workspace layout of a GEMM path: each output row needs `unfold_row_bytes` of
// unfold (0 for gemm_1x1) and, with BiasMode::scratch, o * 4 bytes of fp32 scratch; the rest
// of the budget after cuBLASLt's share, less alignment slack, bounds the rows of a chunk, as
// do kMaxGemmRows and `span_rows`.
inline std::string plan_chunks(const detail::ConvProblem& p, int64_t budget,
                               int64_t unfold_row_bytes, int64_t span_rows, ConvConfig& c) {
  c.workspace_budget = budget;
  c.lt_workspace_bytes = lt_workspace_for(budget);
  const int64_t scratch_row_bytes = c.bias == BiasMode::scratch ? p.out_channels * 4 : 0;
  const int64_t row_bytes = unfold_row_bytes + scratch_row_bytes;
  int64_t rows = std::min(kMaxGemmRows, span_rows);
  if (row_bytes > 0) {
    const int64_t available = budget - c.lt_workspace_bytes - 2 * kWorkspaceAlign;
    const int64_t by_workspace = available > 0 ? available / row_bytes : 0;
    if (by_workspace < 1) {
      return "the workspace (" + std::to_string(budget) + " bytes, " +
             std::to_string(c.lt_workspace_bytes) + " of them cuBLASLt's) cannot hold one row (" +
             std::to_string(unfold_row_bytes) + " bytes of unfold, " +
             std::to_string(scratch_row_bytes) + " of f32 scratch)";
    }
    rows = std::min(rows, by_workspace);
  }
  if (rows < 1) return "one output row spans more than 2^31 - 1 elements";
  c.chunk_rows = std::min(rows, p.out_positions());
  c.chunks = ceil_div(p.out_positions(), c.chunk_rows);
  c.unfold_bytes = c.chunk_rows * unfold_row_bytes;
  c.scratch_offset = round_up(c.unfold_bytes, kWorkspaceAlign);
  c.scratch_bytes = c.chunk_rows * scratch_row_bytes;
  c.lt_offset = c.scratch_offset + round_up(c.scratch_bytes, kWorkspaceAlign);
  c.workspace_bytes = c.lt_offset + c.lt_workspace_bytes;
  return "";
}

inline std::string why_not_gemm_1x1(const detail::ConvProblem& p, const DeviceDescription& dev,
                                    int64_t budget, ConvConfig& c) {
  for (int d = 0; d < p.spatial; ++d) {
    if (p.kernel_size[d] != 1) return "the kernel is not 1x1";
    if (p.stride[d] != 1) return "a stride is not 1";
    if (p.padding_lo[d] != 0 || p.padding_hi[d] != 0) return "there is padding";
    if (p.input_dilation[d] != 1) return "an input dilation is not 1";
  }
  if (channel_stride(p.x) != 1 && p.in_channels > 1) return "x's channel stride is not 1";
  c.x_row_stride = position_stride(p.x);
  if (c.x_row_stride < 0) return "x's batch and spatial dims do not merge into one stride";
  if (c.x_row_stride != 0 && c.x_row_stride < p.in_channels) return "x's positions overlap";
  const std::string common = why_not_gemm_common(p, c);
  if (!common.empty()) return common;
  // B spans (rows - 1) * ldb + c elements, D (rows - 1) * ldd + o.
  const int64_t span_rows = std::min(rows_within_span(c.x_row_stride, p.in_channels),
                                     rows_within_span(c.out_row_stride, p.out_channels));
  const std::string plan = plan_chunks(p, budget, 0, span_rows, c);
  if (!plan.empty()) return plan;
  c.unfold_row_elements = 0;
  c.block = 256;  // the bias pass, when there is one
  c.grid_cap = max_blocks(dev);
  c.grid = grid_for(c.chunk_rows * p.out_channels, c.block, c.grid_cap);
  return "";
}

inline std::string why_not_unfold(const detail::ConvProblem& p, const DeviceDescription& dev,
                                  int64_t budget, ConvConfig& c) {
  const std::string common = why_not_gemm_common(p, c);
  if (!common.empty()) return common;
  const int64_t row = p.kernel_positions() * p.in_channels;  // [groups][taps][c/groups]
  if (row > kMaxGemmSpan) return "one unfold row has more than 2^31 - 1 elements";
  c.unfold_row_elements = row;
  // B spans (rows - 1) * row + row elements, D (rows - 1) * ldd + o.
  const int64_t span_rows =
      std::min(rows_within_span(row, row), rows_within_span(c.out_row_stride, p.out_channels));
  const std::string plan = plan_chunks(p, budget, row * elem_size(p.x.dtype), span_rows, c);
  if (!plan.empty()) return plan;
  c.vector = vector_width_for(p, p.in_channels_per_group);
  c.block = 256;
  c.grid_cap = max_blocks(dev);
  c.grid = grid_for(c.chunk_rows * (row / c.vector), c.block, c.grid_cap);
  return "";
}

}  // namespace gemmkit::cuda::conv_impl
