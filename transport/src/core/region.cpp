#include "core/region.h"

#include <string>

namespace ramp::transport::detail {

Status RegionAccessError(const RemoteRegion& granted, const RemoteRegion& asked, uint64_t offset,
                         uint64_t len, uint32_t access) {
  const std::string name = "region " + std::to_string(asked.id);
  if (asked.key != granted.key) return Status::PermissionDenied(name + ": wrong key");
  if (access == 0 || (access & ~uint32_t{kAccessReadWrite}) != 0) {
    return Status::InvalidArgument(name + ": invalid access bits " + std::to_string(access));
  }
  if ((access & ~(granted.access & uint32_t{kAccessReadWrite})) != 0) {
    return Status::PermissionDenied(name + " does not grant " +
                                    ((access & kAccessWrite) ? "write" : "read") + " access");
  }
  if (offset > granted.length || len > granted.length - offset) {
    return Status::InvalidArgument(name + ": bytes [" + std::to_string(offset) + ", " +
                                   std::to_string(offset) + "+" + std::to_string(len) +
                                   ") outside its " + std::to_string(granted.length) + " bytes");
  }
  return Status::Internal(name + ": region check failed without a reason");
}

}  // namespace ramp::transport::detail
