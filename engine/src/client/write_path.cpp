// RAMP-Fast PUT (paper 000 Algorithm 1): PREPARE every item at its partition's owner with
// the transaction's metadata, and only when every PREPARE is acknowledged, COMMIT the
// timestamp at every server involved. Both phases go to all servers at once.
#include <algorithm>
#include <chrono>
#include <map>
#include <set>
#include <span>
#include <thread>
#include <unordered_set>

#include "client/transaction_state.h"
#include "ramp/keys.h"
#include "ramp/log.h"

namespace ramp {
namespace {

using protocol::Op;

// Bounds of one PREPARE message; a transaction larger than that is several messages per node.
constexpr size_t kMaxItemsPerMessage = 16384;
// Commits of at most this many writes learn the addresses of what they wrote (a cache
// shared by a host's clients: as many as it holds, up to this).
constexpr size_t kMaxAddressedWrites = 4096;
constexpr size_t kMaxSharedAddressedWrites = 1u << 20;
constexpr size_t kMaxBytesPerMessage = 8u << 20;

// The metadata of a transaction: its keys when few, its partitions otherwise (record.h).
struct TxnMetadata {
  record::Metadata::Mode mode = record::Metadata::Mode::kNone;
  std::vector<record::Sibling> keys;
  std::string partitions_encoded;  // kPartitions: shared by every item
};

TxnMetadata PlanMetadata(std::span<const WriteItem> writes, const std::vector<PartitionId>& parts) {
  TxnMetadata m;
  if (writes.size() <= 1) return m;
  size_t bytes = 0;
  for (const auto& w : writes) bytes += w.key.size() + 16;
  if (writes.size() - 1 <= record::kMaxSiblingKeys && bytes <= record::kMaxSiblingBytes) {
    m.mode = record::Metadata::Mode::kKeys;
    m.keys.reserve(writes.size());
    for (size_t i = 0; i < writes.size(); i++) {
      m.keys.push_back(
          record::Sibling{writes[i].keyspace, parts[i].bucket, std::string(writes[i].key)});
    }
    return m;
  }
  m.mode = record::Metadata::Mode::kPartitions;
  record::Metadata md;
  md.mode = m.mode;
  // Sorted and unique: the encoding can then be a bitmap of buckets per keyspace (record.h).
  // A bulk PUT's thousands of items fall into a few partitions: those are collected first
  // (a run of one partition costs one comparison), then sorted (sorting 16 384 items was
  // 2.6 % of the backend's time in pgbench -i).
  std::unordered_set<PartitionId, PartitionIdHash> seen;
  const PartitionId* last = nullptr;
  for (const PartitionId& p : parts) {
    if (last != nullptr && *last == p) continue;
    last = &p;
    if (seen.insert(p).second) md.partitions.push_back(p);
  }
  std::sort(md.partitions.begin(), md.partitions.end());
  record::EncodeMetadata(md, &m.partitions_encoded);
  return m;
}

// Metadata of item i: every other key of the transaction (or the shared partition list).
void ItemMetadata(const TxnMetadata& m, size_t i, std::string* out) {
  out->clear();
  if (m.mode == record::Metadata::Mode::kPartitions) {
    *out = m.partitions_encoded;
    return;
  }
  if (m.mode == record::Metadata::Mode::kNone) return;
  record::Metadata md;
  md.mode = m.mode;
  md.keys.reserve(m.keys.size() - 1);
  for (size_t j = 0; j < m.keys.size(); j++) {
    if (j != i) md.keys.push_back(m.keys[j]);
  }
  record::EncodeMetadata(md, out);
}

// The addresses a COMMIT_ADDRESSES reply gives go into the address cache: the next read of
// these keys (this client's or, with a shared cache, any on this host) is one-sided.
void LearnAddresses(Client::Impl& c, uint32_t node, const PendingCall& reply) {
  protocol::CommitAddressesReply r;
  NodeChannel* ch = nullptr;
  if (!protocol::Decode(reply.body(), reply.header.count, &r).ok() ||
      !c.Connected(node, ChannelKind::kFast, &ch).ok()) {
    return;  // only hints: the reads learn the addresses themselves
  }
  // A bulk commit's reply holds thousands of addresses, each stored at a random place of a
  // shared cache far larger than the CPU's: the slots of the next few are fetched ahead
  // (storing 200 000 addresses one miss after the other was 14 % of pgbench -i's backend).
  constexpr size_t kAhead = 8;
  for (size_t i = 0; i < std::min(kAhead, r.items.size()); i++) {
    c.addresses->Prefetch(r.items[i].part.keyspace, r.items[i].key);
  }
  for (size_t i = 0; i < r.items.size(); i++) {
    if (i + kAhead < r.items.size()) {
      c.addresses->Prefetch(r.items[i + kAhead].part.keyspace, r.items[i + kAhead].key);
    }
    const auto& item = r.items[i];
    if (!item.address.valid()) continue;
    OneSidedAddress a;
    a.node = node;
    a.length = item.address.length;
    a.instance = ch->hello().instance;
    a.placement_epoch = c.EpochOf(item.part);
    a.offset = item.address.offset;
    a.record_epoch = item.address.epoch;
    c.addresses->Store(item.part.keyspace, item.key, a);
  }
}

// Sends a decision (COMMIT or ABORT) of ts to every listed server and waits for the answers.
// release_intents: the write intents of Client::Write's owner are released with the COMMITs:
// the last COMMIT message to a server carries the release (Decision::release_intents_of; the
// server applies the commit first), and a server that held an intent but gets no COMMIT gets
// an INTENT_RELEASE right behind them. Not one more round trip later: a transaction waiting
// for them starts that much sooner, and no server handles a message of its own for them.
// A server that no longer owns one of its partitions (a migration's cutover) refuses the
// decision with MOVED: that server's partitions are regrouped by their owners and sent again
// (decisions are idempotent).
// A COMMIT of a partition on the move is followed until it is applied or the commit's
// deadline passes, also past kMaxMoves and across an unreachable home or new owner (one that
// crashed in the middle of the move, which then completes or rolls back): the server that
// holds the transaction prepared no longer answers for the partition, so until the
// termination timeout nothing else commits it, and the write, acknowledged to the caller,
// would read back older meanwhile. Other failures of a decision are left to the servers
// (a restarted server refuses reads of what it holds in doubt until it has resolved it).
Status Decide(Client::Impl& c, Op op, const Timestamp& ts,
              const std::map<uint32_t, std::vector<PartitionId>>& parts_by_node,
              bool release_intents = false, bool per_partition = false) {
  constexpr int kMaxMoves = 64;
  constexpr int kRetryPauseMs = 20;  // between attempts to reach a partition's owner
  const bool commit = op != Op::kAbort;
  // A time-bound retry of a COMMIT: while the commit's deadline (CommitDeadline) is ahead.
  auto time_left = [&] { return commit && std::chrono::steady_clock::now() < c.Deadline(); };
  std::set<PartitionId> on_the_move;  // refused with MOVED at least once
  // The partitions of a failed message that are retried (forgetting where they were sent):
  // those on the move when the failure is Unavailable and time is left. True when all are.
  auto retry_moving = [&](const std::vector<PartitionId>& sent, const Status& st,
                          std::vector<PartitionId>* moved) {
    if (!st.Is(Status::Code::kUnavailable) || !time_left()) return false;
    bool all = true;
    for (const PartitionId& p : sent) {
      if (!on_the_move.count(p)) {
        all = false;
        continue;
      }
      c.placements.erase(p);  // asked again of its home
      moved->push_back(p);
    }
    return all;
  };
  std::map<uint32_t, std::vector<PartitionId>> todo = parts_by_node;
  Status result;
  // The release of the writer's intents: carried by the first COMMIT to each server, applied
  // there after the commit. Every server it asked for an intent whose COMMIT did not apply it
  // (none sent there, MOVED, no answer) gets an INTENT_RELEASE once the decision is over, not
  // before: an intent that moved with its partition is released by the server it was asked
  // of passing the end on to the new owner, and a writer granted there before the commit is
  // applied would read the row without it and fail with 40001.
  const uint64_t release_owner = release_intents && commit ? c.release_intents_with_commit : 0;
  // Not carried when a server gets several messages (one per partition): another of them
  // may be refused with MOVED while the one carrying the release is applied, which would
  // let the old owner pass the release on ahead of the COMMIT re-sent to the new one.
  const bool carry_release = release_owner != 0 && !per_partition;
  std::vector<uint32_t> released;  // servers whose COMMIT applied the release
  struct ReleaseTheRest {
    Client::Impl& c;
    uint64_t owner;
    const std::vector<uint32_t>& released;
    ~ReleaseTheRest() {
      if (owner != 0) PostIntentRelease(c, owner, released);
    }
  } release_at_end{c, release_owner, released};
  for (int attempt = 0; !todo.empty(); attempt++) {
    // The messages: one per node, or one per partition (a large COMMIT_ADDRESSES, so that
    // each reply stays under the server's bound on the addresses it returns).
    std::vector<std::pair<uint32_t, std::vector<PartitionId>>> messages;
    for (const auto& [node, parts] : todo) {
      if (!per_partition) {
        messages.emplace_back(node, parts);
        continue;
      }
      for (const PartitionId& p : parts) messages.emplace_back(node, std::vector<PartitionId>{p});
    }
    std::vector<uint64_t> ids;
    std::vector<size_t> sent_messages;  // per id, its index in messages
    std::vector<PartitionId> moved;
    std::string body;
    for (size_t m = 0; m < messages.size(); m++) {
      const auto& [node, parts] = messages[m];
      protocol::Decision d{ts, parts};
      // The last message to its node carries the release (after all of the node's commits).
      const bool last_to_node = m + 1 == messages.size() || messages[m + 1].first != node;
      if (attempt == 0 && carry_release && last_to_node) d.release_intents_of = release_owner;
      body.clear();
      protocol::Encode(d, &body);
      uint64_t id = 0;
      Status st =
          c.Call(node, c.WriteChannel(), op, static_cast<uint32_t>(parts.size()), body, &id);
      if (!st.ok()) {
        if (!retry_moving(parts, st, &moved) && result.ok()) result = st;
        continue;
      }
      ids.push_back(id);
      sent_messages.push_back(m);
    }
    Status waited = c.Wait(ids);
    if (!waited.ok()) return waited;
    for (size_t i = 0; i < ids.size(); i++) {
      const auto& [node, sent] = messages[sent_messages[i]];
      PendingCall reply;
      Status st = c.TakeReply(ids[i], &reply);
      const bool carried =
          attempt == 0 && carry_release &&
          (sent_messages[i] + 1 == messages.size() || messages[sent_messages[i] + 1].first != node);
      if (st.ok() && carried) released.push_back(node);
      if (st.ok() && op == Op::kCommitAddresses) LearnAddresses(c, node, reply);
      protocol::PrepareError detail;
      std::string msg;
      if (st.Is(Status::Code::kMoved) && (attempt + 1 < kMaxMoves || time_left()) &&
          protocol::Decode(reply.body(), &detail, &msg).ok() && detail.item < sent.size()) {
        c.NoteMoved(sent[detail.item], detail.owner, detail.epoch);
        on_the_move.insert(sent.begin(), sent.end());
        moved.insert(moved.end(), sent.begin(), sent.end());
        continue;
      }
      if (!st.ok() && !retry_moving(sent, st, &moved) && result.ok()) {
        result = st.Annotate(c.NodeName(node));
      }
    }
    todo.clear();
    if (moved.empty()) break;
    c.MoveBackoff(attempt + 1);
    // The home may be down for a moment (it restarts and finishes or rolls back the move):
    // the decision waits for it within the retries, rather than being left to the servers'
    // resolution of the transaction (its writes would stay invisible until then).
    Status resolved = c.ResolveOwners(moved);
    while (!resolved.ok() && resolved.Is(Status::Code::kUnavailable) && time_left()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(kRetryPauseMs));
      resolved = c.ResolveOwners(moved);
    }
    if (!resolved.ok()) return resolved;
    for (const PartitionId& p : moved) todo[c.OwnerOf(p)].push_back(p);
  }
  return result;
}

// Whether one of owner's intents was asked at a node that no longer owns its partition,
// which the commit writes at its new owner.
bool IntentsMoved(const Client::Impl& c, uint64_t owner,
                  const std::map<uint32_t, std::vector<PartitionId>>& parts_by_node) {
  auto it = c.intent_partitions.find(owner);
  if (owner == 0 || it == c.intent_partitions.end()) return false;
  for (const auto& [part, asked_at] : it->second) {
    for (const auto& [node, parts] : parts_by_node) {
      if (node != asked_at && std::find(parts.begin(), parts.end(), part) != parts.end()) {
        return true;
      }
    }
  }
  return false;
}

// Whether a COMMIT of n writes asks for the addresses of what it wrote (GET* reads them
// next): only with ClientOptions::learn_commit_addresses, and only as many as the cache holds
// (a bulk load would flood a private cache and the replies). The cache's counters are read
// only then: they sit on a line every reader of a shared cache writes.
bool LearnsAddresses(Client::Impl& c, size_t n) {
  if (!c.options.learn_commit_addresses || c.options.read_path != ReadPath::kGetStar) {
    return false;
  }
  const AddressCacheStats cache = c.addresses->Stats();
  const size_t most = cache.shared ? std::min<size_t>(cache.capacity, kMaxSharedAddressedWrites)
                                   : kMaxAddressedWrites;
  return n <= most;
}

// Fault injection (ClientOptions::debug_commit_delay_us): COMMIT at the first server, a
// pause, then at the others, so readers meet the transaction half committed.
Status DecideStaggered(Client::Impl& c, const Timestamp& ts,
                       const std::map<uint32_t, std::vector<PartitionId>>& parts_by_node,
                       int delay_us) {
  auto first = parts_by_node.begin();
  std::map<uint32_t, std::vector<PartitionId>> head{*first};
  std::map<uint32_t, std::vector<PartitionId>> rest(std::next(first), parts_by_node.end());
  RAMP_RETURN_IF_ERROR(Decide(c, Op::kCommit, ts, head));
  std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
  return Decide(c, Op::kCommit, ts, rest);
}

// One timeout for the whole commit: its PREPAREs, the ABORTs after a failure, the COMMITs and
// any retry wait until the same deadline (ChannelContext::bound), so a paused server holds a
// COMMIT for ClientOptions::timeout_ms, not once per round. An ABORT or COMMIT sent when no
// time is left still goes out; a server that misses it resolves the transaction with its
// siblings (terminator.h).
class CommitDeadline {
 public:
  explicit CommitDeadline(Client::Impl& c) : c_(c), saved_(c.bound) {
    const auto d = c.Deadline();
    if (!c.bound || d < *c.bound) c.bound = d;
  }
  ~CommitDeadline() { c_.bound = saved_; }
  CommitDeadline(const CommitDeadline&) = delete;
  CommitDeadline& operator=(const CommitDeadline&) = delete;

 private:
  Client::Impl& c_;
  std::optional<std::chrono::steady_clock::time_point> saved_;
};

}  // namespace

Status RampCommit(Client::Impl& c, std::span<const WriteItem> writes, Timestamp* commit_ts) {
  if (writes.empty()) return Status::OK();
  std::vector<PartitionId> parts(writes.size());
  for (size_t i = 0; i < writes.size(); i++)
    parts[i] = c.PartitionOf(writes[i].keyspace, writes[i].key);
  const TxnMetadata meta = PlanMetadata(writes, parts);
  // Per item only when it names the other keys (a small transaction): a large one's items
  // all share the partition list, which is not copied per item.
  std::vector<std::string> own_metadata;
  std::vector<std::string_view> metadata(writes.size());
  if (meta.mode == record::Metadata::Mode::kKeys) {
    own_metadata.resize(writes.size());
    for (size_t i = 0; i < writes.size(); i++) {
      ItemMetadata(meta, i, &own_metadata[i]);
      metadata[i] = own_metadata[i];
    }
  } else if (meta.mode == record::Metadata::Mode::kPartitions) {
    std::fill(metadata.begin(), metadata.end(), std::string_view(meta.partitions_encoded));
  }

  // A conditional write replaces the version it read: its timestamp must be above that one
  // (servers refuse it otherwise, as a version that would never become current).
  for (const WriteItem& w : writes) {
    if (w.has_expected) c.clock.Observe(w.expected.time);
  }
  const CommitDeadline deadline(c);
  constexpr int kMaxMoves = 64;
  int moves = 0;
  for (int attempt = 0;; attempt++) {
    RAMP_RETURN_IF_ERROR(c.ResolveOwners(parts));
    const Timestamp ts{c.clock.Now(), c.client_id};
    // PREPARE everywhere at once. A node's items go in batches of bounded size (a bulk
    // load must not build one message larger than the transport takes), all pipelined.
    std::vector<std::pair<uint32_t, std::vector<size_t>>> batches;
    {
      std::map<uint32_t, size_t> open;  // node -> index of its batch being filled
      std::map<uint32_t, size_t> open_bytes;
      for (size_t i = 0; i < writes.size(); i++) {
        const uint32_t node = c.OwnerOf(parts[i]);
        const size_t bytes =
            writes[i].key.size() + writes[i].value.size() + metadata[i].size() + 64;
        auto it = open.find(node);
        if (it == open.end() || batches[it->second].second.size() >= kMaxItemsPerMessage ||
            open_bytes[node] + bytes > kMaxBytesPerMessage) {
          open[node] = batches.size();
          open_bytes[node] = 0;
          batches.emplace_back(node, std::vector<size_t>());
        }
        batches[open[node]].second.push_back(i);
        open_bytes[node] += bytes;
      }
    }
    std::map<uint32_t, std::vector<PartitionId>> parts_by_node;
    std::vector<uint64_t> ids;
    std::vector<size_t> id_batches;
    std::string body;
    Status send_error;
    for (size_t b = 0; b < batches.size(); b++) {
      const auto& [node, items] = batches[b];
      protocol::PrepareRequest req;
      req.ts = ts;
      req.items.reserve(items.size());
      auto& node_parts = parts_by_node[node];
      for (size_t i : items) {
        const WriteItem& w = writes[i];
        protocol::PrepareItem it;
        it.part = parts[i];
        it.key = w.key;
        it.value = w.value;
        it.flags = static_cast<uint8_t>((w.tombstone ? protocol::kPutTombstone : 0) |
                                        (w.has_expected ? protocol::kPutHasExpected : 0) |
                                        (w.grouped ? protocol::kPutGrouped : 0));
        it.expected = w.expected;
        it.metadata = metadata[i];
        req.items.push_back(it);
        if (std::find(node_parts.begin(), node_parts.end(), parts[i]) == node_parts.end()) {
          node_parts.push_back(parts[i]);
        }
      }
      body.clear();
      protocol::Encode(req, &body);
      uint64_t id = 0;
      Status st = c.Call(node, c.WriteChannel(), Op::kPrepare,
                         static_cast<uint32_t>(req.items.size()), body, &id);
      if (!st.ok()) {
        send_error = st;
        break;
      }
      ids.push_back(id);
      id_batches.push_back(b);
    }
    Status waited = send_error.ok() ? c.Wait(ids) : send_error;
    if (!send_error.ok()) {
      for (uint64_t id : ids) c.calls.erase(id);
    }
    // Collect the PREPARE outcomes.
    Status failure = waited;
    protocol::PrepareError detail;
    bool have_detail = false;
    if (waited.ok()) {
      for (size_t k = 0; k < ids.size(); k++) {
        PendingCall reply;
        Status st = c.TakeReply(ids[k], &reply);
        if (st.ok() || !failure.ok()) continue;
        failure = st;
        std::string msg;
        if (reply.done && reply.transport_error.ok() &&
            protocol::Decode(reply.body(), &detail, &msg).ok()) {
          failure = Status(st.code(), msg);
          have_detail = true;
          // detail.item indexes the batch: map it back to the write.
          const auto& items = batches[id_batches[k]].second;
          detail.item = detail.item < items.size() ? static_cast<uint32_t>(items[detail.item]) : 0;
        }
        failure = failure.Annotate(c.NodeName(batches[id_batches[k]].first));
      }
    }
    if (failure.ok()) {
      // Every PREPARE is acknowledged: the transaction is committed (a server that misses
      // the COMMIT resolves it with its siblings). COMMIT everywhere at once.
      Status st;
      if (c.options.debug_commit_delay_us > 0 && parts_by_node.size() > 1) {
        st = DecideStaggered(c, ts, parts_by_node, c.options.debug_commit_delay_us);
        if (c.release_intents_with_commit != 0) {
          PostIntentRelease(c, c.release_intents_with_commit);
        }
      } else {
        const bool learn = LearnsAddresses(c, writes.size());
        // A partition that moved during this transaction may have taken the writer's
        // intents along: their old owner passes a release on to the new one, which must not
        // get it before this COMMIT (carried by a COMMIT to the old owner, it could):
        // released after the decision then.
        const bool carry_release =
            moves == 0 && !IntentsMoved(c, c.release_intents_with_commit, parts_by_node);
        st = Decide(c, learn ? Op::kCommitAddresses : Op::kCommit, ts, parts_by_node,
                    /*release_intents=*/carry_release,
                    /*per_partition=*/learn && writes.size() > kMaxAddressedWrites);
        if (!carry_release && c.release_intents_with_commit != 0) {
          PostIntentRelease(c, c.release_intents_with_commit);
        }
      }
      if (!st.ok()) {
        RAMP_WARN("COMMIT %s not acknowledged everywhere (%s); servers will resolve it",
                  ts.ToString().c_str(), st.ToString().c_str());
      }
      c.stats.transactions_committed++;
      if (commit_ts) *commit_ts = ts;
      return Status::OK();
    }
    // Undo what got prepared: ABORT ts everywhere it was sent (idempotent; also fences ts
    // where the PREPARE is still on its way).
    Status undone = Decide(c, Op::kAbort, ts, parts_by_node);
    if (!undone.ok()) {
      RAMP_WARN("ABORT %s not acknowledged everywhere: %s", ts.ToString().c_str(),
                undone.ToString().c_str());
    }
    c.stats.transactions_aborted++;
    const bool retry = attempt + 1 < c.options.max_commit_retries;
    if (failure.Is(Status::Code::kAborted) && retry) {
      // Refused for a stale timestamp (below a scan's watermark): draw one above it.
      if (have_detail) c.clock.Observe(detail.watermark.time);
      c.stats.commit_retries++;
      continue;
    }
    if (failure.Is(Status::Code::kMoved) && have_detail && ++moves < kMaxMoves) {
      // A partition on the move: its cutover takes milliseconds; retried apart from
      // max_commit_retries, with MoveBackoff.
      c.NoteMoved(parts[detail.item], detail.owner, detail.epoch);
      c.stats.commit_retries++;
      c.MoveBackoff(moves);
      attempt--;
      continue;
    }
    return failure;
  }
}

// ---- Writes ahead of the commit (Client::WriteAhead; DESIGN §5) ----------------------------
namespace {

// Unmarks the entries of an aborted write ahead: Client::Write sends them.
void Unmark(WriteBatch* batch, const WriteAheadPut& put) {
  if (batch == nullptr) return;
  for (const EntryKey& k : put.keys) batch->SetStreamed(put.keyspace, k, false);
}

// Collects the PREPAREs of `put`: all acknowledged, its COMMITs go out (not waited for);
// otherwise it is aborted everywhere and its entries unmarked.
Status CollectPrepares(Client::Impl& c, WriteAheadPut& put, WriteBatch* batch, bool abort) {
  const CommitDeadline deadline(c);
  Status failure;
  if (abort) {
    for (uint64_t id : put.prepares) c.calls.erase(id);
    failure = Status::Aborted("the transaction writing ahead aborted");
  } else {
    failure = c.Wait(put.prepares);
    if (failure.ok()) {
      for (uint64_t id : put.prepares) {
        PendingCall reply;
        Status st = c.TakeReply(id, &reply);
        if (!st.ok() && failure.ok()) failure = st;
      }
    }
  }
  put.prepares.clear();
  if (!failure.ok()) {
    // ABORT is idempotent and fences the timestamp where a PREPARE is still on its way.
    Status undone = Decide(c, Op::kAbort, put.ts, put.parts_by_node);
    if (!undone.ok()) {
      RAMP_WARN("ABORT %s (written ahead) not acknowledged everywhere: %s",
                put.ts.ToString().c_str(), undone.ToString().c_str());
    }
    c.stats.transactions_aborted++;
    Unmark(batch, put);
    return failure;
  }
  std::string body;
  const Op op = put.learn ? Op::kCommitAddresses : Op::kCommit;
  for (const auto& [node, parts] : put.parts_by_node) {
    protocol::Decision d{put.ts, parts};
    body.clear();
    protocol::Encode(d, &body);
    uint64_t id = 0;
    if (c.Call(node, c.WriteChannel(), op, static_cast<uint32_t>(parts.size()), body, &id).ok()) {
      put.commits.emplace_back(node, id);
    } else {
      put.commits.emplace_back(node, 0);  // decided again, waiting, by CollectCommits
    }
  }
  return Status::OK();
}

// Collects the COMMITs of `put` (learning the addresses they return); a node whose COMMIT
// failed (a partition moved, a connection lost) is sent the decision again by Decide, which
// follows moves and waits. The transaction is committed in any case: every PREPARE was
// acknowledged (a server that misses the COMMIT resolves it with its siblings).
void CollectCommits(Client::Impl& c, WriteAheadPut& put) {
  const CommitDeadline deadline(c);
  std::vector<uint64_t> ids;
  for (const auto& [node, id] : put.commits) {
    if (id != 0) ids.push_back(id);
  }
  const bool waited = c.Wait(ids).ok();
  std::map<uint32_t, std::vector<PartitionId>> again;
  for (const auto& [node, id] : put.commits) {
    PendingCall reply;
    Status st = waited && id != 0 ? c.TakeReply(id, &reply) : Status::Unavailable("not sent");
    if (st.ok()) {
      if (put.learn) LearnAddresses(c, node, reply);
      continue;
    }
    again[node] = put.parts_by_node[node];
  }
  if (!again.empty()) {
    Status st = Decide(c, Op::kCommit, put.ts, again);
    if (!st.ok()) {
      RAMP_WARN(
          "COMMIT %s (written ahead) not acknowledged everywhere (%s); servers will "
          "resolve it",
          put.ts.ToString().c_str(), st.ToString().c_str());
    }
  }
  put.commits.clear();
  c.stats.transactions_committed++;
}

bool CommitsReplied(Client::Impl& c, const WriteAheadPut& put) {
  std::vector<uint64_t> ids;
  for (const auto& [node, id] : put.commits) {
    if (id != 0) ids.push_back(id);
  }
  return c.Replied(ids);
}

// How many PUTs may have their PREPAREs unanswered, counting the one the caller sends next,
// and how many may be in flight at all, before the caller waits for the oldest. Each wait
// for a server is a point where the caller sleeps and must be woken and scheduled again:
// on a machine whose cores are all busy that costs milliseconds, so the caller goes on while
// the servers still work on earlier pieces, and only waits when they fall that far behind.
constexpr size_t kMaxPreparing = 3;
constexpr size_t kMaxInFlight = 6;

// Moves the writes ahead in flight on without waiting where it can: PUTs whose PREPAREs are
// all answered get their COMMITs sent, PUTs whose COMMITs are answered are collected (their
// addresses learnt). Beyond the bounds above, the oldest are waited for. The first failure
// is returned.
Status Advance(Client::Impl& c, WriteBatch* batch) {
  Status first;
  auto note = [&](const Status& st) {
    if (!st.ok() && first.ok()) first = st;
  };
  size_t preparing = 0;
  for (WriteAheadPut& put : c.write_ahead) {
    if (put.prepares.empty()) continue;
    if (c.Replied(put.prepares)) {
      note(CollectPrepares(c, put, batch, false));
    } else {
      preparing++;
    }
  }
  for (WriteAheadPut& put : c.write_ahead) {
    if (preparing + 1 <= kMaxPreparing) break;
    if (put.prepares.empty()) continue;
    note(CollectPrepares(c, put, batch, false));  // the oldest, waiting
    preparing--;
  }
  // PUTs whose PREPAREs failed were aborted and have nothing left in flight.
  std::erase_if(c.write_ahead,
                [](const WriteAheadPut& p) { return p.prepares.empty() && p.commits.empty(); });
  while (!c.write_ahead.empty()) {
    WriteAheadPut& put = c.write_ahead.front();
    const bool full = c.write_ahead.size() + 1 > kMaxInFlight;
    if (!put.prepares.empty()) {
      if (!full) break;
      note(CollectPrepares(c, put, batch, false));
    }
    if (!put.commits.empty()) {
      if (!full && !CommitsReplied(c, put)) break;
      CollectCommits(c, put);
    }
    c.write_ahead.pop_front();
  }
  return first;
}

}  // namespace

Status Client::WriteAhead(WriteBatch& batch, const KeyspaceRef& ks,
                          std::span<const EntryKey> keys) {
  Impl& c = *impl_;
  if (c.options.protocol == Protocol::kS2pl) return Status::OK();  // Write sends them
  c.keyspaces[ks.id] = KeyspaceDef{ks.buckets == 0 ? c.default_buckets : ks.buckets, ks.grouped};
  Status advanced = Advance(c, &batch);
  if (!advanced.ok()) return advanced;

  WriteAheadPut put;
  put.keyspace = ks.id;
  std::vector<std::string> row_keys;  // the items' keys point here: never reallocated
  row_keys.reserve(keys.size());
  std::vector<WriteItem> items;
  items.reserve(keys.size());
  put.keys.reserve(keys.size());
  // The entries marked streamed once every PREPARE is sent: found once, here. The batch is
  // the caller's (not const) and nothing is added to it until then, so they stay put.
  std::vector<BatchEntry*> marks;
  marks.reserve(keys.size());
  const WriteBatch::Keyspace* written = batch.Of(ks.id);
  if (written == nullptr) return Status::OK();
  for (const EntryKey& k : keys) {
    const BatchEntry* w = written->Find(k);
    if (w == nullptr || !w->inserted || w->deleted || w->streamed) continue;
    marks.push_back(const_cast<BatchEntry*>(w));
    row_keys.push_back(ks.grouped ? EncodeGroupKey(RowKey(k.group), RowKey(k.rowid))
                                  : RowKey(k.rowid));
    WriteItem& it = items.emplace_back();
    it.keyspace = ks.id;
    it.key = row_keys.back();
    it.value = w->value;
    it.grouped = ks.grouped;
    put.keys.push_back(k);
  }
  if (items.size() < 2) return Status::OK();  // left to Write
  std::vector<PartitionId> parts(items.size());
  for (size_t i = 0; i < items.size(); i++) parts[i] = c.PartitionOf(ks.id, items[i].key);
  const TxnMetadata meta = PlanMetadata(items, parts);
  std::string own;
  const CommitDeadline deadline(c);
  RAMP_RETURN_IF_ERROR(c.ResolveOwners(parts));
  put.ts = Timestamp{c.clock.Now(), c.client_id};
  put.learn = LearnsAddresses(c, c.write_ahead_items + items.size());
  // A node's items in messages of bounded size, as RampCommit sends them.
  std::map<uint32_t, protocol::PrepareRequest> open;
  std::map<uint32_t, size_t> open_bytes;
  std::string body;
  Status send_error;
  auto send = [&](uint32_t node) {
    protocol::PrepareRequest& req = open[node];
    if (req.items.empty()) return;
    body.clear();
    protocol::Encode(req, &body);
    uint64_t id = 0;
    Status st = c.Call(node, c.WriteChannel(), Op::kPrepare,
                       static_cast<uint32_t>(req.items.size()), body, &id);
    if (st.ok()) {
      put.prepares.push_back(id);
    } else if (send_error.ok()) {
      send_error = st;
    }
    req.items.clear();
    open_bytes[node] = 0;
  };
  std::vector<std::string> item_metadata;
  if (meta.mode == record::Metadata::Mode::kKeys) item_metadata.resize(items.size());
  for (size_t i = 0; i < items.size() && send_error.ok(); i++) {
    const uint32_t node = c.OwnerOf(parts[i]);
    protocol::PrepareRequest& req = open[node];
    req.ts = put.ts;
    protocol::PrepareItem it;
    it.part = parts[i];
    it.key = items[i].key;
    it.value = items[i].value;
    it.flags = static_cast<uint8_t>(ks.grouped ? protocol::kPutGrouped : 0);
    if (meta.mode == record::Metadata::Mode::kKeys) {
      ItemMetadata(meta, i, &item_metadata[i]);
      it.metadata = item_metadata[i];
    } else {
      it.metadata = meta.partitions_encoded;
    }
    const size_t bytes = it.key.size() + it.value.size() + it.metadata.size() + 64;
    if (req.items.size() >= kMaxItemsPerMessage || open_bytes[node] + bytes > kMaxBytesPerMessage) {
      send(node);
      req.ts = put.ts;
    }
    req.items.push_back(it);
    open_bytes[node] += bytes;
    auto& node_parts = put.parts_by_node[node];
    if (std::find(node_parts.begin(), node_parts.end(), parts[i]) == node_parts.end()) {
      node_parts.push_back(parts[i]);
    }
  }
  for (auto& [node, req] : open) {
    if (send_error.ok()) send(node);
  }
  if (!send_error.ok()) {
    // Nothing of it commits: aborted where it went (its entries were never marked).
    CollectPrepares(c, put, nullptr, /*abort=*/true);
    return send_error;
  }
  for (BatchEntry* w : marks) w->streamed = true;  // WriteBatch::SetStreamed
  c.write_ahead_items += items.size();
  c.write_ahead.push_back(std::move(put));
  return Status::OK();
}

Status Client::FinishWriteAhead(WriteBatch* batch, bool abort) {
  Impl& c = *impl_;
  Status first;
  for (WriteAheadPut& put : c.write_ahead) {
    if (put.prepares.empty()) continue;
    Status st = CollectPrepares(c, put, batch, abort);
    if (!st.ok() && first.ok() && !abort) first = st;
  }
  for (WriteAheadPut& put : c.write_ahead) {
    if (!put.commits.empty()) CollectCommits(c, put);
  }
  c.write_ahead.clear();
  c.write_ahead_items = 0;
  return first;
}

bool Client::WritingAhead() const {
  return !impl_->write_ahead.empty();
}

}  // namespace ramp
