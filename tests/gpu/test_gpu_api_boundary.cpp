// The API boundary on CUDA tensors: outputs whose strides interleave (no two indices address one
// element, but the dims sorted by stride do not nest) are written element by element exactly as
// on the CPU, and nothing between their elements is touched. Inputs are multiples of 1/8 so that
// every fp32 sum is exact and the two backends must agree bit for bit.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "gemmkit/gemmkit.h"
#include "gpu/gpu_test_util.h"

namespace gemmkit {
namespace {

std::vector<uint8_t> grid_host(DType dtype, int64_t count, uint64_t seed) {
  std::vector<uint8_t> bytes(static_cast<std::size_t>(count) * dtype_size(dtype));
  for (int64_t i = 0; i < count; ++i) {
    const auto step = static_cast<int>((seed + static_cast<uint64_t>(i) * 2654435761u) % 33u);
    store_from_float(bytes.data(), dtype, i, static_cast<float>(step - 16) / 8.0f);
  }
  return bytes;
}

constexpr float kSentinel = -12345.0f;

TEST(GpuApiBoundary, LinearIntoAnInterleavedOutput) {
  GEMMKIT_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  const int64_t n = 2, m = 5, k = 64;
  const std::vector<int64_t> out_shape{n, m}, out_strides{4, 3};  // offsets 4i + 3j: distinct
  const int64_t out_span = 4 * (n - 1) + 3 * (m - 1) + 1;
  for (const DType dtype : {DType::bf16, DType::f16, DType::f32}) {
    SCOPED_TRACE(dtype_name(dtype));
    std::vector<uint8_t> x = grid_host(dtype, n * k, 1), w = grid_host(dtype, m * k, 2);
    std::vector<float> cpu_out(static_cast<std::size_t>(out_span), kSentinel);
    linear(Tensor::contiguous(x.data(), dtype, Device::cpu(), {n, k}),
           Tensor::contiguous(w.data(), dtype, Device::cpu(), {m, k}), std::nullopt,
           Tensor::strided(cpu_out.data(), DType::f32, Device::cpu(), out_shape, out_strides));

    Buffer gx = testing::upload(x, gpu), gw = testing::upload(w, gpu);
    std::vector<uint8_t> sentinel_bytes(static_cast<std::size_t>(out_span) * 4);
    for (int64_t i = 0; i < out_span; ++i)
      store_from_float(sentinel_bytes.data(), DType::f32, i, kSentinel);
    Buffer gout = testing::upload(sentinel_bytes, gpu);
    linear(Tensor::contiguous(gx.data(), dtype, gpu, {n, k}),
           Tensor::contiguous(gw.data(), dtype, gpu, {m, k}), std::nullopt,
           Tensor::strided(gout.data(), DType::f32, gpu, out_shape, out_strides));
    synchronize(gpu);
    const std::vector<uint8_t> back = testing::download(gout);
    for (int64_t i = 0; i < out_span; ++i) {
      EXPECT_EQ(load_as_float(back.data(), DType::f32, i), cpu_out[static_cast<std::size_t>(i)])
          << "offset " << i;
    }
  }
}

TEST(GpuApiBoundary, ConvIntoAnInterleavedOutput) {
  GEMMKIT_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  // x (1, 6, 2), weight (3, 3, 2) -> out (1, 4, 3) with strides (100, 3, 4): offsets 3i + 4j are
  // distinct for i < 4, j < 3, though the dims sorted by stride do not nest.
  const std::vector<int64_t> out_shape{1, 4, 3}, out_strides{100, 3, 4};
  const int64_t out_span = 3 * 3 + 4 * 2 + 1;
  for (const DType dtype : {DType::bf16, DType::f16, DType::f32}) {
    SCOPED_TRACE(dtype_name(dtype));
    std::vector<uint8_t> x = grid_host(dtype, 12, 3), w = grid_host(dtype, 18, 4);
    std::vector<float> cpu_out(static_cast<std::size_t>(out_span), kSentinel);
    conv(Tensor::contiguous(x.data(), dtype, Device::cpu(), {1, 6, 2}),
         Tensor::contiguous(w.data(), dtype, Device::cpu(), {3, 3, 2}), std::nullopt,
         Tensor::strided(cpu_out.data(), DType::f32, Device::cpu(), out_shape, out_strides), {});

    Buffer gx = testing::upload(x, gpu), gw = testing::upload(w, gpu);
    std::vector<uint8_t> sentinel_bytes(static_cast<std::size_t>(out_span) * 4);
    for (int64_t i = 0; i < out_span; ++i)
      store_from_float(sentinel_bytes.data(), DType::f32, i, kSentinel);
    Buffer gout = testing::upload(sentinel_bytes, gpu);
    conv(Tensor::contiguous(gx.data(), dtype, gpu, {1, 6, 2}),
         Tensor::contiguous(gw.data(), dtype, gpu, {3, 3, 2}), std::nullopt,
         Tensor::strided(gout.data(), DType::f32, gpu, out_shape, out_strides), {});
    synchronize(gpu);
    const std::vector<uint8_t> back = testing::download(gout);
    for (int64_t i = 0; i < out_span; ++i) {
      EXPECT_EQ(load_as_float(back.data(), DType::f32, i), cpu_out[static_cast<std::size_t>(i)])
          << "offset " << i;
    }
  }
}

TEST(GpuApiBoundary, EmptyBatchesLaunchNothing) {
  GEMMKIT_REQUIRE_GPU();
  const Device gpu = Device::cuda(0);
  Buffer w(3 * 4 * 2, gpu);
  CallInfo info;
  LinearOptions options;
  options.info = &info;
  linear(Tensor::contiguous(nullptr, DType::bf16, gpu, {0, 4}),
         Tensor::contiguous(w.data(), DType::bf16, gpu, {3, 4}), std::nullopt,
         Tensor::contiguous(nullptr, DType::f32, gpu, {0, 3}), options);
  EXPECT_EQ(info.kernel, "none (empty batch)");
  ConvOptions conv_options;
  conv_options.info = &info;
  info = {};
  conv(Tensor::contiguous(nullptr, DType::bf16, gpu, {0, 5, 4}),
       Tensor::contiguous(w.data(), DType::bf16, gpu, {1, 3, 4}), std::nullopt,
       Tensor::contiguous(nullptr, DType::bf16, gpu, {0, 3, 1}), {}, conv_options);
  EXPECT_EQ(info.kernel, "none (empty batch)");
  synchronize(gpu);
}

}  // namespace
}  // namespace gemmkit
