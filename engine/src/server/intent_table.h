// Write intents (DESIGN §5): row locks that SQL writers take on a key at its partition when
// they read the row for an UPDATE, DELETE or SELECT ... FOR UPDATE/SHARE. Unlike the strict
// 2PL baseline (lock_table.h) a request that conflicts may wait: it is queued (FIFO) and its
// reply is deferred until the holders release the key (at their commit or abort), so no
// worker ever blocks. The modes and their conflicts are PostgreSQL's row-lock modes.
// Readers never look here: RAMP reads stay non-blocking.
//
// Deadlocks are found by the waiters' clients (client/intents.cpp): after a wait of
// deadlock_timeout they follow the wait-for edges that every server reports (WaitsFor) and
// the youngest transaction of a cycle gives way. Intents of a client whose last connection
// to this server closed are released (ReleaseClient): nothing stays locked by a vanished
// backend.
//
// Intents move with their partition (DESIGN §7): at the release the source exports the
// partition's holders (Export; its queued requests are answered MOVED and queue again at the
// new owner), they travel through the home (MIGRATE_CTL) and the new owner imports them
// before it serves (Import). The holder's client still ends its transaction (or closes its
// last connection) where it asked, at the source: the source passes that on to the new owner
// (ForwardFn, INTENT_FORWARD), which may hear of it before the import (Expect remembers it).
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "protocol/messages.h"
#include "ramp/types.h"
#include "server/deferred_reply.h"

namespace ramp::server {

class IntentTable {
 public:
  using Owner = protocol::IntentOwner;

  // Builds the grant reply of a queued request (request header, key) when it is granted:
  // the request handler reads the key's latest committed version for it.
  using GrantFn = std::function<void(const protocol::Header& request, const PartitionId& part,
                                     std::string_view key, std::string* reply)>;
  // Builds the MOVED reply of a queued request whose partition left this server.
  using MovedFn = std::function<void(const protocol::Header& request, const PartitionId& part,
                                     std::string* reply)>;
  // Passes the ends of transactions whose intents on a partition moved to `node` on to it
  // (INTENT_FORWARD; must not block: called from workers).
  using Released = std::vector<std::pair<Owner, PartitionId>>;
  using ForwardFn = std::function<void(uint32_t node, Released released)>;
  explicit IntentTable(GrantFn grant, MovedFn moved = {}, ForwardFn forward = {})
      : grant_(std::move(grant)), moved_(std::move(moved)), forward_fn_(std::move(forward)) {}

  // kMoved: the partition's intents left this server (Export); the caller answers MOVED.
  enum class Outcome { kGranted, kHeld, kQueued, kMoved };
  // Takes an intent on (part, key) for owner. kGranted: held now (also when the owner held
  // it already in a mode at least as strong). Otherwise *holders gets who is in the way and,
  // when wait is set, the request is queued: `reply` is sent (built by GrantFn) once it is
  // granted. A request of an owner already queued for the key replaces its queued reply (a
  // client re-sends after a wait slice).
  Outcome Acquire(const Owner& owner, uint64_t priority, const PartitionId& part,
                  std::string_view key, uint8_t mode, bool wait, const protocol::Header& request,
                  DeferredReply reply, std::vector<protocol::IntentHolder>* holders);
  // Withdraws the owner's queued request for the key (a cancelled wait); holdings stay.
  void Withdraw(const Owner& owner, const PartitionId& part, std::string_view key);
  // Releases every intent of the owner and withdraws its queued requests; waiters that can
  // now go are granted.
  void Release(const Owner& owner);
  // The same for every owner of a client (its last connection closed).
  void ReleaseClient(uint64_t client);

  // ---- migration -----------------------------------------------------------------------
  // Source, at the release: the partition's holders leave this table (*out; a retried
  // release gets the same, less those released since), requests queued for its keys are
  // answered MOVED and new ones get kMoved. From then on the end of an exported holder's
  // transaction here (Release, ReleaseClient) is forwarded to `target`.
  void Export(const PartitionId& part, uint32_t target, std::vector<protocol::MovedIntent>* out);
  // What Export gave of the partition and is still held (the home asks again after its
  // restart).
  void Exported(const PartitionId& part, std::vector<protocol::MovedIntent>* out) const;
  // Target, when its copy starts (a migration's pull): releases forwarded for the partition
  // before Import are remembered, and Import skips those holders.
  void Expect(const PartitionId& part);
  // Before this server serves the partition (the target's adoption; the source's again after
  // a rollback): takes the holders `in`. take_back (a rollback): also those this server
  // exported at the release and that did not end here since. Otherwise what it exported of
  // the partition before (it moves back here) is forgotten: `in`, from the owner since, is
  // what is held now.
  void Import(const PartitionId& part, const std::vector<protocol::MovedIntent>& in,
              bool take_back);
  // This server's copy of the partition is dropped: forgets what Expect remembered.
  void Forget(const PartitionId& part);
  // INTENT_FORWARD: the owner's transaction ended; its intents on part moved here.
  void ReleaseForwarded(const Owner& owner, const PartitionId& part);
  // Who the owner waits for here: the holders, and the requests queued ahead of it, that
  // conflict with what it asked for.
  void WaitsFor(const Owner& owner, std::vector<protocol::IntentHolder>* out) const;

  size_t locked_keys() const;
  size_t waiters() const;
  size_t exported() const;  // holders exported and not yet known to have ended

  static bool Conflicts(uint8_t a, uint8_t b);

 private:
  struct Holder {
    Owner owner;
    uint64_t priority = 0;
    uint8_t mode = 0;
  };
  struct Waiter {
    Owner owner;
    uint64_t priority = 0;
    uint8_t mode = 0;
    protocol::Header request;
    DeferredReply reply;
  };
  struct Lock {
    PartitionId part;
    std::string key;
    std::vector<Holder> holders;
    std::deque<Waiter> waiters;
  };
  struct OwnerHash {
    size_t operator()(const Owner& o) const noexcept { return o.client * 31 + o.txn; }
  };
  // A grant to send once the table's mutex is released.
  struct Grant {
    protocol::Header request;
    PartitionId part;
    std::string key;
    DeferredReply reply;
  };

  static std::string LockName(const PartitionId& part, std::string_view key);
  // Grants queued requests of the lock, in order, while they fit with the holders.
  void GrantWaiters(Lock& lock, std::vector<Grant>* grants);
  // The end of an exported holder's transaction, to pass on to node.
  struct Forwarded {
    uint32_t node = 0;
    Owner owner;
    PartitionId part;
  };
  void ReleaseLocked(const Owner& owner, std::vector<Grant>* grants,
                     std::vector<Forwarded>* forwards);
  // Takes the owner's exported holders off the books: what to forward, per partition.
  void TakeForwards(const Owner& owner, std::vector<Forwarded>* forwards);
  void Send(std::vector<Grant>& grants);
  void Forward(const std::vector<Forwarded>& forwards);
  // Removes one lock name from the owner's list.
  void Disown(const Owner& owner, const std::string& name);

  GrantFn grant_;
  MovedFn moved_;
  ForwardFn forward_fn_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Lock> locks_;
  // The keys each owner holds or waits for.
  std::unordered_map<Owner, std::vector<std::string>, OwnerHash> owned_;
  // Migration: partitions whose intents left (Export), what left and where it went (until
  // its transaction ends here), the partitions each such owner has there, and, per expected
  // partition (Expect), the owners whose end was forwarded before the import.
  struct ExportedSet {
    uint32_t target = 0;
    std::vector<protocol::MovedIntent> intents;
  };
  std::unordered_set<PartitionId, PartitionIdHash> closed_;
  std::unordered_map<PartitionId, ExportedSet, PartitionIdHash> exported_;
  std::unordered_map<Owner, std::vector<PartitionId>, OwnerHash> exported_by_owner_;
  std::unordered_map<PartitionId, std::vector<Owner>, PartitionIdHash> early_;
};

}  // namespace ramp::server
