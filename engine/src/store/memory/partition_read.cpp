// Partition: reads (GET by latest, by exact timestamp, by snapshot) and scans.
#include <mutex>
#include <shared_mutex>

#include "store/memory/partition.h"

namespace ramp::store {

Loc Partition::NewestCommittedAtOrBefore(const KeySlot& slot, const Timestamp& at) const {
  // The current version is the newest committed one; older ones are in KeyVersions.
  if (slot.current != kNoLoc && View(slot.current).ts <= at) return slot.current;
  Loc found = kNoLoc;
  if (slot.extra != nullptr) {
    Timestamp best;
    for (const Version& v : slot.extra->versions) {
      if (v.committed && v.ts <= at && v.ts > best) {
        best = v.ts;
        found = v.loc;
      }
    }
  }
  return found;
}

void Partition::Get(const ReadItem& item, uint8_t flags, ReadResult* out) const {
  std::shared_lock lock(mu_);
  hotness_.Count();
  *out = ReadResult();
  out->status = ReadStatus::kNotFound;
  if (dropped_) return;
  KeySlot* slot = FindKey(KeyHash(item.key), item.key);
  if (slot == nullptr) return;
  const Timestamp current_ts = CurrentTs(slot);

  Loc found = kNoLoc;
  if (item.at.zero()) {
    found = slot->current;
  } else if (flags & kReadSnapshot) {
    found = NewestCommittedAtOrBefore(*slot, item.at);
  } else if (slot->current != kNoLoc && current_ts == item.at) {
    found = slot->current;
  } else if (const Version* v = FindVersion(slot, item.at)) {
    found = v->loc;  // round 2 of RAMP-Fast: exactly that version, prepared or committed
  }

  if (found == kNoLoc) {
    // A version at or below the collected horizon that a newer one overwrote may have been
    // there: the reader must retry rather than conclude that it never existed.
    if (!item.at.zero() && slot->current != kNoLoc && current_ts > item.at &&
        item.at <= collected_horizon_) {
      out->status = ReadStatus::kCollected;
    }
    return;
  }
  const uint8_t* rec = log_.Resolve(found);
  const record::RecordView view = record::PeekRecord(rec);
  out->status = ReadStatus::kOk;
  out->flags = view.flags & record::kRecordTombstone;
  out->ts = view.ts;
  out->value = view.value;  // a tombstone's too: empty, or kMovedTombstone
  out->metadata = view.metadata;
  if ((flags & kReadWantAddress) && found == slot->current) {
    out->address = {log_.arena_offset(rec), view.total_len, epoch_};
  }
}

void Partition::Scan(const Timestamp& at, const ScanVisitor& visit) const {
  std::shared_lock lock(mu_);
  if (dropped_) return;
  index_.ForEach([&](const KeySlot& slot) {
    const Loc loc = at.zero() ? slot.current : NewestCommittedAtOrBefore(slot, at);
    if (loc == kNoLoc) return true;
    const record::RecordView view = View(loc);
    if (view.tombstone()) return true;
    return visit(view.key, view.ts, view.value, view.metadata);
  });
}

void Partition::GetGroup(std::string_view group, std::vector<GroupEntry>* out,
                         GroupVersion* version) const {
  std::shared_lock lock(mu_);
  hotness_.Count();
  if (version != nullptr) *version = GroupVersion();
  if (dropped_ || group.size() > 0xFFFF) return;
  if (version != nullptr && serving_) {
    // The word is taken by the first GetGroup that wants it (writers bump it only once it
    // exists; they hold the lock exclusively, so its value is the one of these entries).
    uint64_t* word = group_version_.load(std::memory_order_acquire);
    if (word == nullptr && arena_->AllocateWord(&word).ok()) {
      std::atomic_ref<uint64_t>(*word).store(NewGroupGeneration(), std::memory_order_seq_cst);
      uint64_t* expected = nullptr;
      // Two readers at once: one word wins (the other is never read by anyone).
      if (!group_version_.compare_exchange_strong(expected, word, std::memory_order_acq_rel)) {
        word = expected;
      }
    }
    if (word != nullptr) {
      version->offset = arena_->offset_of(reinterpret_cast<const uint8_t*>(word));
      version->value = std::atomic_ref<uint64_t>(*word).load(std::memory_order_seq_cst);
    }
  }
  // The keys of a group share the prefix EncodeGroupKey(group, ""): a range of the set.
  std::string prefix;
  prefix.push_back(static_cast<char>(group.size() >> 8));
  prefix.push_back(static_cast<char>(group.size() & 0xFF));
  prefix.append(group);
  for (auto it = grouped_keys_.lower_bound(prefix);
       it != grouped_keys_.end() && it->starts_with(prefix); ++it) {
    const KeySlot* slot = FindKey(KeyHash(*it), *it);
    if (slot == nullptr || slot->current == kNoLoc) continue;
    const record::RecordView view = View(slot->current);
    if (view.tombstone()) continue;
    // Views into the arena, not into the set, which may change once the lock is released.
    out->push_back({view.key, view.ts, view.value, view.metadata});
  }
}

}  // namespace ramp::store
