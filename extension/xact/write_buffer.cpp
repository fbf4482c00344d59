#include "xact/write_buffer.hpp"

#include <utility>

namespace pgramp {

void WriteBuffer::Keyspace::Sort() const {
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

BufferedWrite& WriteBuffer::Slot(const KeyspaceRef& ks, EntryKey key, SubXactIdT sub) {
  Keyspace& k = keyspaces_.try_emplace(ks.id, ks).first->second;
  auto it = k.map_.find(key);
  if (sub > kTopSubXact) {
    // Top-level writes need no undo: a top-level abort discards the whole buffer.
    std::optional<BufferedWrite> previous;
    if (it != k.map_.end()) previous = it->second;
    undo_.push_back(Undo{ks.id, key, std::move(previous), sub});
  }
  if (it == k.map_.end()) {
    it = k.map_.emplace(key, BufferedWrite{}).first;
    k.order_.push_back(key);
    size_++;
  }
  return it->second;
}

void WriteBuffer::Insert(const KeyspaceRef& ks, EntryKey key, std::string value, CommandIdT cid,
                         SubXactIdT sub) {
  BufferedWrite& w = Slot(ks, key, sub);
  w.value = std::move(value);
  w.inserted = true;
  w.insert_cid = cid;
  w.deleted = false;
  w.delete_cid = 0;
}

void WriteBuffer::UpdateInPlace(const KeyspaceRef& ks, EntryKey key, std::string value,
                                CommandIdT cid, SubXactIdT sub, const ramp::Timestamp& expected) {
  BufferedWrite& w = Slot(ks, key, sub);
  w.value = std::move(value);
  w.inserted = true;
  w.insert_cid = cid;
  w.deleted = false;
  w.delete_cid = 0;
  w.remote = true;
  w.in_place = true;
  w.has_expected = true;
  w.expected = expected;
}

void WriteBuffer::Delete(const KeyspaceRef& ks, EntryKey key, CommandIdT cid, SubXactIdT sub,
                         bool remote, const ramp::Timestamp* expected) {
  BufferedWrite& w = Slot(ks, key, sub);
  w.deleted = true;
  w.delete_cid = cid;
  if (remote) w.remote = true;
  if (expected != nullptr && !w.has_expected) {
    w.has_expected = true;
    w.expected = *expected;
  }
}

void WriteBuffer::RollbackSubtransaction(SubXactIdT sub) {
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

void WriteBuffer::DiscardKeyspace(ramp::KeyspaceId ks) {
  auto it = keyspaces_.find(ks);
  if (it == keyspaces_.end()) return;
  size_ -= it->second.map_.size();
  it->second.map_.clear();
  it->second.order_.clear();
  it->second.sorted_ = 0;
  std::erase_if(undo_, [ks](const Undo& u) { return u.keyspace == ks; });
}

void WriteBuffer::Clear() {
  keyspaces_.clear();
  undo_.clear();
  size_ = 0;
}

}  // namespace pgramp
