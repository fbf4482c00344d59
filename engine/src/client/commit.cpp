// Client::Write: a WriteBatch becomes one RAMP PUT (or one strict-2PL commit). The batch's
// values are sent from where the batch holds them; only row keys are encoded here.
#include <deque>

#include "client/transaction_state.h"

namespace ramp {

Status CommitBatch(Client::Impl& c, const WriteBatch& batch, S2plLocks& locks,
                   Timestamp* commit_ts) {
  // The one place that decides grouping for a write: a row keyspace's ref defines it (every
  // reader of the keyspace defines it the same way); keys of the caller's layout follow the
  // client's definition (Client::DefineKeyspace).
  // The row entries are visited once: a bulk load's are hundreds of thousands, most of them
  // written ahead and not sent. The items are made, then counted against the limit.
  for (const auto& [id, ks] : batch.keyspaces()) {
    const KeyspaceRef& ref = ks.ref();
    c.keyspaces[id] = KeyspaceDef{ref.buckets == 0 ? c.default_buckets : ref.buckets, ref.grouped};
  }
  std::deque<std::string> row_keys;  // the items' keys point here: a deque never moves them
  std::vector<WriteItem> items;
  std::deque<std::string> moved_values;  // the items' tombstone values point here
  for (const auto& [id, ks] : batch.keyspaces()) {
    const bool grouped = ks.ref().grouped;
    for (const auto& [key, w] : ks.entries()) {
      if (!w.sent()) continue;
      row_keys.push_back(grouped ? EncodeGroupKey(RowKey(key.group), RowKey(key.rowid))
                                 : RowKey(key.rowid));
      WriteItem& it = items.emplace_back();
      it.keyspace = id;
      it.key = row_keys.back();
      if (!w.deleted) {
        it.value = w.value;
      } else if (w.moved) {
        it.value = moved_values.emplace_back(MovedTombstone(w.moved_to));
      }
      it.tombstone = w.deleted;
      it.grouped = grouped;
      it.has_expected = w.has_expected;
      it.expected = w.expected;
    }
  }
  for (const KeyWrite& w : batch.key_writes()) {
    auto def = c.keyspaces.find(w.keyspace);
    WriteItem& it = items.emplace_back();
    it.keyspace = w.keyspace;
    it.key = w.key;
    it.value = w.value;
    it.tombstone = w.tombstone;
    it.grouped = def != c.keyspaces.end() && def->second.grouped;
    it.has_expected = w.has_expected;
    it.expected = w.expected;
  }
  if (items.size() > c.options.max_batch_items) {
    return Status::TooLarge("transaction of " + std::to_string(items.size()) +
                            " writes exceeds the batch limit of " +
                            std::to_string(c.options.max_batch_items));
  }
  if (c.options.protocol == Protocol::kS2pl) return S2plCommit(c, locks, items);
  return RampCommit(c, items, commit_ts);
}

WriteLimits Client::write_limits() const {
  return WriteLimits{impl_->options.max_key_bytes, impl_->options.max_value_bytes};
}

Status Client::Write(const WriteBatch& batch, Timestamp* commit_ts, uint64_t release_intents_of) {
  impl_->release_intents_with_commit = release_intents_of;
  Status st = Write(batch, commit_ts);
  impl_->release_intents_with_commit = 0;
  return st;
}

Status Client::Write(const WriteBatch& batch, Timestamp* commit_ts) {
  impl_->TakePushes();  // placements the homes pushed (the PUT routes by them)
  S2plLocks locks;
  locks.txn_number = impl_->next_txn++;
  Status st = CommitBatch(*impl_, batch, locks, commit_ts);
  S2plRelease(*impl_, locks);  // nothing to do unless a strict-2PL commit stopped half-way
  return st;
}

}  // namespace ramp
