#include "server/cluster_config.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace ramp::server {

std::string NodeConfig::ToString() const {
  std::string s;
  for (const auto& e : endpoints) {
    if (!s.empty()) s += ',';
    s += e.ToString();
  }
  return s;
}

Status ParseNodeEndpoints(const std::string& text, NodeConfig* out) {
  out->endpoints.clear();
  RAMP_RETURN_IF_ERROR(transport::ParseEndpointList(text, &out->endpoints));
  if (out->endpoints.empty()) return Status::InvalidArgument("node has no endpoint");
  return Status::OK();
}

Status ClusterConfig::Parse(const std::string& text, ClusterConfig* out) {
  ClusterConfig c;
  std::istringstream in(text);
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    lineno++;
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream words(line);
    std::string word;
    if (!(words >> word)) continue;
    auto where = [&] { return "cluster file line " + std::to_string(lineno) + ": "; };
    if (word == "node") {
      NodeConfig node;
      std::string ep;
      while (words >> ep) {
        std::vector<transport::Endpoint> eps;
        Status s = transport::ParseEndpointList(ep, &eps);
        if (!s.ok()) return Status::InvalidArgument(where() + s.message());
        node.endpoints.insert(node.endpoints.end(), eps.begin(), eps.end());
      }
      if (node.endpoints.empty()) return Status::InvalidArgument(where() + "node without endpoint");
      c.nodes.push_back(std::move(node));
    } else if (word == "buckets") {
      long b = 0;
      if (!(words >> b) || b < 1 || b > 65536) {
        return Status::InvalidArgument(where() + "buckets wants a number in 1..65536");
      }
      c.default_buckets = static_cast<uint32_t>(b);
    } else if (word == "homes") {
      long h = 0;
      if (!(words >> h) || h < 1 || h > 65536) {
        return Status::InvalidArgument(where() + "homes wants a number in 1..65536");
      }
      c.homes = static_cast<uint32_t>(h);
    } else {
      return Status::InvalidArgument(where() + "unknown directive '" + word + "'");
    }
  }
  if (c.nodes.empty()) return Status::InvalidArgument("cluster file names no node");
  if (c.homes > c.nodes.size()) {
    return Status::InvalidArgument("cluster file says homes " + std::to_string(c.homes) +
                                   " but names " + std::to_string(c.nodes.size()) + " nodes");
  }
  *out = std::move(c);
  return Status::OK();
}

Status ClusterConfig::Load(const std::string& path, ClusterConfig* out) {
  std::ifstream f(path);
  if (!f) return Status::FromErrno("cannot read cluster file " + path, errno);
  std::stringstream ss;
  ss << f.rdbuf();
  Status s = Parse(ss.str(), out);
  return s.ok() ? s : s.Annotate(path);
}

ClusterConfig ClusterConfig::Single(const std::vector<transport::Endpoint>& endpoints) {
  ClusterConfig c;
  c.nodes.push_back(NodeConfig{endpoints});
  return c;
}

Status ClusterConfig::FindNode(const std::vector<transport::Endpoint>& endpoints,
                               uint32_t* index) const {
  for (uint32_t i = 0; i < nodes.size(); i++) {
    for (const auto& mine : endpoints) {
      for (const auto& theirs : nodes[i].endpoints) {
        if (mine == theirs) {
          *index = i;
          return Status::OK();
        }
      }
    }
  }
  return Status::NotFound("none of this server's listen endpoints is in the cluster file");
}

uint64_t ClusterConfig::Digest() const {
  // FNV-1a over a canonical rendering: comments and spacing do not count.
  std::string text = "buckets " + std::to_string(default_buckets) + "\nhomes " +
                     std::to_string(home_count()) + "\n";
  for (const auto& n : nodes) text += "node " + n.ToString() + "\n";
  uint64_t h = 1469598103934665603ull;
  for (unsigned char ch : text) {
    h ^= ch;
    h *= 1099511628211ull;
  }
  return h;
}

Status CheckReload(const ClusterConfig& now, const ClusterConfig& next,
                   const std::function<bool(uint32_t node, std::string* what)>& owns) {
  if (next.home_count() != now.home_count()) {
    return Status::InvalidArgument(
        "the new cluster file has " + std::to_string(next.home_count()) + " home nodes, not " +
        std::to_string(now.home_count()) +
        ": a partition's home is its hash mod that number, so every partition would be looked "
        "for at another node. To add a node, keep 'homes " +
        std::to_string(now.home_count()) +
        "' in the file: the new node is then home of nothing and gets partitions by migration "
        "(rampctl migrate, or the rebalancer)");
  }
  if (next.default_buckets != now.default_buckets) {
    return Status::InvalidArgument("the new cluster file changes buckets from " +
                                   std::to_string(now.default_buckets) + " to " +
                                   std::to_string(next.default_buckets) +
                                   ": keyspaces already made would be split differently; "
                                   "restart the whole cluster to change it");
  }
  const size_t common = std::min(now.nodes.size(), next.nodes.size());
  for (size_t i = 0; i < common; i++) {
    for (size_t j = 0; j < now.nodes.size(); j++) {
      if (j == i) continue;
      for (const auto& e : next.nodes[i].endpoints) {
        for (const auto& old : now.nodes[j].endpoints) {
          if (e == old) {
            return Status::InvalidArgument(
                "the new cluster file gives node " + std::to_string(i) + " the address " +
                e.ToString() + ", which is node " + std::to_string(j) +
                "'s: nodes are numbered by their line, so removing or reordering a line "
                "renumbers every node after it. Keep the lines in place (change an address "
                "on its own line, add nodes at the end)");
          }
        }
      }
    }
  }
  for (size_t i = next.nodes.size(); i < now.nodes.size(); i++) {
    std::string what;
    if (owns(static_cast<uint32_t>(i), &what)) {
      return Status::InvalidArgument("the new cluster file removes node " + std::to_string(i) +
                                     " (" + now.nodes[i].ToString() + "), which still " + what +
                                     ": migrate its partitions to other nodes first");
    }
  }
  return Status::OK();
}

}  // namespace ramp::server
