// The directory of partition placement (DESIGN §7, paper 004). Every partition has a home
// server (HomeOf: hash mod N, static) that holds its entry: owner, epoch, sharers (clients
// that cached the entry and must hear of a move). Placement starts at owner = home; nothing
// else in the server assumes that it stays so: ownership is asked of the directory.
#pragma once

#include <cstdint>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <unordered_map>
#include <vector>

#include "protocol/messages.h"
#include "ramp/types.h"

namespace ramp::server {

class Directory {
 public:
  Directory(uint32_t self, uint32_t node_count) : self_(self), node_count_(node_count) {}

  uint32_t self() const { return self_; }
  uint32_t node_count() const { return node_count_; }
  bool IsHome(const PartitionId& p) const { return HomeOf(p, node_count_) == self_; }

  // Whether this server serves the partition now; when not, *hint is where to go (the
  // owner if this server is its home, the home otherwise) and *epoch the entry's epoch.
  bool Owns(const PartitionId& p, uint32_t* hint, uint64_t* epoch) const;

  // At the home: the entry, recording the asking client as a sharer.
  protocol::Placement Lookup(const PartitionId& p, uint64_t sharer);
  std::vector<uint64_t> Sharers(const PartitionId& p) const;

  // Placement changes (migration): the home publishes a new owner; owners take or drop
  // partitions.
  void SetOwner(const PartitionId& p, uint32_t owner, uint64_t epoch);
  void Adopt(const PartitionId& p, uint64_t epoch);
  void Release(const PartitionId& p, uint32_t new_owner, uint64_t epoch);

 private:
  struct Entry {
    uint32_t owner = 0;
    uint64_t epoch = 1;
    std::set<uint64_t> sharers;
  };
  struct Override {
    bool owned = false;
    uint32_t owner = 0;
    uint64_t epoch = 0;
  };
  const uint32_t self_;
  const uint32_t node_count_;
  mutable std::shared_mutex mu_;
  // Entries exist only for partitions this server is home of and that were looked up or
  // moved; absent entries mean owner = home, epoch 1.
  std::unordered_map<PartitionId, Entry, PartitionIdHash> entries_;
  // Ownership that differs from the static default (after migrations).
  std::unordered_map<PartitionId, Override, PartitionIdHash> overrides_;
};

}  // namespace ramp::server
