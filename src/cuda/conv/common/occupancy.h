// What path selection knows about the device (DeviceDescription) and how many blocks of a kernel
// it holds: the grid cap of the grid-stride kernels, and the resident blocks per multiprocessor
// by threads, registers and shared memory. Pure host code.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "cuda/conv/common/geometry.h"

namespace gemmkit::cuda::conv_impl {

// Grid-stride kernels get at most this many blocks per multiprocessor.
constexpr int64_t kBlocksPerSm = 16;
// Shared memory a conv kernel may use without opting in (the default per-block limit); the
// implicit GEMM and the small-o taps kernel opt in to more.
constexpr int64_t kMaxKernelSmem = 48 * 1024;

// What selection needs to know about the device (from DeviceProperties, or made up in tests).
struct DeviceDescription {
  int sm_major = 9, sm_minor = 0;
  int multiprocessors = 132;
  int64_t max_grid_x = kMaxGridX;
  int64_t max_grid_y = kMaxGridYZ, max_grid_z = kMaxGridYZ;
  int64_t shared_per_block_optin = 227 * 1024;
  int64_t shared_per_multiprocessor = 228 * 1024;
  // cuDNN built in and usable on this device (cudnn/launch.h); when not, why not.
  bool cudnn = false;
  std::string cudnn_why_not = "cuDNN not built (configure found no cuDNN)";
};

// Cap of the grid-stride kernels' grids.
inline int64_t max_blocks(const DeviceDescription& dev) {
  return std::min<int64_t>(dev.max_grid_x, int64_t{dev.multiprocessors} * kBlocksPerSm);
}

// Blocks of `threads` threads at `registers` per thread that one SM's register file holds, as
// cuda_occupancy.h counts them: 64 K registers in 4 sub-partitions of 16 K, and each warp takes
// its registers (rounded up to units of 256) from one sub-partition. So at 96 per thread an SM
// holds 4 x 5 = 20 warps (2 blocks of 7, not the 3 that 65536 / (96 x 224) suggests); at 80,
// 24 warps.
constexpr int64_t kRegistersPerSm = 65536;
constexpr int64_t kSmSubPartitions = 4;
constexpr int64_t kRegisterAllocationUnit = 256;
inline int64_t blocks_per_sm_by_registers(int64_t registers, int64_t threads) {
  const int64_t per_warp =
      ceil_div(registers * 32, kRegisterAllocationUnit) * kRegisterAllocationUnit;
  const int64_t warps_per_sm = kRegistersPerSm / kSmSubPartitions / per_warp * kSmSubPartitions;
  return warps_per_sm / ceil_div(threads, int64_t{32});
}

// Blocks of `threads` threads at `registers` per thread and `smem_bytes` of dynamic shared memory
// that one SM holds: its threads, registers (blocks_per_sm_by_registers), shared memory with the
// driver's 1 KiB per block, and 32 blocks.
inline int64_t resident_blocks_per_sm(const DeviceDescription& dev, int64_t threads,
                                      int64_t registers, int64_t smem_bytes) {
  return std::min({int64_t{2048} / threads, blocks_per_sm_by_registers(registers, threads),
                   dev.shared_per_multiprocessor / (smem_bytes + 1024), int64_t{32}});
}

}  // namespace gemmkit::cuda::conv_impl
