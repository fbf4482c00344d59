// Internals of the client library. Single-threaded: everything here belongs to the thread
// that owns the Client.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "client/cluster_view.h"
#include "client/node_channel.h"
#include "common/record.h"
#include "protocol/messages.h"
#include "ramp/client.h"
#include "ramp/hlc.h"
#include "ramp/transport/transport.h"

namespace ramp {

// What a scan that ended leaves for the next scan of the same client (scanner.cpp): its
// page reader (connections, registered buffers) and its row arena. Opening those costs a
// few milliseconds (connections, HELLOs, memory registration, zeroed huge pages), more than
// a scan of a small table takes.
struct ScanSpares;
struct ScanSparesDeleter {
  void operator()(ScanSpares* spares) const;
};
// The state of the last Transaction that ended, kept for the next Begin (transaction.cpp):
// a read-only transaction then allocates only its small Transaction object.
struct TransactionStateDeleter {
  void operator()(Transaction::State* state) const;
};

// Which connection of a node a request uses: rpc always goes over tcp (the socket
// baseline); fast uses the preferred provider (shm, verbs) and carries GET+, GET*, PUT+.
enum class ChannelKind : uint8_t { kRpc = 0, kFast = 1 };

struct Node {
  uint32_t index = 0;
  std::string endpoints;    // as the cluster lists them
  NodeChannel channels[2];  // by ChannelKind
};

// The placement a client has cached for a partition.
struct CachedPlacement {
  uint32_t owner = 0;
  uint64_t epoch = 0;
};

struct KeyspaceDef {
  uint32_t buckets = kDefaultBuckets;
  bool grouped = false;
};

// A request in flight and, once it arrived, its reply.
struct PendingCall {
  uint32_t node = 0;
  ChannelKind channel = ChannelKind::kFast;
  bool done = false;
  Status transport_error;   // the connection failed before a reply came
  protocol::Header header;  // of the reply
  std::string reply;        // whole reply message (header included)
  std::string_view body() const { return std::string_view(reply).substr(protocol::kHeaderBytes); }
};

// A PUT of Client::WriteAhead in flight (write_path.cpp): its PREPAREs sent (prepares not
// empty), then its COMMITs (commits not empty).
// Entries of a group kept by ReadSession::GetGroup (read_session.cpp) with the group version
// of their partition (protocol::GetGroupReply) and where that version is.
struct KeptGroup {
  PartitionId part;
  uint32_t node = 0;
  uint64_t instance = 0;
  uint64_t placement_epoch = 0;
  uint64_t version_offset = 0;
  uint64_t version = 0;
  size_t bytes = 0;
  std::vector<GroupEntry> entries;
};

// A partition closed at a snapshot (read_path.cpp, RoundTwo): its owner refuses PREPAREs at
// or below `at` and had none undecided when it said so, under this placement and instance.
struct ClosedPartition {
  Timestamp at;     // closed at this snapshot (zero: never)
  Timestamp tried;  // the last snapshot a close was asked for
  uint32_t owner = 0;
  uint64_t epoch = 0;
  uint64_t instance = 0;
};

struct WriteAheadPut {
  Timestamp ts;
  KeyspaceId keyspace = 0;
  std::vector<EntryKey> keys;  // the batch entries it writes
  std::map<uint32_t, std::vector<PartitionId>> parts_by_node;
  std::vector<uint64_t> prepares;
  std::vector<std::pair<uint32_t, uint64_t>> commits;  // (node, call)
  bool learn = false;                                  // COMMIT_ADDRESSES
};

// The client's state. The channel context (options, memory, clock, client id) is its base:
// every NodeChannel of the client, the page reader's included, shares it. ClusterView is
// all the page reader sees of it.
struct Client::Impl final : ChannelContext, ClusterView {
  uint32_t default_buckets = kDefaultBuckets;
  // A deque: nodes added to a running cluster are appended (LearnNodes) without moving the
  // channels of the others.
  std::deque<Node> nodes;
  uint32_t homes = 0;  // nodes 0..homes-1 are the partitions' homes (HelloReply::homes)
  std::chrono::steady_clock::time_point nodes_learned{};
  std::unordered_map<PartitionId, CachedPlacement, PartitionIdHash> placements;
  std::shared_ptr<AddressCache> addresses;  // where GET* finds keys (ramp/address_cache.h)
  std::unordered_map<KeyspaceId, KeyspaceDef> keyspaces;
  std::unordered_map<uint64_t, PendingCall> calls;
  // One-sided (GET*) reads per partition not reported to their owners yet (the servers never
  // see them; ReportLoad sends them, every kLoadReportEvery reads).
  std::unordered_map<PartitionId, uint64_t, PartitionIdHash> one_sided_load;
  uint64_t one_sided_unreported = 0;
  // The counter in one_sided_load of the partition RampReadOneSided counted last (map nodes
  // stay put; ReportLoad, which empties the map, resets it).
  PartitionId last_load_part;
  uint64_t* last_load = nullptr;
  static constexpr uint64_t kLoadReportEvery = 1000;
  // RampReadOneSided's record buffer (reused) and the completion of its read in flight.
  std::string one_sided_buffer;
  OneSidedAddress one_sided_address;
  record::RecordView one_sided_view;
  uint64_t one_sided_seq = 0;
  bool one_sided_done = false;
  Status one_sided_status;
  uint64_t next_request = 1;
  uint64_t next_txn = 1;
  // Write intents: the nodes each intent owner asked (client/intents.cpp), and the owner
  // whose intents go out right behind the COMMITs of the write in progress (Client::Write).
  std::unordered_map<uint64_t, std::vector<uint32_t>> intent_nodes;
  // And the partitions of those intents with the node each was asked at: a commit that
  // writes one of them at another node finds that the intent moved with its partition.
  std::unordered_map<uint64_t, std::vector<std::pair<PartitionId, uint32_t>>> intent_partitions;
  uint64_t release_intents_with_commit = 0;
  std::unique_ptr<Transaction::State, TransactionStateDeleter> spare_transaction_state;
  // Client::WriteAhead's PUTs in flight, oldest first, and how many items it wrote since
  // the last FinishWriteAhead (their addresses are learnt while the cache holds them).
  std::deque<WriteAheadPut> write_ahead;
  uint64_t write_ahead_items = 0;
  ClientStats stats;
  std::unordered_map<PartitionId, ClosedPartition, PartitionIdHash> closed_partitions;
  // ReadSession::GetGroup's kept groups, by AddressKey(keyspace, group), and their bytes.
  std::unordered_map<std::string, KeptGroup> kept_groups;
  size_t kept_group_bytes = 0;
  uint64_t group_version_word = 0;  // the one-sided read's buffer
  DoorbellSet doorbells;            // every channel's connection (~Impl closes the channels first)
  // Kept between scans (scanner.cpp); released first in ~Impl (the reader uses the memory
  // and the cluster view of this client).
  std::unique_ptr<ScanSpares, ScanSparesDeleter> scan_spares;

  ~Impl();

  // ---- set-up and routing -------------------------------------------------------------
  Status Bootstrap();
  // A node index beyond the nodes known (a MOVED reply, a LOOKUP, a request to it): asks a
  // server for the cluster's node list again and appends the nodes added since (at most
  // every kLearnNodesEveryMs). OK when `node` is known afterwards.
  Status LearnNodes(uint32_t node);
  static constexpr int kLearnNodesEveryMs = 200;
  uint32_t BucketOf(KeyspaceId keyspace, std::string_view key) const;
  PartitionId PartitionOf(KeyspaceId keyspace, std::string_view key) const {
    return PartitionId{keyspace, BucketOf(keyspace, key)};
  }
  // Owners of partitions: cached, or asked of their homes (one LOOKUP per home).
  Status ResolveOwners(std::span<const PartitionId> parts) override;
  uint32_t OwnerOf(const PartitionId& p) const override;
  // A MOVED reply: a newer placement is taken; an older or equal one (a server that does
  // not know better) drops the cached entry, so that the next request asks the home.
  void NoteMoved(const PartitionId& p, uint32_t owner, uint64_t epoch);
  uint64_t EpochOf(const PartitionId& p) const;
  // PLACEMENT pushes (a home telling its sharers of a cutover) arrive on any connection
  // and are taken whenever it is polled. TakePushes polls every connection, at most once
  // per tick of the coarse clock (a few ms; Client::Begin calls it), so that a cached
  // placement is fresh before the next transaction routes by it.
  void TakePlacements(const protocol::Header& h, std::string_view body);
  void TakePushes();
  // After a channel to a node reopened: LOOKUP again the cached partitions it is home of,
  // so that a restarted home knows this client as their sharer and pushes their moves.
  void Reregister(uint32_t home);
  bool reregistering = false;
  int64_t last_push_poll_ms = 0;
  // Sends the one-sided reads counted so far to the partitions' owners (best effort).
  void ReportLoad();
  // Pause before retry `attempt` of a request that met a partition on the move (its
  // cutover takes milliseconds): none for the first two, then growing to 20 ms.
  void MoveBackoff(int attempt) const;
  ChannelKind ReadChannel() const;
  ChannelKind WriteChannel() const;
  // The channel a request of this kind really uses on a node: the fast channel is the rpc
  // one when the node has no endpoint of the preferred provider.
  ChannelKind Effective(uint32_t node, ChannelKind kind) const;
  // The channel's connection to a node, connecting (and saying HELLO) when needed.
  Status Connected(uint32_t node, ChannelKind kind, NodeChannel** out);

  // ---- requests -------------------------------------------------------------------------
  // Sends a request; the reply is collected by Wait into calls[id].
  Status Call(uint32_t node, ChannelKind kind, protocol::Op op, uint32_t count,
              std::string_view body, uint64_t* id);
  // Waits until every listed call is done or the deadline passes. One-sided reads posted on
  // the same connections complete meanwhile. On error the listed calls are forgotten.
  Status Wait(std::span<const uint64_t> ids);
  // Waits until no one-sided operation is outstanding on the listed nodes' fast channels.
  Status WaitOneSided(std::span<const uint32_t> nodes);
  // The reply of a finished call, removed from the table; errors become Status.
  Status TakeReply(uint64_t id, PendingCall* out);
  // Whether every call of ids has its reply, after one look at their channels: never waits
  // (a failed channel counts as answered: Wait then reports it).
  bool Replied(std::span<const uint64_t> ids);
  // Sends and waits for one request.
  Status CallAndWait(uint32_t node, ChannelKind kind, protocol::Op op, uint32_t count,
                     std::string_view body, PendingCall* out);

  std::string NodeName(uint32_t node) const override;

  // ---- ClusterView ----------------------------------------------------------------------
  ChannelContext& channel_context() override { return *this; }
  uint32_t node_count() const override { return static_cast<uint32_t>(nodes.size()); }
  const transport::Endpoint* FastEndpoint(uint32_t node) const override;

 private:
  Status WaitLoop(std::span<const uint64_t> ids);
  Status Progress(uint32_t node, ChannelKind kind, bool* did);
  void Fail(uint32_t node, ChannelKind kind, const Status& why);
};

std::string AddressKey(KeyspaceId keyspace, std::string_view key);

// Sends the release of every intent of the owner (no reply awaited; client/intents.cpp).
// Sends INTENT_RELEASE of owner to every server it asked for an intent, except those in
// `released` (their COMMIT carried the release).
void PostIntentRelease(Client::Impl& c, uint64_t owner, std::span<const uint32_t> released = {});

}  // namespace ramp
