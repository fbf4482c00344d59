// What the partition index keeps per key. Most keys have exactly one version, the current
// committed one, and cost one index slot (24 bytes). A key with other versions (prepared,
// or overwritten and still inside the GC grace, or a current tombstone waiting to be
// collected) also owns a KeyVersions on the heap while they exist.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "ramp/types.h"
#include "store/memory/partition_log.h"

namespace ramp::store {

struct Version {
  Timestamp ts;
  Loc loc = kNoLoc;
  // Prepared: when it was prepared. Committed (not current): when it stopped being the
  // current version, which starts its GC grace.
  uint64_t since_ms = 0;
  bool committed = false;
};

struct KeyVersions {
  uint64_t hash = 0;            // the key's index hash, to find its slot again
  uint32_t registry_index = 0;  // position in the partition's list of these
  // Set while the current version is a tombstone: when it became current. The key is
  // forgotten once that is older than the grace and no other version remains.
  uint64_t tombstone_since_ms = 0;
  std::vector<Version> versions;  // versions other than the current one, unordered
};

struct KeySlot {
  uint64_t hash = 0;     // 0: the slot is empty
  Loc current = kNoLoc;  // the current committed version (latest commit), if any
  std::unique_ptr<KeyVersions> extra;
  // Some version of the key: its record holds the key itself, which the index does not.
  Loc any_loc() const { return current != kNoLoc ? current : extra->versions.front().loc; }
};

}  // namespace ramp::store
