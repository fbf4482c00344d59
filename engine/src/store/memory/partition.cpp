// Partition: the write path (PREPARE, COMMIT, ABORT, the 2PL baseline's direct writes) and
// what termination and scans ask of transactions.
#include "store/memory/partition.h"

#include <algorithm>
#include <cstring>
#include <mutex>
#include <set>
#include <string>

#include "store/durable/env.h"
#include "store/memory/valid_bit.h"

namespace ramp::store {
namespace {

// The partitions a transaction wrote, from one of its items' metadata plus this one.
Status SiblingsOf(const PartitionId& self, std::string_view metadata,
                  std::vector<PartitionId>* out) {
  record::Metadata m;
  RAMP_RETURN_IF_ERROR(record::DecodeMetadata(metadata, &m));
  std::set<PartitionId> parts{self};
  for (const record::Sibling& s : m.keys) parts.insert({s.keyspace, s.bucket});
  parts.insert(m.partitions.begin(), m.partitions.end());
  out->assign(parts.begin(), parts.end());
  return Status::OK();
}

}  // namespace

Partition::Partition(const PartitionId& id, Arena* arena, const StoreOptions& options,
                     LogSink* sink)
    : id_(id),
      options_(options),
      sink_(sink),
      hotness_(options.now_ms()),
      log_(arena, id),
      arena_(arena) {
  if (!options.page_dir.empty()) {
    Env* env = options.env != nullptr ? options.env : PosixEnv();
    Status st = PageFile::Create(env, options.page_dir, id, options.page_direct_io, &page_file_);
    // Without its page file the partition still works: every page is served from memory.
    if (!st.ok()) {
      RAMP_ERROR("partition %s: no page file: %s", id.ToString().c_str(), st.ToString().c_str());
    }
    log_.set_page_file(page_file_.get());
    if (page_file_ != nullptr) {
      log_.set_memory_budget(options.memory_budget_bytes / record::kPageBytes);
    }
  }
}

Status Partition::Prepare(const Timestamp& ts, std::span<const WriteItem> items,
                          uint32_t index_base, WriteError* err) {
  std::unique_lock lock(mu_);
  hotness_.Count(items.size());
  err->item = index_base;
  if (dropped_) return Status::NotFound("partition " + id_.ToString() + " was dropped");
  if (!serving_) return NotServing();
  if (ts <= watermark_) {
    err->watermark = watermark_;
    return Status::Aborted("timestamp " + ts.ToString() + " is at or below the scan watermark " +
                           watermark_.ToString() + " of partition " + id_.ToString());
  }
  const TxnState decided = txns_.Decided(ts);
  if (decided == TxnState::kAborted) {
    err->watermark = ts;
    return Status::Aborted("transaction " + ts.ToString() + " was aborted in partition " +
                           id_.ToString());
  }
  PreparedTxn* txn = txns_.FindPrepared(ts);
  for (size_t i = 0; i < items.size(); ++i) {
    const WriteItem& item = items[i];
    err->item = index_base + static_cast<uint32_t>(i);
    RAMP_RETURN_IF_ERROR(CheckLimits(item.key, item.value.size(), item.metadata.size()));
    const uint64_t hash = KeyHash(item.key);
    KeySlot* slot = FindKey(hash, item.key);
    if (HasVersion(slot, ts)) {
      // A resent PREPARE carries the same version. Another one at this timestamp means two
      // transactions drew the same timestamp (two clients with one client id): acknowledging
      // it would leave this key with the other transaction's value, a fractured write.
      RAMP_RETURN_IF_ERROR(CheckSameVersion(slot, ts, item));
      continue;
    }
    if (decided == TxnState::kCommitted) {
      return Status::Aborted("transaction " + ts.ToString() + " already committed in " +
                             id_.ToString() + " without this key");
    }
    if (item.flags & kWriteHasExpected) {
      RAMP_RETURN_IF_ERROR(CheckConflict(slot, item));
      // A conditional write must become the key's current version: at a timestamp below the
      // one it replaces it would commit "late" (never current) and its writer, told it
      // committed, would have lost its update (a counter read one-sided by a client whose
      // clock is behind the version's writer handed out one value twice). Refused like a
      // timestamp below the watermark: the client retries above that version.
      if (ts <= item.expected) {
        err->watermark = item.expected;
        return Status::Aborted("timestamp " + ts.ToString() + " is not above " +
                               item.expected.ToString() +
                               ", the version this conditional write replaces");
      }
    }
    std::vector<PartitionId> siblings;
    if (txn == nullptr) {
      // All items of a transaction name the same partitions: the first one tells.
      RAMP_RETURN_IF_ERROR(
          SiblingsOf(id_, item.metadata, &siblings).Annotate("item " + std::to_string(err->item)));
    }
    const uint8_t flags = ((item.flags & kWriteTombstone) ? record::kRecordTombstone : 0) |
                          ((item.flags & kWriteGrouped) ? record::kRecordGrouped : 0);
    Loc loc;
    RAMP_RETURN_IF_ERROR(AppendVersion(item.key, item.value, item.metadata, flags, ts, &loc));
    if (txn == nullptr) txn = txns_.AddPrepared(ts, now(), std::move(siblings));
    txn->keys.emplace_back(item.key);
    AddPrepared(item.key, hash, item.flags & kWriteGrouped, slot, ts, loc);
  }
  return Status::OK();
}

Status Partition::Commit(const Timestamp& ts, std::vector<CommittedRecord>* addresses) {
  std::unique_lock lock(mu_);
  hotness_.Count();
  if (dropped_) return Status::OK();
  if (!serving_) return NotServing();
  PreparedTxn* txn = txns_.FindPrepared(ts);
  if (txn == nullptr) {
    if (txns_.Decided(ts) == TxnState::kAborted) {
      return Status::Internal("COMMIT of transaction " + ts.ToString() +
                              ", which was aborted in partition " + id_.ToString());
    }
    return Status::OK();  // committed already, or never prepared here
  }
  RAMP_RETURN_IF_ERROR(AppendMark(record::kKindCommitMark, ts, SegmentsOf(*txn, ts)));
  BumpGroupVersion();
  for (const std::string& key : txn->keys) {
    KeySlot* slot = FindKey(KeyHash(key), key);
    if (slot == nullptr) continue;
    CommitVersion(slot, ts);
    // Only a version that became the key's current one has a valid address (a newer one
    // committed first keeps the valid bit).
    if (addresses != nullptr && slot->current != kNoLoc && CurrentTs(slot) == ts) {
      const uint8_t* rec = log_.Resolve(slot->current);
      addresses->push_back(CommittedRecord{
          id_, key, {log_.arena_offset(rec), record::PeekRecord(rec).total_len, epoch_}});
    }
  }
  txns_.Decide(ts, TxnState::kCommitted, now());
  return Status::OK();
}

Status Partition::Abort(const Timestamp& ts) {
  std::unique_lock lock(mu_);
  if (dropped_) return Status::OK();
  if (!serving_) return NotServing();
  if (txns_.Decided(ts) == TxnState::kCommitted) {
    return Status::Internal("ABORT of transaction " + ts.ToString() +
                            ", which committed in partition " + id_.ToString());
  }
  if (PreparedTxn* txn = txns_.FindPrepared(ts)) {
    RAMP_RETURN_IF_ERROR(AppendMark(record::kKindAbortMark, ts, SegmentsOf(*txn, ts)));
    for (const std::string& key : txn->keys) {
      if (KeySlot* slot = FindKey(KeyHash(key), key)) DropPrepared(slot, key, ts);
    }
  }
  // Also for a timestamp never seen here: the fence refuses its late PREPARE.
  txns_.Decide(ts, TxnState::kAborted, now());
  return Status::OK();
}

Status Partition::WriteCommitted(std::string_view key, std::string_view value, bool tombstone,
                                 const Timestamp& ts, bool grouped) {
  std::unique_lock lock(mu_);
  hotness_.Count();
  if (dropped_) return Status::NotFound("partition " + id_.ToString() + " was dropped");
  if (!serving_) return NotServing();
  RAMP_RETURN_IF_ERROR(CheckLimits(key, value.size(), 0));
  const uint64_t hash = KeyHash(key);
  KeySlot* slot = FindKey(hash, key);
  if (HasVersion(slot, ts)) return Status::OK();
  // A scan opened at the watermark read the page count then: a version at or below it
  // appearing now would change what that snapshot sees (as a late PREPARE would).
  if (ts <= watermark_) {
    return Status::Aborted("timestamp " + ts.ToString() + " is at or below the scan watermark " +
                           watermark_.ToString() + " of partition " + id_.ToString());
  }
  Loc loc;
  RAMP_RETURN_IF_ERROR(AppendVersion(
      key, value, {},
      (tombstone ? record::kRecordTombstone : 0) | (grouped ? record::kRecordGrouped : 0), ts,
      &loc));
  // The mark makes the version committed for recovery, which reads the log alone.
  std::string segments(4, '\0');
  uint32_t first = 0;
  log_.SegmentStart(LocPage(loc), &first);
  std::memcpy(segments.data(), &first, 4);
  RAMP_RETURN_IF_ERROR(AppendMark(record::kKindCommitMark, ts, segments));
  BumpGroupVersion();
  CommitVersion(AddPrepared(key, hash, grouped, slot, ts, loc), ts);
  return Status::OK();
}

TxnState Partition::QueryTxn(const Timestamp& ts, bool fence) {
  std::unique_lock lock(mu_);
  if (txns_.FindPrepared(ts) != nullptr) return TxnState::kPrepared;
  const TxnState decided = txns_.Decided(ts);
  if (decided == TxnState::kUnknown && fence && serving_) {
    // The fence must outlive a restart (a late PREPARE after it must still be refused),
    // so it is logged; if the mark cannot be written the answer stays unknown.
    if (!AppendMark(record::kKindAbortMark, ts).ok()) return TxnState::kUnknown;
    txns_.Decide(ts, TxnState::kAborted, now());
  }
  return decided;
}

void Partition::AppendPending(uint64_t cutoff_ms, std::vector<PendingTxn>* out) const {
  std::shared_lock lock(mu_);
  if (!serving_) return;  // the owner resolves them
  txns_.ForEachPrepared([&](const Timestamp& ts, const PreparedTxn& txn) {
    if (txn.prepared_at_ms < cutoff_ms) {
      out->push_back(PendingTxn{ts, id_, txn.prepared_at_ms, txn.siblings});
    }
  });
}

std::vector<Timestamp> Partition::RaiseWatermark(const Timestamp& ts) {
  std::unique_lock lock(mu_);
  watermark_ = std::max(watermark_, ts);
  std::vector<Timestamp> below;
  txns_.ForEachPrepared([&](const Timestamp& t, const PreparedTxn&) {
    if (t <= watermark_) below.push_back(t);
  });
  return below;
}

Partition::Counts Partition::counts() const {
  std::shared_lock lock(mu_);
  return {index_.size(), versions_, log_.pages(), txns_.prepared()};
}

// ---- helpers (callers hold the lock exclusively unless noted) ---------------------------

KeySlot* Partition::FindKey(uint64_t hash, std::string_view key) const {
  // Hashes 0 and 1 are both stored as 1 (KeyIndex::Stored): those still compare.
  if (only_8_byte_keys_ && key.size() == 8 && hash > 1) {
    return index_.Find(hash, key, [key](const KeySlot&) { return key; });
  }
  return index_.Find(hash, key, [this](const KeySlot& s) { return View(s.any_loc()).key; });
}

Version* Partition::FindVersion(KeySlot* slot, const Timestamp& ts) {
  if (slot->extra == nullptr) return nullptr;
  for (Version& v : slot->extra->versions) {
    if (v.ts == ts) return &v;
  }
  return nullptr;
}

bool Partition::HasVersion(KeySlot* slot, const Timestamp& ts) const {
  return slot != nullptr && (CurrentTs(slot) == ts || FindVersion(slot, ts) != nullptr);
}

Status Partition::CheckSameVersion(KeySlot* slot, const Timestamp& ts, const WriteItem& item) {
  const Loc loc = CurrentTs(slot) == ts ? slot->current : FindVersion(slot, ts)->loc;
  const record::RecordView v = View(loc);
  const bool tombstone = (item.flags & kWriteTombstone) != 0;
  if (v.tombstone() == tombstone && (tombstone || v.value == item.value) &&
      v.metadata == item.metadata) {
    return Status::OK();
  }
  return Status::InvalidArgument("timestamp " + ts.ToString() +
                                 " is already used by another transaction writing this key in " +
                                 id_.ToString() + " (do two clients share client id " +
                                 std::to_string(ts.client) + "?)");
}

Timestamp Partition::CurrentTs(const KeySlot* slot) const {
  return slot != nullptr && slot->current != kNoLoc ? View(slot->current).ts : Timestamp();
}

Status Partition::CheckLimits(std::string_view key, size_t value_bytes, size_t meta_bytes) const {
  if (key.size() > kMaxKeyBytes) {
    return Status::TooLarge("key of " + std::to_string(key.size()) + " bytes exceeds " +
                            std::to_string(kMaxKeyBytes));
  }
  if (record::RecordBytes(key.size(), value_bytes, meta_bytes) > kMaxRecordBytes) {
    return Status::TooLarge("value of " + std::to_string(value_bytes) + " bytes (with " +
                            std::to_string(meta_bytes) + " bytes of metadata) exceeds the " +
                            std::to_string(kMaxRecordBytes) + " bytes a version may take");
  }
  return Status::OK();
}

Status Partition::CheckConflict(KeySlot* slot, const WriteItem& item) const {
  const Timestamp latest = CurrentTs(slot);
  if (latest != item.expected) {
    return Status::Conflict("latest committed version is " + latest.ToString() +
                            ", the writer read " + item.expected.ToString());
  }
  if (slot != nullptr && slot->extra != nullptr) {
    for (const Version& v : slot->extra->versions) {
      if (!v.committed) {
        return Status::Conflict("transaction " + v.ts.ToString() + " has the key prepared");
      }
    }
  }
  return Status::OK();
}

Status Partition::AppendVersion(std::string_view key, std::string_view value,
                                std::string_view metadata, uint8_t flags, const Timestamp& ts,
                                Loc* loc) {
  const size_t bytes = record::RecordBytes(key.size(), value.size(), metadata.size());
  uint8_t* dst = nullptr;
  RAMP_RETURN_IF_ERROR(log_.Append(bytes, Arena::Use::kNormal, loc, &dst));
  Dirty();
  record::EncodeRecord({.kind = record::kKindVersion,
                        .flags = flags,
                        .keyspace = id_.keyspace,
                        .bucket = id_.bucket,
                        .epoch = epoch_,
                        .ts = ts,
                        .key = key,
                        .value = value,
                        .metadata = metadata},
                       dst);
  return Status::OK();
}

Status Partition::AppendMark(record::RecordKind kind, const Timestamp& ts,
                             std::string_view segments) {
  // Without a log on disk nothing reads the segments back.
  if (sink_ == nullptr) segments = {};
  const size_t bytes = record::RecordBytes(0, segments.size(), 0);
  Loc loc;
  uint8_t* dst = nullptr;
  // Decisions must not fail for want of memory: marks may use the arena's reserve.
  RAMP_RETURN_IF_ERROR(log_.Append(bytes, Arena::Use::kReserve, &loc, &dst));
  Dirty();
  record::EncodeRecord({.kind = kind,
                        .keyspace = id_.keyspace,
                        .bucket = id_.bucket,
                        .epoch = epoch_,
                        .ts = ts,
                        .value = segments},
                       dst);
  return Status::OK();
}

KeySlot* Partition::AddPrepared(std::string_view key, uint64_t hash, bool grouped, KeySlot* slot,
                                const Timestamp& ts, Loc loc) {
  if (slot == nullptr) {
    if (key.size() != 8) only_8_byte_keys_ = false;
    slot = index_.Insert(hash);
    if (grouped) grouped_keys_.emplace(key);
  }
  KeyVersions& extra = ExtraOf(slot);
  extra.versions.push_back(Version{.ts = ts, .loc = loc, .since_ms = now()});
  log_.AddLive(loc, RecordLen(loc));
  ++versions_;
  RefreshValidBit(slot);
  return slot;
}

void Partition::BumpGroupVersion() {
  uint64_t* word = group_version_.load(std::memory_order_acquire);
  if (word == nullptr) return;
  // Before the change: a one-sided reader that still sees the old value read it before
  // anything changed (a GetGroup then would have returned what it keeps).
  std::atomic_ref<uint64_t>(*word).fetch_add(1, std::memory_order_seq_cst);
}

void Partition::SetGroupVersion(uint64_t value) {
  if (uint64_t* word = group_version_.load(std::memory_order_acquire)) {
    std::atomic_ref<uint64_t>(*word).store(value, std::memory_order_seq_cst);
  }
}

uint64_t Partition::NewGroupGeneration() const {
  // Unpredictable enough to tell generations apart; never zero.
  static std::atomic<uint64_t> seq{0};
  uint64_t h = options_.now_ms() * 0x9E3779B97F4A7C15ull ^ reinterpret_cast<uintptr_t>(this) ^
               (seq.fetch_add(1) << 17);
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 32;
  return ((h & 0xFFFFFFull) | 1) << 40;
}

void Partition::CommitVersion(KeySlot* slot, const Timestamp& ts) {
  Version* v = FindVersion(slot, ts);
  if (v == nullptr || v->committed) return;
  const uint64_t now_ms = now();
  const Loc old = slot->current;
  if (old != kNoLoc && View(old).ts > ts) {
    // An older transaction committing late: committed, but never the current version.
    v->committed = true;
    v->since_ms = now_ms;
    RefreshValidBit(slot);
    return;
  }
  KeyVersions& extra = *slot->extra;
  slot->current = v->loc;
  extra.versions.erase(v);
  if (old != kNoLoc) {
    extra.versions.push_back(
        Version{.ts = View(old).ts, .loc = old, .since_ms = now_ms, .committed = true});
  }
  extra.tombstone_since_ms = View(slot->current).tombstone() ? now_ms : 0;
  // The new version is valid before the old one stops being: a one-sided reader always
  // finds one of them valid, and either is a committed version.
  RefreshValidBit(slot);
  if (old != kNoLoc) SetValidBit(log_.Resolve(old), false);
  Trim(slot);
}

void Partition::DropPrepared(KeySlot* slot, std::string_view key, const Timestamp& ts) {
  Version* v = FindVersion(slot, ts);
  if (v == nullptr || v->committed) return;
  log_.RemoveLive(v->loc, RecordLen(v->loc));
  KeyVersions& extra = *slot->extra;
  extra.versions.erase(v);
  --versions_;
  if (slot->current == kNoLoc && extra.versions.empty()) {
    // Its only version is gone: the key was never committed.
    ForgetKey(slot);
    ForgetGroupedKey(key);
    return;
  }
  RefreshValidBit(slot);
  Trim(slot);
}

KeyVersions& Partition::ExtraOf(KeySlot* slot) {
  if (slot->extra == nullptr) {
    slot->extra = std::make_unique<KeyVersions>();
    slot->extra->hash = slot->hash;
    slot->extra->registry_index = static_cast<uint32_t>(with_versions_.size());
    with_versions_.push_back(slot->extra.get());
  }
  return *slot->extra;
}

void Partition::Trim(KeySlot* slot) {
  KeyVersions* extra = slot->extra.get();
  if (extra == nullptr || !extra->versions.empty() || extra->tombstone_since_ms != 0) return;
  ReleaseExtra(slot);
}

void Partition::ReleaseExtra(KeySlot* slot) {
  KeyVersions* extra = slot->extra.get();
  KeyVersions* last = with_versions_.back();
  last->registry_index = extra->registry_index;
  with_versions_[extra->registry_index] = last;
  with_versions_.pop_back();
  slot->extra.reset();
}

void Partition::ForgetKey(KeySlot* slot) {
  if (slot->current != kNoLoc) {
    ForgetGroupedKey(View(slot->current).key);
    log_.RemoveLive(slot->current, RecordLen(slot->current));
    SetValidBit(log_.Resolve(slot->current), false);
    --versions_;
  }
  if (slot->extra != nullptr) {
    for (const Version& v : slot->extra->versions) log_.RemoveLive(v.loc, RecordLen(v.loc));
    versions_ -= slot->extra->versions.size();
    ReleaseExtra(slot);
  }
  index_.Erase(slot);
}

void Partition::ForgetGroupedKey(std::string_view key) {
  if (grouped_keys_.empty()) return;
  auto it = grouped_keys_.find(key);
  if (it != grouped_keys_.end()) grouped_keys_.erase(it);
}

void Partition::RefreshValidBit(KeySlot* slot) {
  if (slot->current == kNoLoc) return;
  bool valid = serving_;
  if (options_.invalidate_at_prepare && slot->extra != nullptr) {
    for (const Version& v : slot->extra->versions) valid = valid && v.committed;
  }
  uint8_t* rec = log_.Resolve(slot->current);
  if (ValidBit(rec) != valid) SetValidBit(rec, valid);
}

}  // namespace ramp::store
