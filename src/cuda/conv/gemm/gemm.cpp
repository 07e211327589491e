// The GEMM paths of the CUDA convolution: cached cuBLASLt algorithms, the grow-only per-device
// workspace, and the chunk loop (unfold, GEMM, bias pass).
//
// Workspace: one buffer per device, grown (never shrunk) with cudaMallocAsync on the caller's
// stream. Calls on one device take it in turn under a mutex; each call first makes its stream
// wait for the event recorded after the previous call's last use, and records that event after
// its own, so two streams never use the buffer at once and a grown buffer is freed
// (cudaFreeAsync) only after every earlier use. A stream being captured into a CUDA graph gets
// its own allocation inside the graph (cudaMallocAsync / cudaFreeAsync in the capture) instead,
// so graphs never share the cached buffer with eager calls.
#include <cublasLt.h>

#include <array>
#include <map>
#include <mutex>

#include "cuda/common/cublaslt.h"
#include "cuda/common/cuda_check.h"
#include "cuda/common/device_context.h"
#include "cuda/conv/common/launch.h"
#include "cuda/conv/gemm/launch.h"
#include "cuda/conv/gemm/layout.h"
#include "cuda/conv/gemm/plan.h"

namespace gemmkit::cuda::conv_impl {
namespace {

constexpr int kMaxDevices = 64;

void check_device_index(int device) {
  if (device < 0 || device >= kMaxDevices) {
    throw Error("gemmkit::conv: device cuda:" + std::to_string(device) + " is beyond the " +
                std::to_string(kMaxDevices) + " devices the conv caches hold");
  }
}

// ---- Workspace -------------------------------------------------------------------------------

struct DeviceWorkspace {
  std::mutex mutex;
  void* data = nullptr;
  int64_t bytes = 0;
  cudaEvent_t last_use = nullptr;  // recorded on the stream of the latest call, after its work
  bool used = false;
};

DeviceWorkspace& device_workspace(int device) {
  static std::array<DeviceWorkspace, kMaxDevices> workspaces;
  check_device_index(device);
  return workspaces[static_cast<std::size_t>(device)];
}

std::string allocation_failure(int64_t bytes, cudaError_t status) {
  cudaGetLastError();  // clear it: the call falls back or reports, it does not poison later calls
  return "cudaMallocAsync of " + std::to_string(bytes) + " bytes of workspace failed (" +
         cudaGetErrorName(status) + ")";
}

// Runs work(pointer) with `bytes` of device workspace usable in stream order on `stream`.
// Returns false, having run nothing, when the memory cannot be allocated.
template <typename Work>
bool with_workspace(int device, int64_t bytes, cudaStream_t stream, std::string& why, Work&& work) {
  if (bytes == 0) {
    work(nullptr);
    return true;
  }
  if (stream_is_capturing(stream)) {
    void* pointer = nullptr;
    const cudaError_t status = cudaMallocAsync(&pointer, static_cast<size_t>(bytes), stream);
    if (status != cudaSuccess) {
      why = allocation_failure(bytes, status);
      return false;
    }
    try {
      work(pointer);
    } catch (...) {
      cudaFreeAsync(pointer, stream);
      throw;
    }
    GEMMKIT_CUDA_CHECK(cudaFreeAsync(pointer, stream));
    return true;
  }
  DeviceWorkspace& ws = device_workspace(device);
  std::lock_guard<std::mutex> lock(ws.mutex);
  if (ws.last_use == nullptr) {
    GEMMKIT_CUDA_CHECK(cudaEventCreateWithFlags(&ws.last_use, cudaEventDisableTiming));
  }
  if (ws.used) GEMMKIT_CUDA_CHECK(cudaStreamWaitEvent(stream, ws.last_use, 0));
  if (bytes > ws.bytes) {
    if (ws.data != nullptr) {
      GEMMKIT_CUDA_CHECK(cudaFreeAsync(ws.data, stream));  // after every earlier use
      ws.data = nullptr;
      ws.bytes = 0;
    }
    void* pointer = nullptr;
    const cudaError_t status = cudaMallocAsync(&pointer, static_cast<size_t>(bytes), stream);
    if (status != cudaSuccess) {
      why = allocation_failure(bytes, status);
      return false;
    }
    ws.data = pointer;
    ws.bytes = bytes;
  }
  struct RecordLastUse {
    DeviceWorkspace& ws;
    cudaStream_t stream;
    ~RecordLastUse() {
      // Also after a failed enqueue: whatever was enqueued must finish before the next user.
      if (cudaEventRecord(ws.last_use, stream) == cudaSuccess) ws.used = true;
    }
  } record{ws, stream};
  work(ws.data);
  return true;
}

// ---- cuBLASLt operations -------------------------------------------------------------------

// Descriptors of one cuBLASLt call shape (pointers other than the bias are given at launch).
struct LtOperation {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};

  LtOperation() = default;
  LtOperation(const LtOperation&) = delete;
  LtOperation& operator=(const LtOperation&) = delete;
  ~LtOperation() {
    if (d != nullptr) cublasLtMatrixLayoutDestroy(d);
    if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
    if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
};

template <typename Value>
void set_desc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute,
              const Value& value) {
  GEMMKIT_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)));
}

void make_layout(cublasLtMatrixLayout_t& layout, DType dtype, int64_t rows, int64_t cols,
                 int64_t ld, int64_t batch, int64_t batch_stride) {
  GEMMKIT_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&layout, cublas_data_type(dtype),
                                                    static_cast<uint64_t>(rows),
                                                    static_cast<uint64_t>(cols), ld));
  if (batch > 1) {
    const int32_t count = static_cast<int32_t>(batch);  // <= kMaxGemmBatch
    GEMMKIT_CUBLASLT_CHECK(cublasLtMatrixLayoutSetAttribute(
        layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
    GEMMKIT_CUBLASLT_CHECK(cublasLtMatrixLayoutSetAttribute(
        layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &batch_stride, sizeof(batch_stride)));
  }
}

// Alignments (bytes) cuBLASLt may assume of the operands over every chunk.
struct OperandAlignment {
  int a = 256, b = 256, d = 256;
};

// The algorithm cache: keyed by everything the heuristic sees.
using AlgoKey = std::array<int64_t, 21>;
struct CachedAlgo {
  bool found = false;
  cublasLtMatmulAlgo_t algo{};
  std::string why;
};

std::mutex g_algo_mutex;
std::map<AlgoKey, CachedAlgo>& algo_cache() {
  static std::map<AlgoKey, CachedAlgo> cache;
  return cache;
}

// Builds the descriptors of a call of `rows` output rows and finds (or recalls) its algorithm.
bool prepare(LtOperation& op, const detail::ConvProblem& p, const ConvConfig& c, int device,
             int64_t rows, const OperandAlignment& alignment, std::string& why) {
  const GemmCall call = gemm_call(p, c, 0, rows);
  const DType in = p.x.dtype, out = call.d_scratch ? DType::f32 : p.out.dtype;
  GEMMKIT_CUBLASLT_CHECK(cublasLtMatmulDescCreate(&op.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  set_desc(op.desc, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<int32_t>(CUBLAS_OP_T));
  set_desc(op.desc, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<int32_t>(CUBLAS_OP_N));
  int bias_alignment = 0;
  if (c.bias == BiasMode::epilogue) {
    set_desc(op.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<uint32_t>(CUBLASLT_EPILOGUE_BIAS));
    set_desc(op.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, p.bias.data);
    if (call.batch > 1) {
      set_desc(op.desc, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, call.bias_batch_stride);
    }
    bias_alignment = pointer_alignment(p.bias.data);
  }
  make_layout(op.a, in, call.k, call.m, call.lda, call.batch, call.a_batch_stride);
  make_layout(op.b, in, call.k, call.n, call.ldb, call.batch, call.b_batch_stride);
  make_layout(op.d, out, call.m, call.n, call.ldd, call.batch, call.d_batch_stride);

  const AlgoKey key{device,
                    static_cast<int64_t>(in),
                    static_cast<int64_t>(out),
                    call.m,
                    call.n,
                    call.k,
                    call.batch,
                    call.lda,
                    call.ldb,
                    call.ldd,
                    call.a_batch_stride,
                    call.b_batch_stride,
                    call.d_batch_stride,
                    static_cast<int64_t>(c.bias),
                    call.bias_batch_stride,
                    bias_alignment,
                    alignment.a,
                    alignment.b,
                    alignment.d,
                    c.lt_workspace_bytes,
                    static_cast<int64_t>(c.path)};
  {
    std::lock_guard<std::mutex> lock(g_algo_mutex);
    const auto it = algo_cache().find(key);
    if (it != algo_cache().end()) {
      if (!it->second.found) why = it->second.why;
      op.algo = it->second.algo;
      return it->second.found;
    }
  }

  cublasLtMatmulPreference_t pref = nullptr;
  GEMMKIT_CUBLASLT_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  struct PrefGuard {
    cublasLtMatmulPreference_t pref;
    ~PrefGuard() { cublasLtMatmulPreferenceDestroy(pref); }
  } pref_guard{pref};
  const auto set_pref = [&](cublasLtMatmulPreferenceAttributes_t attribute, const auto& value) {
    GEMMKIT_CUBLASLT_CHECK(
        cublasLtMatmulPreferenceSetAttribute(pref, attribute, &value, sizeof(value)));
  };
  set_pref(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(c.lt_workspace_bytes));
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, static_cast<uint32_t>(alignment.a));
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, static_cast<uint32_t>(alignment.b));
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, static_cast<uint32_t>(alignment.d));
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, static_cast<uint32_t>(alignment.d));

  cublasLtMatmulHeuristicResult_t result{};
  int count = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      cublaslt_handle(device), op.desc, op.a, op.b, op.d, op.d, pref, 1, &result, &count);
  CachedAlgo cached;
  cached.found = status == CUBLAS_STATUS_SUCCESS && count > 0 &&
                 result.state == CUBLAS_STATUS_SUCCESS &&
                 static_cast<int64_t>(result.workspaceSize) <= c.lt_workspace_bytes;
  if (cached.found) {
    cached.algo = result.algo;
  } else {
    cached.why = std::string("cuBLASLt has no algorithm for the ") + dtype_name(in) + " -> " +
                 dtype_name(out) + " GEMM m=" + std::to_string(call.m) +
                 " n=" + std::to_string(call.n) + " k=" + std::to_string(call.k) +
                 " batch=" + std::to_string(call.batch) + " bias=" + bias_mode_name(c.bias) +
                 " (heuristic status " + cublasLtGetStatusName(status) + ", " +
                 std::to_string(count) + " result(s))";
    why = cached.why;
  }
  op.algo = cached.algo;
  std::lock_guard<std::mutex> lock(g_algo_mutex);
  algo_cache().emplace(key, cached);
  return cached.found;
}

int chunk_alignment(const void* base, int64_t chunk_step_bytes) {
  return std::min(pointer_alignment(base),
                  address_alignment(static_cast<uint64_t>(chunk_step_bytes)));
}

}  // namespace

bool with_conv_workspace(int device, int64_t bytes, cudaStream_t stream, std::string& why,
                         const std::function<void(void*)>& work) {
  return with_workspace(device, bytes, stream, why, work);
}

bool run_gemm_path(const detail::ConvProblem& p, const ConvGeometry& g, const ConvConfig& c,
                   int device, cudaStream_t stream, RunFailure& failure) {
  std::string& why = failure.why;
  const int64_t positions = p.out_positions();
  const int64_t in_size = elem_size(p.x.dtype), out_size = elem_size(p.out.dtype);
  const bool unfold = c.path == ConvPath::unfold_gemm;

  // Every operand address any chunk and any group (batch entry) uses is a multiple of these.
  const GemmCall first = gemm_call(p, c, 0, c.chunk_rows);
  const GemmCall second = gemm_call(p, c, c.chunk_rows, c.chunk_rows);
  const bool batched = first.batch > 1;
  OperandAlignment alignment;
  alignment.a = chunk_alignment(p.weight.data, batched ? first.a_batch_stride * in_size : 0);
  alignment.b = unfold ? static_cast<int>(kWorkspaceAlign)
                       : chunk_alignment(p.x.data, (second.b_offset - first.b_offset) * in_size);
  if (batched) {
    alignment.b = std::min(
        alignment.b, address_alignment(static_cast<uint64_t>(first.b_batch_stride * in_size)));
  }
  const int64_t d_size = first.d_scratch ? 4 : out_size;
  alignment.d = first.d_scratch
                    ? address_alignment(static_cast<uint64_t>(first.ldd * d_size))
                    : chunk_alignment(p.out.data, (second.d_offset - first.d_offset) * d_size);
  if (batched) {
    alignment.d = std::min(alignment.d,
                           address_alignment(static_cast<uint64_t>(first.d_batch_stride * d_size)));
  }

  // Both call shapes (full chunks and the last one) are resolved before anything is enqueued.
  const int64_t last_rows = positions - (c.chunks - 1) * c.chunk_rows;
  LtOperation full_op, last_op;
  // cuBLASLt's heuristic answers the same for the same call in every process: a pure cause.
  if (!prepare(full_op, p, c, device, c.chunk_rows, alignment, why) ||
      (last_rows != c.chunk_rows && !prepare(last_op, p, c, device, last_rows, alignment, why))) {
    failure.pure = true;
    return false;
  }

  const cublasLtHandle_t handle = cublaslt_handle(device);
  return with_workspace(device, c.workspace_bytes, stream, why, [&](void* workspace) {
    char* const ws = static_cast<char*>(workspace);
    void* const lt_workspace = c.lt_workspace_bytes > 0 ? ws + c.lt_offset : nullptr;
    float* const scratch = reinterpret_cast<float*>(ws + c.scratch_offset);
    const float alpha = 1.0f, beta = 0.0f;
    for (int64_t chunk = 0; chunk < c.chunks; ++chunk) {
      const int64_t row0 = chunk * c.chunk_rows;
      const int64_t rows = std::min(c.chunk_rows, positions - row0);
      const GemmCall call = gemm_call(p, c, row0, rows);
      const LtOperation& op = rows == c.chunk_rows ? full_op : last_op;
      const void* b = nullptr;
      if (unfold) {
        const int64_t row_vectors = c.unfold_row_elements / c.vector;
        launch_conv_unfold(g, p.x.dtype, c.vector, p.x.data, ws, row0, rows,
                           grid_for(rows * row_vectors, c.block, c.grid_cap), c.block, stream);
        b = ws;
      } else {
        b = static_cast<const char*>(p.x.data) + call.b_offset * in_size;
      }
      char* const out_rows = static_cast<char*>(p.out.data) + call.out_offset * out_size;
      void* const d = call.d_scratch ? static_cast<void*>(scratch) : out_rows;
      GEMMKIT_CUBLASLT_CHECK(cublasLtMatmul(handle, op.desc, &alpha, p.weight.data, op.a, b, op.b,
                                            &beta, d, op.d, d, op.d, &op.algo, lt_workspace,
                                            static_cast<size_t>(c.lt_workspace_bytes), stream));
      if (c.bias == BiasMode::pass || c.bias == BiasMode::scratch) {
        launch_conv_bias_pass(p.x.dtype, p.out.dtype, static_cast<const float*>(d), call.ldd,
                              out_rows, call.out_ld, rows, p.out_channels, p.bias.data,
                              p.bias.strides[0], grid_for(rows * p.out_channels, 256, c.grid_cap),
                              256, stream);
      }
    }
  });
}

}  // namespace gemmkit::cuda::conv_impl
