// Run-time instruction-set detection (cpuid, and xgetbv for the OS-enabled register state) and the
// GEMMKIT_CPU_ISA setting.
#include <atomic>
#include <string>

#include "api/validate.h"
#include "cpu/cpu_internal.h"

#if (defined(__x86_64__) || defined(__i386__)) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define GK_X86 1
#endif

namespace gemmkit::cpu {

namespace {

// Features of this CPU and OS that the kernels can use.
struct Features {
  bool avx2 = false, fma = false, f16c = false, os_ymm = false;
};

Features detect() {
  Features f;
#if defined(GK_X86)
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return f;
  const bool osxsave = (ecx >> 27) & 1u, avx = (ecx >> 28) & 1u;
  f.fma = (ecx >> 12) & 1u;
  f.f16c = (ecx >> 29) & 1u;
  if (osxsave && avx) {
    // XCR0 bits 1 (SSE state) and 2 (AVX state): the OS saves the YMM registers.
    unsigned lo = 0, hi = 0;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0u));
    f.os_ymm = (lo & 0x6u) == 0x6u;
  }
  if (__get_cpuid_max(0, nullptr) >= 7) {
    __cpuid_count(7, 0, eax, ebx, ecx, edx);
    f.avx2 = (ebx >> 5) & 1u;
  }
#endif
  return f;
}

const Features& features() {
  static const Features f = detect();
  return f;
}

// -1: no override (the setting decides), else an Isa value.
std::atomic<int> g_override{-1};

}  // namespace

Isa parse_isa_setting(const std::string& value) {
  const Isa best = detected_isa();
  if (value.empty() || value == "auto") return best;
  if (value == "generic") return Isa::generic;
  if (value == "avx2") {
    if (best != Isa::avx2)
      detail::fail("cpu", "GEMMKIT_CPU_ISA",
                   "'avx2': not supported by this CPU (it needs AVX2, FMA and the OS's AVX "
                   "state); this CPU has: " +
                       std::string(isa_name(best)));
    return Isa::avx2;
  }
  if (value == "avx512" || value == "amx")
    detail::fail("cpu", "GEMMKIT_CPU_ISA",
                 "'" + value + "': not built in this version (it has auto, avx2, generic)");
  detail::fail("cpu", "GEMMKIT_CPU_ISA", "'" + value + "': must be auto, avx2 or generic");
}

const char* isa_name(Isa isa) {
  return isa == Isa::avx2 ? "avx2" : "generic";
}

Isa detected_isa() {
  const Features& f = features();
  if (avx2::compiled() && f.avx2 && f.fma && f.os_ymm) return Isa::avx2;
  return Isa::generic;
}

std::string detected_features() {
  const Features& f = features();
  std::string s;
  auto add = [&](bool on, const char* name) {
    if (on) s += s.empty() ? name : std::string(" ") + name;
  };
  add(f.avx2, "avx2");
  add(f.fma, "fma");
  add(f.f16c, "f16c");
  add(f.os_ymm, "os-ymm");
  return s.empty() ? "none" : s;
}

Isa active_isa() {
  const int forced = g_override.load(std::memory_order_relaxed);
  if (forced >= 0) return static_cast<Isa>(forced);
  static const Isa setting = parse_isa_setting(detail::env_setting("GEMMKIT_CPU_ISA"));
  return setting;
}

void set_isa_override(int isa) {
  g_override.store(isa < 0 ? -1 : isa);
}

std::vector<Isa> available_isas() {
  std::vector<Isa> isas{Isa::generic};
  if (detected_isa() == Isa::avx2) isas.push_back(Isa::avx2);
  return isas;
}

}  // namespace gemmkit::cpu
