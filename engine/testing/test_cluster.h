// Starts real rampd processes for integration tests: a temporary directory with a cluster
// file and token, one process per node listening on tcp (loopback) and shm, and stops them
// (SIGTERM, then SIGKILL) when the TestCluster goes away. Nodes can be killed and restarted.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "ramp/client.h"
#include "ramp/status.h"
#include "ramp/transport/endpoint.h"

namespace ramp::testing {

struct TestClusterOptions {
  int nodes = 3;
  bool shm = true;  // also listen on a unix socket per node
  std::string token = "integration-test-token";
  int memory_mb = 64;
  int workers = 1;
  bool data = false;        // give every node a data directory (durable servers)
  bool page_files = false;  // give every node a page-file directory (remote page I/O)
  std::vector<std::string> extra_args;
};

class TestCluster {
 public:
  static Status Start(const TestClusterOptions& options, std::unique_ptr<TestCluster>* out);
  ~TestCluster();

  int size() const { return static_cast<int>(nodes_.size()); }
  const std::string& dir() const { return dir_; }
  const std::string& token() const { return options_.token; }
  transport::Endpoint tcp(int node) const { return nodes_[node].tcp; }
  transport::Endpoint shm(int node) const { return nodes_[node].shm; }
  std::string log_path(int node) const;
  std::string ReadLog(int node) const;

  // Client options for a provider and paths (seeds: every node's endpoint of the provider).
  ClientOptions ClientOptionsFor(transport::Provider provider, ReadPath read,
                                 WritePath write) const;

  // Sends a signal (SIGKILL: a crash) and reaps the process.
  Status Kill(int node, int sig);
  // Starts a stopped node again (same endpoints, same data directory).
  Status Restart(int node);
  bool running(int node) const { return nodes_[node].pid > 0; }
  // Whether a node's process ended by itself (reaped then; Restart starts it again).
  bool Exited(int node);
  // Arguments added to a node's command line from its next (re)start on.
  void SetNodeArgs(int node, std::vector<std::string> args) { nodes_[node].args = std::move(args); }
  const std::string& cluster_file() const { return cluster_file_; }
  // Membership: the cluster file of the nodes so far ("homes" = the nodes started with).
  std::string ClusterFileText() const;
  // Writes the cluster file and sends SIGHUP to every running node; waits until each logged
  // that it applied or refused it.
  Status ApplyClusterFile(const std::string& text);
  // Adds a node at the end of the cluster file ("homes" keeps the homes of the first
  // nodes), tells the running nodes (SIGHUP) and starts it. advertise_port: the port the
  // file lists for it (0: the one it listens on; another: an address nobody listens on).
  Status AddNode(uint16_t advertise_port = 0);
  pid_t pid(int node) const { return nodes_[node].pid; }

 private:
  static Status StartOnce(const TestClusterOptions& options, std::unique_ptr<TestCluster>* out);
  struct NodeProc {
    transport::Endpoint tcp;
    transport::Endpoint shm;
    std::string data_dir;
    std::string page_dir;
    pid_t pid = -1;
    int restarts = 0;
    std::vector<std::string> args;  // SetNodeArgs
    std::string advertised;         // what the cluster file lists (empty: tcp)
  };
  TestCluster() = default;
  Status Launch(int node);
  Status WaitReady(int node, int timeout_ms);

  TestClusterOptions options_;
  std::string dir_;
  std::string cluster_file_;
  std::string token_file_;
  std::vector<NodeProc> nodes_;
};

// The path of the rampd binary under test (set by CMake).
const char* RampdPath();

}  // namespace ramp::testing
