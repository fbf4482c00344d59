// One backend's connection to the ramp cluster: the ramp::Client (opened lazily from the
// ramp.* settings, reopened after a failure or a settings change), the read transaction of
// the current PostgreSQL transaction, row-id ranges, and small caches the AMs share.
//
// Everything here may throw (RampError, SqlError, PgError): call it inside a Boundary.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

#include "ramp/client.h"
#include "ramp/status.h"
#include "ramp/types.h"

#include "xact/write_buffer.hpp"

namespace pgramp {

// The client library's wait hook: reports Cancelled when PostgreSQL has a cancel or die
// interrupt pending that it may process now. Never calls CHECK_FOR_INTERRUPTS (that would
// longjmp out of the client library's C++ frames); the boundary does, after unwinding.
ramp::Status WaitHook();

class Session {
 public:
  static Session& Get();

  // The client, opened on first use. Throws when ramp.nodes is unset or the cluster cannot be
  // reached.
  ramp::Client& client();
  bool has_client() const { return client_ != nullptr; }
  // Reads of the current PostgreSQL transaction (never written: writes go through the
  // extension's WriteBuffer and a separate commit transaction).
  ramp::Transaction& reader();
  // Makes sure the client knows the keyspace's buckets and grouping.
  void Define(const KeyspaceRef& ks);

  // Throws RampError(status, context) when status is not OK, and remembers failures after
  // which the connection must be reopened.
  void Check(const ramp::Status& status, std::string_view context);
  // True for a while after the cluster could not be reached (planner estimates then stay
  // off the network instead of waiting for a timeout on every query).
  bool RecentlyFailed() const;

  // Called at the end of every PostgreSQL transaction.
  void EndTransaction() noexcept;

  // A fresh row id of the table (cluster-wide unique: ranges come from a sequence key updated
  // with a conflict-checked PUT, so two PostgreSQL servers never hand out the same id).
  uint64_t NextRowId(const KeyspaceRef& ks);
  // The next row id the sequence would hand out: every row id of the table is below it.
  uint64_t HighWater(const KeyspaceRef& ks);
  // HighWater from a cache younger than max_age (no network); false when not cached.
  bool CachedHighWater(ramp::KeyspaceId ks, std::chrono::milliseconds max_age, uint64_t* hw);

  // Keys and bytes a keyspace holds on the cluster (the sum over its partitions, from
  // Client::Partitions), from a cache refreshed when older than max_age; the cache is
  // dropped when this backend commits writes, so that its own load shows at once.
  struct KeyspaceSize {
    uint64_t keys = 0;
    uint64_t bytes = 0;
  };
  KeyspaceSize SizeOf(ramp::KeyspaceId ks, std::chrono::milliseconds max_age);
  void ForgetSizes() { sizes_at_ = {}; }

  // The version timestamp last read for a row: UPDATE/DELETE send it as the expected version,
  // so a concurrent change makes the commit fail with a serialization failure. Bounded.
  void RememberVersion(ramp::KeyspaceId ks, uint64_t rowid, const ramp::Timestamp& ts);
  bool RecallVersion(ramp::KeyspaceId ks, uint64_t rowid, ramp::Timestamp* ts) const;
  // Rows read together with the index entries that lead to them (ramp_hash lookups read
  // the entries and then all their rows in one read, checked for consistency): the table
  // fetches of the same statement take them from here instead of reading each row again.
  // Valid for the current statement (and command id) only; bounded in bytes.
  struct PrefetchedRow {
    ramp::Timestamp ts;
    bool live = false;  // false: the row's latest version is a deletion (or it never existed)
    std::string value;
  };
  void Prefetch(ramp::KeyspaceId ks, uint64_t rowid, const ramp::Timestamp& ts, bool live,
                std::string value);
  const PrefetchedRow* Prefetched(ramp::KeyspaceId ks, uint64_t rowid);

  // Keeps the row reads of one statement atomic together. All of them read one snapshot
  // (the statement's start, see CurrentStatementTag); each GetAll is read-atomic on its own,
  // and every row read is noted with the metadata of its version: a sibling row named there
  // must be read at least at that version later in the statement. RequiredVersion gives that
  // bound, passed as ReadItem::required: the client then fetches exactly that version (RAMP's
  // round 2 across requests), e.g. the new row of an UPDATE committed at the old row's
  // partition but not yet at the new row's. Valid for the current statement; bounded.
  // A sibling already read at an older version (or as absent while the commit may still be
  // in flight) means the statement saw a transaction half committed: NoteRead throws a
  // conflict (40001) rather than let an UPDATE miss both versions of a row.
  ramp::Timestamp RequiredVersion(ramp::KeyspaceId ks, uint64_t rowid);
  // A transaction of this session committed at ts: later statements' snapshots include it.
  void NoteOwnCommit(const ramp::Timestamp& ts) {
    if (ts > last_own_commit_) last_own_commit_ = ts;
  }
  void NoteRead(ramp::KeyspaceId ks, uint64_t rowid, const ramp::Timestamp& ts,
                std::string_view metadata);

 private:
  Session() = default;
  void Open();
  void Reset() noexcept;
  void RefillRowIds(const KeyspaceRef& ks);

  struct RowRef {
    ramp::KeyspaceId ks;
    uint64_t rowid;
    bool operator==(const RowRef&) const = default;
  };
  struct RowRefHash {
    size_t operator()(const RowRef& r) const noexcept {
      return static_cast<size_t>((r.ks * 0x9E3779B97F4A7C15ull) ^ r.rowid);
    }
  };
  // FIFO-bounded map of row → timestamp.
  class RowTimestamps {
   public:
    explicit RowTimestamps(size_t capacity) : capacity_(capacity) {}
    void Put(const RowRef& r, const ramp::Timestamp& ts);
    const ramp::Timestamp* Find(const RowRef& r) const;
    void Clear();

   private:
    size_t capacity_;
    std::unordered_map<RowRef, ramp::Timestamp, RowRefHash> map_;
    std::deque<RowRef> order_;
  };
  struct RowIdRange {
    uint64_t next = 0;
    uint64_t end = 0;
    uint64_t chunk = 32;
  };
  struct HighWaterEntry {
    uint64_t hw = 0;
    std::chrono::steady_clock::time_point at;
  };

  std::unique_ptr<ramp::Client> client_;
  std::unique_ptr<ramp::Transaction> reader_;
  uint64_t client_generation_ = 0;
  std::string client_settings_;
  static std::string SettingsFingerprint();
  bool broken_ = false;
  std::chrono::steady_clock::time_point failed_at_{};
  std::set<ramp::KeyspaceId> defined_;
  std::unordered_map<ramp::KeyspaceId, RowIdRange> row_ids_;
  std::unordered_map<ramp::KeyspaceId, HighWaterEntry> high_water_;
  std::unordered_map<ramp::KeyspaceId, KeyspaceSize> sizes_;
  std::chrono::steady_clock::time_point sizes_at_{};
  RowTimestamps versions_{1u << 18};
  // Prefetched rows of the statement identified by prefetch_tag_.
  std::unordered_map<RowRef, PrefetchedRow, RowRefHash> prefetched_;
  std::pair<int64_t, uint32_t> prefetch_tag_{0, 0};
  size_t prefetched_bytes_ = 0;
  bool CurrentPrefetchTag();
  // Statement reads (see NoteRead): versions read, lower bounds learned from metadata.
  std::unordered_map<RowRef, ramp::Timestamp, RowRefHash> statement_read_;
  ramp::Timestamp last_own_commit_;
  std::unordered_map<RowRef, ramp::Timestamp, RowRefHash> statement_need_;
  std::pair<int64_t, uint32_t> statement_tag_{0, 0};
  bool statement_tracking_ = true;
  void CurrentStatementTag();
};

}  // namespace pgramp
