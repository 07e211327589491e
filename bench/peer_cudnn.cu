// cuDNN as the conv peer, through the legacy cudnnConvolutionForward API: NHWC tensors, OHWI
// (NHWC-format) filters, fp32 compute, tensor-op math allowed, the fastest algorithm (and its
// math type) that cudnnFindConvolutionForwardAlgorithm measures. 1-D convs run as 2-D with a unit
// height. Rows it cannot express (input dilation, asymmetric or negative padding, bias) are n/a.
#include <cuda_runtime.h>
#include <cudnn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "bench/peer.h"
#include "src/cuda/common/cudnn_types.h"

namespace gemmkit::bench {
namespace {

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

class CudnnConvPeer final : public ConvPeer {
 public:
  explicit CudnnConvPeer(Device device) {
    check(cudaSetDevice(device.index), "cudaSetDevice");
    check(cudnnCreate(&handle_), "cudnnCreate");
    check(cudnnCreateTensorDescriptor(&x_desc_), "cudnnCreateTensorDescriptor");
    check(cudnnCreateTensorDescriptor(&y_desc_), "cudnnCreateTensorDescriptor");
    check(cudnnCreateFilterDescriptor(&w_desc_), "cudnnCreateFilterDescriptor");
    check(cudnnCreateConvolutionDescriptor(&conv_desc_), "cudnnCreateConvolutionDescriptor");
  }

  ~CudnnConvPeer() override {
    if (workspace_) cudaFree(workspace_);
    cudnnDestroyConvolutionDescriptor(conv_desc_);
    cudnnDestroyFilterDescriptor(w_desc_);
    cudnnDestroyTensorDescriptor(y_desc_);
    cudnnDestroyTensorDescriptor(x_desc_);
    cudnnDestroy(handle_);
  }

  std::string name() const override { return "cudnn"; }

  std::string unsupported_reason(const ConvRow& row) const override {
    for (int d = 0; d < row.spatial_dims(); ++d) {
      if (row.idil[d] != 1) return "cuDNN forward conv has no input dilation (transposed conv)";
      if (row.pad_lo[d] != row.pad_hi[d]) return "cuDNN has no asymmetric padding";
      if (row.pad_lo[d] < 0) return "cuDNN has no negative padding";
    }
    if (row.bias) return "bias is not benchmarked with cuDNN";
    return "";
  }

  void prepare(const ConvRow& row, const ConvOperands& /*operands*/, Stream stream) override {
    check(cudnnSetStream(handle_, stream), "cudnnSetStream");
    // cuDNN wants at least 2 spatial dims: a 1-D conv gets a leading unit dim.
    const bool one_d = row.spatial_dims() == 1;
    std::vector<int> in, kernel, pad, stride, dilation;
    if (one_d) {
      in.push_back(1);
      kernel.push_back(1);
      pad.push_back(0);
      stride.push_back(1);
      dilation.push_back(1);
    }
    for (int d = 0; d < row.spatial_dims(); ++d) {
      in.push_back(to_int(row.in_spatial[d], "input size"));
      kernel.push_back(to_int(row.kernel[d], "kernel size"));
      pad.push_back(to_int(row.pad_lo[d], "padding"));
      stride.push_back(to_int(row.stride[d], "stride"));
      dilation.push_back(to_int(row.kdil[d], "kernel dilation"));
    }
    const int spatial = static_cast<int>(in.size());
    const cudnnDataType_t type = gemmkit::cuda::cudnn_data_type(row.dtype);

    // Dimensions are given in NCHW order; the NHWC format sets the strides.
    std::vector<int> x_dims{to_int(row.n, "batch"), to_int(row.c, "channels")};
    x_dims.insert(x_dims.end(), in.begin(), in.end());
    check(
        cudnnSetTensorNdDescriptorEx(x_desc_, CUDNN_TENSOR_NHWC, type, spatial + 2, x_dims.data()),
        "cudnnSetTensorNdDescriptorEx(x)");
    std::vector<int> w_dims{to_int(row.o, "out channels"), to_int(row.c / row.groups, "channels")};
    w_dims.insert(w_dims.end(), kernel.begin(), kernel.end());
    check(cudnnSetFilterNdDescriptor(w_desc_, type, CUDNN_TENSOR_NHWC, spatial + 2, w_dims.data()),
          "cudnnSetFilterNdDescriptor");
    // bf16 and f16 data compute in fp32, like gemmkit.
    check(cudnnSetConvolutionNdDescriptor(
              conv_desc_, spatial, pad.data(), stride.data(), dilation.data(),
              row.flip ? CUDNN_CONVOLUTION : CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
          "cudnnSetConvolutionNdDescriptor");
    check(cudnnSetConvolutionGroupCount(conv_desc_, to_int(row.groups, "groups")),
          "cudnnSetConvolutionGroupCount");
    check(cudnnSetConvolutionMathType(conv_desc_, CUDNN_TENSOR_OP_MATH),
          "cudnnSetConvolutionMathType");

    std::vector<int> y_dims(static_cast<std::size_t>(spatial + 2));
    check(cudnnGetConvolutionNdForwardOutputDim(conv_desc_, x_desc_, w_desc_, spatial + 2,
                                                y_dims.data()),
          "cudnnGetConvolutionNdForwardOutputDim");
    std::vector<int> expected{to_int(row.n, "batch"), to_int(row.o, "out channels")};
    if (one_d) expected.push_back(1);
    for (int64_t size : conv_out_spatial(row)) expected.push_back(to_int(size, "output size"));
    if (y_dims != expected) throw Error("cuDNN computes a different output shape");
    check(
        cudnnSetTensorNdDescriptorEx(y_desc_, CUDNN_TENSOR_NHWC, type, spatial + 2, y_dims.data()),
        "cudnnSetTensorNdDescriptorEx(y)");

    cudnnConvolutionFwdAlgoPerf_t results[CUDNN_CONVOLUTION_FWD_ALGO_COUNT] = {};
    int returned = 0;
    check(
        cudnnFindConvolutionForwardAlgorithm(handle_, x_desc_, w_desc_, conv_desc_, y_desc_,
                                             CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, results),
        "cudnnFindConvolutionForwardAlgorithm");
    if (const char* verbose = std::getenv("GEMMKIT_BENCH_VERBOSE"); verbose && *verbose == '1') {
      for (int i = 0; i < returned; ++i)
        std::fprintf(stderr, "\n  cudnn find %s: algo %d math %d status %s %.4f ms %zu bytes",
                     row.name.c_str(), static_cast<int>(results[i].algo),
                     static_cast<int>(results[i].mathType), cudnnGetErrorString(results[i].status),
                     static_cast<double>(results[i].time), results[i].memory);
      std::fprintf(stderr, "\n");
    }
    // Results come sorted by time: take the first that ran and fits the workspace limit.
    const cudnnConvolutionFwdAlgoPerf_t* best = nullptr;
    for (int i = 0; i < returned && !best; ++i)
      if (results[i].status == CUDNN_STATUS_SUCCESS && results[i].memory <= kMaxWorkspaceBytes)
        best = &results[i];
    if (!best) throw Error("cuDNN found no algorithm for this problem");
    algo_ = best->algo;
    // Find may have timed the winner with another math type (tensor ops do not apply to every
    // shape, e.g. 3 input channels); the forward call must use the same one, or cuDNN runs a
    // different engine or refuses (CUDNN_STATUS_BAD_PARAM).
    check(cudnnSetConvolutionMathType(conv_desc_, best->mathType), "cudnnSetConvolutionMathType");
    workspace_bytes_ = best->memory;
    if (workspace_bytes_ > workspace_capacity_) {
      if (workspace_) cudaFree(workspace_);
      workspace_ = nullptr;
      workspace_capacity_ = 0;
      check(cudaMalloc(&workspace_, workspace_bytes_), "cudaMalloc (cuDNN workspace)");
      workspace_capacity_ = workspace_bytes_;
    }
  }

  void launch(const ConvOperands& operands, Stream stream) override {
    check(cudnnSetStream(handle_, stream), "cudnnSetStream");
    const float alpha = 1.0f, beta = 0.0f;
    check(cudnnConvolutionForward(handle_, &alpha, x_desc_, operands.x, w_desc_, operands.weight,
                                  conv_desc_, algo_, workspace_, workspace_bytes_, &beta, y_desc_,
                                  operands.out),
          "cudnnConvolutionForward");
  }

 private:
  cudnnHandle_t handle_ = nullptr;
  cudnnTensorDescriptor_t x_desc_ = nullptr, y_desc_ = nullptr;
  cudnnFilterDescriptor_t w_desc_ = nullptr;
  cudnnConvolutionDescriptor_t conv_desc_ = nullptr;
  cudnnConvolutionFwdAlgo_t algo_ = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  void* workspace_ = nullptr;
  std::size_t workspace_bytes_ = 0, workspace_capacity_ = 0;
};

}  // namespace

std::unique_ptr<ConvPeer> make_cudnn_peer(Device device) {
  return std::make_unique<CudnnConvPeer>(device);
}

}  // namespace gemmkit::bench
