#include "tools/suites.h"

#include <cstdlib>
#include <filesystem>

#include "gemmkit/gemmkit.h"

namespace gemmkit::cli {
namespace fs = std::filesystem;
namespace {

bool is_dir(const fs::path& path) {
  std::error_code error;
  return fs::is_directory(path, error);
}

// The folder of the running binary ("" when the system does not say: then only the source tree's
// suites are a default).
fs::path binary_dir() {
  std::error_code error;
  const fs::path exe = fs::read_symlink("/proc/self/exe", error);
  return error ? fs::path() : exe.parent_path();
}

}  // namespace

std::vector<std::string> default_suites_dirs() {
  std::vector<std::string> dirs;
  const fs::path bin = binary_dir();
  if (!bin.empty()) {
    dirs.push_back((bin / ".." / "share" / "gemmkit" / "suites").lexically_normal().string());
    dirs.push_back((bin / ".." / "bench" / "suites").lexically_normal().string());
  }
#ifdef GEMMKIT_SOURCE_DIR
  dirs.push_back((fs::path(GEMMKIT_SOURCE_DIR) / "bench" / "suites").lexically_normal().string());
#endif
  return dirs;
}

std::string locate_suites_dir(const std::string& option) {
  // An explicit choice that is wrong is an error, not a reason to look elsewhere.
  if (!option.empty()) {
    if (!is_dir(option)) throw Error("--suites '" + option + "' is not a folder");
    return option;
  }
  if (const char* env = std::getenv("GEMMKIT_SUITES_DIR"); env && *env) {
    if (!is_dir(env)) throw Error("GEMMKIT_SUITES_DIR '" + std::string(env) + "' is not a folder");
    return env;
  }
  std::string tried;
  for (const auto& candidate : default_suites_dirs()) {
    if (is_dir(candidate)) return candidate;
    tried += (tried.empty() ? "" : ", ") + candidate;
  }
  throw Error("benchmark suites not found (tried " + (tried.empty() ? "nothing" : tried) +
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
