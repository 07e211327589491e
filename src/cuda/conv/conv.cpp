// gemmkit::cuda::conv: resolves the options, selects a path (select.h, pure), and runs it on
// the tensors' device and the caller's stream. A GEMM path that cuBLASLt or the allocator cannot
// serve falls back to the generic direct kernel under algo "auto" (never under "gemm"); a cuDNN
// run that fails falls back to the own path auto would take without cuDNN (never under "cudnn").
// Under auto, where an own memory-bound path and cuDNN both serve a shape, the first eager call
// times both and the faster one serves the shape from then on (race_now). Deterministic mode
// (ConvRequest::deterministic) runs the static choice, never times, and falls back only for a
// cause every process meets (may_fall_back).
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>

#include "api/validate.h"
#include "cuda/common/cuda_check.h"
#include "cuda/common/device_context.h"
#include "cuda/common/gpu_timing.h"
#include "cuda/conv/choice_cache.h"
#include "cuda/conv/common/geometry.h"
#include "cuda/conv/common/launch.h"
#include "cuda/conv/cudnn/launch.h"
#include "cuda/conv/depthwise/launch.h"
#include "cuda/conv/direct/launch.h"
#include "cuda/conv/gemm/launch.h"
#include "cuda/conv/implicit_gemm/launch.h"
#include "cuda/conv/implicit_gemm/wgmma_launch.h"
#include "cuda/conv/select.h"
#include "cuda/conv/small_c/launch.h"
#include "cuda/conv/small_o/launch.h"
#include "cuda/cuda_backend.h"

namespace gemmkit::cuda {

namespace conv_impl {

DeviceDescription describe_device(int device) {
  const DeviceProperties& props = device_properties(device);  // a clear Error if it is absent
  DeviceDescription d;
  d.sm_major = props.sm_major;
  d.sm_minor = props.sm_minor;
  d.multiprocessors = props.multiprocessors;
  d.max_grid_x = props.max_grid_x;
  d.max_grid_y = props.max_grid_y;
  d.max_grid_z = props.max_grid_z;
  d.shared_per_block_optin = props.shared_per_block_optin;
  d.shared_per_multiprocessor = props.shared_per_multiprocessor;
  d.cudnn_why_not = cudnn_unavailable_reason();
  d.cudnn = d.cudnn_why_not.empty();
  return d;
}

}  // namespace conv_impl

namespace {

using namespace conv_impl;

// Runs an own (not cuDNN) path. A GEMM path that cuBLASLt or the workspace cannot serve falls
// back to the generic direct kernel (an Error under algo "gemm", and in deterministic mode for a
// cause that is not pure); `config` becomes what ran. Returns whether it fell back.
bool run_own_path(const detail::ConvProblem& problem, const ConvGeometry& g,
                  const ConvRequest& request, const DeviceDescription& dev, int device,
                  cudaStream_t s, ConvConfig& config) {
  bool fell_back = false;
  if (config.path == ConvPath::gemm_1x1 || config.path == ConvPath::unfold_gemm) {
    RunFailure failure;
    if (!run_gemm_path(problem, g, config, device, s, failure)) {
      if (request.algo == ConvAlgo::gemm) {
        detail::fail(kOp, request.algo_origin, "'gemm': cannot serve this problem: " + failure.why);
      }
      if (!may_fall_back(request, failure)) fail_without_fallback(request, config.path, failure);
      config =
          direct_config(problem, dev, algo_name(request.algo),
                        config.reason + ", but " + failure.why + ": generic direct kernel instead");
      fell_back = true;
    }
  }
  ConvPointers ptr;
  ptr.x = problem.x.data;
  ptr.w = problem.weight.data;
  ptr.bias = problem.has_bias ? problem.bias.data : nullptr;
  ptr.out = problem.out.data;
  const DType x_dtype = problem.x.dtype, out_dtype = problem.out.dtype;
  switch (config.path) {
    case ConvPath::direct:
      launch_conv_direct(g, x_dtype, out_dtype, ptr, config.grid, config.block, s);
      break;
    case ConvPath::depthwise:
      launch_conv_depthwise(g, config.depthwise, config.vector, x_dtype, out_dtype, ptr,
                            config.grid, config.smem_bytes, s);
      break;
    case ConvPath::small_o:
      if (config.small_o_taps.active) {
        launch_conv_small_o_taps(g, config.small_o_taps, x_dtype, out_dtype, ptr, config.grid,
                                 config.smem_bytes, s);
      } else {
        launch_conv_small_o(g, config.small_o, config.vector, x_dtype, out_dtype, ptr, config.grid,
                            config.block, config.smem_bytes, s);
      }
      break;
    case ConvPath::implicit_gemm:
      launch_conv_implicit_gemm(problem, config.implicit, s);
      break;
    case ConvPath::implicit_wgmma:
      launch_conv_implicit_wgmma(problem, config.implicit_wgmma, s);
      break;
    case ConvPath::small_c:
      launch_conv_small_c(g, config.small_c, x_dtype, out_dtype, ptr, s);
      break;
    case ConvPath::gemm_1x1:
    case ConvPath::unfold_gemm:
    case ConvPath::cudnn:
      break;  // ran above, or not an own path
  }
  return fell_back;
}

// ---- auto's race between an own path and cuDNN ------------------------------------------------
// On a shape's first eager call (not under stream capture, GEMMKIT_CONV_CUDNN_AUTOTUNE not 0),
// both candidates run once (cuDNN picks its engine then), then kRaceRuns times each behind a GPU
// delay (the host's enqueue cost is not timed); the faster one is kept with the shape's choice
// in the choice cache, as long as the cache keeps it (select_conv_candidates and challenger_wins
// in select.h say which shapes race and when the challenger wins; race_step in choice_cache.h
// whether a call reads the kept outcome or races). Under capture, or before the first eager
// call, the static choice runs. Deterministic mode never races.

constexpr int kRaceRuns = 10;
constexpr int kRaceDelayUs = 1000;

ConvChoiceCache& choice_cache() {
  static ConvChoiceCache cache;
  return cache;
}

// Runs `config` (own path or cuDNN); false when cuDNN cannot serve it.
bool run_candidate(const detail::ConvProblem& problem, const ConvGeometry& g,
                   const ConvRequest& request, const DeviceDescription& dev, int device,
                   cudaStream_t s, ConvConfig config) {
  if (config.path == ConvPath::cudnn) {
    RunFailure failure;
    std::string note;
    return run_cudnn_path(problem, config, device, s, request.deterministic, failure, note);
  }
  run_own_path(problem, g, request, dev, device, s, config);
  GEMMKIT_CUDA_CHECK(cudaGetLastError());
  return true;
}

// Mean µs of kRaceRuns back-to-back runs; negative when the candidate cannot run.
double time_candidate(const detail::ConvProblem& problem, const ConvGeometry& g,
                      const ConvRequest& request, const DeviceDescription& dev, int device,
                      cudaStream_t s, const ConvConfig& config) {
  if (!run_candidate(problem, g, request, dev, device, s, config)) return -1.0;  // warm-up
  return time_calls_us(s, kRaceRuns, kRaceDelayUs,
                       [&] { return run_candidate(problem, g, request, dev, device, s, config); });
}

std::string us_text(double us) {
  std::ostringstream t;
  t.precision(4);
  t << us << " us";
  return t.str();
}

// The race's outcome for a call shape that has none kept yet (race_step's `race`), raced now on
// its first eager call and kept with its choice; null when it cannot be raced on this call
// (stream capture, or autotuning off; `why_not` says which): the static choice runs then and the
// shape stays unraced.
std::shared_ptr<const RaceResult> race_now(const detail::ConvProblem& problem,
                                           const ConvGeometry& g, const ConvRequest& request,
                                           const DeviceDescription& dev, int device, cudaStream_t s,
                                           const ConvChoice& choice, std::string& why_not) {
  if (!parse_cudnn_autotune(detail::env_setting("GEMMKIT_CONV_CUDNN_AUTOTUNE"))) {
    why_not = "GEMMKIT_CONV_CUDNN_AUTOTUNE=0";
    return nullptr;
  }
  if (stream_is_capturing(s)) {
    why_not = "stream capture";
    return nullptr;
  }
  const ConvCandidates& c = choice.candidates;
  const double first_us = time_candidate(problem, g, request, dev, device, s, c.first);
  const double second_us = time_candidate(problem, g, request, dev, device, s, c.second);
  const bool second = second_us >= 0 && (first_us < 0 || challenger_wins(first_us, second_us));
  const std::string how = std::string("timed ") + path_name(c.first.path) + " " +
                          (first_us < 0 ? "(cannot run)" : us_text(first_us)) + " against " +
                          path_name(c.second.path) + " " +
                          (second_us < 0 ? "(cannot run)" : us_text(second_us));
  auto r = std::make_shared<RaceResult>();
  r->chosen = second ? c.second : c.first;
  r->chosen.reason = (second ? c.second.reason + " (raced: faster than " +
                                   std::string(path_name(c.first.path)) + ")"
                             : c.first.reason) +
                     "; " + how;
  r->text = to_string(r->chosen);
  return choice.keep_race(std::move(r));
}

}  // namespace

void conv(const detail::ConvProblem& problem, const ConvOptions& options, Stream stream,
          CallInfo& info) {
  using namespace conv_impl;
  const int device = problem.x.device.index;
  const DeviceDescription dev = describe_device(device);  // Error if absent
  DeviceGuard guard(device);
  const ConvRequest request = resolve_request(
      request_settings(options.algo, options.workspace_bytes, options.deterministic));
  // The choice for this call shape (kept per process: choice_cache.h), then the config to
  // run and its text: kept with the choice or the race, or built for this call.
  const ConvChoiceKey key = conv_choice_key(problem, dev, device, request);
  const std::shared_ptr<const ConvChoice> choice =
      choice_cache().get(key, [&] { return select_conv_candidates(problem, dev, request); });
  const ConvCandidates& candidates = choice->candidates;
  const ConvGeometry g = normalize(problem);
  const cudaStream_t s = stream;
  ConvConfig config = candidates.first;
  const std::string* text = &choice->first_text;
  std::shared_ptr<const RaceResult> raced;  // holds *text while it points into the race
  const RaceStep step = race_step(*choice, request);
  if (step.kept != nullptr || step.race) {
    std::string not_raced;
    raced = step.kept != nullptr
                ? step.kept
                : race_now(problem, g, request, dev, device, s, *choice, not_raced);
    if (raced != nullptr) {
      config = raced->chosen;
      text = &raced->text;
    } else {
      config.reason += "; not raced against " + std::string(path_name(candidates.second.path)) +
                       " (" + not_raced + ")";
      text = nullptr;
    }
  }

  if (config.path == ConvPath::cudnn) {
    RunFailure failure;
    std::string note;
    if (run_cudnn_path(problem, config, device, s, request.deterministic, failure, note)) {
      info.backend = "cuda";
      info.kernel = kernel_name(config.path);
      info.reason = (text != nullptr ? *text : to_string(config)) + "; " + note;
      return;
    }
    if (request.algo == ConvAlgo::cudnn) {
      detail::fail(kOp, request.algo_origin, "'cudnn': cannot serve this problem: " + failure.why);
    }
    if (!may_fall_back(request, failure)) fail_without_fallback(request, config.path, failure);
    ConvRequest own = request;
    own.cudnn_in_auto = false;
    config = select_conv_config(problem, dev, own);
    config.reason = "cuDNN failed (" + failure.why + "), own path instead: " + config.reason;
    if (request.deterministic) {
      config.reason += "; deterministic mode (" + deterministic_origin(request) + ")";
    }
    text = nullptr;
  }
  if (run_own_path(problem, g, request, dev, device, s, config)) text = nullptr;
  info.backend = "cuda";
  info.kernel = kernel_name(config.path);
  info.reason = text != nullptr ? *text : to_string(config);
}

}  // namespace gemmkit::cuda
