// The configuration that path selection hands to a launcher (ConvConfig): the path, the reason,
// the launch geometry and each path's plan, and the text that logs and CallInfo::reason show.
// Pure and header-only.
#pragma once

#include <cstdint>
#include <sstream>
#include <string>

#include "cuda/conv/common/geometry.h"
#include "cuda/conv/common/names.h"
#include "cuda/conv/depthwise/layout.h"
#include "cuda/conv/implicit_gemm/layout.h"
#include "cuda/conv/implicit_gemm/wgmma_layout.h"
#include "cuda/conv/small_c/layout.h"
#include "cuda/conv/small_o/layout.h"
#include "cuda/conv/small_o/taps_layout.h"

namespace gemmkit::cuda::conv_impl {

constexpr int kDirectBlock = 256;

enum class ConvPath : int {
  direct = 0,
  depthwise = 1,
  small_o = 2,
  gemm_1x1 = 3,
  unfold_gemm = 4,
  cudnn = 5,
  implicit_gemm = 6,
  implicit_wgmma = 7,  // the Hopper implicit GEMM (TMA + wgmma)
  small_c = 8,         // c or c/groups <= 8: an implicit GEMM with K packed across taps
};

inline constexpr const char* kPathNames[] = {"direct",        "depthwise",      "small_o",
                                             "gemm_1x1",      "unfold_gemm",    "cudnn",
                                             "implicit_gemm", "implicit_wgmma", "small_c"};
inline const char* path_name(ConvPath path) {
  return enum_name(path, kPathNames);
}

// The CallInfo kernel name of a path.
inline std::string kernel_name(ConvPath path) {
  return std::string("cuda.conv.") + path_name(path);
}

// How a GEMM path adds the bias (always in fp32, to the fp32 GEMM result, before the one
// rounding to out's dtype).
enum class BiasMode : int {
  none = 0,
  // cuBLASLt's bias epilogue: 16-bit out, contiguous bias, 16-byte aligned output rows only. For
  // bf16 outputs with unaligned rows (odd o) cuBLASLt 13.0 rounds the product to bf16 before
  // adding the bias (two roundings); aligned rows round once.
  epilogue = 1,
  pass = 2,     // f32 out: the GEMM writes out, then a pass adds the bias in place
  scratch = 3,  // 16-bit out otherwise: the GEMM writes fp32 scratch in the workspace, then a
                // pass writes out = round(scratch + bias)
};

inline constexpr const char* kBiasModeNames[] = {"none", "epilogue", "pass", "scratch"};
inline const char* bias_mode_name(BiasMode mode) {
  return enum_name(mode, kBiasModeNames);
}

struct ConvConfig {
  ConvPath path = ConvPath::direct;
  std::string algo;    // the resolved request that chose the path
  std::string reason;  // why (CallInfo::reason)

  // Main kernel launch (the unfold kernel for unfold_gemm; the grid of its first, full chunk).
  int block = kDirectBlock;
  LaunchGrid grid;
  int64_t grid_cap = 1;    // most blocks of a grid-stride launch (later chunks' grids too)
  int vector = 1;          // elements per vector access (unfold, depthwise, small_o)
  int tile = 1;            // outputs per thread along the last spatial dim (depthwise)
  int lanes = 1;           // lanes sharing one output position group (small_o)
  int64_t smem_bytes = 0;  // dynamic shared memory of the main kernel
  DepthwiseTiling depthwise;
  SmallOTiling small_o;           // the tensor-core region kernel (mma) and the CUDA-core kernel
  SmallOTapsTiling small_o_taps;  // the taps kernel, when active
  ImplicitGemmPlan implicit;
  ImplicitWgmmaPlan implicit_wgmma;
  SmallCPlan small_c;

  // GEMM paths.
  int64_t workspace_budget = 0;     // bytes this call may use
  int64_t lt_workspace_bytes = 0;   // cuBLASLt scratch, part of the budget
  int64_t unfold_row_elements = 0;  // kernel_positions * c: one unfold row
  int64_t chunk_rows = 0;           // output positions per GEMM call
  int64_t chunks = 0;
  // Workspace layout of one chunk: [unfold | f32 scratch (BiasMode::scratch) | cuBLASLt], each
  // part starting at a multiple of kWorkspaceAlign.
  int64_t unfold_bytes = 0;    // unfold buffer (0 for gemm_1x1)
  int64_t scratch_offset = 0;  // f32 GEMM result [chunk_rows][o] (BiasMode::scratch)
  int64_t scratch_bytes = 0;
  int64_t lt_offset = 0;
  int64_t workspace_bytes = 0;  // what the launcher allocates: lt_offset + lt_workspace_bytes
  BiasMode bias = BiasMode::none;
  int64_t x_row_stride = 0;       // gemm_1x1: stride of the flat position in x (0: one position)
  int64_t out_row_stride = 0;     // stride of the flat position in out (0: one position)
  int64_t weight_row_stride = 0;  // stride of the output channel in the weight

  // cuDNN path of a transposed convolution (input dilation): cuDNN's backward-data of the
  // forward convolution it inverts (cudnn_dgrad_form), the weight first copied into the
  // workspace in the filter layout that operation reads (cudnn/dgrad_weight.cuh) — unless the
  // weight's strides already are that layout (dgrad_weight_in_place): then cuDNN reads it where
  // it is and nothing is copied.
  bool cudnn_dgrad = false;
  bool dgrad_weight_in_place = false;
  int64_t weight_t_offset = 0;  // the copied weight in the workspace
  int64_t weight_t_bytes = 0;   // 0 when read in place
};

// Why a path chosen for a call could not run it (run_gemm_path, run_cudnn_path return false).
// `pure`: the cause is a pure function of the problem, the workspace budget, the device and the
// libraries' versions (cuBLASLt has no algorithm, cuDNN has no engine or cannot describe the
// problem), so every process meets it on every call; else it depends on the process's state (an
// allocation, a handle, a failed execution). Deterministic mode falls back only on a pure cause
// (may_fall_back in select.h).
struct RunFailure {
  std::string why;
  bool pure = false;
};

// A configuration of `path` chosen under `algo` (ConvConfig::algo) for `reason`, every other field
// at its default.
inline ConvConfig config_of(ConvPath path, const std::string& algo, const std::string& reason) {
  ConvConfig c;
  c.path = path;
  c.algo = algo;
  c.reason = reason;
  return c;
}

inline std::string to_string(const ConvConfig& c) {
  std::ostringstream s;
  s << "path=" << path_name(c.path) << " algo=" << c.algo << " block=" << c.block << " grid=("
    << c.grid.x << "," << c.grid.y << "," << c.grid.z << ") vector=" << c.vector;
  if (c.path == ConvPath::depthwise) {
    const DepthwiseTiling& t = c.depthwise;
    s << " variant=" << depthwise_variant_name(t.variant) << " tile=" << t.th << "x" << t.run
      << " cvt=" << t.cvt << " block_tiles=" << t.rows_per_block << "x" << t.runs_per_block
      << " tiles=" << t.tiles() << " tiles_per_block=" << t.tiles_per_block
      << " smem=" << c.smem_bytes;
    if (t.variant == DepthwiseVariant::staged || t.variant == DepthwiseVariant::mma) {
      s << " registers=" << t.registers;
    }
    if (t.variant == DepthwiseVariant::blocked || t.variant == DepthwiseVariant::staged) {
      s << " w_vector_bytes=" << t.w_vector_bytes;
    }
  }
  if (c.path == ConvPath::small_o) {
    const SmallOTapsTiling& t = c.small_o_taps;
    if (t.active) {
      s << (t.tma_stages > 0 ? " small_o=taps_tma stages=" + std::to_string(t.tma_stages)
                             : std::string(" small_o=taps"))
        << " tile=" << t.tile_h << "x" << t.tile_w << " region=" << t.region_h << "x" << t.region_w
        << " m_tiles=" << t.m_tiles << " n_tiles=" << t.n_tiles << " y_stride=" << t.y_stride
        << " smem=" << c.smem_bytes << " blocks_per_sm=" << t.blocks_per_sm << " tiles=" << t.tiles
        << " tiles_per_block=" << t.tiles_per_block;
    } else if (c.small_o.mma) {
      s << " small_o=mma tile=" << c.small_o.tile_h << "x" << c.small_o.tile_w
        << " smem=" << c.smem_bytes;
    } else {
      s << " small_o=cuda lanes=" << c.lanes << " tile=" << c.tile;
    }
  }
  if (c.path == ConvPath::gemm_1x1 || c.path == ConvPath::unfold_gemm) {
    s << " chunk_rows=" << c.chunk_rows << " chunks=" << c.chunks
      << " unfold_bytes=" << c.unfold_bytes << " scratch_bytes=" << c.scratch_bytes
      << " lt_workspace=" << c.lt_workspace_bytes << " workspace=" << c.workspace_bytes << "/"
      << c.workspace_budget << " bias=" << bias_mode_name(c.bias);
  }
  s << " reason: " << c.reason;
  return s.str();
}

}  // namespace gemmkit::cuda::conv_impl
