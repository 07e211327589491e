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
  bool avx512f = false, avx512vl = false, os_zmm = false;
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
    // Bits 5-7: the opmask registers and both halves of the 32 ZMM registers.
    f.os_zmm = f.os_ymm && (lo & 0xE0u) == 0xE0u;
  }
  if (__get_cpuid_max(0, nullptr) >= 7) {
    __cpuid_count(7, 0, eax, ebx, ecx, edx);
    f.avx2 = (ebx >> 5) & 1u;
    f.avx512f = (ebx >> 16) & 1u;
    f.avx512vl = (ebx >> 31) & 1u;
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

// Whether this CPU and OS run `isa` (and the build has its kernels).
bool isa_supported(Isa isa) {
  const Features& f = features();
  switch (isa) {
    case Isa::generic:
      return true;
    case Isa::avx2:
      return avx2::compiled() && f.avx2 && f.fma && f.os_ymm;
    case Isa::avx512:
      return avx512::compiled() && isa_supported(Isa::avx2) && f.avx512f && f.avx512vl && f.os_zmm;
  }
  return false;
}

Isa parse_isa_setting(const std::string& value) {
  if (value.empty() || value == "auto") return detected_isa();
  if (value == "generic") return Isa::generic;
  for (const Isa isa : {Isa::avx2, Isa::avx512}) {
    if (value != isa_name(isa)) continue;
    if (!isa_supported(isa)) {
      detail::fail("cpu", "GEMMKIT_CPU_ISA",
                   "'" + value + "': not supported by this CPU (" +
                       (isa == Isa::avx2 ? std::string("it needs AVX2, FMA and the OS's AVX state")
                                         : std::string("it needs AVX-512 F and VL, AVX2, FMA "
                                                       "and the OS's ZMM state")) +
                       "); this CPU has: " + isa_name(detected_isa()));
    }
    return isa;
  }
  if (value == "amx")
    detail::fail("cpu", "GEMMKIT_CPU_ISA",
                 "'amx': not built in this version (it has auto, avx512, avx2, generic)");
  detail::fail("cpu", "GEMMKIT_CPU_ISA", "'" + value + "': must be auto, avx512, avx2 or generic");
}

const char* isa_name(Isa isa) {
  return isa == Isa::avx512 ? "avx512" : isa == Isa::avx2 ? "avx2" : "generic";
}

Isa detected_isa() {
  if (isa_supported(Isa::avx512)) return Isa::avx512;
  if (isa_supported(Isa::avx2)) return Isa::avx2;
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
  add(f.avx512f, "avx512f");
  add(f.avx512vl, "avx512vl");
  add(f.os_zmm, "os-zmm");
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
  for (const Isa isa : {Isa::avx2, Isa::avx512})
    if (isa_supported(isa)) isas.push_back(isa);
  return isas;
}

}  // namespace gemmkit::cpu
