// Finding the benchmark suites: the CSV files of bench/suites/, installed as share/gemmkit/suites.
#pragma once

#include <string>
#include <vector>

namespace gemmkit::cli {

// The places the suites folder is looked for when neither --suites nor $GEMMKIT_SUITES_DIR names
// one, in order: share/gemmkit/suites beside the folder of the running binary (an installed CLI,
// <prefix>/bin/gemmkit), bench/suites one folder above the binary (a build folder inside the
// source tree), and bench/suites of the source tree this CLI was built from.
std::vector<std::string> default_suites_dirs();

// The suites folder: `option` (--suites) when given, else $GEMMKIT_SUITES_DIR, else the first of
// default_suites_dirs() that exists. An explicit choice that is not a folder is an error; when no
// default exists, the gemmkit::Error names every place tried.
std::string locate_suites_dir(const std::string& option);

// `path` when it names a file; a bare file name ("linear-decode.csv") is also looked up in the
// suites folder. Throws gemmkit::Error when neither exists.
std::string resolve_suite_path(const std::string& path, const std::string& suites_option);

}  // namespace gemmkit::cli
