// Internals of a Transaction: the write buffer and the bookkeeping of one RAMP read.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "client/client_impl.h"
#include "common/record.h"
#include "ramp/client.h"

namespace ramp {

struct BufferedWrite {
  KeyspaceId keyspace = 0;
  std::string key;
  std::string value;
  bool tombstone = false;
  bool has_expected = false;
  Timestamp expected;
};

struct Transaction::State {
  std::vector<BufferedWrite> writes;
  std::unordered_map<std::string, size_t> index;  // AddressKey → writes[i]
  uint64_t txn_number = 0;                        // strict 2PL lock owner
  std::set<uint32_t> locked_nodes;                // strict 2PL: nodes holding our locks
  bool finished = false;
  bool return_metadata = false;  // GetAll fills ReadResult::metadata
  Timestamp read_snapshot;       // zero: latest committed

  const BufferedWrite* Find(KeyspaceId keyspace, std::string_view key) const {
    auto it = index.find(AddressKey(keyspace, key));
    return it == index.end() ? nullptr : &writes[it->second];
  }
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
};

// RAMP-Fast reads and writes (read_path.cpp, write_path.cpp) and the strict 2PL baseline
// (s2pl.cpp), as free functions over the client internals.
// snapshot: zero reads the latest committed versions; otherwise round 1 reads the newest
// committed version at or before it (round 2 still repairs from metadata).
Status RampRead(Client::Impl& c, std::vector<ReadSlot>& slots, const Timestamp& snapshot = {});
Status RampCommit(Client::Impl& c, std::vector<BufferedWrite>& writes, Timestamp* commit_ts);
Status S2plRead(Client::Impl& c, Transaction::State& t, std::vector<ReadSlot>& slots);
Status S2plCommit(Client::Impl& c, Transaction::State& t);
void S2plRelease(Client::Impl& c, Transaction::State& t);

}  // namespace ramp
