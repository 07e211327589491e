// cuDNN as the conv peer, through the legacy API: NHWC tensors, NHWC-format filters, fp32
// compute, tensor-op math allowed, the fastest algorithm (and its math type) that cudnnFind*
// measures. A forward row runs cudnnConvolutionForward over gemmkit's OHWI weight. A transposed
// row (input dilation) runs cudnnConvolutionBackwardData, as PyTorch's conv_transpose2d does:
// dy = gemmkit's x, dx = gemmkit's out, and the filter packed once, untimed, into cuDNN's KRSC
// layout; strides, paddings and mode come from the library's cudnn_dgrad_form (cudnn/plan.h).
// 1-D convs run as 2-D with a unit height. Rows it cannot express are n/a: forward rows with
// asymmetric or negative padding; transposed rows without a backward-data form, or whose form has
// unequal low and high paddings that the legacy API's symmetric padding cannot stand in for (dy's
// inferred size differs from x's); bias.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench/peer.h"
#include "src/api/validate.h"
#include "src/common/problems.h"
#include "src/cuda/common/cudnn_types.h"
#include "src/cuda/conv/cudnn/launch.h"
#include "src/cuda/conv/cudnn/plan.h"

namespace gemmkit::bench {
namespace {

using gemmkit::cuda::conv_impl::cudnn_dgrad_form;
using gemmkit::cuda::conv_impl::CudnnDgradForm;
using gemmkit::cuda::conv_impl::dgrad_weight_index;
using gemmkit::cuda::conv_impl::launch_conv_dgrad_weight;

// Algorithms needing more workspace than this are skipped.
constexpr std::size_t kMaxWorkspaceBytes = std::size_t{1} << 30;

void check(cudnnStatus_t status, const char* what) {
  if (status != CUDNN_STATUS_SUCCESS)
    throw Error(std::string("cuDNN ") + what + ": " + cudnnGetErrorString(status));
}

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw Error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(status));
}

int to_int(int64_t value, const char* what) {
  if (value > INT32_MAX || value < INT32_MIN)
    throw Error(std::string("cuDNN peer: ") + what + " does not fit an int");
  return static_cast<int>(value);
}

std::string join(const std::vector<int>& values) {
  std::string text;
  for (std::size_t i = 0; i < values.size(); ++i)
    text += (i ? "x" : "") + std::to_string(values[i]);
  return text;
}

// The row as the library's conv problem: its geometry, and w's strides for the packing index (no
// data pointers). Throws gemmkit::Error for a row conv() refuses.
detail::ConvProblem conv_problem(const ConvRow& row, Device device) {
  const std::vector<int64_t> w_shape = conv_weight_shape(row);
  detail::ConvProblem p =
      detail::conv_geometry("cudnn peer", conv_x_shape(row), w_shape, conv_params(row));
  p.weight = Tensor::strided(nullptr, row.dtype, device, w_shape, conv_weight_strides(row));
  return p;
}

// Grows a device buffer to at least `bytes` (the contents are not kept).
void reserve(void*& buffer, std::size_t& capacity, std::size_t bytes, const char* what) {
  if (bytes <= capacity) return;
  if (buffer) cudaFree(buffer);
  buffer = nullptr;
  capacity = 0;
  check(cudaMalloc(&buffer, bytes), what);
  capacity = bytes;
}

// Find's results come sorted by time: the first that ran and fits the workspace limit.
template <class Perf>
const Perf& fastest(const Perf* results, int returned, const char* what, const ConvRow& row) {
  if (const char* verbose = std::getenv("GEMMKIT_BENCH_VERBOSE"); verbose && *verbose == '1') {
    for (int i = 0; i < returned; ++i)
      std::fprintf(stderr, "\n  cudnn %s %s: algo %d math %d status %s %.4f ms %zu bytes%s", what,
                   row.name.c_str(), static_cast<int>(results[i].algo),
                   static_cast<int>(results[i].mathType), cudnnGetErrorString(results[i].status),
                   static_cast<double>(results[i].time), results[i].memory,
                   results[i].determinism == CUDNN_DETERMINISTIC ? "" : " non-deterministic");
    std::fprintf(stderr, "\n");
  }
  for (int i = 0; i < returned; ++i)
    if (results[i].status == CUDNN_STATUS_SUCCESS && results[i].memory <= kMaxWorkspaceBytes)
      return results[i];
  throw Error("cuDNN found no algorithm for this problem");
}

// The forward convolution cuDNN is told about; dims in cuDNN's NCHW order (the NHWC format sets
// the strides), gemmkit's x and out by their role in the row. Forward row: x -> out over w (o, c /
// groups, kernel). Transposed row: the convolution whose backward-data is the row, out (dx) -> x
// (dy) over the packed filter (K = c, C = o / groups, kernel), with the form's strides, dilations
// and low paddings.
struct CudnnConv {
  std::vector<int> x_dims, out_dims, filter_dims;
  std::vector<int> pad, stride, dilation;
  cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
};

CudnnConv cudnn_conv(const ConvRow& row, const CudnnDgradForm* form) {
  // cuDNN wants at least 2 spatial dims: a 1-D conv gets a leading unit dim.
  const bool one_d = row.spatial_dims() == 1;
  const auto dims = [one_d](int64_t outer, int64_t channels, const std::vector<int64_t>& spatial) {
    std::vector<int> d{to_int(outer, "batch or filter count"), to_int(channels, "channels")};
    if (one_d) d.push_back(1);
    for (int64_t size : spatial) d.push_back(to_int(size, "spatial size"));
    return d;
  };
  CudnnConv f;
  f.x_dims = dims(row.n, row.c, row.in_spatial);
  f.out_dims = dims(row.n, row.o, conv_out_spatial(row));
  f.filter_dims = form ? dims(row.c, row.o / row.groups, row.kernel)
                       : dims(row.o, row.c / row.groups, row.kernel);
  if (one_d) {
    f.pad.push_back(0);
    f.stride.push_back(1);
    f.dilation.push_back(1);
  }
  for (int d = 0; d < row.spatial_dims(); ++d) {
    // The legacy API pads both sides alike: the low padding; prepare checks the sizes it implies.
    f.pad.push_back(to_int(form ? form->pad_lo[d] : row.pad_lo[d], "padding"));
    f.stride.push_back(to_int(form ? form->stride[d] : row.stride[d], "stride"));
    f.dilation.push_back(to_int(form ? form->dilation[d] : row.kdil[d], "kernel dilation"));
  }
  if (form) {
    f.mode = form->cross_correlation ? CUDNN_CROSS_CORRELATION : CUDNN_CONVOLUTION;
  } else {
    f.mode = row.flip ? CUDNN_CONVOLUTION : CUDNN_CROSS_CORRELATION;
  }
  return f;
}

// Why cuDNN's inferred output shape (forward: out; backward-data: dy) is not the row's.
std::string shape_mismatch(const ConvRow& row, const CudnnDgradForm& form,
                           const std::vector<int>& inferred, const std::vector<int>& expected) {
  if (!conv_is_transposed(row)) return "cuDNN computes a different output shape";
  std::vector<int> lo, hi;
  for (int d = 0; d < row.spatial_dims(); ++d) {
    lo.push_back(static_cast<int>(form.pad_lo[d]));
    hi.push_back(static_cast<int>(form.pad_hi[d]));
  }
  const std::string dims = ", not x's " + join(expected) + " (n, c, spatial)";
  if (lo == hi) return "cuDNN's backward-data infers dy " + join(inferred) + dims;
  return "the legacy cuDNN API pads both sides alike: backward-data paddings lo " + join(lo) +
         " / hi " + join(hi) + " done as " + join(lo) + " on both sides give dy " + join(inferred) +
         dims;
}

class CudnnConvPeer final : public ConvPeer {
 public:
  explicit CudnnConvPeer(Device device) : device_(device) {
    check(cudaSetDevice(device.index), "cudaSetDevice");
    check(cudnnCreate(&handle_), "cudnnCreate");
    check(cudnnCreateTensorDescriptor(&x_desc_), "cudnnCreateTensorDescriptor");
    check(cudnnCreateTensorDescriptor(&out_desc_), "cudnnCreateTensorDescriptor");
    check(cudnnCreateFilterDescriptor(&w_desc_), "cudnnCreateFilterDescriptor");
    check(cudnnCreateConvolutionDescriptor(&conv_desc_), "cudnnCreateConvolutionDescriptor");
  }

  ~CudnnConvPeer() override {
    if (filter_) cudaFree(filter_);
    if (workspace_) cudaFree(workspace_);
    cudnnDestroyConvolutionDescriptor(conv_desc_);
    cudnnDestroyFilterDescriptor(w_desc_);
    cudnnDestroyTensorDescriptor(out_desc_);
    cudnnDestroyTensorDescriptor(x_desc_);
    cudnnDestroy(handle_);
  }

  std::string name() const override { return "cudnn"; }

  std::string unsupported_reason(const ConvRow& row) const override {
    if (conv_is_transposed(row)) {
      // Paddings of the backward-data form are checked by prepare (cuDNN infers the sizes).
      try {
        CudnnDgradForm form;
        const std::string no = cudnn_dgrad_form(conv_problem(row, device_), form);
        if (!no.empty()) return no;
      } catch (const Error& error) {
        return error.what();
      }
    } else {
      for (int d = 0; d < row.spatial_dims(); ++d) {
        if (row.pad_lo[d] != row.pad_hi[d]) return "cuDNN has no asymmetric padding";
        if (row.pad_lo[d] < 0) return "cuDNN has no negative padding";
      }
    }
    if (row.bias) return "bias is not benchmarked with cuDNN";
    return "";
  }

  void prepare(const ConvRow& row, const ConvOperands& operands, Stream stream) override {
    check(cudnnSetStream(handle_, stream), "cudnnSetStream");
    transposed_ = conv_is_transposed(row);
    detail::ConvProblem problem;
    CudnnDgradForm form;
    if (transposed_) {
      problem = conv_problem(row, device_);
      const std::string no = cudnn_dgrad_form(problem, form);
      if (!no.empty()) throw Error(no);
    }
    const CudnnConv f = cudnn_conv(row, transposed_ ? &form : nullptr);
    const int rank = static_cast<int>(f.x_dims.size());
    const cudnnDataType_t type = gemmkit::cuda::cudnn_data_type(row.dtype);

    check(cudnnSetTensorNdDescriptorEx(x_desc_, CUDNN_TENSOR_NHWC, type, rank, f.x_dims.data()),
          "cudnnSetTensorNdDescriptorEx(x)");
    check(cudnnSetTensorNdDescriptorEx(out_desc_, CUDNN_TENSOR_NHWC, type, rank, f.out_dims.data()),
          "cudnnSetTensorNdDescriptorEx(out)");
    check(cudnnSetFilterNdDescriptor(w_desc_, type, CUDNN_TENSOR_NHWC, rank, f.filter_dims.data()),
          "cudnnSetFilterNdDescriptor");
    // bf16 and f16 data compute in fp32, like gemmkit.
    check(cudnnSetConvolutionNdDescriptor(conv_desc_, rank - 2, f.pad.data(), f.stride.data(),
                                          f.dilation.data(), f.mode, CUDNN_DATA_FLOAT),
          "cudnnSetConvolutionNdDescriptor");
    check(cudnnSetConvolutionGroupCount(conv_desc_, to_int(row.groups, "groups")),
          "cudnnSetConvolutionGroupCount");
    check(cudnnSetConvolutionMathType(conv_desc_, CUDNN_TENSOR_OP_MATH),
          "cudnnSetConvolutionMathType");

    // The forward convolution's output must be what the row has: out, or for backward-data x.
    const cudnnTensorDescriptor_t conv_in = transposed_ ? out_desc_ : x_desc_;
    const std::vector<int>& expected = transposed_ ? f.x_dims : f.out_dims;
    std::vector<int> inferred(static_cast<std::size_t>(rank));
    check(
        cudnnGetConvolutionNdForwardOutputDim(conv_desc_, conv_in, w_desc_, rank, inferred.data()),
        "cudnnGetConvolutionNdForwardOutputDim");
    if (inferred != expected) throw Error(shape_mismatch(row, form, inferred, expected));

    cudnnMathType_t math = CUDNN_DEFAULT_MATH;
    if (transposed_) {
      pack_filter(problem, operands.weight, stream);
      cudnnConvolutionBwdDataAlgoPerf_t results[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT] = {};
      int returned = 0;
      check(cudnnFindConvolutionBackwardDataAlgorithm(
                handle_, w_desc_, x_desc_, conv_desc_, out_desc_,
                CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &returned, results),
            "cudnnFindConvolutionBackwardDataAlgorithm");
      const auto& best = fastest(results, returned, "find backward-data", row);
      bwd_data_algo_ = best.algo;
      math = best.mathType;
      workspace_bytes_ = best.memory;
    } else {
      cudnnConvolutionFwdAlgoPerf_t results[CUDNN_CONVOLUTION_FWD_ALGO_COUNT] = {};
      int returned = 0;
      check(cudnnFindConvolutionForwardAlgorithm(handle_, x_desc_, w_desc_, conv_desc_, out_desc_,
                                                 CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned,
                                                 results),
            "cudnnFindConvolutionForwardAlgorithm");
      const auto& best = fastest(results, returned, "find", row);
      fwd_algo_ = best.algo;
      math = best.mathType;
      workspace_bytes_ = best.memory;
    }
    // Find may have timed the winner with another math type (tensor ops do not apply to every
    // shape, e.g. 3 input channels); the call must use the same one, or cuDNN runs a different
    // engine or refuses (CUDNN_STATUS_BAD_PARAM).
    check(cudnnSetConvolutionMathType(conv_desc_, math), "cudnnSetConvolutionMathType");
    reserve(workspace_, workspace_capacity_, workspace_bytes_, "cudaMalloc (cuDNN workspace)");
  }

  void launch(const ConvOperands& operands, Stream stream) override {
    check(cudnnSetStream(handle_, stream), "cudnnSetStream");
    const float alpha = 1.0f, beta = 0.0f;
    if (transposed_) {
      // dy = x, dx = out. The packed filter is one buffer (from copy 0's weight, equal to every
      // copy): cold-L2 rotation moves only x, as a framework keeps one transposed weight.
      check(cudnnConvolutionBackwardData(handle_, &alpha, w_desc_, filter_, x_desc_, operands.x,
                                         conv_desc_, bwd_data_algo_, workspace_, workspace_bytes_,
                                         &beta, out_desc_, operands.out),
            "cudnnConvolutionBackwardData");
      return;
    }
    check(cudnnConvolutionForward(handle_, &alpha, x_desc_, operands.x, w_desc_, operands.weight,
                                  conv_desc_, fwd_algo_, workspace_, workspace_bytes_, &beta,
                                  out_desc_, operands.out),
          "cudnnConvolutionForward");
  }

 private:
  // The KRSC filter of backward-data, packed once by the library's kernel (dgrad_weight_source),
  // untimed: PyTorch's conv_transpose weight already has cuDNN's layout.
  void pack_filter(const detail::ConvProblem& p, const void* w, Stream stream) {
    const auto elements =
        static_cast<std::size_t>(p.in_channels * p.kernel_positions() * p.out_channels_per_group);
    reserve(filter_, filter_capacity_, elements * dtype_size(p.weight.dtype),
            "cudaMalloc (packed filter)");
    launch_conv_dgrad_weight(p.weight.dtype, dgrad_weight_index(p), w, filter_, stream);
    check(cudaGetLastError(), "the filter packing kernel");
    // launch() may come on another stream: the filter is complete when prepare returns.
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize (packed filter)");
  }

  Device device_;
  cudnnHandle_t handle_ = nullptr;
  // gemmkit's x and out: cuDNN's x and y, or for a transposed row dy and dx.
  cudnnTensorDescriptor_t x_desc_ = nullptr, out_desc_ = nullptr;
  cudnnFilterDescriptor_t w_desc_ = nullptr;
  cudnnConvolutionDescriptor_t conv_desc_ = nullptr;
  bool transposed_ = false;
  cudnnConvolutionFwdAlgo_t fwd_algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  cudnnConvolutionBwdDataAlgo_t bwd_data_algo_ = CUDNN_CONVOLUTION_BWD_DATA_ALGO_1;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0, workspace_capacity_ = 0;
  void* filter_ = nullptr;
  std::size_t filter_capacity_ = 0;
};

}  // namespace

std::unique_ptr<ConvPeer> make_cudnn_peer(Device device) {
  return std::make_unique<CudnnConvPeer>(device);
}

}  // namespace gemmkit::bench
