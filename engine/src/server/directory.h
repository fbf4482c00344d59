// The directory of partition placement (DESIGN §7, paper 004 §3). Every partition has a home
// server (HomeOf: hash mod N, static) that holds its entry: owner, epoch, sharers (clients
// that cached the entry), and the migration in flight if any (the migrating flag). Placement
// starts at owner = home, epoch 1; ownership is always asked of the directory.
//
// Besides the entries of its home partitions, a server keeps an override per partition
// whose ownership here differs from that default: adopted (owned after a migration),
// released (given away, the copy kept until the home says it may go), incoming (a copy
// being filled by a migration) or gone (given away and dropped: only where it went).
//
// With a data directory all of it (entries, overrides, migrations in flight at this home)
// is written to <data>/placement on every change (atomic rename, synced) before the change
// is acknowledged, and read back at start: ownership survives restarts of every party.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "protocol/messages.h"
#include "ramp/types.h"
#include "server/deferred_reply.h"

namespace ramp::store {
class Env;
}

namespace ramp::server {

// Phases of a migration as its home records them (protocol::MigrationPhase on the wire).
using protocol::MigrationPhase;

struct MigrationState {
  PartitionId part;
  uint32_t source = 0;
  uint32_t target = 0;
  MigrationPhase phase = MigrationPhase::kCopying;
  uint64_t old_epoch = 0;
  uint64_t new_epoch = 0;
  uint64_t started_unix_ms = 0;
  uint64_t load_mops = 0;     // the partition's load at the source (not persisted)
  uint64_t bytes_copied = 0;  // progress, not persisted
  uint64_t bytes_total = 0;
  std::string error;  // why it failed or rolled back
};

class Directory {
 public:
  // homes: nodes 0..homes-1 are the partitions' homes (0: all node_count of them).
  Directory(uint32_t self, uint32_t node_count, uint32_t homes = 0)
      : self_(self), homes_(homes != 0 ? homes : node_count), node_count_(node_count) {}

  // Reads <data_dir>/placement when there (empty data_dir: memory only, nothing persisted).
  Status Open(store::Env* env, const std::string& data_dir);

  uint32_t self() const { return self_; }
  uint32_t node_count() const { return node_count_.load(std::memory_order_relaxed); }
  uint32_t homes() const { return homes_; }
  // Nodes added to (or removed from) the cluster file of a running server; homes stay.
  void SetNodeCount(uint32_t n) { node_count_.store(n, std::memory_order_relaxed); }
  bool IsHome(const PartitionId& p) const { return HomeOf(p, homes_) == self_; }
  // Whether this home's directory names `node` as the owner of a partition or as a party
  // of a migration in flight; *what says which.
  bool Names(uint32_t node, std::string* what) const;

  // Whether this server serves the partition now; when not, *hint is where to go (the
  // owner if this server knows it, the home otherwise) and *epoch the epoch of that hint.
  bool Owns(const PartitionId& p, uint32_t* hint, uint64_t* epoch) const;
  bool Owns(const PartitionId& p) const {
    uint32_t h;
    uint64_t e;
    return Owns(p, &h, &e);
  }
  // Page reads of a partition at an epoch: served while owned at that epoch, and by a
  // server that released it, at the epoch it had, until it is dropped (the target of the
  // migration reads the last pages after the source stopped serving).
  bool ServesPagesAt(const PartitionId& p, uint64_t epoch) const;

  // At the home: the entry, recording the asking client as a sharer.
  protocol::Placement Lookup(const PartitionId& p, uint64_t sharer);
  std::vector<uint64_t> Sharers(const PartitionId& p) const;
  protocol::Placement EntryOf(const PartitionId& p) const;  // without recording a sharer
  // Where the home reaches a sharer: the session its last LOOKUP came on (kept in memory
  // only; after a restart of the home its sharers LOOKUP their cached partitions again when
  // their connection to it reopens: Client::Impl::Reregister).
  void NoteRoute(uint64_t sharer, std::shared_ptr<const DeferredReply::PostFn> post,
                 uint64_t session);
  // At a cutover: PLACEMENT with p's entry to every sharer of p that has a route. Best
  // effort and asynchronous: handed to the workers that own the sessions, never waited
  // for; a sharer whose connection is gone is skipped. Returns how many were sent.
  size_t PushPlacement(const PartitionId& p, uint64_t clock);

  // ---- the home: migrations ------------------------------------------------------------
  // Records a new migration (phase kCopying). Refused (Conflict) while another one of
  // the partition is in flight.
  Status BeginMigration(const MigrationState& m);
  // Moves a migration to a phase (persisted). kCommitted also sets the entry to the target
  // at new_epoch; kRolledBack to the source at new_epoch + 1 when the source was released
  // (rolled_to_epoch) or leaves the entry as it was otherwise. Terminal phases (kDone,
  // kRolledBack, kFailed) leave the in-flight set and are kept in a short history.
  Status SetPhase(const PartitionId& p, MigrationPhase phase, const std::string& error = {},
                  uint64_t rolled_to_epoch = 0);
  void SetProgress(const PartitionId& p, uint64_t copied, uint64_t total);
  bool Migrating(const PartitionId& p) const;
  bool FindMigration(const PartitionId& p, MigrationState* out) const;
  std::vector<MigrationState> InFlight() const;
  // In flight first, then the most recent finished ones.
  std::vector<MigrationState> Migrations() const;

  // ---- owners: taking and giving partitions (each persisted before it returns) -------
  Status Adopt(const PartitionId& p, uint64_t epoch);
  Status Release(const PartitionId& p, uint32_t new_owner, uint64_t new_epoch, uint64_t old_epoch);
  Status Incoming(const PartitionId& p, uint64_t epoch);
  // The copy here is gone: a released partition keeps only where it went; an incoming copy
  // is forgotten.
  Status Gone(const PartitionId& p);
  // What start-up does with a copy found in the store: serve it, keep it without serving
  // (released, incoming), or drop it (gone).
  enum class CopyFate { kServe, kKeep, kDrop };
  CopyFate FateOf(const PartitionId& p) const;

 private:
  enum class Held : uint8_t { kAdopted = 1, kReleased = 2, kIncoming = 3, kGone = 4 };
  struct Entry {
    uint32_t owner = 0;
    uint64_t epoch = 1;
    std::set<uint64_t> sharers;
  };
  struct Override {
    Held held = Held::kAdopted;
    uint32_t owner = 0;      // released, gone: where it went
    uint64_t epoch = 0;      // adopted, incoming: ours; released, gone: the new owner's
    uint64_t old_epoch = 0;  // released: the epoch it had here
  };
  bool OwnsLocked(const PartitionId& p, uint32_t* hint, uint64_t* epoch) const;
  Status PersistLocked() const;  // caller holds mu_ exclusively

  const uint32_t self_;
  const uint32_t homes_;
  std::atomic<uint32_t> node_count_;
  store::Env* env_ = nullptr;
  std::string path_;  // empty: not persisted
  mutable std::shared_mutex mu_;
  // Entries exist only for partitions this server is home of and that were looked up or
  // moved; absent entries mean owner = home, epoch 1.
  std::unordered_map<PartitionId, Entry, PartitionIdHash> entries_;
  std::unordered_map<PartitionId, Override, PartitionIdHash> overrides_;
  std::map<PartitionId, MigrationState> migrations_;  // in flight, at this home
  std::vector<MigrationState> history_;               // finished, newest last
  struct Route {
    std::shared_ptr<const DeferredReply::PostFn> post;
    uint64_t session = 0;
  };
  std::mutex routes_mu_;
  std::unordered_map<uint64_t, Route> routes_;  // by sharer (client id)
};

}  // namespace ramp::server
