// Command-line options of one subcommand: "--name value", "--name=value" and "--flag".
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace gemmkit::cli {

// A mistake in the command line: printed with a hint at the usage, exit status 2.
class UsageError : public std::runtime_error {
 public:
  explicit UsageError(const std::string& message) : std::runtime_error(message) {}
};

struct OptionSpec {
  std::string name;  // without the leading "--"
  bool takes_value;
};

class Options {
 public:
  // Throws UsageError for unknown options, missing values, repeated options and positional
  // arguments. "--help"/"-h" is always accepted (see help()).
  Options(const std::string& command, const std::vector<std::string>& args,
          const std::vector<OptionSpec>& specs);

  bool help() const { return help_; }
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::string text(const std::string& name, const std::string& fallback) const;
  std::string required(const std::string& name) const;
  int64_t integer(const std::string& name, int64_t fallback, int64_t min_value) const;
  int64_t required_integer(const std::string& name, int64_t min_value) const;
  double number(const std::string& name, double fallback) const;
  // 'x'-separated integers ("3x3"); `fallback` when absent.
  std::vector<int64_t> dims(const std::string& name, const std::vector<int64_t>& fallback) const;

 private:
  [[noreturn]] void fail(const std::string& message) const;

  std::string command_;
  std::map<std::string, std::string> values_;  // flags map to ""
  bool help_ = false;
};

}  // namespace gemmkit::cli
