// Internals of the CPU backend shared by its sources, plus a few hooks for tests and tools.
// No CUDA here.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gemmkit::cpu {

// ---- Thread pool ---------------------------------------------------------------------------
// One process-wide pool of std::threads, created on first use with GEMMKIT_NUM_THREADS threads
// when that is set to an integer >= 1, else std::thread::hardware_concurrency() (at least 1).
// The calling thread takes part, so a pool of N runs N - 1 helper threads.

// Threads the pool runs with now.
int num_threads();
// Replaces the pool with one of `threads` threads; threads < 1 restores the default (environment
// or hardware). For tests and benchmarks; results never depend on it.
void set_num_threads(int threads);

// Runs body(task) once for every task in [0, tasks), spread over the pool (dynamic scheduling),
// and returns when all have finished. Runs serially on the calling thread when `parallel` is
// false, when tasks < 2, when the pool has one thread, or when another call is already using the
// pool. The first exception thrown by a task is rethrown here (remaining tasks are skipped).
void parallel_for(int64_t tasks, const std::function<void(int64_t)>& body, bool parallel = true);

// Per-thread scratch buffer number `slot` (0..3) of at least `count` floats; reused across calls
// (grown, never shrunk). Valid until the next call with the same slot on the same thread. An
// allocation that fails is a gemmkit::Error saying how many bytes were asked for.
float* thread_scratch(int slot, int64_t count);

// ---- Staging ---------------------------------------------------------------------------------
// The largest fp32 copy of a whole operand the backend makes (1 GiB). An operand is a view: its
// logical size may far exceed its memory (rows that overlap, as in a broadcast), so above this
// the backend converts per task instead of copying the operand once.
constexpr int64_t kMaxStagedFloats = int64_t{1} << 28;

// rows * cols, or -1 when the product overflows int64.
inline int64_t staging_count(int64_t rows, int64_t cols) {
  int64_t count;
  return __builtin_mul_overflow(rows, cols, &count) ? -1 : count;
}
// A zeroed buffer of rows * cols floats for `operand` of `op`; a gemmkit::Error naming both, the
// product and the bytes when the product overflows or the allocation fails.
std::vector<float> staging_buffer(const char* op, const char* operand, int64_t rows, int64_t cols);

// A staging buffer of rows * cols floats for the calling thread, its contents unspecified: up to
// kMaxReusedStagingFloats it is one of the thread's kStagingSlots buffers, kept across calls (a
// repeated call allocates nothing and touches no fresh page), above that a fresh allocation that
// lives as long as the object. One object per slot at a time on a thread.
constexpr int kStagingSlots = 3;
constexpr int64_t kMaxReusedStagingFloats = int64_t{1} << 22;  // 16 MiB per slot and thread
class ReusedStaging {
 public:
  ReusedStaging(int slot, const char* op, const char* operand, int64_t rows, int64_t cols);
  float* data() const { return data_; }

 private:
  std::vector<float> own_;
  float* data_ = nullptr;
};

// ---- Dot-product kernels -------------------------------------------------------------------
// out[r * ldo + c] = S(a + r * lda, b + c * ldb) for r < rows, c < cols, where S sums the
// products a[i] * b[i], i < kpad (kpad a multiple of 8), as 8 lane partial sums (lane t: the
// i = t mod 8, ascending, each lane starting at +0.0f, multiply then add) combined as
// ((l0 + l1) + (l2 + l3)) + ((l4 + l5) + (l6 + l7)). Every variant gives identical bits.
// k is walked in blocks of `kblock` (a multiple of 8; kblock >= kpad: one pass); between blocks
// each element's 8 lanes wait in `lanes`, a caller buffer of rows * cols * 8 floats (may be
// nullptr for one pass). Blocking k changes no operation and no order, only cache behaviour.
using GemmBlockFn = void (*)(const float* a, int64_t lda, int64_t rows, const float* b, int64_t ldb,
                             int64_t cols, int64_t kpad, int64_t kblock, float* out, int64_t ldo,
                             float* lanes);

// Equal k blocks of at most max_block (multiples of 8), or kpad when kpad <= max_block.
inline int64_t balanced_k_block(int64_t kpad, int64_t max_block) {
  if (kpad <= max_block) return kpad;
  const int64_t blocks = (kpad + max_block - 1) / max_block;
  return ((kpad + blocks - 1) / blocks + 7) / 8 * 8;
}
inline int64_t gemm_block_lanes(int64_t rows, int64_t cols, int64_t kpad, int64_t kblock) {
  return kblock >= kpad ? 0 : rows * cols * 8;
}

struct DotKernels {
  const char* name;  // "avx512", "avx2", "generic"
  GemmBlockFn gemm_block;
};

// ---- Instruction sets ------------------------------------------------------------------------
// The kernel variants the build can select at run time. `avx2` needs AVX2, FMA and the OS's
// YMM state (cpuid, xgetbv); `avx512` that and AVX-512 F and VL with the OS's ZMM state;
// `generic` is the build's baseline ISA and always available.
enum class Isa : int { generic = 0, avx2 = 1, avx512 = 2 };
const char* isa_name(Isa isa);
// Whether this CPU, its OS and the build run `isa`.
bool isa_supported(Isa isa);
// The best ISA this CPU and build support.
Isa detected_isa();
// The CPU features detection saw, as "avx2 fma f16c os-ymm ..." (those present) or "none".
std::string detected_features();
// The ISA in use: the test override when set, else GEMMKIT_CPU_ISA (read once;
// auto|avx512|avx2|generic; amx is a name this version rejects): a gemmkit::Error for a
// value outside those or an ISA this CPU lacks.
Isa active_isa();
// A GEMMKIT_CPU_ISA value ("" is auto) as the ISA it selects, or that gemmkit::Error.
Isa parse_isa_setting(const std::string& value);
// Every ISA this machine can run (generic first). For tests.
std::vector<Isa> available_isas();
// Forces an ISA (an Isa value) or restores the setting (-1). For tests and benchmarks.
void set_isa_override(int isa);

// The 8-lane kernels of the active ISA (same bits on every ISA).
const DotKernels& dot_kernels();
// Forces the portable kernels (true) or restores the setting (false). For tests.
void set_generic_kernels(bool generic);

// Register tile of the AVX2 FMA kernel: kFmaRows rows x kFmaPanel columns (12 YMM
// accumulators); the AVX-512 one is in kernels_avx512.cpp.
constexpr int64_t kFmaRows = 6;
constexpr int64_t kFmaPanel = 16;

namespace generic {
void gemm_block(const float* a, int64_t lda, int64_t rows, const float* b, int64_t ldb,
                int64_t cols, int64_t kpad, int64_t kblock, float* out, int64_t ldo, float* lanes);
}
namespace avx2 {
bool compiled();  // this build has the AVX2 variants (x86 with GCC or Clang)
void gemm_block(const float* a, int64_t lda, int64_t rows, const float* b, int64_t ldb,
                int64_t cols, int64_t kpad, int64_t kblock, float* out, int64_t ldo, float* lanes);
// The FMA kernel of the fast linear path (kernels_fma.cpp): for r < rows and c < npanels * 16,
// acc[r * ldacc + c] = fma(a[r * lda + i], panel(c)[i], acc[...]) for i = 0 .. kc-1 ascending,
// starting from +0.0f when `first`, else from the value in acc. `panels` holds npanels panels of
// kc x kFmaPanel floats, panel p element (i, j) at p * panel_ld + i * 16 + j:
// column p * 16 + j's values of b.
void fma_block(const float* a, int64_t lda, int64_t rows, const float* panels, int64_t npanels,
               int64_t panel_ld, int64_t kc, float* acc, int64_t ldacc, bool first);
// One panel from `rows` (<= kFmaPanel) rows of kc contiguous values, row r at src + r * ld
// elements, fp32 or (`bf16`) bf16 widened exactly; rows past `rows` are zeros.
void fma_pack_panel(const void* src, bool bf16, int64_t ld, int64_t rows, int64_t kc, float* panel);
// The same chain for at most 8 x rows (the same bits as fma_block): xt holds k x 8 floats
// (element (i, r) at i * 8 + r: x row r's value i, zeros for missing rows), w `rows` (<= 8) rows
// of k floats at stride ldw; out[j * 8 + r] = the chain of x row r with w row j over i < k,
// from +0.0f when `first`, else continued from the value in out.
void fma_narrow(const float* xt, int64_t k, const float* w, int64_t ldw, int64_t rows, float* out,
                bool first);
// dst[i] = src[i] (bf16) as fp32, exactly, i < len.
void widen_bf16(const uint16_t* src, int64_t len, float* dst);
}  // namespace avx2

namespace avx512 {
bool compiled();  // this build has the AVX-512 variants (x86 with GCC or Clang)
// avx2::fma_block's contract and bits on ZMM registers, with a larger tile.
void fma_block(const float* a, int64_t lda, int64_t rows, const float* panels, int64_t npanels,
               int64_t panel_ld, int64_t kc, float* acc, int64_t ldacc, bool first);
// The 8-lane kernel (GemmBlockFn) with AVX-512 VL's 32 vector registers: a larger tile.
void gemm_block(const float* a, int64_t lda, int64_t rows, const float* b, int64_t ldb,
                int64_t cols, int64_t kpad, int64_t kblock, float* out, int64_t ldo, float* lanes);
}  // namespace avx512

// The FMA path (the `auto` kernels of linear and conv) on one ISA: its block kernel and its
// register tile as the `info` reasons print it. Every ISA that has one gives the same bits: one
// fp32 FMA chain per output element over k ascending.
using FmaBlockFn = void (*)(const float* a, int64_t lda, int64_t rows, const float* panels,
                            int64_t npanels, int64_t panel_ld, int64_t kc, float* acc,
                            int64_t ldacc, bool first);
struct FmaKernels {
  const char* tile;  // "6x16" (avx2), "8x48" (avx512)
  FmaBlockFn block;
};
// The FMA path's kernels on `isa`, or nullptr where the path does not run (generic).
const FmaKernels* fma_kernels(Isa isa);
inline bool fma_path_isa(Isa isa) {
  return fma_kernels(isa) != nullptr;
}

inline int64_t round_up8(int64_t v) {
  return (v + 7) / 8 * 8;
}

}  // namespace gemmkit::cpu
