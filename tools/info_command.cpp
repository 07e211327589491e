// `gemmkit info`: how the library was built and what this machine offers it.
#include <cstdio>
#include <iostream>

#include "bench/peer.h"
#include "tools/commands.h"
#include "tools/suites.h"

namespace gemmkit::cli {

int command_info(const Args& args) {
  const Options options("info", args, {{"suites", true}});
  if (options.help()) {
    std::cout << "usage: gemmkit info [--suites DIR]\n"
                 "  Build information, backends, CUDA devices, benchmark peers and suites.\n";
    return 0;
  }
  const std::string build = build_info();
  std::cout << build;
  if (!build.empty() && build.back() != '\n') std::cout << "\n";
  if (build.find("backends") == std::string::npos)
    std::cout << "backends: cpu" << (built_with_cuda() ? ", cuda" : "") << "\n";

  const auto devices = cuda_devices();
  if (devices.empty()) {
    const std::string reason = cuda_unavailable_reason();
    std::cout << "CUDA devices: none" << (reason.empty() ? "" : " (" + reason + ")") << "\n";
  }
  for (const auto& device : devices) {
    char line[256];
    std::snprintf(
        line, sizeof(line), "CUDA device %s: %s, sm_%d%d, %d SMs, %.1f GiB, L2 %.0f MiB\n",
        device.device.str().c_str(), device.name.c_str(), device.sm_major, device.sm_minor,
        device.multiprocessors, static_cast<double>(device.memory_bytes) / (1 << 30),
        static_cast<double>(device.l2_bytes) / (1 << 20));
    std::cout << line;
  }
  std::cout << "benchmark peers: " << bench::compiled_peers() << "\n";
  try {
    std::cout << "suites: " << locate_suites_dir(options.text("suites", "")) << "\n";
  } catch (const Error& error) {
    std::cout << "suites: not found (" << error.what() << ")\n";
  }
  return 0;
}

}  // namespace gemmkit::cli
