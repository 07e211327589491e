// gemmkit_chain_latency: cycles per step of dependent tensor-core MMA chains on one SM, the
// figures behind the linear kernels' chain-latency notes (docs/perf.md). Each chain accumulates
// into one register set, as the canonical reduction's chains do; one CTA, clock64 around the
// chain, operands whose values do not matter for the timing.
//
// - mma.sync m16n8k16 (bf16 -> fp32), one warp: 1, 2, 4 or 8 independent chains interleaved (the
//   ring and streaming kernels' batch tiles), and one chain whose next step's fragments are read
//   by ldmatrix while the current step runs (the kernels' form).
// - wgmma m64nNk16 (bf16 -> fp32, both operands in shared memory, 128-byte swizzle), one
//   warpgroup, N = 16 ... 256: a wait after every k block of 4 steps (`wait0`), one block kept in
//   flight (`wait1`, the one-chain kernels' form) and 8 blocks issued straight before one wait
//   (`batch8`).
//
// Usage: gemmkit_chain_latency [--device I]   (sm_90a; prints one line per configuration)
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <type_traits>

#include "cuda/common/wgmma.cuh"
#include "micro_start.h"

namespace {

using gemmkit::micro::check;

using gemmkit::cuda::wgmma::fence_registers;
using gemmkit::cuda::wgmma::mma_k_steps;
using gemmkit::cuda::wgmma::wait_group;

constexpr int kMmaSteps = 4096;    // mma.sync steps per chain
constexpr int kWgmmaBlocks = 256;  // wgmma k blocks (4 steps each)

__device__ __forceinline__ void mma_step(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <int kChains>
__global__ void mma_chains(float* out, long long* cycles, uint32_t seed) {
  const uint32_t a[4] = {seed, seed * 3, seed * 5, seed * 7};
  const uint32_t b0 = seed * 11, b1 = seed * 13;
  float acc[kChains][4] = {};
  const long long start = clock64();
  for (int s = 0; s < kMmaSteps; ++s) {
#pragma unroll
    for (int c = 0; c < kChains; ++c) mma_step(acc[c], a, b0, b1);
  }
  const long long stop = clock64();
  float sum = 0.f;
  for (int c = 0; c < kChains; ++c) sum += acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3];
  out[threadIdx.x] = sum;
  if (threadIdx.x == 0) *cycles = stop - start;
}

// One chain whose step s + 1 fragments (A by ldmatrix.x4, B by .x2) are read while step s runs.
__global__ void mma_chain_ldmatrix(float* out, long long* cycles) {
  __shared__ __align__(128) uint16_t tile[16 * 1024];
  for (int i = threadIdx.x; i < 16 * 1024; i += blockDim.x) tile[i] = static_cast<uint16_t>(i * 37);
  __syncthreads();
  const uint32_t base = static_cast<uint32_t>(__cvta_generic_to_shared(tile));
  const int lane = static_cast<int>(threadIdx.x % 32);
  const auto load = [&](int s, uint32_t(&a)[4], uint32_t(&b)[2]) {
    const uint32_t a_at = base + (s & 15) * 1024 + (lane & 15) * 64 + (lane >> 4) * 16;
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                 : "=r"(a[0]), "=r"(a[1]), "=r"(a[2]), "=r"(a[3])
                 : "r"(a_at));
    const uint32_t b_at = base + 512 + (s & 15) * 1024 + (lane & 7) * 64 + ((lane >> 3) & 1) * 16;
    asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];"
                 : "=r"(b[0]), "=r"(b[1])
                 : "r"(b_at));
  };
  float acc[4] = {};
  uint32_t a[2][4], b[2][2];
  load(0, a[0], b[0]);
  const long long start = clock64();
  for (int s = 0; s < kMmaSteps; s += 2) {
    load(s + 1, a[1], b[1]);
    mma_step(acc, a[0], b[0][0], b[0][1]);
    load(s + 2, a[0], b[0]);
    mma_step(acc, a[1], b[1][0], b[1][1]);
  }
  const long long stop = clock64();
  out[threadIdx.x] = acc[0] + acc[1] + acc[2] + acc[3];
  if (threadIdx.x == 0) *cycles = stop - start;
}

enum class WgmmaWaits { kEveryBlock, kOneInFlight, kEightStraight };

template <int kN, WgmmaWaits kWaits>
__global__ void __launch_bounds__(128) wgmma_chain(float* out, long long* cycles) {
  extern __shared__ __align__(1024) uint8_t shared_raw[];
  uint8_t* shared = shared_raw + ((1024 - (reinterpret_cast<uintptr_t>(shared_raw) & 1023)) & 1023);
  for (int i = threadIdx.x; i < 64 * 1024; i += 128)
    shared[i] = static_cast<uint8_t>(i * 7 + 1) & 0x3f;
  __syncthreads();
  const uint8_t* a_band = shared;         // 64 rows x 64 k (8 KiB)
  const uint8_t* b_rows = shared + 8192;  // kN rows x 64 k
  float acc[kN / 2];
#pragma unroll
  for (int r = 0; r < kN / 2; ++r) acc[r] = 0.f;
  const long long start = clock64();
  if constexpr (kWaits == WgmmaWaits::kEightStraight) {
    for (int block = 0; block < kWgmmaBlocks; block += 8) {
#pragma unroll
      for (int j = 0; j < 8; ++j) mma_k_steps<__nv_bfloat16, kN, 4>(acc, a_band, b_rows, false);
      wait_group<0>();
    }
  } else {
    for (int block = 0; block < kWgmmaBlocks; ++block) {
      mma_k_steps<__nv_bfloat16, kN, 4>(acc, a_band, b_rows, false);
      if constexpr (kWaits == WgmmaWaits::kEveryBlock) {
        wait_group<0>();
      } else {
        wait_group<1>();
      }
    }
    wait_group<0>();
  }
  fence_registers(acc);
  const long long stop = clock64();
  float sum = 0.f;
#pragma unroll
  for (int r = 0; r < kN / 2; ++r) sum += acc[r];
  out[threadIdx.x] = sum;
  if (threadIdx.x == 0) *cycles = stop - start;
}

// Runs `launch` twice (the first warms the instruction cache) and returns cycles / steps.
template <typename Launch>
double cycles_per_step(long long* cycles, int steps, Launch&& launch) {
  long long host = 0;
  for (int run = 0; run < 2; ++run) {
    launch();
    check(cudaGetLastError(), "launch");
    check(cudaDeviceSynchronize(), "kernel");
  }
  check(cudaMemcpy(&host, cycles, sizeof host, cudaMemcpyDeviceToHost), "copy");
  return static_cast<double>(host) / steps;
}

template <int kChains>
void run_mma_chains(float* out, long long* cycles) {
  constexpr uint32_t kOperandBits = 0x3c003c00u;  // their values do not matter for the timing
  const double c = cycles_per_step(
      cycles, kMmaSteps, [&] { mma_chains<kChains><<<1, 32>>>(out, cycles, kOperandBits); });
  std::printf("mma.sync m16n8k16, %d chain%s            %6.1f cycles per step of %d\n", kChains,
              kChains == 1 ? " " : "s", c, kChains);
}

template <int kN>
void run_wgmma(float* out, long long* cycles) {
  constexpr int kShared = 64 * 1024 + 1024;
  const auto one = [&](auto waits, const char* name) {
    constexpr WgmmaWaits kWaits = decltype(waits)::value;
    check(cudaFuncSetAttribute(wgmma_chain<kN, kWaits>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               kShared),
          "shared memory");
    const double c = cycles_per_step(cycles, 4 * kWgmmaBlocks, [&] {
      wgmma_chain<kN, kWaits><<<1, 128, kShared>>>(out, cycles);
    });
    std::printf("wgmma m64n%dk16, %-6s  %6.1f cycles per k16 step\n", kN, name, c);
  };
  one(std::integral_constant<WgmmaWaits, WgmmaWaits::kEveryBlock>{}, "wait0");
  one(std::integral_constant<WgmmaWaits, WgmmaWaits::kOneInFlight>{}, "wait1");
  one(std::integral_constant<WgmmaWaits, WgmmaWaits::kEightStraight>{}, "batch8");
}

}  // namespace

int main(int argc, char** argv) {
  const cudaDeviceProp props =
      gemmkit::micro::start_device("gemmkit_chain_latency", argc, argv).props;
  std::printf("%s, one SM, clock64 cycles\n", props.name);
  float* out = nullptr;
  long long* cycles = nullptr;
  check(cudaMalloc(&out, 128 * sizeof(float)), "allocation");
  check(cudaMalloc(&cycles, sizeof(long long)), "allocation");
  run_mma_chains<1>(out, cycles);
  run_mma_chains<2>(out, cycles);
  run_mma_chains<4>(out, cycles);
  run_mma_chains<8>(out, cycles);
  std::printf(
      "mma.sync m16n8k16, 1 chain + ldmatrix  %6.1f cycles per step\n",
      cycles_per_step(cycles, kMmaSteps, [&] { mma_chain_ldmatrix<<<1, 32>>>(out, cycles); }));
  run_wgmma<16>(out, cycles);
  run_wgmma<32>(out, cycles);
  run_wgmma<64>(out, cycles);
  run_wgmma<128>(out, cycles);
  run_wgmma<256>(out, cycles);
  cudaFree(out);
  cudaFree(cycles);
  return 0;
}
