// rampd: a standalone partition server. Listens on one or more endpoints, authenticates
// peers with the cluster token, and serves RAMP requests from a pool of worker threads.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "ramp/hlc.h"
#include "ramp/status.h"
#include "ramp/transport/transport.h"
#include "server/cluster_config.h"
#include "server/directory.h"
#include "server/in_doubt.h"
#include "server/lock_table.h"
#include "server/membership.h"
#include "server/migration.h"
#include "server/page_service.h"
#include "server/server_context.h"
#include "server/worker.h"
#include "store/store.h"

namespace ramp::server {

struct ServerOptions {
  std::vector<transport::Endpoint> listen;
  ClusterConfig cluster;  // empty: a single-node cluster of the listen endpoints
  int node = -1;          // -1: find this server in the cluster by its endpoints
  std::string token;
  std::string data_dir;
  int workers = 2;
  int spin_rounds = 200;  // idle polling rounds before a worker sleeps
  // With data_dir: workers write the group commit's batches their replies wait for
  // (LogWriter::FlushInline); false: the log writer's thread writes them all.
  bool inline_log_flush = true;
  size_t memory_bytes = size_t{1} << 30;
  size_t ring_bytes = 1u << 20;
  int gc_interval_ms = 1000;
  int gc_grace_ms = 5000;
  // A transaction prepared this long and undecided is resolved by the termination protocol
  // (terminator.h). Must exceed the clients' request timeout.
  int txn_timeout_ms = 30000;
  Limits limits;
  // Connections that have not authenticated yet (TransportOptions): closed after this long,
  // refused beyond these many in total and from one source address.
  int handshake_timeout_ms = 3000;
  size_t max_pending_handshakes = 512;
  size_t max_pending_handshakes_per_source = 64;
  // shm listeners' socket files: permission bits and group id (-1: leave them), set on every
  // start (TransportOptions::shm_socket_mode, shm_socket_gid).
  int shm_socket_mode = -1;
  int64_t shm_socket_gid = -1;
  // Remote page I/O: page files (empty: none) and the page-read service.
  std::string page_dir;
  bool page_direct_io = false;
  size_t memory_budget_bytes = 0;  // pages resident at most (0: all of memory_bytes)
  PageServiceOptions pages;
  // Tests only: a migration step name (migration.h) at which this process kills itself.
  std::string test_crash_at;
  // Tests only (the fault harness's injected bug): writing requests are answered before
  // their bytes are durable (request_durability.cpp).
  bool test_ack_before_durable = false;
  // The hot-partition rebalancer (ramp/rebalance.h): how often the cluster's loads are
  // looked at (0: off), max/mean above which partitions move, and how long a moved
  // partition stays put. Every server runs the loop; the lowest-numbered reachable one acts.
  int rebalance_interval_ms = 0;
  double rebalance_threshold = 1.25;
  int rebalance_cooldown_ms = 60000;
};

class Server {
 public:
  static Status Start(const ServerOptions& options, std::unique_ptr<Server>* out);
  ~Server();
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Stops accepting, closes every connection, joins every thread. Idempotent.
  void Stop();
  // Goes to a new cluster file (rampd: SIGHUP, or the file changed): what CheckReload
  // allows is applied, anything else refused with the reason (membership.h).
  Status ReloadCluster(const ClusterConfig& next);

  uint32_t node() const { return ctx_.self; }
  // Endpoints actually bound (ports filled in when 0 was asked).
  std::vector<transport::Endpoint> endpoints() const;
  store::Store* store() { return store_.get(); }

 private:
  Server() = default;
  Status Init(const ServerOptions& options);
  void AcceptLoop(transport::Listener* listener);
  void GcLoop();
  void TerminationLoop();
  // How this server reaches its peers as a client (termination, migration).
  ClientOptions PeerOptions() const;

  ServerOptions options_;
  ClusterConfig cluster_;  // as started (Membership holds the current one)
  std::unique_ptr<Membership> membership_;
  std::shared_ptr<transport::Memory> memory_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<Directory> directory_;
  std::unique_ptr<PageService> pages_;
  std::unique_ptr<Migrations> migrations_;
  LockTable locks_;
  std::unique_ptr<IntentTable> intents_;
  InDoubt in_doubt_;
  HybridClock clock_;
  ServerContext ctx_;
  std::vector<std::unique_ptr<transport::Listener>> listeners_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<std::thread> acceptors_;
  std::thread gc_thread_;
  std::thread termination_thread_;
  std::mutex gc_mu_;
  std::condition_variable gc_cv_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> next_worker_{0};
};

}  // namespace ramp::server
