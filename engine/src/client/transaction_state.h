// Internals shared by Transaction, ReadSession and Client::Write: the bookkeeping of one
// RAMP read and the items of one RAMP PUT.
#pragma once

#include <cstdint>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "client/client_impl.h"
#include "common/record.h"
#include "ramp/client.h"
#include "ramp/write_batch.h"

namespace ramp {

// Strict 2PL: the lock owner of a transaction and the nodes holding its locks.
struct S2plLocks {
  uint64_t txn_number = 0;
  std::set<uint32_t> locked_nodes;
};

struct Transaction::State {
  WriteBatch writes;
  S2plLocks locks;
  bool finished = false;
  bool return_metadata = false;  // GetAll fills ReadResult::metadata
  Timestamp read_snapshot;       // zero: latest committed
};

// One item of a RAMP PUT: views into the WriteBatch (values are not copied again).
struct WriteItem {
  KeyspaceId keyspace = 0;
  std::string_view key;
  std::string_view value;
  bool tombstone = false;
  bool grouped = false;
  bool has_expected = false;
  Timestamp expected;
};

// One key of a RAMP read in progress.
struct ReadSlot {
  size_t out = 0;  // index in the caller's output
  KeyspaceId keyspace = 0;
  std::string_view key;
  PartitionId part;
  Timestamp required;  // from the caller (ReadItem::required)

  bool have = false;  // a version (or its absence) is known
  bool tombstone = false;
  Timestamp ts;
  std::string value;
  std::string metadata;

  // GET*: the record copied one-sided, and how the copy went.
  bool one_sided = false;
  bool one_sided_done = false;
  Status one_sided_status;
  std::string record;
  uint32_t record_epoch = 0;  // the epoch the copied record must carry (its address's)
  OneSidedAddress address;    // where it was copied from (dropped from the cache if stale)
};

// RAMP-Fast reads and writes (read_path.cpp, write_path.cpp) and the strict 2PL baseline
// (s2pl.cpp), as free functions over the client internals.
// snapshot: zero reads the latest committed versions; otherwise round 1 reads the newest
// committed version at or before it (round 2 still repairs from metadata).
Status RampRead(Client::Impl& c, std::vector<ReadSlot>& slots, const Timestamp& snapshot = {});
Status RampCommit(Client::Impl& c, std::span<const WriteItem> writes, Timestamp* commit_ts);
Status S2plRead(Client::Impl& c, S2plLocks& t, std::vector<ReadSlot>& slots);
Status S2plCommit(Client::Impl& c, S2plLocks& t, std::span<const WriteItem> writes);
void S2plRelease(Client::Impl& c, S2plLocks& t);

// GET* of one key at its cached placement and address, without the bookkeeping of a batch
// read (slots, the retry loop, round 2, which one key with no required version never needs):
// the common case of Transaction::Get. *taken: the record passed the same checks as in
// RampRead (CheckOneSided) and *out views into the client's one-sided buffer until its next
// read. Otherwise nothing was taken (no cached placement or address, an address of another
// placement, a record over 64 KiB, a stale record -- its address dropped --, a failed read)
// and the caller reads by RampRead. The latest committed version only (no snapshot).
struct OneSidedRead {
  Timestamp ts;
  bool tombstone = false;
  std::string_view value;
  std::string_view metadata;
};
Status RampReadOneSided(Client::Impl& c, KeyspaceId keyspace, std::string_view key,
                        OneSidedRead* out, bool* taken);

// A read of slots by the client's protocol (RAMP-Fast at `snapshot`, or strict 2PL).
Status ReadSlots(Client::Impl& c, S2plLocks& locks, std::vector<ReadSlot>& slots,
                 const Timestamp& snapshot);
// Every live entry of a group as the servers have it (no buffered writes). keep: the
// entries are kept with their partition's group version (ClientOptions::group_cache_bytes)
// and served again, as GET_GROUP would serve them at that moment, while a one-sided read
// of the version finds it unchanged.
Status ReadGroup(Client::Impl& c, KeyspaceId keyspace, std::string_view group,
                 std::vector<GroupEntry>* out, bool keep = false);
// Sends a batch as one PUT (commit.cpp): defines its row keyspaces, checks the batch limit,
// encodes row keys and commits by the client's protocol. The batch is left as it was.
Status CommitBatch(Client::Impl& c, const WriteBatch& batch, S2plLocks& locks,
                   Timestamp* commit_ts);

}  // namespace ramp
