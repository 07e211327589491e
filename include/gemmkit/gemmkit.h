// gemmkit public API: GEMM-family kernels for inference (small-batch linear, N-D convolution).
//
// Framework-free and CUDA-free: a program that includes this header compiles with any C++17
// compiler. Tensors are non-owning descriptors (pointer, dtype, device, shape, strides in
// elements). Every entry point validates all of its arguments before doing any work and throws
// gemmkit::Error naming the argument, its value and the rule broken.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

struct CUstream_st;  // the type behind cudaStream_t; declared here so no CUDA header is needed

namespace gemmkit {

// A cudaStream_t. nullptr is the legacy default stream. Ignored for CPU tensors (CPU calls are
// synchronous).
using Stream = CUstream_st*;

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

enum class DType : int { bf16 = 0, f16 = 1, f32 = 2 };
const char* dtype_name(DType dtype);
std::size_t dtype_size(DType dtype);
// Parses "bf16", "f16"/"fp16", "f32"/"fp32"; throws Error otherwise.
DType parse_dtype(const std::string& name);

enum class DeviceKind : int { cpu = 0, cuda = 1 };

struct Device {
  DeviceKind kind = DeviceKind::cpu;
  int index = 0;  // CUDA ordinal; 0 for the CPU

  static Device cpu() { return Device{DeviceKind::cpu, 0}; }
  static Device cuda(int index = 0) { return Device{DeviceKind::cuda, index}; }
  bool is_cpu() const { return kind == DeviceKind::cpu; }
  bool is_cuda() const { return kind == DeviceKind::cuda; }
  std::string str() const;  // "cpu", "cuda:1"
};
bool operator==(const Device& a, const Device& b);
bool operator!=(const Device& a, const Device& b);
// Parses "cpu", "cuda", "cuda:N", "gpu"; throws Error otherwise.
Device parse_device(const std::string& name);

constexpr int kMaxRank = 8;

// Non-owning view of a strided tensor. Shapes and strides are in elements. The constructors do
// not validate; the operations do (so an ill-formed descriptor gets a precise error there): a rank
// in [0, kMaxRank], dtype and device kind values of their enums, sizes >= 1 (an operation's batch
// dim may be 0: an empty batch), strides >= 1, an element span whose bytes fit int64, and, for a
// tensor with elements, data non-null and aligned to the element size (2 or 4 bytes).
struct Tensor {
  void* data = nullptr;
  DType dtype = DType::f32;
  Device device{};
  int rank = 0;
  int64_t shape[kMaxRank] = {};
  int64_t strides[kMaxRank] = {};

  // Row-major contiguous strides. The braced-list forms ({n, k}) build the same descriptor
  // without allocating (a descriptor built on every call costs no heap traffic).
  static Tensor contiguous(void* data, DType dtype, Device device,
                           const std::vector<int64_t>& shape);
  static Tensor contiguous(void* data, DType dtype, Device device,
                           std::initializer_list<int64_t> shape);
  static Tensor strided(void* data, DType dtype, Device device, const std::vector<int64_t>& shape,
                        const std::vector<int64_t>& strides);
  static Tensor strided(void* data, DType dtype, Device device,
                        std::initializer_list<int64_t> shape,
                        std::initializer_list<int64_t> strides);

  // shape / strides [0, rank); empty when rank is outside [0, kMaxRank].
  std::vector<int64_t> sizes() const;
  std::vector<int64_t> stride_vector() const;
  // Product of the shape; throws Error if it overflows int64 or the rank is outside [0, kMaxRank].
  int64_t numel() const;
  bool is_contiguous() const;  // false for a rank outside [0, kMaxRank]
  // "bf16[2, 3] strides [3, 1] on cuda:0"; for a rank outside [0, kMaxRank] only dtype, rank and
  // device (shape and strides are not read past kMaxRank).
  std::string str() const;
};

// Host conversions between float and the 16-bit formats, round to nearest even, NaN kept NaN.
uint16_t float_to_bf16(float value);
float bf16_to_float(uint16_t bits);
uint16_t float_to_f16(float value);
float f16_to_float(uint16_t bits);
// Reads element `index` (in elements from `data`) of a host buffer of `dtype` as float, and writes.
float load_as_float(const void* data, DType dtype, int64_t index);
void store_from_float(void* data, DType dtype, int64_t index, float value);

// What a call did: which backend and kernel ran, and why it was chosen. Filled when passed in
// the options; the same text is printed to stderr when GEMMKIT_LOG=1.
struct CallInfo {
  std::string backend;  // "cpu" or "cuda"
  std::string kernel;   // e.g. "cpu.linear.f32acc", "cuda.linear.reference"
  std::string reason;   // why this kernel
};

struct LinearOptions {
  // Kernel to force: "" = GEMMKIT_LINEAR_KERNEL if set, else "auto". "reference" forces the
  // backend's reference kernel. Variant names are listed by `gemmkit info`.
  std::string kernel;
  // Programmatic dependent launch for the CUDA kernels that support it: -1 = GEMMKIT_LINEAR_PDL
  // (default on), 0 = off, 1 = on; any other value is an error (on every device). With PDL on, a
  // call may start streaming w before the preceding kernel in the stream has finished: w must
  // not be written by that kernel.
  int pdl = -1;
  // Batch invariance of auto on the CUDA backend: -1 = GEMMKIT_LINEAR_BATCH_INVARIANT (default
  // on), 0 = off, 1 = on; any other value is an error (on every device). On: bf16 and f16 calls
  // on sm_90 never leave the tensor-core family, so row i's bits depend only on x[i], w and bias
  // at every n (docs/linear.md#the-bitwise-contract). Off: auto takes cuBLASLt where it measured
  // faster (one-chain weights at 8 < n < 4096, sliced weights above the family's bound, weights of
  // 2^24 elements or more), whose bits may change with n. Every choice is a pure function of the
  // call either way.
  int batch_invariant = -1;
  // Deterministic mode: -1 = GEMMKIT_DETERMINISTIC (default off), 0 = off, 1 = on; any other
  // value is an error. For linear, on implies batch invariance whatever batch_invariant says.
  int deterministic = -1;
  CallInfo* info = nullptr;
  // Device scratch of the cuBLASLt path (batches above the family's) and of the wgmma kernel's k
  // split (few tiles; up to 32 MiB of fp32 group sums): none (nullptr, 0) = one buffer per device
  // allocated by the first eager call, or an allocation inside the graph when the stream is being
  // captured. Given: `workspace_bytes` bytes on x's device, 256-byte aligned, not used by other
  // work until the call's work on the stream is done (the caller orders it); 48 MiB gives
  // cuBLASLt its full choice, and a 16-bit bias with f32 out needs 4 * m bytes of it; a smaller one
  // gives the wgmma kernel fewer k splits (the same bits).
  void* workspace = nullptr;
  int64_t workspace_bytes = 0;
};

// out[n, m] = x[n, k] . w[m, k]^T (+ bias[m]), fp32 accumulation.
// x, w: bf16, f16 or f32, same dtype. bias: none, or [m] of x's dtype. out: [n, m] of x's dtype
// or f32. All tensors on one device. Inputs may be strided (their elements may alias); out must
// not overlap itself (no two indices address one element: exact for outputs spanning up to 2^24
// elements; a larger output must pass the sorted-stride rule — sorted by stride, each dim's
// stride at least the extent of the dims of smaller stride, as every dense or padded layout does)
// nor the inputs' memory.
// Empty batch: n = 0 (x [0, k], out [0, m]; their data may be null) is a valid call. Every other
// rule is checked (m, k >= 1, dtypes, devices, shapes, options), then it returns without work:
// no kernel is launched and the device is not touched; CallInfo's kernel reads
// "none (empty batch)".
void linear(const Tensor& x, const Tensor& w, const std::optional<Tensor>& bias, const Tensor& out,
            const LinearOptions& options = {}, Stream stream = nullptr);

// General N-D convolution with MLX conv_general semantics (1, 2 or 3 spatial dims, S of them):
//   x: (n, in_spatial[S]..., c)      weight: (o, kernel[S]..., c / groups)
//   out: (n, out_spatial[S]..., o)   bias: none or (o)
// For every spatial dim d: the input is dilated by input_dilation[d] (input_dilation - 1 zeros
// between elements), padded by padding_lo[d] zeros before and padding_hi[d] after (negative
// padding crops), then correlated with the kernel dilated by kernel_dilation[d] at stride
// stride[d]:
//   out_size = ((in - 1) * input_dilation + 1 + padding_lo + padding_hi
//               - ((kernel - 1) * kernel_dilation + 1)) / stride + 1       (must be >= 1)
// flip = true flips the kernel in every spatial dim (true convolution; with input dilation this
// is a transposed convolution, see conv_transpose_params). Output channel oc belongs to group
// oc / (o / groups) and reads input channels [g * c/groups, (g + 1) * c/groups).
// Empty vectors take the defaults (stride 1, padding 0, dilations 1); a vector of one value
// applies to every spatial dim. out must not overlap itself nor the inputs (as for linear).
// Empty batch: n = 0 in x and out is a valid call, validated in full (every other size >= 1),
// that does no work and launches nothing (CallInfo kernel "none (empty batch)");
// conv_output_shape gives n = 0 back.
struct ConvParams {
  std::vector<int64_t> stride;
  std::vector<int64_t> padding_lo;
  std::vector<int64_t> padding_hi;
  std::vector<int64_t> kernel_dilation;
  std::vector<int64_t> input_dilation;
  int64_t groups = 1;
  bool flip = false;
};

struct ConvOptions {
  // Upper bound on temporary device memory (unfold buffer) in bytes; < 0 means
  // GEMMKIT_CONV_WORKSPACE_MB if set, else 256 MiB. Larger problems run in chunks.
  int64_t workspace_bytes = -1;
  // Algorithm to force: "" = GEMMKIT_CONV_ALGO if set, else "auto".
  std::string algo;
  CallInfo* info = nullptr;
  // Deterministic mode of the CUDA backend: -1 = GEMMKIT_DETERMINISTIC (default off), 0 = off,
  // 1 = on; any other value is an error (on every device). Off, a call's bits are the same on
  // every run within a process once its shape's choice is made, but a first call may time paths
  // against each other, so two processes can choose, and return, differently. On, every choice
  // (path, kernel, cuDNN engine) is a pure function of the problem, the options and the device:
  // the bits depend on nothing but those and the versions of gemmkit, cuDNN and cuBLASLt; a path
  // that fails for a reason the process's state decides (memory, say) throws instead of falling
  // back. The CPU backend is deterministic in both modes. docs/conv.md#determinism.
  int deterministic = -1;
};

void conv(const Tensor& x, const Tensor& weight, const std::optional<Tensor>& bias,
          const Tensor& out, const ConvParams& params, const ConvOptions& options = {},
          Stream stream = nullptr);

// The shape conv() expects for `out`, after validating the two shapes and the parameters.
std::vector<int64_t> conv_output_shape(const std::vector<int64_t>& x_shape,
                                       const std::vector<int64_t>& weight_shape,
                                       const ConvParams& params);

// Parameters of conv() that compute a transposed convolution (the gradient of a convolution
// with respect to its input, as in PyTorch's ConvTransposeNd) with the given per-dim kernel
// size, stride, padding, output_padding and dilation (vectors of one value broadcast):
//   input_dilation = stride, kernel_dilation = dilation, flip = true, stride 1,
//   padding_lo = dilation * (kernel - 1) - padding, padding_hi = padding_lo + output_padding.
// The weight must be given as (o, kernel..., c / groups) (PyTorch stores (c, o / groups,
// kernel...): permute it). With one group, a strided view whose memory is (c, kernel..., o) —
// PyTorch's weight in channels-last memory, permuted without a copy — is what cuDNN's
// backward-data reads, so the CUDA path uses it in place; any other layout is copied into that
// one on every call (a few microseconds for a VAE-sized layer). output_padding must be < stride
// or < dilation, as in PyTorch; stride and dilation in [1, 2^20], padding in [0, 2^40], and the
// resulting padding_lo / padding_hi must be paddings conv() takes (at most 2^40), which bounds
// dilation * (kernel_size - 1).
ConvParams conv_transpose_params(const std::vector<int64_t>& kernel_size,
                                 const std::vector<int64_t>& stride,
                                 const std::vector<int64_t>& padding,
                                 const std::vector<int64_t>& output_padding,
                                 const std::vector<int64_t>& dilation, int64_t groups = 1);

// ---- Devices and memory (used by the CLI; handy for tests and small programs) ----

struct DeviceInfo {
  Device device;
  std::string name;
  int sm_major = 0, sm_minor = 0;
  int multiprocessors = 0;
  int64_t memory_bytes = 0;
  int64_t l2_bytes = 0;
};

// True when the library was built with its CUDA backend.
bool built_with_cuda();
// Usable CUDA devices; empty when the build has no CUDA or no driver/GPU is present.
std::vector<DeviceInfo> cuda_devices();
// Why cuda_devices() is empty ("" when it is not).
std::string cuda_unavailable_reason();
// Multi-line description of the build (version, compiler, backends, CUDA archs, options).
std::string build_info();

// Owning allocation on a device (host memory for the CPU).
class Buffer {
 public:
  Buffer() = default;
  Buffer(std::size_t bytes, Device device);
  ~Buffer();
  Buffer(Buffer&& other) noexcept;
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  Device device() const { return device_; }
  void copy_from_host(const void* src, std::size_t bytes, std::size_t offset = 0);
  void copy_to_host(void* dst, std::size_t bytes, std::size_t offset = 0) const;
  void fill_bytes(uint8_t value);

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  Device device_{};
};

// Waits for all work on the device (no-op for the CPU).
void synchronize(Device device);

}  // namespace gemmkit
