// The paths of the CUDA convolution: whether each can serve a problem, with which launch
// geometry, chunking and workspace (the choice between them: conv_select.h). Pure and
// header-only (no CUDA header): the host unit tests include it directly, also in builds without
// CUDA.
//
// Paths (docs/conv.md has the full rules):
//   direct       generic direct kernel, any problem, any strides ("reference" forces it)
//   depthwise    groups == c (any channel multiplier), unit channel strides
//   small_o      o <= 8, groups == 1, unit channel stride of x: the tap-GEMM kernel (tensor
//                cores, one 1x1 GEMM by every tap's weights, then a shift-add), else the older
//                tensor-core region kernel, else the CUDA-core kernel (GEMMKIT_CONV_SMALL_O)
//   gemm_1x1     1x1 kernel, stride 1, no padding, no dilation: x is the GEMM operand as it is
//   unfold_gemm  im2col into a bounded workspace, then one strided-batched cuBLASLt GEMM per
//                chunk of output rows (batch = groups)
//   implicit_gemm  tensor-core GEMM gathering the input patches itself (conv_implicit_config.h)
//   cudnn        cuDNN's graph API (conv_cudnn.h), where it is faster
#pragma once

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>

#include "api/validate.h"
#include "common/problems.h"
#include "cuda/conv/conv_geometry.h"
#include "cuda/conv/conv_implicit_plan.h"

namespace gemmkit::cuda::conv_impl {

constexpr const char* kOp = "conv";
// Temporary device memory of a call when neither options.workspace_bytes nor
// GEMMKIT_CONV_WORKSPACE_MB says otherwise.
constexpr int64_t kDefaultWorkspaceBytes = int64_t{256} << 20;
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
constexpr int kDirectBlock = 256;
// Grid-stride kernels get at most this many blocks per multiprocessor.
constexpr int64_t kBlocksPerSm = 16;
// Small-o kernel: largest o it serves.
constexpr int64_t kSmallOMax = kSmallOMaxO;
// Shared memory a conv kernel may use without opting in (the default per-block limit); the
// implicit GEMM and the small-o taps kernel opt in to more.
constexpr int64_t kMaxKernelSmem = 48 * 1024;
// cuBLASLt calls: at most this many groups per batched call and output rows per call, so that
// no library grid dimension (65535 on y / z) can overflow whichever axis it tiles.
constexpr int64_t kMaxGemmBatch = 65535;
constexpr int64_t kMaxGemmRows = int64_t{1} << 21;

// What selection needs to know about the device (from DeviceProperties, or made up in tests).
struct DeviceDescription {
  int sm_major = 9, sm_minor = 0;
  int multiprocessors = 132;
  int64_t max_grid_x = kMaxGridX;
  int64_t max_grid_y = kMaxGridYZ, max_grid_z = kMaxGridYZ;
  int64_t shared_per_block_optin = 227 * 1024;
  int64_t shared_per_multiprocessor = 228 * 1024;
  // cuDNN built in and usable on this device (conv_cudnn.h); when not, why not.
  bool cudnn = false;
  std::string cudnn_why_not = "cuDNN not built (configure found no cuDNN)";
};

enum class ConvPath : int {
  direct = 0,
  depthwise = 1,
  small_o = 2,
  gemm_1x1 = 3,
  unfold_gemm = 4,
  cudnn = 5,
  implicit_gemm = 6,
};

inline const char* path_name(ConvPath path) {
  switch (path) {
    case ConvPath::direct:
      return "direct";
    case ConvPath::depthwise:
      return "depthwise";
    case ConvPath::small_o:
      return "small_o";
    case ConvPath::gemm_1x1:
      return "gemm_1x1";
    case ConvPath::unfold_gemm:
      return "unfold_gemm";
    case ConvPath::cudnn:
      return "cudnn";
    case ConvPath::implicit_gemm:
      return "implicit_gemm";
  }
  return "?";
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
  // bf16 outputs with unaligned rows (odd o) cuBLASLt 13.0 on an H200 was seen to round the
  // product to bf16 before adding the bias (two roundings); aligned rows round once.
  epilogue = 1,
  pass = 2,     // f32 out: the GEMM writes out, then a pass adds the bias in place
  scratch = 3,  // 16-bit out otherwise: the GEMM writes fp32 scratch in the workspace, then a
                // pass writes out = round(scratch + bias)
};

inline const char* bias_mode_name(BiasMode mode) {
  switch (mode) {
    case BiasMode::none:
      return "none";
    case BiasMode::epilogue:
      return "epilogue";
    case BiasMode::pass:
      return "pass";
    case BiasMode::scratch:
      return "scratch";
  }
  return "?";
}

// The caller's request after options and environment were resolved.
struct ConvRequest {
  std::string algo = "auto";                 // auto | cudnn | direct | depthwise | gemm | reference
  std::string algo_origin = "options.algo";  // the name errors give the algo setting
  int64_t workspace_bytes = kDefaultWorkspaceBytes;
  // Whether auto may pick cuDNN (GEMMKIT_CONV_CUDNN=0 turns it off: own paths only).
  bool cudnn_in_auto = true;
  // The first small-o kernel the small-o path may take (GEMMKIT_CONV_SMALL_O): "auto" (the taps
  // kernel's TMA form with >= kSmallOTapsTmaMinTilesPerBlock tiles per block, else its register
  // form, else mma, else cuda), "tma" (the TMA form wherever it applies, then as auto), "taps"
  // (the register form, else mma, else cuda), "mma" (mma, else cuda) or "cuda" (CUDA-core only).
  std::string small_o = "auto";
  // The depthwise variant the depthwise path may take (GEMMKIT_CONV_DEPTHWISE): "auto" (the
  // tensor-core variant where it was measured faster, why_not_depthwise_mma_by_default; else
  // staged, else blocked, else the window / generic variants), "mma" (the tensor-core variant
  // wherever it applies, else as auto), "staged" (never the tensor-core variant: the direct
  // kernel's bits) or "blocked" (neither the tensor-core nor the staged variant).
  std::string depthwise = "auto";
};

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
  // workspace in the filter layout that operation reads (conv_dgrad_weight.cuh) — unless the
  // weight's strides already are that layout (dgrad_weight_in_place): then cuDNN reads it where
  // it is and nothing is copied.
  bool cudnn_dgrad = false;
  bool dgrad_weight_in_place = false;
  int64_t weight_t_offset = 0;  // the copied weight in the workspace
  int64_t weight_t_bytes = 0;   // 0 when read in place
};

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
    if (t.variant == kDepthwiseStaged || t.variant == kDepthwiseMma) {
      s << " registers=" << t.registers;
    }
    if (t.variant == kDepthwiseBlocked || t.variant == kDepthwiseStaged) {
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

// ---- Options and environment ----------------------------------------------------------------

inline bool is_known_algo(const std::string& algo) {
  return algo == "auto" || algo == "cudnn" || algo == "direct" || algo == "depthwise" ||
         algo == "gemm" || algo == "implicit" || algo == "reference";
}

constexpr const char* kAlgoNames = "auto, cudnn, direct, depthwise, gemm, implicit, reference";

inline bool is_depthwise_variant(const std::string& v) {
  return v == "auto" || v == "mma" || v == "staged" || v == "blocked";
}

inline bool is_small_o_variant(const std::string& v) {
  return v == "auto" || v == "tma" || v == "taps" || v == "mma" || v == "cuda";
}

// options.algo if set, else GEMMKIT_CONV_ALGO's value `env` if set, else "auto". Unknown names
// are an Error naming where the value came from. `env_cudnn` is GEMMKIT_CONV_CUDNN: "" or "1"
// lets auto use cuDNN, "0" keeps auto on the own paths; anything else is an Error.
// `env_small_o` is GEMMKIT_CONV_SMALL_O ("" = auto; else auto | tma | taps | mma | cuda),
// `env_depthwise` GEMMKIT_CONV_DEPTHWISE ("" = auto; else auto | mma | staged | blocked).
inline ConvRequest resolve_request(const std::string& option_algo, const std::string& env_algo,
                                   int64_t option_workspace, const std::string& env_workspace_mb,
                                   const std::string& env_cudnn = "",
                                   const std::string& env_small_o = "",
                                   const std::string& env_depthwise = "") {
  ConvRequest r;
  if (!option_algo.empty()) {
    r.algo = option_algo;
  } else if (!env_algo.empty()) {
    r.algo = env_algo;
    r.algo_origin = "options.algo (from GEMMKIT_CONV_ALGO)";
  }
  if (!is_known_algo(r.algo)) {
    detail::fail(kOp, r.algo_origin, "'" + r.algo + "': must be one of " + kAlgoNames);
  }
  r.cudnn_in_auto = detail::parse_switch(kOp, "GEMMKIT_CONV_CUDNN", env_cudnn);
  if (!env_small_o.empty()) {
    if (!is_small_o_variant(env_small_o)) {
      detail::fail(kOp, "GEMMKIT_CONV_SMALL_O",
                   "'" + env_small_o + "': must be one of auto, tma, taps, mma, cuda");
    }
    r.small_o = env_small_o;
  }
  if (!env_depthwise.empty()) {
    if (!is_depthwise_variant(env_depthwise)) {
      detail::fail(kOp, "GEMMKIT_CONV_DEPTHWISE",
                   "'" + env_depthwise + "': must be one of auto, mma, staged, blocked");
    }
    r.depthwise = env_depthwise;
  }
  if (option_workspace >= 0) {
    r.workspace_bytes = option_workspace;
  } else if (!env_workspace_mb.empty()) {
    constexpr int64_t kMaxMib = int64_t{1} << 30;  // 2^50 bytes: far above any device
    const std::optional<int64_t> mib = detail::parse_whole_number(env_workspace_mb, 10);
    if (!mib || *mib > kMaxMib) {
      detail::fail(kOp, "GEMMKIT_CONV_WORKSPACE_MB",
                   "'" + env_workspace_mb + "': must be a whole number of MiB in [0, 2^30]");
    }
    r.workspace_bytes = *mib << 20;
  }
  return r;
}

// GEMMKIT_CONV_CUDNN_AUTOTUNE: "" or "1" times cuDNN's top engines on the first call of a shape
// (outside stream capture), "0" takes the heuristic's first; anything else is an Error.
inline bool parse_cudnn_autotune(const std::string& env_value) {
  return detail::parse_switch(kOp, "GEMMKIT_CONV_CUDNN_AUTOTUNE", env_value);
}

// ---- Eligibility: "" when the path can serve the problem, else why not -------------------

// Cap of the grid-stride kernels' grids.
inline int64_t max_blocks(const DeviceDescription& dev) {
  return std::min<int64_t>(dev.max_grid_x, int64_t{dev.multiprocessors} * kBlocksPerSm);
}

// Blocks of `threads` threads at `registers` per thread that one SM's register file holds, as
// cuda_occupancy.h counts them: 64 K registers in 4 sub-partitions of 16 K, and each warp takes
// its registers (rounded up to units of 256) from one sub-partition. So at 96 per thread an SM
// holds 4 x 5 = 20 warps (2 blocks of 7, not the 3 that 65536 / (96 x 224) suggests); at 80,
// 24 warps.
constexpr int64_t kRegistersPerSm = 65536;
constexpr int64_t kSmSubPartitions = 4;
constexpr int64_t kRegisterAllocationUnit = 256;
inline int64_t blocks_per_sm_by_registers(int64_t registers, int64_t threads) {
  const int64_t per_warp =
      ceil_div(registers * 32, kRegisterAllocationUnit) * kRegisterAllocationUnit;
  const int64_t warps_per_sm = kRegistersPerSm / kSmSubPartitions / per_warp * kSmSubPartitions;
  return warps_per_sm / ceil_div(threads, int64_t{32});
}

// Blocks of `threads` threads at `registers` per thread and `smem_bytes` of dynamic shared memory
// that one SM holds: its threads, registers (blocks_per_sm_by_registers), shared memory with the
// driver's 1 KiB per block, and 32 blocks.
inline int64_t resident_blocks_per_sm(const DeviceDescription& dev, int64_t threads,
                                      int64_t registers, int64_t smem_bytes) {
  return std::min({int64_t{2048} / threads, blocks_per_sm_by_registers(registers, threads),
                   dev.shared_per_multiprocessor / (smem_bytes + 1024), int64_t{32}});
}

inline int64_t elem_size(DType dtype) {
  return static_cast<int64_t>(dtype_size(dtype));
}

inline int64_t channel_stride(const Tensor& t) {
  return t.strides[t.rank - 1];
}

// Whether every stride of t but the last (channels) is a multiple of v elements, dims of size 1
// aside: vectors of v channels then start at multiples of v at every position.
inline bool outer_strides_multiple_of(const Tensor& t, int64_t v) {
  for (int i = 0; i + 1 < t.rank; ++i) {
    if (t.shape[i] != 1 && t.strides[i] % v != 0) return false;
  }
  return true;
}

inline std::string why_not_depthwise(const detail::ConvProblem& p) {
  if (p.groups != p.in_channels || p.in_channels_per_group != 1) {
    return "groups (" + std::to_string(p.groups) + ") != c (" + std::to_string(p.in_channels) + ")";
  }
  if (channel_stride(p.x) != 1 && p.in_channels > 1) return "x's channel stride is not 1";
  if (channel_stride(p.out) != 1 && p.out_channels > 1) return "out's channel stride is not 1";
  if (p.kernel_positions() * 4 > kMaxKernelSmem) {
    return "the kernel has more than " + std::to_string(kMaxKernelSmem / 4) + " taps";
  }
  return "";
}

// The small-o kernel's shared-memory copy of the weight: o * taps * c elements of x's type.
inline int64_t small_o_weight_bytes(const detail::ConvProblem& p) {
  return p.out_channels * p.kernel_positions() * p.in_channels * elem_size(p.x.dtype);
}

// Why the tensor-core small-o kernels cannot read x as 16-byte loads of 8 16-bit channels at
// every pixel ("" when they can): 16-bit x with unit channel stride, c % 8 == 0, a 16-byte
// aligned base and other strides multiples of 8 elements.
inline std::string why_not_x_channel_octets(const detail::ConvProblem& p) {
  if (p.x.dtype == DType::f32) return "f32 x (no 16-bit MMA operands)";
  if (channel_stride(p.x) != 1 && p.in_channels > 1) return "x's channel stride is not 1";
  if (p.in_channels % 8 != 0) return "c % 8 != 0";
  if (pointer_alignment(p.x.data) < 16) return "x is not 16-byte aligned";
  if (!outer_strides_multiple_of(p.x, 8)) return "x's strides are not multiples of 8 elements";
  return "";
}

// Whether the tensor-core small-o kernel serves p: x read as 8-channel (16-byte) vectors
// (why_not_x_channel_octets) and a geometry plan_small_o_mma accepts; fills its tiling.
inline bool small_o_mma_fits(const detail::ConvProblem& p, SmallOTiling& t) {
  return why_not_x_channel_octets(p).empty() &&
         plan_small_o_mma(normalize(p), kMaxKernelSmem, t).empty();
}

// Whether the taps kernel serves p (o and groups checked by why_not_small_o): "" and its tiling,
// else why not. Needs x read as 16-byte loads of 8 channels at every pixel
// (why_not_x_channel_octets) and a geometry plan_small_o_taps accepts; out, weight and bias may
// have any strides.
inline std::string why_not_small_o_taps(const detail::ConvProblem& p, const DeviceDescription& dev,
                                        SmallOTapsTiling& t) {
  t = SmallOTapsTiling{};
  const std::string no_octets = why_not_x_channel_octets(p);
  if (!no_octets.empty()) return no_octets;
  return plan_small_o_taps(normalize(p), dev.multiprocessors, dev.shared_per_block_optin,
                           dev.shared_per_multiprocessor, t);
}

// Whether the TMA form of the taps kernel serves p: "" and its tiling (tma_stages > 0), else why
// not (the register form's x rule, then plan_small_o_taps_tma).
inline std::string why_not_small_o_taps_tma(const detail::ConvProblem& p,
                                            const DeviceDescription& dev, SmallOTapsTiling& t) {
  t = SmallOTapsTiling{};
  const std::string no_octets = why_not_x_channel_octets(p);
  if (!no_octets.empty()) return no_octets;
  if (dev.sm_major < 9) return "no TMA before sm_90";
  return plan_small_o_taps_tma(normalize(p), dev.multiprocessors, dev.shared_per_block_optin, t);
}

// Whether the small-o path serves p with a kernel that `variant` (ConvRequest::small_o) allows.
inline std::string why_not_small_o(const detail::ConvProblem& p, const DeviceDescription& dev,
                                   const std::string& variant = "auto") {
  if (p.out_channels > kSmallOMax) {
    return "o = " + std::to_string(p.out_channels) + " > " + std::to_string(kSmallOMax);
  }
  if (p.groups != 1) return "groups = " + std::to_string(p.groups) + " != 1";
  if (channel_stride(p.x) != 1 && p.in_channels > 1) return "x's channel stride is not 1";
  SmallOTapsTiling taps;
  if ((variant == "auto" || variant == "tma" || variant == "taps") &&
      why_not_small_o_taps(p, dev, taps).empty()) {
    return "";
  }
  SmallOTiling mma;
  if (variant != "cuda" && small_o_mma_fits(p, mma)) return "";
  if (small_o_weight_bytes(p) > kMaxKernelSmem) {
    return "the weight (" + std::to_string(small_o_weight_bytes(p)) + " bytes) does not fit in " +
           std::to_string(kMaxKernelSmem / 1024) + " KiB of shared memory" +
           (variant == "auto" ? "" : " (GEMMKIT_CONV_SMALL_O=" + variant + ")");
  }
  return "";
}

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

inline int64_t round_up(int64_t value, int64_t multiple) {
  return ceil_div(value, multiple) * multiple;
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

// Widest vector (elements) for copying runs of `run` channels of x with unit channel stride:
// 16, 8 or 4 bytes when the run, every other stride of x and its address allow it.
inline int vector_width_for(const detail::ConvProblem& p, int64_t run) {
  const int64_t esize = elem_size(p.x.dtype);
  if (channel_stride(p.x) != 1 && p.in_channels > 1) return 1;
  const int alignment = pointer_alignment(p.x.data);
  for (int64_t bytes = 16; bytes > esize; bytes /= 2) {
    const int64_t v = bytes / esize;
    if (run % v == 0 && alignment >= bytes && outer_strides_multiple_of(p.x, v)) {
      return static_cast<int>(v);
    }
  }
  return 1;
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

// ---- Configurations of each path ------------------------------------------------------------

inline ConvConfig direct_config(const detail::ConvProblem& p, const DeviceDescription& dev,
                                const std::string& algo, const std::string& reason) {
  ConvConfig c;
  c.path = ConvPath::direct;
  c.algo = algo;
  c.reason = reason;
  c.block = kDirectBlock;
  c.grid_cap = max_blocks(dev);
  c.grid = grid_for(p.out_positions() * p.out_channels, c.block, c.grid_cap);
  return c;
}

// Why the blocked depthwise variant cannot serve p ("" when it can): it needs 2 or 3 spatial dims,
// kernel width 3, 5 or 7 with stride 1 or 2 along the last dim, no kernel or input dilation along
// the last two dims (dim 0 of a 3-D problem: anything), weight taps one stride apart and 32-bit
// offsets inside a plane (depthwise_blocked_offsets_fit).
inline std::string why_not_depthwise_blocked(const detail::ConvProblem& p, const ConvGeometry& g,
                                             const DepthwiseTiling& t) {
  if (p.spatial < 2) return "one spatial dim (the window variants serve it)";
  for (int d = 1; d < kDims; ++d) {
    if (g.kdil[d] != 1 || g.idil[d] != 1) {
      return "a kernel or input dilation along the last two spatial dims";
    }
  }
  if (g.stride[2] > 2) return "a stride > 2 along the last dim";
  if (g.kernel[2] != 3 && g.kernel[2] != 5 && g.kernel[2] != 7) {
    return "kernel width " + std::to_string(g.kernel[2]) + " (3, 5 or 7 only)";
  }
  // Taps one stride apart: tap index (t0 * k1 + t1) * k2 + t2 at offset tap * w_stride[3].
  if ((g.kernel[1] > 1 && g.w_stride[2] != g.kernel[2] * g.w_stride[3]) ||
      (g.kernel[0] > 1 && g.w_stride[1] != g.kernel[1] * g.kernel[2] * g.w_stride[3])) {
    return "the weight's taps are not one stride apart";
  }
  const double w_span =
      static_cast<double>(g.o - 1) * static_cast<double>(g.w_stride[0]) +
      static_cast<double>(g.kernel_positions() - 1) * static_cast<double>(g.w_stride[3]);
  if (w_span >= static_cast<double>(kMaxInt32) || !depthwise_blocked_offsets_fit(g, t)) {
    return "a plane of x or out, or the weight, spans 2^31 or more elements";
  }
  return "";
}

// Bytes per load of the blocked variant's weight staging: 16 or 8 when every channel tile's
// weights are one run of w — taps contiguous (w_stride[3] = 1, taps one stride apart) and
// channels back to back (w_stride[0] = taps) — whose start and length are multiples of that many
// bytes (w's address included); else 0 (a load per element, any strides).
inline int depthwise_blocked_w_vector_bytes(const detail::ConvProblem& p, const ConvGeometry& g,
                                            const DepthwiseTiling& t, int64_t v) {
  const int64_t taps = g.kernel_positions();
  if (!t.w_linear || g.w_stride[3] != 1 || g.w_stride[0] != taps) return 0;
  const int64_t tile_bytes = t.cvt * v * taps * elem_size(p.weight.dtype);
  for (const int bytes : {16, 8}) {
    if (tile_bytes % bytes == 0 && pointer_alignment(p.weight.data) >= bytes) return bytes;
  }
  return 0;
}

// Threads per multiprocessor below which the blocked variant takes 1-row thread tiles (twice the
// threads, 1.2x the instructions per FMA): 16 warps, 4 per scheduler, hide the L1 and shared
// memory latencies of the FMA-bound loop.
constexpr int64_t kDepthwiseBlockedMinThreadsPerSm = 512;

// Plans the blocked variant (vector `v` chosen by the caller). Thread tile th x tw (th: 2 rows, or
// 1 when 2-row tiles would leave fewer than kDepthwiseBlockedMinThreadsPerSm threads per SM or
// 1-row ones finish in fewer cost-weighted rounds of resident threads).
// Channel tiles: k tiles of cvt = ceil(channel_vectors / k) vectors, cvt <= kDepthwiseBlockedMaxCvt
// and its staged weights within 48 KiB; of the k from the fewest tiles up, the widest cvt whose
// lane use (channel padding x the block's last warp) is within 3% of the best, so a block of
// at most kDepthwiseBlockedThreads threads has no half-empty warp (c = 96: 3 tiles of 16 vectors,
// 8 thread tiles, 128 threads; c = 144: 4 of 18, 7 thread tiles, 126 threads). Thread tiles per
// block (rows_per_block x runs_per_block <= kDepthwiseBlockedThreads / cvt): the shape with the
// fewest idle lanes (thread tiles past the edges, the unused lanes of a block's last warp; within
// 1/32), then the largest that still gives >= 2 blocks per multiprocessor
// (else the one with most blocks), then the tallest (a block's tiles then share columns, so
// interior and edge tiles do not mix in a warp). Returns a description for the reason.
inline std::string plan_depthwise_blocked(const ConvGeometry& g, const DeviceDescription& dev,
                                          int64_t v, DepthwiseTiling& t) {
  const int64_t taps = g.kernel_positions();
  t.variant = kDepthwiseBlocked;
  t.x_vector = v == 2;
  t.w_cv_stride = (taps % 2 == 0 ? taps + 1 : taps) * v;
  t.w_linear = true;
  t.channel_vectors = g.o / v;
  int64_t cap = std::min<int64_t>(kDepthwiseBlockedMaxCvt, t.channel_vectors);
  cap = std::max<int64_t>(1, std::min(cap, kMaxKernelSmem / (t.w_cv_stride * 4)));
  const auto lane_use = [&](int64_t cvt) {
    const int64_t threads = kDepthwiseBlockedThreads / cvt * cvt;
    const int64_t lanes = ceil_div(threads, 32) * 32;
    const int64_t tiles = ceil_div(t.channel_vectors, cvt);
    return static_cast<double>(t.channel_vectors) / static_cast<double>(tiles * cvt) *
           static_cast<double>(threads) / static_cast<double>(lanes);
  };
  const int64_t fewest = ceil_div(t.channel_vectors, cap);
  double best_use = 0;
  for (int64_t k = fewest; k < fewest + 16; ++k) {
    best_use = std::max(best_use, lane_use(ceil_div(t.channel_vectors, k)));
  }
  t.cvt = 1;
  for (int64_t k = fewest; k < fewest + 16; ++k) {
    const int64_t cvt = ceil_div(t.channel_vectors, k);
    if (lane_use(cvt) >= 0.97 * best_use) {
      t.cvt = cvt;
      break;
    }
  }
  t.channel_tiles = ceil_div(t.channel_vectors, t.cvt);
  const int64_t planes = g.batch * g.out[0];
  t.run = depthwise_blocked_tw(g.kernel[2], g.stride[2]);
  t.runs_per_row = ceil_div(g.out[2], t.run);
  const auto thread_tiles = [&](int64_t th) {
    return t.channel_tiles * t.cvt * planes * ceil_div(g.out[1], th) * t.runs_per_row;
  };
  t.th = kDepthwiseBlockedRows;
  std::string why_rows = "2-row thread tiles";
  // Rounds of resident threads (kDepthwiseBlockedMinThreadsPerSm per SM: the registers of the
  // launch bounds) each tiling takes; a 1-row round costs ~0.6 of a 2-row one (half the outputs
  // at 1.2x the instructions per FMA): 1-row tiles when they finish sooner by more than 5%.
  constexpr int64_t kOneRowRoundPercent = 60, kMarginPercent = 95;
  const int64_t resident = kDepthwiseBlockedMinThreadsPerSm * dev.multiprocessors;
  const int64_t rounds2 = ceil_div(thread_tiles(kDepthwiseBlockedRows), resident);
  const int64_t rounds1 = ceil_div(thread_tiles(1), resident);
  if (thread_tiles(t.th) < resident) {
    t.th = 1;
    why_rows = "1-row thread tiles (2-row ones would give " +
               std::to_string(thread_tiles(kDepthwiseBlockedRows) / dev.multiprocessors) + " < " +
               std::to_string(kDepthwiseBlockedMinThreadsPerSm) + " threads per SM)";
  } else if (rounds1 * kOneRowRoundPercent < rounds2 * kMarginPercent) {
    t.th = 1;
    why_rows = "1-row thread tiles (" + std::to_string(rounds1) +
               " rounds of resident threads against " + std::to_string(rounds2) +
               " of 2-row ones at ~1.7x the cost)";
  }
  const int64_t tile_rows = ceil_div(g.out[1], t.th);
  const int64_t useful = tile_rows * t.runs_per_row;
  const int64_t per_block = std::max<int64_t>(1, kDepthwiseBlockedThreads / t.cvt);
  // Idle lanes of a shape, per plane and channel tile: thread tiles past the edges and the
  // unused lanes of each block's last warp.
  struct Choice {
    int64_t bh = 1, bw = 1, blocks = 0, idle = 0;
  };
  Choice best;
  bool have = false;
  const int64_t slack = useful * t.cvt / 32;  // 1/32 of the useful lanes
  for (int64_t bh = 1; bh <= std::min(per_block, tile_rows); ++bh) {
    for (int64_t bw = 1; bw * bh <= per_block && bw <= t.runs_per_row; ++bw) {
      Choice c{bh, bw, 0, 0};
      const int64_t per_plane = ceil_div(tile_rows, bh) * ceil_div(t.runs_per_row, bw);
      const int64_t lanes = per_plane * ceil_div(bh * bw * t.cvt, 32) * 32;
      c.idle = lanes - useful * t.cvt;
      c.blocks = t.channel_tiles * planes * per_plane;
      if (!have) {
        best = c;
        have = true;
        continue;
      }
      // Fewer idle lanes (beyond 1/32 of the useful ones) win outright.
      if (c.idle + slack < best.idle) {
        best = c;
        continue;
      }
      if (best.idle + slack < c.idle) continue;
      const int64_t enough = 2 * int64_t{dev.multiprocessors};
      const bool c_enough = c.blocks >= enough, best_enough = best.blocks >= enough;
      if (c_enough != best_enough) {
        if (c_enough) best = c;
        continue;
      }
      const int64_t c_size = c.bh * c.bw, best_size = best.bh * best.bw;
      if (c_enough ? c_size > best_size : c.blocks > best.blocks) {
        best = c;
      } else if (c_size == best_size && c.bw < best.bw) {
        best = c;
      }
    }
  }
  t.rows_per_block = best.bh;
  t.runs_per_block = best.bw;
  t.row_tiles = ceil_div(tile_rows, t.rows_per_block);
  t.col_tiles = ceil_div(t.runs_per_row, t.runs_per_block);
  t.spatial_tiles = planes * t.row_tiles * t.col_tiles;
  return why_rows + ", " + std::to_string(t.cvt) + " channel vectors x " +
         std::to_string(t.rows_per_block) + "x" + std::to_string(t.runs_per_block) +
         " thread tiles per block";
}

// Whether a window variant's 32-bit offsets fit (staged, tensor-core): inside a plane of x (and
// of out, with out_too) and inside the weight every offset is below 2^31, and window coordinates
// up to `margin` past a plane (a tile plus the padding) stay below 2^30.
inline bool depthwise_window_offsets_fit(const ConvGeometry& g, bool out_too, int64_t margin) {
  // The largest offset inside one plane of a tensor with these extents and strides, + c.
  const auto plane_span = [&](const int64_t* extent, const int64_t* stride) {
    return static_cast<double>(extent[1] - 1) * static_cast<double>(std::abs(stride[2])) +
           static_cast<double>(extent[2] - 1) * static_cast<double>(std::abs(stride[3])) +
           static_cast<double>(g.c);
  };
  const double w_span =
      static_cast<double>(g.o - 1) * static_cast<double>(std::abs(g.w_stride[0])) +
      static_cast<double>(g.kernel[1] - 1) * static_cast<double>(std::abs(g.w_stride[2])) +
      static_cast<double>(g.kernel[2] - 1) * static_cast<double>(std::abs(g.w_stride[3]));
  const auto reach = [&](int d) { return g.in[d] + g.out[d] + std::abs(g.pad_lo[d]) + margin; };
  constexpr double kLimit = static_cast<double>(kMaxInt32);
  return plane_span(g.in, g.x_stride) < kLimit &&
         (!out_too || plane_span(g.out, g.out_stride) < kLimit) && w_span < kLimit &&
         reach(1) <= kMaxInt32 / 2 && reach(2) <= kMaxInt32 / 2;
}

// Why the staged depthwise variant cannot serve p ("" when it can): 2 or 3 spatial dims with one
// kernel tap along dim 0, a 3x3, 5x5 or 7x7 kernel, stride 1 and no dilation along the last two
// dims, multiplier 1, x in 16-byte channel octets (why_not_x_channel_octets) and out suited to
// 2-channel stores.
inline std::string why_not_depthwise_staged(const detail::ConvProblem& p, const ConvGeometry& g) {
  if (p.spatial < 2) return "one spatial dim";
  if (g.o != g.c) return "a channel multiplier > 1";
  if (g.kernel[0] != 1) return "more than one kernel tap along the first of 3 spatial dims";
  if (g.kernel[1] != g.kernel[2] || (g.kernel[2] != 3 && g.kernel[2] != 5 && g.kernel[2] != 7)) {
    return "a " + std::to_string(g.kernel[1]) + "x" + std::to_string(g.kernel[2]) +
           " kernel (3x3, 5x5 or 7x7 only)";
  }
  for (int d = 1; d < kDims; ++d) {
    if (g.stride[d] != 1 || g.kdil[d] != 1 || g.idil[d] != 1) {
      return "a stride or dilation along the last two spatial dims";
    }
  }
  const std::string no_octets = why_not_x_channel_octets(p);
  if (!no_octets.empty()) return no_octets;
  if (!depthwise_window_offsets_fit(g, false, 2 * kDepthwiseStagedRun * kDepthwiseStagedMaxWarps)) {
    return "a plane of x or the weight spans 2^31 or more elements";
  }
  if (channel_stride(p.out) != 1 || pointer_alignment(p.out.data) < 2 * elem_size(p.out.dtype) ||
      !outer_strides_multiple_of(p.out, 2)) {
    return "out not suited to 2-channel stores";
  }
  return "";
}

// 16 when the staged kernel may load a channel tile's weights as 16-byte vectors of one run of w
// (depthwise_staged_load_weight_run): taps and channels packed (o stride = taps, the kernel's
// rows and columns contiguous), one tap along dim 0, w 16-byte aligned; else 0 (element loads).
// Every tile's run then starts 16-byte aligned: tiles start at multiples of 16 channels and
// 16 * taps 16-bit weights are whole vectors, and a last partial tile holds a multiple of 8.
inline int depthwise_staged_w_run(const detail::ConvProblem& p, const ConvGeometry& g) {
  const int64_t k = g.kernel[2];
  const bool packed =
      g.kernel[0] == 1 && g.w_stride[3] == 1 && g.w_stride[2] == k && g.w_stride[0] == k * k;
  return packed && pointer_alignment(p.weight.data) >= 16 ? 16 : 0;
}

// Plans the staged variant: of the tilings with 4 thread tiles per warp row (16-channel tiles) or
// 2 (32-channel tiles) and 1-8 warps per block (the smem of each within 48 KiB), the one with the
// lowest estimated time per SM, in warp instructions: the larger of
//   issue    the fullest SM's blocks x each block's instructions / 4 schedulers: its thread tiles
//            (2 x 7 outputs x k^2 FMAs x 2 channels at ~1.3 instructions each, plus stores), its
//            window's 16-byte copies and its weight staging;
//   latency  rounds of resident blocks x a thread tile's instructions x 2 cycles (a warp alone
//            issues about every other cycle: small problems wait on one tile's chain);
// ties going to the least work in all (padding of every kind counts as work); then two tiles per
// block (double-buffered windows) when there are at least 4 tiles per SM; then the register
// budget of the instantiation (96, or the lean 80 where that takes fewer waves). Returns a
// description for the reason.
inline std::string plan_depthwise_staged(const ConvGeometry& g, const DeviceDescription& dev,
                                         int64_t grid_cap, DepthwiseTiling& t) {
  const int64_t k = g.kernel[2];
  const int64_t planes = g.batch * g.out[0];
  const int64_t row_pairs = ceil_div(g.out[1], int64_t{kDepthwiseStagedRows});
  const int64_t runs = ceil_div(g.out[2], int64_t{kDepthwiseStagedRun});
  const int64_t cap = std::max<int64_t>(1, std::min(grid_cap, kMaxGridX));
  const double thread_tile =
      1.3 * 2 * kDepthwiseStagedRows * kDepthwiseStagedRun * static_cast<double>(k * k) + 150;
  constexpr double kChunkCost = 25;   // instructions per 16-byte copy (32 per warp instruction)
  constexpr double kWeightCost = 25;  // instructions per staged weight (32 per warp instruction)
  // Blocks of tiling c an SM holds at `registers` per thread.
  const auto resident_blocks = [&](const DepthwiseTiling& c, int registers) {
    return resident_blocks_per_sm(dev, 32 * c.rows_per_block, registers,
                                  depthwise_staged_smem_bytes(g, c));
  };
  bool have = false;
  double best_cost = 0, best_work = 0;
  DepthwiseTiling best;
  for (const int64_t groups : {int64_t{4}, int64_t{2}}) {
    for (int64_t warps = 1; warps <= kDepthwiseStagedMaxWarps; ++warps) {
      DepthwiseTiling c;
      c.variant = kDepthwiseStaged;
      c.run = kDepthwiseStagedRun;
      c.th = kDepthwiseStagedRows;
      c.cvt = 32 / groups;
      c.rows_per_block = warps;
      c.runs_per_block = groups;
      c.channel_vectors = g.c / 2;
      c.channel_tiles = ceil_div(g.c, depthwise_staged_channels(c));
      c.runs_per_row = runs;
      c.row_tiles = ceil_div(row_pairs, warps);
      c.col_tiles = ceil_div(runs, groups);
      c.spatial_tiles = planes * c.row_tiles * c.col_tiles;
      c.x_vector = true;
      c.tiles_per_block = ceil_div(c.tiles(), cap);
      const int64_t smem = depthwise_staged_smem_bytes(g, c);
      if (smem > kMaxKernelSmem) continue;
      const int64_t resident = resident_blocks(c, kDepthwiseStagedRegisters);
      if (resident < 1) continue;
      const int64_t blocks = ceil_div(c.tiles(), c.tiles_per_block);
      const int64_t per_sm = ceil_div(blocks, int64_t{dev.multiprocessors});
      const double tiles = static_cast<double>(c.tiles_per_block);
      const double block_cost =
          tiles * (static_cast<double>(warps) * thread_tile +
                   static_cast<double>(depthwise_staged_window_chunks(g, c)) * kChunkCost / 32) +
          static_cast<double>(k * k * depthwise_staged_channels(c)) * kWeightCost / 32;
      const double issue = static_cast<double>(per_sm) * block_cost / 4;
      const double latency =
          static_cast<double>(ceil_div(per_sm, resident)) * tiles * thread_tile * 2;
      const double cost = std::max(issue, latency);
      const double work = static_cast<double>(blocks) * block_cost;
      if (!have || cost < best_cost * 0.999 || (cost <= best_cost * 1.001 && work < best_work)) {
        best = c;
        best_cost = cost;
        best_work = work;
        have = true;
      }
    }
  }
  t = best;
  // Two tiles per block where the grid still gives >= 2 blocks per SM: the second window streams
  // in while the first is computed (H200, MobileNet 3x3 c144: 1008 tiles, 9.40 -> 8.42 us; the
  // 7x7 rows, with fewer tiles than 4 per SM, were the same either way).
  if (t.tiles_per_block == 1 && t.tiles() >= 4 * int64_t{dev.multiprocessors}) {
    DepthwiseTiling two = t;
    two.tiles_per_block = 2;
    if (depthwise_staged_smem_bytes(g, two) <= kMaxKernelSmem) t = two;
  }
  // The lean instantiation where its residency runs the grid in fewer waves (H200, forced
  // tilings of the ConvNeXt / MobileNet rows: faster in all 11 such tilings, by 6-18%, e.g. 384
  // blocks of 7 warps 14.6 -> 13.6 us; 2-8% slower in all but one where the wave count stays).
  const auto waves = [&](int registers) {
    return ceil_div(ceil_div(t.tiles(), t.tiles_per_block),
                    resident_blocks(t, registers) * dev.multiprocessors);
  };
  t.registers = waves(kDepthwiseStagedLeanRegisters) < waves(kDepthwiseStagedRegisters)
                    ? kDepthwiseStagedLeanRegisters
                    : kDepthwiseStagedRegisters;
  return std::to_string(depthwise_staged_channels(t)) + "-channel tiles of " +
         std::to_string(kDepthwiseStagedRows * t.rows_per_block) + " x " +
         std::to_string(kDepthwiseStagedRun * t.runs_per_block) + " outputs (" +
         std::to_string(t.rows_per_block) + " warps), " + std::to_string(t.tiles()) + " tiles, " +
         std::to_string(t.tiles_per_block) + " per block, " + std::to_string(t.registers) +
         " registers";
}

// Why the tensor-core depthwise variant (conv_depthwise_mma.cuh) cannot serve p ("" when it
// can): a 2-D layer (or 3-D with one tap along dim 0) with multiplier 1, kernels up to 9 x 9,
// stride 1 and no dilation along the last two dims, at least 8 output rows (a 16-row tile of
// fewer would be mostly waste), 16-bit x in 16-byte channel octets and out of x's type, stored
// as 2-channel (32-bit) words.
inline std::string why_not_depthwise_mma(const detail::ConvProblem& p, const ConvGeometry& g) {
  if (p.spatial < 2) return "one spatial dim";
  if (g.o != g.c) return "a channel multiplier > 1";
  if (g.kernel[0] != 1) return "more than one kernel tap along the first of 3 spatial dims";
  if (g.kernel[1] > kDepthwiseMmaMaxKernel || g.kernel[2] > kDepthwiseMmaMaxKernel) {
    return "a kernel wider or taller than 9";
  }
  for (int d = 1; d < kDims; ++d) {
    if (g.stride[d] != 1 || g.kdil[d] != 1 || g.idil[d] != 1) {
      return "a stride or dilation along the last two spatial dims";
    }
  }
  if (g.out[1] < kDepthwiseMmaRows / 2) return "fewer than 8 output rows";
  const std::string no_octets = why_not_x_channel_octets(p);
  if (!no_octets.empty()) return no_octets;
  if (p.out.dtype != p.x.dtype) return "out's dtype is not x's";
  if (channel_stride(p.out) != 1 || pointer_alignment(p.out.data) < 4 ||
      !outer_strides_multiple_of(p.out, 2)) {
    return "out not suited to 2-channel stores";
  }
  if (!depthwise_window_offsets_fit(
          g, true, 2 * kDepthwiseMmaRows + 8 * kDepthwiseMmaMaxPieces + kDepthwiseMmaMaxKernel)) {
    return "a plane of x or out, or the weight, spans 2^31 or more elements";
  }
  return "";
}

// The tensor-core variant's tiling with `pieces` 8-column pieces per tile (4, 2 or 1), and the
// blocks of it an SM holds (resident_blocks_per_sm); resident 0: the window does not fit 48 KiB.
inline DepthwiseTiling depthwise_mma_tiling(const ConvGeometry& g, const DeviceDescription& dev,
                                            int64_t grid_cap, int pieces, int64_t& resident) {
  DepthwiseTiling c;
  c.variant = kDepthwiseMma;
  c.run = 8 * pieces;
  c.th = kDepthwiseMmaRows;
  c.cvt = kDepthwiseMmaChannels / 8;
  c.channel_vectors = g.c / 8;
  c.channel_tiles = ceil_div(c.channel_vectors, c.cvt);
  c.runs_per_row = ceil_div(g.out[2], int64_t{c.run});
  c.row_tiles = ceil_div(g.out[1], int64_t{kDepthwiseMmaRows});
  c.col_tiles = c.runs_per_row;
  c.spatial_tiles = g.batch * g.out[0] * c.row_tiles * c.col_tiles;
  c.x_vector = true;
  c.registers = depthwise_mma_registers(pieces);
  c.tiles_per_block = ceil_div(c.tiles(), std::max<int64_t>(1, std::min(grid_cap, kMaxGridX)));
  const int64_t smem = depthwise_mma_smem_bytes(g, pieces);
  resident = smem > kMaxKernelSmem
                 ? 0
                 : resident_blocks_per_sm(dev, kDepthwiseMmaThreads, c.registers, smem);
  return c;
}

// Under GEMMKIT_CONV_DEPTHWISE=mma: the tile width (4, 2 or 1 pieces) whose grid takes the fewest
// rounds of resident blocks times a tile's pixels moved (window in, outputs out), ties to fewer
// pixels in all. Fills t; returns a description for the reason.
inline std::string plan_depthwise_mma(const ConvGeometry& g, const DeviceDescription& dev,
                                      int64_t grid_cap, DepthwiseTiling& t) {
  bool have = false;
  double best_cost = 0, best_work = 0;
  for (const int pieces : {4, 2, 1}) {
    int64_t resident = 0;
    const DepthwiseTiling c = depthwise_mma_tiling(g, dev, grid_cap, pieces, resident);
    if (resident < 1) continue;
    const int64_t blocks = ceil_div(c.tiles(), c.tiles_per_block);
    const double tile = static_cast<double>(
        depthwise_mma_in_rows(g) * depthwise_mma_in_cols(pieces) + kDepthwiseMmaRows * 8 * pieces);
    const double rounds = static_cast<double>(ceil_div(blocks, resident * dev.multiprocessors));
    const double cost = rounds * static_cast<double>(c.tiles_per_block) * tile;
    const double work = static_cast<double>(c.tiles()) * tile;
    if (!have || cost < best_cost * 0.999 || (cost <= best_cost * 1.001 && work < best_work)) {
      t = c;
      best_cost = cost;
      best_work = work;
      have = true;
    }
  }
  return "16-channel tiles of 16 x " + std::to_string(t.run) + " outputs, " +
         std::to_string(t.tiles()) + " tiles, " + std::to_string(t.tiles_per_block) + " per block";
}

// Where auto takes the tensor-core variant over the staged one ("" and its tiling in t, else why
// not): kernels of at least 7 x 7, whose FMAs cost the staged variant most, and 32-column tiles
// that fill 90-100% of one wave of resident blocks. Its blocks run copy, transposition, MMAs and
// stores back to back, with no next tile to overlap, so it wins only where every SM holds a full
// set of them once. H200 (docs/perf.md, 2026-11-30): ConvNeXt 8 x 56^2 x 96 (384 tiles, 97% of
// 396) 11.74 against the staged 12.86 us; 1 x 112^2 x 96 (168 tiles, 42%) 9.22 against 7.62;
// 8 x 14^2 x 384 (best width) 7.20 against 5.72; MobileNet 3x3 8 x 56^2 x 144 14.1 against 8.0.
inline std::string why_not_depthwise_mma_by_default(const ConvGeometry& g,
                                                    const DeviceDescription& dev, int64_t grid_cap,
                                                    DepthwiseTiling& t) {
  if (g.kernel[1] < 7 || g.kernel[2] < 7) {
    return "a kernel smaller than 7 x 7 (the staged variant is faster; GEMMKIT_CONV_DEPTHWISE=mma "
           "forces it)";
  }
  int64_t resident = 0;
  const DepthwiseTiling c =
      depthwise_mma_tiling(g, dev, grid_cap, kDepthwiseMmaMaxPieces, resident);
  const int64_t slots = resident * dev.multiprocessors;
  if (resident < 1 || c.tiles() > slots || 10 * c.tiles() < 9 * slots) {
    return "its 32-column tiles (" + std::to_string(c.tiles()) +
           ") do not fill 90-100% of one wave (" + std::to_string(slots) +
           " blocks; GEMMKIT_CONV_DEPTHWISE=mma forces it)";
  }
  t = c;
  return "";
}

// Depthwise kernel (conv_depthwise.cuh). Variant, first that applies (DepthwiseTiling):
//   blocked 2-D / 3-D, kernel width 3, 5 or 7, last-dim stride 1 or 2, no dilation along the last
//           two dims (why_not_depthwise_blocked): a th x tw register tile of 2 channels
//           (multiplier 1, x and out suited to 2-element vectors) or 1 channel per thread
//           (plan_depthwise_blocked)
//   narrow  kernel width <= 4: 16 bytes of x per thread (8 16-bit / 4 f32 channels) x 4 outputs
//   wide    kernel width <= 8: 4 channels x 8 outputs (acc[8][4] + a kernel row of weights
//           wr[8][4] in registers: ~80 of them, 3 blocks of 256 per SM)
//   generic anything else: up to 4 channels x 4 outputs, per-tap loads
// Window and generic variants: channel vectors per block: balanced tiles of at most
// kDepthwiseMaxCvt (16: 128-256 bytes of a position's channels per warp row, enough for full
// 32-byte sectors), fewer when the tile's weights (taps x channels x fp32) would pass 48 KiB;
// spatial tile and grid: depthwise_layout. Every variant: block b takes tiles_per_block
// consecutive tiles, so that the grid stays within max_blocks(dev).
inline ConvConfig depthwise_config(const detail::ConvProblem& p, const DeviceDescription& dev,
                                   const std::string& algo, const std::string& reason,
                                   const std::string& variant = "auto") {
  ConvConfig c;
  c.path = ConvPath::depthwise;
  c.algo = algo;
  c.reason = reason;
  const ConvGeometry g = normalize(p);
  const int64_t ex = elem_size(p.x.dtype), eo = elem_size(p.out.dtype);
  const int64_t taps = p.kernel_positions();
  const auto out_suits = [&](int64_t width) {
    return p.out_channels % width == 0 &&
           pointer_alignment(p.out.data) >= std::min<int64_t>(16, width * eo) &&
           outer_strides_multiple_of(p.out, width);
  };
  const auto x_suits = [&](int64_t width) {
    return p.out_channels_per_group == 1 && vector_width_for(p, width) == width;
  };
  const auto fits = [&](int64_t width) { return taps * width * 4 <= kMaxKernelSmem; };
  DepthwiseTiling& t = c.depthwise;
  c.grid_cap = max_blocks(dev);
  const auto finish = [&](int64_t v) {
    const int64_t cap = std::max<int64_t>(1, std::min(c.grid_cap, kMaxGridX));
    t.tiles_per_block = ceil_div(t.tiles(), cap);
    c.grid.x = static_cast<uint32_t>(ceil_div(t.tiles(), t.tiles_per_block));
    c.vector = static_cast<int>(v);
    c.tile = t.run;
    c.block = static_cast<int>(t.threads());
  };
  if (variant == "auto" || variant == "mma") {
    std::string no_mma = why_not_depthwise_mma(p, g);
    if (no_mma.empty() && variant == "auto") {
      no_mma = why_not_depthwise_mma_by_default(g, dev, c.grid_cap, t);
    }
    if (no_mma.empty()) {
      const std::string shape = variant == "mma"
                                    ? plan_depthwise_mma(g, dev, c.grid_cap, t)
                                    : "16-channel tiles of 16 x 32 outputs, " +
                                          std::to_string(t.tiles()) + " tiles, one full wave";
      c.grid.x = static_cast<uint32_t>(ceil_div(t.tiles(), t.tiles_per_block));
      c.vector = 8;
      c.tile = t.run;
      c.block = kDepthwiseMmaThreads;
      c.smem_bytes = depthwise_mma_smem_bytes(g, t.run / 8);
      c.reason += "; tensor-core variant: " + shape;
      return c;
    }
    c.reason += "; not the tensor-core variant: " + no_mma;
  } else {
    c.reason += "; not the tensor-core variant: GEMMKIT_CONV_DEPTHWISE=" + variant;
  }
  if (variant != "blocked") {
    const std::string no_staged = why_not_depthwise_staged(p, g);
    if (no_staged.empty()) {
      const std::string shape = plan_depthwise_staged(g, dev, c.grid_cap, t);
      t.w_vector_bytes = depthwise_staged_w_run(p, g);
      c.grid.x = static_cast<uint32_t>(ceil_div(t.tiles(), t.tiles_per_block));
      c.vector = 2;
      c.tile = t.run;
      c.block = static_cast<int>(32 * t.rows_per_block);
      c.smem_bytes = depthwise_staged_smem_bytes(g, t);
      c.reason += "; staged variant: " + shape;
      return c;
    }
    c.reason += "; not the staged variant: " + no_staged;
  } else {
    c.reason += "; not the staged variant: GEMMKIT_CONV_DEPTHWISE=blocked";
  }
  {
    DepthwiseTiling blocked;
    blocked.run = depthwise_blocked_tw(g.kernel[2], g.stride[2]);
    blocked.th = kDepthwiseBlockedRows;
    const std::string no_blocked = why_not_depthwise_blocked(p, g, blocked);
    if (no_blocked.empty()) {
      const int64_t v = out_suits(2) && x_suits(2) && fits(2) ? 2 : 1;
      const std::string shape = plan_depthwise_blocked(g, dev, v, blocked);
      blocked.w_vector_bytes = depthwise_blocked_w_vector_bytes(p, g, blocked, v);
      t = blocked;
      finish(v);
      c.smem_bytes = t.cvt * t.w_cv_stride * 4;
      c.reason += "; blocked variant: " + shape +
                  (v == 2 ? ", 2 channels per thread"
                          : ", 1 channel per thread (multiplier > 1, odd o or unaligned x / out)");
      return c;
    }
    c.reason += "; not the blocked variant: " + no_blocked;
  }
  const bool window = g.kdil[2] == 1 && g.idil[2] == 1 && (g.stride[2] == 1 || g.stride[2] == 2);
  const auto suits = [&](int64_t width) {
    return out_suits(width) && x_suits(width) && fits(width);
  };
  const int64_t narrow = 16 / ex;
  int64_t v = 1;
  if (window && g.kernel[2] <= kDepthwiseNarrowTaps && suits(narrow)) {
    t.variant = kDepthwiseNarrow;
    t.run = kDepthwiseNarrowRun;
    v = narrow;
  } else if (window && g.kernel[2] <= kDepthwiseWideTaps && suits(kDepthwiseWideVector)) {
    t.variant = kDepthwiseWide;
    t.run = kDepthwiseWideRun;
    v = kDepthwiseWideVector;
  } else {
    t.variant = kDepthwiseGeneric;
    t.run = kDepthwiseGenericRun;
    v = kDepthwiseMaxGenericVector;
    while (v > 1 && !(out_suits(v) && fits(v))) v /= 2;  // why_not_depthwise: taps * 4 fits
    t.x_vector = v > 1 && x_suits(v);
  }
  if (t.variant != kDepthwiseGeneric) t.x_vector = true;
  t.channel_vectors = p.out_channels / v;
  int64_t cap = std::min<int64_t>(kDepthwiseMaxCvt, t.channel_vectors);
  while (cap > 1 && taps * cap * v * 4 > kMaxKernelSmem) cap = ceil_div(cap, 2);
  while (cap > 1 && taps * cap * v * 4 > kMaxKernelSmem) --cap;
  t.cvt = ceil_div(t.channel_vectors, ceil_div(t.channel_vectors, cap));
  c.grid.x = static_cast<uint32_t>(depthwise_layout(g, dev.multiprocessors, c.grid_cap, t));
  c.vector = static_cast<int>(v);
  c.tile = t.run;
  c.block = static_cast<int>(t.cvt * t.spb());
  c.smem_bytes = taps * t.cvt * v * 4;
  return c;
}

// Small-o kernels, the first that `variant` allows and that serves p:
//   taps  (conv_small_o_taps.cuh) why_not_small_o_taps: 256 threads, B fragments + Y in opt-in
//         shared memory, the grid of plan_small_o_taps
//   mma   (conv_small_o.cuh) 16-bit x whose channels load as 16-byte vectors and a geometry
//         plan_small_o_mma accepts: 256 threads, weights as MMA fragments + the region's per-tap
//         products in 48 KiB of shared memory
//   cuda  (conv_small_o.cuh) `lanes` lanes share a strip of kSmallOPositions outputs along the
//         last spatial dim, each reducing every lanes-th vector of `vector` channels for all o
//         outputs, with the whole weight staged in shared memory in x's type.
// The reason names why the faster kernels did not serve.
inline ConvConfig small_o_config(const detail::ConvProblem& p, const DeviceDescription& dev,
                                 const std::string& algo, const std::string& reason,
                                 const std::string& variant = "auto") {
  ConvConfig c;
  c.path = ConvPath::small_o;
  c.algo = algo;
  c.reason = reason;
  c.vector = vector_width_for(p, p.in_channels);
  SmallOTiling& t = c.small_o;
  c.grid_cap = max_blocks(dev);
  std::string no_taps = "GEMMKIT_CONV_SMALL_O=" + variant;
  // Either form of the taps kernel, planned in c.small_o_taps.
  const auto take_taps = [&](int threads, const char* what) {
    const SmallOTapsTiling& k = c.small_o_taps;
    c.reason += what;
    c.block = threads;
    c.tile = static_cast<int>(k.tile_h * k.tile_w);
    c.grid_cap = k.grid;
    c.grid.x = static_cast<uint32_t>(k.grid);
    c.smem_bytes = k.smem_bytes();
    return c;
  };
  if (variant == "tma" || variant == "auto") {
    std::string no_tma = why_not_small_o_taps_tma(p, dev, c.small_o_taps);
    if (no_tma.empty() && variant == "auto" &&
        c.small_o_taps.tiles_per_block < kSmallOTapsTmaMinTilesPerBlock) {
      no_tma = std::to_string(c.small_o_taps.tiles_per_block) + " tiles per block < " +
               std::to_string(kSmallOTapsTmaMinTilesPerBlock) +
               ": too few for its ring to overlap; the register form's 2 blocks per SM win";
    }
    if (no_tma.empty()) {
      return take_taps(kSmallOTapsTmaThreads,
                       ": taps kernel, TMA-fed form (the region streamed chunk by chunk into a "
                       "ring of shared memory, then the taps kernel's GEMM and shift-add)");
    }
    c.reason += " (TMA form: " + no_tma + ")";
  }
  if (variant == "auto" || variant == "tma" || variant == "taps") {
    no_taps = why_not_small_o_taps(p, dev, c.small_o_taps);
    if (no_taps.empty()) {
      return take_taps(kSmallOTapsThreads,
                       ": taps kernel (one 1x1 GEMM of each input region by all taps' weights, "
                       "then a shift-add)");
    }
  }
  c.small_o_taps = SmallOTapsTiling{};
  if (variant != "cuda" && small_o_mma_fits(p, t)) {
    c.reason += ": tensor-core region kernel (taps kernel: " + no_taps + ")";
    c.block = kSmallOMmaThreads;
    c.tile = static_cast<int>(t.tile_h * t.tile_w);
    t.tiles_per_block = ceil_div(t.tiles, std::min(c.grid_cap, kMaxGridX));
    c.grid.x = static_cast<uint32_t>(ceil_div(t.tiles, t.tiles_per_block));
    c.smem_bytes = t.weight_bytes + t.region() * t.p_stride * 4;
    return c;
  }
  c.reason += ": CUDA-core kernel (taps kernel: " + no_taps + "; tensor-core region kernel: " +
              (variant == "cuda" ? "GEMMKIT_CONV_SMALL_O=cuda" : "does not apply") + ")";
  t = SmallOTiling{};
  // acc[4][8] with 16-byte vectors would spill: o > 4 reads 8-byte vectors.
  if (p.out_channels > 4 && c.vector * elem_size(p.x.dtype) > 8) c.vector /= 2;
  t.channel_vectors = p.in_channels / c.vector;
  int lanes_log2 = 0;
  while (lanes_log2 < 5 && (int64_t{1} << lanes_log2) < t.channel_vectors) ++lanes_log2;
  t.lanes_log2 = lanes_log2;
  c.lanes = 1 << lanes_log2;
  c.block = 256;
  c.tile = kSmallOPositions;
  const int64_t last = p.out_size[p.spatial - 1];
  t.strips_per_row = ceil_div(last, kSmallOPositions);
  t.strips = p.out_positions() / last * t.strips_per_row;
  t.strips_per_block = c.block / c.lanes;
  c.grid = grid_for(t.strips, t.strips_per_block, c.grid_cap);
  c.smem_bytes = small_o_weight_bytes(p);
  return c;
}

// ---- cuDNN (conv_cudnn.h) ----------------------------------------------------------------------

// cuDNN engines are not trusted past 32-bit element offsets: larger tensors stay on own paths.
constexpr int64_t kMaxCudnnSpan = (int64_t{1} << 31) - 1;

// Largest element offset + 1 of `t` (strides >= 1).
inline int64_t element_span(const Tensor& t) {
  int64_t last = 0;
  for (int i = 0; i < t.rank; ++i) last += (t.shape[i] - 1) * t.strides[i];
  return last + 1;
}

// "" when the cuDNN path can serve the problem, else why not; fills the bias layout of `c`.
// cuDNN runs the whole convolution in one call (no chunks) into out, or with a bias and a 16-bit
// out into an fp32 scratch [positions][o] that the bias pass (conv_bias.cuh) rounds into out
// once; with f32 out the pass adds the bias in place. The engine's workspace is known only when
// its plan is built (run time): the launcher skips engines needing more than the budget left.
// A convolution with input dilation (a transposed convolution) as cuDNN's backward-data: with
// stride 1, out[p] = sum over taps t and x positions q with q * s = p + t * d - pad_lo of
// x[q] * w_eff[t] (w_eff = w, or w reversed with flip); backward-data of a forward convolution
// of stride S = s, dilation D = d, paddings P gives dx[i] = sum over q * S + t' * D - P_lo = i
// of dy[q] * W_cc[t']: the same sum for dy = x, dx = out, P_lo = (K - 1) d - pad_lo and
// W_cc[t'] = w_eff[K - 1 - t'], i.e. cross-correlation over w itself when flip is set and
// convolution mode (cuDNN reverses W) when it is not. P_hi only has to make the forward
// output size floor((O + P_lo + P_hi - (K - 1) d - 1) / s) + 1 come out as x's extent:
// P_hi = (K - 1) d - pad_hi, raised to 0 when within s - 1 of it.
struct CudnnDgradForm {
  int64_t stride[detail::kMaxSpatial] = {}, dilation[detail::kMaxSpatial] = {};
  int64_t pad_lo[detail::kMaxSpatial] = {}, pad_hi[detail::kMaxSpatial] = {};
  bool cross_correlation = true;
};

// The form, or why there is none.
inline std::string cudnn_dgrad_form(const detail::ConvProblem& p, CudnnDgradForm& f) {
  for (int d = 0; d < p.spatial; ++d) {
    if (p.stride[d] != 1) {
      return "input dilation with stride " + std::to_string(p.stride[d]) +
             " > 1: no cuDNN backward-data form";
    }
    const int64_t reach = (p.kernel_size[d] - 1) * p.kernel_dilation[d];
    const int64_t s = p.input_dilation[d];
    f.stride[d] = s;
    f.dilation[d] = p.kernel_dilation[d];
    f.pad_lo[d] = reach - p.padding_lo[d];
    f.pad_hi[d] = reach - p.padding_hi[d];
    if (f.pad_lo[d] < 0) {
      return "input dilation with padding_lo " + std::to_string(p.padding_lo[d]) +
             " beyond the kernel's reach " + std::to_string(reach) +
             ": no cuDNN backward-data form";
    }
    if (f.pad_hi[d] < 0) {
      if (f.pad_hi[d] + s - 1 < 0) {
        return "input dilation with padding_hi " + std::to_string(p.padding_hi[d]) +
               " beyond the kernel's reach " + std::to_string(reach) + " + stride - 1" +
               ": no cuDNN backward-data form";
      }
      f.pad_hi[d] = 0;
    }
  }
  f.cross_correlation = p.flip;
  return "";
}

// Element of the backward-data filter W[k][cc][taps] (k < c, cc < o / groups, packed with cc
// fastest: the KRSC layout) taken from gemmkit's weight w[o][taps][c / groups]: k = g * cpg + kk
// is W's output channel (x's channel), cc its input channel within the group (out's channel
// g * opg + cc). Returns w's element offset for W's packed index `i`.
struct DgradWeightIndex {
  int64_t c = 0, cpg = 0, opg = 0, taps = 0;
  int64_t w_o_stride = 0, w_c_stride = 0;  // w's strides of o and of c / groups
  int64_t w_tap_stride[detail::kMaxSpatial] = {};
  int64_t kernel[detail::kMaxSpatial] = {1, 1, 1};
  int spatial = 0;
};

#if defined(__CUDACC__)
#define GEMMKIT_DGRAD_HD __host__ __device__
#else
#define GEMMKIT_DGRAD_HD
#endif

GEMMKIT_DGRAD_HD inline int64_t dgrad_weight_source(const DgradWeightIndex& x, int64_t i) {
  const int64_t cc = i % x.opg;
  int64_t rest = i / x.opg;
  int64_t tap_offset = 0;
  for (int d = x.spatial - 1; d >= 0; --d) {
    tap_offset += (rest % x.kernel[d]) * x.w_tap_stride[d];
    rest /= x.kernel[d];
  }
  const int64_t k = rest;  // < c
  const int64_t g = k / x.cpg, kk = k - g * x.cpg;
  return (g * x.opg + cc) * x.w_o_stride + tap_offset + kk * x.w_c_stride;
}

// The packing kernels' tiling (conv_dgrad_weight.cuh): per (group, tap), a transpose of the
// (cc < opg, kk < cpg) matrix in square tiles of `edge` elements, so that the reads (along kk,
// w's channel dim) and the writes (along cc, W's fastest dim) are both coalesced. The scalar
// kernel moves one element per thread and access (edge kDgradTile); the vector kernel moves 16
// bytes (edge dgrad_vector_edge: 8 vectors per tile row).
constexpr int kDgradTile = 32;
constexpr int kDgradVectorsPerRow = 8;
constexpr int kDgradVectorBytes = 16;

GEMMKIT_DGRAD_HD constexpr int dgrad_vector_edge(int element_bytes) {
  return kDgradVectorsPerRow * (kDgradVectorBytes / element_bytes);
}

struct DgradTile {
  int64_t g = 0, tap = 0, cc0 = 0, kk0 = 0;
  int64_t tap_offset = 0;  // w's offset of the tap (its multi-index along w's kernel dims)
};

GEMMKIT_DGRAD_HD inline int64_t dgrad_tiles(const DgradWeightIndex& x, int64_t edge) {
  const int64_t groups = x.c / x.cpg;
  return groups * x.taps * ((x.opg + edge - 1) / edge) * ((x.cpg + edge - 1) / edge);
}

// Tile `t` (< dgrad_tiles): kk tiles fastest, then cc tiles, taps, groups.
GEMMKIT_DGRAD_HD inline DgradTile dgrad_tile(const DgradWeightIndex& x, int64_t t, int64_t edge) {
  // 32-bit divisions whenever the values fit (div_nonneg): a chain of 64-bit ones costs a
  // block microseconds before its first load.
  const int64_t kk_tiles = (x.cpg + edge - 1) / edge;
  const int64_t cc_tiles = (x.opg + edge - 1) / edge;
  DgradTile d;
  int64_t q = div_nonneg(t, kk_tiles);
  d.kk0 = (t - q * kk_tiles) * edge;
  t = q;
  q = div_nonneg(t, cc_tiles);
  d.cc0 = (t - q * cc_tiles) * edge;
  t = q;
  d.g = div_nonneg(t, x.taps);
  d.tap = t - d.g * x.taps;
  int64_t rest = d.tap;
  // A fixed trip count, so the loop unrolls into constant indices of the kernel's parameter
  // arrays; a loop up to x.spatial made the compiler copy the index struct to the stack (104
  // bytes of local memory per thread).
  for (int i = 0; i < detail::kMaxSpatial; ++i) {
    const int s = detail::kMaxSpatial - 1 - i;
    if (s >= x.spatial) continue;
    q = div_nonneg(rest, x.kernel[s]);
    d.tap_offset += (rest - q * x.kernel[s]) * x.w_tap_stride[s];
    rest = q;
  }
  return d;
}

// W's packed index and w's offset of element (kk, cc) of tile d (kk < cpg, cc < opg): the same
// pair as dgrad_weight_source (the host test checks it).
GEMMKIT_DGRAD_HD inline int64_t dgrad_packed_index(const DgradWeightIndex& x, const DgradTile& d,
                                                   int64_t kk, int64_t cc) {
  return ((d.g * x.cpg + kk) * x.taps + d.tap) * x.opg + cc;
}
GEMMKIT_DGRAD_HD inline int64_t dgrad_source(const DgradWeightIndex& x, const DgradTile& d,
                                             int64_t kk, int64_t cc) {
  return (d.g * x.opg + cc) * x.w_o_stride + d.tap_offset + kk * x.w_c_stride;
}

// Whether w's memory already is the packed filter (every packed index i is its own source):
// one group, o innermost, then the taps, c outermost — PyTorch's ConvTranspose weight (c, o,
// kernel...) in channels-last memory, handed over as a permuted view. Strides of unit dims are
// free.
inline bool dgrad_weight_in_place(const DgradWeightIndex& x) {
  if (x.c != x.cpg) return false;
  int64_t expected = 1;
  if (x.opg > 1 && x.w_o_stride != expected) return false;
  expected *= x.opg;
  for (int d = x.spatial - 1; d >= 0; --d) {
    if (x.kernel[d] > 1 && x.w_tap_stride[d] != expected) return false;
    expected *= x.kernel[d];
  }
  return x.cpg == 1 || x.w_c_stride == expected;
}

// Whether the vector packing kernel serves (else the scalar one): w's channels contiguous, every
// 16-byte vector of 16 / element_bytes channels (along kk in w, along cc in W) inside one group
// and 16-byte aligned in both (w_alignment: the alignment of w's data pointer in bytes; W sits
// at an aligned workspace offset).
inline bool dgrad_vector_fits(const DgradWeightIndex& x, int element_bytes, int w_alignment) {
  const int64_t v = kDgradVectorBytes / element_bytes;
  if (w_alignment < kDgradVectorBytes || x.w_c_stride != 1) return false;
  if (x.cpg % v != 0 || x.opg % v != 0 || x.w_o_stride % v != 0) return false;
  for (int d = 0; d < x.spatial; ++d) {
    if (x.kernel[d] > 1 && x.w_tap_stride[d] % v != 0) return false;
  }
  return true;
}

inline DgradWeightIndex dgrad_weight_index(const detail::ConvProblem& p) {
  DgradWeightIndex x;
  x.c = p.in_channels;
  x.cpg = p.in_channels_per_group;
  x.opg = p.out_channels_per_group;
  x.taps = p.kernel_positions();
  x.spatial = p.spatial;
  x.w_o_stride = p.weight.strides[0];
  x.w_c_stride = p.weight.strides[p.spatial + 1];
  for (int d = 0; d < p.spatial; ++d) {
    x.kernel[d] = p.kernel_size[d];
    x.w_tap_stride[d] = p.weight.strides[d + 1];
  }
  return x;
}

inline std::string why_not_cudnn(const detail::ConvProblem& p, const DeviceDescription& dev,
                                 int64_t budget, ConvConfig& c) {
  if (!dev.cudnn) return dev.cudnn_why_not;
  c.cudnn_dgrad = false;
  c.dgrad_weight_in_place = false;
  for (int d = 0; d < p.spatial; ++d) {
    if (p.padding_lo[d] < 0 || p.padding_hi[d] < 0) return "cuDNN has no negative padding";
    if (p.input_dilation[d] != 1) c.cudnn_dgrad = true;
  }
  if (c.cudnn_dgrad) {
    CudnnDgradForm form;
    const std::string no = cudnn_dgrad_form(p, form);
    if (!no.empty()) return no;
  }
  for (const Tensor* t : {&p.x, &p.weight, &p.out}) {
    if (element_span(*t) > kMaxCudnnSpan) {
      return "a tensor spans more than 2^31 - 1 elements (cuDNN engines index with 32 bits)";
    }
  }
  c.workspace_budget = budget;
  c.bias = BiasMode::none;
  if (p.has_bias) {
    if (channel_stride(p.out) != 1 && p.out_channels > 1) {
      return "with a bias, out's channel stride must be 1 (bias pass)";
    }
    c.out_row_stride = position_stride(p.out);
    if (c.out_row_stride < 0) {
      return "with a bias, out's batch and spatial dims must merge into one stride (bias pass)";
    }
    c.bias = p.out.dtype == DType::f32 ? BiasMode::pass : BiasMode::scratch;
    if (c.bias == BiasMode::scratch) {
      c.scratch_bytes = p.out_positions() * p.out_channels * 4;
      if (c.scratch_bytes > budget - kWorkspaceAlign) {
        return "the workspace (" + std::to_string(budget) + " bytes) cannot hold the f32 result (" +
               std::to_string(c.scratch_bytes) + " bytes) the bias pass rounds into out";
      }
    }
    c.block = 256;  // the bias pass
    c.grid_cap = max_blocks(dev);
    c.grid = grid_for(p.out_positions() * p.out_channels, c.block, c.grid_cap);
  }
  // Layout: [f32 scratch | the backward-data filter | cuDNN's workspace]; lt_offset is where
  // cuDNN's part starts.
  c.scratch_offset = 0;
  c.weight_t_offset = round_up(c.scratch_bytes, kWorkspaceAlign);
  c.dgrad_weight_in_place = c.cudnn_dgrad && dgrad_weight_in_place(dgrad_weight_index(p));
  c.weight_t_bytes = c.cudnn_dgrad && !c.dgrad_weight_in_place
                         ? p.out_channels * p.kernel_positions() * p.in_channels_per_group *
                               static_cast<int64_t>(dtype_size(p.weight.dtype))
                         : 0;
  c.lt_offset = c.weight_t_offset + round_up(c.weight_t_bytes, kWorkspaceAlign);
  if (c.lt_offset > budget) {
    return "the workspace (" + std::to_string(budget) + " bytes) cannot hold the f32 result and " +
           "the backward-data filter (" + std::to_string(c.lt_offset) + " bytes)";
  }
  c.lt_workspace_bytes = std::max<int64_t>(0, budget - c.lt_offset);
  c.workspace_bytes = c.lt_offset;  // + the chosen engine's workspace, at run time
  return "";
}

// ---- GEMM operands ----------------------------------------------------------------------------

// One cuBLASLt call of a GEMM path for output rows [row0, row0 + rows), in cuBLASLt's
// column-major terms, batched over the groups (batch index g):
//   D_g[m, n] = A_g^T[m, k] * B_g[k, n]
//   A_g: weight rows g*opg.. (k x m, ld lda), B_g: the unfold buffer or x's positions (k x n,
//   ld ldb), D_g: out's positions (m x n, ld ldd); m = opg, n = rows, k = taps * c/groups.
// Offsets are in elements from the tensor's (or the unfold buffer's) data pointer.
struct GemmCall {
  int64_t m = 0, n = 0, k = 0, batch = 1;
  int64_t lda = 0, a_batch_stride = 0;
  int64_t b_offset = 0, ldb = 0, b_batch_stride = 0;
  // D: out's rows, or with BiasMode::scratch the f32 scratch [rows][o] (offset from its start).
  bool d_scratch = false;
  int64_t d_offset = 0, ldd = 0, d_batch_stride = 0;
  int64_t bias_batch_stride = 0;  // BiasMode::epilogue
  // out's rows of this call (for the bias pass): out + out_offset, row stride out_ld.
  int64_t out_offset = 0, out_ld = 0;
};

inline GemmCall gemm_call(const detail::ConvProblem& p, const ConvConfig& c, int64_t row0,
                          int64_t rows) {
  GemmCall g;
  const int64_t cpg = p.in_channels_per_group, opg = p.out_channels_per_group;
  g.m = opg;
  g.n = rows;
  g.k = p.kernel_positions() * cpg;
  g.batch = p.groups;
  g.lda = c.weight_row_stride;
  g.a_batch_stride = opg * c.weight_row_stride;
  if (c.path == ConvPath::unfold_gemm) {
    g.b_offset = 0;
    g.ldb = c.unfold_row_elements;
    g.b_batch_stride = g.k;
  } else {
    g.ldb = c.x_row_stride != 0 ? c.x_row_stride : p.in_channels;
    g.b_offset = row0 * g.ldb;
    g.b_batch_stride = cpg;
  }
  g.out_ld = c.out_row_stride != 0 ? c.out_row_stride : p.out_channels;
  g.out_offset = row0 * g.out_ld;
  g.d_scratch = c.bias == BiasMode::scratch;
  g.ldd = g.d_scratch ? p.out_channels : g.out_ld;
  g.d_offset = g.d_scratch ? 0 : g.out_offset;
  g.d_batch_stride = opg;
  g.bias_batch_stride = c.bias == BiasMode::epilogue ? opg * p.bias.strides[0] : 0;
  return g;
}

}  // namespace gemmkit::cuda::conv_impl
