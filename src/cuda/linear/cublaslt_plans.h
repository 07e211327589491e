// A small per-thread memo of the cuBLASLt set-up of the linear family's cuBLASLt path: the matmul
// descriptor, the three matrix layouts and the heuristic's algorithm of one problem, so that a
// call repeating a recent problem only sets the bias pointer and runs cublasLtMatmul.
//
// The key holds everything the descriptors and the heuristic see: the device (its handle), the
// dtypes, n, m, k, the row strides of x, w and out, whether a bias epilogue runs and the alignment
// of the bias address it reads (the one pointer the descriptor holds when the heuristic runs),
// and cuBLASLt's workspace bound. A hit runs the algorithm the heuristic chose for the same
// inputs, so the same bits by construction. CUDA-free (the plan type is a parameter): tested in
// tests/test_linear_dispatch.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <utility>

#include "common/problems.h"
#include "gemmkit/gemmkit.h"

namespace gemmkit::cuda::linear_family {

struct CublasLtPlanKey {
  int device = 0;
  DType in = DType::bf16;
  DType out = DType::bf16;
  int64_t n = 0, m = 0, k = 0;
  int64_t x_row_stride = 0, w_row_stride = 0, out_row_stride = 0;
  bool bias = false;
  int bias_alignment = 0;        // bytes (cublaslt_address_alignment); 0 without a bias
  uint64_t workspace_bytes = 0;  // cuBLASLt's scratch: the preference's bound and the matmul's

  bool operator==(const CublasLtPlanKey& o) const {
    return device == o.device && in == o.in && out == o.out && n == o.n && m == o.m && k == o.k &&
           x_row_stride == o.x_row_stride && w_row_stride == o.w_row_stride &&
           out_row_stride == o.out_row_stride && bias == o.bias &&
           bias_alignment == o.bias_alignment && workspace_bytes == o.workspace_bytes;
  }
};

// The largest power of two up to 256 that divides `pointer`'s address (256 for a null pointer).
inline int cublaslt_address_alignment(const void* pointer) {
  const auto address = reinterpret_cast<uintptr_t>(pointer);
  int alignment = 1;
  while (alignment < 256 && address % static_cast<uintptr_t>(2 * alignment) == 0) alignment *= 2;
  return alignment;
}

// The key of validated problem `p` on `device` whose bias epilogue reads `bias` (the caller's
// bias or its f32 copy; ignored without a bias), with `workspace_bytes` of cuBLASLt scratch.
inline CublasLtPlanKey cublaslt_plan_key(const detail::LinearProblem& p, int device,
                                         const void* bias, uint64_t workspace_bytes) {
  CublasLtPlanKey key;
  key.device = device;
  key.in = p.x.dtype;
  key.out = p.out.dtype;
  key.n = p.n;
  key.m = p.m;
  key.k = p.k;
  key.x_row_stride = p.x.strides[0];
  key.w_row_stride = p.w.strides[0];
  key.out_row_stride = p.out.strides[0];
  key.bias = p.has_bias;
  key.bias_alignment = p.has_bias ? cublaslt_address_alignment(bias) : 0;
  key.workspace_bytes = workspace_bytes;
  return key;
}

// Round-robin over kEntries slots (a model's cuBLASLt shapes stay resident; a new one replaces
// the oldest, whose plan is destroyed). `Plan` is default-constructible and movable; a moved-over
// plan's resources are released by the moved-from object.
template <typename Plan>
class CublasLtPlanCache {
 public:
  static constexpr int kEntries = 8;

  // The plan stored for `key`, or nullptr.
  Plan* find(const CublasLtPlanKey& key) {
    for (int i = 0; i < used_; ++i) {
      Slot& slot = slots_[static_cast<std::size_t>(i)];
      if (slot.key == key) return &slot.plan;
    }
    return nullptr;
  }

  // Stores `plan` for `key` (replacing the oldest entry when full) and returns the stored plan.
  Plan& store(const CublasLtPlanKey& key, Plan plan) {
    Slot& slot = slots_[static_cast<std::size_t>(next_)];
    next_ = (next_ + 1) % kEntries;
    if (used_ < kEntries) ++used_;
    slot.key = key;
    std::swap(slot.plan, plan);  // the replaced plan leaves with `plan`
    return slot.plan;
  }

  int size() const { return used_; }

 private:
  struct Slot {
    CublasLtPlanKey key;
    Plan plan;
  };
  std::array<Slot, kEntries> slots_{};
  int next_ = 0;
  int used_ = 0;
};

}  // namespace gemmkit::cuda::linear_family
