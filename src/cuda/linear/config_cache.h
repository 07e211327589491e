// A small per-thread memo of select_linear_config's answers, so that a call repeating a recent
// shape skips the selection (and the strings it builds for the kernel name and the reason).
//
// select_linear_config is a pure function of (shape, device description, forced name, PDL): the
// key holds all of them but the device description, which is fixed per device ordinal for the
// life of the process (properties are cached and the GEMMKIT_LINEAR_* settings are read once), so
// the ordinal stands for it. A hit returns the config chosen before, the same bits by
// construction. Host code only; tested in tests/test_linear_dispatch.cpp.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <utility>

#include "cuda/linear/linear_config.h"

namespace gemmkit::cuda::linear_family {

struct LinearConfigKey {
  int device = 0;
  LinearShape shape;
  std::string forced;  // the forced kernel name ("" or "auto" for the dispatcher)
  bool pdl = false;

  bool matches(int other_device, const LinearShape& s, const std::string& other_forced,
               bool other_pdl) const {
    return device == other_device && shape.n == s.n && shape.m == s.m && shape.k == s.k &&
           shape.in == s.in && shape.out == s.out && shape.has_bias == s.has_bias &&
           shape.tma_compatible == s.tma_compatible && shape.batch_invariant == s.batch_invariant &&
           pdl == other_pdl && forced == other_forced;
  }
};

struct CachedLinearConfig {
  LinearConfig config;
  std::string kernel;  // "cuda.linear." + config.name, as CallInfo reports it
};

// Round-robin over kEntries slots: the shapes of a model's decode step (a handful of layers)
// stay resident; a new shape replaces the oldest entry.
class LinearConfigCache {
 public:
  static constexpr int kEntries = 16;

  // The entry for these arguments of select_linear_config on `device`, or nullptr.
  CachedLinearConfig* find(int device, const LinearShape& shape, const std::string& forced,
                           bool pdl) {
    for (int i = 0; i < used_; ++i) {
      Slot& slot = slots_[static_cast<std::size_t>(i)];
      if (slot.key.matches(device, shape, forced, pdl)) return &slot.value;
    }
    return nullptr;
  }

  // Stores `config` for `key` (replacing the oldest entry when full) and returns the entry.
  CachedLinearConfig& store(LinearConfigKey key, LinearConfig config) {
    Slot& slot = slots_[static_cast<std::size_t>(next_)];
    next_ = (next_ + 1) % kEntries;
    if (used_ < kEntries) ++used_;
    slot.key = std::move(key);
    set(slot.value, std::move(config));
    return slot.value;
  }

  // Replaces an entry's config (a launch found the first choice unlaunchable on this device).
  static void set(CachedLinearConfig& entry, LinearConfig config) {
    entry.kernel = "cuda.linear." + config.name;
    entry.config = std::move(config);
  }

  int size() const { return used_; }

 private:
  struct Slot {
    LinearConfigKey key;
    CachedLinearConfig value;
  };
  std::array<Slot, kEntries> slots_{};
  int next_ = 0;
  int used_ = 0;
};

}  // namespace gemmkit::cuda::linear_family
