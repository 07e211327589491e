// What the GPU convolution tests of every path share: the case description (ConvCase, its
// makers), how a case runs through conv() under each algo it names, and the checks of the
// kernel a call ran (run_case: against the double reference and the CPU backend, run to run,
// and the depthwise kernel against the generic direct kernel's bits).
#pragma once

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "conv/problem_spec.h"
#include "gpu/conv/test_util.h"
#include "gpu/gpu_test_util.h"
#include "reference_double.h"

namespace gemmkit::conv_test {

// The shared GPU test helpers (test_util.h, reference_double.h) by their own names.
using namespace gemmkit_test;

inline const Device kGpu = Device::cuda(0);

// ---- The parameter matrix -------------------------------------------------------------------

struct ConvCase : gemmkit_test::ConvSpec {
  std::vector<std::string> algos;  // besides "auto", algos that must serve the problem
  std::string auto_kernel;         // CallInfo::kernel "auto" must pick ("" = any)
  int64_t workspace_bytes = -1;
  // The small-o kernel (taps | mma) that auto and direct run with 16-bit x ("" = not checked);
  // f32 x always runs the CUDA-core kernel (cuda).
  std::string small_o_variant;
  std::string cudnn_reason;  // text the forced cudnn call's reason must contain ("" = any)
};

inline ConvCase make_case(const std::string& name, std::vector<int64_t> x, std::vector<int64_t> w,
                          std::vector<std::string> algos, std::string auto_kernel = "") {
  ConvCase c;
  c.name = name;
  c.x_shape = std::move(x);
  c.w_shape = std::move(w);
  c.algos = std::move(algos);
  c.auto_kernel = std::move(auto_kernel);
  return c;
}

// A depthwise case that auto must serve with cuda.conv.depthwise: x (n, spatial..., c), a
// kernel of `kernel` per spatial dim, channel multiplier `multiplier`, the same stride and
// padding per dim, run with `algos`.
inline ConvCase depthwise_case(const std::string& name, std::vector<int64_t> x, int64_t kernel,
                               int64_t stride, int64_t pad_lo, int64_t pad_hi, int64_t multiplier,
                               bool bias, std::vector<std::string> algos) {
  const int64_t c = x.back();
  std::vector<int64_t> w{c * multiplier};
  for (std::size_t d = 1; d + 1 < x.size(); ++d) w.push_back(kernel);
  w.push_back(1);
  ConvCase k = make_case(name, std::move(x), std::move(w), std::move(algos), "cuda.conv.depthwise");
  k.params.groups = c;
  k.params.stride = {stride};
  k.params.padding_lo = {pad_lo};
  k.params.padding_hi = {pad_hi};
  k.bias = bias;
  return k;
}

inline std::string label(const ConvCase& c, const DtypePair& d, const std::string& algo) {
  return c.name + " [" + dtype_name(d.x) + " -> " + dtype_name(d.out) + ", algo " + algo + "]";
}

inline bool is_gemm_kernel(const std::string& kernel) {
  return kernel == "cuda.conv.gemm_1x1" || kernel == "cuda.conv.unfold_gemm";
}

// Whether cuDNN is built in and serves a plain conv (probed once, by forcing algo "cudnn").
inline bool cudnn_works() {
  static const bool works = [] {
    try {
      Buffer x(4 * 4 * 8 * 2, kGpu), w(8 * 3 * 3 * 8 * 2, kGpu), out(2 * 2 * 8 * 2, kGpu);
      x.fill_bytes(0);
      w.fill_bytes(0);
      ConvOptions options;
      options.algo = "cudnn";
      conv(Tensor::contiguous(x.data(), DType::bf16, kGpu, {1, 4, 4, 8}),
           Tensor::contiguous(w.data(), DType::bf16, kGpu, {8, 3, 3, 8}), std::nullopt,
           Tensor::contiguous(out.data(), DType::bf16, kGpu, {1, 2, 2, 8}), ConvParams{}, options);
      synchronize(kGpu);
      return true;
    } catch (const Error&) {
      return false;
    }
  }();
  return works;
}

// Whether auto may take cuDNN in this process (GEMMKIT_CONV_CUDNN=0 keeps it on own paths).
inline bool cudnn_in_auto() {
  const char* env = std::getenv("GEMMKIT_CONV_CUDNN");
  return !(env != nullptr && std::string(env) == "0") && cudnn_works();
}

// auto's kernel: `own`, or cuDNN where cuDNN is in auto (select.h's auto_prefers_cudnn
// decides which; the host tests check that rule).
inline void expect_auto_kernel(const CallInfo& info, const std::string& own) {
  if (info.kernel == own) return;
  if (cudnn_in_auto() && info.kernel == "cuda.conv.cudnn") return;
  ADD_FAILURE() << "auto picked " << info.kernel << ", expected " << own
                << (cudnn_in_auto() ? " or cuda.conv.cudnn" : "") << " (" << info.reason << ")";
}

// Runs case c's prepared problem through conv() with options.algo = `algo` (and the case's
// workspace bound), waits, returns the output; `info` receives the call's CallInfo.
inline HostTensor run_algo(PreparedConv& prepared, const ConvCase& c, const std::string& algo,
                           CallInfo* info = nullptr) {
  return prepared.run([&] {
    ConvOptions options;
    options.algo = algo;
    options.workspace_bytes = c.workspace_bytes;
    options.info = info;
    conv(prepared.dx.view, prepared.dw.view, prepared.device_bias, prepared.dout.view, c.params,
         options);
    synchronize(kGpu);
  });
}

// The small-o kernel a call ran, from its reason (common/config.h's to_string: "small_o=...").
inline std::string small_o_variant_of(const CallInfo& info) {
  for (const char* v : {"taps", "mma", "cuda"}) {
    if (info.reason.find(std::string("small_o=") + v + " ") != std::string::npos) return v;
  }
  return "";
}

// Whether a small-o call ran the kernel case `c` expects on dtype pair `d`. Under
// GEMMKIT_CONV_SMALL_O=mma or cuda (scripts/smallo-check.sh runs the variant test so) the setting
// caps it: mma may fall back to cuda, taps never runs.
inline void expect_small_o_variant(const ConvCase& c, const DtypePair& d, const CallInfo& info,
                                   const std::string& what) {
  if (c.small_o_variant.empty() || info.kernel != "cuda.conv.small_o") return;
  const std::string got = small_o_variant_of(info);
  const char* env = std::getenv("GEMMKIT_CONV_SMALL_O");
  const std::string cap = env == nullptr || std::string(env).empty() ? "auto" : env;
  if (d.x == DType::f32 || cap == "cuda") {
    EXPECT_EQ(got, "cuda") << what << ": " << info.reason;
  } else if (cap == "mma") {
    EXPECT_TRUE(got == "mma" || got == "cuda") << what << ": " << info.reason;
    if (c.small_o_variant == "mma") {
      EXPECT_EQ(got, "mma") << what << ": " << info.reason;
    }
  } else {
    EXPECT_EQ(got, c.small_o_variant) << what << ": " << info.reason;
  }
}

inline void run_case(const ConvCase& c, const DtypePair& d, uint64_t seed) {
  PreparedConv prepared(c, d, seed);
  const auto run = [&](const std::string& algo, CallInfo& info) {
    return run_algo(prepared, c, algo, &info);
  };

  std::vector<std::string> algos{"auto"};
  algos.insert(algos.end(), c.algos.begin(), c.algos.end());
  std::optional<HostTensor> reference_result;
  for (const std::string& algo : algos) {
    const std::string what = label(c, d, algo);
    SCOPED_TRACE(what);
    CallInfo info;
    HostTensor first;
    try {
      first = run(algo, info);
    } catch (const Error& e) {
      ADD_FAILURE() << what << ": threw " << e.what();
      continue;
    }
    EXPECT_EQ(info.backend, "cuda");
    if (algo == "auto" && !c.auto_kernel.empty()) {
      expect_auto_kernel(info, c.auto_kernel);
    }
    if (algo == "reference") {
      EXPECT_EQ(info.kernel, "cuda.conv.direct");
    }
    if (algo == "depthwise") {
      EXPECT_EQ(info.kernel, "cuda.conv.depthwise");
    }
    if (algo == "gemm") {
      EXPECT_TRUE(is_gemm_kernel(info.kernel)) << info.kernel;
    }
    if (algo == "direct") {
      EXPECT_FALSE(is_gemm_kernel(info.kernel)) << info.kernel;
    }
    if (algo == "auto" || algo == "direct") expect_small_o_variant(c, d, info, what);
    if (gemmkit_test::check_output(first, any_order(prepared.ref), what) != 0) continue;
    expect_close_to_cpu(first, prepared.cpu_out, prepared.ref, what + " vs the CPU backend");
    CallInfo again_info;
    const HostTensor again = run(algo, again_info);
    EXPECT_TRUE(gemmkit_test::same_bits(first, again)) << what << ": run-to-run difference";
    if (algo == "reference") reference_result = first;
    // The depthwise kernel sums in the generic kernel's order: identical bits (not its
    // tensor-core variant, whose MMAs sum each kernel row's products).
    if (info.kernel == "cuda.conv.depthwise" && reference_result &&
        info.reason.find("variant=mma") == std::string::npos) {
      EXPECT_TRUE(gemmkit_test::same_bits(first, *reference_result))
          << what << ": depthwise differs from the generic direct kernel";
    }
  }
}

// ---- Two variants that must give the same bits ---------------------------------------------

// One case of a "same bits" test: a case, a dtype pair, the variant the results are compared
// against (`first`) and the variants under test (`others`), as the path's setting names them, and
// the seed of the case's data (one preparation serves every variant).
struct SameBitsCase {
  ConvCase conv;
  DtypePair dtypes;
  std::string first;
  std::vector<std::string> others;
  uint64_t seed = 0;
};

// Every case on every dtype pair (dtype-major), seeds base + 10, base + 20, ...
inline std::vector<SameBitsCase> same_bits_cases(const std::vector<ConvCase>& cases,
                                                 const std::vector<DtypePair>& pairs,
                                                 const std::string& first,
                                                 const std::vector<std::string>& others,
                                                 uint64_t base) {
  std::vector<SameBitsCase> v;
  uint64_t seed = base;
  for (const DtypePair& d : pairs) {
    for (const ConvCase& c : cases) v.push_back({c, d, first, others, seed += 10});
  }
  return v;
}

// The test name of a SameBitsCase: its index, the case name and the dtypes, as an identifier.
inline std::string same_bits_name(const ::testing::TestParamInfo<SameBitsCase>& info) {
  const SameBitsCase& p = info.param;
  std::string text = std::to_string(info.index) + "_" + p.conv.name + "_" + dtype_name(p.dtypes.x) +
                     "_" + dtype_name(p.dtypes.out);
  std::string name;
  for (const char ch : text) {
    const bool keep = std::isalnum(static_cast<unsigned char>(ch)) != 0;
    if (keep) {
      name += ch;
    } else if (!name.empty() && name.back() != '_') {
      name += '_';
    }
  }
  while (!name.empty() && name.back() == '_') name.pop_back();
  return name;
}

}  // namespace gemmkit::conv_test
