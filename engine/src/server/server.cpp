#include "server/server.h"

#include <algorithm>
#include <chrono>

#include "ramp/log.h"
#include "ramp/transport/auth.h"
#include "server/request_handler.h"
#include "server/terminator.h"
#include "store/durable/data_dir.h"

namespace ramp::server {
namespace {
uint64_t SteadyMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}
constexpr int kAcceptPollMs = 200;
}  // namespace

Status Server::Start(const ServerOptions& options, std::unique_ptr<Server>* out) {
  std::unique_ptr<Server> s(new Server());
  Status st = s->Init(options);
  if (!st.ok()) {
    s->Stop();
    return st;
  }
  *out = std::move(s);
  return Status::OK();
}

Status Server::Init(const ServerOptions& options) {
  options_ = options;
  if (options.listen.empty()) return Status::InvalidArgument("no listen endpoint given");
  if (options.workers < 1) return Status::InvalidArgument("at least one worker thread is needed");
  memory_ = transport::Memory::Create();

  transport::TransportOptions topts;
  topts.token = options.token;
  topts.ring_bytes = options.ring_bytes;
  topts.responder_thread = true;
  topts.pending_handshake_timeout_ms = options.handshake_timeout_ms;
  topts.max_pending_handshakes = options.max_pending_handshakes;
  topts.max_pending_handshakes_per_source = options.max_pending_handshakes_per_source;
  topts.shm_socket_mode = options.shm_socket_mode;
  topts.shm_socket_gid = options.shm_socket_gid;
  for (const auto& ep : options.listen) {
    std::unique_ptr<transport::Listener> l;
    Status st = transport::Listen(ep, topts, memory_, &l);
    if (!st.ok()) return st.Annotate("cannot listen on " + ep.ToString());
    listeners_.push_back(std::move(l));
  }
  // The cluster file names endpoints as peers reach them; a single server without one is a
  // cluster of itself, known by the endpoints actually bound.
  cluster_ = options.cluster.nodes.empty() ? ClusterConfig::Single(endpoints()) : options.cluster;
  uint32_t self = 0;
  if (options.node >= 0) {
    if (static_cast<size_t>(options.node) >= cluster_.nodes.size()) {
      return Status::InvalidArgument("--node " + std::to_string(options.node) +
                                     " but the cluster has " +
                                     std::to_string(cluster_.nodes.size()) + " nodes");
    }
    self = static_cast<uint32_t>(options.node);
  } else {
    Status st = cluster_.FindNode(endpoints(), &self);
    if (!st.ok()) return st.Annotate("pass --node to say which node this is");
  }

  store::StoreOptions so;
  so.memory_bytes = options.memory_bytes;
  so.gc_grace_ms = options.gc_grace_ms;
  so.node = self;
  so.page_dir = options.page_dir;
  so.page_direct_io = options.page_direct_io;
  so.memory_budget_bytes = options.memory_budget_bytes;
  so.data_dir = options.data_dir;
  so.cluster_id = store::ClusterIdOf(options.token);
  RAMP_RETURN_IF_ERROR(store::Store::Open(so, memory_, &store_));
  directory_ = std::make_unique<Directory>(self, static_cast<uint32_t>(cluster_.nodes.size()),
                                           cluster_.home_count());
  RAMP_RETURN_IF_ERROR(directory_->Open(nullptr, options.data_dir));
  // Copies the store recovered that this server does not serve: kept without serving (a
  // migration's source or target awaiting the home's word), or dropped (given away).
  for (const PartitionId& p : store_->PartitionIds()) {
    switch (directory_->FateOf(p)) {
      case Directory::CopyFate::kServe:
        break;
      case Directory::CopyFate::kKeep:
        (void)store_->SetServing(p, false);
        break;
      case Directory::CopyFate::kDrop:
        store_->DropPartition(p);
        break;
    }
  }

  ctx_.store = store_.get();
  ctx_.directory = directory_.get();
  ctx_.locks = &locks_;
  intents_ = std::make_unique<IntentTable>(
      [this](const protocol::Header& h, const PartitionId& part, std::string_view key,
             std::string* reply) { EncodeIntentGrant(ctx_, h, part, key, reply); },
      [this](const protocol::Header& h, const PartitionId& part, std::string* reply) {
        EncodeIntentMoved(ctx_, h, part, reply);
      },
      [this](uint32_t node, IntentTable::Released released) {
        if (ctx_.migrations != nullptr)
          ctx_.migrations->ForwardIntentEnds(node, std::move(released));
      });
  ctx_.intents = intents_.get();
  // COMMITs are acknowledged before their sync (request_durability.cpp): a transaction the
  // log holds prepared and undecided may have been committed and seen. Reads of its
  // partitions wait until it is resolved (in_doubt.h; TerminationLoop does it).
  in_doubt_.Add(store_->PendingOlderThan(UINT64_MAX));
  store_->SetInlineLogFlush(options.inline_log_flush);
  ctx_.in_doubt = &in_doubt_;
  ctx_.clock = &clock_;
  membership_ = std::make_unique<Membership>(cluster_, self, options.token);
  ctx_.membership = membership_.get();
  ctx_.self = self;
  ctx_.instance = transport::RandomU64() | 1;
  ctx_.started_ms = SteadyMs();
  ctx_.limits = options.limits;
  ctx_.test_ack_before_durable = options.test_ack_before_durable;
  if (options.test_ack_before_durable) {
    RAMP_WARN(
        "--test-ack-before-durable: writes are acknowledged before they are on disk "
        "(a bug injected for tests)");
  }
  PageServiceOptions page_options = options.pages;
  page_options.frame_grace_ms = options.gc_grace_ms;  // the store's (retired frames stay readable)
  RAMP_RETURN_IF_ERROR(PageService::Start(page_options, store_.get(), memory_, &pages_));
  ctx_.pages = pages_.get();
  migrations_ = std::make_unique<Migrations>(&ctx_, PeerOptions(), options.test_crash_at);
  ctx_.migrations = migrations_.get();

  for (int i = 0; i < options.workers; i++) {
    auto w = std::make_unique<Worker>(&ctx_, i, options.spin_rounds);
    RAMP_RETURN_IF_ERROR(w->Start());
    workers_.push_back(std::move(w));
  }
  for (auto& l : listeners_) {
    acceptors_.emplace_back([this, lp = l.get()] { AcceptLoop(lp); });
  }
  gc_thread_ = std::thread([this] { GcLoop(); });
  migrations_->Reconcile();
  if (options.rebalance_interval_ms > 0) {
    migrations_->StartRebalancer(options.rebalance_interval_ms, options.rebalance_threshold,
                                 options.rebalance_cooldown_ms);
  }
  termination_thread_ = std::thread([this] { TerminationLoop(); });
  // Peers started at about the same time are asked again for a while.
  if (cluster_.nodes.size() > 1) membership_->StartSelfCheck(30000);
  std::string eps;
  for (const auto& e : endpoints()) eps.append(" ").append(e.ToString());
  RAMP_INFO("node %u of %zu listening on%s (%d workers, %zu MiB page memory)", self,
            cluster_.nodes.size(), eps.c_str(), options.workers, options.memory_bytes >> 20);
  if (!in_doubt_.empty()) {
    RAMP_INFO(
        "%zu prepared transaction(s) found in doubt at restart: reads of their "
        "partitions wait until they are resolved with their siblings",
        in_doubt_.size());
  }
  return Status::OK();
}

Status Server::ReloadCluster(const ClusterConfig& next) {
  if (!membership_) return Status::Unavailable("the server is not running");
  return membership_->Reload(next, directory_.get());
}

std::vector<transport::Endpoint> Server::endpoints() const {
  std::vector<transport::Endpoint> eps;
  for (const auto& l : listeners_) eps.push_back(l->endpoint());
  return eps;
}

void Server::AcceptLoop(transport::Listener* listener) {
  // Rejections are logged at most kMaxRejectionLogsPerSecond a second: peers sending garbage
  // must not be able to flood the log (the listener logs its own refusals the same way).
  constexpr int kMaxRejectionLogsPerSecond = 20;
  auto window = std::chrono::steady_clock::now();
  int logged = 0;
  uint64_t unlogged = 0;
  while (!stop_.load()) {
    std::unique_ptr<transport::Connection> conn;
    Status st = listener->Accept(kAcceptPollMs, &conn);
    if (st.Is(Status::Code::kTimeout)) continue;
    if (!st.ok()) {
      if (stop_.load()) break;
      const auto now = std::chrono::steady_clock::now();
      if (now - window >= std::chrono::seconds(1)) {
        if (unlogged > 0) {
          RAMP_WARN("%s: %llu more rejected connections not logged",
                    listener->endpoint().ToString().c_str(),
                    static_cast<unsigned long long>(unlogged));
        }
        window = now;
        logged = 0;
        unlogged = 0;
      }
      if (logged < kMaxRejectionLogsPerSecond) {
        logged++;
        // A peer without the token, a handshake cut short: that peer only.
        RAMP_WARN("%s: rejected a connection: %s", listener->endpoint().ToString().c_str(),
                  st.ToString().c_str());
      } else {
        unlogged++;
      }
      continue;
    }
    if (ctx_.connections.load() >= ctx_.limits.max_connections) {
      RAMP_WARN("refusing %s: %zu connections is the limit", conn->peer().c_str(),
                ctx_.limits.max_connections);
      conn->Close();
      continue;
    }
    ctx_.connections.fetch_add(1);
    // The least loaded worker takes it (round-robin among equals).
    size_t best = next_worker_.fetch_add(1) % workers_.size();
    for (size_t i = 0; i < workers_.size(); i++) {
      if (workers_[i]->session_count() < workers_[best]->session_count()) best = i;
    }
    workers_[best]->Adopt(std::move(conn));
  }
}

void Server::GcLoop() {
  while (!stop_.load()) {
    std::unique_lock lock(gc_mu_);
    gc_cv_.wait_for(lock, std::chrono::milliseconds(options_.gc_interval_ms),
                    [this] { return stop_.load(); });
    if (stop_.load()) break;
    store_->CollectGarbage();
  }
}

ClientOptions Server::PeerOptions() const {
  ClientOptions co;
  for (const auto& n : cluster_.nodes) {
    for (const auto& e : n.endpoints) {
      if (e.provider == transport::Provider::kTcp) {
        co.seeds.push_back(e);
        break;
      }
    }
  }
  co.provider = transport::Provider::kTcp;
  co.read_path = ReadPath::kRpc;
  co.write_path = WritePath::kRpc;
  co.token = options_.token;
  co.timeout_ms = std::max(500, std::min(5000, options_.txn_timeout_ms / 2));
  co.connect_timeout_ms = co.timeout_ms;
  return co;
}

void Server::TerminationLoop() {
  Terminator terminator(store_.get(), PeerOptions(), options_.txn_timeout_ms);
  const int interval = std::max(100, std::min(1000, options_.txn_timeout_ms / 4));
  // While transactions recovered prepared are in doubt, they are asked about often: reads
  // of their partitions wait for it. A sibling that is down keeps only those partitions
  // unreadable (logged every few seconds), never the whole server.
  constexpr int kInDoubtIntervalMs = 50;
  constexpr uint64_t kInDoubtLogMs = 5000;
  const uint64_t in_doubt_since = SteadyMs();
  uint64_t in_doubt_logged = in_doubt_since;
  while (!stop_.load()) {
    if (!in_doubt_.empty()) {
      std::string why;
      for (const store::PendingTxn& txn : in_doubt_.Snapshot()) {
        if (stop_.load()) break;
        if (terminator.ResolveRecovered(txn, &why)) {
          in_doubt_.Resolved(txn.ts, txn.partition);
        }
      }
      const uint64_t now = SteadyMs();
      if (in_doubt_.empty()) {
        RAMP_INFO(
            "every transaction in doubt at restart is resolved (%llu ms): all "
            "partitions serve reads",
            static_cast<unsigned long long>(now - in_doubt_since));
      } else if (now - in_doubt_logged >= kInDoubtLogMs) {
        in_doubt_logged = now;
        RAMP_WARN(
            "%zu transaction(s) found prepared at restart still in doubt after %llu ms, "
            "reads of their partitions are refused (last reason: %s)",
            in_doubt_.size(), static_cast<unsigned long long>(now - in_doubt_since), why.c_str());
      }
    }
    {
      std::unique_lock lock(gc_mu_);
      gc_cv_.wait_for(lock,
                      std::chrono::milliseconds(in_doubt_.empty() ? interval : kInDoubtIntervalMs),
                      [this] { return stop_.load(); });
    }
    if (stop_.load()) break;
    // The store's clock (steady milliseconds) dates prepared transactions.
    terminator.RunOnce(SteadyMs());
  }
}

void Server::Stop() {
  if (stop_.exchange(true)) return;
  {
    std::lock_guard lock(gc_mu_);
    gc_cv_.notify_all();
  }
  for (auto& t : acceptors_) t.join();
  acceptors_.clear();
  for (auto& l : listeners_) l->Close();
  if (membership_) membership_->Stop();  // before the workers its probes reply through
  if (migrations_) migrations_->Stop();
  for (auto& w : workers_) w->Stop();
  workers_.clear();
  if (pages_) pages_->Stop();
  if (gc_thread_.joinable()) gc_thread_.join();
  if (termination_thread_.joinable()) termination_thread_.join();
}

Server::~Server() {
  Stop();
}

}  // namespace ramp::server
