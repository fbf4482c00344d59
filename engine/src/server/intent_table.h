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
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
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
  explicit IntentTable(GrantFn grant) : grant_(std::move(grant)) {}

  enum class Outcome { kGranted, kHeld, kQueued };
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
  // Who the owner waits for here: the holders, and the requests queued ahead of it, that
  // conflict with what it asked for.
  void WaitsFor(const Owner& owner, std::vector<protocol::IntentHolder>* out) const;

  size_t locked_keys() const;
  size_t waiters() const;

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
  void ReleaseLocked(const Owner& owner, std::vector<Grant>* grants);
  void Send(std::vector<Grant>& grants);

  GrantFn grant_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Lock> locks_;
  // The keys each owner holds or waits for.
  std::unordered_map<Owner, std::vector<std::string>, OwnerHash> owned_;
};

}  // namespace ramp::server
