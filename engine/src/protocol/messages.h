// The wire protocol between clients and rampd, and between rampd servers.
//
// Every message (request or reply) starts with a 24-byte header:
//   u16 op | u16 status (replies: Status::Code, 0 = OK) | u32 count (items in the body)
//   u64 request id (echoed by the reply) | u64 clock (the sender's hybrid clock, merged
//   by the receiver so that clocks of the cluster stay ahead of every timestamp seen)
// followed by the op's body. A reply has op | kReplyBit. An error reply's body is the
// error message (UTF-8), except where an op defines a richer error body.
//
// Decoded messages hold string_views into the received bytes: they are valid until the
// message is released. Every decoder is bounds-checked: malformed bytes give Corruption,
// never a read outside the message (fuzzed by engine/fuzz/protocol_fuzz.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ramp/status.h"
#include "ramp/transport/memory.h"
#include "ramp/types.h"

namespace ramp::protocol {

inline constexpr uint32_t kProtocolVersion = 1;
inline constexpr uint16_t kReplyBit = 0x8000;
inline constexpr size_t kHeaderBytes = 24;

enum class Op : uint16_t {
  kHello = 1,
  kGet = 2,
  kPrepare = 3,
  kCommit = 4,
  kAbort = 5,
  kLookup = 6,       // directory: owner and epoch of partitions (asked at their home)
  kLock = 7,         // strict 2PL baseline: acquire locks (no-wait)
  kUnlock = 8,       // strict 2PL baseline: release a transaction's locks
  kWriteLocked = 9,  // strict 2PL baseline: install values under held write locks
  kStatus = 10,      // server counters
  kPartitions = 11,  // per-partition status
  kDropKeyspace = 12,
  kClock = 13,            // the server's clock (scans pick their snapshot from it)
  kGetGroup = 14,         // every live entry of a group of grouped keys (secondary indexes)
  kIntent = 15,           // write intents: take (or wait for, or withdraw a wait for) a row lock
  kIntentRelease = 16,    // write intents: release a transaction's intents at its end
  kWaitsFor = 17,         // write intents: whom transactions wait for (deadlock detection)
  kCommitAddresses = 18,  // COMMIT whose reply gives the committed records' addresses (GET*)
  kScanOpen = 20,
  kScanNext = 21,
  kScanClose = 22,
  kReadPages = 30,   // remote page I/O
  kTxnState = 40,    // server to server: what a partition knows of a transaction
  kMigrate = 50,     // start a migration of a partition (asked at its home)
  kMigrations = 51,  // the migrations in flight (and recently finished) at this home
  kMigrateCtl = 52,  // server to server: one step of a migration (home to source/target)
  kLoadReport = 53,  // a client's one-sided (GET*) reads per partition, which servers never see
  kProbe = 54,       // connect to these nodes' advertised endpoints now and say how it went
  kPlacement = 55,   // home to client, unasked: new placements of partitions it looked up
                     // (sent as a reply to request id 0; PlacementPush)
  // server to server: the ends of transactions whose intents moved with a partition
  kIntentForward = 56,
};

const char* OpName(Op op);
bool KnownOp(uint16_t op);

struct Header {
  uint16_t op = 0;  // Op, with kReplyBit on replies
  uint16_t status = 0;
  uint32_t count = 0;
  uint64_t request_id = 0;
  uint64_t clock = 0;
  bool is_reply() const { return op & kReplyBit; }
  Op base_op() const { return static_cast<Op>(op & ~kReplyBit); }
};

void EncodeHeader(const Header& h, std::string* out);  // appends kHeaderBytes
Status DecodeHeader(std::string_view msg, Header* out);

// Builds a reply header for a request; the caller appends the body.
Header ReplyTo(const Header& request, uint64_t clock, uint32_t count = 0);
// An error reply: header with the status code, the message as body.
void EncodeErrorReply(const Header& request, uint64_t clock, const Status& error, std::string* out);
// Turns an error reply back into a Status (OK when header.status is 0).
Status DecodeErrorReply(const Header& h, std::string_view body);

// ---- hello -------------------------------------------------------------------------------
struct Hello {
  uint32_t version = kProtocolVersion;
  uint64_t client_id = 0;
  uint8_t peer_kind = 0;  // 0 = client, 1 = server
};
struct HelloReply {
  uint32_t node = 0;  // this server's index in the cluster
  uint32_t node_count = 0;
  uint32_t default_buckets = kDefaultBuckets;
  transport::RemoteRegion arena;   // the page memory GET* reads one-sided
  uint64_t instance = 0;           // changes when the server restarts (address caches reset)
  std::vector<std::string> nodes;  // endpoints of every node ("tcp://..,shm://..")
  // Nodes 0..homes-1 are the homes of partitions (HomeOf(p, homes)); later nodes are home
  // of none and own what migrations move to them. Last on the wire and optional when
  // decoding (a server built before it sends none: homes = node_count).
  uint32_t homes = 0;
};
void Encode(const Hello& m, std::string* out);
Status Decode(std::string_view body, Hello* out);
void Encode(const HelloReply& m, std::string* out);
Status Decode(std::string_view body, HelloReply* out);

// ---- reads -------------------------------------------------------------------------------
inline constexpr uint8_t kGetWantAddress = 1u << 0;  // reply with the record's address (GET*)
inline constexpr uint8_t kGetSnapshot = 1u << 1;     // `at` is a snapshot: newest committed <= at

struct GetItem {
  PartitionId part;
  std::string_view key;
  Timestamp at;  // zero: latest committed; otherwise the version with exactly this timestamp
                 // (round 2), or with kGetSnapshot the newest committed at or before it
};
struct GetRequest {
  uint8_t flags = 0;
  std::vector<GetItem> items;
};

enum class ItemStatus : uint8_t {
  kOk = 0,
  kNotFound = 1,   // no such version (or the key was never written)
  kMoved = 2,      // this server does not own the partition: see owner/epoch
  kCollected = 3,  // the version asked for by timestamp was garbage collected: retry
  kError = 4,
};

// Where a record sits in the server's arena: what a GET* client caches.
struct Address {
  uint64_t offset = 0;
  uint32_t length = 0;
  uint32_t epoch = 0;
  bool valid() const { return length != 0; }
};

struct GetResult {
  ItemStatus status = ItemStatus::kNotFound;
  uint8_t flags = 0;  // record::kRecordTombstone
  Timestamp ts;
  std::string_view value;
  std::string_view metadata;  // encoded record::Metadata
  Address address;
  uint32_t owner = 0;  // kMoved
  uint64_t epoch = 0;  // kMoved
};
struct GetReply {
  std::vector<GetResult> results;
};
void Encode(const GetRequest& m, std::string* out);
Status Decode(std::string_view body, uint32_t count, GetRequest* out);
void Encode(const GetReply& m, std::string* out);
Status Decode(std::string_view body, uint32_t count, GetReply* out);

// GET_GROUP: the latest committed, non-deleted entries of one group in one partition.
struct GetGroupRequest {
  PartitionId part;
  std::string_view group;
};
struct GroupEntryWire {
  std::string_view key;  // the whole grouped key
  Timestamp ts;
  std::string_view value;
  std::string_view metadata;
};
struct GetGroupReply {
  ItemStatus status = ItemStatus::kOk;  // kOk or kMoved
  uint32_t owner = 0;
  uint64_t epoch = 0;
  // The partition's group version (store::GroupVersion): an 8-byte word of the server's
  // arena a client may read one-sided; while it holds `version`, GET_GROUP of any group of
  // the partition returns what it returned with it. version 0: none (do not keep).
  uint64_t version_offset = 0;
  uint64_t version = 0;
  std::vector<GroupEntryWire> entries;
};
void Encode(const GetGroupRequest& m, std::string* out);
Status Decode(std::string_view body, GetGroupRequest* out);
void Encode(const GetGroupReply& m, std::string* out);
Status Decode(std::string_view body, uint32_t count, GetGroupReply* out);

// ---- writes ------------------------------------------------------------------------------
inline constexpr uint8_t kPutTombstone = 1u << 0;
inline constexpr uint8_t kPutHasExpected = 1u << 1;
inline constexpr uint8_t kPutGrouped = 1u << 2;  // the key is a grouped key (EncodeGroupKey)

struct PrepareItem {
  PartitionId part;
  std::string_view key;
  std::string_view value;
  uint8_t flags = 0;
  Timestamp expected;         // kPutHasExpected: the version the writer read
  std::string_view metadata;  // encoded record::Metadata
};
struct PrepareRequest {
  Timestamp ts;
  std::vector<PrepareItem> items;
};
// Error details of a refused PREPARE (body of the error reply, after the message).
struct PrepareError {
  uint32_t item = 0;    // index of the item that failed
  Timestamp watermark;  // kAborted for a stale timestamp: draw a timestamp above this
  uint32_t owner = 0;   // kMoved
  uint64_t epoch = 0;
};
void Encode(const PrepareRequest& m, std::string* out);
Status Decode(std::string_view body, uint32_t count, PrepareRequest* out);

// COMMIT and ABORT of a timestamp at a list of partitions of the receiving server.
// release_intents_of (optional on the wire: 8 more bytes when not 0): after applying the
// decision the server releases the write intents of that transaction of the sending client,
// as an INTENT_RELEASE right behind it would, without that message and its reply.
struct Decision {
  Timestamp ts;
  std::vector<PartitionId> partitions;
  uint64_t release_intents_of = 0;
};
void Encode(const Decision& m, std::string* out);
Status Decode(std::string_view body, uint32_t count, Decision* out);

// Reply of COMMIT_ADDRESSES: where each key this COMMIT made current now lives, so that the
// writer's next read of it (or, through a shared address cache, anyone's on its host) is
// one-sided instead of a request that learns the new address.
struct CommittedAddress {
  PartitionId part;
  std::string_view key;
  Address address;
};
struct CommitAddressesReply {
  std::vector<CommittedAddress> items;
};
void Encode(const CommitAddressesReply& m, std::string* out);
Status Decode(std::string_view body, uint32_t count, CommitAddressesReply* out);

void Encode(const PrepareError& m, std::string_view message, std::string* out);
Status Decode(std::string_view body, PrepareError* out, std::string* message);

// ---- directory ---------------------------------------------------------------------------
struct LookupRequest {
  std::vector<PartitionId> partitions;
};
struct Placement {
  uint32_t owner = 0;
  uint64_t epoch = 0;
  bool operator==(const Placement&) const = default;
};
struct LookupReply {
  std::vector<Placement> placements;
};
void Encode(const LookupRequest& m, std::string* out);
Status Decode(std::string_view body, uint32_t count, LookupRequest* out);
void Encode(const LookupReply& m, std::string* out);
Status Decode(std::string_view body, uint32_t count, LookupReply* out);
// PLACEMENT: at a cutover the home tells the partition's sharers (clients that looked it
// up) its new owner and epoch, so that their next request goes there without a MOVED.
// Header: op kPlacement | kReplyBit, request id 0, count = entries.
struct PlacementPush {
  std::vector<std::pair<PartitionId, Placement>> entries;
};
void Encode(const PlacementPush& m, std::string* out);
Status Decode(std::string_view body, uint32_t count, PlacementPush* out);

// ---- strict two-phase locking (baseline) ---------------------------------------------------
inline constexpr uint8_t kLockShared = 0;
inline constexpr uint8_t kLockExclusive = 1;
struct LockItem {
  PartitionId part;
  std::string_view key;
  uint8_t mode = kLockShared;
  std::string_view value;  // kWriteLocked: the value to install
  uint8_t flags = 0;       // kWriteLocked: kPutTombstone
};
struct LockRequest {
  uint64_t txn = 0;  // locks are owned by (client id, txn)
  std::vector<LockItem> items;
};
void Encode(const LockRequest& m, std::string* out);
Status Decode(std::string_view body, uint32_t count, LockRequest* out);

// ---- write intents (row locks of SQL writers; server/intent_table.h) ----------------------
// Modes: PostgreSQL's row-lock modes, weakest first (IntentTable::Conflicts).
inline constexpr uint8_t kIntentKeyShare = 0;
inline constexpr uint8_t kIntentShare = 1;
inline constexpr uint8_t kIntentNoKeyExclusive = 2;
inline constexpr uint8_t kIntentExclusive = 3;
// Modes kIntentGroupBase + g (g = 0..251): "a writer of group g". Requests of one group go
// together, of different groups conflict, and a group conflicts with every row-lock mode but
// key-share. A materialized view's writers of base table g take it on one key of the view
// (extension/immv/maintain.cpp): writers of one table run side by side, of different
// tables wait for each other, as PostgreSQL's RowExclusiveLock against ShareLock.
inline constexpr uint8_t kIntentGroupBase = 4;
// IntentRequest::flags
inline constexpr uint8_t kIntentWait = 1;      // queue when held; the reply comes when granted
inline constexpr uint8_t kIntentWithdraw = 2;  // withdraw this owner's queued request for the key
struct IntentOwner {
  uint64_t client = 0;
  uint64_t txn = 0;
  bool operator==(const IntentOwner&) const = default;
};
struct IntentHolder {
  IntentOwner owner;
  uint64_t priority = 0;  // the owner's start time: the youngest of a deadlock cycle gives way
};
struct IntentRequest {  // count = 1; the owner is (the session's client id, txn)
  uint64_t txn = 0;
  uint64_t priority = 0;
  uint8_t flags = 0;
  uint8_t mode = kIntentExclusive;
  PartitionId part;
  std::string_view key;
};
inline constexpr uint8_t kIntentGranted = 0;
inline constexpr uint8_t kIntentHeld = 1;  // not granted (no wait asked): holders say by whom
struct IntentReply {                       // count = holders
  uint8_t outcome = kIntentGranted;
  uint8_t live = 0;        // granted: the key's latest committed version is a live row
  Timestamp latest;        // granted: that version (zero: never written)
  std::string_view value;  // granted: its value (a deletion's: empty or kMovedTombstone)
  std::vector<IntentHolder> holders;
};
struct IntentReleaseRequest {
  uint64_t txn = 0;
};
// An intent that moves with its partition (MIGRATE_CTL: the source's kRelease reply, the
// home's kAdopt to the target): who holds which key of the partition, in which mode.
struct MovedIntent {
  IntentOwner owner;
  uint64_t priority = 0;
  uint8_t mode = kIntentExclusive;
  std::string key;
  bool operator==(const MovedIntent&) const = default;
};
// INTENT_FORWARD (server to server, count = items): the ends of transactions whose intents
// on these partitions moved from the sender to the receiver. A client releases (or closes
// its last connection) only where it asked; the server it asked passes it on.
struct IntentForward {
  std::vector<std::pair<IntentOwner, PartitionId>> released;
};
void Encode(const IntentForward& m, std::string* out);
Status Decode(std::string_view body, uint32_t count, IntentForward* out);
struct WaitsForRequest {  // count = owners
  std::vector<IntentOwner> owners;
};
struct WaitsForReply {  // count = owners; edges[i]: whom owners[i] waits for at this server
  std::vector<std::vector<IntentHolder>> edges;
};
void Encode(const IntentRequest& m, std::string* out);
Status Decode(std::string_view body, IntentRequest* out);
void Encode(const IntentReply& m, std::string* out);
Status Decode(std::string_view body, uint32_t count, IntentReply* out);
void Encode(const IntentReleaseRequest& m, std::string* out);
Status Decode(std::string_view body, IntentReleaseRequest* out);
void Encode(const WaitsForRequest& m, std::string* out);
Status Decode(std::string_view body, uint32_t count, WaitsForRequest* out);
void Encode(const WaitsForReply& m, std::string* out);
Status Decode(std::string_view body, uint32_t count, WaitsForReply* out);

// ---- administration ----------------------------------------------------------------------
struct StatusReply {
  uint32_t node = 0;
  uint64_t partitions = 0;
  uint64_t keys = 0;
  uint64_t bytes = 0;
  uint64_t ops = 0;
  uint64_t uptime_ms = 0;
  // Transactions prepared here and not decided yet. Last on the wire and optional when
  // decoding (a server built before it sends no such field: 0).
  uint64_t prepared_txns = 0;
  // The cluster file as this server runs it (optional, after prepared_txns): its own entry
  // (the endpoints it advertises), how many nodes it lists and a digest of the whole file,
  // so that servers running different files show it. Absent: advertised empty, 0, 0.
  std::string advertised;
  uint32_t config_nodes = 0;
  uint64_t config_digest = 0;
};
void Encode(const StatusReply& m, std::string* out);
Status Decode(std::string_view body, StatusReply* out);

struct PartitionInfo {
  PartitionId id;
  uint32_t owner = 0;
  uint64_t epoch = 0;
  uint64_t keys = 0;
  uint64_t bytes = 0;
  double ops_per_sec = 0;
};
void Encode(const std::vector<PartitionInfo>& m, std::string* out);
Status Decode(std::string_view body, uint32_t count, std::vector<PartitionInfo>* out);

struct DropKeyspaceRequest {
  KeyspaceId keyspace = 0;
};
void Encode(const DropKeyspaceRequest& m, std::string* out);
Status Decode(std::string_view body, DropKeyspaceRequest* out);

// ---- termination (server to server) -------------------------------------------------------
enum class TxnState : uint8_t {
  kUnknown = 0,  // never saw the timestamp (and now refuses a late PREPARE of it)
  kPrepared = 1,
  kCommitted = 2,
  kAborted = 3,
};
struct TxnStateRequest {
  Timestamp ts;
  std::vector<PartitionId> partitions;
  uint8_t fence = 1;  // mark unknown as aborted so a late PREPARE is refused
};
struct TxnStateReply {
  std::vector<TxnState> states;
};
void Encode(const TxnStateRequest& m, std::string* out);
Status Decode(std::string_view body, uint32_t count, TxnStateRequest* out);
void Encode(const TxnStateReply& m, std::string* out);
Status Decode(std::string_view body, uint32_t count, TxnStateReply* out);

// ---- migration (DESIGN §7) -----------------------------------------------------------------
enum class MigrationPhase : uint8_t {
  kCopying = 1,     // the target copies the partition's pages; the source serves
  kCutover = 2,     // the source stopped serving; the target takes the last pages
  kCommitted = 3,   // the home points at the target (the commit point); cleaning up
  kDone = 4,        // finished: the target serves, the source dropped its copy
  kRolledBack = 5,  // abandoned: the source serves (again)
  kFailed = 6,      // refused before anything moved
};
const char* MigrationPhaseName(MigrationPhase p);

struct MigrateRequest {
  PartitionId part;
  uint32_t target = 0;
};
void Encode(const MigrateRequest& m, std::string* out);
Status Decode(std::string_view body, MigrateRequest* out);

struct MigrationInfo {
  PartitionId part;
  uint32_t source = 0;
  uint32_t target = 0;
  MigrationPhase phase = MigrationPhase::kCopying;
  uint64_t old_epoch = 0;
  uint64_t new_epoch = 0;
  uint64_t started_unix_ms = 0;
  uint64_t bytes_copied = 0;
  uint64_t bytes_total = 0;
  std::string error;
};
void Encode(const std::vector<MigrationInfo>& m, std::string* out);
Status Decode(std::string_view body, uint32_t count, std::vector<MigrationInfo>* out);

enum class MigrateAction : uint8_t {
  kProbe = 1,       // what this server holds of the partition, and its free memory
  kPull = 2,        // target: start copying from `node` (at old_epoch) into a copy at epoch
  kPullStatus = 3,  // target: progress of the copy
  kFinish = 4,      // target: take the last pages (the source stopped serving) and sync
  kRelease = 5,     // source: stop serving; `node` owns it from `epoch` on
  kAdopt = 6,       // serve the partition at `epoch` (old_epoch != 0: a rollback at the
                    // source, which takes back the write intents it exported)
  kDrop = 7,        // drop this server's copy (source after the commit, target on rollback)
  kIntents = 8,     // source: the write intents it exported at kRelease (the home restarted)
};
struct MigrateCtl {
  MigrateAction action = MigrateAction::kProbe;
  PartitionId part;
  uint32_t node = 0;
  uint64_t epoch = 0;
  uint64_t old_epoch = 0;
  uint64_t load_mops = 0;  // kPull: the partition's load at the source (milli-ops/s)
  // kAdopt: the write intents the source held, taken before serving.
  std::vector<MovedIntent> intents;
};
struct MigrateCtlReply {
  uint8_t exists = 0;     // a copy of the partition is here
  uint8_t owns = 0;       // this server serves it
  uint8_t caught_up = 0;  // kPullStatus: the last round found (almost) nothing new
  uint8_t finished = 0;   // kPullStatus: kFinish is done and synced
  uint64_t bytes_copied = 0;
  uint64_t bytes_total = 0;
  uint64_t partition_bytes = 0;  // kProbe
  uint64_t free_bytes = 0;       // kProbe: page memory free here
  uint32_t page_count = 0;       // kProbe: pages in the partition's log so far
  uint64_t load_mops = 0;        // kProbe: the partition's load here (milli-ops/s)
  Timestamp watermark;           // kProbe: the partition's scan watermark here
  std::string error;             // kPullStatus: why the copy failed
  // kRelease, kIntents: the write intents held on the partition here, exported.
  std::vector<MovedIntent> intents;
};
void Encode(const MigrateCtl& m, std::string* out);
Status Decode(std::string_view body, MigrateCtl* out);
void Encode(const MigrateCtlReply& m, std::string* out);
Status Decode(std::string_view body, MigrateCtlReply* out);

// LOAD_REPORT (count = partitions): count x (u64 keyspace, u32 bucket, u64 reads).
struct LoadReport {
  std::vector<std::pair<PartitionId, uint64_t>> reads;
};
void Encode(const LoadReport& m, std::string* out);
Status Decode(std::string_view body, uint32_t count, LoadReport* out);

// PROBE (count = nodes): count x u32 node, none meaning every node. The server connects to
// each node's endpoint as its own cluster file lists it (token handshake and HELLO, a
// fresh connection) and replies, count = results: per node u32 node, u8 ok, u64 latency
// (microseconds, connect to HELLO reply), str endpoint tried, str error (a sentence naming
// both ends when not ok).
struct ProbeRequest {
  std::vector<uint32_t> nodes;
};
struct ProbeResult {
  uint32_t node = 0;
  bool ok = false;
  uint64_t latency_us = 0;
  std::string endpoint;
  std::string error;
};
void Encode(const ProbeRequest& m, std::string* out);
Status Decode(std::string_view body, uint32_t count, ProbeRequest* out);
void Encode(const std::vector<ProbeResult>& m, std::string* out);
Status Decode(std::string_view body, uint32_t count, std::vector<ProbeResult>* out);

}  // namespace ramp::protocol
