// The version record and page format (DESIGN §5). Servers lay records out in 8 KiB pages
// inside registered memory; GET* clients copy a record one-sided and check it here; the
// durability layer writes the same pages to disk. Shared by server and client.
//
// Record layout (little endian, starts 8-byte aligned):
//   [0,4)   crc32c of bytes [8, total_len)
//   [4]     state: mutable flags (kStateValid = this is the key's current committed
//           version). The only byte that changes after publication; outside the checksum.
//   [5,8)   zero
//   [8,12)  total_len (header + key + value + metadata, padded with zeros to a multiple of 8:
//           RecordBytes(); the padding is checksummed, so every byte but the state is)
//   [12]    kind (RecordKind)
//   [13]    flags (kRecordTombstone, kRecordGrouped)
//   [14,16) key_len
//   [16,20) value_len
//   [20,24) meta_len
//   [24,32) keyspace
//   [32,36) bucket
//   [36,40) epoch of the partition's placement when written
//   [40,48) ts.time   [48,56) ts.client
//   [56, ...) key, value, metadata
//
// A one-sided reader holding a stale address may copy reused memory: it must check
// total_len, checksum, kind, keyspace, bucket and key before trusting a record, and the
// valid bit before treating it as the committed version.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ramp/status.h"
#include "ramp/types.h"

namespace ramp::record {

inline constexpr size_t kPageBytes = 8192;
inline constexpr size_t kRecordHeaderBytes = 56;
inline constexpr size_t kRecordAlign = 8;

enum RecordKind : uint8_t {
  kKindVersion = 1,     // a version of a key (prepared when written)
  kKindCommitMark = 2,  // the transaction ts committed in this partition (no key/value)
  kKindAbortMark = 3,   // the transaction ts aborted in this partition
};

inline constexpr uint8_t kStateValid = 1u << 0;
inline constexpr uint8_t kRecordTombstone = 1u << 0;
// The key is a grouped key (GET_GROUP finds it). Stored so that recovery, which reads the
// log alone, rebuilds the group index (data format version 1 and later).
inline constexpr uint8_t kRecordGrouped = 1u << 1;

constexpr size_t AlignRecord(size_t n) {
  return (n + kRecordAlign - 1) & ~(kRecordAlign - 1);
}
constexpr size_t RecordBytes(size_t key, size_t value, size_t meta) {
  return AlignRecord(kRecordHeaderBytes + key + value + meta);
}

// A decoded record; views point into the bytes it was decoded from.
struct RecordView {
  uint8_t state = 0;
  RecordKind kind = kKindVersion;
  uint8_t flags = 0;
  uint32_t total_len = 0;
  KeyspaceId keyspace = 0;
  uint32_t bucket = 0;
  uint32_t epoch = 0;
  Timestamp ts;
  std::string_view key;
  std::string_view value;
  std::string_view metadata;
  bool valid() const { return state & kStateValid; }
  bool tombstone() const { return flags & kRecordTombstone; }
  bool grouped() const { return flags & kRecordGrouped; }
};

struct RecordFields {
  RecordKind kind = kKindVersion;
  uint8_t flags = 0;
  KeyspaceId keyspace = 0;
  uint32_t bucket = 0;
  uint32_t epoch = 0;
  Timestamp ts;
  std::string_view key;
  std::string_view value;
  std::string_view metadata;
};

// Writes a record (state 0, checksum set) into dst, which must hold
// RecordBytes(key.size(), value.size(), metadata.size()) bytes; returns that size.
size_t EncodeRecord(const RecordFields& f, uint8_t* dst);

// Decodes and verifies (length, checksum, field bounds). Corruption on any failure.
Status DecodeRecord(const uint8_t* src, size_t len, RecordView* out);

// Decodes and checks every field as DecodeRecord does, except the checksum: for a copy of a
// record the caller knows was complete and unchanged (but for its state byte) while it was
// copied, e.g. a page scan's pages below the head page SCAN_OPEN saw (scanner.cpp). The
// structure is still checked, so malformed bytes are Corruption, never an overrun.
Status DecodeCompleteRecord(const uint8_t* src, size_t len, RecordView* out);

// Decodes a record without any check: only for records the caller wrote itself and keeps
// (the server's own log), where DecodeRecord's checksum would be wasted work.
RecordView PeekRecord(const uint8_t* src);

// Offset of the state byte inside a record (the server flips kStateValid there).
inline constexpr size_t kStateOffset = 4;

// CRC-32C (Castagnoli), hardware accelerated where the CPU has SSE4.2.
uint32_t Crc32c(const void* data, size_t len, uint32_t seed = 0);

// ---- transaction metadata (the "other keys" of RAMP-Fast) --------------------------------
//
// RAMP-Fast stores with every version the other keys its transaction wrote. That is
// quadratic for bulk transactions (a COPY of a million rows), so above a limit the metadata
// names the partitions the transaction touched instead; a reader that needs round 2 for such
// a transaction asks those partitions for the key's version at exactly that timestamp (a
// miss then means "not written by it", unless the server says the version was collected).
struct Sibling {
  KeyspaceId keyspace = 0;
  uint32_t bucket = 0;
  std::string key;
  bool operator==(const Sibling&) const = default;
};

struct Metadata {
  enum class Mode : uint8_t { kNone = 0, kKeys = 1, kPartitions = 2 };
  Mode mode = Mode::kNone;
  std::vector<Sibling> keys;            // kKeys: the transaction's other keys
  std::vector<PartitionId> partitions;  // kPartitions: every partition it wrote
  bool operator==(const Metadata&) const = default;
};

// Explicit sibling keys are used up to this many siblings and this many encoded bytes.
inline constexpr size_t kMaxSiblingKeys = 64;
inline constexpr size_t kMaxSiblingBytes = 2048;

// Appends the encoding of m to *out; Mode::kNone encodes as nothing (no metadata bytes).
//   kKeys:       u8 mode | u32 count | count x (u64 keyspace, u32 bucket, u16 key_len, key)
//   kPartitions: u8 mode | u32 count | count x (u64 keyspace, u32 bucket), or, when shorter,
//                u8 3 | u16 groups | groups x (u64 keyspace, u16 n, n bytes: a bitmap of buckets)
//                (decoded sorted by keyspace and bucket)
void EncodeMetadata(const Metadata& m, std::string* out);
// Decodes (replacing *out); empty bytes are Mode::kNone. Corruption on malformed input.
Status DecodeMetadata(std::string_view bytes, Metadata* out);

// ---- pages -----------------------------------------------------------------------------
//
// Page layout: a 32-byte header, then records packed from offset 32.
//   [0,4)   magic "RPG1"     [4,8)   crc32c of [8, used) (set when the page is sealed)
//   [8,16)  keyspace         [16,20) bucket
//   [20,24) page number      [24,28) used bytes (header included)
//   [28,30) run length in pages (a record larger than a page gets a run of pages)
//   [30,32) flags (kPageSealed)
inline constexpr size_t kPageHeaderBytes = 32;
inline constexpr uint32_t kPageMagic = 0x31475052;  // "RPG1"
inline constexpr uint16_t kPageSealed = 1u << 0;
// The largest record that fits a single page.
inline constexpr size_t kMaxRecordInPage = kPageBytes - kPageHeaderBytes;

struct PageHeader {
  uint32_t magic = kPageMagic;
  uint32_t checksum = 0;
  KeyspaceId keyspace = 0;
  uint32_t bucket = 0;
  uint32_t page_no = 0;
  uint32_t used = kPageHeaderBytes;
  uint16_t run_pages = 1;
  uint16_t flags = 0;
};

void WritePageHeader(const PageHeader& h, uint8_t* page);
Status ReadPageHeader(const uint8_t* page, size_t len, PageHeader* out);

}  // namespace ramp::record
