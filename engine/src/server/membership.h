// The cluster as this server knows it, and how the servers see each other.
//
// Membership holds the cluster file the server runs with. rampd re-reads the file on SIGHUP
// and when it changes (rampd_main.cpp); Reload applies what CheckReload allows (nodes added
// at the end, a node's new address) and refuses the rest with the reason, keeping the file
// it had. Workers read the current file through Get (HELLO replies list its nodes).
//
// Probing: a PROBE request makes this server connect to nodes' endpoints as its own file
// lists them (a fresh connection: token handshake and HELLO, which also checks that the node
// that answers is the one listed) and report each outcome, with a sentence naming both ends
// when it fails. rampctl status asks every server for every node (the reachability matrix);
// a starting server asks its peers to probe it (SelfCheck), so an advertised address its
// peers cannot reach is logged at start by the node itself.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "protocol/messages.h"
#include "ramp/hlc.h"
#include "ramp/status.h"
#include "server/cluster_config.h"
#include "server/deferred_reply.h"

namespace ramp::server {

class Directory;

class Membership {
 public:
  Membership(ClusterConfig config, uint32_t self, std::string token);
  ~Membership();
  Membership(const Membership&) = delete;
  Membership& operator=(const Membership&) = delete;

  std::shared_ptr<const ClusterConfig> Get() const;
  uint32_t self() const { return self_; }

  // Goes to `next` if CheckReload allows it (the directory says which nodes still own
  // partitions) and tells the directory the new node count. Logs what changed.
  Status Reload(const ClusterConfig& next, Directory* directory);

  // "node 2 (tcp://10.0.0.5:7400)": a node as this server's file lists it.
  std::string NodeName(uint32_t node) const;
  // Connects to a node's endpoint (its first tcp one, else its first) and says HELLO.
  protocol::ProbeResult Probe(uint32_t target, int timeout_ms) const;
  // Answers a PROBE from a thread of its own (the worker does not wait): every listed node
  // (none: all) is probed at once, and the reply is sent when all are done. Unavailable
  // when too many probes are running already.
  Status StartProbe(std::vector<uint32_t> targets, const protocol::Header& request,
                    HybridClock* clock, DeferredReply reply);

  // At start: asks every peer, in the background, to probe this node's advertised
  // endpoint, and logs each answer (peers not up yet are asked again for a while).
  void StartSelfCheck(int give_up_after_ms);
  void Stop();

  static constexpr int kProbeTimeoutMs = 2000;
  static constexpr int kMaxProbesInFlight = 4;

 private:
  void SelfCheck(int give_up_after_ms);
  void Reap();  // joins finished probe threads

  const uint32_t self_;
  const std::string token_;
  mutable std::mutex mu_;
  std::shared_ptr<const ClusterConfig> config_;
  std::condition_variable cv_;
  std::atomic<bool> stop_{false};
  struct ProbeThread {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<ProbeThread> probes_;  // under mu_
  std::thread self_check_;
};

}  // namespace ramp::server
