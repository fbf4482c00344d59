// The pg_ramp client library: RAMP-Fast transactions against a cluster of rampd servers.
//
// Single-threaded by design: a Client belongs to one thread and never starts threads of its
// own (it runs inside PostgreSQL backends). Every call that waits polls its connections,
// calls ClientOptions::wait_hook now and then (a backend checks for query cancel there) and
// gives up after timeout_ms with a Timeout status. Use one Client per thread.
//
// Errors are Status values:
//   Timeout      the cluster did not answer in time
//   Unavailable  a server is unreachable or went away (the message names it)
//   Conflict     a write-write conflict: the caller should retry the transaction
//   TooLarge     a key, value or batch over the configured limits
//   Cancelled    the wait hook asked to stop
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ramp/address_cache.h"
#include "ramp/keys.h"
#include "ramp/status.h"
#include "ramp/transport/endpoint.h"
#include "ramp/types.h"
#include "ramp/write_batch.h"

namespace ramp {

struct ClientOptions {
  // Seed servers; the cluster's full node list is learned from them.
  std::vector<transport::Endpoint> seeds;
  // Provider for get+/get*/put+ connections (rpc always uses tcp). The client connects to
  // the endpoint of each server that has this provider.
  transport::Provider provider = transport::Provider::kShm;
  ReadPath read_path = ReadPath::kGetStar;
  WritePath write_path = WritePath::kPutPlus;
  Protocol protocol = Protocol::kRamp;
  std::string token;  // cluster token
  // How long a wait for the cluster may take. A commit's waits share one such timeout (its
  // PREPAREs, the ABORTs after a failure, the COMMITs): a paused server holds it no longer.
  int timeout_ms = 10000;
  int connect_timeout_ms = 5000;
  size_t ring_bytes = 1u << 20;
  // Called while waiting; a non-OK status aborts the wait with it.
  std::function<Status()> wait_hook;
  // Transactions retried inside Commit when a PREPARE is refused for a stale timestamp.
  int max_commit_retries = 8;
  // Limits checked before anything is sent.
  size_t max_key_bytes = 4096;
  size_t max_value_bytes = 32u << 20;
  size_t max_batch_items = 1u << 20;
  // Debug switch: skips RAMP's second read round. Reads may then be fractured; it exists so
  // that the read-atomicity checker can prove it catches fractured reads.
  bool disable_round2 = false;
  // Debug switch: COMMIT goes to one server first and to the others this many microseconds
  // later, which widens the window in which a transaction is committed at some partitions
  // only (fault injection for the read-atomicity checker).
  int debug_commit_delay_us = 0;
  // Debug switch (tests): GET* takes whatever record it copied one-sided without checking
  // that it is the current version of the key at the expected epoch, so that a test can
  // show the checks are what keeps stale and reused memory out.
  bool debug_trust_one_sided = false;
  // Debug switch (tests): PLACEMENT pushes from the homes are dropped unread, as by a
  // sharer that missed them, so that a test can show what a stale cached placement meets.
  bool debug_ignore_placement_pushes = false;
  // Client id (unique in the cluster; 0 = draw a random one).
  uint64_t client_id = 0;
  // Where GET* addresses are kept: null = a cache private to this client. Clients of one
  // host may share one (AttachSharedAddressCache) so that an address one learnt serves all.
  std::shared_ptr<AddressCache> address_cache;
  // COMMITs ask for the addresses of what they wrote (COMMIT_ADDRESSES) and put them into the
  // address cache. Off by default (a client with a private cache and no reads of what it
  // writes gains nothing); PostgreSQL's clients turn it on.
  bool learn_commit_addresses = false;
  // ReadSession::GetGroup keeps the entries of groups it read (up to this many bytes; 0:
  // none) with their partition's group version, and serves a group again from them after
  // one one-sided read of that version finds it unchanged (no request to the server).
  size_t group_cache_bytes = size_t{64} << 20;
  // Debug switch (tests): the kept entries of a group are served without reading the group
  // version, so that a test can show that the version check is what keeps them current.
  bool debug_trust_group_cache = false;
  // Debug switch (tests, measurements): snapshot reads never close partitions to skip
  // RAMP's round 2 (RoundTwo in read_path.cpp); every round 2 is fetched.
  bool debug_no_round2_closes = false;
};

// One item of a multi-key read.
struct ReadItem {
  KeyspaceId keyspace = 0;
  std::string_view key;
  // Optional: the reader already knows (from an index entry's metadata, say) that the
  // transaction with this timestamp wrote the key; if round 1 returns an older version, the
  // version with exactly this timestamp is fetched (as RAMP's round 2 would).
  Timestamp required;
};

struct GroupEntry {
  std::string suffix;
  Timestamp ts;
  std::string value;
  // Keys the entry's transaction also wrote (from its metadata), with that timestamp:
  // a reader following the entry to its row passes them as ReadItem::required.
  std::vector<std::pair<std::string, KeyspaceId>> siblings;
};

struct ReadResult {
  bool found = false;  // false: no committed version (never written, or deleted)
  Timestamp ts;        // the version read (zero when not found and never written)
  std::string value;
  // The RAMP metadata of the version read (encoded record::Metadata: the other keys or
  // partitions its transaction wrote), when the transaction asked for it
  // (Transaction::ReturnMetadata): lets a caller keep several reads atomic together.
  std::string metadata;
};

// Counters of one client, for benchmarks and status.
struct ClientStats {
  uint64_t transactions_committed = 0;
  uint64_t transactions_aborted = 0;
  uint64_t reads = 0;
  uint64_t one_sided_reads = 0;       // GET* attempts
  uint64_t one_sided_hits = 0;        // GET* that returned a valid committed version
  uint64_t one_sided_fallbacks = 0;   // invalid/stale address, fell back to GET+
  uint64_t round2_reads = 0;          // items fetched by timestamp in round 2
  uint64_t read_retries = 0;          // whole reads retried (round-2 miss)
  uint64_t reads_around_commits = 0;  // rows read again before a commit a statement excluded
  uint64_t moved_replies = 0;
  uint64_t placements_pushed = 0;  // new placements the homes pushed at cutovers (taken)
  uint64_t sharer_lookups = 0;     // LOOKUPs re-sent to a home after its channel reopened
  uint64_t commit_retries = 0;     // PUTs retried with a fresh timestamp
  uint64_t sleeps = 0;             // waits that slept in epoll
  uint64_t sleep_timeouts = 0;     // ... and woke by timeout rather than a doorbell
  uint64_t round2_skipped = 0;     // round-2 items not fetched: partition closed at the snapshot
  uint64_t partitions_closed = 0;  // partitions closed at a snapshot for round 2 (RoundTwo)
  uint64_t group_reads = 0;        // ReadSession::GetGroup calls
  uint64_t group_cache_hits = 0;   // ... served from kept entries (group version unchanged)
  uint64_t shared_group_hits = 0;  // ... of which from the shared cache (SharedGroup)
};

class Client;
class ReadSession;        // ramp/read_session.h
struct RebalanceOptions;  // ramp/rebalance.h
struct RebalancePlan;

// ---- partition scans ----------------------------------------------------------------------
// A scan of a whole keyspace through remote page I/O (ramp/page_reader.h): the pages of
// each partition are read from their servers and parsed here. Read-atomic: the scan takes a
// snapshot timestamp when it opens and returns, for every key, the newest version committed
// at or before it; transactions that commit later are excluded (for every key they wrote),
// and a transaction at or below the snapshot is seen whole. Streaming with bounded memory:
// one batch of pages' rows is held at a time. A Scanner must not outlive its Client.
struct ScanOptions {
  int connections_per_node = 2;
  int batch_pages = 32;  // 256 KiB per request: the server reads consecutive pages at once
  // Per connection. Buffers: servers x connections x batches x batch_pages x 8 KiB
  // (12 MiB with 3 servers), allocated when the client's first scan opens and kept for its
  // next scans (ScanStats::reused_reader).
  int batches_in_flight = 8;
  // Each row's value is placed so that value.data() + value_align_skip is 8-byte aligned
  // (a caller whose values carry a tag byte before an aligned structure asks for 1).
  uint32_t value_align_skip = 0;
  // Called with every page the scan asks for, in order (I/O traces for benchmarks).
  std::function<void(const PartitionId& part, uint32_t page_no)> on_page;
  // Parallel scans: several Scanners (in several processes) share one scan. The snapshot
  // one of them drew with Client::OpenScanSnapshot (zero: this scan draws its own), and
  // the partitions this Scanner reads: take_partition(&i) hands out the next partition
  // index in [0, buckets) to read, false when none is left (empty: every partition).
  Timestamp snapshot;
  std::function<bool(uint32_t* index)> take_partition;
};

// A row of a scan. key and value view memory of the Scanner, which holds the rows of one
// batch of pages at a time: they stay valid until the Scanner moves on to the next batch
// (the call of Next or NextRows after the last row of their batch) or is destroyed.
struct ScanRow {
  std::string_view key;
  Timestamp ts;
  std::string_view value;
};

struct ScanStats {
  uint64_t partitions = 0;
  uint64_t pages = 0;
  uint64_t bytes = 0;
  uint64_t rows = 0;
  uint64_t repaired = 0;  // keys the pages could not decide, read by snapshot GET
  // Pages below the head page at SCAN_OPEN: complete, their records' checksums not computed.
  uint64_t pages_complete = 0;
  // Partitions whose pages the reader asked for while the partition before was still read.
  uint64_t prefetched = 0;
  // The page reader (connections, registered buffers) an earlier scan of the client left,
  // rather than a new one: a scan that ends leaves its reader to the next (one at a time).
  bool reused_reader = false;
};

class Scanner {
 public:
  ~Scanner();
  Scanner(const Scanner&) = delete;
  Scanner& operator=(const Scanner&) = delete;

  // The next row into *row; *done becomes true (and *row is untouched) after the last one.
  // Rows come partition by partition, in no particular order within a partition.
  Status Next(ScanRow* row, bool* done);
  // The rows of the current batch not yet returned (the next batch's when every row of the
  // current one was), at least one unless *done: one call per batch of pages (a partition
  // takes several). The span and the rows' views stay valid until the next call of Next or
  // NextRows.
  Status NextRows(std::span<const ScanRow>* rows, bool* done);
  Timestamp snapshot() const;
  ScanStats stats() const;

  struct State;  // engine/src/client/scanner.cpp

 private:
  friend class Client;
  explicit Scanner(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// A transaction over keys of the caller's layout (benchmarks, tools, tests). Writes are
// buffered in a WriteBatch and sent as one RAMP PUT at Commit; reads overlay the buffered
// writes (read-your-writes). A Transaction must not outlive its Client. (A SQL engine uses a
// ReadSession for its reads and a WriteBatch + Client::Write for its writes instead.)
class Transaction {
 public:
  ~Transaction();
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  // One RAMP read of all items (read-atomic: never half of another transaction's writes).
  Status GetAll(std::span<const ReadItem> items, std::vector<ReadResult>* out);
  Status Get(KeyspaceId keyspace, std::string_view key, ReadResult* out);
  // GetAll/Get also return each version's metadata (ReadResult::metadata). Off by default.
  void ReturnMetadata(bool on);
  // Reads (GetAll/Get) return the newest committed version at or before `snapshot` instead
  // of the latest (zero: latest, the default); read atomicity is unchanged. A statement that
  // reads many keys in many requests uses one snapshot so that a transaction committing
  // meanwhile is seen by none of them (or, by RAMP's repair, by all it touches).
  void SetReadSnapshot(const Timestamp& snapshot);
  // A snapshot that includes every version committed before now (and all this client saw).
  Timestamp SnapshotNow() const;

  // Every live (committed, not deleted) entry of a group, overlaid with this transaction's
  // buffered writes to the group.
  Status GetGroup(KeyspaceId keyspace, std::string_view group, std::vector<GroupEntry>* out);

  // Buffers a write. expected (optional) is the timestamp of the version this transaction
  // read: Commit fails with Conflict if the key's latest committed version differs or
  // another transaction has the key prepared (write-write conflict detection).
  Status Put(KeyspaceId keyspace, std::string_view key, std::string_view value,
             const Timestamp* expected = nullptr);
  Status Delete(KeyspaceId keyspace, std::string_view key, const Timestamp* expected = nullptr);

  // Commits the buffered writes as one RAMP PUT (PREPARE everywhere, then COMMIT
  // everywhere). On error nothing of the transaction becomes visible.
  Status Commit(Timestamp* commit_ts = nullptr);
  // Drops the buffered writes (nothing was sent yet).
  void Abort();

  size_t buffered_writes() const;

  // Implementation (engine/src/client/transaction_state.h).
  struct State;

 private:
  friend class Client;
  explicit Transaction(Client* client);
  // GetAll's work, into out[0 .. items.size()) (Get needs no vector).
  Status GetInto(std::span<const ReadItem> items, ReadResult* out);
  Client* client_;
  std::unique_ptr<State> state_;
};

// What rampctl status and ramp.cluster_status() show for one server.
struct ServerStatus {
  uint32_t node = 0;
  std::string endpoints;  // comma-separated
  bool reachable = false;
  std::string error;  // why not reachable
  uint64_t partitions = 0;
  uint64_t keys = 0;
  uint64_t bytes = 0;
  uint64_t ops = 0;  // requests served since start
  uint64_t uptime_ms = 0;
  uint64_t prepared_txns = 0;  // prepared and not decided yet (in doubt or in flight)
  // The cluster file as the server runs it: its own entry (what it advertises), the nodes
  // it lists and a digest of it (servers running different files differ here).
  std::string advertised;
  uint32_t config_nodes = 0;
  uint64_t config_digest = 0;
};

// How one server reached one node just now (Client::Probe): a fresh connection to the
// node's endpoint as the server's cluster file lists it, token handshake and HELLO.
struct NodeProbe {
  uint32_t from = 0;  // the server that probed
  uint32_t to = 0;    // the node it probed
  bool ok = false;
  uint64_t latency_us = 0;  // connect, handshake and HELLO
  std::string endpoint;     // what it connected to
  std::string error;        // names both ends ("node 2 advertises ... but node 0 ...")
};

// What ramp.partitions() shows for one partition.
struct PartitionStatus {
  PartitionId id;
  uint32_t owner = 0;
  uint32_t home = 0;
  uint64_t epoch = 0;
  uint64_t keys = 0;
  uint64_t bytes = 0;
  double ops_per_sec = 0;  // decaying average
  bool migrating = false;  // a migration of it is in flight
};

// What ramp.migrations and rampctl status show for one migration (DESIGN §7).
struct MigrationStatus {
  PartitionId id;
  uint32_t home = 0;
  uint32_t source = 0;
  uint32_t target = 0;
  std::string phase;  // copying, cutover, committed, done, rolled back, failed
  bool in_flight = false;
  uint64_t old_epoch = 0;
  uint64_t new_epoch = 0;
  uint64_t started_unix_ms = 0;
  uint64_t bytes_copied = 0;
  uint64_t bytes_total = 0;
  std::string error;  // why it rolled back
};

// ---- write intents (row locks of SQL writers; DESIGN §5) ---------------------------------
// An intent on a key at its partition, owned by one transaction of this client
// (Client::NewIntentOwner). Modes are PostgreSQL's row-lock modes and conflict as they do.
// Readers never wait for intents; writes do not check them (the commit's version check is
// the safety net for writers that take none).
// Beyond them, GroupIntent(g): requests of one group go together, of different groups
// conflict, and a group conflicts with every mode above but key-share (the writers of one
// base table of a materialized view against those of its other tables).
enum class IntentMode : uint8_t { kKeyShare = 0, kShare = 1, kNoKeyExclusive = 2, kExclusive = 3 };
inline constexpr uint32_t kIntentGroups = 252;
// g < kIntentGroups.
inline IntentMode GroupIntent(uint32_t g) {
  return static_cast<IntentMode>(4 + g);
}

struct IntentRequest {
  uint64_t owner = 0;     // Client::NewIntentOwner()
  uint64_t priority = 0;  // the owner's start time (HLC): the youngest of a deadlock gives way
  KeyspaceId keyspace = 0;
  std::string_view key;
  IntentMode mode = IntentMode::kExclusive;
  bool wait = true;  // false: kHeld at once when another transaction holds the key
  // While waiting, this often the wait-for graph is followed through every server
  // (PostgreSQL's deadlock_timeout): a cycle whose youngest member is this owner ends the
  // wait with kDeadlock. It is also how a server that stopped answering is noticed.
  int deadlock_check_ms = 1000;
};

struct IntentResult {
  enum class Outcome { kGranted, kHeld, kDeadlock };
  Outcome outcome = Outcome::kGranted;
  // kGranted: the key's latest committed version when it was granted (a writer compares
  // it with the version it read); live is false for a deletion or a key never written.
  bool live = false;
  Timestamp latest;
  // kGranted: the value of that version; a deletion's is empty, or kMovedTombstone when the
  // row lives on under another key (ramp/write_batch.h).
  std::string value;
  // kHeld / kDeadlock: who holds the key / the cycle, for messages.
  std::string detail;
};

class Client {
 public:
  static Status Open(const ClientOptions& options, std::unique_ptr<Client>* out);
  ~Client();
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  std::unique_ptr<Transaction> Begin();

  // Commits a batch as one RAMP PUT (PREPARE everywhere, then COMMIT everywhere), sending
  // its values from the batch (no copy). On error nothing of it becomes visible. Defines
  // the keyspaces of its rows (KeyspaceRef). TooLarge when it holds more than
  // max_batch_items writes. The batch is unchanged (Clear it to reuse it).
  Status Write(const WriteBatch& batch, Timestamp* commit_ts = nullptr);
  // The same; when it commits, the write intents of release_intents_of (see AcquireIntent)
  // are released with its COMMITs (each server releases them right after applying its
  // commit, which a waiter then reads; one holding intents but no write gets INTENT_RELEASE).
  Status Write(const WriteBatch& batch, Timestamp* commit_ts, uint64_t release_intents_of);
  // The limits a WriteBatch for this client checks (ClientOptions::max_*_bytes).
  WriteLimits write_limits() const;
  // Bulk loading (DESIGN §5, "Writes ahead of the commit"): commits rows of a keyspace that
  // nothing else reads before the caller's transaction commits (one that transaction
  // created) in RAMP PUTs of their own, while the caller goes on: this call sends the
  // PREPAREs of `keys` (entries of batch; those not inserted, deleted or already streamed
  // are skipped) and marks them streamed (Write skips them); earlier calls' PUTs whose
  // PREPAREs are answered get their COMMITs, answered COMMITs are collected (the oldest PUT
  // is waited for only when a few are behind: write_path.cpp, Advance). A PUT
  // whose PREPAREs fail is aborted and its entries unmarked (Write sends them), so nothing
  // is lost; the error is returned once, and the caller stops writing ahead.
  Status WriteAhead(WriteBatch& batch, const KeyspaceRef& ks, std::span<const EntryKey> keys);
  // Ends the writes ahead in flight: each is committed (batch: where to unmark the entries
  // of one whose PREPAREs failed) or, with abort, aborted where still only prepared.
  Status FinishWriteAhead(WriteBatch* batch, bool abort = false);
  bool WritingAhead() const;
  // A read session (ramp/read_session.h); it must not outlive the Client.
  std::unique_ptr<ReadSession> NewReadSession();

  // Buckets of a keyspace (default kDefaultBuckets) and whether its keys are grouped
  // (EncodeGroupKey; secondary indexes). Every client must agree.
  void DefineKeyspace(KeyspaceId keyspace, uint32_t buckets, bool grouped = false);
  uint32_t BucketsOf(KeyspaceId keyspace) const;
  // Moves this client's hybrid clock to at least `time` (HLC units, milliseconds << 16):
  // the next commit gets a later timestamp. With a commit wait this orders commits after
  // events of known wall-clock time (the extension's statement snapshots use it).
  void AdvanceClock(uint64_t time);

  // Opens a read-atomic scan of every committed row of a keyspace (see Scanner). The scan
  // raises the keyspace's partitions' watermark to its snapshot: writers with an older
  // timestamp retry with a newer one (Commit does that by itself).
  Status OpenScan(KeyspaceId keyspace, const ScanOptions& options, std::unique_ptr<Scanner>* out);
  // Draws a scan snapshot for a keyspace and closes it as OpenScan does (every transaction
  // at or below it decided), without reading: Scanners opened with it (ScanOptions::snapshot)
  // in other processes read one consistent state of the keyspace together.
  Status OpenScanSnapshot(KeyspaceId keyspace, Timestamp* snapshot);

  // Write intents (see IntentRequest). NewIntentOwner names a new transaction of this
  // client. AcquireIntent takes an intent, waiting (polling, the wait hook called: it ends
  // with Cancelled when the hook says so) until the holders release it when request.wait;
  // a wait has no deadline of its own. Errors: Cancelled, Unavailable, Timeout (a server
  // did not answer), Moved. ReleaseIntents releases every intent of the owner (and
  // withdraws its waits) at every server it asked, without waiting for the replies: they
  // go out after the owner's COMMIT on the same connections, so a waiter granted the key
  // then reads that commit.
  uint64_t NewIntentOwner();
  Status AcquireIntent(const IntentRequest& request, IntentResult* result);
  void ReleaseIntents(uint64_t owner);

  // Removes every partition of a keyspace on every server.
  Status DropKeyspace(KeyspaceId keyspace);

  Status ClusterStatus(std::vector<ServerStatus>* out);
  // Asks node `from` to connect to each listed node (none: every node it knows) now and
  // say how it went. rampctl status asks every server: the reachability matrix.
  Status Probe(uint32_t from, const std::vector<uint32_t>& targets, std::vector<NodeProbe>* out);
  Status Partitions(std::vector<PartitionStatus>* out);

  // Moves a partition to a node (DESIGN §7): asks the partition's home, which checks the
  // request (unknown node or partition, a move to where it is, one already in flight, a
  // target that is down or has no room: errors that name the reason, nothing moves) and
  // starts the move. Returns once started; with wait, once it finished, calling progress
  // (if set) now and then; a move that rolled back returns Aborted with the reason.
  Status MigratePartition(const PartitionId& partition, uint32_t node, bool wait = true,
                          const std::function<void(const MigrationStatus&)>& progress = {});
  // Migrations in flight and recently finished, from every home (in flight first).
  Status Migrations(std::vector<MigrationStatus>* out);
  // The hot-partition rebalancer's plan for the cluster as it is now (ramp/rebalance.h:
  // loads from every owner, cool-downs from the homes' recent migrations); nothing moves.
  Status PlanRebalance(const RebalanceOptions& options, RebalancePlan* out);

  uint32_t node_count() const;
  uint64_t client_id() const;
  const ClientOptions& options() const;
  ClientStats stats() const;
  AddressCacheStats address_cache_stats() const;

  // Implementation (engine/src/client); public so that internal pieces (scans, page I/O)
  // can reach it without friendship chains.
  struct Impl;
  Impl* impl() { return impl_.get(); }

 private:
  explicit Client(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Parses "rpc|get+|get*" etc. into options (used by GUCs and command lines).
Status ParseClientOptions(std::string_view nodes, std::string_view provider,
                          std::string_view read_path, ClientOptions* out);

}  // namespace ramp
