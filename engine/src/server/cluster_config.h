// The cluster file: which servers form the cluster, in node order. Every rampd of a cluster
// is started with the same file; a node's index is its line's position.
//
//   # comments and blank lines are ignored
//   node tcp://10.0.0.5:7400 shm:///run/ramp/n0.sock
//   node tcp://10.0.0.6:7400
//   buckets 16            (optional: default buckets per keyspace)
#pragma once

#include <string>
#include <vector>

#include "ramp/status.h"
#include "ramp/transport/endpoint.h"

namespace ramp::server {

struct NodeConfig {
  std::vector<transport::Endpoint> endpoints;
  std::string ToString() const;  // "tcp://..,shm://.." (what HELLO replies carry)
};

struct ClusterConfig {
  std::vector<NodeConfig> nodes;
  uint32_t default_buckets = 16;

  static Status Parse(const std::string& text, ClusterConfig* out);
  static Status Load(const std::string& path, ClusterConfig* out);
  // A single-node cluster made of the given endpoints (rampd without --cluster).
  static ClusterConfig Single(const std::vector<transport::Endpoint>& endpoints);
  // The index of the node that has one of these endpoints; NotFound otherwise.
  Status FindNode(const std::vector<transport::Endpoint>& endpoints, uint32_t* index) const;
};

// Parses one node's endpoint list as HELLO carries it ("tcp://a:1,shm:///p").
Status ParseNodeEndpoints(const std::string& text, NodeConfig* out);

}  // namespace ramp::server
