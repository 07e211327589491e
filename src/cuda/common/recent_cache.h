// A small set-associative memo of recent (key -> value) pairs, for per-thread caches on the hot
// path of a call (tensor maps): kSets sets of kWays slots, a key's set chosen by its hash, a miss
// replacing the slots of its set in turn. A lookup reads one set (kWays key compares), whatever
// the capacity. CUDA-free; tested in tests/test_linear_dispatch.cpp.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

namespace gemmkit::cuda {

// Mixes `value` into `hash` (splitmix64's finalizer over the sum): distinct fields spread over
// every bit, so the low bits choose a set.
inline uint64_t mix_hash(uint64_t hash, uint64_t value) {
  uint64_t z = hash + value + 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

template <typename Key, typename Value, int kSets, int kWays>
class RecentCache {
 public:
  static_assert(kSets > 0 && (kSets & (kSets - 1)) == 0, "kSets must be a power of two");
  static constexpr int kCapacity = kSets * kWays;

  struct Slot {
    bool used = false;  // key and value are set
    Key key{};
    Value value{};
  };

  // The slot holding `key` (whose hash is `hash`), or nullptr.
  Slot* find(const Key& key, uint64_t hash) {
    Set& set = sets_[set_of(hash)];
    for (Slot& slot : set.slots) {
      if (slot.used && slot.key == key) return &slot;
    }
    return nullptr;
  }

  // The slot a key of hash `hash` replaces (the next of its set in turn), marked unused: the
  // caller writes key and value, then sets `used` (a slot whose filling threw stays unused).
  Slot& replace(uint64_t hash) {
    Set& set = sets_[set_of(hash)];
    Slot& slot = set.slots[static_cast<std::size_t>(set.next)];
    set.next = (set.next + 1) % kWays;
    slot.used = false;
    return slot;
  }

 private:
  struct Set {
    std::array<Slot, kWays> slots{};
    int next = 0;
  };
  static std::size_t set_of(uint64_t hash) {
    return static_cast<std::size_t>(hash & static_cast<uint64_t>(kSets - 1));
  }
  std::array<Set, kSets> sets_{};
};

}  // namespace gemmkit::cuda
