// How the extension lays out its data in keyspaces (DESIGN §8).
//
// Table keyspace: one item per row, key = the row id as 8 big-endian bytes, value = the row
// as an encoded MinimalTuple (tuple_codec). Row ids map to TIDs with offsets 1..256:
// rowid = block * 256 + (offset - 1), which keeps bitmap scans and index AMs happy (they cap
// offsets per block). One more key of a different length holds the row-id sequence.
//
// Index keyspace (ramp_hash, grouped): one item per (indexed value, row), key =
// EncodeGroupKey(group = 64-bit hash of the value, big-endian; suffix = the row key), empty
// value. All entries of one value share a partition; GetGroup reads them at once.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ramp/keys.h"

namespace pgramp {

inline constexpr uint64_t kRowsPerBlock = 256;
// Largest row id a TID can express: block numbers stop below 0xFFFFFFFF (InvalidBlockNumber).
inline constexpr uint64_t kMaxRowId = (uint64_t{0xFFFFFFFE} * kRowsPerBlock) + kRowsPerBlock - 1;
using ramp::kRowKeyBytes;

inline std::string EncodeU64(uint64_t v) {
  std::string out(8, '\0');
  for (int i = 7; i >= 0; i--) {
    out[i] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
  return out;
}

inline bool DecodeU64(std::string_view bytes, uint64_t* out) {
  if (bytes.size() != 8) return false;
  uint64_t v = 0;
  for (unsigned char c : bytes) v = (v << 8) | c;
  *out = v;
  return true;
}

// The client library's numbered-row layout (ramp/keys.h): WriteBatch entries and
// ReadSession rows use it.
using ramp::DecodeRowKey;
using ramp::RowKey;

// The key of the row-id sequence (next unallocated row id, 8 bytes big-endian). Its length
// differs from a row key's, so it can never collide with a row.
inline std::string_view RowIdSequenceKey() {
  return std::string_view("\0rowid-seq", 10);
}

// Written by the commit of a transaction whose bulk load committed rows of this (new) table
// ahead of it (xact.hpp, NoteInsertedAhead), at that commit's timestamp: a statement whose
// snapshot is older started before the load committed and reads the table as empty
// (RelationKeyspace). Not a row key either.
inline std::string_view AheadMarkerKey() {
  return std::string_view("\0ahead-commit", 13);
}

inline uint32_t BlockOfRowId(uint64_t rowid) {
  return static_cast<uint32_t>(rowid / kRowsPerBlock);
}
inline uint16_t OffsetOfRowId(uint64_t rowid) {
  return static_cast<uint16_t>(rowid % kRowsPerBlock + 1);
}
// False for offsets outside 1..256.
inline bool RowIdOf(uint32_t block, uint16_t offset, uint64_t* rowid) {
  if (offset < 1 || offset > kRowsPerBlock) return false;
  *rowid = uint64_t{block} * kRowsPerBlock + (offset - 1);
  return true;
}

// Group of a ramp_hash entry: the value's 64-bit hash, big-endian.
inline std::string HashGroup(uint64_t hash) {
  return EncodeU64(hash);
}

// FNV-1a, 64 bit: a fixed, documented function for identifiers that must agree between
// PostgreSQL servers and versions (keyspace ids). Never change it.
inline uint64_t StableHash64(std::string_view bytes, uint64_t h = 0xcbf29ce484222325ull) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace pgramp
