#include "server/cluster_config.h"

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
    } else {
      return Status::InvalidArgument(where() + "unknown directive '" + word + "'");
    }
  }
  if (c.nodes.empty()) return Status::InvalidArgument("cluster file names no node");
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

}  // namespace ramp::server
