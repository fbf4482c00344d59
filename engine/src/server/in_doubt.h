// The transactions a restarted server found prepared and undecided in its log (DESIGN §5,
// "Acknowledgement"). A COMMIT is acknowledged before its own fdatasync, so a crash may
// lose a COMMIT that a reader already saw: the partition comes back with the transaction
// prepared and, until it is resolved, its latest committed version is the older one. Reads
// (GET, GET_GROUP) of a partition holding such a transaction are refused as Unavailable
// ("recovering") until the start-up resolution (Server::TerminationLoop) has decided every
// one of them; every other partition is served at once, and TXN_STATE is always answered
// (peers restarting at the same time ask us while we ask them). Scans need nothing: a
// SCAN_OPEN already waits for the transactions prepared below its snapshot.
// Thread-safe; Blocks() is one relaxed load while nothing is in doubt (the normal case).
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <vector>

#include "ramp/types.h"
#include "store/store.h"

namespace ramp::server {

class InDoubt {
 public:
  void Add(const std::vector<store::PendingTxn>& txns) {
    std::lock_guard lock(mu_);
    for (const auto& t : txns) {
      if (txns_.emplace(Key{t.ts, t.partition}, t).second) ++per_partition_[t.partition];
    }
    count_.store(txns_.size(), std::memory_order_release);
  }
  // The transaction is decided in this partition (by the start-up resolution, a COMMIT or
  // ABORT that came in meanwhile, or the timeout termination).
  void Resolved(const Timestamp& ts, const PartitionId& partition) {
    std::lock_guard lock(mu_);
    if (txns_.erase(Key{ts, partition}) == 0) return;
    if (--per_partition_[partition] == 0) per_partition_.erase(partition);
    count_.store(txns_.size(), std::memory_order_release);
  }
  bool empty() const { return count_.load(std::memory_order_acquire) == 0; }
  size_t size() const { return count_.load(std::memory_order_acquire); }
  // Whether reads of the partition must wait.
  bool Blocks(const PartitionId& partition) const {
    if (empty()) return false;
    std::lock_guard lock(mu_);
    return per_partition_.count(partition) != 0;
  }
  std::vector<store::PendingTxn> Snapshot() const {
    std::lock_guard lock(mu_);
    std::vector<store::PendingTxn> out;
    for (const auto& [k, t] : txns_) out.push_back(t);
    return out;
  }

 private:
  struct Key {
    Timestamp ts;
    PartitionId partition;
    auto operator<=>(const Key&) const = default;
  };
  mutable std::mutex mu_;
  std::map<Key, store::PendingTxn> txns_;
  std::map<PartitionId, size_t> per_partition_;
  std::atomic<size_t> count_{0};
};

}  // namespace ramp::server
