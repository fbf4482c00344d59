// The cluster file: which servers form the cluster, in node order. Every rampd of a cluster
// is started with the same file; a node's index is its line's position.
//
//   # comments and blank lines are ignored
//   node tcp://10.0.0.5:7400 shm:///run/ramp/n0.sock
//   node tcp://10.0.0.6:7400
//   buckets 16            (optional: default buckets per keyspace)
//   homes 2               (optional: nodes 0..1 are the partitions' homes; default: all)
//
// A partition's home is HomeOf(p, homes): hash mod the number of home nodes. Nodes listed
// after the homes are home of nothing and own what migrations move to them, so a node can
// be added to a running cluster (CheckReload) without moving any partition's home.
#pragma once

#include <functional>
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
  uint32_t homes = 0;  // 0: every node is a home

  uint32_t home_count() const { return homes != 0 ? homes : static_cast<uint32_t>(nodes.size()); }
  // A digest of what the file says (nodes, buckets, homes), so that servers running
  // different files can be told apart in rampctl status.
  uint64_t Digest() const;

  static Status Parse(const std::string& text, ClusterConfig* out);
  static Status Load(const std::string& path, ClusterConfig* out);
  // A single-node cluster made of the given endpoints (rampd without --cluster).
  static ClusterConfig Single(const std::vector<transport::Endpoint>& endpoints);
  // The index of the node that has one of these endpoints; NotFound otherwise.
  Status FindNode(const std::vector<transport::Endpoint>& endpoints, uint32_t* index) const;
};

// Whether a running server may go from cluster file `now` to `next` (rampd re-reads its file
// on SIGHUP or when it changes). Allowed: nodes added after the last one, and a changed
// address of a node (new connections use it). Refused, with the reason: a change of the
// number of homes or of the default buckets (partitions would be looked for in the wrong
// place), a node's new address that was another node's (lines are positional: deleting or
// reordering a line renumbers the nodes after it), and removing a node that still owns,
// or is moving, partitions (owns(node, &what) says so: the directory knows).
Status CheckReload(const ClusterConfig& now, const ClusterConfig& next,
                   const std::function<bool(uint32_t node, std::string* what)>& owns);

// Parses one node's endpoint list as HELLO carries it ("tcp://a:1,shm:///p").
Status ParseNodeEndpoints(const std::string& text, NodeConfig* out);

}  // namespace ramp::server
