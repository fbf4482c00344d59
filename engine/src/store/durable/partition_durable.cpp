// Partition: what the durability layer needs of it. The pages to write (copies taken under
// the lock), the marks that keep decisions findable across compaction, and recovery, which
// rebuilds everything in memory from the log read back from disk.
#include <cstring>
#include <mutex>
#include <set>

#include "common/little_endian.h"
#include "store/memory/partition.h"
#include "store/memory/valid_bit.h"

namespace ramp::store {
namespace {

std::vector<uint32_t> DecodeSegments(std::string_view value) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i + 4 <= value.size(); i += 4) {
    uint32_t v;
    std::memcpy(&v, value.data() + i, 4);
    out.push_back(v);
  }
  return out;
}

// The disk image of a page (run): state bytes zeroed, page checksum over [8, used).
std::string DiskImage(const uint8_t* data, uint32_t run_pages) {
  std::string bytes(reinterpret_cast<const char*>(data), size_t{run_pages} * record::kPageBytes);
  auto* p = reinterpret_cast<uint8_t*>(bytes.data());
  record::PageHeader h;
  if (!record::ReadPageHeader(p, bytes.size(), &h).ok()) return bytes;
  for (uint32_t off = record::kPageHeaderBytes; off < h.used;) {
    const uint32_t len = record::PeekRecord(p + off).total_len;
    if (len == 0) break;
    p[off + record::kStateOffset] = 0;
    off += len;
  }
  // Bytes past `used` are whatever the arena frame held before: zero them, a reader of the
  // file then finds the end of the page unambiguous.
  std::memset(p + h.used, 0, bytes.size() - h.used);
  h.checksum = record::Crc32c(p + 8, h.used - 8);
  record::WritePageHeader(h, p);
  return bytes;
}

}  // namespace

void Partition::Dirty() {
  if (sink_ == nullptr || queued_.exchange(true)) return;
  sink_->MarkDirty(shared_from_this());
}

void Partition::TakeDirty(DirtyPages* out) {
  std::unique_lock lock(mu_);
  queued_.store(false);
  out->partition = id_;
  out->dropped = dropped_;
  if (dropped_) return;
  log_.TakeUnflushed([&](uint32_t segment, uint32_t page_no, const uint8_t* data, uint32_t run,
                         uint32_t from) {
    DirtyPage d{segment, page_no, from, 0, DiskImage(data, run)};
    record::PageHeader h;
    if (record::ReadPageHeader(reinterpret_cast<const uint8_t*>(d.bytes.data()), d.bytes.size(), &h)
            .ok()) {
      d.used = h.used;
    }
    out->pages.push_back(std::move(d));
  });
  out->retired_segments = log_.TakeRetired();
}

std::string Partition::SegmentsOf(const PreparedTxn& txn, const Timestamp& ts) const {
  std::set<uint32_t> segments;
  for (const std::string& key : txn.keys) {
    KeySlot* slot = FindKey(KeyHash(key), key);
    if (slot == nullptr) continue;
    Loc loc = kNoLoc;
    if (Version* v = FindVersion(slot, ts))
      loc = v->loc;
    else if (slot->current != kNoLoc && View(slot->current).ts == ts)
      loc = slot->current;
    uint32_t first = 0;
    if (loc != kNoLoc && log_.SegmentStart(LocPage(loc), &first)) segments.insert(first);
  }
  std::string out;
  for (uint32_t s : segments) out.append(reinterpret_cast<const char*>(&s), 4);
  return out;
}

bool Partition::RelocateMark(Loc loc, uint8_t* rec, const record::RecordView& view) {
  if (sink_ == nullptr) return true;  // marks are only read by recovery
  uint32_t here = 0;
  log_.SegmentStart(LocPage(loc), &here);
  std::string keep;
  for (uint32_t s : DecodeSegments(view.value)) {
    if (s != here && log_.HasSegment(s)) keep.append(reinterpret_cast<const char*>(&s), 4);
  }
  // The versions it decides are all gone (or move with this segment, which writes fresh
  // marks for the committed ones): the mark has nothing left to decide.
  if (keep.empty()) return true;
  (void)rec;
  return AppendMark(view.kind, view.ts, keep).ok();
}

Status Partition::Recover(std::vector<LoadedSegment>* segments) {
  std::unique_lock lock(mu_);
  for (const LoadedSegment& s : *segments) {
    RAMP_RETURN_IF_ERROR(log_.Load(s.first_page, reinterpret_cast<const uint8_t*>(s.bytes.data()),
                                   static_cast<uint32_t>(s.bytes.size() / record::kPageBytes)));
  }
  // First the decisions, so that versions of decided transactions (nearly all of them) go
  // straight to their final state instead of through the prepared bookkeeping.
  for (const LoadedSegment& s : *segments) {
    log_.ForEachRecord(s.first_page, [&](Loc, uint8_t* rec) {
      const record::RecordView v = record::PeekRecord(rec);
      if (v.kind == record::kKindCommitMark) replay_decided_.emplace(v.ts, TxnState::kCommitted);
      if (v.kind == record::kKindAbortMark) replay_decided_.emplace(v.ts, TxnState::kAborted);
    });
  }
  for (const LoadedSegment& s : *segments) {
    log_.ForEachRecord(s.first_page, [&](Loc loc, uint8_t* rec) { Replay(loc, rec); });
  }
  replay_decided_.clear();
  segments->clear();
  return Status::OK();
}

void Partition::Replay(Loc loc, const uint8_t* rec) {
  const record::RecordView view = record::PeekRecord(rec);
  const Timestamp& ts = view.ts;
  // The partition keeps the placement epoch of its newest records (a migrated partition
  // comes back at the epoch it was adopted with).
  if (view.epoch > epoch_) epoch_ = view.epoch;
  switch (view.kind) {
    case record::kKindVersion: {
      const uint64_t hash = KeyHash(view.key);
      KeySlot* slot = FindKey(hash, view.key);
      // A copy compaction made of a record whose original is still on disk.
      if (HasVersion(slot, ts)) return;
      auto final_state = replay_decided_.find(ts);
      if (slot == nullptr && final_state != replay_decided_.end() &&
          final_state->second == TxnState::kCommitted) {
        // The first version of a key, committed: it becomes the current version directly.
        slot = index_.Insert(hash);
        if (view.grouped()) grouped_keys_.emplace(view.key);
        slot->current = loc;
        log_.AddLive(loc, view.total_len);
        ++versions_;
        if (view.tombstone()) ExtraOf(slot).tombstone_since_ms = now();
        RefreshValidBit(slot);
        return;
      }
      const TxnState decided = txns_.Decided(ts);
      if (decided == TxnState::kAborted) return;
      if (decided == TxnState::kCommitted) {
        // A relocated version, after the mark of its transaction.
        CommitVersion(AddPrepared(view.key, hash, view.grouped(), slot, ts, loc), ts);
        return;
      }
      PreparedTxn* txn = txns_.FindPrepared(ts);
      if (txn == nullptr) {
        record::Metadata m;
        std::set<PartitionId> parts{id_};
        if (record::DecodeMetadata(view.metadata, &m).ok()) {
          for (const record::Sibling& s : m.keys) parts.insert({s.keyspace, s.bucket});
          parts.insert(m.partitions.begin(), m.partitions.end());
        }
        txn = txns_.AddPrepared(ts, now(), std::vector<PartitionId>(parts.begin(), parts.end()));
      }
      txn->keys.emplace_back(view.key);
      AddPrepared(view.key, hash, view.grouped(), slot, ts, loc);
      return;
    }
    case record::kKindCommitMark: {
      if (PreparedTxn* txn = txns_.FindPrepared(ts)) {
        for (const std::string& key : txn->keys) {
          if (KeySlot* slot = FindKey(KeyHash(key), key)) CommitVersion(slot, ts);
        }
      }
      txns_.Decide(ts, TxnState::kCommitted, now());
      return;
    }
    case record::kKindAbortMark: {
      if (txns_.Decided(ts) == TxnState::kCommitted) return;
      if (PreparedTxn* txn = txns_.FindPrepared(ts)) {
        for (const std::string& key : txn->keys) {
          if (KeySlot* slot = FindKey(KeyHash(key), key)) DropPrepared(slot, key, ts);
        }
      }
      txns_.Decide(ts, TxnState::kAborted, now());
      return;
    }
  }
}

}  // namespace ramp::store
