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
#include <string>
#include <utility>

#include "protocol/messages.h"
#include "ramp/client.h"
#include "ramp/status.h"
#include "store/store.h"

namespace ramp::server {

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
  // Early asks so far, per (transaction, partition) still prepared.
  std::map<std::pair<Timestamp, PartitionId>, int> early_asks_;
};

}  // namespace ramp::server
