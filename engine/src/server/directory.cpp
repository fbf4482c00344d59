#include "server/directory.h"

namespace ramp::server {

bool Directory::Owns(const PartitionId& p, uint32_t* hint, uint64_t* epoch) const {
  const uint32_t home = HomeOf(p, node_count_);
  std::shared_lock lock(mu_);
  if (!overrides_.empty()) {
    if (auto it = overrides_.find(p); it != overrides_.end()) {
      *hint = it->second.owner;
      *epoch = it->second.epoch;
      return it->second.owned;
    }
  }
  if (home == self_) {
    if (auto it = entries_.find(p); it != entries_.end()) {
      *hint = it->second.owner;
      *epoch = it->second.epoch;
      return it->second.owner == self_;
    }
    *hint = self_;
    *epoch = 1;
    return true;
  }
  *hint = home;
  *epoch = 0;
  return false;
}

protocol::Placement Directory::Lookup(const PartitionId& p, uint64_t sharer) {
  std::unique_lock lock(mu_);
  auto [it, inserted] = entries_.try_emplace(p);
  if (inserted) it->second.owner = HomeOf(p, node_count_);
  it->second.sharers.insert(sharer);
  return protocol::Placement{it->second.owner, it->second.epoch};
}

std::vector<uint64_t> Directory::Sharers(const PartitionId& p) const {
  std::shared_lock lock(mu_);
  auto it = entries_.find(p);
  if (it == entries_.end()) return {};
  return {it->second.sharers.begin(), it->second.sharers.end()};
}

void Directory::SetOwner(const PartitionId& p, uint32_t owner, uint64_t epoch) {
  std::unique_lock lock(mu_);
  Entry& e = entries_[p];
  e.owner = owner;
  e.epoch = epoch;
}

void Directory::Adopt(const PartitionId& p, uint64_t epoch) {
  std::unique_lock lock(mu_);
  overrides_[p] = Override{true, self_, epoch};
}

void Directory::Release(const PartitionId& p, uint32_t new_owner, uint64_t epoch) {
  std::unique_lock lock(mu_);
  overrides_[p] = Override{false, new_owner, epoch};
}

}  // namespace ramp::server
