// Device discovery and device memory for the public API (gemmkit::Buffer, cuda_devices()).
#include <sstream>

#include "cuda/common/cuda_check.h"
#include "cuda/common/device_context.h"
#include "cuda/cuda_backend.h"

namespace gemmkit::cuda {

std::vector<DeviceInfo> devices() {
  std::vector<DeviceInfo> result;
  for (int i = 0; i < device_count(); ++i) {
    cudaDeviceProp prop{};
    GEMMKIT_CUDA_CHECK(cudaGetDeviceProperties(&prop, i));
    DeviceInfo info;
    info.device = Device::cuda(i);
    info.name = prop.name;
    info.sm_major = prop.major;
    info.sm_minor = prop.minor;
    info.multiprocessors = prop.multiProcessorCount;
    info.memory_bytes = static_cast<int64_t>(prop.totalGlobalMem);
    info.l2_bytes = prop.l2CacheSize;
    result.push_back(info);
  }
  return result;
}

std::string unavailable_reason() {
  int n = 0;
  const cudaError_t status = cudaGetDeviceCount(&n);
  if (status != cudaSuccess) {
    cudaGetLastError();
    return std::string("no usable CUDA device: cudaGetDeviceCount failed with ") +
           cudaGetErrorName(status) + " (" + cudaGetErrorString(status) + ")";
  }
  if (n == 0) return "no CUDA device present";
  return "";
}

std::string build_info() {
  std::ostringstream s;
  int runtime = 0, driver = 0;
  cudaRuntimeGetVersion(&runtime);
  if (cudaDriverGetVersion(&driver) != cudaSuccess) driver = 0;
  cudaGetLastError();
  s << "cuda: runtime " << runtime / 1000 << "." << (runtime % 1000) / 10 << ", driver "
    << (driver ? std::to_string(driver / 1000) + "." + std::to_string((driver % 1000) / 10)
               : std::string("none"))
    << ", archs " << GEMMKIT_CUDA_ARCHS_STRING << "\n";
#ifdef GEMMKIT_WITH_CUDNN
  s << "cudnn: linked\n";
#else
  s << "cudnn: not built\n";
#endif
  // The names LinearOptions::kernel and GEMMKIT_LINEAR_KERNEL accept (docs/linear.md).
  s << "linear kernels (cuda): auto, reference, "
       "ring{4,8,16}[.t1x1|.t1x2|.t1x4|.t2x4][.w8][.b{1,2,4}][.p{1,4}][.fa|.fb][.c{C}], "
       "wgmma[.n64|.n96|.n128|.n256][.k{N}], wgmma.t{32,64,128,256}[.w1], stream[.t{C}x{N}], "
       "simt_f32, cublaslt\n";
  return s.str();
}

void* allocate(std::size_t bytes, int device) {
  device_properties(device);  // a clear Error for a device that does not exist
  DeviceGuard guard(device);
  void* p = nullptr;
  const cudaError_t status = cudaMalloc(&p, bytes);
  if (status != cudaSuccess) {
    cudaGetLastError();
    throw Error("Buffer: cudaMalloc of " + std::to_string(bytes) + " bytes on cuda:" +
                std::to_string(device) + " failed: " + cudaGetErrorString(status));
  }
  return p;
}

void release(void* pointer, int device) noexcept {
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) return;
  if (previous != device) cudaSetDevice(device);
  cudaFree(pointer);
  if (previous != device) cudaSetDevice(previous);
}

void copy_from_host(void* device_dst, const void* host_src, std::size_t bytes, int device) {
  DeviceGuard guard(device);
  GEMMKIT_CUDA_CHECK(cudaMemcpy(device_dst, host_src, bytes, cudaMemcpyHostToDevice));
}

void copy_to_host(void* host_dst, const void* device_src, std::size_t bytes, int device) {
  DeviceGuard guard(device);
  GEMMKIT_CUDA_CHECK(cudaMemcpy(host_dst, device_src, bytes, cudaMemcpyDeviceToHost));
}

void fill_bytes(void* device_dst, uint8_t value, std::size_t bytes, int device) {
  DeviceGuard guard(device);
  GEMMKIT_CUDA_CHECK(cudaMemset(device_dst, value, bytes));
  GEMMKIT_CUDA_CHECK(cudaDeviceSynchronize());
}

void synchronize(int device) {
  DeviceGuard guard(device);
  GEMMKIT_CUDA_CHECK(cudaDeviceSynchronize());
}

}  // namespace gemmkit::cuda
