// What a reader with channels of its own (the page reader) needs of its client, and nothing
// more: the context its channels share, the nodes and their endpoints, and where partitions
// live. Client::Impl implements it; ClusterViewOf(client) hands it out.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "ramp/status.h"
#include "ramp/transport/endpoint.h"
#include "ramp/types.h"

namespace ramp {

class Client;
struct ChannelContext;

class ClusterView {
 public:
  // Options, memory, clock and client id, shared by every channel of the client.
  virtual ChannelContext& channel_context() = 0;
  virtual uint32_t node_count() const = 0;
  // "node 2 (tcp://127.0.0.1:7402,shm:///tmp/n2.sock)", for messages.
  virtual std::string NodeName(uint32_t node) const = 0;
  // Where the node's fast channel connects: its endpoint of the preferred provider, else
  // its tcp one; null when it has neither.
  virtual const transport::Endpoint* FastEndpoint(uint32_t node) const = 0;
  // Owners of partitions: cached, or asked of their homes.
  virtual Status ResolveOwners(std::span<const PartitionId> parts) = 0;
  virtual uint32_t OwnerOf(const PartitionId& p) const = 0;

 protected:
  ~ClusterView() = default;
};

ClusterView* ClusterViewOf(Client* client);

}  // namespace ramp
