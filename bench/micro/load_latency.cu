// gemmkit_load_latency: how long one warp waits for a small tile it asks for, from L2 and from
// HBM, by each way the linear kernels can fetch it: TMA tile boxes completing on an mbarrier
// (the rings' path), a 1-D bulk copy, cp.async 16-byte copies, and plain 16-byte loads into
// registers. The decode rows of the linear kernels (a few KiB of activations per slice, fetched
// after griddepcontrol.wait) pay this round trip once per call, on the critical path.
//
// One CTA of one warp walks a dependent chain: each fetch's address depends on a value read from
// the previous fetch's data (the buffer is zero, so the walk's offsets are known but the hardware
// cannot start a fetch before the previous one has landed). Printed per way and size: cycles and
// nanoseconds per round trip (clock64 and globaltimer over the walk, divided by its steps). "L2":
// the walk stays within 8 MiB read once before; "HBM": every step reads lines 4 MiB past the last
// within 1 GiB, which L2 does not hold.
//
// Usage: gemmkit_load_latency [--device I]   (sm_90a)
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "cuda/common/ptx.cuh"
#include "cuda/common/tensor_map.h"
#include "micro_start.h"

namespace {

namespace ptx = gemmkit::cuda::ptx;
using gemmkit::micro::check;

constexpr int64_t kCols = 4096;                     // bf16 columns of the buffer viewed as a matrix
constexpr int64_t kRowBytes = kCols * 2;            // 8 KiB
constexpr int64_t kBufferBytes = int64_t{1} << 30;  // 1 GiB
constexpr int64_t kRows = kBufferBytes / kRowBytes;
constexpr int64_t kL2Rows = (int64_t{8} << 20) / kRowBytes;      // the L2 walk's 8 MiB
constexpr int64_t kHbmRowStep = (int64_t{4} << 20) / kRowBytes;  // 4 MiB between HBM steps
constexpr int kSteps = 256;

enum class Way : int { kTmaTile, kBulk, kCpAsync, kLoad };

const char* way_name(Way way) {
  switch (way) {
    case Way::kTmaTile:
      return "TMA 2-D boxes (128B swizzle)";
    case Way::kBulk:
      return "TMA 1-D bulk copy";
    case Way::kCpAsync:
      return "cp.async 16 B per lane";
    case Way::kLoad:
      return "ld.global 16 B per lane";
  }
  return "?";
}

// Row of step s of the walk (plus the zero read back from the data).
// HBM walks start `salt` rows apart, so that no run reads the lines of an earlier one.
__device__ __forceinline__ int64_t walk_row(int s, bool hbm, int salt) {
  return hbm ? (int64_t{s} * kHbmRowStep + 3 * s + 17 * salt) % kRows : (int64_t{s} * 37) % kL2Rows;
}

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// One warp. rows x 128 bytes per fetch (rows 8 or 16: the ring's activation and weight slice
// halves), `boxes` boxes of 64 columns side by side (1 or 2).
__global__ void __launch_bounds__(32, 1)
    latency_walk(const __grid_constant__ CUtensorMap map, const uint8_t* buffer, int way_index,
                 int rows, int boxes, bool hbm, int salt, long long* cycles,
                 unsigned long long* ns) {
  __shared__ __align__(1024) uint8_t tile[2 * 16 * 128];
  __shared__ uint64_t bar;
  const Way way = static_cast<Way>(way_index);
  const int lane = static_cast<int>(threadIdx.x);
  if (lane == 0) {
    ptx::mbarrier_init(&bar, 1);
    ptx::fence_barrier_init();
    ptx::prefetch_tensor_map(&map);
  }
  __syncwarp();
  const int bytes = rows * 128 * boxes;
  const int chunks = bytes / 16;  // 16-byte pieces, spread over the lanes
  // Where chunk c of the fetch at `row` starts: `boxes` * 128 bytes of each of `rows` rows.
  const auto chunk_source = [&](int64_t row, int c) {
    return buffer + (row + c / (8 * boxes)) * kRowBytes + (c % (8 * boxes)) * 16;
  };
  int zero = 0;  // read back from the data: the walk's dependency
  long long start = 0;
  uint64_t start_ns = 0;
  for (int s = 0; s < kSteps; ++s) {
    if (s == 1) {  // step 0 warms the instruction cache and the tensor map
      start = clock64();
      start_ns = global_ns();
    }
    const int64_t row = walk_row(s, hbm, salt) + zero;
    if (way == Way::kTmaTile || way == Way::kBulk) {
      if (lane == 0) {
        ptx::mbarrier_arrive_expect_tx(&bar, static_cast<uint32_t>(bytes));
        if (way == Way::kTmaTile) {
          for (int b = 0; b < boxes; ++b)
            ptx::tma_load_2d(tile + b * rows * 128, &map, &bar, b * 64, static_cast<int32_t>(row));
        } else {
          // One contiguous run of the same byte count from the row's start.
          ptx::bulk_load(tile, buffer + row * kRowBytes, static_cast<uint32_t>(bytes), &bar);
        }
      }
      ptx::mbarrier_wait(&bar, static_cast<uint32_t>(s & 1));
      zero = *reinterpret_cast<volatile int*>(tile + lane * 16);
    } else if (way == Way::kCpAsync) {
      for (int c = lane; c < chunks; c += 32) {
        ptx::cp_async_cg16(ptx::smem_address(tile + c * 16), chunk_source(row, c), 16);
      }
      ptx::cp_async_commit();
      ptx::cp_async_wait<0>();
      __syncwarp();
      zero = *reinterpret_cast<volatile int*>(tile + lane * 16);
    } else {
      int sum = 0;
      for (int c = lane; c < chunks; c += 32) {
        const uint8_t* src = chunk_source(row, c);
        int4 v;
        asm volatile("ld.global.cg.v4.s32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                     : "l"(src));
        sum |= v.x | v.w;
      }
      zero = __shfl_sync(0xffffffffu, sum, 0);
    }
    __syncwarp();
  }
  if (lane == 0) {
    *cycles = clock64() - start;
    *ns = global_ns() - start_ns;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const gemmkit::micro::Device device =
      gemmkit::micro::start_device("gemmkit_load_latency", argc, argv);
  std::printf("%s: one warp, %d dependent fetches per line\n", device.props.name, kSteps - 1);
  uint8_t* buffer = nullptr;
  long long* cycles = nullptr;
  unsigned long long* ns = nullptr;
  check(cudaMalloc(&buffer, kBufferBytes), "buffer");
  check(cudaMemset(buffer, 0, kBufferBytes), "zero buffer");
  check(cudaMalloc(&cycles, sizeof(long long)), "cycles");
  check(cudaMalloc(&ns, sizeof(unsigned long long)), "ns");
  const Way ways[] = {Way::kTmaTile, Way::kBulk, Way::kCpAsync, Way::kLoad};
  const int shapes[][2] = {{8, 1}, {8, 2}, {16, 2}};  // rows, boxes of 64 columns
  int salt = 0;
  for (const bool hbm : {false, true}) {
    for (const auto& shape : shapes) {
      const CUtensorMap map =
          gemmkit::cuda::tensor_map_2d_16bit(buffer, kRows, kCols, kCols, shape[0], 64);
      for (const Way way : ways) {
        long long best_cycles = 0;
        unsigned long long best_ns = 0;
        for (int run = 0; run < 4; ++run) {  // run 0 reads the L2 walk's lines into L2
          latency_walk<<<1, 32>>>(map, buffer, static_cast<int>(way), shape[0], shape[1], hbm,
                                  salt++, cycles, ns);
          check(cudaGetLastError(), "launch");
          check(cudaDeviceSynchronize(), "walk");
          long long c = 0;
          unsigned long long t = 0;
          check(cudaMemcpy(&c, cycles, sizeof c, cudaMemcpyDeviceToHost), "copy");
          check(cudaMemcpy(&t, ns, sizeof t, cudaMemcpyDeviceToHost), "copy");
          if (run > 0 && (best_cycles == 0 || c < best_cycles)) {
            best_cycles = c;
            best_ns = t;
          }
        }
        std::printf("%-3s %5d bytes  %-30s %7.0f cycles  %6.0f ns\n", hbm ? "HBM" : "L2",
                    shape[0] * 128 * shape[1], way_name(way), double(best_cycles) / (kSteps - 1),
                    double(best_ns) / (kSteps - 1));
      }
    }
  }
  check(cudaFree(buffer), "free");
  check(cudaFree(cycles), "free");
  check(cudaFree(ns), "free");
  return 0;
}
