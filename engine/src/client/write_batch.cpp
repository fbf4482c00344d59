// WriteBatch: the client's one write buffer (ramp/write_batch.h).
#include "ramp/write_batch.h"

#include <cstring>
#include <tuple>
#include <utility>

#include "common/little_endian.h"

namespace ramp {

namespace {
std::string KeyIndexKey(KeyspaceId keyspace, std::string_view key) {
  std::string k(8 + key.size(), '\0');
  std::memcpy(k.data(), &keyspace, 8);
  std::memcpy(k.data() + 8, key.data(), key.size());
  return k;
}
}  // namespace

void WriteBatch::Keyspace::Sort() const {
  if (sorted_ == order_.size()) return;
  const auto tail = order_.begin() + static_cast<ptrdiff_t>(sorted_);
  // Rows arrive with growing row ids: the tail is usually sorted and after the prefix.
  if (!std::is_sorted(tail, order_.end())) std::sort(tail, order_.end());
  if (sorted_ > 0 && !(order_[sorted_ - 1] < *tail)) {
    std::inplace_merge(order_.begin(), tail, order_.end());
  }
  order_.erase(std::unique(order_.begin(), order_.end()), order_.end());
  sorted_ = order_.size();
}

Status WriteBatch::CheckValue(size_t bytes, const char* what) const {
  if (bytes <= limits_.max_value_bytes) return Status::OK();
  return Status::TooLarge(std::string(what) + " of " + std::to_string(bytes) +
                          " bytes exceeds the limit of " + std::to_string(limits_.max_value_bytes) +
                          " bytes");
}

Status WriteBatch::CheckKey(std::string_view key) const {
  if (key.size() <= limits_.max_key_bytes) return Status::OK();
  return Status::TooLarge("key of " + std::to_string(key.size()) + " bytes exceeds the limit of " +
                          std::to_string(limits_.max_key_bytes) + " bytes");
}

BatchEntry& WriteBatch::Slot(const KeyspaceRef& ks, EntryKey key, SubTxnId sub) {
  Keyspace& k = keyspaces_.try_emplace(ks.id, ks).first->second;
  auto it = k.map_.end();
  bool added = false;
  if (sub > kTopSubTxn) {
    // Top-level writes need no undo: a top-level abort discards the whole batch.
    it = k.map_.find(key);
    std::optional<BatchEntry> previous;
    if (it != k.map_.end()) previous = it->second;
    undo_.push_back(Undo{ks.id, key, std::move(previous), sub});
    if (it == k.map_.end()) {
      it = k.map_.emplace(key, BatchEntry{}).first;
      added = true;
    }
  } else {
    // One hash lookup (every row of a COPY is a new key), not a find and then an insert.
    std::tie(it, added) = k.map_.try_emplace(key);
  }
  if (added) {
    k.order_.push_back(key);
    size_++;
  }
  BatchEntry& w = it->second;
  if (w.streamed) {
    // Committed ahead: what this write makes of the key replaces that version.
    w.streamed = false;
    w.remote = true;
  }
  return w;
}

bool WriteBatch::SetStreamed(KeyspaceId ks, EntryKey key, bool streamed) {
  auto k = keyspaces_.find(ks);
  if (k == keyspaces_.end()) return false;
  auto it = k->second.map_.find(key);
  if (it == k->second.map_.end()) return false;
  it->second.streamed = streamed;
  return true;
}

Status WriteBatch::Insert(const KeyspaceRef& ks, EntryKey key, std::string value, CommandId cid,
                          SubTxnId sub) {
  RAMP_RETURN_IF_ERROR(CheckValue(value.size(), "a row"));
  BatchEntry& w = Slot(ks, key, sub);
  w.value = std::move(value);
  w.inserted = true;
  w.insert_cid = cid;
  w.deleted = false;
  w.moved = false;
  w.moved_to = 0;
  w.delete_cid = 0;
  return Status::OK();
}

Status WriteBatch::UpdateInPlace(const KeyspaceRef& ks, EntryKey key, std::string value,
                                 CommandId cid, SubTxnId sub, const Timestamp& expected) {
  RAMP_RETURN_IF_ERROR(CheckValue(value.size(), "a row"));
  BatchEntry& w = Slot(ks, key, sub);
  w.value = std::move(value);
  w.inserted = true;
  w.insert_cid = cid;
  w.deleted = false;
  w.moved = false;
  w.moved_to = 0;
  w.delete_cid = 0;
  w.remote = true;
  w.in_place = true;
  w.has_expected = true;
  w.expected = expected;
  return Status::OK();
}

std::string MovedTombstone(uint64_t moved_to) {
  std::string v(kMovedTombstone);
  if (moved_to != 0) {
    uint8_t id[8];
    le::Store64(id, moved_to);
    v.append(reinterpret_cast<const char*>(id), sizeof(id));
  }
  return v;
}

bool ParseMovedTombstone(std::string_view value, uint64_t* moved_to) {
  *moved_to = 0;
  if (!value.starts_with(kMovedTombstone)) return false;
  value.remove_prefix(kMovedTombstone.size());
  if (value.size() == 8) *moved_to = le::Load64(reinterpret_cast<const uint8_t*>(value.data()));
  return true;
}

void WriteBatch::SetMovedTo(KeyspaceId ks, EntryKey key, uint64_t rowid) {
  auto k = keyspaces_.find(ks);
  if (k == keyspaces_.end()) return;
  auto it = k->second.map_.find(key);
  if (it != k->second.map_.end() && it->second.deleted && it->second.moved) {
    it->second.moved_to = rowid;
  }
}

void WriteBatch::Delete(const KeyspaceRef& ks, EntryKey key, CommandId cid, SubTxnId sub,
                        bool remote, const Timestamp* expected, bool moved) {
  BatchEntry& w = Slot(ks, key, sub);
  w.deleted = true;
  w.moved = moved;
  w.moved_to = 0;
  w.delete_cid = cid;
  if (remote) w.remote = true;
  if (expected != nullptr && !w.has_expected) {
    w.has_expected = true;
    w.expected = *expected;
  }
}

void WriteBatch::RollbackSubtransaction(SubTxnId sub) {
  // Subtransaction ids grow monotonically within a transaction, and the log is in write
  // order: everything written since `sub` started carries an id >= sub.
  while (!undo_.empty() && undo_.back().sub >= sub) {
    Undo& u = undo_.back();
    auto ks = keyspaces_.find(u.keyspace);
    if (ks != keyspaces_.end()) {
      auto& map = ks->second.map_;
      if (u.previous.has_value()) {
        auto [it, inserted] = map.insert_or_assign(u.key, std::move(*u.previous));
        if (inserted) {
          ks->second.order_.push_back(u.key);
          size_++;
        }
      } else if (map.erase(u.key) > 0) {
        size_--;  // its key stays in order_; ordered visits skip it
      }
    }
    undo_.pop_back();
  }
}

void WriteBatch::DiscardKeyspace(KeyspaceId ks) {
  auto it = keyspaces_.find(ks);
  if (it == keyspaces_.end()) return;
  size_ -= it->second.map_.size();
  it->second.map_.clear();
  it->second.order_.clear();
  it->second.sorted_ = 0;
  std::erase_if(undo_, [ks](const Undo& u) { return u.keyspace == ks; });
}

void WriteBatch::Buffer(KeyWrite w) {
  std::string k = KeyIndexKey(w.keyspace, w.key);
  auto it = key_index_.find(k);
  if (it != key_index_.end()) {
    KeyWrite& old = key_writes_[it->second];
    // The first expected version of a key is the one the transaction read from the servers.
    if (old.has_expected && !w.has_expected) {
      w.has_expected = true;
      w.expected = old.expected;
    }
    old = std::move(w);
    return;
  }
  key_index_.emplace(std::move(k), key_writes_.size());
  key_writes_.push_back(std::move(w));
}

Status WriteBatch::PutKey(KeyspaceId ks, std::string_view key, std::string_view value,
                          const Timestamp* expected) {
  RAMP_RETURN_IF_ERROR(CheckKey(key));
  RAMP_RETURN_IF_ERROR(CheckValue(value.size()));
  KeyWrite w;
  w.keyspace = ks;
  w.key.assign(key);
  w.value.assign(value);
  if (expected != nullptr) {
    w.has_expected = true;
    w.expected = *expected;
  }
  Buffer(std::move(w));
  return Status::OK();
}

Status WriteBatch::DeleteKey(KeyspaceId ks, std::string_view key, const Timestamp* expected) {
  RAMP_RETURN_IF_ERROR(CheckKey(key));
  KeyWrite w;
  w.keyspace = ks;
  w.key.assign(key);
  w.tombstone = true;
  if (expected != nullptr) {
    w.has_expected = true;
    w.expected = *expected;
  }
  Buffer(std::move(w));
  return Status::OK();
}

const KeyWrite* WriteBatch::FindKey(KeyspaceId ks, std::string_view key) const {
  if (key_writes_.empty()) return nullptr;
  auto it = key_index_.find(KeyIndexKey(ks, key));
  return it == key_index_.end() ? nullptr : &key_writes_[it->second];
}

void WriteBatch::Clear() {
  // An empty batch (a read-only transaction ending) has nothing to free or rehash.
  if (keyspaces_.empty() && undo_.empty() && size_ == 0 && key_writes_.empty() &&
      key_index_.empty()) {
    return;
  }
  keyspaces_.clear();
  undo_.clear();
  size_ = 0;
  key_writes_.clear();
  key_index_.clear();
}

}  // namespace ramp
