#include "tools/options.h"

#include <cmath>
#include <cstdlib>

#include "bench/suite.h"

namespace gemmkit::cli {

Options::Options(const std::string& command, const std::vector<std::string>& args,
                 const std::vector<OptionSpec>& specs)
    : command_(command) {
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--help" || arg == "-h") {
      help_ = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0 || arg.size() == 2)
      fail("unexpected argument '" + arg + "' (options start with --)");
    std::string name = arg.substr(2);
    std::string value;
    bool inline_value = false;
    if (const auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inline_value = true;
    }
    const OptionSpec* spec = nullptr;
    for (const auto& candidate : specs)
      if (candidate.name == name) spec = &candidate;
    if (!spec) fail("unknown option '--" + name + "'");
    if (values_.count(name)) fail("option '--" + name + "' given twice");
    if (spec->takes_value && !inline_value) {
      if (i + 1 >= args.size()) fail("option '--" + name + "' needs a value");
      value = args[++i];
    } else if (!spec->takes_value && inline_value) {
      fail("option '--" + name + "' takes no value");
    }
    values_[name] = value;
  }
}

void Options::fail(const std::string& message) const {
  throw UsageError(command_ + ": " + message);
}

std::string Options::text(const std::string& name, const std::string& fallback) const {
  const auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

std::string Options::required(const std::string& name) const {
  if (!has(name)) fail("missing required option '--" + name + "'");
  return values_.at(name);
}

int64_t Options::integer(const std::string& name, int64_t fallback, int64_t min_value) const {
  if (!has(name)) return fallback;
  int64_t value = 0;
  const std::string& field = values_.at(name);
  if (!bench::parse_int64(field, value)) fail("--" + name + " '" + field + "' is not an integer");
  if (value < min_value)
    fail("--" + name + " is " + field + ": must be >= " + std::to_string(min_value));
  return value;
}

int64_t Options::required_integer(const std::string& name, int64_t min_value) const {
  required(name);
  return integer(name, 0, min_value);
}

double Options::number(const std::string& name, double fallback) const {
  if (!has(name)) return fallback;
  const std::string& field = values_.at(name);
  char* end = nullptr;
  const double value = std::strtod(field.c_str(), &end);
  if (field.empty() || *end != '\0' || !std::isfinite(value))
    fail("--" + name + " '" + field + "' is not a number");
  return value;
}

std::vector<int64_t> Options::dims(const std::string& name,
                                   const std::vector<int64_t>& fallback) const {
  if (!has(name)) return fallback;
  std::vector<int64_t> values;
  const std::string& field = values_.at(name);
  if (!bench::parse_int_list(field, values))
    fail("--" + name + " '" + field + "': expected integers separated by 'x' (like 3x3)");
  return values;
}

}  // namespace gemmkit::cli
