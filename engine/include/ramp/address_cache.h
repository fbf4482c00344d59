// Where GET* finds a key's committed version (paper 000's address cache), and the caches
// that hold those addresses: one private to a client, or one in memory that several
// processes share (the backends of one PostgreSQL server), so that an address one of them
// learnt serves all of them.
//
// An address is only a hint. A reader copies the record it points at and accepts it only if
// the record is the committed, still-valid version of exactly that key in the partition copy
// the address names (its epoch); anything else falls back to a request (GET+). So a cache
// may lose, tear or mix up entries without a wrong read: the worst it can do is cost a
// round trip.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "ramp/types.h"

namespace ramp {

struct OneSidedAddress {
  uint32_t node = 0;             // index of the owner in the cluster's node list
  uint32_t length = 0;           // bytes of the record (0: no address)
  uint64_t instance = 0;         // the owner's instance: a restart invalidates the address
  uint64_t placement_epoch = 0;  // of the partition when the address was learnt
  uint64_t offset = 0;           // in the owner's registered arena
  uint32_t record_epoch = 0;     // the epoch written in the record's copy
};

// Counters of a cache's use by reads (summed over every process sharing it).
struct AddressCacheStats {
  uint64_t lookups = 0;    // keys looked up by reads that may go one-sided
  uint64_t found = 0;      // ... that had an entry
  uint64_t hits = 0;       // one-sided reads that returned the key's version
  uint64_t fallbacks = 0;  // stale or invalid addresses (the read went by request)
  uint64_t stores = 0;     // addresses learnt from GET+ replies
  uint64_t capacity = 0;   // entries it can hold (0: unbounded)
  bool shared = false;
};

// A group of a grouped keyspace as a shared cache keeps it (ReadSession::GetGroup: the
// entries of a group read by request, kept with their partition's group version, served
// after a one-sided read of that version finds it unchanged; several processes, a parallel
// query's workers say, then share what one of them read). Only groups of at most
// kMaxSharedGroupEntries entries fit, none of which names siblings, each with an 8-byte
// suffix, and all with the same value, empty or "\x01". A group of at most one entry takes
// one cache line; a larger one takes one more line per three entries of one timestamp.
constexpr size_t kMaxSharedGroupEntries = 32;
struct SharedGroupEntry {
  uint64_t suffix = 0;  // an 8-byte row key, host order
  uint64_t ts_time = 0, ts_client = 0;
};
struct SharedGroup {
  uint32_t node = 0;                      // owner of the partition
  uint16_t instance_hash = 0;             // of the owner's instance (low 16 bits)
  uint32_t placement_epoch = 0;           // low 30 bits
  uint64_t version_offset = 0;            // the group version's word in the owner's arena
  uint64_t version = 0;                   // its value with these entries
  bool value_flag = false;                // every entry's value is "\x01" (else empty)
  std::vector<SharedGroupEntry> entries;  // in the order GET_GROUP returned them
};

class AddressCache {
 public:
  // Shared caches keep small groups too (SharedGroup): false when this one does not.
  virtual bool LookupGroup(KeyspaceId keyspace, std::string_view group, SharedGroup* out) {
    (void)keyspace, (void)group, (void)out;
    return false;
  }
  virtual void StoreGroup(KeyspaceId keyspace, std::string_view group, const SharedGroup& g) {
    (void)keyspace, (void)group, (void)g;
  }
  virtual ~AddressCache() = default;
  virtual bool Lookup(KeyspaceId keyspace, std::string_view key, OneSidedAddress* out) = 0;
  virtual void Store(KeyspaceId keyspace, std::string_view key, const OneSidedAddress& a) = 0;
  // A hint that the key is about to be stored: a cache larger than the CPU's caches fetches
  // the key's slot now, so that a loop storing many keys (a bulk commit learning where its
  // rows went) overlaps the memory misses instead of taking them one after the other.
  virtual void Prefetch(KeyspaceId /*keyspace*/, std::string_view /*key*/) {}
  // Drops the entry if it still holds `seen` (another process may have stored a newer one).
  virtual void Erase(KeyspaceId keyspace, std::string_view key, const OneSidedAddress& seen) = 0;
  virtual void Count(uint64_t lookups, uint64_t found, uint64_t hits, uint64_t fallbacks) = 0;
  virtual AddressCacheStats Stats() const = 0;
};

// A cache private to one client (a hash map, unbounded).
std::unique_ptr<AddressCache> NewLocalAddressCache();

// A cache in memory the caller provides and shares between processes (MAP_SHARED, System V
// or PostgreSQL shared memory). Fixed size, set-associative; each entry is guarded by a
// sequence counter, so readers never lock and a torn entry reads as a miss. The memory must
// be 64-byte aligned and stay mapped while the cache is used; the bytes are computed by
// SharedAddressCacheBytes. `initialize` is true for exactly one process, before any other
// attaches.
size_t SharedAddressCacheBytes(size_t entries);
std::unique_ptr<AddressCache> AttachSharedAddressCache(void* memory, size_t bytes, bool initialize);

}  // namespace ramp
