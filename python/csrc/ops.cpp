// torch.ops.gemmkit: gemmkit's linear and convolution as PyTorch operators, built on the LibTorch
// stable ABI (one binary for every torch from the targeted version on).
//
// Each kernel turns the torch tensors into gemmkit descriptors (no copy), guards the tensors'
// device, takes torch's current CUDA stream and calls gemmkit. A gemmkit::Error propagates as a
// std::runtime_error carrying gemmkit's message, which torch raises as a Python RuntimeError
// (the Python package re-raises it as gemmkit.Error).
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gemmkit/gemmkit.h"

#ifdef GEMMKIT_WITH_CUDA
// Declared by torch's shim under USE_CUDA, which a stable-ABI extension does not define; the
// symbol lives in libtorch_cuda.
extern "C" AOTI_TORCH_EXPORT AOTITorchError aoti_torch_get_current_cuda_stream(int32_t device_index,
                                                                               void** ret_stream);
#endif

namespace gemmkit::torch_ops {
namespace {

using StableTensor = torch::stable::Tensor;
using torch::headeronly::ScalarType;

[[noreturn]] void fail(const char* op, const std::string& argument, const std::string& message) {
  throw Error(std::string("gemmkit::") + op + ": " + argument + " " + message);
}

const char* scalar_type_name(ScalarType type) {
  switch (type) {
    case ScalarType::BFloat16:
      return "torch.bfloat16";
    case ScalarType::Half:
      return "torch.float16";
    case ScalarType::Float:
      return "torch.float32";
    case ScalarType::Double:
      return "torch.float64";
    default:
      return "a dtype other than bfloat16, float16, float32";
  }
}

DType dtype_of(ScalarType type, const char* op, const char* name) {
  switch (type) {
    case ScalarType::BFloat16:
      return DType::bf16;
    case ScalarType::Half:
      return DType::f16;
    case ScalarType::Float:
      return DType::f32;
    default:
      fail(op, name,
           std::string("dtype ") + scalar_type_name(type) +
               ": must be torch.bfloat16, torch.float16 or torch.float32");
  }
}

Device device_of(const StableTensor& t, const char* op, const char* name) {
  if (t.is_cpu()) return Device::cpu();
  if (t.is_cuda()) return Device::cuda(t.get_device_index());
  fail(op, name, "is on a device other than the CPU or CUDA: gemmkit runs on those two");
}

// A gemmkit view of `t` with its own shape and strides (rank <= kMaxRank).
Tensor view_of(const StableTensor& t, const char* op, const char* name) {
  const int64_t rank = t.dim();
  if (rank > kMaxRank) {
    fail(op, name, "has rank " + std::to_string(rank) + "; gemmkit takes at most 8 dims");
  }
  Tensor v;
  v.data = t.data_ptr();
  v.dtype = dtype_of(t.scalar_type(), op, name);
  v.device = device_of(t, op, name);
  v.rank = static_cast<int>(rank);
  const auto sizes = t.sizes();
  const auto strides = t.strides();
  for (int64_t d = 0; d < rank; ++d) {
    v.shape[d] = sizes[static_cast<std::size_t>(d)];
    v.strides[d] = strides[static_cast<std::size_t>(d)];
  }
  return v;
}

// The [n, last] matrix view of `t` (rank >= 1) whose leading dims collapse into one row index
// without a copy, or nullopt when their strides do not allow it. A rank-1 tensor is one row.
std::optional<Tensor> matrix_view_of(const StableTensor& t, const char* op, const char* name) {
  const int64_t rank = t.dim();
  if (rank < 1) fail(op, name, "is a 0-dim tensor; it must have at least one dim");
  const auto sizes = t.sizes();
  const auto strides = t.strides();
  const auto last = static_cast<std::size_t>(rank - 1);
  Tensor v;
  v.data = t.data_ptr();
  v.dtype = dtype_of(t.scalar_type(), op, name);
  v.device = device_of(t, op, name);
  v.rank = 2;
  v.shape[1] = sizes[last];
  v.strides[1] = strides[last];
  int64_t rows = 1;
  for (std::size_t d = 0; d < last; ++d) rows *= sizes[d];
  v.shape[0] = rows;
  // The row stride: the stride of the innermost leading dim of size > 1; every outer leading
  // dim of size > 1 must step over exactly the dims inside it.
  int64_t row_stride = 0;
  int64_t span = 0;  // elements covered by the leading dims inside the current one
  for (std::size_t d = last; d-- > 0;) {
    if (sizes[d] == 1) continue;
    if (row_stride == 0) {
      row_stride = strides[d];
    } else if (strides[d] != span) {
      return rows == 0 ? std::optional<Tensor>(v) : std::nullopt;
    }
    span = strides[d] * sizes[d];
  }
  if (row_stride == 0) {
    // One row (or none): any stride >= the row's extent is a valid description.
    row_stride = std::max<int64_t>(1, sizes[last] * std::max<int64_t>(1, strides[last]));
  }
  v.strides[0] = row_stride;
  return v;
}

#ifdef GEMMKIT_WITH_CUDA
Stream current_stream(const Device& device) {
  void* stream = nullptr;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_current_cuda_stream(device.index, &stream));
  return static_cast<Stream>(stream);
}
#endif

// Runs `call(stream)` on the tensors' device: for CUDA, under a device guard with torch's
// current stream of that device; for the CPU, with no stream.
template <typename Call>
void on_device(const Device& device, Call&& call) {
  if (device.is_cpu()) {
    call(Stream{nullptr});
    return;
  }
#ifdef GEMMKIT_WITH_CUDA
  // The guard (a heap object behind the shim) only when the tensors are not on the current
  // device: the common case costs one query.
  if (torch::stable::accelerator::getCurrentDeviceIndex() == device.index) {
    call(current_stream(device));
    return;
  }
  const torch::stable::accelerator::DeviceGuard guard(device.index);
  call(current_stream(device));
#else
  throw Error(
      "gemmkit: CUDA tensors given, but this build of gemmkit's torch extension has no CUDA "
      "backend (rebuild with the CUDA toolkit found)");
#endif
}

std::optional<Tensor> optional_view(const std::optional<StableTensor>& t, const char* op,
                                    const char* name) {
  if (!t.has_value()) return std::nullopt;
  return view_of(*t, op, name);
}

// ---- linear ----------------------------------------------------------------------------------

LinearOptions linear_options(std::string_view kernel, int64_t pdl,
                             const std::optional<StableTensor>& workspace, const Device& device) {
  LinearOptions options;
  options.kernel = std::string(kernel);
  if (pdl < -1 || pdl > 1) {
    fail("linear", "pdl", std::to_string(pdl) + ": must be -1 (default), 0 (off) or 1 (on)");
  }
  options.pdl = static_cast<int>(pdl);
  if (workspace.has_value()) {
    if (!workspace->is_contiguous()) {
      fail("linear", "workspace", "must be a contiguous tensor");
    }
    if (device_of(*workspace, "linear", "workspace") != device) {
      fail("linear", "workspace",
           "is on " + device_of(*workspace, "linear", "workspace").str() +
               "; must be on x's device " + device.str());
    }
    options.workspace = workspace->data_ptr();
    options.workspace_bytes = workspace->numel() * static_cast<int64_t>(workspace->element_size());
  }
  return options;
}

Tensor linear_matrix(const StableTensor& t, const char* name) {
  std::optional<Tensor> v = matrix_view_of(t, "linear", name);
  if (!v) {
    fail("linear", name,
         "has leading dims whose strides do not collapse into one row index; make it "
         "contiguous");
  }
  return *v;
}

void run_linear(const Tensor& x_view, const StableTensor& w,
                const std::optional<StableTensor>& bias, const StableTensor& out,
                std::string_view kernel, int64_t pdl,
                const std::optional<StableTensor>& workspace) {
  const Tensor w_view = view_of(w, "linear", "w");
  const std::optional<Tensor> bias_view = optional_view(bias, "linear", "bias");
  const Tensor out_view = linear_matrix(out, "out");
  const LinearOptions options = linear_options(kernel, pdl, workspace, x_view.device);
  on_device(x_view.device, [&](Stream stream) {
    gemmkit::linear(x_view, w_view, bias_view, out_view, options, stream);
  });
}

StableTensor linear(StableTensor x, StableTensor w, std::optional<StableTensor> bias,
                    std::optional<ScalarType> out_dtype, std::string_view kernel, int64_t pdl,
                    std::optional<StableTensor> workspace) {
  if (x.dim() < 1) fail("linear", "x", "is a 0-dim tensor; it must be [..., k]");
  if (w.dim() != 2) fail("linear", "w", "has rank " + std::to_string(w.dim()) + "; must be [m, k]");
  std::optional<Tensor> x_view = matrix_view_of(x, "linear", "x");
  if (!x_view) {
    // Leading dims that do not collapse are made contiguous (one copy), as F.linear does.
    x = torch::stable::contiguous(x);
    x_view = matrix_view_of(x, "linear", "x");
  }
  const auto sizes = x.sizes();
  std::vector<int64_t> shape(sizes.begin(), sizes.end() - 1);
  shape.push_back(w.sizes()[0]);
  const StableTensor out = torch::stable::new_empty(x, shape, out_dtype.value_or(x.scalar_type()));
  run_linear(*x_view, w, bias, out, kernel, pdl, workspace);
  return out;
}

void linear_out(StableTensor x, StableTensor w, std::optional<StableTensor> bias, StableTensor out,
                std::string_view kernel, int64_t pdl, std::optional<StableTensor> workspace) {
  run_linear(linear_matrix(x, "x"), w, bias, out, kernel, pdl, workspace);
}

// ---- conv ------------------------------------------------------------------------------------

ConvParams conv_params(std::vector<int64_t> stride, std::vector<int64_t> padding_lo,
                       std::vector<int64_t> padding_hi, std::vector<int64_t> kernel_dilation,
                       std::vector<int64_t> input_dilation, int64_t groups, bool flip) {
  ConvParams params;
  params.stride = std::move(stride);
  params.padding_lo = std::move(padding_lo);
  params.padding_hi = std::move(padding_hi);
  params.kernel_dilation = std::move(kernel_dilation);
  params.input_dilation = std::move(input_dilation);
  params.groups = groups;
  params.flip = flip;
  return params;
}

std::vector<int64_t> sizes_of(const StableTensor& t) {
  const auto sizes = t.sizes();
  return std::vector<int64_t>(sizes.begin(), sizes.end());
}

// conv_output_shape, its errors named as conv's (the op being called).
std::vector<int64_t> conv_out_shape(const StableTensor& x, const StableTensor& weight,
                                    const ConvParams& params) {
  try {
    return conv_output_shape(sizes_of(x), sizes_of(weight), params);
  } catch (const Error& error) {
    const std::string prefix = "gemmkit::conv_output_shape:";
    const std::string message = error.what();
    if (message.rfind(prefix, 0) != 0) throw;
    throw Error("gemmkit::conv:" + message.substr(prefix.size()));
  }
}

void run_conv(const StableTensor& x, const StableTensor& weight,
              const std::optional<StableTensor>& bias, const StableTensor& out,
              const ConvParams& params) {
  const Tensor x_view = view_of(x, "conv", "x");
  const Tensor w_view = view_of(weight, "conv", "weight");
  const std::optional<Tensor> bias_view = optional_view(bias, "conv", "bias");
  const Tensor out_view = view_of(out, "conv", "out");
  on_device(x_view.device, [&](Stream stream) {
    gemmkit::conv(x_view, w_view, bias_view, out_view, params, ConvOptions{}, stream);
  });
}

StableTensor conv_general(StableTensor x, StableTensor weight, std::optional<StableTensor> bias,
                          std::vector<int64_t> stride, std::vector<int64_t> padding_lo,
                          std::vector<int64_t> padding_hi, std::vector<int64_t> kernel_dilation,
                          std::vector<int64_t> input_dilation, int64_t groups, bool flip,
                          std::optional<ScalarType> out_dtype) {
  const ConvParams params =
      conv_params(std::move(stride), std::move(padding_lo), std::move(padding_hi),
                  std::move(kernel_dilation), std::move(input_dilation), groups, flip);
  const std::vector<int64_t> shape = conv_out_shape(x, weight, params);
  const StableTensor out = torch::stable::new_empty(x, shape, out_dtype.value_or(x.scalar_type()));
  run_conv(x, weight, bias, out, params);
  return out;
}

void conv_general_out(StableTensor x, StableTensor weight, std::optional<StableTensor> bias,
                      std::vector<int64_t> stride, std::vector<int64_t> padding_lo,
                      std::vector<int64_t> padding_hi, std::vector<int64_t> kernel_dilation,
                      std::vector<int64_t> input_dilation, int64_t groups, bool flip,
                      StableTensor out) {
  run_conv(x, weight, bias, out,
           conv_params(std::move(stride), std::move(padding_lo), std::move(padding_hi),
                       std::move(kernel_dilation), std::move(input_dilation), groups, flip));
}

// gemmkit::conv_output_shape as a CPU int64 tensor (the reference of the Python shape twin).
StableTensor conv_output_shape_op(std::vector<int64_t> x_shape, std::vector<int64_t> w_shape,
                                  std::vector<int64_t> stride, std::vector<int64_t> padding_lo,
                                  std::vector<int64_t> padding_hi,
                                  std::vector<int64_t> kernel_dilation,
                                  std::vector<int64_t> input_dilation, int64_t groups) {
  const std::vector<int64_t> shape = conv_output_shape(
      x_shape, w_shape,
      conv_params(std::move(stride), std::move(padding_lo), std::move(padding_hi),
                  std::move(kernel_dilation), std::move(input_dilation), groups, false));
  StableTensor result =
      torch::stable::empty({static_cast<int64_t>(shape.size())}, ScalarType::Long, std::nullopt,
                           torch::stable::Device(torch::headeronly::DeviceType::CPU));
  auto* data = static_cast<int64_t*>(result.data_ptr());
  for (std::size_t i = 0; i < shape.size(); ++i) data[i] = shape[i];
  return result;
}

// gemmkit::build_info() as a CPU uint8 tensor of its characters (read without a Python binding).
StableTensor build_info_op() {
  const std::string info = build_info();
  StableTensor result =
      torch::stable::empty({static_cast<int64_t>(info.size())}, ScalarType::Byte, std::nullopt,
                           torch::stable::Device(torch::headeronly::DeviceType::CPU));
  auto* data = static_cast<char*>(result.data_ptr());
  for (std::size_t i = 0; i < info.size(); ++i) data[i] = info[i];
  return result;
}

}  // namespace
}  // namespace gemmkit::torch_ops

STABLE_TORCH_LIBRARY(gemmkit, m) {
  m.def(
      "linear(Tensor x, Tensor w, Tensor? bias=None, ScalarType? out_dtype=None, str variant=\"\", "
      "int pdl=-1, Tensor? workspace=None) -> Tensor");
  m.def(
      "linear_out(Tensor x, Tensor w, Tensor? bias, Tensor(a!) out, str variant=\"\", int pdl=-1, "
      "Tensor? workspace=None) -> ()");
  m.def(
      "conv_general(Tensor x, Tensor weight, Tensor? bias, int[] stride, int[] padding_lo, "
      "int[] padding_hi, int[] kernel_dilation, int[] input_dilation, int groups, bool flip, "
      "ScalarType? out_dtype=None) -> Tensor");
  m.def(
      "conv_general_out(Tensor x, Tensor weight, Tensor? bias, int[] stride, int[] padding_lo, "
      "int[] padding_hi, int[] kernel_dilation, int[] input_dilation, int groups, bool flip, "
      "Tensor(a!) out) -> ()");
  m.def(
      "conv_output_shape(int[] x_shape, int[] w_shape, int[] stride, int[] padding_lo, "
      "int[] padding_hi, int[] kernel_dilation, int[] input_dilation, int groups) -> Tensor");
  m.def("build_info() -> Tensor");
}

STABLE_TORCH_LIBRARY_IMPL(gemmkit, CPU, m) {
  using namespace gemmkit::torch_ops;
  m.impl("linear", TORCH_BOX(&linear));
  m.impl("linear_out", TORCH_BOX(&linear_out));
  m.impl("conv_general", TORCH_BOX(&conv_general));
  m.impl("conv_general_out", TORCH_BOX(&conv_general_out));
}

STABLE_TORCH_LIBRARY_IMPL(gemmkit, CUDA, m) {
  using namespace gemmkit::torch_ops;
  m.impl("linear", TORCH_BOX(&linear));
  m.impl("linear_out", TORCH_BOX(&linear_out));
  m.impl("conv_general", TORCH_BOX(&conv_general));
  m.impl("conv_general_out", TORCH_BOX(&conv_general_out));
}

// Ops on shapes only: no tensor argument selects a device, so they take the catch-all key.
STABLE_TORCH_LIBRARY_IMPL(gemmkit, CompositeExplicitAutograd, m) {
  using namespace gemmkit::torch_ops;
  m.impl("conv_output_shape", TORCH_BOX(&conv_output_shape_op));
  m.impl("build_info", TORCH_BOX(&build_info_op));
}
