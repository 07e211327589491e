// DLPack interop for gemmkit::Tensor (needs dlpack/dlpack.h on the include path, e.g. Debian's
// libdlpack-dev). Both directions are zero-copy views: no data is owned or copied.
#pragma once

#include <dlpack/dlpack.h>

#include "gemmkit/gemmkit.h"

namespace gemmkit {

// A view of `t` (byte_offset folded into the data pointer; null strides mean row-major).
// Throws Error for dtypes other than bf16/f16/f32 with one lane, device types other than kDLCPU
// and kDLCUDA (any other code, including ones newer than this dlpack.h, is read as an integer
// and rejected), a negative CUDA device_id, ndim outside [0, kMaxRank], a null shape with
// ndim > 0, negative sizes or strides, row-major strides (null strides) that overflow int64,
// and a byte_offset that moves data past the address space or off the element size's alignment.
Tensor from_dlpack(const DLTensor& t);

// A DLTensor whose shape and strides point into `t`: `t` must outlive the result. Throws Error
// when `t`'s rank is outside [0, kMaxRank], its dtype or device kind is not a value of its enum,
// or its CUDA ordinal is negative.
DLTensor to_dlpack(Tensor& t);

// A self-contained DLManagedTensor (shape and strides copied); its deleter frees only that
// record, never the data, which gemmkit does not own. Validates `t` as to_dlpack does.
DLManagedTensor* to_dlpack_managed(const Tensor& t);

}  // namespace gemmkit
