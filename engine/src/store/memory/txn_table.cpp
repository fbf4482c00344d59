#include "store/memory/txn_table.h"

namespace ramp::store {

PreparedTxn* TxnTable::FindPrepared(const Timestamp& ts) {
  auto it = prepared_.find(ts);
  return it == prepared_.end() ? nullptr : &it->second;
}

PreparedTxn* TxnTable::AddPrepared(const Timestamp& ts, uint64_t now_ms,
                                   std::vector<PartitionId> siblings) {
  PreparedTxn& txn = prepared_[ts];
  txn.prepared_at_ms = now_ms;
  txn.siblings = std::move(siblings);
  return &txn;
}

void TxnTable::Decide(const Timestamp& ts, TxnState state, uint64_t now_ms) {
  prepared_.erase(ts);
  if (decided_.emplace(ts, state).second) decided_order_.emplace_back(ts, now_ms);
}

TxnState TxnTable::Decided(const Timestamp& ts) const {
  auto it = decided_.find(ts);
  return it == decided_.end() ? TxnState::kUnknown : it->second;
}

void TxnTable::ForgetDecidedBefore(uint64_t cutoff_ms) {
  while (!decided_order_.empty() && decided_order_.front().second < cutoff_ms) {
    decided_.erase(decided_order_.front().first);
    decided_order_.pop_front();
  }
}

void TxnTable::Clear() {
  prepared_.clear();
  decided_.clear();
  decided_order_.clear();
}

}  // namespace ramp::store
