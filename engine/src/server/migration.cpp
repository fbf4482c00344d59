#include "server/migration.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "client/client_impl.h"
#include "ramp/log.h"
#include "ramp/page_reader.h"
#include "ramp/rebalance.h"
#include "store/store.h"

namespace ramp::server {
namespace {

using protocol::MigrateAction;
using protocol::MigrateCtl;
using protocol::MigrateCtlReply;
using protocol::MigrationPhase;

// A copy round that brought less than this is "caught up": the cutover may start.
constexpr uint64_t kCaughtUpBytes = 64 * 1024;
// Pages per READ_PAGES round trip of the copy.
constexpr uint32_t kPagesPerRead = 64;
// How often the home polls the target, and how many failed polls in a row abandon a move.
constexpr int kPollMs = 5;
// During the cutover (writes wait for it) the target is polled more often.
constexpr int kCutoverPollMs = 1;
constexpr int kMaxFailedPolls = 200;

uint64_t UnixMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

Status CtlVia(Client* client, uint32_t node, const MigrateCtl& m, MigrateCtlReply* out) {
  std::string body;
  protocol::Encode(m, &body);
  PendingCall reply;
  Status st = client->impl()->CallAndWait(node, ChannelKind::kRpc, protocol::Op::kMigrateCtl, 0,
                                          body, &reply);
  if (st.ok()) st = protocol::Decode(reply.body(), out);
  return st;
}

}  // namespace

struct Migrations::Puller {
  PartitionId part;
  uint32_t source = 0;
  uint64_t epoch = 0;
  uint64_t old_epoch = 0;
  std::atomic<bool> cancel{false};
  std::atomic<bool> finish{false};
  std::atomic<bool> caught_up{false};
  std::atomic<bool> finished{false};
  std::atomic<uint64_t> copied{0};
  std::atomic<uint64_t> total{0};
  std::mutex mu;
  std::condition_variable cv;  // finish or cancel wakes the puller between rounds
  std::string error;
  // FINISH requests waiting for the final round (Finish).
  std::vector<std::function<void(const MigrateCtlReply&)>> waiters;
  std::thread thread;

  MigrateCtlReply State() {  // under mu
    MigrateCtlReply r;
    r.caught_up = caught_up.load();
    r.finished = finished.load();
    r.bytes_copied = copied.load();
    r.bytes_total = total.load();
    r.error = error;
    return r;
  }
  void Wake() {
    std::lock_guard lock(mu);
    cv.notify_all();
  }
};

Migrations::Migrations(ServerContext* ctx, ClientOptions peer, std::string crash_at)
    : ctx_(ctx), peer_(std::move(peer)), crash_at_(std::move(crash_at)) {}

Migrations::~Migrations() {
  Stop();
}

void Migrations::Stop() {
  stop_.store(true);
  cv_.notify_all();
  {
    std::lock_guard lock(forward_mu_);
    forward_cv_.notify_all();
  }
  if (forward_thread_.joinable()) forward_thread_.join();
  std::vector<Task> threads;
  std::vector<std::shared_ptr<Puller>> pullers;
  {
    std::lock_guard lock(mu_);
    threads.swap(threads_);
    for (auto& [p, pl] : pullers_) pullers.push_back(pl);
  }
  for (auto& t : threads) t.thread.join();
  for (auto& p : pullers) {
    p->cancel.store(true);
    p->Wake();
    if (p->thread.joinable()) p->thread.join();
  }
}

void Migrations::Hook(const char* step) const {
  if (crash_at_.empty() || crash_at_ != step) return;
  RAMP_WARN("test hook: node %u kills itself at migration step '%s'", ctx_->self, step);
  fflush(nullptr);
  kill(getpid(), SIGKILL);
}

bool Migrations::Sleep(int ms) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(ms), [this] { return stop_.load(); });
  return !stop_.load();
}

void Migrations::Spawn(std::function<void()> f) {
  std::vector<Task> finished;  // joined here, so that threads of past moves do not pile up
  {
    std::lock_guard lock(mu_);
    if (stop_.load()) return;
    for (auto it = threads_.begin(); it != threads_.end();) {
      if (it->done->load()) {
        finished.push_back(std::move(*it));
        it = threads_.erase(it);
      } else {
        ++it;
      }
    }
    auto done = std::make_shared<std::atomic<bool>>(false);
    threads_.push_back(Task{std::thread([f = std::move(f), done] {
                              f();
                              done->store(true);
                            }),
                            done});
  }
  for (auto& t : finished) t.thread.join();
}

// ---- the home ------------------------------------------------------------------------------

void Migrations::Reconcile() {
  for (const MigrationState& m : ctx_->directory->InFlight()) {
    RAMP_INFO("migration of %s (node %u to node %u) was in phase %s at restart: %s",
              m.part.ToString().c_str(), m.source, m.target, protocol::MigrationPhaseName(m.phase),
              m.phase == MigrationPhase::kCommitted ? "completing it" : "rolling it back");
    Spawn([this, m] {
      if (m.phase == MigrationPhase::kCommitted) {
        Complete(m);
      } else {
        RollBack(m,
                 "the home restarted during the " +
                     std::string(protocol::MigrationPhaseName(m.phase)) + " phase",
                 m.phase == MigrationPhase::kCutover);
      }
    });
  }
}

void Migrations::Start(const protocol::MigrateRequest& req, const protocol::Header& h,
                       DeferredReply reply) {
  Spawn([this, req, h, reply]() mutable { Drive(req, h, std::move(reply)); });
}

// Ends this node's copy of partition p, if it is pulling one (target side).
void Migrations::StopPuller(const PartitionId& p) {
  std::shared_ptr<Puller> pl;
  {
    std::lock_guard lock(mu_);
    if (auto it = pullers_.find(p); it != pullers_.end()) {
      pl = it->second;
      pullers_.erase(it);
    }
  }
  if (pl != nullptr) {
    pl->cancel.store(true);
    pl->Wake();
    if (pl->thread.joinable()) pl->thread.join();
  }
}

Status Migrations::Ctl(uint32_t node, const MigrateCtl& m, MigrateCtlReply* out) {
  if (node == ctx_->self) {
    // A step at this server (the home is the source or the target): no round trip, which
    // matters in the cutover, where writes wait.
    if (m.action != MigrateAction::kFinish) {
      return Control(m, out).Annotate("node " + std::to_string(node));
    }
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    Finish(m.part, [&](const MigrateCtlReply& r) {
      std::lock_guard lock(mu);
      *out = r;
      done = true;
      cv.notify_all();
    });
    std::unique_lock lock(mu);
    cv.wait(lock, [&] { return done; });
    return Status::OK();
  }
  // One client per driver thread (Clients are single-threaded), kept across the steps of a
  // move so that the cutover's steps do not each pay a connection; dropped after an error
  // (the peer may have restarted).
  thread_local std::unique_ptr<Client> client;
  if (client == nullptr) RAMP_RETURN_IF_ERROR(Client::Open(peer_, &client));
  Status st = CtlVia(client.get(), node, m, out);
  if (!st.ok() && !st.Is(Status::Code::kInvalidArgument)) client.reset();
  return st.Annotate("node " + std::to_string(node));
}

bool Migrations::CtlUntilApplied(uint32_t node, const MigrateCtl& m) {
  for (int attempt = 0;; attempt++) {
    MigrateCtlReply r;
    Status st = Ctl(node, m, &r);
    if (st.ok()) return true;
    if (attempt % 50 == 0) {
      RAMP_WARN("migration of %s: step %d at node %u not applied yet (%s), retrying",
                m.part.ToString().c_str(), static_cast<int>(m.action), node, st.ToString().c_str());
    }
    if (!Sleep(100)) return false;
  }
}

Status Migrations::Check(const protocol::MigrateRequest& req, MigrationState* m) {
  const PartitionId& p = req.part;
  const uint32_t n = ctx_->directory->node_count();
  if (req.target >= n) {
    return Status::InvalidArgument("unknown node " + std::to_string(req.target) +
                                   ": the cluster has nodes 0.." + std::to_string(n - 1));
  }
  const protocol::Placement pl = ctx_->directory->EntryOf(p);
  if (pl.owner == req.target) {
    return Status::InvalidArgument("partition " + p.ToString() + " is already on node " +
                                   std::to_string(req.target) + " (migration to itself)");
  }
  if (MigrationState cur; ctx_->directory->FindMigration(p, &cur)) {
    return Status::Conflict("partition " + p.ToString() + " is already migrating (node " +
                            std::to_string(cur.source) + " to node " + std::to_string(cur.target) +
                            ", phase " + protocol::MigrationPhaseName(cur.phase) + ")");
  }
  MigrateCtlReply src;
  Status st = Ctl(pl.owner, MigrateCtl{MigrateAction::kProbe, p, 0, 0, 0}, &src);
  if (!st.ok()) {
    return Status::Unavailable("the owner of partition " + p.ToString() + ", node " +
                               std::to_string(pl.owner) + ", is unreachable: " + st.message());
  }
  if (!src.exists) {
    return Status::NotFound("unknown partition " + p.ToString() + ": its owner, node " +
                            std::to_string(pl.owner) + ", holds no data of it");
  }
  if (!src.owns) {
    return Status::Unavailable("node " + std::to_string(pl.owner) + " does not serve partition " +
                               p.ToString() + " yet: try again");
  }
  MigrateCtlReply dst;
  st = Ctl(req.target, MigrateCtl{MigrateAction::kProbe, p, 0, 0, 0}, &dst);
  if (!st.ok()) {
    return Status::Unavailable("target node " + std::to_string(req.target) +
                               " is down or unreachable (" + st.message() + "); partition " +
                               p.ToString() + " stays on node " + std::to_string(pl.owner));
  }
  if (dst.free_bytes < src.partition_bytes) {
    return Status::NoSpace("target node " + std::to_string(req.target) + " has " +
                           std::to_string(dst.free_bytes >> 20) +
                           " MiB of page memory free, partition " + p.ToString() + " takes " +
                           std::to_string(src.partition_bytes >> 20) + " MiB");
  }
  m->part = p;
  m->source = pl.owner;
  m->target = req.target;
  m->phase = MigrationPhase::kCopying;
  m->old_epoch = pl.epoch;
  m->new_epoch = pl.epoch + 1;
  m->started_unix_ms = UnixMs();
  m->bytes_total = src.partition_bytes;
  m->load_mops = src.load_mops;
  return ctx_->directory->BeginMigration(*m);
}

void Migrations::Drive(protocol::MigrateRequest req, protocol::Header h, DeferredReply reply) {
  MigrationState m;
  Status st = Check(req, &m);
  std::string out;
  if (!st.ok()) {
    protocol::EncodeErrorReply(h, ctx_->clock->Peek(), st, &out);
    reply.Send(std::move(out));
    return;
  }
  RAMP_INFO("migration of %s from node %u to node %u started (epoch %llu -> %llu)",
            m.part.ToString().c_str(), m.source, m.target,
            static_cast<unsigned long long>(m.old_epoch),
            static_cast<unsigned long long>(m.new_epoch));
  protocol::EncodeHeader(protocol::ReplyTo(h, ctx_->clock->Peek()), &out);
  reply.Send(std::move(out));
  Hook("home-after-begin");
  Run(m);
}

void Migrations::Run(MigrationState m) {
  const PartitionId p = m.part;
  const auto started = std::chrono::steady_clock::now();
  MigrateCtlReply r;
  // Copy while the source serves, until a round finds little new.
  Status st =
      Ctl(m.target,
          MigrateCtl{MigrateAction::kPull, p, m.source, m.new_epoch, m.old_epoch, m.load_mops}, &r);
  if (!st.ok()) return RollBack(m, "the target could not start copying: " + st.ToString(), false);
  auto poll = [&](bool want_finished, std::string* why) {
    int failed = 0;
    while (Sleep(want_finished ? kCutoverPollMs : kPollMs)) {
      MigrateCtlReply s;
      Status ps = Ctl(m.target, MigrateCtl{MigrateAction::kPullStatus, p, 0, 0, 0}, &s);
      if (!ps.ok()) {
        if (++failed >= kMaxFailedPolls) {
          *why = "the target stopped answering: " + ps.ToString();
          return false;
        }
        continue;
      }
      failed = 0;
      if (!s.error.empty()) {
        *why = "the copy failed: " + s.error;
        return false;
      }
      ctx_->directory->SetProgress(p, s.bytes_copied, s.bytes_total);
      if (want_finished ? s.finished : s.caught_up) return true;
    }
    *why = "the server is stopping";
    return false;
  };
  std::string why;
  if (!poll(false, &why)) return RollBack(m, why, false);
  // Cutover: the source stops serving, the target takes the last pages.
  if (!(st = ctx_->directory->SetPhase(p, MigrationPhase::kCutover)).ok()) {
    return RollBack(m, st.ToString(), false);
  }
  Hook("home-after-cutover");
  const auto paused = std::chrono::steady_clock::now();
  st =
      Ctl(m.source, MigrateCtl{MigrateAction::kRelease, p, m.target, m.new_epoch, m.old_epoch}, &r);
  if (!st.ok()) return RollBack(m, "the source could not release it: " + st.ToString(), true);
  // The write intents held at the source go to the target with the adoption.
  const std::vector<protocol::MovedIntent> intents = std::move(r.intents);
  Hook("home-after-release");
  // FINISH is answered when the target's final round is over (a target that answers at
  // once is polled).
  r = MigrateCtlReply();
  st = Ctl(m.target, MigrateCtl{MigrateAction::kFinish, p, 0, 0, 0}, &r);
  if (st.ok() && !r.error.empty()) st = Status::Aborted(r.error);
  if (!st.ok() || (!r.finished && !poll(true, &why))) {
    return RollBack(m, st.ok() ? why : "the target could not finish: " + st.ToString(), true);
  }
  // The commit point.
  if (!(st = ctx_->directory->SetPhase(p, MigrationPhase::kCommitted)).ok()) {
    return RollBack(m, st.ToString(), true);
  }
  Hook("home-after-commit");
  Complete(m, &started, &paused, &intents);
}

void Migrations::Complete(const MigrationState& m, const Clock::time_point* started,
                          const Clock::time_point* paused,
                          const std::vector<protocol::MovedIntent>* intents) {
  MigrateCtl adopt{MigrateAction::kAdopt, m.part, 0, m.new_epoch, 0};
  if (intents != nullptr) {
    adopt.intents = *intents;
  } else {
    // After the home's restart: the source still has what it exported, unless it restarted
    // too (then a conflict is caught by the commit's version check, as without intents).
    MigrateCtlReply r;
    Status st = Ctl(m.source, MigrateCtl{MigrateAction::kIntents, m.part, 0, 0, 0}, &r);
    if (st.ok()) {
      adopt.intents = std::move(r.intents);
    } else {
      RAMP_WARN("migration of %s: the intents the source exported are lost (%s)",
                m.part.ToString().c_str(), st.ToString().c_str());
    }
  }
  if (!CtlUntilApplied(m.target, adopt)) return;
  if (started != nullptr && paused != nullptr) {
    // Writes to the partition were refused from the release to the adoption.
    const auto now = Clock::now();
    MigrationState cur;
    const uint64_t bytes =
        ctx_->directory->FindMigration(m.part, &cur) ? cur.bytes_copied : m.bytes_copied;
    const double total_s = std::chrono::duration<double>(now - *started).count();
    RAMP_INFO(
        "migration of %s: %.1f MiB of records copied in %.3f s (%.1f MiB/s), writes paused "
        "%.2f ms",
        m.part.ToString().c_str(), bytes / 1048576.0, total_s,
        total_s > 0 ? bytes / 1048576.0 / total_s : 0.0,
        std::chrono::duration<double, std::milli>(now - *paused).count());
  }
  // The sharers hear of the new owner now that it serves (paper 004's cutover).
  const size_t told = ctx_->directory->PushPlacement(m.part, ctx_->clock->Peek());
  if (!CtlUntilApplied(m.source, MigrateCtl{MigrateAction::kDrop, m.part, 0, 0, 0})) return;
  Status st = ctx_->directory->SetPhase(m.part, MigrationPhase::kDone);
  RAMP_INFO("migration of %s from node %u to node %u done (epoch %llu, %zu sharers told)%s%s",
            m.part.ToString().c_str(), m.source, m.target,
            static_cast<unsigned long long>(m.new_epoch), told, st.ok() ? "" : ": ",
            st.ok() ? "" : st.ToString().c_str());
}

void Migrations::RollBack(const MigrationState& m, const std::string& why, bool source_released) {
  RAMP_WARN("migration of %s from node %u to node %u rolls back: %s", m.part.ToString().c_str(),
            m.source, m.target, why.c_str());
  const uint64_t epoch = m.new_epoch + 1;
  // old_epoch: a rollback, the source takes back the write intents it exported.
  if (source_released && !CtlUntilApplied(m.source, MigrateCtl{MigrateAction::kAdopt, m.part, 0,
                                                               epoch, m.old_epoch})) {
    return;
  }
  if (!CtlUntilApplied(m.target, MigrateCtl{MigrateAction::kDrop, m.part, 0, 0, 0})) return;
  Status st = ctx_->directory->SetPhase(m.part, MigrationPhase::kRolledBack, why,
                                        source_released ? epoch : 0);
  if (!st.ok()) RAMP_ERROR("migration of %s: %s", m.part.ToString().c_str(), st.ToString().c_str());
  // The source serves again at a new epoch: the sharers hear of it.
  if (st.ok() && source_released) (void)ctx_->directory->PushPlacement(m.part, ctx_->clock->Peek());
}

// ---- intents that moved: the ends of their transactions, passed on ------------------------

void Migrations::ForwardIntentEnds(uint32_t node, IntentTable::Released released) {
  std::lock_guard lock(forward_mu_);
  if (stop_.load()) return;
  auto& q = forward_queue_[node];
  q.insert(q.end(), released.begin(), released.end());
  if (!forward_thread_.joinable()) forward_thread_ = std::thread([this] { ForwardLoop(); });
  forward_cv_.notify_all();
}

void Migrations::ForwardLoop() {
  // A failed send is tried again this many times (the node may be restarting: then what it
  // imported is gone anyway, with the rest of its memory).
  constexpr int kAttempts = 20;
  std::unique_ptr<Client> client;
  std::unique_lock lock(forward_mu_);
  while (!stop_.load()) {
    if (forward_queue_.empty()) {
      forward_cv_.wait(lock);
      continue;
    }
    std::map<uint32_t, IntentTable::Released> batch;
    batch.swap(forward_queue_);
    lock.unlock();
    for (auto& [node, released] : batch) {
      protocol::IntentForward f{std::move(released)};
      std::string body;
      protocol::Encode(f, &body);
      Status st;
      for (int attempt = 0; attempt < kAttempts && !stop_.load(); attempt++) {
        if (attempt > 0 && !Sleep(100)) break;
        if (client == nullptr && !(st = Client::Open(peer_, &client)).ok()) continue;
        PendingCall reply;
        st = client->impl()->CallAndWait(node, ChannelKind::kRpc, protocol::Op::kIntentForward,
                                         static_cast<uint32_t>(f.released.size()), body, &reply);
        if (st.ok()) break;
        client.reset();
      }
      if (!st.ok()) {
        RAMP_WARN(
            "the ends of %zu transactions whose write intents moved to node %u were not "
            "passed on: %s",
            f.released.size(), node, st.ToString().c_str());
      }
    }
    lock.lock();
  }
}

// ---- the rebalancer -------------------------------------------------------------------------

void Migrations::StartRebalancer(int interval_ms, double threshold, int cooldown_ms) {
  Spawn([this, interval_ms, threshold, cooldown_ms] {
    RebalanceLoop(interval_ms, threshold, cooldown_ms);
  });
}

void Migrations::RebalanceLoop(int interval_ms, double threshold, int cooldown_ms) {
  RebalanceOptions o;
  o.threshold = threshold;
  o.cooldown_ms = static_cast<uint64_t>(cooldown_ms);
  o.max_moves = 1;  // one move per look: the next look sees its effect on the loads
  std::unique_ptr<Client> client;
  while (Sleep(interval_ms)) {
    if (client == nullptr && !Client::Open(peer_, &client).ok()) continue;
    // The lowest-numbered server that answers acts; when it dies the next one takes over.
    std::vector<ServerStatus> servers;
    Status st = client->ClusterStatus(&servers);
    uint32_t leader = UINT32_MAX;
    for (const ServerStatus& s : servers) {
      if (s.reachable) leader = std::min(leader, s.node);
    }
    if (!st.ok() || leader != ctx_->self) {
      if (!st.ok()) client.reset();
      continue;
    }
    RebalancePlan plan;
    if (!(st = client->PlanRebalance(o, &plan)).ok()) {
      client.reset();
      continue;
    }
    for (const PlannedMove& m : plan.moves) {
      RAMP_INFO(
          "rebalancer: max/mean load %.2f > %.2f: moving %s (%.0f ops/s) from node %u to "
          "node %u",
          plan.imbalance_before, threshold, m.id.ToString().c_str(), m.load, m.from, m.to);
      st = client->MigratePartition(m.id, m.to);
      if (!st.ok()) RAMP_WARN("rebalancer: %s", st.ToString().c_str());
    }
  }
}

// ---- the source and the target --------------------------------------------------------------

Status Migrations::Control(const MigrateCtl& m, MigrateCtlReply* out) {
  const PartitionId& p = m.part;
  store::Store* store = ctx_->store;
  switch (m.action) {
    case MigrateAction::kProbe: {
      out->exists = store->HasPartition(p);
      out->owns = ctx_->directory->Owns(p);
      out->page_count = store->PageCount(p);
      out->watermark = store->Watermark(p);
      for (const store::PartitionInfo& i : store->PartitionInfos()) {
        if (i.id == p) out->partition_bytes = i.bytes;
      }
      out->free_bytes = store->stats().free_pages * record::kPageBytes;
      for (const store::PartitionInfo& i : store->PartitionInfos()) {
        if (i.id == p) out->load_mops = static_cast<uint64_t>(i.ops_per_sec * 1000);
      }
      return Status::OK();
    }
    case MigrateAction::kPull: {
      std::shared_ptr<Puller> old;
      {
        std::lock_guard lock(mu_);
        auto it = pullers_.find(p);
        if (it != pullers_.end()) {
          if (!it->second->cancel.load() && it->second->epoch == m.epoch) return Status::OK();
          old = it->second;
          pullers_.erase(it);
        }
      }
      if (old != nullptr) {
        old->cancel.store(true);
        old->Wake();
        if (old->thread.joinable()) old->thread.join();
      }
      if (ctx_->directory->Owns(p)) {
        return Status::InvalidArgument("node " + std::to_string(ctx_->self) + " serves " +
                                       p.ToString() + " already");
      }
      RAMP_RETURN_IF_ERROR(ctx_->directory->Incoming(p, m.epoch));
      ctx_->intents->Expect(p);
      RAMP_RETURN_IF_ERROR(store->BeginCopy(p, static_cast<uint32_t>(m.epoch),
                                            static_cast<double>(m.load_mops) / 1000));
      auto pl = std::make_shared<Puller>();
      pl->part = p;
      pl->source = m.node;
      pl->epoch = m.epoch;
      pl->old_epoch = m.old_epoch;
      std::lock_guard lock(mu_);
      if (stop_.load()) return Status::Unavailable("the server is stopping");
      pullers_[p] = pl;
      pl->thread = std::thread([this, pl] { Pull(pl); });
      return Status::OK();
    }
    case MigrateAction::kPullStatus:
    case MigrateAction::kFinish: {
      std::shared_ptr<Puller> pl;
      {
        std::lock_guard lock(mu_);
        if (auto it = pullers_.find(p); it != pullers_.end() && !it->second->cancel.load()) {
          pl = it->second;
        }
      }
      if (pl == nullptr) {
        out->error = "node " + std::to_string(ctx_->self) + " copies nothing of " + p.ToString() +
                     " (restarted?)";
        return Status::OK();
      }
      std::lock_guard lock(pl->mu);
      if (m.action == MigrateAction::kFinish) {
        pl->finish.store(true);
        pl->cv.notify_all();
      }
      *out = pl->State();
      return Status::OK();
    }
    case MigrateAction::kRelease: {
      RAMP_RETURN_IF_ERROR(ctx_->directory->Release(p, m.node, m.epoch, m.old_epoch));
      // Requests that passed the ownership check before the release are stopped by the
      // partition itself (under its lock): after this, nothing is appended to this copy.
      (void)store->SetServing(p, false);
      // Its write intents go to the new owner (through the home); requests queued for them
      // here are answered MOVED and queue again there.
      ctx_->intents->Export(p, m.node, &out->intents);
      RAMP_INFO("released %s to node %u (epoch %llu, %zu write intents)", p.ToString().c_str(),
                m.node, static_cast<unsigned long long>(m.epoch), out->intents.size());
      Hook("source-after-release");
      return Status::OK();
    }
    case MigrateAction::kIntents: {
      ctx_->intents->Exported(p, &out->intents);
      return Status::OK();
    }
    case MigrateAction::kAdopt: {
      StopPuller(p);
      // The write intents come first: a request that sees the partition served finds them.
      // (A repeated adoption, the first one's reply lost, imports nothing again.)
      if (!ctx_->directory->Owns(p)) ctx_->intents->Import(p, m.intents, m.old_epoch != 0);
      RAMP_RETURN_IF_ERROR(ctx_->directory->Adopt(p, m.epoch));
      (void)store->SetServing(p, true);
      RAMP_INFO("serving %s (epoch %llu)", p.ToString().c_str(),
                static_cast<unsigned long long>(m.epoch));
      return Status::OK();
    }
    case MigrateAction::kDrop: {
      StopPuller(p);
      ctx_->intents->Forget(p);
      if (ctx_->directory->Owns(p)) {
        return Status::InvalidArgument("node " + std::to_string(ctx_->self) + " serves " +
                                       p.ToString() + ": its copy is not dropped");
      }
      store->DropPartition(p);
      RAMP_RETURN_IF_ERROR(store->SyncLog());
      return ctx_->directory->Gone(p);
    }
  }
  return Status::InvalidArgument("unknown MIGRATE_CTL action");
}

void Migrations::Finish(const PartitionId& p, std::function<void(const MigrateCtlReply&)> done) {
  std::shared_ptr<Puller> pl;
  {
    std::lock_guard lock(mu_);
    if (auto it = pullers_.find(p); it != pullers_.end() && !it->second->cancel.load()) {
      pl = it->second;
    }
  }
  MigrateCtlReply r;
  if (pl != nullptr) {
    std::lock_guard lock(pl->mu);
    pl->finish.store(true);
    if (!pl->finished.load() && pl->error.empty() && pl->thread.joinable()) {
      // The puller answers when its final round is over (Pull).
      pl->waiters.push_back(std::move(done));
      pl->cv.notify_all();
      return;
    }
    r = pl->State();
  } else {
    r.error = "node " + std::to_string(ctx_->self) + " copies nothing of " + p.ToString() +
              " (restarted?)";
  }
  done(r);
}

void Migrations::Pull(std::shared_ptr<Puller> pl) {
  PullRounds(pl.get());
  // Whoever waits for the final round hears how it ended.
  std::vector<std::function<void(const MigrateCtlReply&)>> waiters;
  MigrateCtlReply r;
  {
    std::lock_guard lock(pl->mu);
    if (!pl->finished.load() && pl->error.empty()) pl->error = "the copy was stopped";
    r = pl->State();
    waiters.swap(pl->waiters);
  }
  for (auto& w : waiters) w(r);
}

void Migrations::PullRounds(Puller* pl) {
  const PartitionId p = pl->part;
  auto fail = [&](const Status& st) {
    std::lock_guard lock(pl->mu);
    pl->error = st.ToString();
    RAMP_WARN("copy of %s from node %u failed: %s", p.ToString().c_str(), pl->source,
              pl->error.c_str());
  };
  std::unique_ptr<Client> client;
  std::unique_ptr<PageReader> reader;
  Status st = Client::Open(peer_, &client);
  PageReaderOptions ro;
  ro.migration = true;
  if (st.ok()) st = PageReader::Open(client.get(), ro, &reader);
  if (!st.ok()) return fail(st);
  uint32_t page = 0;  // the cursor: records before (page, off) are ingested
  uint32_t off = 0;
  int rounds = 0;
  std::vector<std::string> bufs;
  std::vector<Status> sts;
  auto read = [&](uint32_t first, uint32_t count) {
    std::vector<PageRef> refs;
    for (uint32_t q = first; q < first + count; q++) {
      refs.push_back(PageRef{p, q, static_cast<uint32_t>(pl->old_epoch), record::kPageBytes});
    }
    bufs.assign(count, std::string());
    sts.assign(count, Status::OK());
    return reader->Read(refs, [&](size_t i, const Status& s, const uint8_t* d, uint32_t n) {
      sts[i] = s;
      if (s.ok()) bufs[i].assign(reinterpret_cast<const char*>(d), n);
      return Status::OK();
    });
  };
  while (!stop_.load() && !pl->cancel.load()) {
    const bool final_round = pl->finish.load();
    MigrateCtlReply probe;
    st = CtlVia(client.get(), pl->source, MigrateCtl{MigrateAction::kProbe, p, 0, 0, 0}, &probe);
    if (!st.ok()) return fail(st.Annotate("source node " + std::to_string(pl->source)));
    const uint32_t count = probe.page_count;
    pl->total.store(std::max<uint64_t>(pl->copied.load(), uint64_t{count} * record::kPageBytes));
    uint64_t round_bytes = 0;
    bool round_done = false;
    while (!round_done && page < count && !pl->cancel.load()) {
      const uint32_t base = page;
      const uint32_t n = std::min(kPagesPerRead, count - base);
      if (!(st = read(base, n)).ok()) return fail(st);
      for (uint32_t i = 0; i < n && !round_done;) {
        const uint32_t q = base + i;
        if (sts[i].Is(Status::Code::kNotFound)) {  // retired by compaction meanwhile
          i++;
          if (q == page) {
            page = q + 1;
            off = 0;
          }
          continue;
        }
        if (!sts[i].ok()) return fail(sts[i].Annotate("page " + std::to_string(q)));
        std::string run_bytes = bufs[i];
        record::PageHeader h;
        if (!(st = record::ReadPageHeader(reinterpret_cast<const uint8_t*>(run_bytes.data()),
                                          run_bytes.size(), &h))
                 .ok()) {
          return fail(st.Annotate("page " + std::to_string(q)));
        }
        uint32_t run = h.run_pages;
        if (run > 1) {
          // A large record: its run of pages, read whole.
          const uint32_t have = std::min(run, n - i);
          for (uint32_t k = 1; k < have; k++) run_bytes += bufs[i + k];
          if (have < run) {
            std::vector<std::string> saved = bufs;
            if (!(st = read(q + have, run - have)).ok()) return fail(st);
            for (uint32_t k = 0; k < run - have; k++) {
              if (!sts[k].ok()) return fail(sts[k]);
              run_bytes += bufs[k];
            }
            bufs = std::move(saved);
          }
        }
        const uint32_t from = q == page ? off : 0;
        uint32_t used = 0;
        bool torn = false;
        st = ctx_->store->IngestPage(p, reinterpret_cast<const uint8_t*>(run_bytes.data()),
                                     run_bytes.size(), from, &used, &run, &torn);
        if (!st.ok()) return fail(st);
        if (final_round && torn) {
          return fail(Status::Corruption("page " + std::to_string(q) + " of " + p.ToString() +
                                         " has a record that does not check"));
        }
        if (used > std::max<uint32_t>(from, record::kPageHeaderBytes)) {
          const uint64_t b = used - std::max<uint32_t>(from, record::kPageHeaderBytes);
          round_bytes += b;
          pl->copied.fetch_add(b);
        }
        if (q + run < count && !torn) {
          page = q + run;
          off = 0;
          i += run;
        } else {
          page = q;
          off = used;
          round_done = true;
        }
      }
    }
    rounds++;
    if (rounds == 1) Hook("target-during-copy");
    if (final_round) {
      // Scans that opened at the source keep their snapshot here: PREPAREs at or below its
      // watermark stay refused.
      if (!probe.watermark.zero()) (void)ctx_->store->RaiseWatermark(p, probe.watermark);
      if (!(st = ctx_->store->SyncLog()).ok()) return fail(st);
      Hook("target-after-finish");
      pl->finished.store(true);
      RAMP_INFO("copy of %s from node %u complete: %llu bytes of records in %d rounds",
                p.ToString().c_str(), pl->source,
                static_cast<unsigned long long>(pl->copied.load()), rounds);
      return;
    }
    if (round_bytes < kCaughtUpBytes) {
      // Caught up: the next round after a short wait, or at once when FINISH comes.
      pl->caught_up.store(true);
      std::unique_lock lock(pl->mu);
      pl->cv.wait_for(lock, std::chrono::milliseconds(2),
                      [&] { return stop_.load() || pl->cancel.load() || pl->finish.load(); });
    }
  }
}

}  // namespace ramp::server
