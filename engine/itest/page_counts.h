// Page counts and epochs of every partition of a keyspace (SCAN_OPEN at timestamp zero,
// which leaves the watermarks alone), for the page I/O and channel tests.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "client/client_impl.h"
#include "protocol/messages.h"
#include "protocol/page_messages.h"
#include "ramp/client.h"

namespace ramp::testing {

inline std::vector<protocol::ScanOpenPartition> PageCounts(Client* c, KeyspaceId ks) {
  Client::Impl& im = *c->impl();
  std::vector<PartitionId> parts;
  for (uint32_t b = 0; b < c->BucketsOf(ks); b++) parts.push_back({ks, b});
  EXPECT_TRUE(im.ResolveOwners(parts).ok());
  std::vector<protocol::ScanOpenPartition> out(parts.size());
  for (size_t i = 0; i < parts.size(); i++) {
    protocol::ScanOpenRequest req{Timestamp{}, {parts[i]}};
    std::string body;
    protocol::Encode(req, &body);
    PendingCall reply;
    Status st = im.CallAndWait(im.OwnerOf(parts[i]), ChannelKind::kFast, protocol::Op::kScanOpen, 1,
                               body, &reply);
    EXPECT_TRUE(st.ok()) << st.ToString();
    protocol::ScanOpenReply r;
    EXPECT_TRUE(protocol::Decode(reply.body(), reply.header.count, &r).ok());
    if (r.partitions.size() == 1) out[i] = r.partitions[0];
  }
  return out;
}

}  // namespace ramp::testing
