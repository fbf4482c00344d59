// What one partition knows of transactions: those prepared here and not yet decided (with
// their keys, for COMMIT and ABORT, and their sibling partitions, for termination), and
// the recent decisions (so COMMIT and ABORT are idempotent, QueryTxn can answer, and an
// aborted timestamp stays fenced against a late PREPARE). Not thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ramp/types.h"
#include "store/store_types.h"

namespace ramp::store {

struct PreparedTxn {
  uint64_t prepared_at_ms = 0;
  std::vector<PartitionId> siblings;  // every partition the transaction wrote, this one too
  std::vector<std::string> keys;      // the keys it prepared here
};

class TxnTable {
 public:
  PreparedTxn* FindPrepared(const Timestamp& ts);
  PreparedTxn* AddPrepared(const Timestamp& ts, uint64_t now_ms, std::vector<PartitionId> siblings);
  // Records the decision (the first one sticks) and forgets the prepared entry.
  void Decide(const Timestamp& ts, TxnState state, uint64_t now_ms);
  // kCommitted / kAborted while the decision is remembered, otherwise kUnknown.
  TxnState Decided(const Timestamp& ts) const;
  // Forgets decisions taken before cutoff_ms.
  void ForgetDecidedBefore(uint64_t cutoff_ms);

  template <typename F>
  void ForEachPrepared(F&& f) const {
    for (const auto& [ts, txn] : prepared_) f(ts, txn);
  }
  size_t prepared() const { return prepared_.size(); }
  void Clear();

 private:
  std::unordered_map<Timestamp, PreparedTxn, TimestampHash> prepared_;
  std::unordered_map<Timestamp, TxnState, TimestampHash> decided_;
  // Decisions in the order taken (the clock is monotonic), to forget the oldest first.
  std::deque<std::pair<Timestamp, uint64_t>> decided_order_;
};

}  // namespace ramp::store
