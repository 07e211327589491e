// Finding the benchmark suites (CSV files, see /work/shared/suites).
#pragma once

#include <string>

namespace gemmkit::cli {

// The suites folder: `option` (--suites) when given, else $GEMMKIT_SUITES_DIR, else
// ../shared/suites from the current directory, else ../shared/suites beside the source tree
// this CLI was built from. Throws gemmkit::Error naming every place tried.
std::string locate_suites_dir(const std::string& option);

// `path` when it names a file; a bare file name ("linear-decode.csv") is also looked up in the
// suites folder. Throws gemmkit::Error when neither exists.
std::string resolve_suite_path(const std::string& path, const std::string& suites_option);

}  // namespace gemmkit::cli
