// Write intents, the client's part (DESIGN §5, server/intent_table.h): take an intent at the
// key's partition, wait for it without threads (the request stays queued at the server,
// whose reply is the grant; the client polls and calls the wait hook), find deadlocks by
// following the wait-for edges every server reports, release at the transaction's end.
//
// Deadlocks: after each deadlock_check_ms of waiting the client follows the edges "waits
// for" from its own transaction through every server (WAITS_FOR, breadth first). A cycle
// back to itself is a deadlock; the youngest transaction of the cycle (latest start) gives
// way, so exactly that one fails while the others go on, and every member of a cycle checks
// periodically, so the youngest finds it. This also works across PostgreSQL servers (the
// edges live at the rampd servers) and needs no global detector. Wait-die/wound-wait would
// need no graph, but would abort transactions that never deadlock (TPC-B's branch row);
// a pure timeout would abort long waits that are no deadlock.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <set>
#include <utility>

#include "client/client_impl.h"

namespace ramp {
namespace {

using protocol::IntentHolder;
using protocol::IntentOwner;
using protocol::Op;

struct OwnerLess {
  bool operator()(const IntentOwner& a, const IntentOwner& b) const {
    return std::pair(a.client, a.txn) < std::pair(b.client, b.txn);
  }
};

std::string Describe(const IntentOwner& o) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "transaction %" PRIu64 " of client %016" PRIx64, o.txn, o.client);
  return buf;
}

// Sends without waiting for the reply (it is dropped when it comes): releases and withdrawals
// need no answer, and the next request on the connection comes after them.
void Post(Client::Impl& c, uint32_t node, Op op, uint32_t count, std::string_view body) {
  uint64_t id = 0;
  if (c.Call(node, c.WriteChannel(), op, count, body, &id).ok()) c.calls.erase(id);
}

// Whom each owner waits for, over every server.
Status WaitsFor(Client::Impl& c, const std::vector<IntentOwner>& owners,
                std::map<IntentOwner, std::vector<IntentHolder>, OwnerLess>* out) {
  out->clear();
  protocol::WaitsForRequest req{owners};
  std::string body;
  protocol::Encode(req, &body);
  std::vector<uint64_t> ids;
  for (uint32_t node = 0; node < c.nodes.size(); node++) {
    uint64_t id = 0;
    Status st = c.Call(node, c.WriteChannel(), Op::kWaitsFor, static_cast<uint32_t>(owners.size()),
                       body, &id);
    if (!st.ok()) {
      for (uint64_t i : ids) c.calls.erase(i);
      return st;
    }
    ids.push_back(id);
  }
  RAMP_RETURN_IF_ERROR(c.Wait(ids));
  Status result;
  for (uint64_t id : ids) {
    PendingCall reply;
    Status st = c.TakeReply(id, &reply);
    protocol::WaitsForReply r;
    if (st.ok()) st = protocol::Decode(reply.body(), reply.header.count, &r);
    if (st.ok() && r.edges.size() != owners.size()) {
      st = Status::Corruption("WAITS_FOR reply size mismatch");
    }
    if (!st.ok()) {
      if (result.ok()) result = st;
      continue;
    }
    for (size_t i = 0; i < owners.size(); i++) {
      auto& edges = (*out)[owners[i]];
      edges.insert(edges.end(), r.edges[i].begin(), r.edges[i].end());
    }
  }
  return result;
}

// Follows the wait-for graph from `self`. *victim: self is on a cycle and is its youngest
// member; *cycle describes the cycle found.
Status CheckDeadlock(Client::Impl& c, const IntentHolder& self, bool* victim, std::string* cycle) {
  *victim = false;
  constexpr int kMaxRounds = 32;
  constexpr size_t kMaxOwners = 4096;
  std::map<IntentOwner, IntentHolder, OwnerLess> parent;  // owner -> who waits for it
  std::map<IntentOwner, uint64_t, OwnerLess> priority{{self.owner, self.priority}};
  std::vector<IntentOwner> frontier{self.owner};
  std::map<IntentOwner, std::vector<IntentHolder>, OwnerLess> edges;
  for (int round = 0; round < kMaxRounds && !frontier.empty(); round++) {
    RAMP_RETURN_IF_ERROR(WaitsFor(c, frontier, &edges));
    std::vector<IntentOwner> next;
    for (const auto& [from, holders] : edges) {
      for (const IntentHolder& h : holders) {
        if (h.owner == self.owner) {
          // A cycle: self -> ... -> from -> self. Its youngest member gives way.
          std::vector<IntentHolder> members{{from, priority[from]}};
          while (!(members.back().owner == self.owner)) {
            members.push_back(parent.at(members.back().owner));
          }
          auto younger = [](const IntentHolder& a, const IntentHolder& b) {
            return std::tuple(a.priority, a.owner.client, a.owner.txn) <
                   std::tuple(b.priority, b.owner.client, b.owner.txn);
          };
          const IntentHolder youngest = *std::max_element(members.begin(), members.end(), younger);
          *victim = youngest.owner == self.owner;
          cycle->clear();
          for (auto it = members.rbegin(); it != members.rend(); ++it) {
            cycle->append(Describe(it->owner)).append(" waits for ");
          }
          cycle->append(Describe(self.owner));
          return Status::OK();
        }
        if (priority.count(h.owner) != 0) continue;
        priority[h.owner] = h.priority;
        parent[h.owner] = IntentHolder{from, priority[from]};
        next.push_back(h.owner);
      }
    }
    if (priority.size() > kMaxOwners) break;
    frontier = std::move(next);
  }
  return Status::OK();
}

}  // namespace

uint64_t Client::NewIntentOwner() {
  return impl_->next_txn++;
}

Status Client::AcquireIntent(const IntentRequest& request, IntentResult* result) {
  Impl& c = *impl_;
  *result = IntentResult();
  if (request.key.size() > c.options.max_key_bytes) {
    return Status::TooLarge("key of " + std::to_string(request.key.size()) +
                            " bytes exceeds the limit of " +
                            std::to_string(c.options.max_key_bytes) + " bytes");
  }
  const PartitionId part = c.PartitionOf(request.keyspace, request.key);
  protocol::IntentRequest m;
  m.txn = request.owner;
  m.priority = request.priority;
  m.flags = request.wait ? protocol::kIntentWait : 0;
  m.mode = static_cast<uint8_t>(request.mode);
  m.part = part;
  m.key = request.key;
  std::string body;
  protocol::Encode(m, &body);
  const IntentHolder self{{c.client_id, request.owner}, request.priority};
  const auto check_every = std::chrono::milliseconds(std::max(1, request.deadlock_check_ms));
  auto next_check = std::chrono::steady_clock::now() + check_every;
  uint32_t node = 0;
  // A wait that ends without the grant withdraws the queued request (no reply needed).
  auto withdraw = [&] {
    protocol::IntentRequest w = m;
    w.flags = protocol::kIntentWithdraw;
    std::string wb;
    protocol::Encode(w, &wb);
    Post(c, node, Op::kIntent, 1, wb);
  };
  // A partition on the move answers MOVED (also to a request queued there when it left: the
  // intents went to the new owner, where the request queues again): asked anew of its home,
  // with the move backoff, as LOCK does.
  constexpr int kMaxMoves = 64;
  for (int moved = 0;;) {
    RAMP_RETURN_IF_ERROR(c.ResolveOwners(std::span<const PartitionId>(&part, 1)));
    node = c.OwnerOf(part);
    auto& asked = c.intent_nodes[request.owner];
    if (std::find(asked.begin(), asked.end(), node) == asked.end()) asked.push_back(node);
    auto& where = c.intent_partitions[request.owner];
    if (std::find(where.begin(), where.end(), std::make_pair(part, node)) == where.end()) {
      where.emplace_back(part, node);
    }
    uint64_t id = 0;
    RAMP_RETURN_IF_ERROR(c.Call(node, c.WriteChannel(), Op::kIntent, 1, body, &id));
    // One slice of the wait: until the next deadlock check.
    const auto saved = c.bound;
    if (request.wait && (!c.bound || next_check < *c.bound)) c.bound = next_check;
    Status st = c.Wait(std::span<const uint64_t>(&id, 1));
    c.bound = saved;
    if (st.ok()) {
      PendingCall reply;
      st = c.TakeReply(id, &reply);
      if (st.Is(Status::Code::kMoved) && ++moved < kMaxMoves) {
        c.stats.moved_replies++;
        c.placements.erase(part);  // asked again of the partition's home
        c.MoveBackoff(moved);
        continue;
      }
      RAMP_RETURN_IF_ERROR(st);
      protocol::IntentReply r;
      RAMP_RETURN_IF_ERROR(protocol::Decode(reply.body(), reply.header.count, &r));
      if (r.outcome == protocol::kIntentGranted) {
        result->outcome = IntentResult::Outcome::kGranted;
        result->live = r.live != 0;
        result->latest = r.latest;
        result->value.assign(r.value);
        return Status::OK();
      }
      result->outcome = IntentResult::Outcome::kHeld;
      for (const IntentHolder& h : r.holders) {
        result->detail.append(result->detail.empty() ? "held by " : ", ").append(Describe(h.owner));
      }
      return Status::OK();
    }
    if (!st.Is(Status::Code::kTimeout) || !request.wait) {
      if (request.wait) withdraw();
      return st;
    }
    // The slice ended. A deadlock check also finds a server that stopped answering (its
    // WAITS_FOR times out); then the request is sent again: the server keeps its place.
    if (std::chrono::steady_clock::now() + std::chrono::milliseconds(1) >= next_check) {
      bool victim = false;
      Status d = CheckDeadlock(c, self, &victim, &result->detail);
      if (!d.ok() || victim) {
        withdraw();
        if (!d.ok()) return d;
        result->outcome = IntentResult::Outcome::kDeadlock;
        return Status::OK();
      }
      result->detail.clear();
      next_check = std::chrono::steady_clock::now() + check_every;
    }
  }
}

void Client::ReleaseIntents(uint64_t owner) {
  // Not behind a COMMIT (an abort, or a transaction that wrote nothing): the replies are
  // waited for, since tcp holds a message for a batch until the connection is polled and
  // this client may send nothing more for a while (the key would stay locked meanwhile).
  Impl& c = *impl_;
  auto it = c.intent_nodes.find(owner);
  if (it == c.intent_nodes.end()) return;
  protocol::IntentReleaseRequest req{owner};
  std::string body;
  protocol::Encode(req, &body);
  std::vector<uint64_t> ids;
  for (uint32_t node : it->second) {
    uint64_t id = 0;
    if (c.Call(node, c.WriteChannel(), Op::kIntentRelease, 0, body, &id).ok()) ids.push_back(id);
  }
  c.intent_nodes.erase(it);
  c.intent_partitions.erase(owner);
  if (!c.Wait(ids).ok()) {
    // Best effort: a server that went away released them. Late replies are dropped.
    for (uint64_t id : ids) c.calls.erase(id);
    return;
  }
  for (uint64_t id : ids) {
    PendingCall reply;
    (void)c.TakeReply(id, &reply);
  }
}

void PostIntentRelease(Client::Impl& c, uint64_t owner, std::span<const uint32_t> released) {
  auto it = c.intent_nodes.find(owner);
  if (it == c.intent_nodes.end()) return;
  protocol::IntentReleaseRequest req{owner};
  std::string body;
  protocol::Encode(req, &body);
  for (uint32_t node : it->second) {
    if (std::find(released.begin(), released.end(), node) != released.end()) continue;
    Post(c, node, Op::kIntentRelease, 0, body);
  }
  c.intent_nodes.erase(it);
  c.intent_partitions.erase(owner);
}

}  // namespace ramp
