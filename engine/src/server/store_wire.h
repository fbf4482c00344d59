// Conversions between the wire protocol's messages (protocol/messages.h) and the store's
// own types (store/store_types.h): the request handlers decode a request, hand the store
// its items, and encode what the store answered. Field copies only (views stay views);
// the wire's flag bits and the store's are mapped one by one, so either may change.
#pragma once

#include <cstdint>

#include "protocol/messages.h"
#include "store/store_types.h"

namespace ramp::server {

inline store::WriteItem ToStore(const protocol::PrepareItem& w) {
  uint8_t flags = 0;
  if (w.flags & protocol::kPutTombstone) flags |= store::kWriteTombstone;
  if (w.flags & protocol::kPutHasExpected) flags |= store::kWriteHasExpected;
  if (w.flags & protocol::kPutGrouped) flags |= store::kWriteGrouped;
  return {.part = w.part,
          .key = w.key,
          .value = w.value,
          .flags = flags,
          .expected = w.expected,
          .metadata = w.metadata};
}

inline store::ReadItem ToStore(const protocol::GetItem& g) {
  return {.part = g.part, .key = g.key, .at = g.at};
}

inline uint8_t ToStoreReadFlags(uint8_t get_flags) {
  uint8_t flags = 0;
  if (get_flags & protocol::kGetWantAddress) flags |= store::kReadWantAddress;
  if (get_flags & protocol::kGetSnapshot) flags |= store::kReadSnapshot;
  return flags;
}

inline protocol::ItemStatus ToWire(store::ReadStatus s) {
  switch (s) {
    case store::ReadStatus::kOk:
      return protocol::ItemStatus::kOk;
    case store::ReadStatus::kNotFound:
      return protocol::ItemStatus::kNotFound;
    case store::ReadStatus::kCollected:
      return protocol::ItemStatus::kCollected;
  }
  return protocol::ItemStatus::kError;
}

// A read result as a GET reply item (owner and epoch are for kMoved only: left zero).
inline void ToWire(const store::ReadResult& r, protocol::GetResult* out) {
  *out = protocol::GetResult();
  out->status = ToWire(r.status);
  out->flags = r.flags;
  out->ts = r.ts;
  out->value = r.value;
  out->metadata = r.metadata;
  out->address = {r.address.offset, r.address.length, r.address.epoch};
}

inline protocol::GroupEntryWire ToWire(const store::GroupEntry& e) {
  return {.key = e.key, .ts = e.ts, .value = e.value, .metadata = e.metadata};
}

inline protocol::TxnState ToWire(store::TxnState s) {
  switch (s) {
    case store::TxnState::kUnknown:
      return protocol::TxnState::kUnknown;
    case store::TxnState::kPrepared:
      return protocol::TxnState::kPrepared;
    case store::TxnState::kCommitted:
      return protocol::TxnState::kCommitted;
    case store::TxnState::kAborted:
      return protocol::TxnState::kAborted;
  }
  return protocol::TxnState::kUnknown;
}

// Partition figures; the caller fills owner and epoch from its directory.
inline protocol::PartitionInfo ToWire(const store::PartitionInfo& p) {
  return {.id = p.id, .keys = p.keys, .bytes = p.bytes, .ops_per_sec = p.ops_per_sec};
}

}  // namespace ramp::server
