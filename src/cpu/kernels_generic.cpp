// Portable dot-product kernels (baseline ISA of the build) and the kernel selection.
#include <atomic>
#include <cstdint>

#include "cpu/cpu_internal.h"

namespace gemmkit::cpu {

namespace generic {
#if defined(__aarch64__)
#define GK_TILE_ROWS 4  // 32 vector registers: 4 x 3 tiles of 2-register accumulators
#define GK_TILE_COLS 3
#else
#define GK_TILE_ROWS 2  // 16 SSE registers: 2 x 3 tiles of 2-register accumulators
#define GK_TILE_COLS 3
#endif
#include "cpu/kernels_impl.h"
#undef GK_TILE_ROWS
#undef GK_TILE_COLS
}  // namespace generic

namespace {
std::atomic<bool> g_force_generic{false};
const DotKernels kGeneric{"generic", &generic::gemm_block};
const DotKernels kAvx2{"avx2", &avx2::gemm_block};
}  // namespace

const DotKernels& dot_kernels() {
  static const bool have_avx2 = avx2::available();
  if (have_avx2 && !g_force_generic.load(std::memory_order_relaxed)) return kAvx2;
  return kGeneric;
}

void set_generic_kernels(bool generic) {
  g_force_generic.store(generic);
}

}  // namespace gemmkit::cpu
