// Portable dot-product kernels (baseline ISA of the build) and the kernel selection.
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
const DotKernels kGeneric{"generic", &generic::gemm_block};
const DotKernels kAvx2{"avx2", &avx2::gemm_block};
const DotKernels kAvx512{"avx512", &avx512::gemm_block};
const FmaKernels kAvx2Fma{"6x16", &avx2::fma_block};
const FmaKernels kAvx512Fma{"8x48", &avx512::fma_block};
}  // namespace

const DotKernels& dot_kernels() {
  const Isa isa = active_isa();
  return isa == Isa::avx512 ? kAvx512 : isa == Isa::avx2 ? kAvx2 : kGeneric;
}

const FmaKernels* fma_kernels(Isa isa) {
  return isa == Isa::avx512 ? &kAvx512Fma : isa == Isa::avx2 ? &kAvx2Fma : nullptr;
}

void set_generic_kernels(bool generic) {
  set_isa_override(generic ? static_cast<int>(Isa::generic) : -1);
}

}  // namespace gemmkit::cpu
