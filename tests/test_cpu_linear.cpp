// CPU backend linear, through the public API, against a plain double-precision reference; the
// documented fp32 summation order (bitwise); determinism across runs, thread counts and kernel
// variants; and the backend's inline conversions against the public ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#if defined(__unix__)
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

#include "cpu/convert.h"
#include "cpu/cpu_internal.h"
#include "gemmkit/gemmkit.h"
#include "reference_double.h"

namespace {

using gemmkit::DType;
using gemmkit_test::HostTensor;
using gemmkit_test::Layout;
using gemmkit_test::Reference;

struct Size {
  int64_t n, m, k;
};

// n, m, k not multiples of anything in particular, plus a few that are.
const Size kSizes[] = {{1, 1, 1},    {1, 7, 3},      {3, 17, 7},      {7, 33, 17},
                       {17, 3, 100}, {33, 100, 257}, {100, 257, 33},  {1, 257, 100},
                       {2, 64, 256}, {50, 40, 8},    {100, 129, 257}, {5, 1, 1000}};

struct LayoutCase {
  const char* name;
  Layout x, w, out;
};

const LayoutCase kLayouts[] = {
    {"contiguous", {}, {}, {}},
    // x: rows of a wider matrix at an offset; w: stored transposed ([k][m]); out: padded rows.
    {"xslice_wT_outpad", Layout{{}, {2, 5}, 3}, Layout{{1, 0}, {}, 0}, Layout{{}, {1, 3}, 2}},
    // x: stored transposed; w: slice of a larger matrix; out: column-major.
    {"xT_wslice_outT", Layout{{1, 0}, {0, 0}, 0}, Layout{{}, {3, 2}, 1}, Layout{{1, 0}, {}, 0}},
};

struct DtypeCase {
  DType in, out;
};
const DtypeCase kDtypes[] = {{DType::bf16, DType::bf16},
                             {DType::bf16, DType::f32},
                             {DType::f16, DType::f16},
                             {DType::f16, DType::f32},
                             {DType::f32, DType::f32}};

struct LinearRun {
  HostTensor x, w, bias, out;
  bool has_bias = false;
  gemmkit::CallInfo info;
};

LinearRun make_run(Size s, DtypeCase dt, const LayoutCase& layout, bool bias, uint64_t seed) {
  LinearRun r;
  r.x = gemmkit_test::random_tensor(dt.in, {s.n, s.k}, seed * 4 + 1, layout.x);
  r.w = gemmkit_test::random_tensor(dt.in, {s.m, s.k}, seed * 4 + 2, layout.w);
  r.has_bias = bias;
  if (bias) r.bias = gemmkit_test::random_tensor(dt.in, {s.m}, seed * 4 + 3);
  r.out = gemmkit_test::make_tensor(dt.out, {s.n, s.m}, layout.out);
  return r;
}

void call_linear(LinearRun& r, const char* kernel = "auto") {
  r.out.poison();
  std::optional<gemmkit::Tensor> bias;
  if (r.has_bias) bias = r.bias.view();
  gemmkit::LinearOptions options;
  options.info = &r.info;
  options.kernel = kernel;
  gemmkit::linear(r.x.view(), r.w.view(), bias, r.out.view(), options);
}

std::string label(Size s, DtypeCase dt, const LayoutCase& layout, bool bias) {
  return "n" + std::to_string(s.n) + "_m" + std::to_string(s.m) + "_k" + std::to_string(s.k) + "_" +
         gemmkit::dtype_name(dt.in) + "_to_" + gemmkit::dtype_name(dt.out) + "_" + layout.name +
         (bias ? "_bias" : "");
}

// ---- The parameter matrix ----

class CpuLinearMatrix : public ::testing::TestWithParam<std::tuple<int, int, bool>> {};

// Forces an ISA for a scope; restores the setting and the thread count after.
class IsaScope {
 public:
  explicit IsaScope(gemmkit::cpu::Isa isa) {
    gemmkit::cpu::set_isa_override(static_cast<int>(isa));
  }
  ~IsaScope() {
    gemmkit::cpu::set_isa_override(-1);
    gemmkit::cpu::set_num_threads(0);
  }
};

// Every ISA this machine has, both kernels: within the documented bound of the order that ran.
TEST_P(CpuLinearMatrix, MatchesDoubleReference) {
  const DtypeCase dt = kDtypes[std::get<0>(GetParam())];
  const LayoutCase& layout = kLayouts[std::get<1>(GetParam())];
  const bool bias = std::get<2>(GetParam());
  for (const gemmkit::cpu::Isa isa : gemmkit::cpu::available_isas()) {
    IsaScope scope(isa);
    for (const char* kernel : {"auto", "reference"}) {
      uint64_t seed = 1000 * static_cast<uint64_t>(std::get<0>(GetParam()) + 1) +
                      100 * static_cast<uint64_t>(std::get<1>(GetParam())) + (bias ? 7 : 0);
      const bool fma = gemmkit::cpu::fma_path_isa(isa) && std::string(kernel) == "auto";
      for (const Size& s : kSizes) {
        LinearRun r = make_run(s, dt, layout, bias, ++seed);
        call_linear(r, kernel);
        EXPECT_EQ(r.info.backend, "cpu");
        EXPECT_EQ(r.info.kernel, fma ? "cpu.linear.fma" : "cpu.linear.packed");
        EXPECT_NE(r.info.reason.find(gemmkit::cpu::isa_name(isa)), std::string::npos)
            << r.info.reason;
        const Reference ref = gemmkit_test::reference_linear(r.x, r.w, bias ? &r.bias : nullptr);
        gemmkit_test::check_output(
            r.out, ref,
            label(s, dt, layout, bias) + " " + gemmkit::cpu::isa_name(isa) + " " + kernel, 5, fma);
      }
    }
  }
}

std::string matrix_name(const ::testing::TestParamInfo<std::tuple<int, int, bool>>& p) {
  const DtypeCase dt = kDtypes[std::get<0>(p.param)];
  return std::string(gemmkit::dtype_name(dt.in)) + "_to_" + gemmkit::dtype_name(dt.out) + "_" +
         kLayouts[std::get<1>(p.param)].name + (std::get<2>(p.param) ? "_bias" : "_nobias");
}

INSTANTIATE_TEST_SUITE_P(Cases, CpuLinearMatrix,
                         ::testing::Combine(::testing::Range(0, 5), ::testing::Range(0, 3),
                                            ::testing::Bool()),
                         matrix_name);

// ---- The documented fp32 summation order, bit for bit ----

// `reference` on every ISA (and `auto` on generic): the 8-lane order; `auto` on avx2: the FMA
// chain.
void check_documented_order(gemmkit::cpu::Isa isa, const char* kernel) {
  IsaScope scope(isa);
  const bool fma = gemmkit::cpu::fma_path_isa(isa) && std::string(kernel) == "auto";
  const Size sizes[] = {{3, 5, 1},    {4, 9, 13},   {17, 33, 100},
                        {1, 70, 257}, {60, 20, 64}, {2, 5, 3001}};
  uint64_t seed = 77;
  for (const Size& s : sizes)
    for (DtypeCase dt : kDtypes)
      for (int li = 0; li < 3; ++li)
        for (bool bias : {false, true}) {
          LinearRun r = make_run(s, dt, kLayouts[li], bias, ++seed);
          call_linear(r, kernel);
          int64_t mismatches = 0;
          for (int64_t i = 0; i < s.n; ++i)
            for (int64_t j = 0; j < s.m; ++j) {
              std::vector<float> a, b;
              for (int64_t k = 0; k < s.k; ++k) {
                a.push_back(static_cast<float>(r.x.at({i, k})));
                b.push_back(static_cast<float>(r.w.at({j, k})));
              }
              const float bj = bias ? static_cast<float>(r.bias.at({j})) : 0.0f;
              const float v = fma ? gemmkit_test::fma_chain_dot(a, b, bj)
                                  : gemmkit_test::documented_dot(a, b, bj);
              const unsigned char* got =
                  r.out.storage.data() +
                  r.out.storage_index({i, j}) * static_cast<int64_t>(gemmkit_test::esize(dt.out));
              bool same;
              if (dt.out == DType::f32) {
                same = std::memcmp(got, &v, 4) == 0;
              } else {
                const uint16_t want =
                    dt.out == DType::bf16 ? gemmkit::float_to_bf16(v) : gemmkit::float_to_f16(v);
                same = std::memcmp(got, &want, 2) == 0;
              }
              if (!same) ++mismatches;
            }
          EXPECT_EQ(mismatches, 0) << label(s, dt, kLayouts[li], bias) << " "
                                   << gemmkit::cpu::isa_name(isa) << " " << kernel;
        }
}

TEST(CpuLinearOrder, BitwiseDocumentedOrder) {
  for (const gemmkit::cpu::Isa isa : gemmkit::cpu::available_isas())
    for (const char* kernel : {"auto", "reference"}) check_documented_order(isa, kernel);
}

// ---- Determinism ----

class Restore {
 public:
  ~Restore() {
    gemmkit::cpu::set_num_threads(0);
    gemmkit::cpu::set_generic_kernels(false);
  }
};

TEST(CpuLinearDeterminism, RepeatedCallsBitwiseEqual) {
  for (DtypeCase dt : kDtypes) {
    LinearRun r = make_run({37, 300, 515}, dt, kLayouts[1], true, 5);
    call_linear(r);
    const HostTensor first = r.out;
    call_linear(r);
    EXPECT_TRUE(gemmkit_test::same_bits(first, r.out)) << gemmkit::dtype_name(dt.in);
  }
}

TEST(CpuLinearDeterminism, ThreadCountsAndKernelVariantsBitwiseEqual) {
  Restore restore;
  // One x row block (w packed per task) and several (w packed once); strided and contiguous.
  const Size sizes[] = {{1, 1000, 300}, {7, 333, 129}, {130, 200, 77}, {25, 50, 300}};
  for (const Size& s : sizes)
    for (DtypeCase dt : {kDtypes[0], kDtypes[3], kDtypes[4]})
      for (int li : {0, 2}) {
        LinearRun r = make_run(s, dt, kLayouts[li], true, 11);
        gemmkit::cpu::set_num_threads(1);
        call_linear(r);
        const HostTensor one = r.out;
        for (int threads : {2, 3, 8}) {
          gemmkit::cpu::set_num_threads(threads);
          call_linear(r);
          EXPECT_TRUE(gemmkit_test::same_bits(one, r.out))
              << label(s, dt, kLayouts[li], true) << " threads " << threads;
        }
        // The reference kernel: the same bits on every ISA (auto on generic is that kernel).
        call_linear(r, "reference");
        const HostTensor ref = r.out;
        gemmkit::cpu::set_generic_kernels(true);
        call_linear(r, "reference");
        EXPECT_TRUE(gemmkit_test::same_bits(ref, r.out))
            << label(s, dt, kLayouts[li], true) << " generic reference";
        call_linear(r);
        EXPECT_NE(r.info.reason.find("generic"), std::string::npos) << r.info.reason;
        EXPECT_TRUE(gemmkit_test::same_bits(ref, r.out))
            << label(s, dt, kLayouts[li], true) << " generic auto";
        gemmkit::cpu::set_generic_kernels(false);
        // auto on every ISA of the FMA path (avx2, avx512): the same bits.
        std::vector<HostTensor> fma_outs;
        for (const gemmkit::cpu::Isa isa : gemmkit::cpu::available_isas()) {
          if (!gemmkit::cpu::fma_path_isa(isa)) continue;
          gemmkit::cpu::set_isa_override(static_cast<int>(isa));
          call_linear(r);
          EXPECT_EQ(r.info.kernel, "cpu.linear.fma") << gemmkit::cpu::isa_name(isa);
          fma_outs.push_back(r.out);
          EXPECT_TRUE(gemmkit_test::same_bits(fma_outs.front(), r.out))
              << label(s, dt, kLayouts[li], true) << " auto on " << gemmkit::cpu::isa_name(isa);
        }
        gemmkit::cpu::set_isa_override(-1);
      }
}

// Row i's bits do not depend on the other rows: the batch n, where the row falls in the
// register tiles, the thread count. Every ISA, both kernels.
TEST(CpuLinearDeterminism, BatchInvariantBitwise) {
  Restore restore;
  for (const gemmkit::cpu::Isa isa : gemmkit::cpu::available_isas()) {
    gemmkit::cpu::set_isa_override(static_cast<int>(isa));
    for (const char* kernel : {"auto", "reference"})
      for (DtypeCase dt : {kDtypes[0], kDtypes[4]}) {
        const Size full{61, 150, 300};
        LinearRun r = make_run(full, dt, kLayouts[0], true, 21);
        gemmkit::cpu::set_num_threads(2);
        call_linear(r, kernel);
        const HostTensor all = r.out;
        const int64_t xe = gemmkit_test::esize(dt.in), oe = gemmkit_test::esize(dt.out);
        for (const int64_t r0 : {int64_t{0}, int64_t{5}, int64_t{13}})
          for (const int64_t n : {int64_t{1}, int64_t{2}, int64_t{7}, int64_t{40}})
            for (int threads : {1, 3}) {
              gemmkit::cpu::set_num_threads(threads);
              std::vector<unsigned char> out(static_cast<std::size_t>(n * full.m * oe));
              gemmkit::LinearOptions options;
              options.kernel = kernel;
              gemmkit::linear(
                  gemmkit::Tensor::contiguous(r.x.storage.data() + r0 * full.k * xe, dt.in,
                                              gemmkit::Device::cpu(), {n, full.k}),
                  r.w.view(), r.bias.view(),
                  gemmkit::Tensor::contiguous(out.data(), dt.out, gemmkit::Device::cpu(),
                                              {n, full.m}),
                  options);
              EXPECT_EQ(std::memcmp(out.data(), all.storage.data() + r0 * full.m * oe, out.size()),
                        0)
                  << gemmkit::cpu::isa_name(isa) << " " << kernel << " "
                  << gemmkit::dtype_name(dt.in) << " rows " << r0 << "+" << n << " threads "
                  << threads;
            }
      }
  }
}

// The GEMMKIT_CPU_ISA values: the selected ISA, or a gemmkit::Error naming the setting.
TEST(CpuIsa, SettingValues) {
  using gemmkit::cpu::Isa;
  using gemmkit::cpu::parse_isa_setting;
  EXPECT_EQ(parse_isa_setting(""), gemmkit::cpu::detected_isa());
  EXPECT_EQ(parse_isa_setting("auto"), gemmkit::cpu::detected_isa());
  EXPECT_EQ(parse_isa_setting("generic"), Isa::generic);
  const auto error_of = [](const std::string& value) {
    try {
      parse_isa_setting(value);
    } catch (const gemmkit::Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  for (const Isa isa : {Isa::avx2, Isa::avx512}) {
    const char* name = gemmkit::cpu::isa_name(isa);
    if (gemmkit::cpu::isa_supported(isa)) {
      EXPECT_EQ(parse_isa_setting(name), isa);
    } else {
      const std::string e = error_of(name);
      EXPECT_NE(e.find("not supported by this CPU"), std::string::npos) << e;
      EXPECT_NE(e.find("GEMMKIT_CPU_ISA"), std::string::npos) << e;
    }
  }
  const std::string amx = error_of("amx");
  EXPECT_NE(amx.find("GEMMKIT_CPU_ISA"), std::string::npos) << amx;
  EXPECT_NE(amx.find("not built in this version"), std::string::npos) << amx;
  EXPECT_NE(error_of("AVX2").find("must be auto, avx512, avx2 or generic"), std::string::npos);
}

TEST(CpuIsa, DetectionAndNames) {
  const std::vector<gemmkit::cpu::Isa> isas = gemmkit::cpu::available_isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), gemmkit::cpu::Isa::generic);
  EXPECT_EQ(isas.back(), gemmkit::cpu::detected_isa());
  EXPECT_FALSE(gemmkit::cpu::detected_features().empty());
  EXPECT_STREQ(gemmkit::cpu::isa_name(gemmkit::cpu::Isa::avx2), "avx2");
  EXPECT_STREQ(gemmkit::cpu::isa_name(gemmkit::cpu::Isa::avx512), "avx512");
  // Each ISA runs only where the ones below it run.
  if (gemmkit::cpu::isa_supported(gemmkit::cpu::Isa::avx512)) {
    EXPECT_TRUE(gemmkit::cpu::isa_supported(gemmkit::cpu::Isa::avx2));
  }
}

TEST(CpuLinearDeterminism, ConcurrentCallersBitwiseEqual) {
  LinearRun want = make_run({20, 256, 200}, kDtypes[2], kLayouts[0], true, 3);
  call_linear(want);
  std::vector<LinearRun> runs;
  for (int i = 0; i < 3; ++i)
    runs.push_back(make_run({20, 256, 200}, kDtypes[2], kLayouts[0], true, 3));
  std::vector<int> ok(runs.size(), 1);
  std::vector<std::thread> threads;
  for (std::size_t i = 0; i < runs.size(); ++i)
    threads.emplace_back([&, i] {
      for (int rep = 0; rep < 10; ++rep) {
        call_linear(runs[i]);
        if (!gemmkit_test::same_bits(runs[i].out, want.out)) ok[i] = 0;
      }
    });
  for (auto& t : threads) t.join();
  for (std::size_t i = 0; i < runs.size(); ++i) EXPECT_TRUE(ok[i]) << "caller " << i;
}

TEST(CpuThreads, EnvironmentDefaultAndOverride) {
  Restore restore;
  gemmkit::cpu::set_num_threads(3);
  EXPECT_EQ(gemmkit::cpu::num_threads(), 3);
  const char* old = std::getenv("GEMMKIT_NUM_THREADS");
  const std::string saved = old ? old : "";
  setenv("GEMMKIT_NUM_THREADS", "5", 1);
  gemmkit::cpu::set_num_threads(0);  // back to the default: GEMMKIT_NUM_THREADS
  EXPECT_EQ(gemmkit::cpu::num_threads(), 5);
  const int hardware = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  for (const char* bad : {"0", "-2", "abc", "3x", ""}) {
    setenv("GEMMKIT_NUM_THREADS", bad, 1);
    gemmkit::cpu::set_num_threads(0);
    EXPECT_EQ(gemmkit::cpu::num_threads(), hardware) << "'" << bad << "'";
  }
  if (old)
    setenv("GEMMKIT_NUM_THREADS", saved.c_str(), 1);
  else
    unsetenv("GEMMKIT_NUM_THREADS");
}

#if defined(__SANITIZE_THREAD__)
#define GK_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GK_TEST_TSAN 1
#endif
#endif

#if defined(__unix__)
TEST(CpuThreads, WorksInForkedChild) {
#if defined(GK_TEST_TSAN)
  GTEST_SKIP() << "ThreadSanitizer does not support threads after a multi-threaded fork";
#endif
  Restore restore;
  gemmkit::cpu::set_num_threads(3);
  LinearRun want = make_run({40, 300, 200}, kDtypes[4], kLayouts[0], true, 21);
  call_linear(want);  // the pool exists (3 threads) before the fork
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    LinearRun r = make_run({40, 300, 200}, kDtypes[4], kLayouts[0], true, 21);
    call_linear(r);
    const bool ok = gemmkit_test::same_bits(r.out, want.out) && gemmkit::cpu::num_threads() >= 1;
    _exit(ok ? 0 : 1);
  }
  // Wait at most 30 s: a child stuck waiting for the parent's pool threads must fail, not hang.
  int status = 0;
  pid_t done = 0;
  for (int i = 0; i < 3000 && done == 0; ++i) {
    done = waitpid(pid, &status, WNOHANG);
    if (done == 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL() << "the forked child did not finish a linear call within 30 s";
  }
  ASSERT_EQ(done, pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}
#endif

TEST(CpuThreads, ExceptionsFromTasksReachTheCaller) {
  Restore restore;
  gemmkit::cpu::set_num_threads(3);
  EXPECT_THROW(gemmkit::cpu::parallel_for(100,
                                          [](int64_t t) {
                                            if (t == 42) throw std::runtime_error("task 42");
                                          }),
               std::runtime_error);
  // The pool still works afterwards.
  std::vector<int> hits(1000, 0);
  gemmkit::cpu::parallel_for(1000, [&](int64_t t) { hits[static_cast<std::size_t>(t)] += 1; });
  for (int h : hits) EXPECT_EQ(h, 1);
}

// ---- Special values ----

TEST(CpuLinearSpecial, NonFiniteAndOverflow) {
  // A NaN in x poisons its row only; huge values overflow to inf in bf16/f16 outputs.
  LinearRun r = make_run({3, 4, 10}, kDtypes[4], kLayouts[0], false, 9);
  const float nan = std::nanf("");
  std::memcpy(r.x.storage.data() + r.x.storage_index({1, 4}) * 4, &nan, 4);
  call_linear(r);
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j) EXPECT_EQ(std::isnan(r.out.at({i, j})), i == 1);

  HostTensor x = gemmkit_test::make_tensor(DType::f32, {1, 2});
  HostTensor w = gemmkit_test::make_tensor(DType::f32, {1, 2});
  const float xv[2] = {3.0e4f, 3.0e4f}, wv[2] = {3.0f, -2.0f};
  std::memcpy(x.storage.data(), xv, 8);
  std::memcpy(w.storage.data(), wv, 8);
  HostTensor out = gemmkit_test::make_tensor(DType::f32, {1, 1});
  gemmkit::linear(x.view(), w.view(), std::nullopt, out.view());
  EXPECT_EQ(out.at({0, 0}), 3.0e4);
  // f16: 3e4*3 + 3e4*3 = 1.8e5 overflows to +inf.
  HostTensor xh = gemmkit_test::make_tensor(DType::f16, {1, 2});
  HostTensor wh = gemmkit_test::make_tensor(DType::f16, {1, 2});
  const uint16_t xb[2] = {gemmkit::float_to_f16(3.0e4f), gemmkit::float_to_f16(3.0e4f)};
  const uint16_t wb[2] = {gemmkit::float_to_f16(3.0f), gemmkit::float_to_f16(3.0f)};
  std::memcpy(xh.storage.data(), xb, 4);
  std::memcpy(wh.storage.data(), wb, 4);
  HostTensor oh = gemmkit_test::make_tensor(DType::f16, {1, 1});
  gemmkit::linear(xh.view(), wh.view(), std::nullopt, oh.view());
  EXPECT_TRUE(std::isinf(oh.at({0, 0})) && oh.at({0, 0}) > 0);
}

// ---- Inline conversions of the backend vs the public ones ----

TEST(CpuConvert, MatchesPublicConversions) {
  // Every f16 / bf16 bit pattern decodes identically (NaN to NaN).
  const float* table = gemmkit::cpu::f16_table();
  for (uint32_t h = 0; h < 65536u; ++h) {
    const uint16_t bits = static_cast<uint16_t>(h);
    const float a = table[bits], b = gemmkit::f16_to_float(bits);
    if (std::isnan(b)) {
      EXPECT_TRUE(std::isnan(a)) << h;
    } else {
      EXPECT_EQ(gemmkit::cpu::float_bits(a), gemmkit::cpu::float_bits(b)) << h;
    }
    EXPECT_EQ(gemmkit::cpu::float_bits(gemmkit::cpu::bf16_load(bits)),
              gemmkit::cpu::float_bits(gemmkit::bf16_to_float(bits)))
        << h;
  }
  // Rounding: every f16 value and its neighbours, the midpoints between consecutive f16 values
  // and their neighbours, plus random floats of every magnitude.
  std::vector<float> probes;
  for (uint32_t h = 0; h < 0x7c00u; ++h) {
    const float v = gemmkit::cpu::f16_decode(static_cast<uint16_t>(h));
    const float next = gemmkit::cpu::f16_decode(static_cast<uint16_t>(h + 1));
    const float mid = static_cast<float>((static_cast<double>(v) + next) / 2);
    for (float p : {v, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, INFINITY),
                    std::nextafter(v, INFINITY)}) {
      probes.push_back(p);
      probes.push_back(-p);
    }
  }
  std::mt19937 rng(123);
  for (int i = 0; i < 1000000; ++i)
    probes.push_back(gemmkit::cpu::bits_float(static_cast<uint32_t>(rng())));
  for (float p : {65504.0f, 65519.99f, 65520.0f, 1e30f, INFINITY, -INFINITY, 0.0f, -0.0f,
                  std::numeric_limits<float>::denorm_min(), 3.4028235e38f})
    probes.push_back(p);
  int64_t bad16 = 0, badb = 0;
  for (float p : probes) {
    if (std::isnan(p)) continue;
    if (gemmkit::cpu::f16_store(p) != gemmkit::float_to_f16(p) && ++bad16 <= 5)
      ADD_FAILURE() << "f16 rounding of " << p << " (bits " << gemmkit::cpu::float_bits(p) << ")";
    if (gemmkit::cpu::bf16_store(p) != gemmkit::float_to_bf16(p) && ++badb <= 5)
      ADD_FAILURE() << "bf16 rounding of " << p << " (bits " << gemmkit::cpu::float_bits(p) << ")";
  }
  EXPECT_EQ(bad16, 0);
  EXPECT_EQ(badb, 0);
  // NaN stays NaN.
  EXPECT_TRUE(std::isnan(gemmkit::cpu::f16_decode(gemmkit::cpu::f16_store(std::nanf("")))));
  EXPECT_TRUE(std::isnan(gemmkit::cpu::bf16_load(gemmkit::cpu::bf16_store(-std::nanf("")))));
}

}  // namespace
