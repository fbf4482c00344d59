// One partition (keyspace, bucket) of the store: its log, its key index with the RAMP state
// of every key, and the transactions prepared in it. Every public method takes the
// partition's lock (reads shared, everything else exclusive) and no other lock but the
// arena's, which is taken inside it.
//
// Versions of a key: the current one (latest committed; its record alone carries the
// valid bit) plus, in KeyVersions, prepared versions and committed versions that are no
// longer current (overwritten, or an older transaction that committed late). The latter
// stay readable by timestamp for the GC grace after they stopped being current.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/record.h"
#include "ramp/status.h"
#include "ramp/types.h"
#include "store/durable/log_sink.h"
#include "store/durable/page_file.h"
#include "store/memory/arena.h"
#include "store/memory/hotness.h"
#include "store/memory/key_index.h"
#include "store/memory/partition_log.h"
#include "store/memory/txn_table.h"
#include "store/store.h"

namespace ramp::store {

inline constexpr size_t kMaxKeyBytes = 65535;  // the record format's key_len is 16 bits

class Partition : public std::enable_shared_from_this<Partition> {
 public:
  // sink: where the partition reports that it has pages to write (null: memory only).
  Partition(const PartitionId& id, Arena* arena, const StoreOptions& options,
            LogSink* sink = nullptr);
  Partition(const Partition&) = delete;
  Partition& operator=(const Partition&) = delete;

  const PartitionId& id() const { return id_; }

  // Store::Prepare for the items of this partition; index_base is the index of items[0]
  // in the request (for WriteError::item).
  Status Prepare(const Timestamp& ts, std::span<const WriteItem> items, uint32_t index_base,
                 WriteError* err);
  Status Commit(const Timestamp& ts, std::vector<CommittedRecord>* addresses = nullptr);
  Status Abort(const Timestamp& ts);
  Status WriteCommitted(std::string_view key, std::string_view value, bool tombstone,
                        const Timestamp& ts, bool grouped);
  TxnState QueryTxn(const Timestamp& ts, bool fence);
  void AppendPending(uint64_t cutoff_ms, std::vector<PendingTxn>* out) const;
  std::vector<Timestamp> RaiseWatermark(const Timestamp& ts);
  Timestamp Watermark() const;

  void Get(const ReadItem& item, uint8_t flags, ReadResult* out) const;
  using ScanVisitor = std::function<bool(std::string_view key, const Timestamp& ts,
                                         std::string_view value, std::string_view metadata)>;
  void Scan(const Timestamp& at, const ScanVisitor& visit) const;
  // version (optional): where the partition's group version is and its value with these
  // entries (GroupVersion; none when the partition does not serve or the arena is full).
  void GetGroup(std::string_view group, std::vector<GroupEntry>* out,
                GroupVersion* version = nullptr) const;

  // Page I/O (partition_pages.cpp): Store::LocatePage for this partition.
  Status LocatePage(uint32_t page_no, Store::PageLocation* out) const;
  // Page numbers [0, PageCount()) have been handed out (some may be retired since).
  uint32_t PageCount() const;

  struct GcResult {
    uint64_t collected_versions = 0;
    uint64_t pages_retired = 0;
  };
  // Drops what the GC grace allows, then compacts sealed segments whose live bytes are
  // below compaction_ratio of their size.
  GcResult CollectGarbage(double compaction_ratio);
  // Forgets everything; the pages go back to the arena. Later calls see an empty
  // partition that refuses writes.
  void Drop();

  struct Counts {
    uint64_t keys = 0;
    uint64_t versions = 0;
    uint64_t pages = 0;
    uint64_t prepared_txns = 0;
  };
  Counts counts() const;
  double OpsPerSec() const { return hotness_.Rate(options_.now_ms()); }
  void CountLoad(uint64_t ops) const { hotness_.Count(ops); }
  void SeedLoad(double ops_per_sec) const { hotness_.Seed(ops_per_sec); }

  // ---- durability (durable/partition_durable.cpp) --------------------------------------
  // The pages appended or changed since the last call, and the segments retired since.
  void TakeDirty(DirtyPages* out);
  // Rebuilds the partition (pages, index, RAMP state, prepared transactions, decisions)
  // from its log as read back from disk, in page order. Before any other call.
  Status Recover(std::vector<LoadedSegment>* segments);
  // The sink of a recovered partition (recovery runs before the log writer exists).
  void SetSink(LogSink* sink) { sink_ = sink; }

  // ---- migration (partition_migrate.cpp, DESIGN §7) --------------------------------------
  // The placement epoch written into new records and addresses (recovery takes the newest
  // one found in the log; a fresh partition has 1).
  uint32_t epoch() const;
  void SetEpoch(uint32_t epoch);
  // A partition that does not serve (released to another server, or a copy being filled
  // by a migration) refuses PREPARE, COMMIT, ABORT, 2PL writes and fences with Moved, is
  // left alone by termination and the GC, and none of its records carries the valid bit
  // (a one-sided reader holding an address falls back and learns of the move).
  bool serving() const;
  void SetServing(bool serving);
  // Appends a copy of a record of this partition read from its previous owner's log
  // (checked by the caller) and applies it as recovery does: versions, marks (their
  // segment lists recomputed here), duplicates ignored.
  Status Ingest(const record::RecordView& v);

 private:
  uint64_t now() const { return options_.now_ms(); }
  record::RecordView View(Loc loc) const { return record::PeekRecord(log_.Resolve(loc)); }
  KeySlot* FindKey(uint64_t hash, std::string_view key) const;
  static Version* FindVersion(KeySlot* slot, const Timestamp& ts);
  Timestamp CurrentTs(const KeySlot* slot) const;
  // The key (slot may be null) has a version ts, current or not.
  bool HasVersion(KeySlot* slot, const Timestamp& ts) const;
  // The newest committed version with a timestamp at or before `at` (kNoLoc if none).
  Loc NewestCommittedAtOrBefore(const KeySlot& slot, const Timestamp& at) const;

  Status CheckLimits(std::string_view key, size_t value_bytes, size_t meta_bytes) const;
  Status NotServing() const {
    return Status::Moved("partition " + id_.ToString() + " is not served here (migrated)");
  }
  Status CheckConflict(KeySlot* slot, const WriteItem& item) const;
  // The key has a version at ts: OK when it is the one `item` would write (a resent PREPARE).
  Status CheckSameVersion(KeySlot* slot, const Timestamp& ts, const WriteItem& item);
  // Appends a version record; it is garbage until AddPrepared refers to it.
  Status AppendVersion(std::string_view key, std::string_view value, std::string_view metadata,
                       uint8_t flags, const Timestamp& ts, Loc* loc);
  // A mark's value lists the segments holding the versions it decides (u32 first pages):
  // compaction keeps a mark while one of them still exists, so that recovery never sees a
  // version without its decision.
  Status AppendMark(record::RecordKind kind, const Timestamp& ts, std::string_view segments = {});
  // The segments value of a mark for the versions of txn (ts) in this partition.
  std::string SegmentsOf(const PreparedTxn& txn, const Timestamp& ts) const;
  // Tells the sink there is something to write (once until TakeDirty).
  void Dirty();
  // Applies one record of the log during recovery.
  void Replay(Loc loc, const uint8_t* rec);
  // Compaction of a mark: kept (copied to the head) while a segment it names exists.
  bool RelocateMark(Loc loc, uint8_t* rec, const record::RecordView& view);
  // Adds a prepared version at loc to the key's slot (created when null), which makes the
  // record live; returns the slot.
  KeySlot* AddPrepared(std::string_view key, uint64_t hash, bool grouped, KeySlot* slot,
                       const Timestamp& ts, Loc loc);
  // Commits the version ts of a key: it becomes current if it is the newest committed.
  void CommitVersion(KeySlot* slot, const Timestamp& ts);
  // Drops the prepared version ts of key (the transaction aborted).
  void DropPrepared(KeySlot* slot, std::string_view key, const Timestamp& ts);

  KeyVersions& ExtraOf(KeySlot* slot);
  // Frees an empty KeyVersions that no longer tracks a tombstone.
  void Trim(KeySlot* slot);
  void ReleaseExtra(KeySlot* slot);
  // Removes a key and all its versions from the index.
  void ForgetKey(KeySlot* slot);
  void ForgetGroupedKey(std::string_view key);
  // The current version carries the valid bit unless invalidate_at_prepare and a
  // transaction has the key prepared.
  void RefreshValidBit(KeySlot* slot);
  uint64_t RecordLen(Loc loc) const { return View(loc).total_len; }
  // The group version (see GroupVersion): bumped, under the exclusive lock, before anything
  // GetGroup returns may change (a commit, a committed write, an ingested record); zero for
  // good when the partition stops serving or is dropped; a new generation when it serves
  // again or its epoch changes.
  void BumpGroupVersion();
  void SetGroupVersion(uint64_t value);
  uint64_t NewGroupGeneration() const;

  uint64_t ExpireVersions(uint64_t now_ms);
  uint64_t Compact(double ratio);
  // Moves a record of a segment being compacted to the head of the log if the index
  // refers to it. False when the arena has no room for it.
  bool Relocate(Loc loc, uint8_t* rec);

  const PartitionId id_;
  const StoreOptions& options_;
  LogSink* sink_;                    // set before the partition is shared (SetSink)
  std::atomic<bool> queued_{false};  // reported to the sink and not yet taken
  // Recovery only: every decision found in the log (Recover's first pass).
  std::unordered_map<Timestamp, TxnState, TimestampHash> replay_decided_;
  // Placement epoch, written into records and addresses (guarded by mu_).
  uint32_t epoch_ = 1;
  bool serving_ = true;      // see serving()
  mutable Hotness hotness_;  // counted by readers too

  mutable std::shared_mutex mu_;
  bool dropped_ = false;
  std::unique_ptr<PageFile> page_file_;  // declared before log_, which writes to it
  PartitionLog log_;
  mutable KeyIndex index_;
  TxnTable txns_;
  std::vector<KeyVersions*> with_versions_;  // every KeyVersions, for the GC
  // Grouped keys in key order, so that the keys of one group are a range (GetGroup).
  std::set<std::string, std::less<>> grouped_keys_;
  uint64_t versions_ = 0;
  Timestamp watermark_;  // PREPAREs at or below it are refused (scans read below it)
  // The newest timestamp of a committed version the GC dropped: a version asked for by a
  // timestamp at or below it may have been collected.
  Timestamp collected_horizon_;
  // Every key this partition ever indexed is 8 bytes long (a row key). KeyHash is a
  // bijection on 8-byte keys, so then a slot whose hash equals an 8-byte key's is that key:
  // FindKey skips reading the slot's record to compare keys (three dependent cache misses;
  // about half of a bulk load's server time was spent there). Cleared for good by the first
  // key of another length.
  bool only_8_byte_keys_ = true;
  // The group version's word in the arena, taken by the first GetGroup (null before).
  Arena* const arena_;
  mutable std::atomic<uint64_t*> group_version_{nullptr};
};

}  // namespace ramp::store
