// The cuDNN data type of a gemmkit dtype, shared by the convolution's cuDNN path and the
// benchmark's cuDNN peers. Header-only; include it only where cudnn.h is available.
#pragma once

#include <cudnn.h>

#include <string>

#include "gemmkit/gemmkit.h"

namespace gemmkit::cuda {

inline cudnnDataType_t cudnn_data_type(DType dtype) {
  switch (dtype) {
    case DType::bf16:
      return CUDNN_DATA_BFLOAT16;
    case DType::f16:
      return CUDNN_DATA_HALF;
    case DType::f32:
      return CUDNN_DATA_FLOAT;
  }
  throw Error("cudnn_data_type: dtype value " + std::to_string(static_cast<int>(dtype)) +
              " is not one of bf16, f16, f32");
}

}  // namespace gemmkit::cuda
