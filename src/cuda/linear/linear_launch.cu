// Launchers of the CUDA linear family and the backend entry point gemmkit::cuda::linear.
// Host code only: choices come from select_linear_config (linear_config.h).
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <array>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>

#include "api/validate.h"
#include "cuda/common/cublaslt.h"
#include "cuda/common/cuda_check.h"
#include "cuda/common/device_context.h"
#include "cuda/common/tensor_map.h"
#include "cuda/cuda_backend.h"
#include "cuda/linear/config_cache.h"
#include "cuda/linear/cublaslt_plans.h"
#include "cuda/linear/linear_config.h"
#include "cuda/linear/reference_kernel.cuh"
#include "cuda/linear/simt_f32_kernel.cuh"
#include "cuda/linear/stream_kernel.cuh"
#include "cuda/linear/tma_ring_kernel.cuh"
#include "cuda/linear/wgmma_fold_kernel.cuh"
#include "cuda/linear/wgmma_kernel.cuh"
#include "cuda/linear/wgmma_swap_kernel.cuh"

namespace gemmkit::cuda {

namespace linear_family {

namespace {

constexpr int kMaxDevices = 64;

const std::string& env_kernel() {
  static const std::string value = [] {
    const char* v = std::getenv("GEMMKIT_LINEAR_KERNEL");
    return std::string(v ? v : "");
  }();
  return value;
}

bool env_pdl() {
  static const bool value = parse_pdl(detail::env_setting("GEMMKIT_LINEAR_PDL"));
  return value;
}

// GEMMKIT_DETERMINISTIC: "" (unset) or "0" off, "1" on.
bool env_deterministic() {
  static const bool value = detail::parse_switch_default_off(
      "linear", "GEMMKIT_DETERMINISTIC", detail::env_setting("GEMMKIT_DETERMINISTIC"));
  return value;
}

// GEMMKIT_LINEAR_BATCH_INVARIANT: "" (unset) or "1" on, "0" off.
bool env_batch_invariant() {
  static const bool value =
      detail::parse_switch("linear", "GEMMKIT_LINEAR_BATCH_INVARIANT",
                           detail::env_setting("GEMMKIT_LINEAR_BATCH_INVARIANT"));
  return value;
}

bool aligned16(const void* p) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0;
}

bool tma_loadable(const Tensor& t) {
  return t.strides[1] == 1 && aligned16(t.data) && (t.strides[0] * 2) % 16 == 0;
}

// ---- shared launch pieces ----------------------------------------------------------------------

// Raises kKernel's dynamic shared-memory limit to `bytes` once per device (one flag per kernel
// instance and device).
template <auto kKernel>
void raise_shared_limit_once(int bytes, int device) {
  static std::array<std::atomic<bool>, kMaxDevices> configured{};
  auto& done = configured[static_cast<std::size_t>(device)];
  if (!done.load(std::memory_order_acquire)) {
    GEMMKIT_CUDA_CHECK(
        cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes));
    done.store(true, std::memory_order_release);
  }
}

// A launch of c.grid_x blocks of c.threads with `bytes` of dynamic shared memory on `stream`, with
// programmatic dependent launch when c.pdl (`attribute` must outlive the launch).
cudaLaunchConfig_t launch_config(const LinearConfig& c, int bytes, cudaStream_t stream,
                                 cudaLaunchAttribute& attribute) {
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(c.grid_x));
  config.blockDim = dim3(static_cast<unsigned>(c.threads));
  config.dynamicSmemBytes = static_cast<std::size_t>(bytes);
  config.stream = stream;
  if (c.pdl) {
    attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute.val.programmaticStreamSerializationAllowed = 1;
    config.attrs = &attribute;
    config.numAttrs = 1;
  }
  return config;
}

// Calls f(Tag<T>{}, Tag<Out>{}) with the 16-bit input type T of p and its output type Out (T, or
// float for f32 out): the instance a launcher takes for a bf16 / f16 call.
template <typename V>
struct Tag {
  using type = V;
};
template <typename F>
void with_16bit_types(const detail::LinearProblem& p, F&& f) {
  const bool f32_out = p.out.dtype == DType::f32;
  if (p.x.dtype == DType::bf16) {
    return f32_out ? f(Tag<__nv_bfloat16>{}, Tag<float>{})
                   : f(Tag<__nv_bfloat16>{}, Tag<__nv_bfloat16>{});
  }
  return f32_out ? f(Tag<__half>{}, Tag<float>{}) : f(Tag<__half>{}, Tag<__half>{});
}

// ---- reference and f32 kernels -----------------------------------------------------------------

template <typename T, typename Out>
void launch_reference(const detail::LinearProblem& p, const LinearConfig& c, cudaStream_t stream) {
  const StridedMatrix<T> x{static_cast<const T*>(p.x.data), p.n, p.k, p.x.strides[0],
                           p.x.strides[1]};
  const StridedMatrix<T> w{static_cast<const T*>(p.w.data), p.m, p.k, p.w.strides[0],
                           p.w.strides[1]};
  const T* bias = p.has_bias ? static_cast<const T*>(p.bias.data) : nullptr;
  linear_reference_kernel<T, Out><<<static_cast<unsigned>(c.grid_x), c.threads, 0, stream>>>(
      x, w, bias, p.has_bias ? p.bias.strides[0] : 0, static_cast<Out*>(p.out.data),
      p.out.strides[0], p.out.strides[1], c.m_tiles, c.tiles);
  GEMMKIT_CUDA_CHECK_LAUNCH();
}

void launch_simt(const detail::LinearProblem& p, const LinearConfig& c, cudaStream_t stream) {
  linear_simt_f32_kernel<float><<<static_cast<unsigned>(c.grid_x), c.threads, 0, stream>>>(
      static_cast<const float*>(p.x.data), p.x.strides[0], p.x.strides[1],
      static_cast<const float*>(p.w.data), p.w.strides[0], p.w.strides[1],
      p.has_bias ? static_cast<const float*>(p.bias.data) : nullptr,
      p.has_bias ? p.bias.strides[0] : 0, static_cast<float*>(p.out.data), p.out.strides[0],
      p.out.strides[1], p.n, p.m, p.k);
  GEMMKIT_CUDA_CHECK_LAUNCH();
}

// ---- TMA ring ----------------------------------------------------------------------------------

// Returns false, launching nothing, when the device cannot co-schedule a cluster of c.cluster
// CTAs (clusters above 8 are non-portable); the caller then plans again with at most 8.
template <typename Out, int kStages, int kMT, int kNT,
          int kBatch = ring_slice_batch(kMT, kNT, kStages), int kConsumers = kRingConsumerWarps>
bool launch_ring_instance(const detail::LinearProblem& p, const LinearConfig& c,
                          cudaStream_t stream, int device) {
  auto kernel = linear_tma_ring_kernel<Out, kStages, kMT, kNT, kBatch, kConsumers>;
  // Raise the dynamic shared-memory limit once per (kernel, device), to the largest size seen.
  static std::array<std::atomic<int64_t>, kMaxDevices> configured{};
  auto& limit = configured[static_cast<std::size_t>(device)];
  if (limit.load(std::memory_order_acquire) < c.shared_bytes) {
    GEMMKIT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(c.shared_bytes)));
    GEMMKIT_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
    limit.store(c.shared_bytes, std::memory_order_release);
  }
  const CUtensorMap w_map =
      tensor_map_2d_16bit(p.w.data, p.m, p.k, p.w.strides[0], 16 * kMT, kRingHalfK);
  const CUtensorMap x_map =
      tensor_map_2d_16bit(p.x.data, p.n, p.k, p.x.strides[0], 8 * kNT, kRingHalfK);
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(c.grid_x));
  config.blockDim = dim3(static_cast<unsigned>(c.threads));  // consumer and producer warps
  config.dynamicSmemBytes = static_cast<std::size_t>(c.shared_bytes);
  config.stream = stream;
  cudaLaunchAttribute attributes[2];
  unsigned count = 0;
  if (c.cluster > 1) {
    attributes[count].id = cudaLaunchAttributeClusterDimension;
    attributes[count].val.clusterDim.x = static_cast<unsigned>(c.cluster);
    attributes[count].val.clusterDim.y = 1;
    attributes[count].val.clusterDim.z = 1;
    ++count;
  }
  if (c.pdl) {
    attributes[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attributes[count].val.programmaticStreamSerializationAllowed = 1;
    ++count;
  }
  config.attrs = attributes;
  config.numAttrs = count;
  if (c.cluster > 8) {
    // Cached per (kernel, device, cluster size): whether such clusters fit at all.
    static std::array<std::array<std::atomic<int>, 17>, kMaxDevices> fits{};
    std::atomic<int>& known =
        fits[static_cast<std::size_t>(device)][static_cast<std::size_t>(c.cluster)];
    if (known.load(std::memory_order_acquire) == 0) {
      int clusters = 0;
      GEMMKIT_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config));
      known.store(clusters > 0 ? 1 : 2, std::memory_order_release);
    }
    if (known.load(std::memory_order_acquire) == 2) return false;
  }
  const __nv_bfloat16* bias = p.has_bias ? static_cast<const __nv_bfloat16*>(p.bias.data) : nullptr;
  GEMMKIT_CUDA_CHECK(cudaLaunchKernelEx(
      &config, kernel, w_map, x_map, bias, p.has_bias ? p.bias.strides[0] : int64_t{0},
      static_cast<Out*>(p.out.data), p.out.strides[0], p.out.strides[1], p.n, p.m, p.k, c.m_tiles,
      c.groups_per_rank, c.async_fold));
  GEMMKIT_CUDA_CHECK_LAUNCH();
  return true;
}

// The 16 x 8 tile with every batch its ring depth allows (ring_batch_allowed) and, from 8 stages,
// eight consumer warps at batch 1; wider tiles with ring_slice_batch's batch only.
template <typename Out, int kStages>
bool launch_ring_t1x1(const detail::LinearProblem& p, const LinearConfig& c, cudaStream_t s,
                      int device) {
  if constexpr (kStages >= kRingMaxConsumerWarps) {
    if (c.consumers == kRingMaxConsumerWarps && c.batch == 1) {
      return launch_ring_instance<Out, kStages, 1, 1, 1, kRingMaxConsumerWarps>(p, c, s, device);
    }
  }
  if (c.consumers != kRingConsumerWarps) {
    throw Error("gemmkit::linear: internal: no ring instance with " + std::to_string(kStages) +
                " stages and " + std::to_string(c.consumers) + " consumer warps");
  }
  if (c.batch == 1) return launch_ring_instance<Out, kStages, 1, 1, 1>(p, c, s, device);
  if constexpr (kStages >= 8) {
    if (c.batch == 2) return launch_ring_instance<Out, kStages, 1, 1, 2>(p, c, s, device);
  }
  if constexpr (kStages >= 16) {
    if (c.batch == 4) return launch_ring_instance<Out, kStages, 1, 1, 4>(p, c, s, device);
  }
  throw Error("gemmkit::linear: internal: no ring instance with " + std::to_string(kStages) +
              " stages and batch " + std::to_string(c.batch));
}

template <typename Out, int kStages>
bool launch_ring_stages(const detail::LinearProblem& p, const LinearConfig& c, cudaStream_t s,
                        int device) {
  if (c.mt == 1 && c.nt == 1) return launch_ring_t1x1<Out, kStages>(p, c, s, device);
  if (c.batch != ring_slice_batch(c.mt, c.nt, kStages) || c.consumers != kRingConsumerWarps) {
    throw Error("gemmkit::linear: internal: no ring instance for tile " + std::to_string(c.mt) +
                "x" + std::to_string(c.nt) + " with batch " + std::to_string(c.batch));
  }
  if (c.mt == 1 && c.nt == 2) return launch_ring_instance<Out, kStages, 1, 2>(p, c, s, device);
  if (c.mt == 1 && c.nt == 4) return launch_ring_instance<Out, kStages, 1, 4>(p, c, s, device);
  if (c.mt == 2 && c.nt == 4) return launch_ring_instance<Out, kStages, 2, 4>(p, c, s, device);
  throw Error("gemmkit::linear: internal: no ring instance for tile " + std::to_string(c.mt) + "x" +
              std::to_string(c.nt));
}

template <typename Out>
bool launch_ring(const detail::LinearProblem& p, const LinearConfig& c, cudaStream_t s,
                 int device) {
  switch (c.stages) {
    case 4:
      return launch_ring_stages<Out, 4>(p, c, s, device);
    case 8:
      return launch_ring_stages<Out, 8>(p, c, s, device);
    case 16:
      return launch_ring_stages<Out, 16>(p, c, s, device);
    default:
      throw Error("gemmkit::linear: internal: no ring instance with " + std::to_string(c.stages) +
                  " stages");
  }
}

// ---- wgmma -------------------------------------------------------------------------------------

// The split (kSplit), unsplit or one-chain wgmma kernel, its shared-memory limit raised once per
// device.
template <typename T, typename Out, int kBN, int kStages, bool kSplit, bool kOneChain = false>
auto wgmma_kernel_for(int device) {
  constexpr auto kernel = linear_wgmma_kernel<T, Out, kBN, kStages, kSplit, kOneChain>;
  constexpr bool kStaging = kOneChain && sizeof(Out) == 2;
  using Layout = WgmmaSharedLayout<kBN, kStages, kStaging>;
  static_assert(Layout::kBytes == 1024 + kStages * (kWgmmaBlockRows + kBN) * 64 * 2 +
                                      (kStaging ? kWgmmaStagingBytesHost : 0) + 2 * kStages * 8,
                "wgmma_shared_bytes_host matches the kernel's layout");
  static_assert(kWgmmaStagingBytesHost == kWgmmaStagingBytes, "the host's staging size");
  static_assert(kWgmmaThreadsHost == kWgmmaThreads, "the host's thread count");
  raise_shared_limit_once<kernel>(Layout::kBytes, device);
  return kernel;
}

// With c.splits > 1: the split kernel writes its group sums to `workspace` (c.workspace_bytes,
// 16-byte aligned) and the fold kernel, next on the stream, writes out.
template <typename T, typename Out, int kBN, int kStages>
void launch_wgmma_instance(const detail::LinearProblem& p, const LinearConfig& c,
                           cudaStream_t stream, int device, void* workspace) {
  static_assert(kWgmmaFoldThreads == 2 * 128, "one fold thread per consumer thread");
  const int64_t layout_bytes = c.one_chain
                                   ? WgmmaSharedLayout<kBN, kStages, sizeof(Out) == 2>::kBytes
                                   : WgmmaSharedLayout<kBN, kStages>::kBytes;
  if (c.shared_bytes != layout_bytes || c.threads != kWgmmaThreads) {
    throw Error(
        "gemmkit::linear: internal: wgmma_config's shared memory or threads differ from "
        "the kernel's");
  }
  // Copies: the per-thread cache may reuse a slot on the next encode.
  const CUtensorMap w_map =
      tensor_map_2d_16bit(p.w.data, p.m, p.k, p.w.strides[0], kWgmmaBlockM, kWgmmaBlockK);
  const CUtensorMap x_map =
      tensor_map_2d_16bit(p.x.data, p.n, p.k, p.x.strides[0], kBN, kWgmmaBlockK);
  // The one-chain form stores 16-bit out by TMA where out's rows are TMA-writable.
  const bool tma_store = c.one_chain && p.out.dtype != DType::f32 && tma_loadable(p.out);
  const CUtensorMap out_map =
      tma_store ? tensor_map_2d_16bit(p.out.data, p.n, p.m, p.out.strides[0], 64, 64) : w_map;
  cudaLaunchAttribute attribute{};
  cudaLaunchConfig_t config = launch_config(c, static_cast<int>(c.shared_bytes), stream, attribute);
  const T* bias = p.has_bias ? static_cast<const T*>(p.bias.data) : nullptr;
  const int64_t bias_stride = p.has_bias ? p.bias.strides[0] : int64_t{0};
  Out* const out = static_cast<Out*>(p.out.data);
  if (c.one_chain) {
    if constexpr (kBN % 64 == 0) {  // 96-wide tiles serve the sliced form only
      GEMMKIT_CUDA_CHECK(cudaLaunchKernelEx(
          &config, wgmma_kernel_for<T, Out, kBN, kStages, false, true>(device), w_map, x_map,
          out_map, tma_store, bias, bias_stride, out, p.out.strides[0], p.out.strides[1], p.n, p.m,
          p.k, c.m_tiles, c.tiles, 0, 1, static_cast<float4*>(nullptr)));
      GEMMKIT_CUDA_CHECK_LAUNCH();
      return;
    }
    throw Error("gemmkit::linear: internal: no one-chain wgmma instance with block_n " +
                std::to_string(kBN));
  }
  if constexpr (kBN <= 128) {  // the sliced form: at most 128 x 128 (three accumulator sets)
    if (c.splits == 1) {
      GEMMKIT_CUDA_CHECK(cudaLaunchKernelEx(
          &config, wgmma_kernel_for<T, Out, kBN, kStages, false>(device), w_map, x_map, w_map,
          false, bias, bias_stride, out, p.out.strides[0], p.out.strides[1], p.n, p.m, p.k,
          c.m_tiles, c.tiles, 0, 1, static_cast<float4*>(nullptr)));
      GEMMKIT_CUDA_CHECK_LAUNCH();
      return;
    }
    auto* const sums = static_cast<float4*>(workspace);
    // The split kernel ignores Out: one instance per input type and tile.
    GEMMKIT_CUDA_CHECK(cudaLaunchKernelEx(
        &config, wgmma_kernel_for<T, float, kBN, kStages, true>(device), w_map, x_map, w_map, false,
        bias, bias_stride, static_cast<float*>(nullptr), int64_t{0}, int64_t{0}, p.n, p.m, p.k,
        c.m_tiles, c.tiles, static_cast<int>(c.split_groups), c.splits, sums));
    GEMMKIT_CUDA_CHECK_LAUNCH();
    const int64_t groups = ceil_div(p.k, kGroupK);
    config.gridDim = dim3(static_cast<unsigned>(c.fold_grid_x));
    config.blockDim = dim3(kWgmmaFoldThreads);
    config.dynamicSmemBytes = 0;
    GEMMKIT_CUDA_CHECK(cudaLaunchKernelEx(
        &config, linear_wgmma_fold_kernel<T, Out, kBN>, static_cast<const float4*>(sums),
        groups - c.split_groups + 1, bias, bias_stride, out, p.out.strides[0], p.out.strides[1],
        p.n, p.m, c.m_tiles, c.tiles));
    GEMMKIT_CUDA_CHECK_LAUNCH();
  }
}

template <typename T, typename Out>
void launch_wgmma_typed(const detail::LinearProblem& p, const LinearConfig& c, cudaStream_t s,
                        int device, void* workspace) {
  if (c.block_n == 64) return launch_wgmma_instance<T, Out, 64, 8>(p, c, s, device, workspace);
  if (c.block_n == 96) return launch_wgmma_instance<T, Out, 96, 7>(p, c, s, device, workspace);
  if (c.block_n == 128) return launch_wgmma_instance<T, Out, 128, 6>(p, c, s, device, workspace);
  if (c.block_n == 256 && c.one_chain) {
    return launch_wgmma_instance<T, Out, 256, 4>(p, c, s, device, workspace);
  }
  throw Error("gemmkit::linear: internal: no wgmma instance with block_n " +
              std::to_string(c.block_n));
}

void launch_wgmma(const detail::LinearProblem& p, const LinearConfig& c, cudaStream_t s, int device,
                  void* workspace) {
  with_16bit_types(p, [&](auto in, auto out) {
    launch_wgmma_typed<typename decltype(in)::type, typename decltype(out)::type>(p, c, s, device,
                                                                                  workspace);
  });
}

// ---- transposed wgmma and streaming kernels (one chain) ----------------------------------------

// A kernel of the one-chain launch signature (w_map, x_map, bias, bias_stride, out, out strides,
// n, m, k, m_tiles, tiles): tensor maps of (w_rows x w_cols) weight and (x_rows x x_cols)
// activation boxes, `bytes` of dynamic shared memory (checked against the config's, which the
// host computed), c's grid, threads and PDL.
template <auto kKernel, typename T, typename Out>
void launch_one_chain_instance(const detail::LinearProblem& p, const LinearConfig& c,
                               cudaStream_t stream, int device, int bytes, int stages, int w_rows,
                               int w_cols, int x_rows, int x_cols) {
  if (c.shared_bytes != bytes || c.stages != stages) {
    throw Error("gemmkit::linear: internal: " + c.name +
                ": the host's shared memory or stages differ from the kernel's");
  }
  raise_shared_limit_once<kKernel>(bytes, device);
  const CUtensorMap w_map =  // a copy: the per-thread cache may reuse the slot on the next encode
      tensor_map_2d_16bit(p.w.data, p.m, p.k, p.w.strides[0], w_rows, w_cols);
  const CUtensorMap& x_map =
      tensor_map_2d_16bit(p.x.data, p.n, p.k, p.x.strides[0], x_rows, x_cols);
  cudaLaunchAttribute attribute{};
  const cudaLaunchConfig_t config = launch_config(c, bytes, stream, attribute);
  const T* bias = p.has_bias ? static_cast<const T*>(p.bias.data) : nullptr;
  GEMMKIT_CUDA_CHECK(cudaLaunchKernelEx(&config, kKernel, w_map, x_map, bias,
                                        p.has_bias ? p.bias.strides[0] : int64_t{0},
                                        static_cast<Out*>(p.out.data), p.out.strides[0],
                                        p.out.strides[1], p.n, p.m, p.k, c.m_tiles, c.tiles));
  GEMMKIT_CUDA_CHECK_LAUNCH();
}

template <typename T, typename Out, int kBW, int kConsumers>
void launch_swap_instance(const detail::LinearProblem& p, const LinearConfig& c, cudaStream_t s,
                          int device) {
  launch_one_chain_instance<linear_wgmma_swap_kernel<T, Out, kBW, kConsumers>, T, Out>(
      p, c, s, device, swap_shared_bytes<kBW>(), swap_stages<kBW>(), kBW, kWgmmaBlockK, kSwapBlockN,
      kWgmmaBlockK);
}

template <typename T, typename Out>
void launch_swap_typed(const detail::LinearProblem& p, const LinearConfig& c, cudaStream_t s,
                       int device) {
  const int w = c.block_n, groups = c.consumers;
  if (w == 32 && groups == 1) return launch_swap_instance<T, Out, 32, 1>(p, c, s, device);
  if (w == 32 && groups == 2) return launch_swap_instance<T, Out, 32, 2>(p, c, s, device);
  if (w == 64 && groups == 1) return launch_swap_instance<T, Out, 64, 1>(p, c, s, device);
  if (w == 64 && groups == 2) return launch_swap_instance<T, Out, 64, 2>(p, c, s, device);
  if (w == 128 && groups == 1) return launch_swap_instance<T, Out, 128, 1>(p, c, s, device);
  if (w == 128 && groups == 2) return launch_swap_instance<T, Out, 128, 2>(p, c, s, device);
  if (w == 256 && groups == 2) return launch_swap_instance<T, Out, 256, 2>(p, c, s, device);
  throw Error("gemmkit::linear: internal: no transposed wgmma instance with " + std::to_string(w) +
              " weight rows on " + std::to_string(groups) + " consumer warpgroups");
}

template <typename T, typename Out, int kConsumers, int kNT,
          int kStages = stream_stages_host(kConsumers, kNT)>
void launch_stream_instance(const detail::LinearProblem& p, const LinearConfig& c, cudaStream_t s,
                            int device) {
  static_assert(kStages > 0, "a ring stage fits");
  launch_one_chain_instance<linear_stream_kernel<T, Out, kConsumers, kNT, kStages>, T, Out>(
      p, c, s, device, stream_shared_bytes<kConsumers, kNT, kStages>(), kStages, 16 * kConsumers,
      kRingHalfK, 8 * kNT, kRingHalfK);
}

template <typename T, typename Out>
void launch_stream_typed(const detail::LinearProblem& p, const LinearConfig& c, cudaStream_t s,
                         int device) {
  constexpr int kLong = kStreamLongStages;
  if (c.stages == kLong) {
    if (c.consumers == 2 && c.nt == 1) {
      return launch_stream_instance<T, Out, 2, 1, kLong>(p, c, s, device);
    }
    if (c.consumers == 2 && c.nt == 2) {
      return launch_stream_instance<T, Out, 2, 2, kLong>(p, c, s, device);
    }
  } else {
    if (c.consumers == 1 && c.nt == 1) return launch_stream_instance<T, Out, 1, 1>(p, c, s, device);
    if (c.consumers == 1 && c.nt == 2) return launch_stream_instance<T, Out, 1, 2>(p, c, s, device);
    if (c.consumers == 2 && c.nt == 1) return launch_stream_instance<T, Out, 2, 1>(p, c, s, device);
    if (c.consumers == 2 && c.nt == 2) return launch_stream_instance<T, Out, 2, 2>(p, c, s, device);
    if (c.consumers == 2 && c.nt == 4) return launch_stream_instance<T, Out, 2, 4>(p, c, s, device);
    if (c.consumers == 2 && c.nt == 8) return launch_stream_instance<T, Out, 2, 8>(p, c, s, device);
    if (c.consumers == 4 && c.nt == 4) return launch_stream_instance<T, Out, 4, 4>(p, c, s, device);
    if (c.consumers == 4 && c.nt == 8) return launch_stream_instance<T, Out, 4, 8>(p, c, s, device);
  }
  throw Error("gemmkit::linear: internal: no streaming instance for tile " +
              std::to_string(c.consumers) + "x" + std::to_string(c.nt) + " with " +
              std::to_string(c.stages) + " stages");
}

// ---- cuBLASLt (n above the family, other GPUs) -------------------------------------------------

// cuBLASLt's scratch (the size the benchmark's cuBLASLt peer uses, so both get the same
// heuristic choice), followed by room for a bias widened to f32 (m up to 4 Mi).
constexpr std::size_t kCublasWorkspaceBytes = std::size_t{32} << 20;
constexpr std::size_t kWidenedBiasBytes = std::size_t{16} << 20;
static_assert(kCublasWorkspaceBytes + kWidenedBiasBytes <= CallScratch::kMaxOwnScratchBytes);
static_assert(kWgmmaSplitWorkspaceBytes <= CallScratch::kMaxOwnScratchBytes);

// The bias of 16-bit type T widened to f32 (cuBLASLt takes the bias in the output type).
template <typename T>
__global__ void widen_bias_kernel(const T* bias, int64_t stride, float* out, int64_t m) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < m;
       i += int64_t{gridDim.x} * blockDim.x) {
    out[i] = static_cast<float>(bias[i * stride]);
  }
}

// True when cuBLASLt can take this layout (unit stride along k and m, bias contiguous).
bool cublas_layout_ok(const detail::LinearProblem& p) {
  return p.x.strides[1] == 1 && p.w.strides[1] == 1 && p.out.strides[1] == 1 &&
         (!p.has_bias || p.bias.strides[0] == 1) && p.x.strides[0] >= p.k &&
         p.w.strides[0] >= p.k && p.out.strides[0] >= p.m;
}

// The cuBLASLt objects of one problem: the matmul descriptor, the layouts of w, x and out, and
// the heuristic's algorithm. Move-only; destroys what it holds.
struct CublasLtPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};

  CublasLtPlan() = default;
  CublasLtPlan(CublasLtPlan&& other) noexcept { swap(other); }
  CublasLtPlan& operator=(CublasLtPlan&& other) noexcept {
    swap(other);  // what this held is released by `other`
    return *this;
  }
  CublasLtPlan(const CublasLtPlan&) = delete;
  CublasLtPlan& operator=(const CublasLtPlan&) = delete;
  ~CublasLtPlan() {
    if (d) cublasLtMatrixLayoutDestroy(d);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
  void swap(CublasLtPlan& other) noexcept {
    std::swap(op, other.op);
    std::swap(a, other.a);
    std::swap(b, other.b);
    std::swap(d, other.d);
    std::swap(algo, other.algo);
  }
};

// Builds the descriptors of `p` (a bias epilogue reading `bias` when p has one) and asks the
// heuristic for an algorithm within `workspace_bytes`. Returns false if none serves.
bool plan_cublaslt(const detail::LinearProblem& p, const void* bias, uint64_t workspace_bytes,
                   cublasLtHandle_t handle, CublasLtPlan& plan) {
  const cudaDataType_t in_type = cublas_data_type(p.x.dtype);
  const cudaDataType_t out_type = cublas_data_type(p.out.dtype);
  GEMMKIT_CUBLASLT_CHECK(cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t transpose = CUBLAS_OP_T, none = CUBLAS_OP_N;
  GEMMKIT_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA,
                                                        &transpose, sizeof(transpose)));
  GEMMKIT_CUBLASLT_CHECK(
      cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &none, sizeof(none)));
  if (p.has_bias) {
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    GEMMKIT_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                          &epilogue, sizeof(epilogue)));
    GEMMKIT_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(
        plan.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  }
  GEMMKIT_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&plan.a, in_type, static_cast<uint64_t>(p.k),
                                                    static_cast<uint64_t>(p.m), p.w.strides[0]));
  GEMMKIT_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&plan.b, in_type, static_cast<uint64_t>(p.k),
                                                    static_cast<uint64_t>(p.n), p.x.strides[0]));
  GEMMKIT_CUBLASLT_CHECK(cublasLtMatrixLayoutCreate(&plan.d, out_type, static_cast<uint64_t>(p.m),
                                                    static_cast<uint64_t>(p.n), p.out.strides[0]));
  cublasLtMatmulPreference_t preference = nullptr;
  GEMMKIT_CUBLASLT_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  struct PreferenceGuard {
    cublasLtMatmulPreference_t preference;
    ~PreferenceGuard() { cublasLtMatmulPreferenceDestroy(preference); }
  } preference_guard{preference};
  GEMMKIT_CUBLASLT_CHECK(
      cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                           &workspace_bytes, sizeof(workspace_bytes)));
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  if (cublasLtMatmulAlgoGetHeuristic(handle, plan.op, plan.a, plan.b, plan.d, plan.d, preference, 1,
                                     &heuristic, &found) != CUBLAS_STATUS_SUCCESS ||
      found == 0) {
    return false;
  }
  plan.algo = heuristic.algo;
  return true;
}

// Row-major out[n, m] = x[n, k] w[m, k]^T is column-major D(m, n) = W^T(m, k) X(k, n), with w and
// x read as column-major (k, m) and (k, n) matrices. Returns false if no algorithm serves it.
// The scratch comes from options.workspace when given (its tail holds the widened bias, the rest
// is cuBLASLt's), else from CallScratch's own sources. The descriptors and the algorithm of a
// recent problem are reused (cublaslt_plans.h): a repeated call sets the bias pointer and runs.
bool run_cublaslt(const detail::LinearProblem& p, const LinearOptions& options, cudaStream_t stream,
                  int device) {
  const cublasLtHandle_t handle = cublaslt_handle(device);
  const bool widen_bias = p.has_bias && p.out.dtype == DType::f32 && p.x.dtype != DType::f32;
  const std::size_t bias_bytes =
      widen_bias ? (static_cast<std::size_t>(p.m) * 4 + 255) / 256 * 256 : 0;
  if (options.workspace == nullptr && bias_bytes > kWidenedBiasBytes) return false;
  const CallScratch scratch(device, stream, kCublasWorkspaceBytes + bias_bytes, options.workspace,
                            options.workspace_bytes);
  if (scratch.bytes() < bias_bytes) {
    throw Error("gemmkit::linear: options.workspace_bytes " +
                std::to_string(options.workspace_bytes) + ": must be at least " +
                std::to_string(bias_bytes) +
                " (the bias widened to f32, 4 * m bytes rounded up to " +
                "256) when n takes the cuBLASLt path with a 16-bit bias and f32 out");
  }
  // cuBLASLt's part, 256-byte aligned, then the widened bias.
  const std::size_t lt_bytes =
      std::min(kCublasWorkspaceBytes, (scratch.bytes() - bias_bytes) / 256 * 256);
  void* const workspace = scratch.data();
  const void* bias = nullptr;
  if (p.has_bias) {
    bias = p.bias.data;
    if (widen_bias) {
      // cuBLASLt wants the bias in the output type: widen it into the workspace's tail.
      float* widened = reinterpret_cast<float*>(static_cast<char*>(workspace) + lt_bytes);
      const auto blocks = static_cast<unsigned>(std::min<int64_t>(ceil_div(p.m, 256), 1024));
      if (p.x.dtype == DType::f16) {
        widen_bias_kernel<<<blocks, 256, 0, stream>>>(static_cast<const __half*>(p.bias.data), 1,
                                                      widened, p.m);
      } else {
        widen_bias_kernel<<<blocks, 256, 0, stream>>>(
            static_cast<const __nv_bfloat16*>(p.bias.data), 1, widened, p.m);
      }
      GEMMKIT_CUDA_CHECK_LAUNCH();
      bias = widened;
    }
  }
  const uint64_t workspace_bytes = lt_bytes;
  const CublasLtPlanKey key = cublaslt_plan_key(p, device, bias, workspace_bytes);
  thread_local CublasLtPlanCache<CublasLtPlan> plans;
  CublasLtPlan* plan = plans.find(key);
  if (plan == nullptr) {
    CublasLtPlan fresh;
    if (!plan_cublaslt(p, bias, workspace_bytes, handle, fresh)) return false;
    plan = &plans.store(key, std::move(fresh));
  } else if (p.has_bias) {
    GEMMKIT_CUBLASLT_CHECK(cublasLtMatmulDescSetAttribute(
        plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  }
  const float alpha = 1.0f, beta = 0.0f;
  GEMMKIT_CUBLASLT_CHECK(cublasLtMatmul(handle, plan->op, &alpha, p.w.data, plan->a, p.x.data,
                                        plan->b, &beta, p.out.data, plan->d, p.out.data, plan->d,
                                        &plan->algo, workspace, workspace_bytes, stream));
  return true;
}

// An empty kernel: its cluster occupancy at the shared memory of one or of two CTAs per SM is the
// clusters the device co-schedules at that many CTAs per SM (LinearDevice::coresident_clusters).
__global__ void cluster_occupancy_probe_kernel() {}

// Asked once per device (the current device: the caller holds a DeviceGuard); zeros where the
// device launches no clusters. A size the device cannot co-schedule at all (above 8 without the
// non-portable opt-in) reads 0, as the launcher's own check finds it.
const CoresidentClusters& coresident_clusters(const DeviceProperties& props) {
  static std::array<std::once_flag, kMaxDevices> once;
  static std::array<CoresidentClusters, kMaxDevices> tables{};
  const auto index = static_cast<std::size_t>(props.ordinal);
  std::call_once(once[index], [&] {
    CoresidentClusters table{};
    if (props.cluster_launch) {
      const auto kernel = cluster_occupancy_probe_kernel;
      GEMMKIT_CUDA_CHECK(
          cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
      GEMMKIT_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                              static_cast<int>(props.shared_per_block_optin)));
      const int64_t bytes[2] = {props.shared_per_block_optin,
                                props.shared_per_multiprocessor / 2 - 1024};
      for (std::size_t per_sm = 0; per_sm < 2; ++per_sm) {
        for (int cluster = 1; cluster <= kRingMaxCluster; ++cluster) {
          cudaLaunchAttribute attribute{};
          attribute.id = cudaLaunchAttributeClusterDimension;
          attribute.val.clusterDim.x = static_cast<unsigned>(cluster);
          attribute.val.clusterDim.y = 1;
          attribute.val.clusterDim.z = 1;
          cudaLaunchConfig_t config{};
          config.gridDim = dim3(static_cast<unsigned>(cluster));
          config.blockDim = dim3(128);
          config.dynamicSmemBytes = static_cast<std::size_t>(bytes[per_sm]);
          config.attrs = &attribute;
          config.numAttrs = 1;
          int clusters = 0;
          if (cluster <= 8) {
            GEMMKIT_CUDA_CHECK(cudaOccupancyMaxActiveClusters(&clusters, kernel, &config));
          } else if (cudaOccupancyMaxActiveClusters(&clusters, kernel, &config) != cudaSuccess) {
            (void)cudaGetLastError();  // not co-schedulable here: left unknown
            clusters = 0;
          }
          table[per_sm][static_cast<std::size_t>(cluster)] = clusters;
        }
      }
    }
    tables[index] = table;
  });
  return tables[index];
}

LinearDevice describe(const DeviceProperties& props, int max_cluster_limit = 16) {
  LinearDevice d;
  d.shared_per_sm = props.shared_per_multiprocessor;
  d.coresident_clusters = coresident_clusters(props);
  d.sm_major = props.sm_major;
  d.sm_minor = props.sm_minor;
  d.multiprocessors = props.multiprocessors;
  d.shared_optin = props.shared_per_block_optin;
  d.cluster_launch = props.cluster_launch;
  d.max_grid_x = props.max_grid_x;
  static const int max_cluster =
      parse_max_cluster(detail::env_setting("GEMMKIT_LINEAR_MAX_CLUSTER"));
  d.max_cluster = std::min(max_cluster, max_cluster_limit);
  static const int producers =
      parse_ring_producers(detail::env_setting("GEMMKIT_LINEAR_PRODUCERS"));
  d.ring_producers = producers;
  static const bool async_fold = parse_ring_async_fold(detail::env_setting("GEMMKIT_LINEAR_FOLD"));
  d.async_fold = async_fold;
  return d;
}

}  // namespace

}  // namespace linear_family

void linear(const detail::LinearProblem& p, const LinearOptions& options, Stream stream,
            CallInfo* info) {
  using namespace linear_family;
  const int device = p.x.device.index;
  if (options.workspace_bytes < 0 ||
      (options.workspace == nullptr) != (options.workspace_bytes == 0)) {
    throw Error("gemmkit::linear: options.workspace_bytes " +
                std::to_string(options.workspace_bytes) +
                ": must be 0 with no options.workspace, and > 0 with one");
  }
  const DeviceProperties& props = device_properties(device);  // a clear Error if it is absent
  DeviceGuard guard(device);
  LinearShape shape;
  shape.n = p.n;
  shape.m = p.m;
  shape.k = p.k;
  shape.in = p.x.dtype;
  shape.out = p.out.dtype;
  shape.has_bias = p.has_bias;
  // Batch-invariant unless switched off (deterministic mode implies it).
  shape.batch_invariant =
      (options.batch_invariant < 0 ? env_batch_invariant() : options.batch_invariant != 0) ||
      (options.deterministic < 0 ? env_deterministic() : options.deterministic != 0);
  shape.tma_compatible = p.k % 8 == 0 && tma_loadable(p.x) && tma_loadable(p.w) &&
                         p.k <= (int64_t{1} << 31) && p.n < (int64_t{1} << 31) &&
                         p.m < (int64_t{1} << 31);
  const std::string& forced = options.kernel.empty() ? env_kernel() : options.kernel;
  const bool pdl = options.pdl < 0 ? env_pdl() : options.pdl != 0;
  // Selection is pure: a repeated shape takes the config chosen before (config_cache.h).
  thread_local LinearConfigCache cache;
  CachedLinearConfig* entry = cache.find(device, shape, forced, pdl);
  if (entry == nullptr) {
    entry = &cache.store(LinearConfigKey{device, shape, forced, pdl},
                         select_linear_config(shape, describe(props), forced, pdl));
  }
  const LinearConfig* config = &entry->config;
  const auto s = reinterpret_cast<cudaStream_t>(stream);
  // The reference kernel, where cuBLASLt refuses this call's layout (built only then).
  std::optional<CachedLinearConfig> refused;
  if (config->path == LinearPath::cublaslt) {
    if (!cublas_layout_ok(p) || !run_cublaslt(p, options, s, device)) {
      if (props.sm_major != 9 || p.x.dtype == DType::f32) {
        throw Error("gemmkit::linear: cuBLASLt has no algorithm for this layout on cuda:" +
                    std::to_string(device) + " and the family is built for sm_90 only");
      }
      refused.emplace();
      LinearConfigCache::set(
          *refused, reference_config(shape, describe(props), "cuBLASLt cannot take this layout"));
      entry = &*refused;
      config = &refused->config;
    }
  }
  // The wgmma k split's workspace (CallScratch: the caller's, the graph's or the device's own),
  // alive until both its kernels are enqueued. A caller's workspace too small (or not 16-byte
  // aligned) for the chosen split takes the most splits that fit it: the same bits.
  std::optional<CallScratch> split_scratch;
  if (config->path == LinearPath::wgmma && config->splits > 1) {
    split_scratch.emplace(device, s, static_cast<std::size_t>(config->workspace_bytes),
                          options.workspace, options.workspace_bytes);
    const auto usable = static_cast<int64_t>(
        (reinterpret_cast<uintptr_t>(split_scratch->data()) & 15u) == 0 ? split_scratch->bytes()
                                                                        : 0);
    if (usable < config->workspace_bytes) {
      if (config->splits_forced) {
        throw Error("gemmkit::linear: options.workspace_bytes " +
                    std::to_string(options.workspace_bytes) + ": the forced kernel " +
                    config->name + " needs a 16-byte aligned workspace of at least " +
                    std::to_string(config->workspace_bytes) +
                    " bytes (its fp32 group sums); pass a larger one, or none");
      }
      LinearConfig fewer =
          wgmma_config(shape, describe(props), config->block_n, config->pdl, 0, usable);
      if (fewer.name.empty()) {
        throw Error("gemmkit::linear: internal: no wgmma configuration without a k split");
      }
      fewer.reason = config->reason + "; k split in " + std::to_string(fewer.splits) +
                     " to fit options.workspace_bytes " + std::to_string(options.workspace_bytes);
      refused.emplace();
      LinearConfigCache::set(*refused, std::move(fewer));
      entry = &*refused;
      config = &refused->config;
    }
  }
  if (info != nullptr) {  // the strings only when someone reads them
    info->backend = "cuda";
    info->kernel = entry->kernel;
    info->reason = config->reason;
  }
  const bool f32_out = p.out.dtype == DType::f32;
  switch (config->path) {
    case LinearPath::cublaslt:
      return;
    case LinearPath::simt_f32:
      return launch_simt(p, *config, s);
    case LinearPath::stream:
      return with_16bit_types(p, [&](auto in, auto out) {
        launch_stream_typed<typename decltype(in)::type, typename decltype(out)::type>(p, *config,
                                                                                       s, device);
      });
    case LinearPath::wgmma_swap:
      return with_16bit_types(p, [&](auto in, auto out) {
        launch_swap_typed<typename decltype(in)::type, typename decltype(out)::type>(p, *config, s,
                                                                                     device);
      });
    case LinearPath::wgmma:
      return launch_wgmma(p, *config, s, device,
                          split_scratch.has_value() ? split_scratch->data() : nullptr);
    case LinearPath::reference:
      return with_16bit_types(p, [&](auto in, auto out) {
        launch_reference<typename decltype(in)::type, typename decltype(out)::type>(p, *config, s);
      });
    case LinearPath::tma_ring: {
      const auto launch = [&](const LinearConfig& c) {
        return f32_out ? launch_ring<float>(p, c, s, device)
                       : launch_ring<__nv_bfloat16>(p, c, s, device);
      };
      if (launch(*config)) return;
      // Clusters above 8 do not fit this device: plan again with at most 8, and keep that plan.
      LinearConfig smaller = select_linear_config(shape, describe(props, 8), forced, config->pdl);
      if (smaller.path != LinearPath::tma_ring || !launch(smaller)) {
        throw Error("gemmkit::linear: internal: no launchable ring configuration");
      }
      LinearConfigCache::set(*entry, std::move(smaller));
      if (info != nullptr) {
        info->kernel = entry->kernel;
        info->reason = entry->config.reason;
      }
      return;
    }
  }
}

}  // namespace gemmkit::cuda
