// GEMMKIT_LOG=1: one line per call on stderr naming the backend, the kernel and why.
#pragma once

#include <string>

#include "gemmkit/gemmkit.h"

namespace gemmkit::detail {

bool log_enabled();
void log_call(const char* op, const std::string& problem, const CallInfo& info);

}  // namespace gemmkit::detail
