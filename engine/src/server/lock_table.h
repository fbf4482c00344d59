// Strict two-phase locking for the benchmark baseline (paper 000 compares RAMP with it).
// Locks are no-wait: a request that conflicts fails at once and the client releases what
// it holds and retries, so there are no deadlocks and no worker ever blocks.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ramp/types.h"

namespace ramp::server {

class LockTable {
 public:
  using Owner = std::pair<uint64_t, uint64_t>;  // (client id, client's transaction number)

  // Acquires a lock; false on conflict. Re-acquiring (or upgrading a sole shared lock)
  // succeeds.
  bool Acquire(const Owner& owner, const PartitionId& part, std::string_view key, bool exclusive);
  // Releases every lock of the owner.
  void ReleaseAll(const Owner& owner);
  size_t locked_keys() const;

 private:
  struct Lock {
    bool exclusive = false;
    std::vector<Owner> holders;
  };
  struct OwnerHash {
    size_t operator()(const Owner& o) const noexcept { return o.first * 31 + o.second; }
  };
  static constexpr int kShards = 64;
  struct Shard {
    mutable std::mutex mu;
    std::unordered_map<std::string, Lock> locks;  // keyspace|bucket|key
  };
  static std::string LockName(const PartitionId& part, std::string_view key);
  Shard& ShardOf(const std::string& name);

  Shard shards_[kShards];
  std::mutex held_mu_;
  std::unordered_map<Owner, std::vector<std::string>, OwnerHash> held_;
};

}  // namespace ramp::server
