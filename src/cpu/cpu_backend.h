// CPU backend entry points. Called by src/api after validation; synchronous, multi-threaded,
// fp32 accumulation in the deterministic order documented in docs/numerics.md.
#pragma once

#include "common/problems.h"

namespace gemmkit::cpu {

// `info` (nullptr: nobody reads it) receives the kernel and why.
void linear(const detail::LinearProblem& problem, CallInfo* info);
void conv(const detail::ConvProblem& problem, CallInfo& info);

}  // namespace gemmkit::cpu
