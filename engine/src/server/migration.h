// Live migration of partitions (DESIGN §7 "As built"). Three roles, any two of which may be
// the same server:
//  - the home of the partition drives it (one thread per migration) and holds its durable
//    state in the directory: copying -> cutover -> committed -> done, or rolled back;
//  - the target pulls the partition's log pages from the source through remote page I/O
//    (READ_PAGES, one-sided writes into the target's buffers) while the source keeps
//    serving reads and writes, ingesting every record (versions, prepared ones, commit and
//    abort marks, tombstones, old versions) as recovery would, in rounds until a round finds
//    (almost) nothing new;
//  - the source stops serving at the cutover (MOVED from then on, valid bits off for GET*
//    readers); the target takes the last pages, syncs, and the home commits the move; the
//    target then serves at epoch + 1 and the source drops its copy (its memory is reused
//    only after the GC grace, when one-sided readers and page reads have drained).
// Writes pause only between the source's release and the target's adoption.
//
// A crash anywhere leaves exactly one owner: before the commit point the home rolls back
// (the source serves again, at a new epoch; the target drops its copy), after it the home
// completes the move; every step it sends is idempotent and retried until it is applied
// (also after the home's own restart: Reconcile).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "protocol/messages.h"
#include "ramp/client.h"
#include "server/deferred_reply.h"
#include "server/directory.h"
#include "server/server_context.h"

namespace ramp::server {

class Migrations {
 public:
  // peer: options to reach the other servers (a server talks to its peers as a client).
  // crash_at: test hook, a step name at which this process kills itself (SIGKILL).
  Migrations(ServerContext* ctx, ClientOptions peer, std::string crash_at);
  ~Migrations();

  // Start-up: finishes or rolls back the migrations this home had in flight.
  void Reconcile();
  void Stop();

  // MIGRATE at the home: checks the request (unknown node, to itself, already migrating)
  // at once; the rest (source and target reachable, the partition exists, room at the
  // target) is checked by the driver thread, which then sends the reply (OK: started).
  void Start(const protocol::MigrateRequest& req, const protocol::Header& h, DeferredReply reply);
  // MIGRATE_CTL at the source or the target.
  Status Control(const protocol::MigrateCtl& m, protocol::MigrateCtlReply* out);
  // MIGRATE_CTL FINISH at the target: the puller takes the last pages at once and syncs;
  // done (called once, from any thread) gets the copy's state when that is over or failed,
  // so that the home, whose cutover holds writes, hears of it without polling.
  void Finish(const PartitionId& p, std::function<void(const protocol::MigrateCtlReply&)> done);

  // The test hook (crash_at).
  void Hook(const char* step) const;

  // Passes the ends of transactions whose intents moved to `node` on to it (INTENT_FORWARD,
  // IntentTable::ForwardFn): queued for a thread of their own, never waited for.
  void ForwardIntentEnds(uint32_t node, IntentTable::Released released);

  // Starts the hot-partition rebalancer loop (ramp/rebalance.h) on its own thread: every
  // interval, if this is the lowest-numbered server that answers, it plans and makes the
  // moves one by one.
  void StartRebalancer(int interval_ms, double threshold, int cooldown_ms);

 private:
  void StopPuller(const PartitionId& p);
  struct Puller;
  void Drive(protocol::MigrateRequest req, protocol::Header h, DeferredReply reply);
  Status Check(const protocol::MigrateRequest& req, MigrationState* m);
  void Run(MigrationState m);  // from kCopying on
  using Clock = std::chrono::steady_clock;
  // started, paused: when the move started and when writes stopped (logged), if known.
  // intents: the holders the source exported at its release (nullptr: not known, after the
  // home's restart; the source is asked again).
  void Complete(const MigrationState& m, const Clock::time_point* started = nullptr,
                const Clock::time_point* paused = nullptr,
                const std::vector<protocol::MovedIntent>* intents = nullptr);
  void RollBack(const MigrationState& m, const std::string& why, bool source_released);
  // One step at a server, once / until applied (false: stopping).
  Status Ctl(uint32_t node, const protocol::MigrateCtl& m, protocol::MigrateCtlReply* out);
  bool CtlUntilApplied(uint32_t node, const protocol::MigrateCtl& m);
  void Spawn(std::function<void()> f);
  void Pull(std::shared_ptr<Puller> p);
  void PullRounds(Puller* p);
  void RebalanceLoop(int interval_ms, double threshold, int cooldown_ms);
  bool Sleep(int ms);
  void ForwardLoop();

  ServerContext* const ctx_;
  const ClientOptions peer_;
  const std::string crash_at_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  struct Task {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<Task> threads_;
  std::map<PartitionId, std::shared_ptr<Puller>> pullers_;  // target side
  // ForwardIntentEnds: by node, sent by forward_thread_ (started at the first use).
  std::mutex forward_mu_;
  std::condition_variable forward_cv_;
  std::map<uint32_t, IntentTable::Released> forward_queue_;
  std::thread forward_thread_;
};

}  // namespace ramp::server
