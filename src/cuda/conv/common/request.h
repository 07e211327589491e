// The caller's request to the convolution: options.algo, options.workspace_bytes,
// options.deterministic and the GEMMKIT_CONV_* / GEMMKIT_DETERMINISTIC environment, each string
// parsed once here into a typed field (ConvRequest).
// Selection and the paths only see the typed fields. Pure and header-only.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "api/validate.h"
#include "cuda/conv/common/names.h"

namespace gemmkit::cuda::conv_impl {

constexpr const char* kOp = "conv";
// Temporary device memory of a call when neither options.workspace_bytes nor
// GEMMKIT_CONV_WORKSPACE_MB says otherwise.
constexpr int64_t kDefaultWorkspaceBytes = int64_t{256} << 20;

// options.algo / GEMMKIT_CONV_ALGO.
enum class ConvAlgo : int {
  automatic = 0,  // "auto": the fastest path that serves the problem
  cudnn = 1,
  direct = 2,  // the direct kernels: depthwise, small-o, else generic
  depthwise = 3,
  gemm = 4,  // 1x1 GEMM or unfold + GEMM
  implicit = 5,
  reference = 6,  // the generic direct kernel
};

// GEMMKIT_CONV_DEPTHWISE: the depthwise variants the depthwise path may take. automatic: the
// tensor-core variant where it was measured faster (why_not_depthwise_mma_by_default), else
// staged, else blocked, else the window / generic variants; mma: the tensor-core variant wherever
// it applies, else as automatic; staged: never the tensor-core variant (the direct kernel's
// bits); blocked: neither the tensor-core nor the staged variant.
enum class DepthwiseChoice : int { automatic = 0, mma = 1, staged = 2, blocked = 3 };

// GEMMKIT_CONV_SMALL_O: the first small-o kernel the small-o path may take. automatic: the taps
// kernel's TMA form with >= kSmallOTapsTmaMinTilesPerBlock tiles per block, else its register
// form, else mma, else cuda; tma: the TMA form wherever it applies, then as automatic; taps: the
// register form, else mma, else cuda; mma: mma, else cuda; cuda: the CUDA-core kernel only.
enum class SmallOChoice : int { automatic = 0, tma = 1, taps = 2, mma = 3, cuda = 4 };

// GEMMKIT_CONV_IMPLICIT: which implicit-GEMM kernel the implicit path takes. automatic: the
// Hopper TMA + wgmma kernel (wgmma.cuh) where it applies (sm_90, no input dilation, ...:
// why_not_implicit_wgmma) and wastes not much more of its tiles than the mma.sync kernel
// (prefer_implicit_wgmma in select.h), else the mma.sync kernel (implicit_gemm.cuh); wgmma: the
// Hopper kernel wherever it applies; mma: the mma.sync kernel only.
enum class ImplicitChoice : int { automatic = 0, wgmma = 1, mma = 2 };

// GEMMKIT_CONV_WGMMA_SCHEDULE: how the Hopper implicit GEMM's two consumer warpgroups share the
// work. automatic: as implicit_wgmma_plan chooses (wgmma_plan.h); cooperative: both on each tile
// (wgmma.cuh); pingpong: each on its own 128-position tiles, in turn (wgmma_pingpong.cuh), where
// the plan allows it (one reduction segment, TMA stores), else cooperative.
enum class WgmmaScheduleChoice : int { automatic = 0, cooperative = 1, pingpong = 2 };

// GEMMKIT_CONV_WGMMA_O_TILE: output channels per tile of the Hopper implicit GEMM. automatic: 64
// (the narrow-o form) or 128 as implicit_wgmma_plan's cost model chooses (wgmma_plan.h: 64 where
// o / groups <= 64, or where few 128-channel tiles would split K), 128 for stride phases; o128:
// 128 always; o64: 64 wherever the problem is one stride phase (no input dilation), its K one
// chain.
enum class WgmmaOTileChoice : int { automatic = 0, o128 = 1, o64 = 2 };

// GEMMKIT_CONV_WGMMA_BLOCK_C: channels per k block of the Hopper implicit GEMM. automatic: 32
// where c / groups leaves a last block of 32 channels or fewer below 128 channels
// (implicit_wgmma_auto_block_c, wgmma_plan.h), else 64; c64 / c32: 64 or 32 always. The MMAs
// issue the same k16 steps in the same order either way; where K is split into reduction
// segments, their bounds count k blocks, so a forced width may move them (other bits).
enum class WgmmaBlockCChoice : int { automatic = 0, c64 = 1, c32 = 2 };

// GEMMKIT_CONV_WGMMA_HALO: whether the Hopper implicit GEMM's cooperative schedule loads the input
// row its three taps along w read once per stage (the halo form, wgmma_halo.cuh). automatic and
// on: wherever implicit_wgmma_can_halo allows it (wgmma_plan.h); off: never.
enum class WgmmaHaloChoice : int { automatic = 0, on = 1, off = 2 };

inline constexpr const char* kConvAlgoNames[] = {"auto", "cudnn",    "direct",   "depthwise",
                                                 "gemm", "implicit", "reference"};
inline constexpr const char* kDepthwiseChoiceNames[] = {"auto", "mma", "staged", "blocked"};
inline constexpr const char* kSmallOChoiceNames[] = {"auto", "tma", "taps", "mma", "cuda"};
inline constexpr const char* kImplicitChoiceNames[] = {"auto", "wgmma", "mma"};
inline constexpr const char* kWgmmaScheduleChoiceNames[] = {"auto", "cooperative", "pingpong"};
inline constexpr const char* kWgmmaOTileChoiceNames[] = {"auto", "128", "64"};
inline constexpr const char* kWgmmaBlockCChoiceNames[] = {"auto", "64", "32"};
inline constexpr const char* kWgmmaHaloChoiceNames[] = {"auto", "on", "off"};

inline const char* algo_name(ConvAlgo algo) {
  return enum_name(algo, kConvAlgoNames);
}

inline const char* depthwise_choice_name(DepthwiseChoice choice) {
  return enum_name(choice, kDepthwiseChoiceNames);
}

inline const char* small_o_choice_name(SmallOChoice choice) {
  return enum_name(choice, kSmallOChoiceNames);
}

inline const char* implicit_choice_name(ImplicitChoice choice) {
  return enum_name(choice, kImplicitChoiceNames);
}

constexpr const char* kAlgoNames = "auto, cudnn, direct, depthwise, gemm, implicit, reference";

inline std::optional<ConvAlgo> parse_algo(const std::string& name) {
  return enum_value<ConvAlgo>(name, kConvAlgoNames);
}

// A choice setting of the environment (`name` = `value`): unset ("") leaves `choice` as it is,
// one of `names` sets it, anything else is an Error naming the setting, the value and the names.
template <typename E, std::size_t N>
void parse_choice_setting(const char* name, const std::string& value, const char* const (&names)[N],
                          E& choice) {
  if (value.empty()) return;
  const std::optional<E> parsed = enum_value<E>(value, names);
  if (!parsed) {
    std::string list;
    for (std::size_t i = 0; i < N; ++i) list += (i ? ", " : "") + std::string(names[i]);
    detail::fail(kOp, name, "'" + value + "': must be one of " + list);
  }
  choice = *parsed;
}

// The caller's request after options and environment were resolved.
struct ConvRequest {
  ConvAlgo algo = ConvAlgo::automatic;
  std::string algo_origin = "options.algo";  // the name errors give the algo setting
  int64_t workspace_bytes = kDefaultWorkspaceBytes;
  // Whether auto may pick cuDNN (GEMMKIT_CONV_CUDNN=0 turns it off: own paths only).
  bool cudnn_in_auto = true;
  SmallOChoice small_o = SmallOChoice::automatic;
  DepthwiseChoice depthwise = DepthwiseChoice::automatic;
  ImplicitChoice implicit = ImplicitChoice::automatic;
  WgmmaScheduleChoice wgmma_schedule = WgmmaScheduleChoice::automatic;
  WgmmaOTileChoice wgmma_o_tile = WgmmaOTileChoice::automatic;
  WgmmaBlockCChoice wgmma_block_c = WgmmaBlockCChoice::automatic;
  WgmmaHaloChoice wgmma_halo = WgmmaHaloChoice::automatic;
  // Deterministic mode (options.deterministic 1, or -1 with GEMMKIT_DETERMINISTIC=1): every
  // choice a pure function of the problem, the request and the device description. The static
  // selection runs (no race), cuDNN takes its heuristic's engine (not timed), and a path that
  // fails at run time for a cause that depends on the process's state throws instead of falling
  // back (may_fall_back in select.h; docs/conv.md#determinism).
  bool deterministic = false;
  bool deterministic_from_env = false;  // the mode was set by GEMMKIT_DETERMINISTIC
};

// The name errors and reasons give the deterministic setting of `r`.
inline std::string deterministic_origin(const ConvRequest& r) {
  return r.deterministic_from_env ? "options.deterministic (from GEMMKIT_DETERMINISTIC)"
                                  : "options.deterministic";
}

// The raw settings a request is resolved from: the options, and the environment's values ("" when
// a variable is unset). request_settings fills it from ConvOptions and the environment.
struct ConvRequestSettings {
  std::string option_algo;         // options.algo ("" = not set)
  int64_t option_workspace = -1;   // options.workspace_bytes (< 0 = not set)
  std::string env_algo;            // GEMMKIT_CONV_ALGO
  std::string env_workspace_mb;    // GEMMKIT_CONV_WORKSPACE_MB
  std::string env_cudnn;           // GEMMKIT_CONV_CUDNN: "" or "1" lets auto use cuDNN, "0" not
  std::string env_small_o;         // GEMMKIT_CONV_SMALL_O: auto | tma | taps | mma | cuda
  std::string env_depthwise;       // GEMMKIT_CONV_DEPTHWISE: auto | mma | staged | blocked
  std::string env_implicit;        // GEMMKIT_CONV_IMPLICIT: auto | wgmma | mma
  std::string env_wgmma_schedule;  // GEMMKIT_CONV_WGMMA_SCHEDULE: auto | cooperative | pingpong
  std::string env_wgmma_o_tile;    // GEMMKIT_CONV_WGMMA_O_TILE: auto | 128 | 64
  std::string env_wgmma_block_c;   // GEMMKIT_CONV_WGMMA_BLOCK_C: auto | 64 | 32
  std::string env_wgmma_halo;      // GEMMKIT_CONV_WGMMA_HALO: auto | on | off
  // options.deterministic: -1 = not set, 0 = off, 1 = on (gemmkit::conv rejects other values
  // before this; here they count as on).
  int option_deterministic = -1;
  std::string env_deterministic;  // GEMMKIT_DETERMINISTIC: "" or "0" off, "1" on
};

// options.algo if set, else GEMMKIT_CONV_ALGO if set, else "auto"; the workspace from
// options.workspace_bytes if set (>= 0), else GEMMKIT_CONV_WORKSPACE_MB, else the default; the
// mode from options.deterministic if set (>= 0), else GEMMKIT_DETERMINISTIC, else off. Unknown
// names and malformed values are an Error naming where the value came from.
inline ConvRequest resolve_request(const ConvRequestSettings& s) {
  ConvRequest r;
  std::string algo = "auto";
  if (!s.option_algo.empty()) {
    algo = s.option_algo;
  } else if (!s.env_algo.empty()) {
    algo = s.env_algo;
    r.algo_origin = "options.algo (from GEMMKIT_CONV_ALGO)";
  }
  const std::optional<ConvAlgo> parsed_algo = parse_algo(algo);
  if (!parsed_algo) {
    detail::fail(kOp, r.algo_origin, "'" + algo + "': must be one of " + kAlgoNames);
  }
  r.algo = *parsed_algo;
  r.cudnn_in_auto = detail::parse_switch(kOp, "GEMMKIT_CONV_CUDNN", s.env_cudnn);
  parse_choice_setting("GEMMKIT_CONV_SMALL_O", s.env_small_o, kSmallOChoiceNames, r.small_o);
  parse_choice_setting("GEMMKIT_CONV_DEPTHWISE", s.env_depthwise, kDepthwiseChoiceNames,
                       r.depthwise);
  parse_choice_setting("GEMMKIT_CONV_IMPLICIT", s.env_implicit, kImplicitChoiceNames, r.implicit);
  parse_choice_setting("GEMMKIT_CONV_WGMMA_SCHEDULE", s.env_wgmma_schedule,
                       kWgmmaScheduleChoiceNames, r.wgmma_schedule);
  parse_choice_setting("GEMMKIT_CONV_WGMMA_O_TILE", s.env_wgmma_o_tile, kWgmmaOTileChoiceNames,
                       r.wgmma_o_tile);
  parse_choice_setting("GEMMKIT_CONV_WGMMA_BLOCK_C", s.env_wgmma_block_c, kWgmmaBlockCChoiceNames,
                       r.wgmma_block_c);
  parse_choice_setting("GEMMKIT_CONV_WGMMA_HALO", s.env_wgmma_halo, kWgmmaHaloChoiceNames,
                       r.wgmma_halo);
  if (s.option_workspace >= 0) {
    r.workspace_bytes = s.option_workspace;
  } else if (!s.env_workspace_mb.empty()) {
    constexpr int64_t kMaxMib = int64_t{1} << 30;  // 2^50 bytes: far above any device
    const std::optional<int64_t> mib = detail::parse_whole_number(s.env_workspace_mb, 10);
    if (!mib || *mib > kMaxMib) {
      detail::fail(kOp, "GEMMKIT_CONV_WORKSPACE_MB",
                   "'" + s.env_workspace_mb + "': must be a whole number of MiB in [0, 2^30]");
    }
    r.workspace_bytes = *mib << 20;
  }
  if (s.option_deterministic >= 0) {
    r.deterministic = s.option_deterministic != 0;
  } else {
    r.deterministic =
        detail::parse_switch_default_off(kOp, "GEMMKIT_DETERMINISTIC", s.env_deterministic);
    r.deterministic_from_env = r.deterministic;
  }
  return r;
}

// The settings of a call: its options and the GEMMKIT_CONV_* / GEMMKIT_DETERMINISTIC environment.
inline ConvRequestSettings request_settings(const std::string& option_algo,
                                            int64_t option_workspace, int option_deterministic) {
  ConvRequestSettings s;
  s.option_algo = option_algo;
  s.option_workspace = option_workspace;
  s.option_deterministic = option_deterministic;
  s.env_deterministic = detail::env_setting("GEMMKIT_DETERMINISTIC");
  s.env_algo = detail::env_setting("GEMMKIT_CONV_ALGO");
  s.env_workspace_mb = detail::env_setting("GEMMKIT_CONV_WORKSPACE_MB");
  s.env_cudnn = detail::env_setting("GEMMKIT_CONV_CUDNN");
  s.env_small_o = detail::env_setting("GEMMKIT_CONV_SMALL_O");
  s.env_depthwise = detail::env_setting("GEMMKIT_CONV_DEPTHWISE");
  s.env_implicit = detail::env_setting("GEMMKIT_CONV_IMPLICIT");
  s.env_wgmma_schedule = detail::env_setting("GEMMKIT_CONV_WGMMA_SCHEDULE");
  s.env_wgmma_o_tile = detail::env_setting("GEMMKIT_CONV_WGMMA_O_TILE");
  s.env_wgmma_block_c = detail::env_setting("GEMMKIT_CONV_WGMMA_BLOCK_C");
  s.env_wgmma_halo = detail::env_setting("GEMMKIT_CONV_WGMMA_HALO");
  return s;
}

// GEMMKIT_CONV_CUDNN_AUTOTUNE: "" or "1" times cuDNN's top engines on the first call of a shape
// (outside stream capture), "0" takes the heuristic's first; anything else is an Error.
inline bool parse_cudnn_autotune(const std::string& env_value) {
  return detail::parse_switch(kOp, "GEMMKIT_CONV_CUDNN_AUTOTUNE", env_value);
}

}  // namespace gemmkit::cuda::conv_impl
