// The dispatcher's choice per call shape, kept for the process (host only; used by conv.cpp).
//
// select_conv_candidates (select.h) is a pure function of the problem, the device
// description and the request, and reads the tensors' addresses only through pointer_alignment
// (the largest power of two <= 256 dividing them). ConvChoiceKey holds exactly that: the
// geometry, each tensor's dtype, shape, strides and pointer alignment, the description, the
// device index and the request.
// Equal keys give equal choices, so a hit returns what a fresh selection would, without the
// selection's work: several microseconds per call of host time, most of it building the reason
// strings (CallInfo::reason) that every step of the selection writes. The text of each choice
// (to_string) is kept with it for the same reason.
//
// The cache is bounded (kConvChoiceCapacity keys; past that it starts over), thread-safe, and a
// selection that throws (a forced algo that cannot serve) is not kept. Each choice also keeps
// its race's outcome (auto's race between an own path and cuDNN), inside the same bound: the one
// content that timing decides. Deterministic mode is part of the request, so its choices have
// keys of their own, never race, and race_step never reads a kept outcome for them.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "cuda/conv/select.h"

namespace gemmkit::cuda::conv_impl {

struct ConvChoiceKey {
  // The geometry (7 + 8 x 3), four tensors of rank <= 5 (4 x 13), the device (10), the
  // request (7): 100 at most.
  static constexpr int kMaxNumbers = 112;
  std::array<int64_t, kMaxNumbers> numbers{};
  int count = 0;
  std::string algo_origin, cudnn_why_not;
  std::size_t hash = 0;

  void push(int64_t value) { numbers.at(static_cast<std::size_t>(count++)) = value; }
  bool operator==(const ConvChoiceKey& other) const {
    if (hash != other.hash || count != other.count) return false;
    for (int i = 0; i < count; ++i) {
      if (numbers[static_cast<std::size_t>(i)] != other.numbers[static_cast<std::size_t>(i)]) {
        return false;
      }
    }
    return algo_origin == other.algo_origin && cudnn_why_not == other.cudnn_why_not;
  }
};

struct ConvChoiceKeyHash {
  std::size_t operator()(const ConvChoiceKey& key) const { return key.hash; }
};

inline ConvChoiceKey conv_choice_key(const detail::ConvProblem& p, const DeviceDescription& dev,
                                     int device, const ConvRequest& request) {
  ConvChoiceKey k;
  k.push(p.spatial);
  k.push(p.batch);
  k.push(p.in_channels);
  k.push(p.out_channels);
  k.push(p.groups);
  k.push(p.flip ? 1 : 0);
  k.push(p.has_bias ? 1 : 0);
  for (int d = 0; d < p.spatial; ++d) {
    for (const int64_t* field : {p.in_size, p.kernel_size, p.out_size, p.stride, p.padding_lo,
                                 p.padding_hi, p.kernel_dilation, p.input_dilation}) {
      k.push(field[d]);
    }
  }
  const auto push_tensor = [&](const Tensor& t) {
    k.push(static_cast<int64_t>(t.dtype));
    k.push(t.rank);
    k.push(pointer_alignment(t.data));
    for (int d = 0; d < t.rank; ++d) {
      k.push(t.shape[d]);
      k.push(t.strides[d]);
    }
  };
  push_tensor(p.x);
  push_tensor(p.weight);
  push_tensor(p.out);
  if (p.has_bias) push_tensor(p.bias);
  k.push(device);
  for (const int64_t value :
       {int64_t{dev.sm_major}, int64_t{dev.sm_minor}, int64_t{dev.multiprocessors},
        int64_t{dev.max_grid_x}, int64_t{dev.max_grid_y}, int64_t{dev.max_grid_z},
        int64_t{dev.shared_per_block_optin}, int64_t{dev.shared_per_multiprocessor},
        int64_t{dev.cudnn ? 1 : 0}}) {
    k.push(value);
  }
  k.push(request.workspace_bytes);
  k.push(request.cudnn_in_auto ? 1 : 0);
  k.push(static_cast<int64_t>(request.algo));
  k.push(static_cast<int64_t>(request.small_o));
  k.push(static_cast<int64_t>(request.depthwise));
  k.push(static_cast<int64_t>(request.implicit));
  k.push(static_cast<int64_t>(request.wgmma_schedule));
  k.push(static_cast<int64_t>(request.wgmma_o_tile));
  k.push(static_cast<int64_t>(request.wgmma_block_c));
  k.push(static_cast<int64_t>(request.wgmma_halo));
  k.push(request.deterministic ? 1 : 0);
  k.push(request.deterministic_from_env ? 1 : 0);  // reasons quote where the mode came from
  k.algo_origin = request.algo_origin;
  k.cudnn_why_not = dev.cudnn_why_not;  // constant per process; reasons quote it
  // A multiply-xorshift mix per number (a word at a time: the key is ~100 numbers), then the
  // strings' hashes.
  uint64_t h = 0x9e3779b97f4a7c15ull;
  const auto mix = [&h](uint64_t v) {
    h = (h ^ v) * 0xff51afd7ed558ccdull;
    h ^= h >> 32;
  };
  for (int i = 0; i < k.count; ++i)
    mix(static_cast<uint64_t>(k.numbers[static_cast<std::size_t>(i)]));
  const std::hash<std::string> text;
  for (const std::string* part : {&k.algo_origin, &k.cudnn_why_not}) mix(text(*part));
  k.hash = static_cast<std::size_t>(h);
  return k;
}

// The outcome of auto's race between an own path and cuDNN for a call shape
// (ConvCandidates::race; conv.cpp runs it): the chosen config and its text.
struct RaceResult {
  ConvConfig chosen;
  std::string text;  // to_string(chosen)
};

// A kept choice: select_conv_candidates' result, the text of the candidate that runs unless a
// race picks, and the race's outcome once raced. The outcome lives with the choice, so the
// cache's bound holds it too (a shape dropped from the cache is raced again when it returns).
struct ConvChoice {
  ConvCandidates candidates;
  std::string first_text;  // to_string(candidates.first)

  // The race's outcome, or null before the race.
  std::shared_ptr<const RaceResult> raced() const {
    std::lock_guard<std::mutex> lock(race_mutex_);
    return race_;
  }
  // Keeps `result` unless a race of another thread was kept first; returns the kept one.
  std::shared_ptr<const RaceResult> keep_race(std::shared_ptr<const RaceResult> result) const {
    std::lock_guard<std::mutex> lock(race_mutex_);
    if (race_ == nullptr) race_ = std::move(result);
    return race_;
  }

 private:
  mutable std::mutex race_mutex_;
  mutable std::shared_ptr<const RaceResult> race_;
};

// What a call of a kept choice runs (conv.cpp): the race's kept outcome (`kept`), a race now
// (`race`: no outcome kept yet; the call races if it may time, else runs the static choice), or,
// with neither, the static choice. Deterministic mode, and a choice that does not race, take the
// static choice without reading the kept outcome.
struct RaceStep {
  std::shared_ptr<const RaceResult> kept;
  bool race = false;
};

inline RaceStep race_step(const ConvChoice& choice, const ConvRequest& request) {
  RaceStep step;
  if (request.deterministic || !choice.candidates.race) return step;
  step.kept = choice.raced();
  step.race = step.kept == nullptr;
  return step;
}

constexpr std::size_t kConvChoiceCapacity = 4096;

class ConvChoiceCache {
 public:
  // The kept choice for `key`, else select() (which may throw: nothing is kept then), kept.
  std::shared_ptr<const ConvChoice> get(const ConvChoiceKey& key,
                                        const std::function<ConvCandidates()>& select) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const auto it = choices_.find(key);
      if (it != choices_.end()) return it->second;
    }
    auto choice = std::make_shared<ConvChoice>();
    choice->candidates = select();
    choice->first_text = to_string(choice->candidates.first);
    std::lock_guard<std::mutex> lock(mutex_);
    if (choices_.size() >= kConvChoiceCapacity) choices_.clear();
    return choices_.emplace(key, std::move(choice)).first->second;
  }

  std::size_t size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return choices_.size();
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<ConvChoiceKey, std::shared_ptr<const ConvChoice>, ConvChoiceKeyHash> choices_;
};

}  // namespace gemmkit::cuda::conv_impl
