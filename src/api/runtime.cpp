// Build description, device discovery and device memory (Buffer), routed to the backends.
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "cpu/cpu_internal.h"
#include "gemmkit/gemmkit.h"
#ifdef GEMMKIT_WITH_CUDA
#include "cuda/cuda_backend.h"
#endif

namespace gemmkit {

bool built_with_cuda() {
#ifdef GEMMKIT_WITH_CUDA
  return true;
#else
  return false;
#endif
}

std::vector<DeviceInfo> cuda_devices() {
#ifdef GEMMKIT_WITH_CUDA
  return cuda::devices();
#else
  return {};
#endif
}

std::string cuda_unavailable_reason() {
#ifdef GEMMKIT_WITH_CUDA
  return cuda::unavailable_reason();
#else
  return "this build of gemmkit has no CUDA backend (nvcc was not found at configure time)";
#endif
}

namespace {
// The CPU kernels' ISA, what detection saw, and the setting (its error when invalid).
std::string cpu_isa_line() {
  std::string line;
  try {
    line = cpu::isa_name(cpu::active_isa());
  } catch (const Error& e) {
    line = std::string("invalid setting (") + e.what() + ")";
  }
  return line + " (detected: " + cpu::isa_name(cpu::detected_isa()) +
         "; CPU features: " + cpu::detected_features() +
         "; GEMMKIT_CPU_ISA=auto|avx512|avx2|generic)";
}
}  // namespace

std::string build_info() {
  std::ostringstream s;
  s << "gemmkit " << GEMMKIT_VERSION << "\n";
  s << "compiler: "
#if defined(__clang__)
    << "clang " << __clang_version__
#elif defined(__GNUC__)
    << "gcc " << __VERSION__
#else
    << "unknown"
#endif
    << ", C++ " << __cplusplus << "\n";
  s << "backends: cpu" << (built_with_cuda() ? ", cuda" : "") << "\n";
  s << "cpu isa: " << cpu_isa_line() << "\n";
#ifdef GEMMKIT_WITH_CUDA
  s << cuda::build_info();
#endif
  return s.str();
}

Buffer::Buffer(std::size_t bytes, Device device) : bytes_(bytes), device_(device) {
  if (bytes == 0) return;
  if (device.is_cpu()) {
    data_ = std::malloc(bytes);
    if (data_ == nullptr) {
      throw Error("Buffer: allocating " + std::to_string(bytes) + " bytes of host memory failed");
    }
    return;
  }
#ifdef GEMMKIT_WITH_CUDA
  data_ = cuda::allocate(bytes, device.index);
#else
  throw Error("Buffer: device " + device.str() + " needs the CUDA backend, absent in this build");
#endif
}

Buffer::~Buffer() {
  if (data_ == nullptr) return;
  if (device_.is_cpu()) {
    std::free(data_);
  } else {
#ifdef GEMMKIT_WITH_CUDA
    cuda::release(data_, device_.index);
#endif
  }
}

Buffer::Buffer(Buffer&& other) noexcept
    : data_(other.data_), bytes_(other.bytes_), device_(other.device_) {
  other.data_ = nullptr;
  other.bytes_ = 0;
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    Buffer old(std::move(*this));
    data_ = other.data_;
    bytes_ = other.bytes_;
    device_ = other.device_;
    other.data_ = nullptr;
    other.bytes_ = 0;
  }
  return *this;
}

namespace {
void check_range(const char* what, std::size_t bytes, std::size_t offset, std::size_t size) {
  if (offset > size || bytes > size - offset) {
    throw Error(std::string("Buffer::") + what + ": range [" + std::to_string(offset) + ", " +
                std::to_string(offset) + " + " + std::to_string(bytes) +
                ") is outside the buffer of " + std::to_string(size) + " bytes");
  }
}
}  // namespace

void Buffer::copy_from_host(const void* src, std::size_t bytes, std::size_t offset) {
  check_range("copy_from_host", bytes, offset, bytes_);
  if (bytes == 0) return;
  char* dst = static_cast<char*>(data_) + offset;
  if (device_.is_cpu()) {
    std::memcpy(dst, src, bytes);
    return;
  }
#ifdef GEMMKIT_WITH_CUDA
  cuda::copy_from_host(dst, src, bytes, device_.index);
#endif
}

void Buffer::copy_to_host(void* dst, std::size_t bytes, std::size_t offset) const {
  check_range("copy_to_host", bytes, offset, bytes_);
  if (bytes == 0) return;
  const char* src = static_cast<const char*>(data_) + offset;
  if (device_.is_cpu()) {
    std::memcpy(dst, src, bytes);
    return;
  }
#ifdef GEMMKIT_WITH_CUDA
  cuda::copy_to_host(dst, src, bytes, device_.index);
#endif
}

void Buffer::fill_bytes(uint8_t value) {
  if (bytes_ == 0) return;
  if (device_.is_cpu()) {
    std::memset(data_, value, bytes_);
    return;
  }
#ifdef GEMMKIT_WITH_CUDA
  cuda::fill_bytes(data_, value, bytes_, device_.index);
#endif
}

void synchronize(Device device) {
  if (device.is_cpu()) return;
#ifdef GEMMKIT_WITH_CUDA
  cuda::synchronize(device.index);
#else
  throw Error("synchronize: device " + device.str() +
              " needs the CUDA backend, absent in this build");
#endif
}

}  // namespace gemmkit
