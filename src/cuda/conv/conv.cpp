// gemmkit::cuda::conv: resolves the options, selects a path (conv_config.h, pure), and runs it on
// the tensors' device and the caller's stream. A GEMM path that cuBLASLt or the allocator cannot
// serve falls back to the generic direct kernel under algo "auto" (never under "gemm"); a cuDNN
// run that fails falls back to the own path auto would take without cuDNN (never under "cudnn").
#include <string>

#include "api/validate.h"
#include "cuda/common/cuda_check.h"
#include "cuda/common/device_context.h"
#include "cuda/conv/conv_cudnn.h"
#include "cuda/conv/conv_gemm.h"
#include "cuda/conv/conv_geometry.h"
#include "cuda/conv/conv_implicit_gemm.h"
#include "cuda/conv/conv_launch.h"
#include "cuda/conv/conv_select.h"
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

void conv(const detail::ConvProblem& problem, const ConvOptions& options, Stream stream,
          CallInfo& info) {
  using namespace conv_impl;
  const int device = problem.x.device.index;
  const DeviceDescription dev = describe_device(device);  // Error if absent
  DeviceGuard guard(device);
  const ConvRequest request = resolve_request(
      options.algo, detail::env_setting("GEMMKIT_CONV_ALGO"), options.workspace_bytes,
      detail::env_setting("GEMMKIT_CONV_WORKSPACE_MB"), detail::env_setting("GEMMKIT_CONV_CUDNN"),
      detail::env_setting("GEMMKIT_CONV_SMALL_O"));
  ConvConfig config = select_conv_config(problem, dev, request);
  const ConvGeometry g = normalize(problem);
  const cudaStream_t s = stream;

  if (config.path == ConvPath::cudnn) {
    std::string why, note;
    if (run_cudnn_path(problem, config, device, s, why, note)) {
      info.backend = "cuda";
      info.kernel = kernel_name(config.path);
      info.reason = to_string(config) + "; " + note;
      return;
    }
    if (request.algo == "cudnn") {
      detail::fail(kOp, request.algo_origin, "'cudnn': cannot serve this problem: " + why);
    }
    ConvRequest own = request;
    own.cudnn_in_auto = false;
    config = select_conv_config(problem, dev, own);
    config.reason = "cuDNN failed (" + why + "), own path instead: " + config.reason;
  }

  if (config.path == ConvPath::gemm_1x1 || config.path == ConvPath::unfold_gemm) {
    std::string why;
    if (!run_gemm_path(problem, g, config, device, s, why)) {
      if (request.algo == "gemm") {
        detail::fail(kOp, request.algo_origin, "'gemm': cannot serve this problem: " + why);
      }
      config = direct_config(problem, dev, request.algo,
                             config.reason + ", but " + why + ": generic direct kernel instead");
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
    case ConvPath::gemm_1x1:
    case ConvPath::unfold_gemm:
    case ConvPath::cudnn:
      break;  // ran above
  }
  info.backend = "cuda";
  info.kernel = kernel_name(config.path);
  info.reason = to_string(config);
}

}  // namespace gemmkit::cuda
