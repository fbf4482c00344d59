// What the partition index keeps per key. Most keys have exactly one version, the current
// committed one, and cost one index slot (24 bytes). A key with other versions (prepared,
// or overwritten and still inside the GC grace, or a current tombstone waiting to be
// collected) also owns a KeyVersions on the heap while they exist.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>

#include "ramp/types.h"
#include "store/memory/partition_log.h"

namespace ramp::store {

struct Version {
  Timestamp ts;
  Loc loc = kNoLoc;
  // Prepared: when it was prepared. Committed (not current): when it stopped being the
  // current version, which starts its GC grace.
  uint64_t since_ms = 0;
  bool committed = false;
};

// The versions of a KeyVersions: nearly always one (a prepared version of a fresh key, or
// the one an overwrite displaced), which lives inline; more go to the heap. A bulk load
// then allocates one object per key it prepares instead of two. Not movable (the inline
// element is addressed by data_); KeyVersions is always held by pointer.
class VersionList {
 public:
  VersionList() = default;
  VersionList(const VersionList&) = delete;
  VersionList& operator=(const VersionList&) = delete;

  Version* begin() { return data_; }
  Version* end() { return data_ + size_; }
  const Version* begin() const { return data_; }
  const Version* end() const { return data_ + size_; }
  Version* data() { return data_; }
  Version& front() { return data_[0]; }
  const Version& front() const { return data_[0]; }
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

  void push_back(const Version& v) {
    if (size_ == capacity_) Grow();
    data_[size_++] = v;
  }
  // Removes *at, keeping the others' order.
  void erase(Version* at) {
    std::copy(at + 1, end(), at);
    --size_;
  }
  // Removes the versions for which pred is true, keeping the others' order.
  template <typename Pred>
  void erase_if(Pred pred) {
    size_ = static_cast<uint32_t>(std::remove_if(begin(), end(), pred) - begin());
  }

 private:
  void Grow() {
    const uint32_t capacity = capacity_ * 2;
    auto heap = std::make_unique<Version[]>(capacity);
    std::copy(begin(), end(), heap.get());
    heap_ = std::move(heap);
    data_ = heap_.get();
    capacity_ = capacity;
  }

  Version inline_[1];
  Version* data_ = inline_;
  uint32_t size_ = 0;
  uint32_t capacity_ = 1;
  std::unique_ptr<Version[]> heap_;
};

struct KeyVersions {
  uint64_t hash = 0;            // the key's index hash, to find its slot again
  uint32_t registry_index = 0;  // position in the partition's list of these
  // Set while the current version is a tombstone: when it became current. The key is
  // forgotten once that is older than the grace and no other version remains.
  uint64_t tombstone_since_ms = 0;
  VersionList versions;  // versions other than the current one, unordered
};

struct KeySlot {
  uint64_t hash = 0;     // 0: the slot is empty
  Loc current = kNoLoc;  // the current committed version (latest commit), if any
  std::unique_ptr<KeyVersions> extra;
  // Some version of the key: its record holds the key itself, which the index does not.
  Loc any_loc() const { return current != kNoLoc ? current : extra->versions.front().loc; }
};

}  // namespace ramp::store
