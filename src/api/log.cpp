#include "api/log.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gemmkit::detail {

bool log_enabled() {
  static const bool enabled = [] {
    const char* value = std::getenv("GEMMKIT_LOG");
    return value != nullptr && *value != '\0' && std::strcmp(value, "0") != 0;
  }();
  return enabled;
}

void log_call(const char* op, const std::string& problem, const CallInfo& info) {
  std::fprintf(stderr, "[gemmkit] %s %s -> %s %s (%s)\n", op, problem.c_str(), info.backend.c_str(),
               info.kernel.c_str(), info.reason.c_str());
}

}  // namespace gemmkit::detail
