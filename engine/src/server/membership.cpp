#include "server/membership.h"

#include <chrono>

#include "client/node_channel.h"
#include "ramp/client.h"
#include "ramp/log.h"
#include "ramp/transport/auth.h"
#include "server/directory.h"

namespace ramp::server {
namespace {

// The endpoint peers and clients reach a node by across hosts: its first tcp endpoint (the
// client's rpc channel), else its first (a single-host cluster of shm endpoints).
const transport::Endpoint* ReachableEndpoint(const NodeConfig& node) {
  for (const auto& e : node.endpoints) {
    if (e.provider == transport::Provider::kTcp) return &e;
  }
  return node.endpoints.empty() ? nullptr : &node.endpoints.front();
}

std::string NameIn(const ClusterConfig& c, uint32_t node) {
  std::string name = "node " + std::to_string(node);
  if (node < c.nodes.size()) {
    const transport::Endpoint* e = ReachableEndpoint(c.nodes[node]);
    if (e != nullptr) name += " (" + e->ToString() + ")";
  }
  return name;
}

}  // namespace

Membership::Membership(ClusterConfig config, uint32_t self, std::string token)
    : self_(self),
      token_(std::move(token)),
      config_(std::make_shared<const ClusterConfig>(std::move(config))) {}

Membership::~Membership() {
  Stop();
}

std::shared_ptr<const ClusterConfig> Membership::Get() const {
  std::lock_guard lock(mu_);
  return config_;
}

std::string Membership::NodeName(uint32_t node) const {
  return NameIn(*Get(), node);
}

Status Membership::Reload(const ClusterConfig& next, Directory* directory) {
  std::shared_ptr<const ClusterConfig> now = Get();
  if (now->Digest() == next.Digest()) {
    RAMP_INFO("cluster file re-read: unchanged (%zu nodes)", now->nodes.size());
    return Status::OK();
  }
  Status st = CheckReload(*now, next, [directory](uint32_t node, std::string* what) {
    return directory != nullptr && directory->Names(node, what);
  });
  if (!st.ok()) return st;
  if (self_ >= next.nodes.size()) {
    return Status::InvalidArgument(
        "the new cluster file lists " + std::to_string(next.nodes.size()) +
        " nodes, so it no longer names this server (node " + std::to_string(self_) + ")");
  }
  for (size_t i = 0; i < next.nodes.size(); i++) {
    if (i >= now->nodes.size()) {
      RAMP_INFO(
          "cluster file: node %zu added at %s (home of no partition; migrations move "
          "partitions to it)",
          i, next.nodes[i].ToString().c_str());
    } else if (next.nodes[i].ToString() != now->nodes[i].ToString()) {
      RAMP_INFO("cluster file: node %zu moves from %s to %s (new connections use it)", i,
                now->nodes[i].ToString().c_str(), next.nodes[i].ToString().c_str());
    }
  }
  for (size_t i = next.nodes.size(); i < now->nodes.size(); i++) {
    RAMP_INFO("cluster file: node %zu (%s) removed", i, now->nodes[i].ToString().c_str());
  }
  if (directory != nullptr) directory->SetNodeCount(static_cast<uint32_t>(next.nodes.size()));
  std::lock_guard lock(mu_);
  config_ = std::make_shared<const ClusterConfig>(next);
  return Status::OK();
}

protocol::ProbeResult Membership::Probe(uint32_t target, int timeout_ms) const {
  std::shared_ptr<const ClusterConfig> c = Get();
  protocol::ProbeResult r;
  r.node = target;
  if (target >= c->nodes.size()) {
    r.error = NameIn(*c, self_) + " has no node " + std::to_string(target) +
              " in its cluster file (" + std::to_string(c->nodes.size()) + " nodes)";
    return r;
  }
  const transport::Endpoint* ep = ReachableEndpoint(c->nodes[target]);
  if (ep == nullptr) {
    r.error = "node " + std::to_string(target) + " has no endpoint";
    return r;
  }
  r.endpoint = ep->ToString();
  ChannelContext context;
  context.options.token = token_;
  context.options.timeout_ms = timeout_ms;
  context.options.connect_timeout_ms = timeout_ms;
  context.options.ring_bytes = 64u << 10;
  // A stopping server does not wait for a peer that does not answer.
  context.options.wait_hook = [this] {
    return stop_.load() ? Status::Cancelled("the server is stopping") : Status::OK();
  };
  context.memory = transport::Memory::Create();
  context.client_id = transport::RandomU64() | 1;
  DoorbellSet doorbells;
  NodeChannel channel;
  channel.Setup(&context, &doorbells, target, NameIn(*c, target));
  channel.SetEndpoint(*ep);
  const auto start = std::chrono::steady_clock::now();
  Status st = doorbells.Init();
  if (st.ok()) st = channel.Connect();
  if (st.ok()) st = channel.SayHello();
  r.latency_us = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                           std::chrono::steady_clock::now() - start)
                                           .count());
  if (st.ok()) {
    r.ok = true;
  } else {
    r.error = "node " + std::to_string(target) + " advertises " + r.endpoint + " but " +
              NameIn(*c, self_) + " cannot reach it: " + st.message();
  }
  channel.Reset(Status::OK());
  return r;
}

void Membership::Reap() {
  for (auto it = probes_.begin(); it != probes_.end();) {
    if (it->done->load()) {
      it->thread.join();
      it = probes_.erase(it);
    } else {
      ++it;
    }
  }
}

Status Membership::StartProbe(std::vector<uint32_t> targets, const protocol::Header& request,
                              HybridClock* clock, DeferredReply reply) {
  std::lock_guard lock(mu_);
  Reap();
  if (stop_.load()) return Status::Unavailable("the server is stopping");
  if (probes_.size() >= kMaxProbesInFlight) {
    return Status::Unavailable("node " + std::to_string(self_) + " already runs " +
                               std::to_string(probes_.size()) + " probes; ask again later");
  }
  if (targets.empty()) {
    for (uint32_t n = 0; n < config_->nodes.size(); n++) targets.push_back(n);
  }
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread t([this, targets = std::move(targets), request, clock, reply = std::move(reply),
                 done]() mutable {
    std::vector<protocol::ProbeResult> results(targets.size());
    std::vector<std::thread> each;
    for (size_t i = 0; i < targets.size(); i++) {
      each.emplace_back([&, i] { results[i] = Probe(targets[i], kProbeTimeoutMs); });
    }
    for (auto& e : each) e.join();
    std::string out;
    protocol::EncodeHeader(
        protocol::ReplyTo(request, clock->Peek(), static_cast<uint32_t>(results.size())), &out);
    protocol::Encode(results, &out);
    reply.Send(std::move(out));
    done->store(true);
  });
  probes_.push_back(ProbeThread{std::move(t), std::move(done)});
  return Status::OK();
}

void Membership::StartSelfCheck(int give_up_after_ms) {
  self_check_ = std::thread([this, give_up_after_ms] { SelfCheck(give_up_after_ms); });
}

void Membership::SelfCheck(int give_up_after_ms) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(give_up_after_ms);
  std::shared_ptr<const ClusterConfig> c = Get();
  std::vector<uint32_t> pending;
  std::vector<std::string> why(c->nodes.size());
  for (uint32_t n = 0; n < c->nodes.size(); n++) {
    if (n != self_) pending.push_back(n);
  }
  while (!pending.empty() && !stop_.load()) {
    std::vector<uint32_t> again;
    for (uint32_t peer : pending) {
      if (stop_.load()) return;
      const transport::Endpoint* ep = ReachableEndpoint(c->nodes[peer]);
      if (ep == nullptr) continue;
      ClientOptions o;
      o.seeds = {*ep};
      o.provider = transport::Provider::kTcp;
      o.read_path = ReadPath::kRpc;
      o.write_path = WritePath::kRpc;
      o.token = token_;
      o.timeout_ms = 3 * kProbeTimeoutMs;
      o.connect_timeout_ms = kProbeTimeoutMs;
      o.ring_bytes = 64u << 10;
      o.wait_hook = [this] {
        return stop_.load() ? Status::Cancelled("the server is stopping") : Status::OK();
      };
      std::unique_ptr<Client> client;
      std::vector<NodeProbe> seen;
      Status st = Client::Open(o, &client);
      if (st.ok()) st = client->Probe(peer, {self_}, &seen);
      if (st.ok() && seen.size() != 1) st = Status::Corruption("PROBE reply without a result");
      if (!st.ok()) {
        why[peer] = st.ToString();
        again.push_back(peer);
        continue;
      }
      const NodeProbe& p = seen.front();
      if (p.ok) {
        RAMP_INFO("%s reaches this node at %s (connect and HELLO: %.1f ms)",
                  NameIn(*c, peer).c_str(), p.endpoint.c_str(), p.latency_us / 1000.0);
      } else {
        RAMP_WARN("%s", p.error.c_str());
      }
    }
    pending = std::move(again);
    if (pending.empty() || std::chrono::steady_clock::now() >= deadline) break;
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::milliseconds(500), [this] { return stop_.load(); });
  }
  for (uint32_t peer : pending) {
    RAMP_INFO("could not ask %s whether it reaches this node: %s", NameIn(*c, peer).c_str(),
              why[peer].c_str());
  }
}

void Membership::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stop_.exchange(true) && probes_.empty() && !self_check_.joinable()) return;
    cv_.notify_all();
  }
  if (self_check_.joinable()) self_check_.join();
  std::vector<ProbeThread> left;
  {
    std::lock_guard lock(mu_);
    left.swap(probes_);
  }
  for (auto& p : left) p.thread.join();
}

}  // namespace ramp::server
