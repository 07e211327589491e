#include "tools/suites.h"

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "gemmkit/gemmkit.h"

namespace gemmkit::cli {
namespace fs = std::filesystem;

std::string locate_suites_dir(const std::string& option) {
  const auto is_dir = [](const fs::path& path) {
    std::error_code error;
    return fs::is_directory(path, error);
  };
  // An explicit choice that is wrong is an error, not a reason to look elsewhere.
  if (!option.empty()) {
    if (!is_dir(option)) throw Error("--suites '" + option + "' is not a folder");
    return option;
  }
  if (const char* env = std::getenv("GEMMKIT_SUITES_DIR"); env && *env) {
    if (!is_dir(env)) throw Error("GEMMKIT_SUITES_DIR '" + std::string(env) + "' is not a folder");
    return env;
  }
  std::vector<fs::path> candidates{fs::path("..") / "shared" / "suites"};
#ifdef GEMMKIT_SOURCE_DIR
  candidates.push_back(fs::path(GEMMKIT_SOURCE_DIR) / ".." / "shared" / "suites");
#endif
  std::string tried;
  for (const auto& candidate : candidates) {
    if (is_dir(candidate)) return candidate.lexically_normal().string();
    tried += (tried.empty() ? "" : ", ") + candidate.string();
  }
  throw Error("benchmark suites not found (tried " + tried +
              "): pass --suites DIR or set GEMMKIT_SUITES_DIR");
}

std::string resolve_suite_path(const std::string& path, const std::string& suites_option) {
  std::error_code error;
  if (fs::is_regular_file(path, error)) return path;
  if (fs::path(path).has_parent_path()) throw Error("suite file '" + path + "' not found");
  const fs::path in_suites = fs::path(locate_suites_dir(suites_option)) / path;
  if (fs::is_regular_file(in_suites, error)) return in_suites.string();
  throw Error("suite '" + path + "' not found here nor in " + in_suites.parent_path().string());
}

}  // namespace gemmkit::cli
