#include "bench/data.h"

#include <algorithm>
#include <atomic>
#include <thread>

#include "bench/random.h"

namespace gemmkit::bench {

void fill_random_parallel(HostTensor& tensor, uint64_t seed, double scale) {
  const int64_t chunks = random_chunk_count(tensor.numel());
  const int64_t hardware = std::max(1u, std::thread::hardware_concurrency());
  const int64_t thread_count = std::min<int64_t>({hardware, 16, chunks});
  std::atomic<int64_t> next_chunk{0};
  const auto work = [&] {
    for (int64_t chunk = next_chunk++; chunk < chunks; chunk = next_chunk++)
      fill_random_chunk(tensor.data(), tensor.dtype(), tensor.numel(), chunk, seed, scale);
  };
  std::vector<std::thread> threads;
  for (int64_t t = 1; t < thread_count; ++t) threads.emplace_back(work);
  work();
  for (auto& thread : threads) thread.join();
}

std::vector<double> read_elements(const Buffer& buffer, DType dtype,
                                  const std::vector<int64_t>& indices) {
  std::vector<double> values;
  values.reserve(indices.size());
  if (buffer.device().is_cpu()) {
    for (int64_t index : indices) values.push_back(load_as_float(buffer.data(), dtype, index));
    return values;
  }
  // Device buffers: copy all of a modest buffer at once, else element by element (a few
  // thousand small copies beat moving gigabytes).
  constexpr std::size_t kWholeCopyLimit = std::size_t{256} << 20;
  const std::size_t element = dtype_size(dtype);
  if (buffer.bytes() <= kWholeCopyLimit) {
    std::vector<uint8_t> host(buffer.bytes());
    buffer.copy_to_host(host.data(), host.size());
    for (int64_t index : indices) values.push_back(load_as_float(host.data(), dtype, index));
    return values;
  }
  uint8_t scratch[8] = {};
  for (int64_t index : indices) {
    buffer.copy_to_host(scratch, element, static_cast<std::size_t>(index) * element);
    values.push_back(load_as_float(scratch, dtype, 0));
  }
  return values;
}

}  // namespace gemmkit::bench
