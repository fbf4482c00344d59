#include "fdw/writes.hpp"

#include <memory>

#include "xact/session.hpp"
#include "xact/xact.hpp"

#include "boundary/boundary.hpp"
#include "fdw/fdw.hpp"

namespace pgramp::fdw {

namespace {

std::unique_ptr<ForeignWrites> current;

constexpr size_t kMaxVersions = 256 * 1024;

void FlushBeforeCommit() {
  ForeignWrites* w = ForeignWrites::GetIfAny();
  if (w == nullptr || w->empty()) return;
  w->FlushInto(Xact().writes);
  ForeignWrites::End();
}

void OnXactEvent(XactEvent event, void* arg) {
  switch (event) {
    case XACT_EVENT_COMMIT:
    case XACT_EVENT_ABORT:
    case XACT_EVENT_PREPARE:
    case XACT_EVENT_PARALLEL_COMMIT:
    case XACT_EVENT_PARALLEL_ABORT:
      ForeignWrites::End();
      break;
    default:
      break;
  }
}

void OnSubXactEvent(SubXactEvent event, SubTransactionId sub, SubTransactionId parent, void* arg) {
  if (event != SUBXACT_EVENT_ABORT_SUB || current == nullptr) return;
  try {
    current->RollbackSubtransaction(sub);
  } catch (...) {
    // Out of memory while undoing: the commit must fail rather than send the writes.
    if (XactState* x = XactIfAny()) {
      x->poisoned = true;
    } else {
      try {
        Xact().poisoned = true;
      } catch (...) {
      }
    }
  }
}

}  // namespace

ForeignWrites& ForeignWrites::Get() {
  if (current == nullptr) current = std::make_unique<ForeignWrites>();
  return *current;
}

ForeignWrites* ForeignWrites::GetIfAny() {
  return current.get();
}

void ForeignWrites::End() noexcept {
  current.reset();
}

void ForeignWrites::Write(ramp::KeyspaceId ks, uint32_t buckets, std::string_view key,
                          bool tombstone, std::string_view value, uint32_t cid, uint32_t sub) {
  Key k{ks, std::string(key)};
  auto it = entries_.find(k);
  if (sub > ramp::kTopSubTxn) {
    undo_.push_back(
        Undo{k, it == entries_.end() ? std::nullopt : std::optional<Entry>(it->second), sub});
  }
  if (it == entries_.end()) it = entries_.emplace(std::move(k), Entry{}).first;
  Entry& e = it->second;
  // A reader of this command still sees what earlier commands wrote (a scan of an UPDATE
  // does not meet the rows the UPDATE itself wrote).
  if (e.current.cid != cid && e.current.sub != 0) e.before = e.current;
  e.current = OwnWrite{tombstone, std::string(value), cid, sub};
  e.buckets = buckets;
}

const OwnWrite* ForeignWrites::Visible(ramp::KeyspaceId ks, std::string_view key,
                                       uint32_t cid) const {
  auto it = entries_.find(Key{ks, std::string(key)});
  if (it == entries_.end()) return nullptr;
  const Entry& e = it->second;
  if (e.current.cid < cid) return &e.current;
  if (e.before && e.before->cid < cid) return &*e.before;
  return nullptr;
}

void ForeignWrites::ForEachVisible(
    ramp::KeyspaceId ks, uint32_t cid,
    const std::function<void(const std::string&, const OwnWrite&)>& fn) const {
  for (auto it = entries_.lower_bound(Key{ks, std::string()});
       it != entries_.end() && it->first.first == ks; ++it) {
    const Entry& e = it->second;
    if (e.current.cid < cid) {
      fn(it->first.second, e.current);
    } else if (e.before && e.before->cid < cid) {
      fn(it->first.second, *e.before);
    }
  }
}

void ForeignWrites::RememberVersion(ramp::KeyspaceId ks, std::string_view key,
                                    const ramp::Timestamp& ts) {
  Key k{ks, std::string(key)};
  auto [it, added] = versions_.insert_or_assign(k, ts);
  if (!added) return;
  version_order_.push_back(std::move(k));
  if (version_order_.size() - version_head_ > kMaxVersions) {
    versions_.erase(version_order_[version_head_++]);
    if (version_head_ > kMaxVersions) {
      version_order_.erase(version_order_.begin(),
                           version_order_.begin() + static_cast<ptrdiff_t>(version_head_));
      version_head_ = 0;
    }
  }
}

void ForeignWrites::RollbackSubtransaction(uint32_t sub) {
  while (!undo_.empty() && undo_.back().sub >= sub) {
    Undo& u = undo_.back();
    if (u.previous) {
      entries_.insert_or_assign(u.key, std::move(*u.previous));
    } else {
      entries_.erase(u.key);
    }
    undo_.pop_back();
  }
}

void ForeignWrites::FlushInto(ramp::WriteBatch& batch) {
  Session& session = Session::Get();
  ramp::KeyspaceId defined = 0;
  for (const auto& [key, e] : entries_) {
    if (key.first != defined) {
      session.Define(ramp::KeyspaceRef{key.first, e.buckets, false, false});
      defined = key.first;
    }
    auto v = versions_.find(key);
    const ramp::Timestamp* expected = v == versions_.end() ? nullptr : &v->second;
    if (e.current.tombstone) {
      session.Check(batch.DeleteKey(key.first, key.second, expected),
                    "buffering a write to a ramp foreign table");
    } else {
      session.Check(batch.PutKey(key.first, key.second, e.current.value, expected),
                    "buffering a write to a ramp foreign table");
    }
  }
  entries_.clear();
  undo_.clear();
}

void BufferPut(const Keyspace& ks, std::string_view key, std::string_view value, uint32_t cid,
               uint32_t sub) {
  Session& session = Session::Get();
  // The limits of the batch the write joins, checked now (the row's statement fails, not
  // the COMMIT).
  const ramp::WriteBatch& batch = Xact().writes;
  if (key.size() > batch.limits().max_key_bytes) {
    throw SqlError(ERRCODE_PROGRAM_LIMIT_EXCEEDED,
                   "a key of " + std::to_string(key.size()) + " bytes exceeds the limit of " +
                       std::to_string(batch.limits().max_key_bytes) + " bytes");
  }
  session.Check(batch.CheckValue(value.size()), "writing to a ramp foreign table");
  ForeignWrites::Get().Write(ks.id, ks.buckets, key, false, value, cid, sub);
}

void BufferDelete(const Keyspace& ks, std::string_view key, uint32_t cid, uint32_t sub) {
  ForeignWrites::Get().Write(ks.id, ks.buckets, key, true, {}, cid, sub);
}

void InstallXactCallbacks() {
  SetPreCommitFlush(FlushBeforeCommit);
  RegisterXactCallback(OnXactEvent, nullptr);
  RegisterSubXactCallback(OnSubXactEvent, nullptr);
}

}  // namespace pgramp::fdw
