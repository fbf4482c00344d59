#include "server/terminator.h"

#include <map>

#include "client/client_impl.h"
#include "protocol/messages.h"
#include "ramp/hlc.h"
#include "ramp/log.h"

namespace ramp::server {

using protocol::TxnState;

namespace {
std::mutex presence_mu;
std::map<const store::Store*, std::shared_ptr<ClientPresence>>& Presences() {
  static auto* m = new std::map<const store::Store*, std::shared_ptr<ClientPresence>>();
  return *m;
}
}  // namespace

std::shared_ptr<ClientPresence> ClientPresence::For(const store::Store* store) {
  std::lock_guard lock(presence_mu);
  auto& p = Presences()[store];
  if (p == nullptr) p = std::make_shared<ClientPresence>();
  return p;
}

void ClientPresence::Forget(const store::Store* store) {
  std::lock_guard lock(presence_mu);
  Presences().erase(store);
}

void ClientPresence::Connected(uint64_t client) {
  std::lock_guard lock(mu_);
  ++open_[client];
}

void ClientPresence::Disconnected(uint64_t client) {
  std::lock_guard lock(mu_);
  auto it = open_.find(client);
  if (it == open_.end()) return;
  if (--it->second > 0) return;
  open_.erase(it);
  gone_.push_back(client);
}

bool ClientPresence::IsConnected(uint64_t client) const {
  std::lock_guard lock(mu_);
  return open_.count(client) != 0;
}

std::vector<uint64_t> ClientPresence::TakeGone() {
  std::lock_guard lock(mu_);
  std::vector<uint64_t> out;
  out.swap(gone_);
  return out;
}

Terminator::Terminator(store::Store* store, ClientOptions client, int timeout_ms)
    : store_(store),
      options_(std::move(client)),
      timeout_ms_(timeout_ms),
      presence_(ClientPresence::For(store)) {}

Terminator::~Terminator() {
  ClientPresence::Forget(store_);
}

Status Terminator::Ask(const Timestamp& ts, const std::vector<PartitionId>& parts, bool fence,
                       std::vector<TxnState>* states) {
  if (client_ == nullptr) RAMP_RETURN_IF_ERROR(Client::Open(options_, &client_));
  Client::Impl& c = *client_->impl();
  RAMP_RETURN_IF_ERROR(c.ResolveOwners(parts));
  std::map<uint32_t, std::vector<size_t>> by_owner;
  for (size_t i = 0; i < parts.size(); ++i) by_owner[c.OwnerOf(parts[i])].push_back(i);
  states->assign(parts.size(), TxnState::kUnknown);
  for (const auto& [node, idx] : by_owner) {
    protocol::TxnStateRequest req;
    req.ts = ts;
    req.fence = fence ? 1 : 0;
    for (size_t i : idx) req.partitions.push_back(parts[i]);
    std::string body;
    protocol::Encode(req, &body);
    PendingCall reply;
    Status st = c.CallAndWait(node, ChannelKind::kRpc, protocol::Op::kTxnState,
                              static_cast<uint32_t>(req.partitions.size()), body, &reply);
    protocol::TxnStateReply r;
    if (st.ok()) st = protocol::Decode(reply.body(), reply.header.count, &r);
    if (st.ok() && r.states.size() != idx.size()) st = Status::Corruption("TXN_STATE reply size");
    if (!st.ok()) {
      // A fresh client next time: the peer may have restarted.
      client_.reset();
      return st.Annotate("TXN_STATE to node " + std::to_string(node));
    }
    for (size_t k = 0; k < idx.size(); ++k) (*states)[idx[k]] = r.states[k];
  }
  return Status::OK();
}

Status Terminator::Decide(const store::PendingTxn& txn, bool commit_if_all_prepared, Outcome* out) {
  *out = Outcome::kLater;
  std::vector<PartitionId> others;
  for (const auto& p : txn.siblings) {
    if (p != txn.partition) others.push_back(p);
  }
  std::vector<TxnState> states;
  RAMP_RETURN_IF_ERROR(Ask(txn.ts, others, false, &states));
  bool all_prepared = true;
  std::vector<PartitionId> unknown;
  for (size_t i = 0; i < states.size(); ++i) {
    switch (states[i]) {
      case TxnState::kCommitted: *out = Outcome::kCommit; return Status::OK();
      case TxnState::kAborted: *out = Outcome::kAbort; return Status::OK();
      case TxnState::kPrepared: break;
      case TxnState::kUnknown:
        all_prepared = false;
        unknown.push_back(others[i]);
        break;
    }
  }
  if (all_prepared) {
    if (commit_if_all_prepared) *out = Outcome::kCommit;
    return Status::OK();
  }
  // Some sibling never saw the PREPARE: fence it there, then it can never commit.
  RAMP_RETURN_IF_ERROR(Ask(txn.ts, unknown, true, &states));
  for (TxnState s : states) {
    // Unknown now means "fenced by us"; aborted: fenced by someone else or aborted.
    if (s == TxnState::kUnknown || s == TxnState::kAborted) {
      *out = Outcome::kAbort;
      return Status::OK();
    }
    if (s == TxnState::kCommitted) {
      *out = Outcome::kCommit;
      return Status::OK();
    }
  }
  return Status::OK();  // the PREPAREs arrived meanwhile: ask again next round
}

bool Terminator::Apply(const store::PendingTxn& txn, Outcome outcome, const char* why) {
  const std::vector<PartitionId> here{txn.partition};
  Status st;
  if (outcome == Outcome::kCommit) st = store_->Commit(txn.ts, here);
  if (outcome == Outcome::kAbort) st = store_->Abort(txn.ts, here);
  if (outcome != Outcome::kLater && st.ok()) st = store_->SyncLog();
  if (outcome == Outcome::kLater || !st.ok()) return false;
  RAMP_INFO("termination: %s %s in %s (%s)", outcome == Outcome::kCommit ? "committed" : "aborted",
            txn.ts.ToString().c_str(), txn.partition.ToString().c_str(), why);
  return true;
}

// A client that closed its last connection to this server (process killed, Client
// destroyed, connections reset) gets its prepared transactions here resolved at once, by
// the rules of Decide without "every sibling prepared -> commit":
//  - committed at a sibling: the client decided to commit; commit here.
//  - aborted at a sibling: it decided to abort (or a terminator fenced it); abort here.
//  - a sibling never saw the PREPARE: fence it there, so that a PREPARE still on its way is
//    refused and the client can never see every PREPARE succeed, hence never commit; then
//    abort here. This needs no proof that the client is gone: it is what the timeout pass
//    does too. Closed connections only tell us it is worth doing now.
//  - prepared at every sibling: left to the timeout. Closed connections HERE do not prove
//    the client will not abort: its connections to the other servers may still be open (it
//    may be alive and about to reconnect: a PREPARE reply it gave up on makes it reset the
//    channel and send ABORTs), and even a killed process may have ABORTs sitting in the
//    other servers' socket buffers, applied after we asked. Nothing fences a sibling that
//    holds the transaction prepared, so committing here could race an ABORT there: only the
//    timeout rule (the client gave up long ago) makes that commit safe.
// A client that reconnects (same id) is skipped from then on: the rules above are safe in
// any case, but a live client should decide its own transactions.
void Terminator::ResolveGone(uint64_t now_ms, Counts* counts) {
  for (uint64_t client : presence_->TakeGone()) gone_.emplace(client, now_ms);
  if (gone_.empty()) return;
  std::map<uint64_t, std::vector<store::PendingTxn>> mine;
  for (store::PendingTxn& txn : store_->PendingOlderThan(UINT64_MAX)) {
    auto it = gone_.find(txn.ts.client);
    if (it != gone_.end()) mine[txn.ts.client].push_back(std::move(txn));
  }
  for (auto it = gone_.begin(); it != gone_.end();) {
    const uint64_t client = it->first;
    auto txns = mine.find(client);
    if (txns == mine.end() || presence_->IsConnected(client) || now_ms - it->second > kGoneAskMs) {
      it = gone_.erase(it);  // nothing (left) to decide, back, or the timeout's business
      continue;
    }
    bool left = false;
    for (const store::PendingTxn& txn : txns->second) {
      Outcome outcome = Outcome::kLater;
      Status st = Decide(txn, /*commit_if_all_prepared=*/false, &outcome);
      if (!st.ok()) {
        RAMP_DEBUG("termination of %s in %s (client gone) postponed: %s", txn.ts.ToString().c_str(),
                   txn.partition.ToString().c_str(), st.ToString().c_str());
      }
      if (Apply(txn, outcome, "its client closed every connection to this server")) {
        ++(outcome == Outcome::kCommit ? counts->committed : counts->aborted);
        continue;
      }
      left = true;
      if (!st.ok()) break;  // a sibling does not answer: each ask would wait; next round
    }
    if (left) {
      ++it;
    } else {
      it = gone_.erase(it);
    }
  }
}

Terminator::Counts Terminator::RunOnce(uint64_t now_ms) {
  Counts counts;
  ResolveGone(now_ms, &counts);
  // Early: a transaction that a sibling already committed or aborted is decided; it need not
  // wait for the timeout (its client died between two COMMITs, or a server missed one).
  if (now_ms >= kEarlyGraceMs) {
    std::map<std::pair<Timestamp, PartitionId>, int> asks;
    const uint64_t timeout_cutoff =
        now_ms >= static_cast<uint64_t>(timeout_ms_) ? now_ms - timeout_ms_ : 0;
    for (const store::PendingTxn& txn : store_->PendingOlderThan(now_ms - kEarlyGraceMs)) {
      if (txn.prepared_at_ms < timeout_cutoff) continue;  // the timeout pass below has it
      const auto key = std::make_pair(txn.ts, txn.partition);
      auto it = early_asks_.find(key);
      const int asked = it == early_asks_.end() ? 0 : it->second;
      asks[key] = asked;
      if (asked >= kEarlyAsks) continue;
      asks[key] = asked + 1;
      std::vector<PartitionId> others;
      for (const auto& p : txn.siblings) {
        if (p != txn.partition) others.push_back(p);
      }
      std::vector<TxnState> states;
      if (others.empty()) continue;
      // A sibling that does not answer makes every ask wait: leave the rest for next round.
      if (!Ask(txn.ts, others, /*fence=*/false, &states).ok()) break;
      Outcome outcome = Outcome::kLater;
      for (TxnState st : states) {
        if (st == TxnState::kCommitted) outcome = Outcome::kCommit;
        if (st == TxnState::kAborted && outcome == Outcome::kLater) outcome = Outcome::kAbort;
      }
      if (Apply(txn, outcome, "a sibling had decided it")) {
        asks.erase(key);
        ++(outcome == Outcome::kCommit ? counts.committed : counts.aborted);
      }
    }
    early_asks_.swap(asks);  // forgets the transactions decided since
  }
  if (now_ms < static_cast<uint64_t>(timeout_ms_)) return counts;
  for (const store::PendingTxn& txn : store_->PendingOlderThan(now_ms - timeout_ms_)) {
    Outcome outcome = Outcome::kLater;
    Status st = Decide(txn, /*commit_if_all_prepared=*/true, &outcome);
    if (!st.ok()) {
      RAMP_DEBUG("termination of %s in %s postponed: %s", txn.ts.ToString().c_str(),
                 txn.partition.ToString().c_str(), st.ToString().c_str());
    }
    if (!Apply(txn, outcome, "its client left it prepared")) {
      ++counts.undecided;
      continue;
    }
    ++(outcome == Outcome::kCommit ? counts.committed : counts.aborted);
  }
  return counts;
}

bool Terminator::ResolveRecovered(const store::PendingTxn& txn, std::string* why_not) {
  // Decided meanwhile (a COMMIT or ABORT of its client, the timeout termination)?
  if (store_->QueryTxn(txn.ts, txn.partition, false) != store::TxnState::kPrepared) return true;
  // The timestamp's physical part (milliseconds << 16) dates the transaction; the clocks of
  // a cluster are close, and a clock ahead only makes us wait longer.
  const uint64_t age_ms = ((HybridClock::PhysicalNow() >> 16) > (txn.ts.time >> 16))
                              ? (HybridClock::PhysicalNow() >> 16) - (txn.ts.time >> 16)
                              : 0;
  const bool old_enough = age_ms >= static_cast<uint64_t>(timeout_ms_);
  Outcome outcome = Outcome::kLater;
  Status st = Decide(txn, old_enough, &outcome);
  if (!st.ok()) {
    *why_not = st.ToString();
    return false;
  }
  if (outcome == Outcome::kLater) {
    *why_not = old_enough ? "a PREPARE arrived while we asked"
                          : "every sibling holds it prepared: waiting until it is older than "
                            "--txn-timeout-ms (its client may still abort it)";
    return false;
  }
  if (!Apply(txn, outcome, "found prepared at restart")) {
    *why_not = "the decision could not be written";
    return false;
  }
  return true;
}

}  // namespace ramp::server
