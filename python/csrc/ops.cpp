// torch.ops.gemmkit: gemmkit's linear and convolution as PyTorch operators, built on the LibTorch
// stable ABI (one binary for every torch from the targeted version on).
//
// Each kernel turns the torch tensors into gemmkit descriptors (no copy), guards the tensors'
// device, takes torch's current CUDA stream and calls gemmkit. The linear ops, the hot path of
// decode steps, read their arguments and allocate their output through the shim directly (no
// StableTensor wrappers, no dispatcher round trip for the allocation). A gemmkit::Error propagates
// as a std::runtime_error carrying gemmkit's message, which torch raises as a Python RuntimeError
// (the Python package re-raises it as gemmkit.Error).
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/c/shim.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
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

// The shim's codes of the dtypes and device types gemmkit takes (the shim returns them by call;
// read once).
struct ShimCodes {
  int32_t bf16 = aoti_torch_dtype_bfloat16();
  int32_t f16 = aoti_torch_dtype_float16();
  int32_t f32 = aoti_torch_dtype_float32();
  int32_t cpu = aoti_torch_device_type_cpu();
  int32_t cuda = aoti_torch_device_type_cuda();
};
const ShimCodes& shim_codes() {
  static const ShimCodes codes;
  return codes;
}

DType dtype_of(AtenTensorHandle t, const char* op, const char* name) {
  int32_t code = 0;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(t, &code));
  const ShimCodes& codes = shim_codes();
  if (code == codes.bf16) return DType::bf16;
  if (code == codes.f16) return DType::f16;
  if (code == codes.f32) return DType::f32;
  const auto type = torch::stable::detail::to<ScalarType>(torch::stable::detail::from(code));
  fail(op, name,
       std::string("dtype ") + scalar_type_name(type) +
           ": must be torch.bfloat16, torch.float16 or torch.float32");
}

Device device_of(AtenTensorHandle t, const char* op, const char* name) {
  int32_t type = 0;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_type(t, &type));
  if (type == shim_codes().cpu) return Device::cpu();
  if (type == shim_codes().cuda) {
    int32_t index = 0;
    TORCH_ERROR_CODE_CHECK(aoti_torch_get_device_index(t, &index));
    return Device::cuda(index);
  }
  fail(op, name, "is on a device other than the CPU or CUDA: gemmkit runs on those two");
}

// The dim count, sizes and strides of `t` (borrowed from the tensor).
struct Geometry {
  int64_t rank = 0;
  const int64_t* sizes = nullptr;
  const int64_t* strides = nullptr;
};
Geometry geometry_of(AtenTensorHandle t) {
  Geometry g;
  int64_t* sizes = nullptr;
  int64_t* strides = nullptr;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_dim(t, &g.rank));
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_sizes(t, &sizes));
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_strides(t, &strides));
  g.sizes = sizes;
  g.strides = strides;
  return g;
}

void* data_of(AtenTensorHandle t) {
  void* data = nullptr;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_data_ptr(t, &data));
  return data;
}

// A gemmkit view of `t` with its own shape and strides (rank <= kMaxRank).
Tensor view_of(AtenTensorHandle t, const char* op, const char* name) {
  int64_t rank = 0;
  TORCH_ERROR_CODE_CHECK(aoti_torch_get_dim(t, &rank));
  if (rank > kMaxRank) {
    fail(op, name, "has rank " + std::to_string(rank) + "; gemmkit takes at most 8 dims");
  }
  Tensor v;
  v.data = data_of(t);
  v.dtype = dtype_of(t, op, name);
  v.device = device_of(t, op, name);
  v.rank = static_cast<int>(rank);
  const Geometry g = geometry_of(t);
  for (int64_t d = 0; d < rank; ++d) {
    v.shape[d] = g.sizes[d];
    v.strides[d] = g.strides[d];
  }
  return v;
}

// The [n, last] matrix view of `t` (rank >= 1) whose leading dims collapse into one row index
// without a copy, or nullopt when their strides do not allow it. A rank-1 tensor is one row.
std::optional<Tensor> matrix_view_of(AtenTensorHandle t, const char* op, const char* name) {
  const Geometry g = geometry_of(t);
  if (g.rank < 1) fail(op, name, "is a 0-dim tensor; it must have at least one dim");
  const int64_t* sizes = g.sizes;
  const int64_t* strides = g.strides;
  const int64_t last = g.rank - 1;
  Tensor v;
  v.data = data_of(t);
  v.dtype = dtype_of(t, op, name);
  v.device = device_of(t, op, name);
  v.rank = 2;
  v.shape[1] = sizes[last];
  v.strides[1] = strides[last];
  int64_t rows = 1;
  for (int64_t d = 0; d < last; ++d) rows *= sizes[d];
  v.shape[0] = rows;
  // The row stride: the stride of the innermost leading dim of size > 1; every outer leading
  // dim of size > 1 must step over exactly the dims inside it.
  int64_t row_stride = 0;
  int64_t span = 0;  // elements covered by the leading dims inside the current one
  for (int64_t d = last; d-- > 0;) {
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
  return view_of(t->get(), op, name);
}

// ---- arguments of a boxed call ---------------------------------------------------------------
//
// The linear ops read their stack themselves rather than through TORCH_BOX: each tensor argument
// stays a bare handle (a StableTensor adds a shared control block per argument) and the variant
// string is read in place (TORCH_BOX's conversion of a str argument, in torch 2.11's headers,
// copies it into a heap string that it never frees: a leak on every call).

// An owned tensor handle: deleted with the object unless released.
class OwnedTensor {
 public:
  OwnedTensor() = default;
  explicit OwnedTensor(AtenTensorHandle handle) : handle_(handle) {}
  OwnedTensor(OwnedTensor&& other) noexcept : handle_(other.release()) {}
  OwnedTensor& operator=(OwnedTensor&& other) noexcept {
    std::swap(handle_, other.handle_);
    return *this;
  }
  OwnedTensor(const OwnedTensor&) = delete;
  OwnedTensor& operator=(const OwnedTensor&) = delete;
  ~OwnedTensor() {
    if (handle_ != nullptr) aoti_torch_delete_tensor_object(handle_);
  }

  AtenTensorHandle get() const { return handle_; }
  bool has_value() const { return handle_ != nullptr; }
  AtenTensorHandle release() {
    AtenTensorHandle handle = handle_;
    handle_ = nullptr;
    return handle;
  }

 private:
  AtenTensorHandle handle_ = nullptr;
};

OwnedTensor take_tensor(StableIValue value) {
  return OwnedTensor(torch::stable::detail::to<AtenTensorHandle>(value));
}

// A `Tensor?` argument: a heap StableIValue holding the handle, or null for None.
OwnedTensor take_optional_tensor(StableIValue value) {
  auto* boxed = torch::stable::detail::to<StableIValue*>(value);
  if (boxed == nullptr) return OwnedTensor();
  OwnedTensor tensor = take_tensor(*boxed);
  delete boxed;
  return tensor;
}

// A `ScalarType?` argument as the shim's dtype code, or nullopt for None.
std::optional<int32_t> take_optional_dtype(StableIValue value) {
  auto* boxed = torch::stable::detail::to<StableIValue*>(value);
  if (boxed == nullptr) return std::nullopt;
  const auto code = torch::stable::detail::to<int32_t>(*boxed);
  delete boxed;
  return code;
}

// A `str` argument, read in place and freed with the object.
class OwnedString {
 public:
  explicit OwnedString(StableIValue value)
      : handle_(torch::stable::detail::to<StringHandle>(value)) {}
  OwnedString(const OwnedString&) = delete;
  OwnedString& operator=(const OwnedString&) = delete;
  ~OwnedString() { torch_delete_string(handle_); }

  std::string_view view() const {
    std::size_t length = 0;
    const char* data = nullptr;
    TORCH_ERROR_CODE_CHECK(torch_string_length(handle_, &length));
    TORCH_ERROR_CODE_CHECK(torch_string_c_str(handle_, &data));
    return std::string_view(data, length);
  }

 private:
  StringHandle handle_;
};

void check_arity(const char* schema_name, uint64_t num_args, uint64_t expected_args,
                 uint64_t num_outputs, uint64_t expected_outputs) {
  STD_TORCH_CHECK(num_args == expected_args, "gemmkit::", schema_name, ": the schema has ",
                  num_args, " args, the kernel takes ", expected_args);
  STD_TORCH_CHECK(num_outputs == expected_outputs, "gemmkit::", schema_name, ": the schema has ",
                  num_outputs, " outputs, the kernel returns ", expected_outputs);
}

// ---- linear ----------------------------------------------------------------------------------

// The arguments of linear / linear_out after the tensors they take first.
struct LinearArguments {
  OwnedTensor w;
  OwnedTensor bias;
  std::string_view kernel;
  int64_t pdl = -1;
  OwnedTensor workspace;
  int64_t batch_invariant = -1;
};

// A switch argument of the linear ops (-1: its environment variable, 0 off, 1 on) as the int of
// LinearOptions, checked before the narrowing.
int linear_switch(const char* argument, int64_t value) {
  if (value < -1 || value > 1) {
    fail("linear", argument, std::to_string(value) + ": must be -1 (default), 0 (off) or 1 (on)");
  }
  return static_cast<int>(value);
}

LinearOptions linear_options(const LinearArguments& args, const Device& device) {
  LinearOptions options;
  if (!args.kernel.empty()) options.kernel = std::string(args.kernel);
  options.pdl = linear_switch("pdl", args.pdl);
  options.batch_invariant = linear_switch("batch_invariant", args.batch_invariant);
  if (args.workspace.has_value()) {
    const AtenTensorHandle workspace = args.workspace.get();
    bool contiguous = false;
    TORCH_ERROR_CODE_CHECK(aoti_torch_is_contiguous(workspace, &contiguous));
    if (!contiguous) {
      fail("linear", "workspace", "must be a contiguous tensor");
    }
    const Device workspace_device = device_of(workspace, "linear", "workspace");
    if (workspace_device != device) {
      fail("linear", "workspace",
           "is on " + workspace_device.str() + "; must be on x's device " + device.str());
    }
    int64_t numel = 0;
    int32_t dtype = 0;
    TORCH_ERROR_CODE_CHECK(aoti_torch_get_numel(workspace, &numel));
    TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(workspace, &dtype));
    options.workspace = data_of(workspace);
    options.workspace_bytes = numel * static_cast<int64_t>(aoti_torch_dtype_element_size(dtype));
  }
  return options;
}

Tensor linear_matrix(AtenTensorHandle t, const char* name) {
  std::optional<Tensor> v = matrix_view_of(t, "linear", name);
  if (!v) {
    fail("linear", name,
         "has leading dims whose strides do not collapse into one row index; make it "
         "contiguous");
  }
  return *v;
}

void run_linear(const Tensor& x_view, const LinearArguments& args, AtenTensorHandle out) {
  const Tensor w_view = view_of(args.w.get(), "linear", "w");
  std::optional<Tensor> bias_view;
  if (args.bias.has_value()) bias_view = view_of(args.bias.get(), "linear", "bias");
  const Tensor out_view = linear_matrix(out, "out");
  const LinearOptions options = linear_options(args, x_view.device);
  on_device(x_view.device, [&](Stream stream) {
    gemmkit::linear(x_view, w_view, bias_view, out_view, options, stream);
  });
}

// The output of linear: a new tensor of `sizes` (`rank` dims) with torch's contiguous strides, of
// shim dtype `dtype`, on x's device. The shim allocates it directly (aoti_torch_empty_strided);
// the stable new_empty, which goes through the boxed dispatcher, serves only the shapes whose
// strides the direct path does not compute (more dims than it holds, element counts beyond
// int64, which new_empty reports).
OwnedTensor new_linear_output(AtenTensorHandle x, const Device& device, const int64_t* sizes,
                              int64_t rank, int32_t dtype) {
  constexpr int64_t kDirectRank = 16;
  int64_t strides[kDirectRank];
  bool direct = rank <= kDirectRank;
  int64_t running = 1;
  for (int64_t d = rank; direct && d-- > 0;) {
    strides[d] = running;
    direct = !__builtin_mul_overflow(running, std::max<int64_t>(sizes[d], 1), &running);
  }
  AtenTensorHandle result = nullptr;
  if (direct) {
    TORCH_ERROR_CODE_CHECK(aoti_torch_empty_strided(
        rank, sizes, strides, dtype, device.is_cpu() ? shim_codes().cpu : shim_codes().cuda,
        device.is_cpu() ? 0 : device.index, &result));
    return OwnedTensor(result);
  }
  AtenTensorHandle self = nullptr;
  TORCH_ERROR_CODE_CHECK(aoti_torch_new_tensor_handle(x, &self));
  const StableTensor empty = torch::stable::new_empty(
      StableTensor(self), std::vector<int64_t>(sizes, sizes + rank),
      torch::stable::detail::to<ScalarType>(torch::stable::detail::from(dtype)));
  TORCH_ERROR_CODE_CHECK(aoti_torch_new_tensor_handle(empty.get(), &result));
  return OwnedTensor(result);
}

// linear(Tensor x, Tensor w, Tensor? bias, ScalarType? out_dtype, str variant, int pdl,
//        Tensor? workspace, int batch_invariant) -> Tensor
void linear_boxed(StableIValue* stack, uint64_t num_args, uint64_t num_outputs) {
  check_arity("linear", num_args, 8, num_outputs, 1);
  OwnedTensor x = take_tensor(stack[0]);
  LinearArguments args;
  args.w = take_tensor(stack[1]);
  args.bias = take_optional_tensor(stack[2]);
  const std::optional<int32_t> out_dtype = take_optional_dtype(stack[3]);
  const OwnedString kernel(stack[4]);
  args.kernel = kernel.view();
  args.pdl = torch::stable::detail::to<int64_t>(stack[5]);
  args.workspace = take_optional_tensor(stack[6]);
  args.batch_invariant = torch::stable::detail::to<int64_t>(stack[7]);

  const Geometry x_geometry = geometry_of(x.get());
  if (x_geometry.rank < 1) fail("linear", "x", "is a 0-dim tensor; it must be [..., k]");
  const Geometry w_geometry = geometry_of(args.w.get());
  if (w_geometry.rank != 2) {
    fail("linear", "w", "has rank " + std::to_string(w_geometry.rank) + "; must be [m, k]");
  }
  std::optional<Tensor> x_view = matrix_view_of(x.get(), "linear", "x");
  if (!x_view) {
    // Leading dims that do not collapse are made contiguous (one copy), as F.linear does.
    const StableTensor copy = torch::stable::contiguous(StableTensor(x.release()));
    AtenTensorHandle handle = nullptr;
    TORCH_ERROR_CODE_CHECK(aoti_torch_new_tensor_handle(copy.get(), &handle));
    x = OwnedTensor(handle);
    x_view = matrix_view_of(x.get(), "linear", "x");
  }
  // The output [..., m]: x's leading dims (the copy has x's sizes), then w's rows.
  const int64_t rank = x_geometry.rank;
  int64_t inline_sizes[16];
  std::vector<int64_t> heap_sizes;
  int64_t* sizes = inline_sizes;
  if (rank > 16) {
    heap_sizes.resize(static_cast<std::size_t>(rank));
    sizes = heap_sizes.data();
  }
  const int64_t* x_sizes = geometry_of(x.get()).sizes;
  for (int64_t d = 0; d + 1 < rank; ++d) sizes[d] = x_sizes[d];
  sizes[rank - 1] = w_geometry.sizes[0];
  int32_t dtype = 0;
  if (out_dtype) {
    dtype = *out_dtype;
  } else {
    TORCH_ERROR_CODE_CHECK(aoti_torch_get_dtype(x.get(), &dtype));
  }
  OwnedTensor out = new_linear_output(x.get(), x_view->device, sizes, rank, dtype);
  run_linear(*x_view, args, out.get());
  stack[0] = torch::stable::detail::from(out.release());
}

// linear_out(Tensor x, Tensor w, Tensor? bias, Tensor(a!) out, str variant, int pdl,
//            Tensor? workspace, int batch_invariant) -> ()
void linear_out_boxed(StableIValue* stack, uint64_t num_args, uint64_t num_outputs) {
  check_arity("linear_out", num_args, 8, num_outputs, 0);
  const OwnedTensor x = take_tensor(stack[0]);
  LinearArguments args;
  args.w = take_tensor(stack[1]);
  args.bias = take_optional_tensor(stack[2]);
  const OwnedTensor out = take_tensor(stack[3]);
  const OwnedString kernel(stack[4]);
  args.kernel = kernel.view();
  args.pdl = torch::stable::detail::to<int64_t>(stack[5]);
  args.workspace = take_optional_tensor(stack[6]);
  args.batch_invariant = torch::stable::detail::to<int64_t>(stack[7]);
  run_linear(linear_matrix(x.get(), "x"), args, out.get());
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
  const Tensor x_view = view_of(x.get(), "conv", "x");
  const Tensor w_view = view_of(weight.get(), "conv", "weight");
  const std::optional<Tensor> bias_view = optional_view(bias, "conv", "bias");
  const Tensor out_view = view_of(out.get(), "conv", "out");
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
      "int pdl=-1, Tensor? workspace=None, int batch_invariant=-1) -> Tensor");
  m.def(
      "linear_out(Tensor x, Tensor w, Tensor? bias, Tensor(a!) out, str variant=\"\", int pdl=-1, "
      "Tensor? workspace=None, int batch_invariant=-1) -> ()");
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
  m.impl("linear", &linear_boxed);
  m.impl("linear_out", &linear_out_boxed);
  m.impl("conv_general", TORCH_BOX(&conv_general));
  m.impl("conv_general_out", TORCH_BOX(&conv_general_out));
}

STABLE_TORCH_LIBRARY_IMPL(gemmkit, CUDA, m) {
  using namespace gemmkit::torch_ops;
  m.impl("linear", &linear_boxed);
  m.impl("linear_out", &linear_out_boxed);
  m.impl("conv_general", TORCH_BOX(&conv_general));
  m.impl("conv_general_out", TORCH_BOX(&conv_general_out));
}

// Ops on shapes only: no tensor argument selects a device, so they take the catch-all key.
STABLE_TORCH_LIBRARY_IMPL(gemmkit, CompositeExplicitAutograd, m) {
  using namespace gemmkit::torch_ops;
  m.impl("conv_output_shape", TORCH_BOX(&conv_output_shape_op));
  m.impl("build_info", TORCH_BOX(&build_info_op));
}
