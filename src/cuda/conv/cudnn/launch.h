// The cuDNN path of the CUDA convolution (ConvPath::cudnn): the whole conv_general problem as one
// cuDNN graph-API forward convolution (pre/post padding, strides, kernel dilation, groups through
// the channel dims, any tensor strides; 1-D as 2-D with a unit dim; flip as CUDNN_CONVOLUTION),
// compute type fp32, then the bias pass of common/bias.cuh when there is a bias (one rounding).
// Engines: cuDNN's heuristic candidates without nondeterministic, down-converting or
// reduced-precision engines (and without TF32 for f32 inputs); the top few timed
// on the first call of a shape outside stream capture, the fastest cached. Deterministic mode:
// the heuristic's first such engine that is not runtime-compiled, never timed (plan.h).
// When it wins: auto_prefers_cudnn in select.h. Without GEMMKIT_WITH_CUDNN every function
// reports that cuDNN is not built, so selection never picks it.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "common/problems.h"
#include "cuda/conv/common/config.h"
#include "cuda/conv/common/launch.h"
#include "cuda/conv/cudnn/layout.h"

namespace gemmkit::cuda::conv_impl {

// "" when cuDNN is built in and its loaded library is one this code was written for, else why not.
std::string cudnn_unavailable_reason();

// Runs a ConvPath::cudnn configuration on `stream` (the problem's device is current), its engine
// chosen as cudnn_engine_search (plan.h) says for `deterministic`. Returns false, with
// `failure.why` set, when cuDNN offers no usable engine or cannot describe the problem (pure
// causes: `failure.pure`), its handle cannot be created, the workspace cannot be allocated, the
// engine's execution fails or, in deterministic mode, a plan fails to build for a cause that is
// not pure (cudnn_refusal_is_pure); nothing was enqueued then, except partial output writes
// of candidates that failed while being timed. `note` receives the engine chosen and how. Other
// failures (setting the handle's stream, the filter packing and bias kernels) throw Error.
bool run_cudnn_path(const detail::ConvProblem& p, const ConvConfig& c, int device,
                    cudaStream_t stream, bool deterministic, RunFailure& failure,
                    std::string& note);

// dgrad_weight.cuh: the packed backward-data filter of a transposed convolution (packed
// 16-byte aligned). Returns the kernel it launched: "vector" or "scalar".
const char* launch_conv_dgrad_weight(DType dtype, const DgradWeightIndex& index, const void* w,
                                     void* packed, cudaStream_t stream);

}  // namespace gemmkit::cuda::conv_impl
