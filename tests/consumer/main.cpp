// Uses only the public header: out = x . w^T + bias on the CPU backend, checked by hand.
#include <gemmkit/gemmkit.h>

#include <cstdio>
#include <vector>

int main() {
  std::vector<float> x = {1, 2, 3, 4, 5, 6};  // [2, 3]
  std::vector<float> w = {1, 0, 1, 0, 1, 0};  // [2, 3]
  std::vector<float> bias = {0.5f, -1.0f};
  std::vector<float> out(4, 0.0f);
  using gemmkit::Tensor;
  const gemmkit::Device cpu = gemmkit::Device::cpu();
  gemmkit::linear(Tensor::contiguous(x.data(), gemmkit::DType::f32, cpu, {2, 3}),
                  Tensor::contiguous(w.data(), gemmkit::DType::f32, cpu, {2, 3}),
                  Tensor::contiguous(bias.data(), gemmkit::DType::f32, cpu, {2}),
                  Tensor::contiguous(out.data(), gemmkit::DType::f32, cpu, {2, 2}));
  const std::vector<float> expected = {4.5f, 1.0f, 10.5f, 4.0f};
  if (out != expected) {
    std::printf("consumer: wrong result %g %g %g %g\n", out[0], out[1], out[2], out[3]);
    return 1;
  }
  std::printf("consumer: ok\n");
  return 0;
}
