// The region check (DESIGN §4: providers check every one-sided access against the handle's
// bounds and access rights). One function for every provider:
//   - tcp: the target checks each request it serves (Memory::Resolve);
//   - shm: the initiator checks before copying to or from the peer's mapped memory
//     (ImportTable::Copy);
//   - verbs: the initiator checks before posting RDMA READ/WRITE (the adapter enforces the
//     memory registration's bounds and rights as well, but a registration covers a whole
//     allocation with its max_access, so only this check keeps to the region).
// The caller finds the region by id (NotFound is its business); this decides the rest.
#pragma once

#include <cstdint>

#include "ramp/status.h"
#include "ramp/transport/memory.h"

namespace ramp::transport::detail {

// The error of a failed check; only called when the check fails.
Status RegionAccessError(const RemoteRegion& granted, const RemoteRegion& asked, uint64_t offset,
                         uint64_t len, uint32_t access);

// Checks an access of `len` bytes at `offset` with rights `access` (kAccessRead or
// kAccessWrite), through the handle `asked` a caller presented, against `granted`: the
// region as registered (owner side) or as its owner exposed it (importer side). In order:
//   PermissionDenied  `asked` carries the wrong key;
//   InvalidArgument   `access` is not read and/or write (0, or unknown bits);
//   PermissionDenied  `access` asks for a right `granted` does not give;
//   InvalidArgument   [offset, offset+len) is not inside [0, granted.length) (overflow-safe:
//                     offset + len is never computed).
// Inline so that the successful check costs a few compares on the data path.
inline Status CheckRegionAccess(const RemoteRegion& granted, const RemoteRegion& asked,
                                uint64_t offset, uint64_t len, uint32_t access) {
  const uint32_t rights = granted.access & uint32_t{kAccessReadWrite};
  if (asked.key == granted.key && access != 0 && (access & ~rights) == 0 &&
      offset <= granted.length && len <= granted.length - offset) [[likely]] {
    return Status::OK();
  }
  return RegionAccessError(granted, asked, offset, len, access);
}

}  // namespace ramp::transport::detail
