#include "server/lock_table.h"

#include <algorithm>
#include <cstring>

namespace ramp::server {

std::string LockTable::LockName(const PartitionId& part, std::string_view key) {
  std::string name(12 + key.size(), '\0');
  std::memcpy(name.data(), &part.keyspace, 8);
  std::memcpy(name.data() + 8, &part.bucket, 4);
  std::memcpy(name.data() + 12, key.data(), key.size());
  return name;
}

LockTable::Shard& LockTable::ShardOf(const std::string& name) {
  return shards_[KeyHash(name) % kShards];
}

bool LockTable::Acquire(const Owner& owner, const PartitionId& part, std::string_view key,
                        bool exclusive) {
  std::string name = LockName(part, key);
  Shard& shard = ShardOf(name);
  bool newly_held = false;
  {
    std::lock_guard lock(shard.mu);
    Lock& l = shard.locks[name];
    const bool mine =
        std::find(l.holders.begin(), l.holders.end(), owner) != l.holders.end();
    if (l.holders.empty()) {
      l.exclusive = exclusive;
      l.holders.push_back(owner);
      newly_held = true;
    } else if (mine) {
      if (exclusive && !l.exclusive) {
        if (l.holders.size() != 1) return false;  // upgrade blocked by other readers
        l.exclusive = true;
      }
    } else {
      if (exclusive || l.exclusive) return false;
      l.holders.push_back(owner);
      newly_held = true;
    }
  }
  if (newly_held) {
    std::lock_guard lock(held_mu_);
    held_[owner].push_back(std::move(name));
  }
  return true;
}

void LockTable::ReleaseAll(const Owner& owner) {
  std::vector<std::string> names;
  {
    std::lock_guard lock(held_mu_);
    auto it = held_.find(owner);
    if (it == held_.end()) return;
    names = std::move(it->second);
    held_.erase(it);
  }
  for (const auto& name : names) {
    Shard& shard = ShardOf(name);
    std::lock_guard lock(shard.mu);
    auto it = shard.locks.find(name);
    if (it == shard.locks.end()) continue;
    auto& holders = it->second.holders;
    holders.erase(std::remove(holders.begin(), holders.end(), owner), holders.end());
    if (holders.empty()) shard.locks.erase(it);
  }
}

size_t LockTable::locked_keys() const {
  size_t n = 0;
  for (const auto& s : shards_) {
    std::lock_guard lock(s.mu);
    n += s.locks.size();
  }
  return n;
}

}  // namespace ramp::server
