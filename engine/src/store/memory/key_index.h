// The hash index of a partition: key -> KeySlot, open addressing with linear probing.
// It stores no keys: a slot's key is read from one of its records in the log (key_of), so
// an 8-byte row key costs 24 bytes of slot at most 75% load instead of a heap node.
// Slot pointers stay valid until the next Insert or Erase. Not thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "store/memory/key_versions.h"

namespace ramp::store {

class KeyIndex {
 public:
  KeyIndex() { Reset(kInitialCapacity); }

  // The slot of key, whose KeyHash is hash; key_of(const KeySlot&) returns a slot's key.
  template <typename KeyOf>
  KeySlot* Find(uint64_t hash, std::string_view key, const KeyOf& key_of) {
    const uint64_t h = Stored(hash);
    for (size_t i = Home(h);; i = (i + 1) & mask_) {
      KeySlot& s = slots_[i];
      if (s.hash == 0) return nullptr;
      if (s.hash == h && key_of(s) == key) return &s;
    }
  }
  // A new empty slot for a key known to be absent; the caller gives it a version at once.
  KeySlot* Insert(uint64_t hash);
  // Removes a slot (its KeyVersions too).
  void Erase(KeySlot* slot);
  // The slot that owns extra.
  KeySlot* FindByExtra(const KeyVersions* extra);

  // Calls f(KeySlot&) for every slot until f returns false.
  template <typename F>
  void ForEach(F&& f) {
    for (KeySlot& s : slots_) {
      if (s.hash != 0 && !f(s)) return;
    }
  }
  size_t size() const { return size_; }
  void Clear() { Reset(kInitialCapacity); }

 private:
  static constexpr size_t kInitialCapacity = 16;
  // 0 marks empty slots, so a key whose hash is 0 is stored as 1 (only costs a compare).
  static uint64_t Stored(uint64_t hash) { return hash == 0 ? 1 : hash; }
  // Fibonacci hashing takes the high bits of hash * 2^64/phi: keys of one partition share
  // their hash modulo the bucket count, so the low bits of the hash are useless here.
  size_t Home(uint64_t stored) const {
    return static_cast<size_t>((stored * 0x9E3779B97F4A7C15ull) >> shift_);
  }
  void Reset(size_t capacity);
  void Grow();

  std::vector<KeySlot> slots_;
  size_t mask_ = 0;
  int shift_ = 0;
  size_t size_ = 0;
};

}  // namespace ramp::store
