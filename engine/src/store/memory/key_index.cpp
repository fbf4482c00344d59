#include "store/memory/key_index.h"

#include <bit>
#include <utility>

namespace ramp::store {

void KeyIndex::Reset(size_t capacity) {
  slots_.clear();
  slots_.resize(capacity);
  mask_ = capacity - 1;
  shift_ = 64 - std::countr_zero(capacity);
  size_ = 0;
}

KeySlot* KeyIndex::Insert(uint64_t hash) {
  if ((size_ + 1) * 4 > slots_.size() * 3) Grow();
  const uint64_t h = Stored(hash);
  size_t i = Home(h);
  while (slots_[i].hash != 0) i = (i + 1) & mask_;
  slots_[i].hash = h;
  ++size_;
  return &slots_[i];
}

void KeyIndex::Erase(KeySlot* slot) {
  // Backward-shift deletion: pull later members of the probe run into the hole, so no
  // tombstones accumulate and lookups stay short.
  size_t hole = static_cast<size_t>(slot - slots_.data());
  slots_[hole] = KeySlot();
  --size_;
  for (size_t j = (hole + 1) & mask_; slots_[j].hash != 0; j = (j + 1) & mask_) {
    const size_t home = Home(slots_[j].hash);
    // slots_[j] may move to the hole unless its home lies cyclically in (hole, j].
    if (((j - home) & mask_) >= ((j - hole) & mask_)) {
      slots_[hole] = std::move(slots_[j]);
      slots_[j] = KeySlot();
      hole = j;
    }
  }
}

KeySlot* KeyIndex::FindByExtra(const KeyVersions* extra) {
  for (size_t i = Home(Stored(extra->hash));; i = (i + 1) & mask_) {
    KeySlot& s = slots_[i];
    if (s.hash == 0) return nullptr;
    if (s.extra.get() == extra) return &s;
  }
}

void KeyIndex::Grow() {
  std::vector<KeySlot> old = std::move(slots_);
  Reset(old.size() * 2);
  for (KeySlot& s : old) {
    if (s.hash == 0) continue;
    size_t i = Home(s.hash);
    while (slots_[i].hash != 0) i = (i + 1) & mask_;
    slots_[i] = std::move(s);
    ++size_;
  }
}

}  // namespace ramp::store
