#include "cuda/common/tensor_map.h"

#include <cudaTypedefs.h>
#include <cuda_runtime.h>

#include <array>
#include <mutex>
#include <string>

#include "cuda/common/cuda_check.h"
#include "cuda/common/recent_cache.h"

namespace gemmkit::cuda {

namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_function() {
  static PFN_cuTensorMapEncodeTiled_v12000 function = [] {
    void* pointer = nullptr;
    cudaDriverEntryPointQueryResult status{};
    GEMMKIT_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &pointer, 12000,
                                                        cudaEnableDefault, &status));
    if (status != cudaDriverEntryPointSuccess || pointer == nullptr) {
      throw Error("the CUDA driver does not provide cuTensorMapEncodeTiled (status " +
                  std::to_string(static_cast<int>(status)) + ")");
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(pointer);
  }();
  return function;
}

// Encodes a tiled map of 16-bit elements: `rank` (<= 5) dims innermost first, byte strides of
// dims 1 .. rank - 1, a box of `box` elements per dim, zero fill out of bounds. Throws with the
// shape and strides when the driver refuses them.
void encode_16bit(CUtensorMap* map, CUtensorMapDataType type, int rank, const void* base,
                  const int64_t* dims, const int64_t* byte_strides, const int* box,
                  CUtensorMapSwizzle swizzle, const int* traversal = nullptr) {
  cuuint64_t global_dims[5] = {};
  cuuint64_t strides[4] = {};
  cuuint32_t boxes[5] = {};
  cuuint32_t element_strides[5] = {};
  for (int d = 0; d < rank; ++d) {
    global_dims[d] = static_cast<cuuint64_t>(dims[d]);
    boxes[d] = static_cast<cuuint32_t>(box[d]);
    element_strides[d] = traversal != nullptr ? static_cast<cuuint32_t>(traversal[d]) : 1;
    if (d > 0) strides[d - 1] = static_cast<cuuint64_t>(byte_strides[d - 1]);
  }
  const CUresult result = encode_function()(
      map, type, static_cast<cuuint32_t>(rank), const_cast<void*>(base), global_dims, strides,
      boxes, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS) {
    std::string shape, stride_list;
    for (int d = 0; d < rank; ++d) {
      shape += (d ? " x " : "") + std::to_string(dims[d]) + " (box " + std::to_string(box[d]) +
               (traversal != nullptr ? ", step " + std::to_string(traversal[d]) : "") + ")";
    }
    for (int d = 1; d < rank; ++d) {
      stride_list += (d > 1 ? ", " : "") + std::to_string(byte_strides[d - 1]);
    }
    throw Error("cuTensorMapEncodeTiled failed with CUresult " + std::to_string(result) +
                " for a 16-bit tensor of " + shape + " (innermost first) with byte strides (" +
                stride_list + ")");
  }
}

// What a 2-D map encodes, besides the element type and swizzle every cached map shares.
struct MapKey {
  const void* base = nullptr;
  int64_t rows = 0, cols = 0, row_stride = 0;
  int box_rows = 0, box_cols = 0;

  bool operator==(const MapKey& o) const {
    return base == o.base && rows == o.rows && cols == o.cols && row_stride == o.row_stride &&
           box_rows == o.box_rows && box_cols == o.box_cols;
  }
  uint64_t hash() const {
    uint64_t h = mix_hash(0, reinterpret_cast<uintptr_t>(base));
    h = mix_hash(h, static_cast<uint64_t>(rows));
    h = mix_hash(h, static_cast<uint64_t>(cols));
    h = mix_hash(h, static_cast<uint64_t>(row_stride));
    return mix_hash(h, static_cast<uint64_t>(box_rows) << 32 | static_cast<uint32_t>(box_cols));
  }
};

// 64 maps per thread in sets of 4: the weights and activations of a model's layers (each call
// looks up two) stay encoded across a decode step of a few dozen layers.
using MapCache = RecentCache<MapKey, CUtensorMap, 16, 4>;

}  // namespace

const CUtensorMap& tensor_map_2d_16bit(const void* base, int64_t rows, int64_t cols,
                                       int64_t row_stride, int box_rows, int box_cols) {
  // Most calls repeat a weight or activation buffer; a per-thread cache skips encoding.
  thread_local MapCache cache;
  const MapKey key{base, rows, cols, row_stride, box_rows, box_cols};
  const uint64_t hash = key.hash();
  if (MapCache::Slot* hit = cache.find(key, hash)) return hit->value;
  MapCache::Slot& slot = cache.replace(hash);  // unused until the encoding succeeds
  const int64_t dims[2] = {cols, rows};
  const int64_t byte_strides[1] = {row_stride * 2};
  const int box[2] = {box_cols, box_rows};
  encode_16bit(&slot.value, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, base, dims, byte_strides, box,
               CU_TENSOR_MAP_SWIZZLE_128B);
  slot.key = key;
  slot.used = true;
  return slot.value;
}

CUtensorMap tensor_map_16bit(const void* base, int rank, const int64_t* dims,
                             const int64_t* byte_strides, const int* box) {
  CUtensorMap map{};
  encode_16bit(&map, CU_TENSOR_MAP_DATA_TYPE_UINT16, rank, base, dims, byte_strides, box,
               CU_TENSOR_MAP_SWIZZLE_NONE);
  return map;
}

CUtensorMap tensor_map_16bit_swizzled(const void* base, int rank, const int64_t* dims,
                                      const int64_t* byte_strides, const int* box,
                                      const int* element_strides) {
  CUtensorMap map{};
  if (box[0] != 64 && box[0] != 32) {
    throw Error("gemmkit: internal: a swizzled tensor map of " + std::to_string(box[0]) +
                "-element rows (64 or 32 only)");
  }
  encode_16bit(&map, CU_TENSOR_MAP_DATA_TYPE_UINT16, rank, base, dims, byte_strides, box,
               box[0] == 64 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B,
               element_strides);
  return map;
}

}  // namespace gemmkit::cuda
