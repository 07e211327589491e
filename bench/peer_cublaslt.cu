// cuBLASLt as the linear peer: fp32 compute, bias epilogue, the heuristic's first algorithm with a
// 32 MiB workspace (the configuration of bench/peers/h200-linear.csv).
//
// Layouts: cuBLASLt is column-major. Row-major out[n, m] is the column-major m x n matrix
// out^T = w . x^T. Row-major w[m, k] read column-major is a k x m matrix (w^T, ld k), so
// A = w with op T gives the m x k factor; row-major x[n, k] read column-major is k x n (x^T,
// ld k), so B = x with op N. D is m x n with ld m, and the bias (length m) runs along D's rows,
// which is what CUBLASLT_EPILOGUE_BIAS adds.
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <memory>
#include <string>

#include "bench/peer.h"
#include "src/cuda/common/cublaslt.h"

namespace gemmkit::bench {
namespace {

constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;

void check(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw Error(std::string("cuBLASLt ") + what + ": " + cublasLtGetStatusString(status));
}

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess)
    throw Error(std::string("CUDA error in ") + what + ": " + cudaGetErrorString(status));
}

class CublasLtPeer final : public LinearPeer {
 public:
  explicit CublasLtPeer(Device device) {
    check(cudaSetDevice(device.index), "cudaSetDevice");
    check(cublasLtCreate(&handle_), "cublasLtCreate");
    const cudaError_t status = cudaMalloc(&workspace_, kWorkspaceBytes);
    if (status != cudaSuccess) {
      cublasLtDestroy(handle_);
      check(status, "cudaMalloc (cuBLASLt workspace)");
    }
  }

  ~CublasLtPeer() override {
    release_descriptors();
    cudaFree(workspace_);
    cublasLtDestroy(handle_);
  }

  std::string name() const override { return "cublaslt"; }

  std::string unsupported_reason(const LinearRow& row) const override {
    if (row.out_dtype != row.dtype && row.out_dtype != DType::f32)
      return std::string("cuBLASLt has no ") + dtype_name(row.dtype) + " -> " +
             dtype_name(row.out_dtype) + " GEMM";
    return "";
  }

  void prepare(const LinearRow& row, const LinearOperands& /*operands*/,
               Stream /*stream*/) override {
    release_descriptors();
    has_bias_ = row.bias;
    const cudaDataType_t in_type = gemmkit::cuda::cublas_data_type(row.dtype);
    const cudaDataType_t out_type = gemmkit::cuda::cublas_data_type(row.out_dtype);
    const auto rows = [](int64_t value) { return static_cast<uint64_t>(value); };

    check(cublasLtMatmulDescCreate(&matmul_, CUBLAS_COMPUTE_32F, CUDA_R_32F), "MatmulDescCreate");
    const cublasOperation_t transpose = CUBLAS_OP_T, no_transpose = CUBLAS_OP_N;
    set_attribute(CUBLASLT_MATMUL_DESC_TRANSA, transpose);
    set_attribute(CUBLASLT_MATMUL_DESC_TRANSB, no_transpose);
    if (row.bias) {
      set_attribute(CUBLASLT_MATMUL_DESC_EPILOGUE, CUBLASLT_EPILOGUE_BIAS);
      set_attribute(CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, in_type);
    }
    check(cublasLtMatrixLayoutCreate(&a_layout_, in_type, rows(row.k), rows(row.m), row.k),
          "MatrixLayoutCreate(A = w)");
    check(cublasLtMatrixLayoutCreate(&b_layout_, in_type, rows(row.k), rows(row.n), row.k),
          "MatrixLayoutCreate(B = x)");
    check(cublasLtMatrixLayoutCreate(&d_layout_, out_type, rows(row.m), rows(row.n), row.m),
          "MatrixLayoutCreate(D = out)");

    cublasLtMatmulPreference_t preference = nullptr;
    check(cublasLtMatmulPreferenceCreate(&preference), "MatmulPreferenceCreate");
    const std::size_t workspace_limit = kWorkspaceBytes;
    cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                         &workspace_limit, sizeof(workspace_limit));
    cublasLtMatmulHeuristicResult_t heuristic = {};
    int found = 0;
    const cublasStatus_t status =
        cublasLtMatmulAlgoGetHeuristic(handle_, matmul_, a_layout_, b_layout_, d_layout_, d_layout_,
                                       preference, 1, &heuristic, &found);
    cublasLtMatmulPreferenceDestroy(preference);
    check(status, "MatmulAlgoGetHeuristic");
    if (found == 0) throw Error("cuBLASLt heuristic found no algorithm for this problem");
    algo_ = heuristic.algo;
  }

  void launch(const LinearOperands& operands, Stream stream) override {
    if (has_bias_) set_attribute(CUBLASLT_MATMUL_DESC_BIAS_POINTER, operands.bias);
    const float alpha = 1.0f, beta = 0.0f;
    check(cublasLtMatmul(handle_, matmul_, &alpha, operands.w, a_layout_, operands.x, b_layout_,
                         &beta, operands.out, d_layout_, operands.out, d_layout_, &algo_,
                         workspace_, kWorkspaceBytes, stream),
          "Matmul");
  }

 private:
  template <class T>
  void set_attribute(cublasLtMatmulDescAttributes_t attribute, const T& value) {
    check(cublasLtMatmulDescSetAttribute(matmul_, attribute, &value, sizeof(value)),
          "MatmulDescSetAttribute");
  }

  void release_descriptors() {
    if (d_layout_) cublasLtMatrixLayoutDestroy(d_layout_);
    if (b_layout_) cublasLtMatrixLayoutDestroy(b_layout_);
    if (a_layout_) cublasLtMatrixLayoutDestroy(a_layout_);
    if (matmul_) cublasLtMatmulDescDestroy(matmul_);
    d_layout_ = b_layout_ = a_layout_ = nullptr;
    matmul_ = nullptr;
  }

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  cublasLtMatmulDesc_t matmul_ = nullptr;
  cublasLtMatrixLayout_t a_layout_ = nullptr, b_layout_ = nullptr, d_layout_ = nullptr;
  cublasLtMatmulAlgo_t algo_ = {};
  bool has_bias_ = false;
};

}  // namespace

std::unique_ptr<LinearPeer> make_cublaslt_peer(Device device) {
  return std::make_unique<CublasLtPeer>(device);
}

}  // namespace gemmkit::bench
