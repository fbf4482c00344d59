// Strict two-phase locking, the baseline paper 000 compares RAMP with: reads take shared
// locks (and read under them), writes take exclusive locks at commit and install the values,
// which releases every lock at that server. Locks are no-wait: a conflict fails the
// transaction (Conflict), after its locks are released; the caller retries.
#include <map>

#include "client/transaction_state.h"

namespace ramp {
namespace {

using protocol::Op;

// Sends one LOCK-style request per node and waits for all.
Status LockRound(Client::Impl& c, S2plLocks& t, Op op,
                 const std::map<uint32_t, std::vector<protocol::LockItem>>& by_node,
                 std::map<uint32_t, PendingCall>* replies) {
  std::vector<uint64_t> ids;
  std::vector<uint32_t> nodes;
  std::string body;
  for (const auto& [node, items] : by_node) {
    protocol::LockRequest req{t.txn_number, items};
    body.clear();
    protocol::Encode(req, &body);
    uint64_t id = 0;
    Status st = c.Call(node, c.WriteChannel(), op, static_cast<uint32_t>(items.size()), body, &id);
    if (!st.ok()) {
      for (uint64_t i : ids) c.calls.erase(i);
      return st;
    }
    t.locked_nodes.insert(node);
    ids.push_back(id);
    nodes.push_back(node);
  }
  RAMP_RETURN_IF_ERROR(c.Wait(ids));
  Status result;
  for (size_t i = 0; i < ids.size(); i++) {
    PendingCall reply;
    Status st = c.TakeReply(ids[i], &reply);
    if (!st.ok()) {
      if (result.ok()) result = st;
      continue;
    }
    (*replies)[nodes[i]] = std::move(reply);
  }
  return result;
}

// A LOCK or WRITE_LOCKED that met a partition no longer served by the node asked (MOVED,
// after a migration) is sent again, to the partitions' owners asked anew of their homes, at
// most this many times, with the move backoff: a move in progress holds its writes for a
// cutover. The locks taken so far stay held (re-acquiring one succeeds).
constexpr int kMaxMoves = 64;

// Forgets the cached owners of the partitions, so that the next ResolveOwners asks their
// homes (the MOVED error does not say which partition of the request moved).
void ForgetOwners(Client::Impl& c, std::span<const PartitionId> parts) {
  c.stats.moved_replies++;
  for (const auto& p : parts) c.placements.erase(p);
}

// LOCK at the owners of parts, item(i) being the lock item on parts[i]: by_node gets the
// items per owner node and index_of their indexes (the replies follow that order). MOVED is
// followed (owners asked anew, the move backoff, kMaxMoves). *resolve_error: the owners could
// not be found, and no LOCK went out for this attempt.
template <typename ItemAt>
Status LockAtOwners(Client::Impl& c, S2plLocks& t, std::span<const PartitionId> parts, ItemAt item,
                    std::map<uint32_t, std::vector<protocol::LockItem>>* by_node,
                    std::map<uint32_t, std::vector<size_t>>* index_of,
                    std::map<uint32_t, PendingCall>* replies, bool* resolve_error) {
  *resolve_error = false;
  for (int attempt = 0;; attempt++) {
    c.MoveBackoff(attempt);
    by_node->clear();
    index_of->clear();
    replies->clear();
    if (Status st = c.ResolveOwners(parts); !st.ok()) {
      *resolve_error = true;
      return st;
    }
    for (size_t i = 0; i < parts.size(); i++) {
      const uint32_t node = c.OwnerOf(parts[i]);
      (*by_node)[node].push_back(item(i));
      (*index_of)[node].push_back(i);
    }
    Status st = LockRound(c, t, Op::kLock, *by_node, replies);
    if (!st.Is(Status::Code::kMoved) || attempt + 1 >= kMaxMoves) return st;
    ForgetOwners(c, parts);
  }
}

}  // namespace

void S2plRelease(Client::Impl& c, S2plLocks& t) {
  if (t.locked_nodes.empty()) return;
  protocol::LockRequest req{t.txn_number, {}};
  std::string body;
  protocol::Encode(req, &body);
  std::vector<uint64_t> ids;
  for (uint32_t node : t.locked_nodes) {
    uint64_t id = 0;
    if (c.Call(node, c.WriteChannel(), Op::kUnlock, 0, body, &id).ok()) ids.push_back(id);
  }
  if (c.Wait(ids).ok()) {
    for (uint64_t id : ids) {
      PendingCall reply;
      c.TakeReply(id, &reply);
    }
  }
  t.locked_nodes.clear();
}

Status S2plRead(Client::Impl& c, S2plLocks& t, std::vector<ReadSlot>& slots) {
  c.stats.reads++;
  std::vector<PartitionId> parts;
  for (const auto& s : slots) parts.push_back(s.part);
  std::map<uint32_t, std::vector<protocol::LockItem>> by_node;
  std::map<uint32_t, std::vector<size_t>> slot_of;
  std::map<uint32_t, PendingCall> replies;
  bool resolve_error = false;
  const Status st = LockAtOwners(
      c, t, parts,
      [&](size_t i) {
        return protocol::LockItem{slots[i].part, slots[i].key, protocol::kLockShared};
      },
      &by_node, &slot_of, &replies, &resolve_error);
  if (resolve_error) return st;
  if (!st.ok()) {
    S2plRelease(c, t);
    return st;
  }
  for (auto& [node, reply] : replies) {
    protocol::GetReply gr;
    RAMP_RETURN_IF_ERROR(protocol::Decode(reply.body(), reply.header.count, &gr));
    const auto& idx = slot_of[node];
    if (gr.results.size() != idx.size()) return Status::Corruption("LOCK reply size mismatch");
    for (size_t j = 0; j < idx.size(); j++) {
      ReadSlot& s = slots[idx[j]];
      const auto& r = gr.results[j];
      s.have = true;
      s.ts = r.ts;
      s.tombstone =
          r.status != protocol::ItemStatus::kOk || (r.flags & record::kRecordTombstone) != 0;
      s.value.assign(r.status == protocol::ItemStatus::kOk ? r.value : std::string_view());
    }
  }
  return Status::OK();
}

Status S2plCommit(Client::Impl& c, S2plLocks& t, std::span<const WriteItem> writes) {
  if (writes.empty()) {
    S2plRelease(c, t);
    c.stats.transactions_committed++;
    return Status::OK();
  }
  std::vector<PartitionId> parts;
  for (const auto& w : writes) parts.push_back(c.PartitionOf(w.keyspace, w.key));
  std::map<uint32_t, std::vector<protocol::LockItem>> by_node;
  std::map<uint32_t, std::vector<size_t>> index_of;
  std::map<uint32_t, PendingCall> replies;
  bool resolve_error = false;
  // MOVED at LOCK: nothing was written yet; the locks go to the new owners. (WRITE_LOCKED
  // checks ownership too but is not retried: a server may have written its part already.)
  Status st = LockAtOwners(
      c, t, parts,
      [&](size_t i) {
        const WriteItem& w = writes[i];
        return protocol::LockItem{parts[i], w.key, protocol::kLockExclusive, w.value,
                                  static_cast<uint8_t>(w.tombstone ? protocol::kPutTombstone : 0)};
      },
      &by_node, &index_of, &replies, &resolve_error);
  if (st.ok()) {
    replies.clear();
    st = LockRound(c, t, Op::kWriteLocked, by_node, &replies);
    // WRITE_LOCKED released the locks of those servers.
    if (st.ok()) {
      for (const auto& [node, items] : by_node) t.locked_nodes.erase(node);
    }
  }
  S2plRelease(c, t);
  if (!st.ok()) {
    c.stats.transactions_aborted++;
    return st;
  }
  c.stats.transactions_committed++;
  return Status::OK();
}

}  // namespace ramp
