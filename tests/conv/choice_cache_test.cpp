// Host tests of the dispatcher's choice cache (src/cuda/conv/choice_cache.h): its key holds
// every input of select_conv_candidates, so problems with equal keys get equal choices (checked
// against fresh selections over shapes of every path, strided views, addresses, dtypes, devices
// and requests), and the cache returns what it kept, keeps no failed selection and stays bounded.
#include "cuda/conv/choice_cache.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "conv/problem_spec.h"
#include "conv/select_util.h"
#include "gemmkit/gemmkit.h"

namespace gemmkit::cuda::conv_impl {
namespace {

DeviceDescription h200(bool cudnn) {
  DeviceDescription d;
  d.cudnn = cudnn;
  if (cudnn) d.cudnn_why_not.clear();
  return d;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text;
  for (const int64_t v : shape) text += (text.empty() ? "" : "x") + std::to_string(v);
  return text;
}

ConvRequest request(const std::string& algo = "", int64_t workspace = -1,
                    const std::string& small_o = "") {
  return request_of(algo, workspace, small_o);
}

// Problems reaching every path: depthwise (1-D, 2-D), small-o, 1x1, 3x3, grouped, transposed,
// 3-D, with a bias, in three dtypes.
std::vector<Spec> shapes() {
  std::vector<Spec> v;
  v.push_back(gemmkit_test::depthwise_spec({8, 56, 56, 96}, 7, 1, 3));
  v.push_back(gemmkit_test::depthwise_spec({8, 56, 56, 144}, 3, 2, 1));
  v.push_back(gemmkit_test::depthwise_spec({2, 300, 64}, 4, 1, 2));
  // small o
  v.push_back(gemmkit_test::padded_spec({1, 64, 64, 128}, {3, 3, 3, 128}, 1, true));
  Spec s;
  s.x_shape = {2, 16, 16, 64};
  s.w_shape = {32, 1, 1, 64};
  v.push_back(s);  // 1x1
  s = gemmkit_test::padded_spec(s.x_shape, {32, 3, 3, 64}, 1);
  v.push_back(s);  // 3x3
  s.w_shape = {32, 3, 3, 16};
  s.params.groups = 4;
  v.push_back(s);  // grouped
  s = Spec{};
  s.x_shape = {1, 32, 32, 64};
  s.w_shape = {32, 4, 4, 64};
  s.params = conv_transpose_params({4, 4}, {2}, {1}, {0}, {1}, 1);
  v.push_back(s);  // transposed
  // 3-D
  v.push_back(gemmkit_test::padded_spec({1, 5, 16, 16, 32}, {32, 3, 3, 3, 32}, 1));
  std::vector<Spec> all;
  for (const Spec& base : v) {
    for (const DType dtype : {DType::bf16, DType::f16, DType::f32}) {
      Spec t = base;
      t.dtype = t.out_dtype = dtype;
      all.push_back(t);
    }
    Spec mixed = base;
    mixed.out_dtype = DType::f32;
    all.push_back(mixed);
  }
  return all;
}

// The text of a fresh selection (what a cache hit must reproduce), or the error it throws.
std::string fresh(const ConvProblem& p, const DeviceDescription& dev, const ConvRequest& r) {
  try {
    const ConvCandidates c = select_conv_candidates(p, dev, r);
    return to_string(c.first) + (c.race ? " | race: " + to_string(c.second) : "");
  } catch (const Error& e) {
    return std::string("Error: ") + e.what();
  }
}

TEST(ConvChoiceCache, EqualKeysMeanEqualChoices) {
  // Variants of every shape: addresses (every alignment up to 256; 24 and 40 share 8's, 256 and
  // 4096 + 8 repeat 0's and 8's), a strided x, devices with and without cuDNN, and requests.
  std::map<std::size_t, std::vector<std::pair<ConvChoiceKey, std::string>>> by_hash;
  int problems = 0, distinct = 0;
  const DeviceDescription devices[] = {h200(true), h200(false)};
  const ConvRequest requests[] = {request(),
                                  request("direct"),
                                  request("", 1 << 20),
                                  request("", -1, "cuda"),
                                  resolve("", "", -1, "", "", "", "", 1),
                                  resolve("", "", -1, "", "", "", "", -1, "1")};
  for (const Spec& spec : shapes()) {
    for (const uintptr_t offset :
         {0u, 2u, 4u, 8u, 16u, 24u, 32u, 40u, 64u, 128u, 256u, 4096u + 8u}) {
      ConvProblem p = make_problem(spec, fake(0x10000000 + offset), fake(0x20000000 + offset / 2));
      for (const bool strided_x : {false, true}) {
        ConvProblem q = p;
        if (strided_x) {  // x rows padded by one channel vector: a view of a wider tensor
          const int r = q.x.rank;
          for (int d = 0; d + 1 < r; ++d)
            q.x.strides[d] = q.x.strides[d] / q.x.shape[r - 1] * (q.x.shape[r - 1] + 8);
        }
        for (int di = 0; di < 2; ++di) {
          for (const ConvRequest& r : requests) {
            ++problems;
            const ConvChoiceKey key = conv_choice_key(q, devices[di], 0, r);
            ASSERT_LE(key.count, ConvChoiceKey::kMaxNumbers);
            const std::string text = fresh(q, devices[di], r);
            auto& bucket = by_hash[key.hash];
            bool found = false;
            for (const auto& [other, other_text] : bucket) {
              if (other == key) {
                found = true;
                EXPECT_EQ(text, other_text) << "equal keys, different choices";
              }
            }
            if (!found) {
              bucket.emplace_back(key, text);
              ++distinct;
            }
          }
        }
      }
    }
  }
  // Offsets of equal alignment repeat keys: hits, whose choices the loop above compared.
  EXPECT_LT(distinct, problems);
  std::printf("[ note ] %d problems, %d distinct keys\n", problems, distinct);
}

TEST(ConvChoiceCache, KeyTellsApartWhatSelectionReads) {
  const Spec spec = gemmkit_test::depthwise_spec({8, 56, 56, 96}, 7, 1, 3);
  const ConvProblem p = make_problem(spec);
  const DeviceDescription dev = h200(true);
  const ConvChoiceKey base = conv_choice_key(p, dev, 0, request());
  EXPECT_EQ(base, conv_choice_key(p, dev, 0, request()));
  ConvProblem moved = p;  // another address of the same alignment (256)
  moved.x.data = static_cast<char*>(moved.x.data) + 512;
  EXPECT_EQ(base, conv_choice_key(moved, dev, 0, request()));
  ConvProblem misaligned = p;
  misaligned.out.data = static_cast<char*>(misaligned.out.data) + 2;
  EXPECT_FALSE(base == conv_choice_key(misaligned, dev, 0, request()));
  EXPECT_FALSE(base == conv_choice_key(p, dev, 1, request()));  // another device
  EXPECT_FALSE(base == conv_choice_key(p, h200(false), 0, request()));
  EXPECT_FALSE(base == conv_choice_key(p, dev, 0, request("depthwise")));
  EXPECT_FALSE(base == conv_choice_key(p, dev, 0, request("", 1 << 20)));
  ConvRequest no_cudnn = request();
  no_cudnn.cudnn_in_auto = false;
  EXPECT_FALSE(base == conv_choice_key(p, dev, 0, no_cudnn));
  // Deterministic mode, by the option or the environment (the reasons say which).
  const ConvChoiceKey det = conv_choice_key(p, dev, 0, resolve("", "", -1, "", "", "", "", 1));
  const ConvChoiceKey det_env =
      conv_choice_key(p, dev, 0, resolve("", "", -1, "", "", "", "", -1, "1"));
  EXPECT_FALSE(base == det);
  EXPECT_FALSE(base == det_env);
  EXPECT_FALSE(det == det_env);
  EXPECT_EQ(base, conv_choice_key(p, dev, 0, resolve("", "", -1, "", "", "", "", 0, "1")));
  ConvProblem flipped = p;
  flipped.flip = true;
  EXPECT_FALSE(base == conv_choice_key(flipped, dev, 0, request()));
  ConvProblem strided = p;
  strided.weight.strides[0] += 1;
  EXPECT_FALSE(base == conv_choice_key(strided, dev, 0, request()));
}

TEST(ConvChoiceCache, KeepsChoicesNotFailuresAndStaysBounded) {
  ConvChoiceCache cache;
  const ConvProblem p = make_problem(gemmkit_test::depthwise_spec({8, 56, 56, 96}, 7, 1, 3));
  const DeviceDescription dev = h200(true);
  const ConvChoiceKey key = conv_choice_key(p, dev, 0, request());
  int selections = 0;
  const auto select = [&] {
    ++selections;
    return select_conv_candidates(p, dev, request());
  };
  const auto first = cache.get(key, select);
  const auto again = cache.get(key, select);
  EXPECT_EQ(first.get(), again.get());
  EXPECT_EQ(selections, 1);
  EXPECT_EQ(first->first_text, to_string(first->candidates.first));
  // A selection that throws is not kept: the next call selects again.
  ConvChoiceKey other = conv_choice_key(p, dev, 1, request());
  EXPECT_THROW(cache.get(other, [&]() -> ConvCandidates { throw std::runtime_error("no"); }),
               std::runtime_error);
  EXPECT_EQ(cache.size(), 1u);
  cache.get(other, select);
  EXPECT_EQ(selections, 2);
  // Bounded: past kConvChoiceCapacity keys it starts over; kept pointers stay valid.
  for (std::size_t i = 0; i < kConvChoiceCapacity + 10; ++i) {
    cache.get(conv_choice_key(p, dev, static_cast<int>(i + 2), request()), select);
    ASSERT_LE(cache.size(), kConvChoiceCapacity);
  }
  EXPECT_EQ(first->first_text, to_string(first->candidates.first));
}

TEST(ConvChoiceCache, RaceOutcomeLivesWithItsChoice) {
  ConvChoiceCache cache;
  const ConvProblem p = make_problem(gemmkit_test::depthwise_spec({8, 56, 56, 96}, 7, 1, 3));
  const DeviceDescription dev = h200(true);
  const auto select = [&] { return select_conv_candidates(p, dev, request()); };
  const auto choice = cache.get(conv_choice_key(p, dev, 0, request()), select);
  EXPECT_EQ(choice->raced(), nullptr);
  auto mine = std::make_shared<RaceResult>();
  mine->chosen = choice->candidates.second;
  mine->text = "second";
  EXPECT_EQ(choice->keep_race(mine).get(), mine.get());
  // A later race (another thread's) does not replace the kept one.
  auto late = std::make_shared<RaceResult>();
  late->text = "late";
  EXPECT_EQ(choice->keep_race(late)->text, "second");
  EXPECT_EQ(cache.get(conv_choice_key(p, dev, 0, request()), select)->raced()->text, "second");
  // Bounded with the choices: once the cache starts over, the shape has a fresh choice, unraced;
  // a holder of the old one keeps its outcome.
  for (std::size_t i = 0; i < kConvChoiceCapacity; ++i) {
    cache.get(conv_choice_key(p, dev, static_cast<int>(i + 1), request()), select);
  }
  const auto fresh = cache.get(conv_choice_key(p, dev, 0, request()), select);
  EXPECT_NE(fresh.get(), choice.get());
  EXPECT_EQ(fresh->raced(), nullptr);
  EXPECT_EQ(choice->raced()->text, "second");
}

// Host time per call of the selection and of a cache hit (key + lookup), printed, not asserted:
// --gtest_also_run_disabled_tests --gtest_filter='*Timing*'.
TEST(ConvChoiceCache, DISABLED_HostTiming) {
  ConvChoiceCache cache;
  const DeviceDescription dev = h200(true);
  for (const Spec& spec : shapes()) {
    if (spec.dtype != DType::bf16 || spec.out_dtype != DType::bf16) continue;
    const ConvProblem p = make_problem(spec);
    const ConvRequest r = request();
    constexpr int kCalls = 20000;
    std::size_t sink = 0;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) {
      const ConvCandidates c = select_conv_candidates(p, dev, r);
      sink += to_string(c.first).size();
    }
    const auto t1 = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) {
      const ConvChoiceKey key = conv_choice_key(p, dev, 0, r);
      sink += cache.get(key, [&] { return select_conv_candidates(p, dev, r); })->first_text.size();
    }
    const auto t2 = std::chrono::steady_clock::now();
    const auto us = [](auto d) { return std::chrono::duration<double, std::micro>(d).count(); };
    std::printf("[ timing ] x %s w %s: select + text %.2f us, key + hit %.2f us (%zu)\n",
                shape_text(spec.x_shape).c_str(), shape_text(spec.w_shape).c_str(),
                us(t1 - t0) / kCalls, us(t2 - t1) / kCalls, sink % 10);
  }
}

}  // namespace
}  // namespace gemmkit::cuda::conv_impl
