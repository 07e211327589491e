// GPU tests of the wgmma kernel of the linear family: its bits equal the reference kernel's (the
// canonical reduction) over tails of n, m and k, bf16 and f16, bias, both output types, at every
// k split (1, 2, 3, one group per run, auto); rows keep their bits at every batch size; repeated
// runs are identical; split calls chained eagerly and in replayed graphs (captured first, with no
// eager call before) equal the unsplit kernel.
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

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
                           int batch_invariant = -1, void* workspace = nullptr,
                           int64_t workspace_bytes = 0, int deterministic = -1) {
    out.fill_bytes(0xFF);  // NaN in every output type: an unwritten element cannot pass
    LinearOptions options;
    options.kernel = kernel;
    options.info = info;
    options.batch_invariant = batch_invariant;
    options.deterministic = deterministic;
    options.workspace = workspace;
    options.workspace_bytes = workspace_bytes;
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

// The k splits a forced name can take for k: 1, 2, 3 and one group per run, where they cut the
// groups of 512 into equal runs (ceil(groups / splits) each, none empty).
std::vector<int64_t> split_counts(int64_t k) {
  const int64_t groups = (k + 511) / 512;
  std::vector<int64_t> counts;
  for (int64_t s : {int64_t{1}, int64_t{2}, int64_t{3}, groups}) {
    const int64_t per = (groups + s - 1) / s;
    if (s <= groups && (groups + per - 1) / per == s && (counts.empty() || counts.back() != s)) {
      counts.push_back(s);
    }
  }
  return counts;
}

// Runs `prefix` with every split count of split_counts(k) (".k<N>") and as auto (`prefix`
// alone); each must equal `expected` bit for bit. Returns the runs checked.
int check_splits(WgmmaProblem& problem, const std::string& prefix,
                 const std::vector<uint8_t>& expected, const std::string& against) {
  const WgmmaCase& c = problem.c;
  std::vector<std::string> kernels = {prefix};
  for (int64_t s : split_counts(c.k)) kernels.push_back(prefix + ".k" + std::to_string(s));
  int checked = 0;
  for (const std::string& kernel : kernels) {
    CallInfo info;
    const std::vector<uint8_t> got = problem.run(kernel, c.n, &info);
    // A forced count prints as given; auto prints the count it chose (none for no split).
    if (kernel == prefix) {
      EXPECT_EQ(info.kernel.rfind("cuda.linear." + prefix, 0), 0u) << info.kernel;
    } else {
      EXPECT_EQ(info.kernel, "cuda.linear." + kernel);
    }
    const int64_t diff = first_difference(expected, got, c.out);
    EXPECT_EQ(diff, -1) << describe(c) << " " << info.kernel << " differs from " << against
                        << " at " << diff << ": " << load_as_float(got.data(), c.out, diff)
                        << " against " << load_as_float(expected.data(), c.out, diff);
    if (diff != -1) return -1;
    ++checked;
  }
  return checked;
}

// Case `index` of a matrix: every fourth f16 (f16 out, else bf16 out), every third f32 out, every
// second with a bias.
WgmmaCase rotating_case(int64_t n, int64_t m, int64_t k, int index) {
  const DType in = index % 4 == 3 ? DType::f16 : DType::bf16;
  return WgmmaCase{n, m, k, in, index % 3 == 0 ? DType::f32 : in, index % 2 == 0};
}

TEST(GpuLinearWgmma, MatchesReferenceBitwise) {
  GEMMKIT_REQUIRE_GPU();
  const std::vector<int64_t> ns = {1, 7, 64, 65, 127, 128, 129, 300};
  const std::vector<int64_t> ms = {1, 100, 128, 129, 256, 1000};
  const std::vector<int64_t> ks = {8, 72, 128, 200, 512, 520, 1000, 2880, 4104, 8200};
  int checked = 0, index = 0;
  for (int64_t m : ms) {
    for (int64_t k : ks) {
      for (int j = 0; j < 3; ++j) {
        const int64_t n = ns[static_cast<std::size_t>(index * 3 + j) % ns.size()];
        const WgmmaCase c = rotating_case(n, m, k, index);
        ++index;
        WgmmaProblem problem(c, 500 + static_cast<uint64_t>(index));
        const std::vector<uint8_t> reference = problem.run("reference", n);
        for (const std::string prefix : {"wgmma.n64.s8", "wgmma.n96.s7", "wgmma.n128.s6"}) {
          const int runs = check_splits(problem, prefix, reference, "the reference");
          ASSERT_GT(runs, 0) << describe(c) << " " << prefix;
          checked += runs;
        }
      }
    }
  }
  EXPECT_GE(checked, 600);
}

// The k split on the shapes it is for (few tiles, long k) and their tails: every split count
// gives the unsplit kernel's bits, which are the reference kernel's.
TEST(GpuLinearWgmma, EverySplitCountKeepsTheBits) {
  GEMMKIT_REQUIRE_GPU();
  struct Shape {
    int64_t n, m, k;
  };
  int index = 0, checked = 0;
  for (const Shape& sh : {Shape{64, 1280, 8192}, Shape{64, 1280, 8200}, Shape{65, 1000, 4104},
                          Shape{1, 129, 2880}, Shape{200, 640, 520}, Shape{128, 3072, 4096},
                          Shape{33, 300, 14336}, Shape{129, 257, 2056}}) {
    for (const DType in : {DType::bf16, DType::f16}) {
      for (const bool bias : {true, false}) {
        const DType out = index % 2 == 0 ? DType::f32 : in;
        const WgmmaCase c{sh.n, sh.m, sh.k, in, out, bias};
        ++index;
        WgmmaProblem problem(c, 900 + static_cast<uint64_t>(index));
        const std::vector<uint8_t> reference = problem.run("reference", c.n);
        for (const std::string prefix : {"wgmma.n64.s8", "wgmma.n96.s7", "wgmma.n128.s6"}) {
          const std::vector<uint8_t> unsplit = problem.run(prefix + ".k1", c.n);
          const int64_t diff = first_difference(reference, unsplit, c.out);
          ASSERT_EQ(diff, -1) << describe(c) << " " << prefix << " (no split) differs from the "
                              << "reference at " << diff;
          const int runs = check_splits(problem, prefix, unsplit, "the unsplit kernel");
          ASSERT_GT(runs, 0) << describe(c) << " " << prefix;
          checked += runs;
        }
      }
    }
  }
  EXPECT_GE(checked, 200);
}

// A caller's workspace: large enough, the split runs in it; too small, auto takes fewer splits
// (same bits) and a forced split is refused with the reason.
TEST(GpuLinearWgmma, SplitInTheCallersWorkspace) {
  GEMMKIT_REQUIRE_GPU();
  const WgmmaCase c{64, 1280, 8192, DType::bf16, DType::bf16, true};
  WgmmaProblem problem(c, 41);
  const std::vector<uint8_t> unsplit = problem.run("wgmma.n64.k1", c.n);
  Buffer workspace(std::size_t{8} << 20, kGpu);  // the auto split (8 runs) needs 4.7 MiB
  for (const int64_t bytes : {int64_t{8} << 20, int64_t{1} << 20, int64_t{256}}) {
    workspace.fill_bytes(0x7F);
    CallInfo info;
    const std::vector<uint8_t> got =
        problem.run("wgmma.n64", c.n, &info, -1, workspace.data(), bytes);
    EXPECT_EQ(got, unsplit) << bytes << " bytes of workspace: " << info.kernel;
    if (bytes == int64_t{8} << 20) {
      EXPECT_EQ(info.kernel, "cuda.linear.wgmma.n64.s8.k8");
    } else {
      EXPECT_EQ(info.kernel, "cuda.linear.wgmma.n64.s8");  // 1 MiB holds no split here
    }
  }
  try {
    problem.run("wgmma.n64.k8", c.n, nullptr, -1, workspace.data(), int64_t{1} << 20);
    ADD_FAILURE() << "a forced split in a workspace too small was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("workspace"), std::string::npos) << e.what();
  }
}

#ifdef GEMMKIT_WITH_CUDA
// y_{i+1} = linear(y_i, w_i) over square 2048 weights at n = 64 (16 tiles, 4 groups: auto splits
// k in 2), `length` times on one stream: each call's split kernel reuses the workspace the fold
// before it read. Captured and replayed, it must equal the unsplit kernel's eager chain.
void check_split_chain(const std::string& kernel, int pdl, bool capture_first) {
  const int64_t n = 64, width = 2048;
  const int length = 4;
  Buffer w = upload(random_host(DType::bf16, width * width, 0.038f, 21), kGpu);
  Buffer b = upload(random_host(DType::bf16, width, 1.0f, 22), kGpu);
  std::vector<Buffer> activations;
  activations.push_back(upload(random_host(DType::bf16, n * width, 1.0f, 23), kGpu));
  for (int i = 1; i <= length; ++i) activations.emplace_back(std::size_t(n * width) * 2, kGpu);
  cudaStream_t stream;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  const auto call_chain = [&](const std::string& name) {
    LinearOptions options;
    options.pdl = pdl;
    options.kernel = name;
    for (int i = 0; i < length; ++i) {
      linear(Tensor::contiguous(activations[i].data(), DType::bf16, kGpu, {n, width}),
             Tensor::contiguous(w.data(), DType::bf16, kGpu, {width, width}),
             Tensor::contiguous(b.data(), DType::bf16, kGpu, {width}),
             Tensor::contiguous(activations[i + 1].data(), DType::bf16, kGpu, {n, width}), options,
             reinterpret_cast<Stream>(stream));
    }
  };
  const auto poison = [&] {
    for (int i = 1; i <= length; ++i) activations[i].fill_bytes(0xFF);
  };
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  const auto capture = [&] {
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    call_chain(kernel);
    ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
    ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  };
  if (capture_first) capture();  // the process's first linear calls are the captured ones
  poison();
  call_chain("wgmma.n64.k1");
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  const std::vector<uint8_t> unsplit = download(activations.back());
  poison();
  call_chain(kernel);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(download(activations.back()), unsplit) << kernel << " pdl " << pdl << ": eager";
  if (!capture_first) capture();
  for (int replay = 0; replay < 3; ++replay) {
    poison();
    ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
    ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
    ASSERT_EQ(download(activations.back()), unsplit)
        << kernel << " pdl " << pdl << ": replay " << replay;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

// The first linear calls of the process are inside a capture (ctest runs each test in its own
// process): the split's workspace is allocated in the graph, nothing was set up eagerly before.
TEST(GpuLinearWgmma, SplitCapturedBeforeAnyEagerCall) {
  GEMMKIT_REQUIRE_GPU();
  check_split_chain("wgmma.n64", 1, true);
}

TEST(GpuLinearWgmma, SplitChainsEagerAndInGraphs) {
  GEMMKIT_REQUIRE_GPU();
  for (const std::string kernel : {"wgmma.n64", "wgmma.n64.k4", "wgmma.n128.k2"}) {
    for (const int pdl : {1, 0}) check_split_chain(kernel, pdl, false);
  }
}
#endif

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

// auto with the default options (batch-invariant): a row's bits do not depend on the batch it
// came in, from n = 1 to 16384, over router, decode and dense weights with m and k tails; and they
// equal the reference kernel's (the canonical reduction) for the largest batch's first rows.
TEST(GpuLinearBatchInvariant, DefaultAutoIsBatchInvariantAtEveryBatch) {
  GEMMKIT_REQUIRE_GPU();
  const std::vector<int64_t> ns = {1,   2,   3,   7,   8,   16,   31,   64,   65,
                                   127, 128, 255, 256, 511, 1024, 4096, 16384};
  struct Weight {
    int64_t m, k;
    DType in;
  };
  for (const Weight& wt : {Weight{128, 2880, DType::bf16}, Weight{4096, 4096, DType::bf16},
                           Weight{1000, 1032, DType::bf16}, Weight{256, 7168, DType::f16},
                           Weight{5120, 8192, DType::bf16}, Weight{4104, 1032, DType::f16}}) {
    const int64_t big = wt.m * wt.k > (int64_t{1} << 25) ? 4096 : 16384;
    WgmmaProblem problem(WgmmaCase{big, wt.m, wt.k, wt.in, DType::f32, true}, 77);
    CallInfo big_info;
    const std::vector<uint8_t> full = problem.run("", big, &big_info);
    EXPECT_EQ(big_info.kernel.find("cublaslt"), std::string::npos) << big_info.kernel;
    std::map<std::string, int> kernels;
    for (int64_t n : ns) {
      if (n > big) continue;
      CallInfo info;
      const std::vector<uint8_t> rows = problem.run("", n, &info);
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

// The switch: with batch invariance off, auto takes cuBLASLt between n = 8 and 4096 on a
// one-chain weight; deterministic mode keeps the family even then.
TEST(GpuLinearBatchInvariant, SwitchedOffTakesCublasltUnlessDeterministic) {
  GEMMKIT_REQUIRE_GPU();
  WgmmaProblem problem(WgmmaCase{64, 4096, 4096, DType::bf16, DType::bf16, false}, 79);
  const std::vector<uint8_t> reference = problem.run("reference", 64);
  CallInfo on, off, deterministic;
  EXPECT_EQ(problem.run("", 64, &on), reference) << on.kernel;
  EXPECT_EQ(on.kernel.find("cublaslt"), std::string::npos) << on.kernel;
  problem.run("", 64, &off, 0);
  EXPECT_NE(off.kernel.find("cublaslt"), std::string::npos) << off.kernel;
  EXPECT_EQ(problem.run("", 64, &deterministic, 0, nullptr, 0, 1), reference);
  EXPECT_EQ(deterministic.kernel, on.kernel);
}

// The one-chain form (weights of 4096 rows and more): the streaming kernel at every tile and ring
// and the wgmma kernel at every width equal the reference kernel bit for bit, over tails of n, m
// and k, bf16 and f16, bias and both output types (auto included).
TEST(GpuLinearOneChain, EveryKernelMatchesReferenceBitwise) {
  GEMMKIT_REQUIRE_GPU();
  const std::vector<int64_t> ns = {1, 3, 8, 9, 16, 17, 33, 64, 65, 130, 300};
  const std::vector<std::string> kernels = {"",
                                            "stream.t1x1",
                                            "stream.t1x2",
                                            "stream.t2x1",
                                            "stream.t2x2",
                                            "stream.t2x4",
                                            "stream.t2x8",
                                            "stream.t4x4",
                                            "stream.t4x8",
                                            "stream.t2x1.s16",
                                            "stream.t2x2.s16",
                                            "wgmma.n64",
                                            "wgmma.n128",
                                            "wgmma.n256",
                                            "wgmma.n64.k1",
                                            "wgmma.t32",
                                            "wgmma.t64",
                                            "wgmma.t128",
                                            "wgmma.t256",
                                            "wgmma.t32.w1",
                                            "wgmma.t64.w1",
                                            "wgmma.t128.w1"};
  int checked = 0, index = 0;
  for (int64_t m : {4096, 4100, 4232}) {
    for (int64_t k : {8, 72, 200, 1000, 4104}) {
      for (int j = 0; j < 2; ++j) {
        const int64_t n = ns[static_cast<std::size_t>(index * 2 + j) % ns.size()];
        const WgmmaCase c = rotating_case(n, m, k, index);
        ++index;
        WgmmaProblem problem(c, 900 + static_cast<uint64_t>(index));
        const std::vector<uint8_t> reference = problem.run("reference", n);
        for (const std::string& kernel : kernels) {
          CallInfo info;
          // auto batch-invariant (as by default): switched off it takes cuBLASLt for some.
          const std::vector<uint8_t> got = problem.run(kernel, n, &info, kernel.empty() ? 1 : -1);
          const int64_t diff = first_difference(reference, got, c.out);
          ASSERT_EQ(diff, -1) << describe(c) << " " << info.kernel << " differs from the reference"
                              << " at " << diff << ": " << load_as_float(got.data(), c.out, diff)
                              << " against " << load_as_float(reference.data(), c.out, diff);
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 3 * 5 * 2 * 22);
}

TEST(GpuLinearWgmma, RepeatedRunsAreBitwiseIdentical) {
  GEMMKIT_REQUIRE_GPU();
  WgmmaProblem problem(WgmmaCase{1024, 1024, 4104, DType::bf16, DType::bf16, true}, 5);
  for (const std::string kernel : {"wgmma.n64", "wgmma.n128", "wgmma.n64.k3", "wgmma.n128.k3"}) {
    const std::vector<uint8_t> first = problem.run(kernel, 1024);
    for (int i = 0; i < 5; ++i) {
      ASSERT_EQ(problem.run(kernel, 1024), first) << kernel << " run " << i;
    }
  }
  WgmmaProblem chain(WgmmaCase{1024, 4096, 4104, DType::bf16, DType::bf16, true}, 6);
  for (const std::string kernel :
       {"stream", "wgmma.t32", "wgmma.t32.w1", "wgmma.t64.w1", "wgmma.n64", "wgmma.n256"}) {
    const int64_t n = kernel == "stream" ? 64 : 1024;
    const std::vector<uint8_t> first = chain.run(kernel, n);
    for (int i = 0; i < 5; ++i) ASSERT_EQ(chain.run(kernel, n), first) << kernel << " run " << i;
  }
}

}  // namespace
}  // namespace gemmkit
