// GPU tests of the CUDA linear family: the bitwise contract (every variant equals the reference;
// batch invariance; run-to-run), the reference against the CPU backend, PDL chains in graphs.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "cuda/linear/linear_config.h"
#include "gpu/gpu_test_util.h"
#ifdef GEMMKIT_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace gemmkit {
namespace {

using testing::download;
using testing::first_difference;
using testing::random_host;
using testing::upload;

const Device kGpu = Device::cuda(0);

struct LinearCase {
  int64_t n, m, k;
  bool bias;
  DType out;
};

struct DeviceLinear {
  LinearCase c;
  Buffer x, w, b, out;
  std::vector<uint8_t> x_host, w_host, b_host;

  explicit DeviceLinear(const LinearCase& lc, uint64_t seed) : c(lc) {
    x_host = random_host(DType::bf16, c.n * c.k, 1.0f, seed);
    w_host = random_host(DType::bf16, c.m * c.k, 1.0f / std::sqrt(float(c.k)), seed + 1);
    b_host = random_host(DType::bf16, c.m, 1.0f, seed + 2);
    x = upload(x_host, kGpu);
    w = upload(w_host, kGpu);
    b = upload(b_host, kGpu);
    out = Buffer(static_cast<std::size_t>(c.n * c.m) * dtype_size(c.out), kGpu);
  }

  // Poisons out, runs one call with the given kernel, returns the output bytes.
  std::vector<uint8_t> run(const std::string& kernel, int pdl, CallInfo* info = nullptr,
                           int batch_invariant = -1) {
    out.fill_bytes(0xFF);  // NaN in bf16 and f32: an unwritten element cannot pass
    LinearOptions options;
    options.kernel = kernel;
    options.pdl = pdl;
    options.info = info;
    options.batch_invariant = batch_invariant;
    std::optional<Tensor> bias;
    if (c.bias) bias = Tensor::contiguous(b.data(), DType::bf16, kGpu, {c.m});
    linear(Tensor::contiguous(x.data(), DType::bf16, kGpu, {c.n, c.k}),
           Tensor::contiguous(w.data(), DType::bf16, kGpu, {c.m, c.k}), bias,
           Tensor::contiguous(out.data(), c.out, kGpu, {c.n, c.m}), options);
    return download(out);
  }
};

std::string describe(const LinearCase& c) {
  return "n=" + std::to_string(c.n) + " m=" + std::to_string(c.m) + " k=" + std::to_string(c.k) +
         (c.bias ? " bias" : "") + " out=" + dtype_name(c.out);
}

// Every ring depth at the tile auto takes (16 x 8), with four producer warps (the default) and
// with one, the wider tiles that can be forced (each once, at a different depth), the barrier
// fold of a cluster's group sums (twice), the batches other than each depth's default, eight
// consumer warps (on both depths built, with one producer, with the barrier fold), and auto.
const std::vector<std::string> kFastKernels = {
    "ring4",     "ring8",    "ring16",    "ring4.t1x2",   "ring8.t1x4",   "ring8.t2x4.p1",
    "ring4.p1",  "ring8.p1", "ring16.p1", "ring8.fb",     "ring16.p1.fb", "ring16.b4",
    "ring16.b2", "ring8.b2", "ring8.w8",  "ring16.w8.p1", "ring8.w8.fb",  "auto"};

TEST(GpuLinear, EveryVariantMatchesReferenceBitwise) {
  GEMMKIT_REQUIRE_GPU();
  const std::vector<int64_t> ns = {1, 2, 3, 4, 7, 8, 9, 13, 16, 31, 64, 65, 128};
  const std::vector<int64_t> ms = {1, 17, 32, 100, 128, 256, 2880, 4096};
  const std::vector<int64_t> ks = {8, 72, 720, 1000, 2880, 4104, 7168, 14336};
  int checked = 0, case_index = 0;
  std::map<std::string, int> served;
  for (int64_t m : ms) {
    for (int64_t k : ks) {
      // Every n for the small problems; a rotating three for the big ones (host data cost).
      std::vector<int64_t> these;
      if (m * k <= 1 << 20) {
        these = ns;
      } else {
        for (int j = 0; j < 3; ++j) these.push_back(ns[(case_index * 3 + j) % ns.size()]);
      }
      for (int64_t n : these) {
        const LinearCase c{n, m, k, case_index % 2 == 0,
                           case_index % 3 == 0 ? DType::f32 : DType::bf16};
        ++case_index;
        DeviceLinear problem(c, 1000 + static_cast<uint64_t>(case_index));
        const std::vector<uint8_t> reference = problem.run("reference", 0);
        for (const std::string& kernel : kFastKernels) {
          for (int pdl : {0, 1}) {
            CallInfo info;
            std::vector<uint8_t> got;
            try {
              got = problem.run(kernel, pdl, &info);
            } catch (const Error& e) {
              // A forced ring depth may not fit a shape (shared memory), and a ring cannot
              // produce the one-chain form's bits (m >= 4096); either must be an Error that says
              // so, never a wrong answer.
              const std::string what = e.what();
              const bool refused_form = cuda::linear_family::canonical_one_chain(m) &&
                                        what.find("sliced form") != std::string::npos;
              EXPECT_TRUE(refused_form || what.find("does not fit") != std::string::npos) << what;
              continue;
            }
            const bool ring = info.kernel.rfind("cuda.linear.ring", 0) == 0;
            ++served[ring ? info.kernel.substr(0, info.kernel.rfind(".c")) : info.kernel];
            if (info.kernel == "cuda.linear.cublaslt") {
              // Only where auto may leave the family with batch invariance off (never by default).
              namespace lf = cuda::linear_family;
              EXPECT_TRUE(n > lf::family_max_n(m, k) ||
                          (lf::canonical_one_chain(m) && n > lf::kNonInvariantStreamMaxN &&
                           n < lf::kNonInvariantWgmmaMinN))
                  << describe(c);
              continue;
            }
            const int64_t diff = first_difference(reference, got, c.out);
            ASSERT_EQ(diff, -1) << describe(c) << " kernel " << info.kernel << " pdl " << pdl
                                << " differs from the reference at element " << diff;
            ++checked;
          }
        }
      }
    }
  }
  EXPECT_GT(checked, 1000);
  for (const auto& [name, count] : served) std::printf("  %s: %d calls\n", name.c_str(), count);
}

TEST(GpuLinear, ReferenceMatchesCpuBackend) {
  GEMMKIT_REQUIRE_GPU();
  for (const LinearCase& c :
       {LinearCase{1, 128, 720, true, DType::bf16}, LinearCase{13, 100, 1000, false, DType::f32},
        LinearCase{64, 256, 2880, true, DType::f32}, LinearCase{7, 17, 72, true, DType::bf16},
        LinearCase{3, 4100, 1000, true, DType::f32}}) {  // the one-chain form
    DeviceLinear problem(c, 77);
    const std::vector<uint8_t> gpu = problem.run("reference", 0);
    std::vector<uint8_t> cpu(gpu.size());
    std::optional<Tensor> bias;
    if (c.bias) bias = Tensor::contiguous(problem.b_host.data(), DType::bf16, Device::cpu(), {c.m});
    linear(Tensor::contiguous(problem.x_host.data(), DType::bf16, Device::cpu(), {c.n, c.k}),
           Tensor::contiguous(problem.w_host.data(), DType::bf16, Device::cpu(), {c.m, c.k}), bias,
           Tensor::contiguous(cpu.data(), c.out, Device::cpu(), {c.n, c.m}));
    // Both accumulate in fp32 in different orders: allow fp32 reordering error plus one
    // rounding of the output type, relative to the sum of |products|.
    const double unit = c.out == DType::bf16 ? 1.0 / 256 : 1e-6;
    for (int64_t i = 0; i < c.n; ++i) {
      for (int64_t j = 0; j < c.m; ++j) {
        double scale = c.bias ? std::fabs(load_as_float(problem.b_host.data(), DType::bf16, j)) : 0;
        for (int64_t t = 0; t < c.k; ++t) {
          scale +=
              std::fabs(double(load_as_float(problem.x_host.data(), DType::bf16, i * c.k + t)) *
                        load_as_float(problem.w_host.data(), DType::bf16, j * c.k + t));
        }
        const double a = load_as_float(gpu.data(), c.out, i * c.m + j);
        const double b = load_as_float(cpu.data(), c.out, i * c.m + j);
        ASSERT_LE(std::fabs(a - b), scale * (unit + 1e-5) + 1e-30)
            << describe(c) << " at (" << i << ", " << j << "): gpu " << a << " cpu " << b;
      }
    }
  }
}

TEST(GpuLinear, BatchInvariance) {
  GEMMKIT_REQUIRE_GPU();
  for (const auto& [m, k] :
       std::vector<std::pair<int64_t, int64_t>>{{128, 2880}, {256, 7168}, {32, 720}}) {
    const int64_t max_n = cuda::linear_family::family_max_n(m, k);  // the largest n served
    const LinearCase big{max_n, m, k, true, DType::f32};
    DeviceLinear problem(big, 4242);
    const std::vector<uint8_t> full = problem.run("auto", 1);
    for (int64_t n : {int64_t{1}, int64_t{7}, std::min<int64_t>(64, max_n), max_n}) {
      // The first n rows of x alone.
      Buffer out(static_cast<std::size_t>(n * m) * 4, kGpu);
      out.fill_bytes(0xFF);
      const auto bias =
          std::optional<Tensor>(Tensor::contiguous(problem.b.data(), DType::bf16, kGpu, {m}));
      linear(Tensor::contiguous(problem.x.data(), DType::bf16, kGpu, {n, k}),
             Tensor::contiguous(problem.w.data(), DType::bf16, kGpu, {m, k}), bias,
             Tensor::contiguous(out.data(), DType::f32, kGpu, {n, m}));
      const std::vector<uint8_t> rows = download(out);
      ASSERT_EQ(std::memcmp(rows.data(), full.data(), rows.size()), 0)
          << "m=" << m << " k=" << k << ": rows of an n=" << n
          << " call differ from the same rows at n=" << max_n;
    }
  }
}

TEST(GpuLinear, RepeatedRunsAreBitwiseIdentical) {
  GEMMKIT_REQUIRE_GPU();
  // A weight just below the family's bound at its largest n: 128 ring tiles, one CTA each.
  DeviceLinear problem(LinearCase{8, 2048, 7168, true, DType::bf16}, 9);
  CallInfo info;
  const std::vector<uint8_t> first = problem.run("auto", 1, &info);
  EXPECT_EQ(info.kernel.rfind("cuda.linear.ring", 0), 0u) << info.kernel << " " << info.reason;
  for (int i = 0; i < 20; ++i) ASSERT_EQ(problem.run("auto", 1), first) << "run " << i;
}

// The cluster folds and the ring's refills, repeated: every rank but 0 hands its group sums to
// rank 0 and exits, with st.async onto rank 0's mbarrier (the default) or stores ordered by a
// cluster barrier phase (.fb), and the ranks of a 4-rank cluster on 8 stages refill every stage
// once. A hand-off that is not ordered shows as a rare wrong result (a stage refilled while its
// ldmatrix reads were in flight gave about one call in a thousand with one weight row of the tile
// off), so each shape and kernel runs many times; the failures are counted, with the first
// differing element of each and every differing (batch row, weight row) of the first.
TEST(GpuLinear, ClusterFoldsRepeatBitwise) {
  GEMMKIT_REQUIRE_GPU();
  constexpr int kRepeats = 1000;
  const std::vector<LinearCase> cases = {{31, 128, 7168, true, DType::bf16},
                                         {32, 128, 7168, false, DType::bf16},
                                         {8, 256, 7168, false, DType::f32},
                                         {3, 2880, 2880, true, DType::bf16}};
  for (const LinearCase& c : cases) {
    DeviceLinear problem(c, 31337);
    const std::vector<uint8_t> reference = problem.run("reference", 0);
    const std::size_t size = dtype_size(c.out);
    for (const std::string kernel :
         {"ring8.t1x1.p4.c4", "ring8", "ring8.fb", "ring16.p1.fb", "ring8.w8.fb"}) {
      try {
        problem.run(kernel, 0);
      } catch (const Error& e) {
        // The forced 4-rank cluster where k's groups do not split four ways.
        EXPECT_NE(std::string(e.what()).find("does not split"), std::string::npos) << e.what();
        continue;
      }
      for (int pdl : {0, 1}) {
        CallInfo info;
        int failures = 0;
        std::string where, first;
        for (int r = 0; r < kRepeats; ++r) {
          const std::vector<uint8_t> got = problem.run(kernel, pdl, &info);
          const int64_t diff = first_difference(reference, got, c.out);
          if (diff < 0) continue;
          if (failures++ == 0) {
            for (int64_t e = diff; e < c.n * c.m && first.size() < 300; ++e) {
              if (std::memcmp(&reference[e * size], &got[e * size], size) == 0) continue;
              first += " (" + std::to_string(e / c.m) + "," + std::to_string(e % c.m) + ")";
            }
          }
          if (where.size() < 200) where += " " + std::to_string(r) + "@" + std::to_string(diff);
        }
        EXPECT_EQ(failures, 0) << describe(c) << " kernel " << info.kernel << " pdl " << pdl << ": "
                               << failures << " of " << kRepeats
                               << " runs differ (run@element):" << where
                               << "; the first at (batch row, weight row):" << first;
      }
    }
  }
}

TEST(GpuLinear, UnalignedAndStridedLayoutsKeepTheBits) {
  GEMMKIT_REQUIRE_GPU();
  // k % 8 != 0 and a row stride that is not 16-byte aligned: no TMA, same bits as the reference.
  const int64_t n = 5, m = 100, k = 1003, ld = 1005;
  const auto x_host = random_host(DType::bf16, n * ld, 1.0f, 5);
  const auto w_host = random_host(DType::bf16, m * ld, 0.03f, 6);
  Buffer x = upload(x_host, kGpu), w = upload(w_host, kGpu);
  Buffer out(static_cast<std::size_t>(n * m) * 2, kGpu);
  std::vector<std::vector<uint8_t>> results;
  for (const std::string kernel : {"reference", "auto"}) {
    out.fill_bytes(0xFF);
    LinearOptions options;
    options.kernel = kernel;
    linear(Tensor::strided(x.data(), DType::bf16, kGpu, {n, k}, {ld, 1}),
           Tensor::strided(w.data(), DType::bf16, kGpu, {m, k}, {ld, 1}), std::nullopt,
           Tensor::contiguous(out.data(), DType::bf16, kGpu, {n, m}), options);
    results.push_back(download(out));
  }
  EXPECT_EQ(results[0], results[1]);
}

#ifdef GEMMKIT_WITH_CUDA
// y_{i+1} = linear(y_i, w_i) chained `length` times, eager and as a replayed CUDA graph. The
// calls alternate 8 x 2048 -> 8 x 128 (a cluster of 4 splits k, so the other ranks hand their
// group sums to rank 0 and exit early) and 8 x 128 -> 8 x 2048 (one CTA per tile): each call reads
// what the one before it wrote, with and without a cluster on either side.
void check_chain(int length, int pdl, const std::string& kernel) {
  const int64_t n = 8, wide = 2048, narrow = 128;
  const auto width = [&](int i) { return i % 2 == 0 ? wide : narrow; };  // of activation i
  const auto x_host = random_host(DType::bf16, n * wide, 1.0f, 11);
  // Scales that keep the activations' spread about constant along the chain (sqrt(3 / k)).
  Buffer w_down = upload(random_host(DType::bf16, narrow * wide, 0.038f, 12), kGpu);
  Buffer w_up = upload(random_host(DType::bf16, wide * narrow, 0.15f, 13), kGpu);
  std::vector<Buffer> activations;
  activations.push_back(upload(x_host, kGpu));
  for (int i = 1; i <= length; ++i)
    activations.emplace_back(static_cast<std::size_t>(n * width(i)) * 2, kGpu);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  LinearOptions options;
  options.pdl = pdl;
  options.kernel = kernel;
  const auto call_chain = [&] {
    for (int i = 0; i < length; ++i) {
      const int64_t k = width(i), m = width(i + 1);
      Buffer& w = i % 2 == 0 ? w_down : w_up;
      linear(Tensor::contiguous(activations[i].data(), DType::bf16, kGpu, {n, k}),
             Tensor::contiguous(w.data(), DType::bf16, kGpu, {m, k}), std::nullopt,
             Tensor::contiguous(activations[i + 1].data(), DType::bf16, kGpu, {n, m}), options,
             reinterpret_cast<Stream>(stream));
    }
  };
  call_chain();
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const std::vector<uint8_t> eager = download(activations.back());
  for (int i = 1; i <= length; ++i) activations[i].fill_bytes(0xFF);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  call_chain();
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  for (int replay = 0; replay < 3; ++replay) {
    for (int i = 1; i <= length; ++i) activations[i].fill_bytes(0xFF);
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    ASSERT_EQ(download(activations.back()), eager)
        << "chain of " << length << " pdl " << pdl << " kernel " << kernel << " replay " << replay;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

TEST(GpuLinear, PdlChainsInGraphsEqualEager) {
  GEMMKIT_REQUIRE_GPU();
  // auto (four producer warps, the async fold), one producer warp, the barrier fold, and eight
  // consumer warps; each waits before its activation loads.
  for (const std::string kernel : {"auto", "ring4.p1", "ring4.fb", "ring8.w8"}) {
    for (int length : {2, 8, 64}) {
      check_chain(length, 1, kernel);
      check_chain(length, 0, kernel);
    }
  }
}
#endif

TEST(GpuLinear, LargeBatchWithBatchInvarianceOffGoesToCublasLtAndIsClose) {
  GEMMKIT_REQUIRE_GPU();
  DeviceLinear problem(LinearCase{512, 128, 2880, true, DType::bf16}, 31);  // above the ring
  CallInfo info;
  const auto fast = problem.run("auto", 1, &info, 0);
  EXPECT_EQ(info.kernel, "cuda.linear.cublaslt");
  CallInfo invariant;
  problem.run("auto", 1, &invariant);  // the default: the family (the wgmma kernel)
  EXPECT_EQ(invariant.kernel.find("cublaslt"), std::string::npos) << invariant.kernel;
  const auto reference = problem.run("reference", 0);
  for (int64_t i = 0; i < 512 * 128; ++i) {
    const float a = load_as_float(fast.data(), DType::bf16, i);
    const float b = load_as_float(reference.data(), DType::bf16, i);
    ASSERT_NEAR(a, b, 0.02f * (1.0f + std::fabs(b))) << "element " << i;
  }
}

// cuBLASLt takes the bias in the output type: a 16-bit bias with f32 out is widened first, and
// each input dtype must be widened as itself (an f16 bias read as bf16 gave wrong sums).
TEST(GpuLinear, CublasLtWidensEachBiasDtypeForF32Out) {
  GEMMKIT_REQUIRE_GPU();
  const int64_t n = 512, m = 128, k = 256;
  for (DType dtype : {DType::bf16, DType::f16}) {
    const auto x_host = random_host(dtype, n * k, 1.0f, 91);
    const auto w_host = random_host(dtype, m * k, 1.0f / 16, 92);
    const auto b_host = random_host(dtype, m, 4.0f, 93);
    Buffer x = upload(x_host, kGpu), w = upload(w_host, kGpu), b = upload(b_host, kGpu);
    Buffer out(static_cast<std::size_t>(n * m) * 4, kGpu);
    out.fill_bytes(0xFF);
    CallInfo info;
    LinearOptions options;
    options.info = &info;
    options.kernel = "cublaslt";
    linear(Tensor::contiguous(x.data(), dtype, kGpu, {n, k}),
           Tensor::contiguous(w.data(), dtype, kGpu, {m, k}),
           Tensor::contiguous(b.data(), dtype, kGpu, {m}),
           Tensor::contiguous(out.data(), DType::f32, kGpu, {n, m}), options);
    EXPECT_EQ(info.kernel, "cuda.linear.cublaslt") << dtype_name(dtype);
    const std::vector<uint8_t> gpu = download(out);
    std::vector<float> cpu(static_cast<std::size_t>(n * m));
    linear(Tensor::contiguous(const_cast<uint8_t*>(x_host.data()), dtype, Device::cpu(), {n, k}),
           Tensor::contiguous(const_cast<uint8_t*>(w_host.data()), dtype, Device::cpu(), {m, k}),
           Tensor::contiguous(const_cast<uint8_t*>(b_host.data()), dtype, Device::cpu(), {m}),
           Tensor::contiguous(cpu.data(), DType::f32, Device::cpu(), {n, m}));
    for (int64_t i = 0; i < n * m; ++i) {
      const float a = load_as_float(gpu.data(), DType::f32, i);
      ASSERT_NEAR(a, cpu[static_cast<std::size_t>(i)], 1e-3f * (1.0f + std::fabs(a)))
          << dtype_name(dtype) << " element " << i;
    }
  }
}

}  // namespace
}  // namespace gemmkit

namespace gemmkit {
namespace {

// Small shapes through every variant: the test scripts/device.sh runs under compute-sanitizer
// (memcheck, racecheck, synccheck), where big shapes would take too long.
TEST(GpuLinearSanitize, EveryVariantSmallShapes) {
  GEMMKIT_REQUIRE_GPU();
  for (const LinearCase& c :
       {LinearCase{3, 40, 1032, true, DType::bf16}, LinearCase{20, 130, 4104, false, DType::f32},
        LinearCase{1, 128, 2880, true, DType::bf16}}) {
    DeviceLinear problem(c, 3);
    const auto reference = problem.run("reference", 0);
    for (const std::string kernel :
         {"ring4",           "ring8",        "ring16",       "ring4.t1x2",    "ring8.t1x4",
          "ring8.t2x4",      "ring4.p1",     "ring16.p1",    "ring8.t1x4.p1", "ring4.fb",
          "ring16.p1.fb",    "ring16.b4",    "ring16.b2.p1", "ring8.b2.fb",   "ring8.w8",
          "ring16.w8.p1.fb", "wgmma.n64",    "wgmma.n96",    "wgmma.n128",    "wgmma.n64.k2",
          "wgmma.n96.k2",    "wgmma.n128.k3"}) {
      for (int pdl : {0, 1}) {
        try {
          EXPECT_EQ(problem.run(kernel, pdl), reference) << describe(c) << " " << kernel;
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("does not fit"), std::string::npos) << e.what();
        }
      }
    }
  }
  // A 4-rank cluster on 8 stages (every stage refilled once), both folds: the shape whose refills
  // once raced the consumers' ldmatrix reads.
  {
    DeviceLinear problem(LinearCase{31, 128, 7168, true, DType::bf16}, 5);
    const auto reference = problem.run("reference", 0);
    for (const std::string kernel : {"ring8.t1x1.p4.c4", "ring8.t1x1.p4.fb.c4"}) {
      for (int pdl : {0, 1}) {
        EXPECT_EQ(problem.run(kernel, pdl), reference) << "n=31 m=128 k=7168 " << kernel;
      }
    }
  }
  // The one-chain form's kernels (m >= 4096), with tails of m, n and k.
  for (const LinearCase& c :
       {LinearCase{3, 4100, 200, true, DType::bf16}, LinearCase{7, 4096, 136, false, DType::f32}}) {
    DeviceLinear problem(c, 4);
    const auto reference = problem.run("reference", 0);
    for (const std::string kernel :
         {"auto",         "stream.t1x1",     "stream.t1x2",     "stream.t2x1",
          "stream.t2x2",  "stream.t2x4",     "stream.t2x8",     "stream.t4x4",
          "stream.t4x8",  "stream.t2x1.s16", "stream.t2x2.s16", "wgmma.n64",
          "wgmma.n128",   "wgmma.n256",      "wgmma.t32",       "wgmma.t64",
          "wgmma.t128",   "wgmma.t256",      "wgmma.t32.w1",    "wgmma.t64.w1",
          "wgmma.t128.w1"}) {
      for (int pdl : {0, 1}) {
        EXPECT_EQ(problem.run(kernel, pdl), reference) << describe(c) << " " << kernel;
      }
    }
  }
  // The streaming kernel's rings wrapped: 33 slices on 8 and 16 stages.
  {
    DeviceLinear problem(LinearCase{9, 4100, 4104, true, DType::bf16}, 5);
    const auto reference = problem.run("reference", 0);
    for (const std::string kernel :
         {"stream.t2x1", "stream.t2x2", "stream.t2x1.s16", "stream.t2x2.s16"}) {
      for (int pdl : {0, 1}) {
        EXPECT_EQ(problem.run(kernel, pdl), reference) << "n=9 m=4100 k=4104 " << kernel;
      }
    }
  }
  // The transposed kernel's ring wrapped several times across two tiles per CTA (35 k blocks on
  // 10-16 stages, 2 batch blocks): every stage refilled once its consumers freed it.
  {
    DeviceLinear problem(LinearCase{70, 4100, 2200, true, DType::bf16}, 6);
    const auto reference = problem.run("reference", 0);
    for (const std::string kernel : {"wgmma.t32", "wgmma.t32.w1", "wgmma.t64.w1"}) {
      for (int pdl : {0, 1}) {
        EXPECT_EQ(problem.run(kernel, pdl), reference) << "n=70 m=4100 k=2200 " << kernel;
      }
    }
  }
}

}  // namespace
}  // namespace gemmkit
