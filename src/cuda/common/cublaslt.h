// cuBLASLt pieces shared by the CUDA backends: one handle per device (created on first use and
// kept for the process), status checking, the cuBLAS type of a gemmkit dtype, and the scratch
// memory of one call.
#pragma once

#include <cublasLt.h>

#include <cstddef>
#include <cstdint>
#include <mutex>

#include "gemmkit/gemmkit.h"

namespace gemmkit::cuda {

// Throws gemmkit::Error naming the call, the file and line, and cuBLASLt's status.
void check_cublaslt(cublasStatus_t status, const char* call, const char* file, int line);

// The handle of `device` (0 <= device < 64); thread-safe.
cublasLtHandle_t cublaslt_handle(int device);

cudaDataType_t cublas_data_type(DType dtype);

// Device scratch for one call, usable in stream order on `stream` while the object lives: the
// workspace of cuBLASLt and the fp32 group sums of the wgmma kernel's k split. From, in this
// order:
//  - the caller's buffer (`caller` non-null, `caller_bytes` of it): used as it is; the caller
//    orders its uses (a tensor of torch's caching allocator on the call's stream, say);
//  - inside a stream capture: an allocation made in the graph (cudaMallocAsync now, cudaFreeAsync
//    at destruction, both captured), so no cudaMalloc happens in a capture and graphs never share
//    memory with eager calls;
//  - else the device's own buffer of `bytes` (at most kMaxOwnScratchBytes), allocated by the
//    first eager call and kept for the process. Calls on different streams take it in turn: each
//    makes its stream wait for the event recorded after the previous use and records it after
//    its own work (at destruction).
// bytes() is what the call may use: `bytes`, or caller_bytes for a caller's buffer.
class CallScratch {
 public:
  static constexpr std::size_t kMaxOwnScratchBytes = std::size_t{48} << 20;

  CallScratch(int device, cudaStream_t stream, std::size_t bytes, void* caller,
              int64_t caller_bytes);
  ~CallScratch();
  CallScratch(const CallScratch&) = delete;
  CallScratch& operator=(const CallScratch&) = delete;

  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }

 private:
  enum class Source { caller, graph, device };
  Source source_ = Source::caller;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  std::unique_lock<std::mutex> lock_;  // held while the device buffer is in use
};

}  // namespace gemmkit::cuda

#define GEMMKIT_CUBLASLT_CHECK(call) \
  ::gemmkit::cuda::check_cublaslt((call), #call, __FILE__, __LINE__)
