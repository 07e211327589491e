// cuBLASLt pieces shared by the CUDA backends: one handle per device (created on first use and
// kept for the process), status checking, and the cuBLAS type of a gemmkit dtype.
#pragma once

#include <cublasLt.h>

#include "gemmkit/gemmkit.h"

namespace gemmkit::cuda {

// Throws gemmkit::Error naming the call, the file and line, and cuBLASLt's status.
void check_cublaslt(cublasStatus_t status, const char* call, const char* file, int line);

// The handle of `device` (0 <= device < 64); thread-safe.
cublasLtHandle_t cublaslt_handle(int device);

cudaDataType_t cublas_data_type(DType dtype);

}  // namespace gemmkit::cuda

#define GEMMKIT_CUBLASLT_CHECK(call) \
  ::gemmkit::cuda::check_cublaslt((call), #call, __FILE__, __LINE__)
