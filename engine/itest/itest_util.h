// Helpers shared by the integration tests.
#pragma once

#include <string>

#include "ramp/client.h"

namespace ramp::testing {

// A key of `keyspace` whose partition's home is `node` (placement starts at the home).
inline std::string KeyOnNode(KeyspaceId keyspace, uint32_t node, uint32_t nodes, int salt = 0,
                             uint32_t buckets = kDefaultBuckets) {
  for (int i = 0;; i++) {
    std::string k = "key-" + std::to_string(salt) + "-" + std::to_string(i);
    if (HomeOf(PartitionId{keyspace, BucketOf(k, buckets)}, nodes) == node) return k;
  }
}

}  // namespace ramp::testing
