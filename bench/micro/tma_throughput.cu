// gemmkit_tma_throughput: how many bytes per cycle per SM TMA tile loads deliver into a
// shared-memory ring when nothing else runs, the intake behind the linear and conv kernels' notes
// (docs/perf.md). One producer thread per CTA issues, for each k block, a box of rows_a rows of
// matrix A and one of rows_b rows of matrix B (64 bf16 columns each, 128-byte swizzle, the wgmma
// kernels' boxes) onto one stage of a ring of `stages` stages; one consumer thread frees each stage
// as soon as its bytes have landed, so the ring runs at the copies' pace.
//
// A is 16 MiB (L2-resident after the warm-up run), B 4 GiB (streamed from HBM: each CTA its own
// rows; "L2": wrapping within B's first 16 MiB). A's rows are the same for every CTA ("shared":
// the transposed kernel's activation box, or the conv kernel's weight box, read by every CTA in
// the same k block at once) or differ by CTA, in k blocks out of step ("own"). With a cluster of
// 2, 4 or 8 CTAs, the CTAs of a cluster share A's rows and each loads 1 / cluster of A's box,
// multicast into every CTA of the cluster: a stage is refilled once every CTA of the cluster freed
// it (plain remote mbarrier arrives). Printed per configuration: the best of 5 runs' time, the
// bytes landing per cycle per SM (bytes per CTA over the CTA's clock64 cycles, times CTAs per SM;
// multicast bytes count in every CTA they land in), the aggregate rate of bytes landed and the
// rate of bytes read.
//
// Usage: gemmkit_tma_throughput [--device I]   (sm_90a; one line per configuration)
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "cuda/common/ptx.cuh"
#include "cuda/common/tensor_map.h"
#include "micro_start.h"

namespace {

namespace ptx = gemmkit::cuda::ptx;
using gemmkit::micro::check;

constexpr int kCols = 4096;  // both matrices: 4096 bf16 columns, 64 k blocks of 64
constexpr int kKBlocks = kCols / 64;
constexpr int64_t kRowsA = 2048;    // 16 MiB
constexpr int64_t kRowsB = 524288;  // 4 GiB
constexpr int kBlocksPerCta = 512;

struct Config {
  int rows_a, rows_b, stages, ctas_per_sm;
  bool shared_a;
  int cluster = 1;    // CTAs sharing (and multicasting) A's box
  bool b_l2 = false;  // B's rows wrap within its first 16 MiB (L2-resident) instead of streaming
};

// Thread 0: the producer; thread 32: the consumer. cycles[cta]: the consumer's clock64 span.
__global__ void __launch_bounds__(64, 1)
    tma_stream(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
               int rows_a, int rows_b, int stages, bool shared_a, int cluster, bool b_l2,
               long long* cycles) {
  extern __shared__ __align__(1024) char shared_raw[];
  uint8_t* shared = reinterpret_cast<uint8_t*>(
      shared_raw + ((1024u - (ptx::smem_address(shared_raw) & 1023u)) & 1023u));
  const int stage_bytes = (rows_a + rows_b) * 128;
  uint64_t* full = reinterpret_cast<uint64_t*>(shared + stages * stage_bytes);
  uint64_t* empty = full + stages;
  // empty[s]: one arrival from each CTA of the cluster, which all write into this stage.
  ptx::init_ring_barriers(full, empty, stages, static_cast<uint32_t>(cluster));
  __syncthreads();
  if (cluster > 1) {  // the peers' barriers are initialized before anyone arrives or multicasts
    ptx::cluster_arrive_relaxed();
    ptx::cluster_wait_acquire();
  }
  const int cta = static_cast<int>(blockIdx.x);
  const int rank = cluster > 1 ? static_cast<int>(ptx::cluster_rank()) : 0;
  const int a_slice = rows_a / cluster;  // A's rows this CTA loads (and multicasts)
  if (threadIdx.x == 0) {
    // Own rows of A start where the CTA's (cluster's) index puts them and run out of step in k.
    const int owner = cta / cluster;
    const auto a_row0 =
        static_cast<int32_t>(shared_a ? 0 : (int64_t{owner} * rows_a) % (kRowsA - rows_a + 1));
    const int k_shift = shared_a ? 0 : owner * 7;
    const auto b_row0 = static_cast<int32_t>((int64_t{cta} * rows_b * 8) % kRowsB);
    for (int kb = 0; kb < kBlocksPerCta; ++kb) {
      const int stage = kb % stages;
      ptx::mbarrier_wait(&empty[stage], ((kb / stages) & 1) ^ 1);
      ptx::mbarrier_arrive_expect_tx(&full[stage], static_cast<uint32_t>(stage_bytes));
      const auto k0 = static_cast<int32_t>(((kb + k_shift) % kKBlocks) * 64);
      if (rows_a > 0 && cluster > 1) {
        ptx::tma_load_2d_multicast(shared + stage * stage_bytes + rank * a_slice * 128, &map_a,
                                   &full[stage], k0, a_row0 + rank * a_slice,
                                   static_cast<uint16_t>((1u << cluster) - 1));
      } else if (rows_a > 0) {
        ptx::tma_load_2d(shared + stage * stage_bytes, &map_a, &full[stage], k0, a_row0);
      }
      if (rows_b > 0) {
        // B walks on through its rows: every k block of the CTA reads new bytes.
        const int64_t walk = b_row0 + (kb / kKBlocks) * int64_t{rows_b};
        const auto row = static_cast<int32_t>(b_l2 ? walk % (kRowsA - rows_b + 1) : walk);
        ptx::tma_load_2d(shared + stage * stage_bytes + rows_a * 128, &map_b, &full[stage],
                         static_cast<int32_t>((kb % kKBlocks) * 64), row);
      }
    }
  } else if (threadIdx.x == 32) {
    const long long start = clock64();
    for (int kb = 0; kb < kBlocksPerCta; ++kb) {
      const int stage = kb % stages;
      ptx::mbarrier_wait(&full[stage], (kb / stages) & 1);
      if (cluster == 1) {
        ptx::mbarrier_arrive(&empty[stage]);
      } else {
        for (int r = 0; r < cluster; ++r) {
          ptx::mbarrier_arrive_cluster(
              ptx::cluster_address(&empty[stage], static_cast<uint32_t>(r)));
        }
      }
    }
    cycles[cta] = clock64() - start;
  }
  __syncwarp();
  if (cluster > 1) {  // no CTA leaves while peers may still multicast into it or arrive on it
    ptx::cluster_arrive_release();
    ptx::cluster_wait_acquire();
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int sms =
      gemmkit::micro::start_device("gemmkit_tma_throughput", argc, argv).props.multiProcessorCount;
  void *a = nullptr, *b = nullptr;
  check(cudaMalloc(&a, kRowsA * kCols * 2), "cudaMalloc A");
  check(cudaMalloc(&b, kRowsB * kCols * 2), "cudaMalloc B");
  check(cudaMemset(a, 0x3c, kRowsA * kCols * 2), "cudaMemset A");
  check(cudaMemset(b, 0x3c, kRowsB * kCols * 2), "cudaMemset B");
  long long* cycles = nullptr;
  check(cudaMalloc(&cycles, sizeof(long long) * 2 * sms), "cudaMalloc cycles");
  check(cudaFuncSetAttribute(tma_stream, cudaFuncAttributeMaxDynamicSharedMemorySize, 227 * 1024),
        "max shared memory");
  cudaEvent_t begin, end;
  check(cudaEventCreate(&begin), "event");
  check(cudaEventCreate(&end), "event");

  // (rows of A, rows of B, stages, CTAs per SM, A shared[, cluster, B from L2]): the transposed
  // kernel's stage (64 + 32) by depth, alone and with two CTAs per SM; A own instead of shared;
  // each box alone; the sliced wgmma kernel's 128-row weight box with a 64-row activation box;
  // 256-row boxes. Then the conv implicit GEMM's stages, both boxes from L2: a 128-row weight box
  // (shared: one o tile) beside a 256-row (cooperative tiles) or 128-row activation box, alone
  // and multicast across clusters of 2, 4 and 8; each box alone; A own (a 32 MiB footprint).
  const Config configs[] = {
      {64, 32, 16, 1, true},
      {64, 32, 8, 1, true},
      {64, 32, 4, 1, true},
      {64, 32, 2, 1, true},
      {64, 32, 8, 2, true},
      {64, 32, 16, 1, false},
      {64, 0, 16, 1, true},
      {64, 0, 16, 1, false},
      {0, 32, 16, 1, false},
      {0, 64, 16, 1, false},
      {0, 128, 8, 1, false},
      {128, 64, 8, 1, false},
      {0, 256, 4, 1, false},
      {0, 128, 4, 2, false},
      {256, 0, 4, 1, false},
      {128, 256, 4, 1, true, 1, true},
      {128, 256, 4, 1, true, 2, true},
      {128, 256, 4, 1, true, 4, true},
      {128, 256, 4, 1, true, 8, true},
      {128, 128, 6, 1, true, 1, true},
      {128, 128, 6, 1, true, 2, true},
      {128, 128, 6, 1, true, 8, true},
      {0, 256, 4, 1, false, 1, true},
      {0, 128, 6, 1, false, 1, true},
      {128, 0, 6, 1, true, 1, true},
      {128, 256, 4, 1, false, 1, true},
      {128, 256, 4, 1, false, 4, true},
  };
  for (const Config& c : configs) {
    const int stage_bytes = (c.rows_a + c.rows_b) * 128;
    const int bytes = 1024 + c.stages * stage_bytes + 2 * c.stages * 8;
    // A's box: the rows one CTA loads (its 1 / cluster of the shared box).
    const CUtensorMap map_a = gemmkit::cuda::tensor_map_2d_16bit(
        a, kRowsA, kCols, kCols, std::max(c.rows_a / c.cluster, 8), 64);
    const CUtensorMap map_b =
        gemmkit::cuda::tensor_map_2d_16bit(b, kRowsB, kCols, kCols, std::max(c.rows_b, 8), 64);
    cudaLaunchConfig_t launch = {};
    cudaLaunchAttribute cluster_dims = {};
    cluster_dims.id = cudaLaunchAttributeClusterDimension;
    cluster_dims.val.clusterDim.x = static_cast<unsigned>(c.cluster);
    cluster_dims.val.clusterDim.y = cluster_dims.val.clusterDim.z = 1;
    launch.blockDim = dim3(64, 1, 1);
    launch.dynamicSmemBytes = static_cast<size_t>(bytes);
    launch.attrs = &cluster_dims;
    launch.numAttrs = 1;
    int ctas = sms * c.ctas_per_sm;
    if (c.cluster > 1) {  // as many clusters as fit at once (GPCs may leave SMs over)
      int clusters = 0;
      launch.gridDim = dim3(static_cast<unsigned>(ctas / c.cluster * c.cluster), 1, 1);
      check(cudaOccupancyMaxActiveClusters(&clusters, tma_stream, &launch), "active clusters");
      ctas = std::min(ctas, clusters * c.cluster);
    }
    launch.gridDim = dim3(static_cast<unsigned>(ctas), 1, 1);
    float best_ms = 1e30f;
    long long best_cycles = 0;
    std::vector<long long> host_cycles(static_cast<std::size_t>(ctas));
    for (int run = 0; run < 6; ++run) {  // run 0 warms L2 with A
      check(cudaEventRecord(begin), "record");
      check(cudaLaunchKernelEx(&launch, tma_stream, map_a, map_b, c.rows_a, c.rows_b, c.stages,
                               c.shared_a, c.cluster, c.b_l2, cycles),
            "launch");
      check(cudaEventRecord(end), "record");
      check(cudaEventSynchronize(end), "synchronize");
      float ms = 0.f;
      check(cudaEventElapsedTime(&ms, begin, end), "elapsed");
      check(
          cudaMemcpy(host_cycles.data(), cycles, sizeof(long long) * ctas, cudaMemcpyDeviceToHost),
          "copy cycles");
      long long longest = 0;
      for (int i = 0; i < ctas; ++i) longest = std::max(longest, host_cycles[i]);
      if (run > 0 && ms < best_ms) {
        best_ms = ms;
        best_cycles = longest;
      }
    }
    const double cta_bytes = double(stage_bytes) * kBlocksPerCta;
    const double cta_read = double((c.rows_a / c.cluster + c.rows_b) * 128) * kBlocksPerCta;
    std::printf(
        "A %3d rows %-6s B %3d rows %s %2d stages  %d CTA/SM  cluster %d (%3d CTAs): "
        "%8.1f us  %5.1f B/cycle/SM  %6.2f TB/s landed  %6.2f TB/s read\n",
        c.rows_a, c.rows_a == 0 ? "" : (c.shared_a ? "shared" : "own"), c.rows_b,
        c.b_l2 ? "L2 " : "HBM", c.stages, c.ctas_per_sm, c.cluster, ctas, best_ms * 1e3,
        cta_bytes * c.ctas_per_sm / double(best_cycles), cta_bytes * ctas / (best_ms * 1e-3) / 1e12,
        cta_read * ctas / (best_ms * 1e-3) / 1e12);
  }
  return 0;
}
