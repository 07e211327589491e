// Thin wrappers over the PTX the kernels use: mbarriers, bulk tensor copies (TMA),
// programmatic dependent launch, thread-block-cluster shared memory (sm_90), ldmatrix, streaming
// global loads, the m16n8k16 tensor-core MMA and cp.async. Device code only.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace gemmkit::cuda::ptx {

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// The calling thread's warpgroup (threadIdx.x / 128) as a value the compiler knows to be the same
// across the warp (a shuffle from lane 0), so what is computed from it stays in uniform registers:
// a wgmma matrix descriptor derived from a per-thread warpgroup index takes an R2UR move before
// every MMA instead.
__device__ __forceinline__ int warpgroup_index() {
  return __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x / 128), 0);
}

// ---- mbarrier ----------------------------------------------------------------------------------
__device__ __forceinline__ void mbarrier_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_address(bar)), "r"(count)
               : "memory");
}

// Makes the initialized barriers visible to the async proxy (TMA) and the cluster.
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// The barriers of a TMA ring of `stages` stages, by thread 0 of the block: full[s] completed by
// one producer arrival (with the stage's transaction bytes), empty[s] by `consumers` arrivals;
// then published to the async proxy. The caller synchronizes the block before using them.
__device__ __forceinline__ void init_ring_barriers(uint64_t* full, uint64_t* empty, int stages,
                                                   uint32_t consumers) {
  if (threadIdx.x != 0) return;
  for (int s = 0; s < stages; ++s) {
    mbarrier_init(&full[s], 1);
    mbarrier_init(&empty[s], consumers);
  }
  fence_barrier_init();
}

__device__ __forceinline__ void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_address(bar)),
               "r"(bytes)
               : "memory");
}

__device__ __forceinline__ void mbarrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_address(bar)) : "memory");
}

// An arrival on the mbarrier at shared::cluster address `remote` (cluster_address: this CTA's or
// another's), with the default release semantics at CTA scope: a consumer freeing a stage that
// peers multicast into. (`.release.cluster` put a fence before each arrival: several times slower
// in gemmkit_tma_throughput's clusters, docs/perf.md.)
__device__ __forceinline__ void mbarrier_arrive_cluster(uint32_t remote) {
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}

// Blocks until the phase with the given parity has completed.
__device__ __forceinline__ void mbarrier_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait_loop:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_loop;\n"
      "}\n" ::"r"(smem_address(bar)),
      "r"(parity)
      : "memory");
}

// ---- TMA ---------------------------------------------------------------------------------------
// 2-D tile load global -> shared, completing `bytes` of transaction on `bar`. Coordinates are
// in elements, innermost first; out-of-bounds elements are filled with zeros.
__device__ __forceinline__ void tma_load_2d(void* smem_dst, const CUtensorMap* map, uint64_t* bar,
                                            int32_t inner, int32_t outer) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];" ::"r"(smem_address(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_address(bar)), "r"(inner), "r"(outer)
      : "memory");
}

// tma_load_2d into the same shared-memory offset of every CTA of the cluster in `cta_mask` (bit r:
// rank r), completing the box's bytes on the mbarrier at `bar`'s offset in each of them.
__device__ __forceinline__ void tma_load_2d_multicast(void* smem_dst, const CUtensorMap* map,
                                                      uint64_t* bar, int32_t inner, int32_t outer,
                                                      uint16_t cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      ".multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;" ::"r"(smem_address(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_address(bar)), "r"(inner), "r"(outer),
      "h"(cta_mask)
      : "memory");
}

// 5-D tile load global -> shared (coordinates innermost first), as tma_load_2d.
__device__ __forceinline__ void tma_load_5d(void* smem_dst, const CUtensorMap* map, uint64_t* bar,
                                            int32_t c0, int32_t c1, int32_t c2, int32_t c3,
                                            int32_t c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4, %5, %6, %7}], [%2];" ::"r"(smem_address(smem_dst)),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(smem_address(bar)), "r"(c0), "r"(c1), "r"(c2),
      "r"(c3), "r"(c4)
      : "memory");
}

// Contiguous bytes global -> shared by one bulk copy (no tensor map, no swizzle), completing
// `bytes` of transaction on `bar`: addresses 16-byte aligned, `bytes` a multiple of 16.
__device__ __forceinline__ void bulk_load(void* smem_dst, const void* src, uint32_t bytes,
                                          uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::
          "r"(smem_address(smem_dst)),
      "l"(src), "r"(bytes), "r"(smem_address(bar))
      : "memory");
}

// 2-D tile store shared -> global (inner coordinate first), as tma_store_5d.
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, const void* smem_src,
                                             int32_t inner, int32_t outer) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];" ::"l"(
                   reinterpret_cast<uint64_t>(map)),
               "r"(smem_address(smem_src)), "r"(inner), "r"(outer)
               : "memory");
}
// 5-D tile store shared -> global (coordinates innermost first) into the calling thread's bulk
// async group; elements outside the tensor are not written. The shared source must stay unchanged
// until bulk_wait_group_read covers the group.
__device__ __forceinline__ void tma_store_5d(const CUtensorMap* map, const void* smem_src,
                                             int32_t c0, int32_t c1, int32_t c2, int32_t c3,
                                             int32_t c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5, %6}], [%1];" ::
          "l"(reinterpret_cast<uint64_t>(map)),
      "r"(smem_address(smem_src)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4)
      : "memory");
}
__device__ __forceinline__ void bulk_commit_group() {
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
// Waits until at most kPending of the thread's bulk groups still read their shared source.
template <int kPending>
__device__ __forceinline__ void bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kPending) : "memory");
}
// Waits until every bulk group of the thread has completed (its global writes done).
__device__ __forceinline__ void bulk_wait_group_all() {
  asm volatile("cp.async.bulk.wait_group 0;" ::: "memory");
}
// Orders the generic-proxy shared-memory writes before it ahead of later async-proxy (TMA) reads.
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// ---- Programmatic dependent launch ------------------------------------------------------------
// Waits until the preceding grid in the stream has completed and its memory is visible
// (a no-op when the kernel was not launched as a programmatic dependent).
__device__ __forceinline__ void grid_dependency_wait() {
  asm volatile("griddepcontrol.wait;" ::: "memory");
}
// Lets the next grid in the stream start its prologue.
__device__ __forceinline__ void launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

// ---- Clusters ----------------------------------------------------------------------------------
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}

__device__ __forceinline__ uint32_t cluster_size() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
  return r;
}

// Split cluster barrier: every thread of every CTA arrives (release: its earlier writes become
// visible) and waits (acquire) before arriving again; a thread that must know the others run
// waits; a thread may exit after arriving.
__device__ __forceinline__ void cluster_arrive_release() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
// An arrival that orders no memory, for a phase that only says "this CTA runs" (mbarrier
// initialization is published by fence_barrier_init before it).
__device__ __forceinline__ void cluster_arrive_relaxed() {
  asm volatile("barrier.cluster.arrive.relaxed.aligned;" ::: "memory");
}
__device__ __forceinline__ void cluster_wait_acquire() {
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// The shared::cluster address of `local`'s offset in CTA `rank` of the cluster.
__device__ __forceinline__ uint32_t cluster_address(const void* local, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
               : "=r"(remote)
               : "r"(smem_address(local)), "r"(rank));
  return remote;
}

// Four floats into another CTA's shared memory (a shared::cluster address from cluster_address);
// ordered for the receiver by a later release (e.g. cluster_arrive_release).
__device__ __forceinline__ void store_cluster_v4(uint32_t remote, float4 v) {
  asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};" ::"r"(remote), "f"(v.x),
               "f"(v.y), "f"(v.z), "f"(v.w)
               : "memory");
}

// Four floats into another CTA's shared memory (shared::cluster addresses from cluster_address),
// completing 16 bytes of transaction on that CTA's mbarrier `remote_bar`: the receiver learns of
// the data by waiting on its own barrier, and the sender needs no fence or cluster barrier.
__device__ __forceinline__ void store_cluster_async_v4(uint32_t remote, float4 v,
                                                       uint32_t remote_bar) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.f32 [%0], {%1, %2, %3, %4}, "
      "[%5];" ::"r"(remote),
      "f"(v.x), "f"(v.y), "f"(v.z), "f"(v.w), "r"(remote_bar)
      : "memory");
}

// bar.sync on hardware barrier `id` (1..15; __syncthreads uses 0) for `threads` threads, a
// multiple of 32: a CTA barrier (with its shared-memory ordering) among some of the warps.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// ---- ldmatrix ----------------------------------------------------------------------------------
// Four (two) 8x8 16-bit matrices from shared memory; lane l supplies the 16-byte row address of
// row l % 8 of matrix l / 8, and receives in register j elements (l / 4, 2 (l % 4) .. + 1) of
// matrix j: exactly the mma.m16n8k16 A (B) fragment when the matrices are picked as in
// tma_ring_kernel.cuh.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(address));
}

// The same four matrices transposed: lane l receives in register j elements (2 (l % 4) .. + 1,
// l / 4) of matrix j, i.e. the fragment of the matrix whose rows are the addressed rows' columns.
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t address) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// ---- stmatrix (sm_90) ---------------------------------------------------------------------------
// The inverse of ldmatrix_x4: lane l supplies the 16-byte row address of row l % 8 of matrix
// l / 8; register j holds elements (l / 4, 2 (l % 4) .. + 1) of matrix j.
__device__ __forceinline__ void stmatrix_x4(uint32_t address, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};" ::"r"(address),
               "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

// The same with each 8 x 8 matrix transposed on the way: row r of matrix j in shared memory (at
// the address lane 8 j + r supplies) holds column r of the register fragment.
__device__ __forceinline__ void stmatrix_x4_trans(uint32_t address, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};" ::"r"(address),
               "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

// ---- Global loads ------------------------------------------------------------------------------
// 16 bytes of global memory that nothing writes while the kernel runs, through the non-coherent
// path and not allocated in L1 (data the SM streams once; keeps L1 for the kernel's shared
// memory). Volatile: issued where the kernel places it (software pipelines rely on that).
__device__ __forceinline__ uint4 ld_global_nc_na_v4(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

// Asks L2 for the 128-byte line holding p: no register, nothing to wait for; a hint that a later
// load finds the line in L2 instead of DRAM.
__device__ __forceinline__ void prefetch_l2(const void* p) {
  asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
}

// ---- Tensor-core MMA ----------------------------------------------------------------------------
// d += a * b for one mma.sync m16n8k16 with fp32 accumulators; T (__nv_bfloat16 or __half) is the
// type of the pairs the A fragment (a) and B fragment (b0, b1) registers hold.
template <typename T>
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                             uint32_t b1) {
  static_assert(std::is_same_v<T, __nv_bfloat16> || std::is_same_v<T, __half>, "bf16 or f16");
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// The bf16 mma_m16n8k16 when `run` is true, else nothing (d unchanged): predicated in PTX, so that
// a guarded chain stays straight-line code instead of a branch around each MMA.
__device__ __forceinline__ void mma_m16n8k16_bf16_if(bool run, float (&d)[4],
                                                     const uint32_t (&a)[4], uint32_t b0,
                                                     uint32_t b1) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %10, 0;\n"
      "@p mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n}"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(static_cast<int>(run)));
}

// ---- cp.async -----------------------------------------------------------------------------------
// 16 bytes global -> shared, asynchronous; src_bytes = 0 reads nothing and writes 16 zero bytes.
// .ca keeps the line in L1 (for data neighbouring threads re-read); .cg bypasses L1.
__device__ __forceinline__ void cp_async_ca16(uint32_t dst, const void* src, uint32_t src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
}

__device__ __forceinline__ void cp_async_cg16(uint32_t dst, const void* src, uint32_t src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes)
               : "memory");
}

__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

// Waits until at most `kPending` committed groups of this thread are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

}  // namespace gemmkit::cuda::ptx
