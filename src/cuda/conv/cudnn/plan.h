// The cuDNN path (cudnn.cpp): whether cuDNN serves a problem, the form of a transposed convolution
// as cuDNN's backward-data, the workspace layout, which engines may serve and how one is chosen in
// each mode. Pure host code.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "common/problems.h"
#include "cuda/conv/common/config.h"
#include "cuda/conv/common/occupancy.h"
#include "cuda/conv/common/operands.h"
#include "cuda/conv/cudnn/layout.h"
#include "cuda/conv/gemm/plan.h"

namespace gemmkit::cuda::conv_impl {

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
// out into an fp32 scratch [positions][o] that the bias pass (common/bias.cuh) rounds into out
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

// ---- Engine choice (cudnn.cpp) ----------------------------------------------------------------

// What cuDNN notes about an engine (its numerical and behavior notes), as the filter reads them.
struct CudnnEngineNotes {
  bool nondeterministic = false;             // CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC
  bool down_converts_inputs = false;         // CUDNN_NUMERICAL_NOTE_DOWN_CONVERT_INPUTS
  bool reduced_precision_reduction = false;  // CUDNN_NUMERICAL_NOTE_REDUCED_PRECISION_REDUCTION
  bool tensor_core = false;                  // CUDNN_NUMERICAL_NOTE_TENSOR_CORE
  // CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION, or the behavior notes could not be read (only read
  // where they matter: deterministic mode).
  bool runtime_compiled = false;
};

// Whether an engine may serve: it keeps gemmkit's numerics — deterministic (run-to-run identical
// bits; cuDNN notes engines that reduce with atomics or split K nondeterministically), inputs not
// down-converted, fp32 reduction, no TF32 tensor cores for f32 inputs (as the cuBLASLt paths) —
// and, unless `allow_runtime_compiled`, its kernels are cuDNN's own, not compiled at run time
// (code that NVRTC builds in the process depends on the NVRTC found there, not on cuDNN's version
// alone). FFT and Winograd engines (fp32 transforms) are allowed: excluding them is measurably
// slower than unrestricted cuDNN (resnet50 rows, docs/perf.md), and their error stays within the
// tolerance the GPU tests check.
inline bool cudnn_engine_allowed(const CudnnEngineNotes& notes, bool f32_inputs,
                                 bool allow_runtime_compiled) {
  if (notes.nondeterministic || notes.down_converts_inputs || notes.reduced_precision_reduction) {
    return false;
  }
  if (notes.tensor_core && f32_inputs) return false;
  return allow_runtime_compiled || !notes.runtime_compiled;
}

// Whether a cuDNN status with which a heuristic or an engine's plan fails to build is a pure
// function of the operation graph, the engine configuration, the device and cuDNN's version — a
// bad or unsupported configuration, the 2000s and 3000s of cuDNN 9's codes — and not of the
// process's state (internal and allocation failures, the 4000s; the others). Deterministic mode
// passes over an engine only for such a refusal.
inline bool cudnn_refusal_is_pure(int status) {
  const int category = status / 1000;
  return category == 2 || category == 3;
}

// How the cuDNN path finds the engine of a plan-cache key that holds no final choice.
struct CudnnEngineSearch {
  // Time the top candidates (8 of heuristic mode A, up to 4 more of mode B) and keep the fastest;
  // else take the heuristic's first allowed engine (mode A, else the fallback list).
  bool time = false;
  bool final = false;  // the choice is kept for the process (never searched again)
  bool allow_runtime_compiled = true;
  const char* how = "";  // how the engine was chosen, when it was not timed
};

// Default mode: timed outside stream capture with GEMMKIT_CONV_CUDNN_AUTOTUNE on (`autotune`);
// under capture the heuristic's first, not final, so a later eager call times the key. The
// deterministic mode: the heuristic's first allowed engine and no runtime-compiled one, final
// whether or not the stream is being captured — a pure function of the problem, the workspace
// budget, the device and cuDNN's version (mode A ranks by rules, it times nothing). Its plans
// are keyed apart from the default mode's, so a timed choice of the process never serves it.
inline CudnnEngineSearch cudnn_engine_search(bool deterministic, bool autotune, bool capturing) {
  CudnnEngineSearch s;
  if (deterministic) {
    s.final = true;
    s.allow_runtime_compiled = false;
    s.how = "heuristic's first precompiled engine, not timed (deterministic mode)";
    return s;
  }
  s.time = autotune && !capturing;
  s.final = !capturing;
  s.how = capturing
              ? "heuristic's first, not timed (stream capture)"
              : (autotune ? "heuristic's only candidate" : "heuristic's first (autotune off)");
  return s;
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

}  // namespace gemmkit::cuda::conv_impl
