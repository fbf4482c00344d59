// The termination protocol (DESIGN §5): a transaction left prepared past a timeout (its
// client vanished between PREPARE and COMMIT, or a COMMIT was lost in a crash) is resolved
// by the server holding it, by asking the other partitions the transaction wrote:
//  - one of them committed it, or every one has it prepared: commit here;
//  - one aborted it, or one never saw it (and is fenced so that it never will: a late
//    PREPARE of that timestamp is refused there): abort here;
//  - otherwise (a sibling unreachable, or a PREPARE arriving while we ask): ask again later.
// "Every sibling prepared" means every PREPARE succeeded, so the client may have committed;
// it cannot have aborted unless it gave up on a PREPARE reply, which it does within its own
// timeout: the termination timeout must exceed the clients' (the default is 3x).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "protocol/messages.h"
#include "ramp/client.h"
#include "ramp/status.h"
#include "store/store.h"

namespace ramp::server {

// Which clients have a connection open to one server: the workers count greeted sessions
// per client id (worker.cpp), the terminator learns from it which clients closed their last
// connection to this server. One per server, found by its store (worker and terminator
// both know it, and two servers in one process never share one).
class ClientPresence {
 public:
  static std::shared_ptr<ClientPresence> For(const store::Store* store);
  static void Forget(const store::Store* store);

  void Connected(uint64_t client);
  void Disconnected(uint64_t client);
  bool IsConnected(uint64_t client) const;
  // Clients whose last connection to this server closed since the last call.
  std::vector<uint64_t> TakeGone();

 private:
  mutable std::mutex mu_;
  std::unordered_map<uint64_t, int> open_;  // client id -> connections open
  std::vector<uint64_t> gone_;
};

class Terminator {
 public:
  // client: options to reach the cluster (a server talks to its peers as a client).
  Terminator(store::Store* store, ClientOptions client, int timeout_ms);
  ~Terminator();

  struct Counts {
    uint64_t committed = 0;
    uint64_t aborted = 0;
    uint64_t undecided = 0;  // asked again later
  };
  // Resolves what has been prepared longer than the timeout; before that, what has been
  // prepared longer than kEarlyGraceMs and that a sibling already decided (its client died
  // in the middle of COMMIT or ABORT): asked a few times, never fenced, never committed on
  // "every sibling prepared" (the client may still abort it).
  Counts RunOnce(uint64_t now_ms);

  static constexpr uint64_t kEarlyGraceMs = 1000;
  // How long after its client closed its last connection here a transaction is asked about
  // at every round (the timeout pass has it afterwards in any case).
  static constexpr uint64_t kGoneAskMs = 10000;
  static constexpr int kEarlyAsks = 3;

  // Start-up resolution (in_doubt.h) of one transaction recovered prepared: decided at once
  // when a sibling committed or aborted it (or never saw it: fenced, then aborted). When
  // every sibling holds it prepared, it commits only once its timestamp is older than the
  // termination timeout: until then its client may still abort it (it gave up on the
  // PREPARE reply that this server's crash swallowed), which the timeout rule excludes.
  // Returns true when the transaction is decided here (also by someone else meanwhile).
  bool ResolveRecovered(const store::PendingTxn& txn, std::string* why_not);

 private:
  enum class Outcome { kCommit, kAbort, kLater };
  Status Decide(const store::PendingTxn& txn, bool commit_if_all_prepared, Outcome* out);
  // Applies a decision to the partition (and syncs it); false if that failed.
  bool Apply(const store::PendingTxn& txn, Outcome outcome, const char* why);
  Status Ask(const Timestamp& ts, const std::vector<PartitionId>& parts, bool fence,
             std::vector<protocol::TxnState>* states);

  store::Store* const store_;
  const ClientOptions options_;
  const int timeout_ms_;
  std::unique_ptr<Client> client_;
  // Resolves the prepared transactions of clients that closed every connection to this
  // server (see terminator.cpp for what may and may not be decided then).
  void ResolveGone(uint64_t now_ms, Counts* counts);

  // Clients gone from this server -> when we learnt it (steady ms).
  std::map<uint64_t, uint64_t> gone_;
  std::shared_ptr<ClientPresence> presence_;
  // Early asks so far, per (transaction, partition) still prepared.
  std::map<std::pair<Timestamp, PartitionId>, int> early_asks_;
};

}  // namespace ramp::server
