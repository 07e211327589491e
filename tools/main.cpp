// gemmkit: command-line front end of the library (info, single problems, benchmark suites).
#include <iostream>
#include <string>

#include "gemmkit/gemmkit.h"
#include "tools/commands.h"

namespace gemmkit::cli {

std::string main_usage() {
  return "usage: gemmkit <command> [options]     (gemmkit <command> --help for its options)\n"
         "commands:\n"
         "  info     build information, backends, CUDA devices, peers, suites\n"
         "  linear   time one linear problem:  --n N --m M --k K [--bias] [--check] ...\n"
         "  conv     time one convolution:     --in 64x64 --c C --o O --kernel 3x3 [--check] ...\n"
         "  bench    run a benchmark suite:    --suite PATH.csv [--json FILE] [--scale F] ...\n"
         "  run      the standard job: FLUX.2 VAE decoder convs and MoE router linears, checked\n";
}

}  // namespace gemmkit::cli

int main(int argc, char** argv) {
  using namespace gemmkit::cli;
  const Args all(argv + 1, argv + argc);
  try {
    if (all.empty()) throw UsageError("no command given");
    const std::string& command = all[0];
    const Args args(all.begin() + 1, all.end());
    if (command == "help" || command == "--help" || command == "-h") {
      std::cout << main_usage();
      return 0;
    }
    if (command == "info") return command_info(args);
    if (command == "linear") return command_linear(args);
    if (command == "conv") return command_conv(args);
    if (command == "bench") return command_bench(args);
    if (command == "run") return command_run(args);
    throw UsageError("unknown command '" + command + "'");
  } catch (const UsageError& error) {
    std::cerr << "gemmkit: usage error: " << error.what() << "\n"
              << "(gemmkit help lists the commands; gemmkit <command> --help gives its options)\n";
    return 2;
  } catch (const std::exception& error) {  // gemmkit::Error and anything else that escaped
    std::cerr << "gemmkit: error: " << error.what() << "\n";
    return 1;
  }
}
