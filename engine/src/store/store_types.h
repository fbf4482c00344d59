// What the store API exchanges with its callers: the items of a PREPARE, the items and
// results of a read, group entries, transaction states, partition figures. These are the
// store's own types: the store knows nothing of the wire protocol, and the server's
// request handlers convert between these and the protocol's messages
// (server/store_wire.h).
//
// Views (string_view) in results point into arena memory that stays valid for at least
// StoreOptions::gc_grace_ms; views in items must stay valid for the call.
#pragma once

#include <cstdint>
#include <string_view>

#include "ramp/types.h"

namespace ramp::store {

// ---- writes ----------------------------------------------------------------------------
inline constexpr uint8_t kWriteTombstone = 1u << 0;    // the version deletes the key
inline constexpr uint8_t kWriteHasExpected = 1u << 1;  // refuse unless `expected` is latest
inline constexpr uint8_t kWriteGrouped = 1u << 2;      // a grouped key (EncodeGroupKey)

// One version to prepare.
struct WriteItem {
  PartitionId part;
  std::string_view key;
  std::string_view value;
  uint8_t flags = 0;          // kWrite*
  Timestamp expected;         // kWriteHasExpected: the version the writer read
  std::string_view metadata;  // encoded record::Metadata
};

// Why a PREPARE was refused, beyond its Status.
struct WriteError {
  uint32_t item = 0;    // index of the item that failed
  Timestamp watermark;  // Aborted for a stale timestamp: draw a timestamp above this
};

// ---- reads -----------------------------------------------------------------------------
inline constexpr uint8_t kReadWantAddress = 1u << 0;  // set the result's address (GET*)
inline constexpr uint8_t kReadSnapshot = 1u << 1;     // `at` is a snapshot (see Store::Get)

struct ReadItem {
  PartitionId part;
  std::string_view key;
  Timestamp at;  // zero: latest committed; otherwise exactly this version, or with
                 // kReadSnapshot the newest committed at or before it
};

enum class ReadStatus : uint8_t {
  kOk = 0,
  kNotFound = 1,   // no such version (or the key was never written)
  kCollected = 2,  // the version asked for by timestamp may have been collected: retry
};

// Where a record sits in the arena: what a one-sided (GET*) reader caches.
struct RecordAddress {
  uint64_t offset = 0;
  uint32_t length = 0;
  uint32_t epoch = 0;  // the partition's placement epoch
  bool valid() const { return length != 0; }
};

// Where a COMMIT put a key's new current version (Store::Commit's optional output).
struct CommittedRecord {
  PartitionId part;
  std::string key;
  RecordAddress address;
};

struct ReadResult {
  ReadStatus status = ReadStatus::kNotFound;
  uint8_t flags = 0;  // record::kRecordTombstone
  Timestamp ts;
  std::string_view value;
  std::string_view metadata;  // encoded record::Metadata
  RecordAddress address;      // kReadWantAddress, when the version is the current one
};

// One live entry of a group of grouped keys (Store::GetGroup).
struct GroupEntry {
  std::string_view key;  // the whole grouped key
  Timestamp ts;
  std::string_view value;
  std::string_view metadata;
};

// Where a one-sided reader finds a partition's group version, and its value when a GetGroup
// read the entries: while the word still holds that value, GetGroup would return the same
// entries for every group of the partition. The word is bumped before anything GetGroup
// returns changes and is zero once the partition no longer serves; words are never reused.
// Value: generation (high 24 bits, never zero, new when the partition serves again or its
// epoch changes) and a counter (low 40 bits).
struct GroupVersion {
  uint64_t offset = 0;  // in the arena
  uint64_t value = 0;   // 0: no version (a reader must not keep the entries)
};

// ---- transactions and administration -------------------------------------------------
// What a partition knows of a transaction (termination protocol).
enum class TxnState : uint8_t {
  kUnknown = 0,  // never saw the timestamp (and, once fenced, refuses a late PREPARE of it)
  kPrepared = 1,
  kCommitted = 2,
  kAborted = 3,
};

// Figures of one partition (the server adds owner and epoch from its directory).
struct PartitionInfo {
  PartitionId id;
  uint64_t keys = 0;
  uint64_t bytes = 0;
  double ops_per_sec = 0;
};

}  // namespace ramp::store
