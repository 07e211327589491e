// CUDA backend entry points, as seen by src/api. Plain C++: no CUDA header here, so the API
// layer compiles with any C++ compiler. Implemented in src/cuda/ (built only with nvcc).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/problems.h"

namespace gemmkit::cuda {

std::vector<DeviceInfo> devices();
std::string unavailable_reason();
std::string build_info();

void* allocate(std::size_t bytes, int device);
void release(void* pointer, int device) noexcept;
void copy_from_host(void* device_dst, const void* host_src, std::size_t bytes, int device);
void copy_to_host(void* host_dst, const void* device_src, std::size_t bytes, int device);
void fill_bytes(void* device_dst, uint8_t value, std::size_t bytes, int device);
void synchronize(int device);

// `info` (nullptr: nobody reads it) receives the kernel and why; the strings are built only
// when it is given.
void linear(const detail::LinearProblem& problem, const LinearOptions& options, Stream stream,
            CallInfo* info);
void conv(const detail::ConvProblem& problem, const ConvOptions& options, Stream stream,
          CallInfo& info);

}  // namespace gemmkit::cuda
