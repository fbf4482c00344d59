// One backend's connection to the ramp cluster: the ramp::Client (opened lazily from the
// ramp.* settings, reopened after a failure or a settings change), the errors it reports,
// the read session of the current PostgreSQL transaction, and the planner's cache of
// keyspace sizes. Row ids are allocated in xact/row_ids.hpp; writes are buffered in the
// transaction's ramp::WriteBatch (xact/xact.hpp) and committed with Client::Write.
//
// Everything here may throw (RampError, SqlError, PgError): call it inside a Boundary.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>

#include "ramp/client.h"
#include "ramp/read_session.h"
#include "ramp/status.h"
#include "ramp/types.h"
#include "ramp/write_batch.h"

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
  // The client if one is open (no connection is made).
  ramp::Client* client_if_any() const { return client_.get(); }
  // Makes sure the client knows the keyspace's buckets and grouping (for reads; a write
  // defines its keyspaces itself).
  void Define(const ramp::KeyspaceRef& ks);

  // The reads of the current PostgreSQL transaction, set to the current statement: its
  // snapshot is the statement's start (see StatementSnapshot), and its reads are atomic
  // together (ramp/read_session.h). Created on first use, dropped at transaction end.
  ramp::ReadSession& reads();
  // The current statement's snapshot (what reads() reads at).
  ramp::Timestamp StatementSnapshot() const;
  // The read session if this transaction has one (no connection is made).
  const ramp::ReadSession* reads_if_any() const { return reads_.get(); }
  // A transaction of this session committed at ts: later statements' snapshots include it.
  void NoteOwnCommit(const ramp::Timestamp& ts) {
    if (ts > last_own_commit_) last_own_commit_ = ts;
  }

  // A statement nested in the current one that must read what committed since the
  // top-level statement started (a materialized view's maintenance, after it took its
  // locks: immv/maintain.cpp) gives its start (a PostgreSQL TimestampTz); statements read
  // at the later of this and their own start. Cleared at transaction end.
  void SetNestedStatementStart(int64_t start) { nested_start_ = start; }

  // Throws RampError(status, context) when status is not OK, and remembers failures after
  // which the connection must be reopened. keep_on_cancel: a cancelled wait left the
  // connections in order (a row-lock wait withdraws its request), keep them.
  void Check(const ramp::Status& status, std::string_view context, bool keep_on_cancel = false);
  // True for a while after the cluster could not be reached (planner estimates then stay
  // off the network instead of waiting for a timeout on every query).
  bool RecentlyFailed() const;

  // Called at the end of every PostgreSQL transaction.
  void EndTransaction() noexcept;

  // Keys and bytes a keyspace holds on the cluster (the sum over its partitions, from
  // Client::Partitions), from a cache refreshed when older than max_age. A commit of this
  // backend adds its new rows to the cache (AddOwnRows), so that its own load shows at once
  // without asking every server again (which cost the next plan two round trips per server,
  // in every pgbench transaction).
  struct KeyspaceSize {
    uint64_t keys = 0;
    uint64_t bytes = 0;
  };
  KeyspaceSize SizeOf(ramp::KeyspaceId ks, std::chrono::milliseconds max_age);
  // The servers apply a COMMIT after acknowledging it (early acknowledgement), so a refresh
  // right after this backend's commit may not count its rows yet: a table loaded and then
  // planned at once read as empty for up to max_age (and got the plans of an empty table).
  // The rows this backend committed since the last refresh are a floor for the next one.
  void AddOwnRows(ramp::KeyspaceId ks, uint64_t rows, uint64_t bytes) {
    if (rows == 0) return;
    KeyspaceSize& floor = own_since_refresh_[ks];
    floor.keys += rows;
    floor.bytes += bytes;
    if (sizes_at_ == std::chrono::steady_clock::time_point{}) return;
    KeyspaceSize& size = sizes_[ks];
    size.keys += rows;
    size.bytes += bytes;
  }

 private:
  Session() = default;
  void Open();
  void Reset() noexcept;
  int64_t StatementStart() const;
  static std::string SettingsFingerprint();

  std::unique_ptr<ramp::Client> client_;
  std::unique_ptr<ramp::ReadSession> reads_;  // must not outlive client_
  uint64_t client_generation_ = 0;
  std::string client_settings_;
  bool broken_ = false;
  std::chrono::steady_clock::time_point failed_at_{};
  std::set<ramp::KeyspaceId> defined_;
  ramp::Timestamp last_own_commit_;
  int64_t nested_start_ = 0;
  std::unordered_map<ramp::KeyspaceId, KeyspaceSize> sizes_;
  std::unordered_map<ramp::KeyspaceId, KeyspaceSize> own_since_refresh_;
  std::chrono::steady_clock::time_point sizes_at_{};
};

// The version this transaction last read of a row (UPDATE and DELETE send it as the
// expected version); false when it read none. Makes no connection.
inline bool RecallVersion(ramp::KeyspaceId ks, uint64_t rowid, ramp::Timestamp* ts) {
  const ramp::ReadSession* reads = Session::Get().reads_if_any();
  return reads != nullptr && reads->RecallVersion(ks, rowid, ts);
}

}  // namespace pgramp
