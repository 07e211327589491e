// Path selection of the CUDA convolution: select_conv_config(problem, device, request) -> config,
// pure and header-only (no CUDA header), so the host unit tests call it on CPU-only machines.
// Each path's eligibility, geometry and workspace rules live in its folder's plan.h (direct/,
// depthwise/, small_o/, gemm/, implicit_gemm/, cudnn/); this header asks each path once, orders
// them, decides between the own paths and cuDNN (auto_prefers_cudnn), which shapes race (none in
// deterministic mode) and when a failed run may fall back. GEMMKIT_LOG=1 prints the choice and its
// reason.
#pragma once

#include <string>

#include "cuda/conv/common/config.h"
#include "cuda/conv/common/occupancy.h"
#include "cuda/conv/common/request.h"
#include "cuda/conv/cudnn/plan.h"
#include "cuda/conv/depthwise/plan.h"
#include "cuda/conv/direct/plan.h"
#include "cuda/conv/gemm/plan.h"
#include "cuda/conv/implicit_gemm/plan.h"
#include "cuda/conv/implicit_gemm/wgmma_plan.h"
#include "cuda/conv/small_c/plan.h"
#include "cuda/conv/small_o/plan.h"

namespace gemmkit::cuda::conv_impl {

// auto takes the implicit-GEMM kernel over unfold + GEMM when at least this share of its tiles'
// MMA work is useful (tails of M, N, K, input-dilation holes): below it, e.g. o = 3, most of a
// tile would multiply zeros. (A grid below one wave does not count against it: the unfold's
// GEMM would not fill the machine either.)
constexpr double kImplicitMinEfficiency = 0.25;

// The Hopper implicit GEMM (TMA + wgmma) runs the useful part of its tiles about twice as fast as
// the mma.sync kernel (3x3 VAE layers with c >= 128: 2.0-2.3x, docs/perf.md). Its k blocks are
// whole taps of 64 channels, where the mma.sync kernel packs small channel counts across taps, but
// it issues only the k16 steps that hold channels, so small c costs it little: c = 32 (VAE
// conv_in) 19.1 against 30.2 us at 128x128, 6.7 against 9.9 at 32x32; c = 16, 128x128 -> 512:
// 20.4 against 24.2 us, 2 x 28x28 -> 128: 6.3 against 8.0. Auto takes it when its useful share
// (of the steps it issues) is at least this fraction of the mma.sync kernel's.
constexpr double kImplicitWgmmaMinRelativeEfficiency = 0.5;
// Transposed convolutions (stride phases) follow the same rule: convtranspose2d-k4s2-256 ran in
// 63 us as four phases against 303 us on the mma.sync kernel, which multiplies the input-dilation
// zeros.
inline bool prefer_implicit_wgmma(const ImplicitWgmmaPlan& wgmma, const ImplicitGemmPlan& mma) {
  return wgmma.tile_efficiency >= kImplicitWgmmaMinRelativeEfficiency * mma.tile_efficiency;
}

// Whether auto takes cuDNN over the own path `own` that it would pick otherwise. The rule follows
// the conv tables of docs/perf.md (own paths against cuDNN in the same run): the own path stays
// for the 1x1 GEMM, the 1-D depthwise kernel and the tensor-core small-o kernels, which are as
// fast or faster, and so does the Hopper implicit GEMM in its halo form (the VAE suites' 3x3
// layers at 256^2 and above: 0.92-1.02x of cuDNN's time in graphs of 20 calls on an H100 SXM,
// where the race's short timing puts the two within 3%); cuDNN takes unfold_gemm, 2-D depthwise
// and the CUDA-core small-o kernel, and stays the static choice over the Hopper kernel's other
// forms. Retune here when either side changes.
inline bool auto_prefers_cudnn(const detail::ConvProblem& p, const ConvConfig& own) {
  if (own.path == ConvPath::gemm_1x1 || own.path == ConvPath::small_c) return false;
  if (own.path == ConvPath::implicit_wgmma && own.implicit_wgmma.halo) return false;
  if (own.path == ConvPath::small_o && (own.small_o.mma || own.small_o_taps.active)) return false;
  const bool depthwise = p.groups == p.in_channels && p.in_channels_per_group == 1;
  return !(depthwise && p.spatial == 1);
}

// ---- Selection --------------------------------------------------------------------------------

inline ConvConfig select_conv_config(const detail::ConvProblem& p, const DeviceDescription& dev,
                                     const ConvRequest& request) {
  const ConvAlgo requested = request.algo;
  const std::string algo = algo_name(requested);
  const auto cannot = [&](const std::string& why) {
    detail::fail(kOp, request.algo_origin, "'" + algo + "': cannot serve this problem: " + why);
  };
  const int64_t budget = std::max<int64_t>(0, request.workspace_bytes);
  ConvConfig cudnn;
  cudnn.path = ConvPath::cudnn;
  cudnn.algo = algo;
  const std::string no_cudnn = why_not_cudnn(p, dev, budget, cudnn);
  if (requested == ConvAlgo::cudnn) {
    if (!no_cudnn.empty()) cannot(no_cudnn);
    cudnn.reason = "algo 'cudnn' requested";
    return cudnn;
  }
  if (requested == ConvAlgo::reference) {
    return direct_config(p, dev, algo, "algo 'reference' forces the generic direct kernel");
  }

  const std::string no_depthwise = why_not_depthwise(p);
  if (requested == ConvAlgo::depthwise) {
    if (!no_depthwise.empty()) cannot(no_depthwise);
    return depthwise_config(p, dev, algo, "algo 'depthwise' requested", request.depthwise);
  }
  const std::string no_small_o = why_not_small_o(p, dev, request.small_o);
  if (requested == ConvAlgo::direct) {
    if (no_depthwise.empty())
      return depthwise_config(p, dev, algo, "algo 'direct': depthwise kernel (groups == c)",
                              request.depthwise);
    if (no_small_o.empty())
      return small_o_config(p, dev, algo, "algo 'direct': small-o kernel (o <= 8)",
                            request.small_o);
    return direct_config(p, dev, algo,
                         "algo 'direct': generic direct kernel (depthwise: " + no_depthwise +
                             "; small-o: " + no_small_o + ")");
  }

  ConvConfig gemm;
  gemm.algo = algo;
  std::string no_1x1 = why_not_gemm_1x1(p, dev, budget, gemm);
  if (no_1x1.empty()) {
    gemm.path = ConvPath::gemm_1x1;
    gemm.reason = "1x1 kernel, stride 1, no padding: x is the GEMM operand (no unfold)";
  }
  std::string no_unfold;
  if (!no_1x1.empty()) {
    gemm = ConvConfig{};
    gemm.algo = algo;
    no_unfold = why_not_unfold(p, dev, budget, gemm);
    if (no_unfold.empty()) {
      gemm.path = ConvPath::unfold_gemm;
      gemm.reason = "unfold + cuBLASLt GEMM in " + std::to_string(gemm.chunks) + " chunk(s) of " +
                    std::to_string(gemm.chunk_rows) + " output rows";
    }
  }
  const std::string no_implicit = why_not_implicit_gemm(p, dev);
  const ImplicitGemmPlan implicit =
      no_implicit.empty() ? implicit_gemm_plan(p, dev) : ImplicitGemmPlan{};
  // The Hopper kernel in place of the mma.sync one where it applies, unless GEMMKIT_CONV_IMPLICIT
  // is mma; under auto only where its tiles' useful share is not far below the mma.sync kernel's
  // (prefer_implicit_wgmma).
  const std::string no_wgmma = request.implicit == ImplicitChoice::mma
                                   ? std::string("GEMMKIT_CONV_IMPLICIT is mma")
                                   : why_not_implicit_wgmma(p, dev);
  const ImplicitWgmmaPlan wgmma =
      no_wgmma.empty()
          ? implicit_wgmma_plan(p, dev, budget, request.wgmma_schedule, request.wgmma_o_tile,
                                request.wgmma_block_c, request.wgmma_halo)
          : ImplicitWgmmaPlan{};
  const auto implicit_choice = [&](const std::string& reason) {
    if (no_wgmma.empty() && (request.implicit == ImplicitChoice::wgmma || !no_implicit.empty() ||
                             prefer_implicit_wgmma(wgmma, implicit))) {
      return implicit_wgmma_config(wgmma, algo, reason + ", the Hopper kernel");
    }
    return implicit_config(
        implicit, algo,
        no_wgmma.empty() ? reason + ", the mma.sync kernel (its tiles waste " +
                               "less: " + std::to_string(implicit.tile_efficiency) +
                               " useful against " + std::to_string(wgmma.tile_efficiency) + ")"
                         : reason + " (not the Hopper kernel: " + no_wgmma + ")");
  };
  // The small-c kernel (K packed across taps) where c/groups <= 8: auto takes it unless the
  // mma.sync implicit GEMM wastes less of its tiles (c = 8 packs whole taps in both).
  SmallCPlan small_c;
  const std::string no_small_c = why_not_small_c(p, dev, small_c);
  const bool take_small_c =
      no_small_c.empty() &&
      (!no_implicit.empty() || small_c.tile_efficiency >= implicit.tile_efficiency);
  std::string no_unfold_prefix;
  if (requested == ConvAlgo::implicit) {
    // The small-c kernel where auto would take it, or where neither implicit GEMM serves.
    if (take_small_c || (!no_wgmma.empty() && !no_implicit.empty())) {
      if (no_small_c.empty()) {
        return small_c_config(small_c, algo,
                              "algo 'implicit' requested, c/groups <= 8: the small-c kernel");
      }
      cannot(no_implicit + "; small-c kernel: " + no_small_c);
    }
    return implicit_choice("algo 'implicit' requested");
  }
  if (requested == ConvAlgo::gemm) {
    if (!no_1x1.empty() && !no_unfold.empty()) {
      cannot("1x1 GEMM: " + no_1x1 + "; unfold + GEMM: " + no_unfold);
    }
    gemm.reason = "algo 'gemm': " + gemm.reason;
    return gemm;
  }

  // auto: the own path that fits, then cuDNN instead where it is faster.
  const auto own_auto = [&]() -> ConvConfig {
    if (no_depthwise.empty()) {
      return depthwise_config(p, dev, algo, "groups == c: depthwise kernel", request.depthwise);
    }
    if (no_small_o.empty()) {
      return small_o_config(p, dev, algo, "o <= 8: small-o direct kernel", request.small_o);
    }
    if (no_1x1.empty() && (gemm.chunk_rows >= kMinChunkRows || gemm.chunks == 1)) return gemm;
    if (take_small_c) {
      return small_c_config(small_c, algo, "c/groups <= 8: implicit GEMM with taps packed along K");
    }
    if (no_implicit.empty() && implicit.tile_efficiency >= kImplicitMinEfficiency) {
      return implicit_choice("implicit GEMM (no unfold)");
    }
    if (!no_implicit.empty()) {
      no_unfold_prefix = "implicit GEMM: " + no_implicit + "; ";
    } else {
      no_unfold_prefix = "implicit GEMM: " + std::to_string(implicit.tile_efficiency) +
                         " of its tiles' MMA work useful; ";
    }
    if (no_1x1.empty() || no_unfold.empty()) {
      if (gemm.chunk_rows >= kMinChunkRows || gemm.chunks == 1) return gemm;
      (no_1x1.empty() ? no_1x1 : no_unfold) =
          "the workspace allows only " + std::to_string(gemm.chunk_rows) + " output rows per chunk";
    }
    return direct_config(p, dev, algo,
                         "generic direct kernel (" + no_unfold_prefix + "1x1 GEMM: " + no_1x1 +
                             "; unfold + GEMM: " + no_unfold + ")");
  };
  ConvConfig own = own_auto();
  if (!request.cudnn_in_auto) return own;
  if (!no_cudnn.empty()) {
    own.reason += "; not cuDNN: " + no_cudnn;
    return own;
  }
  if (!auto_prefers_cudnn(p, own)) {
    own.reason += std::string("; not cuDNN: the own ") + path_name(own.path) +
                  " path is as fast or faster here (docs/perf.md)";
    return own;
  }
  cudnn.reason = std::string("cuDNN: faster than the own ") + path_name(own.path) +
                 " path here (docs/perf.md)";
  return cudnn;
}

// ---- auto: the static choice, and the candidate raced against it ------------------------------

// Own paths that auto times against cuDNN on a shape's first eager call, whose standing against
// cuDNN's engines varies by shape: the cheap memory-bound kernels (the 1x1 GEMM at 0.98-1.06x,
// 2-D depthwise at 0.83-1.5x, small-o) and the Hopper implicit GEMM (0.90-1.16x on the VAE
// suites' 3x3 layers, docs/perf.md). Timing costs a shape's first call 11 runs of each: ~0.2 s
// for the largest VAE layer at 2048x2048 (7 ms a run). The mma.sync implicit GEMM and unfold +
// GEMM are not raced: cuDNN's engines take less than half their time on every suite row.
inline bool auto_races_cudnn(const ConvConfig& own) {
  return own.path == ConvPath::depthwise || own.path == ConvPath::gemm_1x1 ||
         own.path == ConvPath::small_o || own.path == ConvPath::implicit_wgmma ||
         own.path == ConvPath::small_c;
}

// Whether the race's challenger replaces the static choice: only when faster by more than
// kRaceMargin, so that timing noise does not flip a shape between two paths from run to run.
constexpr double kRaceMargin = 0.03;
inline bool challenger_wins(double static_us, double challenger_us) {
  return challenger_us < static_us * (1.0 - kRaceMargin);
}

struct ConvCandidates {
  ConvConfig first;   // select_conv_config's choice
  ConvConfig second;  // with race: the other of {own path, cuDNN}
  bool race = false;
};

// The static choice and, under auto with cuDNN in reach, whether it races the other candidate
// (select_conv_candidates without deterministic mode).
inline ConvCandidates raced_conv_candidates(const detail::ConvProblem& p,
                                            const DeviceDescription& dev,
                                            const ConvRequest& request) {
  ConvCandidates c;
  c.first = select_conv_config(p, dev, request);
  if (request.algo != ConvAlgo::automatic || !request.cudnn_in_auto || !dev.cudnn) return c;
  if (c.first.path == ConvPath::cudnn) {
    ConvRequest own = request;
    own.cudnn_in_auto = false;
    c.second = select_conv_config(p, dev, own);
    c.race = auto_races_cudnn(c.second);
    return c;
  }
  if (!auto_races_cudnn(c.first)) return c;
  c.second.path = ConvPath::cudnn;
  c.second.algo = algo_name(request.algo);
  const std::string no_cudnn =
      why_not_cudnn(p, dev, std::max<int64_t>(0, request.workspace_bytes), c.second);
  c.second.reason = "cuDNN";
  c.race = no_cudnn.empty();
  return c;
}

// The static choice and, under auto with cuDNN in reach, whether it races the other candidate.
// Deterministic mode never races: the static choice is the call's (a pure function of the
// problem, the device description and the request), and its reason names the mode and the
// candidate that a default-mode call would have timed against it.
inline ConvCandidates select_conv_candidates(const detail::ConvProblem& p,
                                             const DeviceDescription& dev,
                                             const ConvRequest& request) {
  ConvCandidates c = raced_conv_candidates(p, dev, request);
  if (!request.deterministic) return c;
  c.first.reason += "; deterministic mode (" + deterministic_origin(request) + ")";
  if (c.race) {
    c.first.reason +=
        std::string(": the static choice, not raced against ") + path_name(c.second.path);
  }
  c.second = ConvConfig{};
  c.race = false;
  return c;
}

// ---- Run-time fallbacks -----------------------------------------------------------------------

// Whether a call under auto whose chosen path failed at run time (`failure`) falls back to
// another path, whose bits differ: always in default mode; in deterministic mode only for a pure
// cause (RunFailure::pure), which every process meets alike. (A forced algo never falls back.)
inline bool may_fall_back(const ConvRequest& request, const RunFailure& failure) {
  return !request.deterministic || failure.pure;
}

// The Error of a deterministic-mode call that may not fall back: names the setting, the path that
// failed and why.
[[noreturn]] inline void fail_without_fallback(const ConvRequest& request, ConvPath path,
                                               const RunFailure& failure) {
  detail::fail(kOp, deterministic_origin(request),
               std::string("1: the ") + path_name(path) + " path failed at run time (" +
                   failure.why +
                   "); deterministic mode falls back to another path only for a cause every "
                   "process meets (no cuBLASLt algorithm or cuDNN engine for the problem), not "
                   "for one this process's state decides");
}

}  // namespace gemmkit::cuda::conv_impl
