// CPU backend entry points. Called by src/api after validation; synchronous, multi-threaded,
// fp32 accumulation in the deterministic order documented in docs/numerics.md.
#pragma once

#include "common/problems.h"

namespace gemmkit::cpu {

// `info` (nullptr: nobody reads it) receives the kernel and why. `reference`: the kernel option
// was "reference" (the 8-lane order of docs/numerics.md on every ISA); else `auto`, which is the
// FMA order on the avx2 ISA.
void linear(const detail::LinearProblem& problem, bool reference, CallInfo* info);
// `reference`: the algo option was "reference" (the 8-lane order); else `auto`: the FMA chain
// over the same reduction vector on the avx2 ISA.
void conv(const detail::ConvProblem& problem, bool reference, CallInfo& info);

}  // namespace gemmkit::cpu
