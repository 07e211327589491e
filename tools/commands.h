// The subcommands of the gemmkit CLI. Each takes the arguments after its name and returns the
// exit status; usage mistakes throw UsageError, failures gemmkit::Error.
#pragma once

#include <string>
#include <vector>

#include "bench/harness.h"
#include "tools/options.h"

namespace gemmkit::cli {

using Args = std::vector<std::string>;

int command_info(const Args& args);
int command_linear(const Args& args);
int command_conv(const Args& args);
int command_bench(const Args& args);
int command_run(const Args& args);

std::string main_usage();

// ---- Shared by the commands (common.cpp) ----

// "auto" (or empty): the first CUDA device when one is usable, else the CPU.
Device resolve_device(const std::string& text);

// A dtype option; a bad name is a usage error.
DType dtype_option(const Options& options, const std::string& name, DType fallback);

// Options every timing command accepts.
extern const std::vector<OptionSpec> kTimingOptions;
// --device, --reps, --replays, --seed, --no-cold into settings (check and peers untouched).
bench::BenchSettings settings_from(const Options& options);

// Prints a single problem's result (linear and conv commands) to stdout.
void print_case(const bench::CaseResult& result, const bench::BenchSettings& settings);

}  // namespace gemmkit::cli
