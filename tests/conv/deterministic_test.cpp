// Host tests of the convolution's deterministic mode (options.deterministic,
// GEMMKIT_DETERMINISTIC): the setting's parsing, that its choice is the static selection of default
// mode (a pure function of problem, device and request, never raced), that no kept race outcome or
// default-mode choice ever serves it (race_step, the choice cache's keys), the run-time fallbacks
// it allows (may_fall_back), how the cuDNN path picks its engine in each mode (cudnn_engine_search,
// cudnn_engine_allowed), and that GEMMKIT_LOG's line names the mode and why. Runs without a GPU
// and without CUDA.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "api/log.h"
#include "conv/problem_spec.h"
#include "conv/select_util.h"
#include "cuda/conv/choice_cache.h"
#include "cuda/conv/cudnn/plan.h"
#include "cuda/conv/select.h"
#include "gemmkit/gemmkit.h"

namespace gemmkit::cuda::conv_impl {
namespace {

DeviceDescription with_cudnn() {
  DeviceDescription d{};
  d.cudnn = true;
  d.cudnn_why_not.clear();
  return d;
}

// The default mode's request of `algo`, and the same with options.deterministic = 1.
ConvRequest default_mode(const std::string& algo = "") {
  return resolve(algo, "", -1, "");
}
ConvRequest deterministic(const std::string& algo = "") {
  return resolve(algo, "", -1, "", "", "", "", 1);
}

// Shapes that auto races in default mode (with cuDNN): 2-D depthwise (cuDNN first, the own kernel
// the challenger) and a 1x1 GEMM (own first, cuDNN the challenger); and a 3x3 that goes to cuDNN
// without a race.
Spec depthwise_2d() {
  return gemmkit_test::depthwise_spec({8, 14, 14, 384}, 7, 1, 3);
}
Spec one_by_one() {
  Spec s;
  s.x_shape = {1, 64, 64, 512};
  s.w_shape = {256, 1, 1, 512};
  return s;
}
Spec three_by_three() {
  return gemmkit_test::padded_spec({2, 28, 28, 128}, {128, 3, 3, 128}, 1);
}

// The configuration text without its reason: what runs.
std::string launch_text(const ConvConfig& c) {
  const std::string text = to_string(c);
  return text.substr(0, text.find(" reason: "));
}

TEST(ConvDeterministic, SettingComesFromTheOptionElseTheEnvironment) {
  EXPECT_FALSE(default_mode().deterministic);
  EXPECT_FALSE(resolve("", "", -1, "", "", "", "", -1, "0").deterministic);
  const ConvRequest env = resolve("", "", -1, "", "", "", "", -1, "1");
  EXPECT_TRUE(env.deterministic);
  EXPECT_TRUE(env.deterministic_from_env);
  EXPECT_EQ(deterministic_origin(env), "options.deterministic (from GEMMKIT_DETERMINISTIC)");
  const ConvRequest option = deterministic();
  EXPECT_TRUE(option.deterministic);
  EXPECT_FALSE(option.deterministic_from_env);
  EXPECT_EQ(deterministic_origin(option), "options.deterministic");
  // The option wins over the environment, both ways.
  EXPECT_FALSE(resolve("", "", -1, "", "", "", "", 0, "1").deterministic);
  EXPECT_TRUE(resolve("", "", -1, "", "", "", "", 1, "0").deterministic);
  // Anything but 0 or 1 in the environment is an Error naming it and the value.
  for (const char* bad : {"2", "yes", "on", " 1", "true"}) {
    try {
      resolve("", "", -1, "", "", "", "", -1, bad);
      ADD_FAILURE() << "expected an Error for '" << bad << "'";
    } catch (const Error& e) {
      const std::string m = e.what();
      EXPECT_NE(m.find("gemmkit::conv: GEMMKIT_DETERMINISTIC"), std::string::npos) << m;
      EXPECT_NE(m.find(std::string("'") + bad + "'"), std::string::npos) << m;
      EXPECT_NE(m.find("must be 0 or 1"), std::string::npos) << m;
    }
  }
}

TEST(ConvDeterministic, NothingRacesAndTheChoiceIsTheStaticOne) {
  const DeviceDescription dev = with_cudnn();
  for (const Spec& spec : {depthwise_2d(), one_by_one(), three_by_three()}) {
    const ConvProblem p = make_problem(spec);
    const ConvCandidates raced = select_conv_candidates(p, dev, default_mode());
    ASSERT_TRUE(raced.race);  // the shapes default mode races
    const ConvCandidates c = select_conv_candidates(p, dev, deterministic());
    EXPECT_FALSE(c.race);
    EXPECT_EQ(c.first.path, raced.first.path);
    EXPECT_EQ(launch_text(c.first), launch_text(raced.first));
    // The reason says which mode chose it, and what default mode would have timed it against.
    EXPECT_EQ(c.first.reason,
              raced.first.reason +
                  "; deterministic mode (options.deterministic): the static choice, not raced "
                  "against " +
                  path_name(raced.second.path));
  }
  // A shape that does not race (8 groups of 16 channels: the mma.sync implicit GEMM against
  // cuDNN): the same choice, the mode named.
  gemmkit_test::Spec grouped = gemmkit_test::padded_spec({2, 28, 28, 128}, {128, 3, 3, 16}, 1);
  grouped.params.groups = 8;
  const ConvProblem p = make_problem(grouped);
  const ConvCandidates d = select_conv_candidates(p, dev, default_mode());
  const ConvCandidates c = select_conv_candidates(p, dev, deterministic());
  EXPECT_FALSE(d.race);
  EXPECT_FALSE(c.race);
  EXPECT_EQ(c.first.path, ConvPath::cudnn);
  EXPECT_EQ(c.first.reason, d.first.reason + "; deterministic mode (options.deterministic)");
  // Set by the environment, the reason says so.
  const ConvRequest env = resolve("", "", -1, "", "", "", "", -1, "1");
  EXPECT_NE(select_conv_candidates(p, dev, env)
                .first.reason.find("deterministic mode (options.deterministic (from "
                                   "GEMMKIT_DETERMINISTIC))"),
            std::string::npos);
  // Forced algos keep their choice and their errors.
  EXPECT_TRUE(
      is_implicit_path(select_conv_candidates(p, dev, deterministic("implicit")).first.path));
  EXPECT_THROW(select_conv_candidates(p, dev, deterministic("depthwise")), Error);
}

TEST(ConvDeterministic, TheChoiceIsAPureFunctionOfProblemDeviceAndRequest) {
  // Over shapes of every path, dtypes, devices with and without cuDNN and several requests: two
  // selections give the same text, and what runs is default mode's static choice.
  std::vector<Spec> specs = {depthwise_2d(), one_by_one(), three_by_three()};
  specs.push_back(gemmkit_test::depthwise_spec({2, 300, 64}, 4, 1, 2));
  specs.push_back(gemmkit_test::padded_spec({1, 64, 64, 128}, {3, 3, 3, 128}, 1, true));
  specs.push_back(gemmkit_test::padded_spec({1, 5, 16, 16, 32}, {32, 3, 3, 3, 32}, 1));
  Spec transposed;
  transposed.x_shape = {1, 32, 32, 64};
  transposed.w_shape = {32, 4, 4, 64};
  transposed.params = conv_transpose_params({4, 4}, {2}, {1}, {0}, {1}, 1);
  specs.push_back(transposed);
  const DeviceDescription devices[] = {with_cudnn(), kH200};
  int checked = 0;
  for (Spec spec : specs) {
    for (const DType dtype : {DType::bf16, DType::f32}) {
      spec.dtype = spec.out_dtype = dtype;
      const ConvProblem p = make_problem(spec);
      for (const DeviceDescription& dev : devices) {
        for (const char* algo : {"", "direct", "gemm"}) {
          ConvCandidates a, b, d;
          try {
            d = select_conv_candidates(p, dev, default_mode(algo));
          } catch (const Error&) {
            EXPECT_THROW(select_conv_candidates(p, dev, deterministic(algo)), Error);
            continue;
          }
          a = select_conv_candidates(p, dev, deterministic(algo));
          b = select_conv_candidates(p, dev, deterministic(algo));
          EXPECT_FALSE(a.race);
          EXPECT_EQ(to_string(a.first), to_string(b.first));
          EXPECT_EQ(launch_text(a.first), launch_text(d.first));
          EXPECT_NE(a.first.reason.find("deterministic mode"), std::string::npos);
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 50);
}

TEST(ConvDeterministic, NeverReadsTheKeptRaceOutcome) {
  // A choice as default mode keeps it, with the race's outcome (cuDNN's challenger won).
  const DeviceDescription dev = with_cudnn();
  const ConvProblem p = make_problem(one_by_one());
  ConvChoice choice;
  choice.candidates = select_conv_candidates(p, dev, default_mode());
  ASSERT_TRUE(choice.candidates.race);
  // Before any race: default mode races, deterministic mode takes the static choice.
  EXPECT_TRUE(race_step(choice, default_mode()).race);
  EXPECT_FALSE(race_step(choice, deterministic()).race);
  EXPECT_EQ(race_step(choice, deterministic()).kept, nullptr);
  auto won = std::make_shared<RaceResult>();
  won->chosen = choice.candidates.second;
  won->text = "timed: cuDNN";
  choice.keep_race(won);
  // After it: default mode reads the outcome; deterministic mode neither reads it nor races.
  const RaceStep d = race_step(choice, default_mode());
  EXPECT_EQ(d.kept.get(), won.get());
  EXPECT_FALSE(d.race);
  const RaceStep s = race_step(choice, deterministic());
  EXPECT_EQ(s.kept, nullptr);
  EXPECT_FALSE(s.race);
  // A choice that does not race reads nothing in either mode.
  ConvChoice still;
  still.candidates = select_conv_candidates(p, dev, deterministic());
  still.keep_race(won);
  EXPECT_EQ(race_step(still, default_mode()).kept, nullptr);
  EXPECT_FALSE(race_step(still, default_mode()).race);
}

TEST(ConvDeterministic, DefaultModeChoicesNeverServeIt) {
  // A process that ran the shape in default mode (raced, cuDNN won) and then in deterministic
  // mode: the deterministic call has its own key and choice, the static one, as a fresh process
  // would select it.
  ConvChoiceCache cache;
  const DeviceDescription dev = with_cudnn();
  const ConvProblem p = make_problem(one_by_one());
  const ConvChoiceKey default_key = conv_choice_key(p, dev, 0, default_mode());
  const ConvChoiceKey key = conv_choice_key(p, dev, 0, deterministic());
  const ConvChoiceKey env_key =
      conv_choice_key(p, dev, 0, resolve("", "", -1, "", "", "", "", -1, "1"));
  EXPECT_FALSE(default_key == key);
  EXPECT_FALSE(env_key == key);  // the reasons quote where the mode came from
  EXPECT_FALSE(env_key == default_key);
  const auto raced =
      cache.get(default_key, [&] { return select_conv_candidates(p, dev, default_mode()); });
  auto won = std::make_shared<RaceResult>();
  won->chosen = raced->candidates.second;
  won->text = "timed: cuDNN";
  raced->keep_race(won);
  int selections = 0;
  const auto choice = cache.get(key, [&] {
    ++selections;
    return select_conv_candidates(p, dev, deterministic());
  });
  EXPECT_EQ(selections, 1);
  EXPECT_NE(choice.get(), raced.get());
  EXPECT_FALSE(choice->candidates.race);
  EXPECT_EQ(choice->candidates.first.path, ConvPath::gemm_1x1);
  EXPECT_EQ(choice->first_text, to_string(select_conv_candidates(p, dev, deterministic()).first));
  const RaceStep step = race_step(*choice, deterministic());
  EXPECT_EQ(step.kept, nullptr);
  EXPECT_FALSE(step.race);
}

TEST(ConvDeterministic, FallsBackOnlyForCausesEveryProcessMeets) {
  RunFailure pure;
  pure.why = "cuBLASLt has no algorithm for the bf16 -> bf16 GEMM";
  pure.pure = true;
  RunFailure state;
  state.why = "cudaMallocAsync of 1048576 bytes of workspace failed (cudaErrorMemoryAllocation)";
  EXPECT_TRUE(may_fall_back(default_mode(), pure));
  EXPECT_TRUE(may_fall_back(default_mode(), state));
  EXPECT_TRUE(may_fall_back(deterministic(), pure));
  EXPECT_FALSE(may_fall_back(deterministic(), state));
  try {
    fail_without_fallback(deterministic(), ConvPath::unfold_gemm, state);
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("gemmkit::conv: options.deterministic 1: the unfold_gemm path failed", 0), 0u)
        << m;
    EXPECT_NE(m.find(state.why), std::string::npos) << m;
    EXPECT_NE(m.find("falls back"), std::string::npos) << m;
  }
  try {
    fail_without_fallback(resolve("", "", -1, "", "", "", "", -1, "1"), ConvPath::cudnn, state);
    ADD_FAILURE() << "expected an Error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("options.deterministic (from GEMMKIT_DETERMINISTIC) 1: the cudnn path"),
              std::string::npos)
        << m;
  }
}

TEST(ConvDeterministic, CudnnEngineIsTheHeuristicsFirstNeverTimed) {
  // Deterministic mode: never timed, final under capture too, precompiled engines only,
  // whatever GEMMKIT_CONV_CUDNN_AUTOTUNE says.
  for (const bool autotune : {false, true}) {
    for (const bool capturing : {false, true}) {
      const CudnnEngineSearch s = cudnn_engine_search(true, autotune, capturing);
      EXPECT_FALSE(s.time);
      EXPECT_TRUE(s.final);
      EXPECT_FALSE(s.allow_runtime_compiled);
      EXPECT_NE(std::string(s.how).find("deterministic mode"), std::string::npos);
      EXPECT_NE(std::string(s.how).find("not timed"), std::string::npos);
    }
  }
  // Default mode, as before: timed outside capture with autotune; under capture not final.
  CudnnEngineSearch s = cudnn_engine_search(false, true, false);
  EXPECT_TRUE(s.time);
  EXPECT_TRUE(s.final);
  EXPECT_TRUE(s.allow_runtime_compiled);
  EXPECT_EQ(std::string(s.how), "heuristic's only candidate");
  s = cudnn_engine_search(false, true, true);
  EXPECT_FALSE(s.time);
  EXPECT_FALSE(s.final);
  EXPECT_EQ(std::string(s.how), "heuristic's first, not timed (stream capture)");
  s = cudnn_engine_search(false, false, false);
  EXPECT_FALSE(s.time);
  EXPECT_TRUE(s.final);
  EXPECT_EQ(std::string(s.how), "heuristic's first (autotune off)");
}

TEST(ConvDeterministic, CudnnEnginesThatMayServe) {
  const CudnnEngineNotes plain;
  EXPECT_TRUE(cudnn_engine_allowed(plain, false, true));
  EXPECT_TRUE(cudnn_engine_allowed(plain, true, false));
  // Never, in either mode: nondeterministic, down-converting, reduced-precision engines.
  CudnnEngineNotes n;
  n.nondeterministic = true;
  EXPECT_FALSE(cudnn_engine_allowed(n, false, true));
  n = CudnnEngineNotes{};
  n.down_converts_inputs = true;
  EXPECT_FALSE(cudnn_engine_allowed(n, false, true));
  n = CudnnEngineNotes{};
  n.reduced_precision_reduction = true;
  EXPECT_FALSE(cudnn_engine_allowed(n, false, true));
  // Tensor cores: 16-bit inputs only (TF32 for f32 inputs is not fp32).
  n = CudnnEngineNotes{};
  n.tensor_core = true;
  EXPECT_TRUE(cudnn_engine_allowed(n, false, false));
  EXPECT_FALSE(cudnn_engine_allowed(n, true, true));
  // Runtime-compiled engines: default mode only.
  n = CudnnEngineNotes{};
  n.runtime_compiled = true;
  EXPECT_TRUE(cudnn_engine_allowed(n, false, true));
  EXPECT_FALSE(cudnn_engine_allowed(n, false, false));
}

TEST(ConvDeterministic, CudnnRefusalsThatAreAPureFunction) {
  // Bad or unsupported configurations (cuDNN 9's 2000s and 3000s) are the same in every process;
  // internal and allocation failures (4000s), execution failures (5000s) and set-up failures
  // (1000s) are not, and stop deterministic mode's engine search.
  for (const int status : {2000, 2002, 2012, 3000, 3002, 3010, 3014}) {
    EXPECT_TRUE(cudnn_refusal_is_pure(status)) << status;
  }
  for (const int status : {0, 1001, 1008, 4000, 4003, 4004, 5000, 5003}) {
    EXPECT_FALSE(cudnn_refusal_is_pure(status)) << status;
  }
}

TEST(ConvDeterministic, LogLineNamesTheModeAndWhy) {
  // CallInfo::reason is the choice's text (conv.cpp); GEMMKIT_LOG=1 prints it with the kernel.
  const DeviceDescription dev = with_cudnn();
  const ConvProblem p = make_problem(depthwise_2d());
  const ConvCandidates c = select_conv_candidates(p, dev, deterministic());
  CallInfo info;
  info.backend = "cuda";
  info.kernel = kernel_name(c.first.path);
  info.reason = to_string(c.first);
  testing::internal::CaptureStderr();
  detail::log_call("conv", "n=8 in=14x14 c=384 o=384 kernel=7x7", info);
  const std::string line = testing::internal::GetCapturedStderr();
  EXPECT_NE(line.find("-> cuda cuda.conv.cudnn"), std::string::npos) << line;
  EXPECT_NE(line.find("faster than the own depthwise path"), std::string::npos) << line;
  EXPECT_NE(line.find("deterministic mode (options.deterministic): the static choice, not raced "
                      "against depthwise"),
            std::string::npos)
      << line;
  // Default mode's text is unchanged: no word of the mode.
  const ConvCandidates d = select_conv_candidates(p, dev, default_mode());
  EXPECT_EQ(to_string(d.first).find("deterministic"), std::string::npos);
}

}  // namespace
}  // namespace gemmkit::cuda::conv_impl
