// GPU tests of the wgmma kernel of the linear family: its bits equal the reference kernel's (the
// canonical reduction) over tails of n, m and k, bf16 and f16, bias, both output types; rows keep
// their bits at every batch size; repeated runs are identical.
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "gpu/gpu_test_util.h"

namespace gemmkit {
namespace {

using testing::download;
using testing::first_difference;
using testing::random_host;
using testing::upload;

const Device kGpu = Device::cuda(0);

struct WgmmaCase {
  int64_t n, m, k;
  DType in;
  DType out;
  bool bias;
};

std::string describe(const WgmmaCase& c) {
  return "n=" + std::to_string(c.n) + " m=" + std::to_string(c.m) + " k=" + std::to_string(c.k) +
         " " + dtype_name(c.in) + "->" + dtype_name(c.out) + (c.bias ? " bias" : "");
}

struct WgmmaProblem {
  WgmmaCase c;
  Buffer x, w, b, out;

  WgmmaProblem(const WgmmaCase& wc, uint64_t seed) : c(wc) {
    x = upload(random_host(c.in, c.n * c.k, 1.0f, seed), kGpu);
    w = upload(random_host(c.in, c.m * c.k, 1.0f / std::sqrt(float(c.k)), seed + 1), kGpu);
    b = upload(random_host(c.in, c.m, 1.0f, seed + 2), kGpu);
    out = Buffer(static_cast<std::size_t>(c.n * c.m) * dtype_size(c.out), kGpu);
  }

  // Poisons out, runs the first `rows` batch rows with `kernel`, returns the output bytes.
  std::vector<uint8_t> run(const std::string& kernel, int64_t rows, CallInfo* info = nullptr,
                           int deterministic = -1) {
    out.fill_bytes(0xFF);  // NaN in every output type: an unwritten element cannot pass
    LinearOptions options;
    options.kernel = kernel;
    options.info = info;
    options.deterministic = deterministic;
    std::optional<Tensor> bias;
    if (c.bias) bias = Tensor::contiguous(b.data(), c.in, kGpu, {c.m});
    linear(Tensor::contiguous(x.data(), c.in, kGpu, {rows, c.k}),
           Tensor::contiguous(w.data(), c.in, kGpu, {c.m, c.k}), bias,
           Tensor::contiguous(out.data(), c.out, kGpu, {rows, c.m}), options);
    std::vector<uint8_t> bytes = download(out);
    bytes.resize(static_cast<std::size_t>(rows * c.m) * dtype_size(c.out));
    return bytes;
  }
};

TEST(GpuLinearWgmma, MatchesReferenceBitwise) {
  GEMMKIT_REQUIRE_GPU();
  const std::vector<int64_t> ns = {1, 7, 64, 65, 127, 128, 129, 300};
  const std::vector<int64_t> ms = {1, 100, 128, 129, 256, 1000};
  const std::vector<int64_t> ks = {8, 72, 128, 200, 512, 520, 1000, 2880, 4104};
  int checked = 0, index = 0;
  for (int64_t m : ms) {
    for (int64_t k : ks) {
      for (int j = 0; j < 3; ++j) {
        const int64_t n = ns[static_cast<std::size_t>(index * 3 + j) % ns.size()];
        const WgmmaCase c{n,
                          m,
                          k,
                          index % 4 == 3 ? DType::f16 : DType::bf16,
                          index % 3 == 0 ? DType::f32 : (index % 4 == 3 ? DType::f16 : DType::bf16),
                          index % 2 == 0};
        ++index;
        WgmmaProblem problem(c, 500 + static_cast<uint64_t>(index));
        const std::vector<uint8_t> reference = problem.run("reference", n);
        for (const std::string kernel : {"wgmma.n64.s8", "wgmma.n128.s6"}) {
          CallInfo info;
          const std::vector<uint8_t> got = problem.run(kernel, n, &info);
          ASSERT_EQ(info.kernel, "cuda.linear." + kernel);
          const int64_t diff = first_difference(reference, got, c.out);
          ASSERT_EQ(diff, -1) << describe(c) << " " << kernel << " differs from the reference at "
                              << diff << ": " << load_as_float(got.data(), c.out, diff)
                              << " against " << load_as_float(reference.data(), c.out, diff);
          ++checked;
        }
      }
    }
  }
  EXPECT_GE(checked, 300);
}

TEST(GpuLinearWgmma, RowsKeepTheirBitsAtEveryBatch) {
  GEMMKIT_REQUIRE_GPU();
  for (const auto& [m, k] : std::vector<std::pair<int64_t, int64_t>>{{4096, 4096}, {200, 2880}}) {
    const int64_t big = 2048;
    WgmmaProblem problem(WgmmaCase{big, m, k, DType::bf16, DType::f32, true}, 31);
    const std::vector<uint8_t> full = problem.run("wgmma.n128", big);
    for (int64_t n : {int64_t{1}, int64_t{31}, int64_t{64}, int64_t{129}, int64_t{1000}}) {
      for (const std::string kernel : {"wgmma.n64", "wgmma.n128", "reference"}) {
        const std::vector<uint8_t> rows = problem.run(kernel, n);
        ASSERT_EQ(std::memcmp(rows.data(), full.data(), rows.size()), 0)
            << "m=" << m << " k=" << k << ": rows of an n=" << n << " call (" << kernel
            << ") differ from the same rows at n=" << big;
      }
    }
  }
}

// Deterministic mode, auto: a row's bits do not depend on the batch it came in, from n = 1 to
// 16384, over router, decode and dense weights with m and k tails; and they equal the reference
// kernel's (the canonical reduction) for the largest batch's first rows.
TEST(GpuLinearDeterministic, AutoIsBatchInvariantAtEveryBatch) {
  GEMMKIT_REQUIRE_GPU();
  const std::vector<int64_t> ns = {1,  2,   3,   7,   8,   16,  31,   64,
                                   65, 127, 128, 255, 256, 511, 1024, 4096};
  struct Weight {
    int64_t m, k;
    DType in;
  };
  for (const Weight& wt : {Weight{128, 2880, DType::bf16}, Weight{4096, 4096, DType::bf16},
                           Weight{1000, 1032, DType::bf16}, Weight{256, 7168, DType::f16},
                           Weight{5120, 8192, DType::bf16}}) {
    const int64_t big = wt.m * wt.k > (int64_t{1} << 24) ? 4096 : 16384;
    WgmmaProblem problem(WgmmaCase{big, wt.m, wt.k, wt.in, DType::f32, true}, 77);
    CallInfo big_info;
    const std::vector<uint8_t> full = problem.run("", big, &big_info, 1);
    EXPECT_EQ(big_info.kernel.find("cublaslt"), std::string::npos) << big_info.kernel;
    std::map<std::string, int> kernels;
    for (int64_t n : ns) {
      if (n > big) continue;
      CallInfo info;
      const std::vector<uint8_t> rows = problem.run("", n, &info, 1);
      ++kernels[info.kernel];
      ASSERT_EQ(std::memcmp(rows.data(), full.data(), rows.size()), 0)
          << "m=" << wt.m << " k=" << wt.k << ": rows of an n=" << n << " call (" << info.kernel
          << ") differ from the same rows at n=" << big << " (" << big_info.kernel << ")";
    }
    const std::vector<uint8_t> reference = problem.run("reference", 64);
    ASSERT_EQ(std::memcmp(reference.data(), full.data(), reference.size()), 0)
        << "m=" << wt.m << " k=" << wt.k << ": the reference kernel differs";
    std::printf("  m=%lld k=%lld:", static_cast<long long>(wt.m), static_cast<long long>(wt.k));
    for (const auto& [name, count] : kernels) std::printf(" %s x%d", name.c_str(), count);
    std::printf("\n");
  }
}

TEST(GpuLinearWgmma, RepeatedRunsAreBitwiseIdentical) {
  GEMMKIT_REQUIRE_GPU();
  WgmmaProblem problem(WgmmaCase{1024, 1024, 4104, DType::bf16, DType::bf16, true}, 5);
  for (const std::string kernel : {"wgmma.n64", "wgmma.n128"}) {
    const std::vector<uint8_t> first = problem.run(kernel, 1024);
    for (int i = 0; i < 5; ++i) {
      ASSERT_EQ(problem.run(kernel, 1024), first) << kernel << " run " << i;
    }
  }
}

}  // namespace
}  // namespace gemmkit
