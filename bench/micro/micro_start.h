// The start shared by the microbenchmarks of bench/micro/: `[--device I]` parsed, the device set
// and checked (a CUDA device of compute capability 9.x, else a message and exit status 1), and
// check(), which ends the tool with its name, what failed and CUDA's error text. Host code.
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gemmkit::micro {

// The running tool's name for messages (set by start_device).
inline const char*& tool_name() {
  static const char* name = "gemmkit microbenchmark";
  return name;
}

inline void check(cudaError_t status, const char* what) {
  if (status == cudaSuccess) return;
  std::fprintf(stderr, "%s: %s: %s\n", tool_name(), what, cudaGetErrorString(status));
  std::exit(1);
}

struct Device {
  int index = 0;
  cudaDeviceProp props{};
};

// Parses the command line (only `--device I`; exit status 2 on anything else), then sets that
// device; exits with status 1 where there is no CUDA device or it is not an sm_90 one.
inline Device start_device(const char* tool, int argc, char** argv) {
  tool_name() = tool;
  Device device;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--device") == 0 && i + 1 < argc) {
      device.index = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--device I]\n", tool);
      std::exit(2);
    }
  }
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "%s: no CUDA device\n", tool);
    std::exit(1);
  }
  check(cudaSetDevice(device.index), "set device");
  check(cudaGetDeviceProperties(&device.props, device.index), "device properties");
  if (device.props.major != 9) {
    std::fprintf(stderr, "%s: needs sm_90 (device %d is sm_%d%d)\n", tool, device.index,
                 device.props.major, device.props.minor);
    std::exit(1);
  }
  return device;
}

}  // namespace gemmkit::micro
