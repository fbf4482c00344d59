// A read session: the reads of one SQL transaction, made atomic statement by statement.
//
// A statement reads many rows in many requests (index scans, fetches by row id, lookups).
// Each request is one RAMP read (read-atomic on its own); the session makes them atomic
// together:
//  - one snapshot per statement (SetStatement): every row is the newest version committed
//    at or before it (or, by RAMP's repair, one of the same transaction);
//  - RAMP version bounds carried from request to request: every row read is noted with the
//    metadata of its version, and a sibling row named there is read later in the statement
//    at least at that version (the client then fetches exactly that version: RAMP's round 2
//    across requests). A sibling already read at an older version means the statement saw a
//    transaction half committed: the read fails with Conflict rather than let an UPDATE miss
//    both versions of a row;
//  - remembered versions: the version last read of each row (an UPDATE/DELETE sends it as
//    the expected version);
//  - a prefetch cache of rows read ahead for the statement (index lookups read the entries
//    and their rows in one read).
// Rows are numbered (ramp/keys.h: key = RowKey(id)). The caller never decodes metadata.
// Single-threaded, like its Client; it must not outlive it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ramp/client.h"
#include "ramp/status.h"
#include "ramp/types.h"

namespace ramp {

// Identifies a statement: a new tag starts a new statement (its start time and command id,
// say: a command that wrote makes the next one see its writes).
struct StatementTag {
  int64_t start = 0;
  uint32_t command = 0;
  bool operator==(const StatementTag&) const = default;
};

struct RowRequest {
  KeyspaceId keyspace = 0;
  uint64_t rowid = 0;
  // Optional: the caller knows that the transaction with this timestamp wrote the row (an
  // index entry written with it): an older version read in round 1 is repaired to it.
  Timestamp required;
};

struct RowResult {
  bool found = false;  // false: no committed version (never written, or deleted)
  Timestamp ts;        // the version read (a deletion's timestamp; zero: never written)
  std::string value;
};

enum class RowReads : uint8_t {
  // The statement's snapshot, with its version bounds (applied and learned); versions of
  // rows found are remembered. Fetches of rows a statement works on.
  kStatement,
  // The statement's snapshot, read-atomic per request only; versions of rows found are
  // remembered. Scans by row-id range, index lookups (which pass `required` themselves).
  kSnapshot,
  // The latest committed versions; nothing remembered. Re-checks of what committed since.
  kLatest,
};

struct PrefetchedRow {
  Timestamp ts;
  bool live = false;  // false: the row's latest version is a deletion (or it never existed)
  std::string value;
  // Prefetches of the row not yet forgotten (Unprefetch): two index scans of one statement
  // (a self-join) may read ahead the same row, and one moving on must not drop the other's.
  uint32_t holders = 1;
};

class ReadSession {
 public:
  ~ReadSession();
  ReadSession(const ReadSession&) = delete;
  ReadSession& operator=(const ReadSession&) = delete;

  // The reads that follow belong to statement `tag` and read at `snapshot` (zero: the
  // latest versions). Same tag: nothing changes (the snapshot stays the first one given).
  // A new tag forgets the previous statement's bounds and prefetched rows.
  void SetStatement(const StatementTag& tag, const Timestamp& snapshot);
  const Timestamp& snapshot() const;

  // One RAMP read of numbered rows (any keyspaces), out[i] for rows[i]. Conflict when the
  // statement saw a transaction half committed (kStatement).
  Status ReadRows(std::span<const RowRequest> rows, RowReads how, std::vector<RowResult>* out);
  // A key of the caller's layout (a sequence, say), at the statement's snapshot or the latest.
  Status Get(KeyspaceId keyspace, std::string_view key, ReadResult* out, bool latest = false);
  // Every live entry of a group on the servers (the caller overlays its own writes), as a
  // GET_GROUP would return them now. Unless `fresh`, entries read before may be served
  // again after a one-sided read of their partition's group version found it unchanged
  // (ClientOptions::group_cache_bytes); `fresh` always asks the server.
  Status GetGroup(KeyspaceId keyspace, std::string_view group, std::vector<GroupEntry>* out,
                  bool fresh = false);

  // The version last read of a row (kStatement/kSnapshot reads remember it). Bounded.
  void RememberVersion(KeyspaceId keyspace, uint64_t rowid, const Timestamp& ts);
  bool RecallVersion(KeyspaceId keyspace, uint64_t rowid, Timestamp* ts) const;

  // Rows read ahead for the current statement (bounded in bytes).
  void Prefetch(KeyspaceId keyspace, uint64_t rowid, const Timestamp& ts, bool live,
                std::string value);
  const PrefetchedRow* Prefetched(KeyspaceId keyspace, uint64_t rowid) const;
  // Forgets a prefetched row its reader is done with (an index scan that moved to its next
  // key): the table stays small, and its lookups cache-friendly, over a long nested loop.
  // The row stays while another prefetch of it has not been forgotten.
  void Unprefetch(KeyspaceId keyspace, uint64_t rowid);

  struct State;  // engine/src/client/read_session.cpp

 private:
  friend class Client;
  explicit ReadSession(Client* client);
  Client* client_;
  std::unique_ptr<State> state_;
};

}  // namespace ramp
