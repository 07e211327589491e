// DLPack interop for gemmkit::Tensor (needs dlpack/dlpack.h on the include path, e.g. Debian's
// libdlpack-dev). Both directions are zero-copy views: no data is owned or copied.
#pragma once

#include <dlpack/dlpack.h>

#include "gemmkit/gemmkit.h"

namespace gemmkit {

// A view of `t` (byte_offset folded into the data pointer; null strides mean row-major).
// Throws Error for dtypes other than bf16/f16/f32 with one lane, devices other than CPU/CUDA,
// ranks above kMaxRank, or negative sizes/strides.
Tensor from_dlpack(const DLTensor& t);

// A DLTensor whose shape and strides point into `t`: `t` must outlive the result.
DLTensor to_dlpack(Tensor& t);

// A self-contained DLManagedTensor (shape and strides copied); its deleter frees only that
// record, never the data, which gemmkit does not own.
DLManagedTensor* to_dlpack_managed(const Tensor& t);

}  // namespace gemmkit
