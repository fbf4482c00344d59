// RAMP-Fast GET (paper 000 Algorithm 3; Bailis et al. 2014): round 1 reads each key's latest
// committed version — one-sided at a cached address (GET*) where possible, otherwise by
// request (GET+ / rpc), which also returns the address; the metadata of what came back says
// which version each key must at least have; round 2 fetches exactly those versions.
#include <algorithm>
#include <map>
#include <unordered_map>

#include "client/transaction_state.h"
#include "protocol/page_messages.h"
#include "ramp/log.h"

namespace ramp {
namespace {

using protocol::ItemStatus;
using protocol::Op;

// A partition met on the move is retried (with MoveBackoff) this many times.
constexpr int kMaxMoves = 64;
constexpr size_t kMaxItemsPerMessage = 8192;
constexpr int kMaxReadRetries = 5;
constexpr size_t kMaxOneSidedItems = 512;
constexpr uint32_t kMaxFastRecordBytes = 64 * 1024;

// Takes a GET reply's item into the slot.
void Accept(ReadSlot& s, const protocol::GetResult& r) {
  s.have = true;
  s.ts = r.ts;
  if (r.status == ItemStatus::kOk) {
    s.tombstone = (r.flags & record::kRecordTombstone) != 0;
    s.value.assign(r.value);
    s.metadata.assign(r.metadata);
  } else {
    s.tombstone = true;  // never written (ts zero) or nothing at that timestamp
    s.value.clear();
    s.metadata.clear();
  }
}

// Checks a record copied one-sided: it must be the committed version of exactly this key,
// in the copy of the partition the address was learnt from (its epoch): a stale address may
// point at reused memory, or at the copy a migration left behind, whose records lost the
// valid bit when it stopped serving. *v views into `record`.
bool CheckOneSided(std::string_view record, const PartitionId& part, std::string_view key,
                   uint32_t record_epoch, bool trust, record::RecordView* v) {
  const auto* bytes = reinterpret_cast<const uint8_t*>(record.data());
  if (trust) {
    // Debug (ClientOptions::debug_trust_one_sided): whatever is there.
    if (record.size() < record::kRecordHeaderBytes) return false;
    *v = record::PeekRecord(bytes);
    return v->total_len <= record.size() && v->total_len >= record::kRecordHeaderBytes &&
           record::kRecordHeaderBytes + v->key.size() + v->value.size() + v->metadata.size() <=
               record.size();
  }
  return record::DecodeRecord(bytes, record.size(), v).ok() && v->kind == record::kKindVersion &&
         v->valid() && v->keyspace == part.keyspace && v->bucket == part.bucket && v->key == key &&
         v->epoch == record_epoch;
}

bool AcceptOneSided(ReadSlot& s, const Timestamp& snapshot, bool trust) {
  if (!s.one_sided_status.ok()) return false;
  record::RecordView v;
  if (!CheckOneSided(s.record, s.part, s.key, s.record_epoch, trust, &v)) return false;
  // A snapshot read wants the newest version at or before the snapshot: a newer current
  // version sends the key to the request path (kGetSnapshot).
  if (!snapshot.zero() && v.ts > snapshot) return false;
  s.have = true;
  s.ts = v.ts;
  s.tombstone = v.tombstone();
  s.value.assign(v.value);
  s.metadata.assign(v.metadata);
  return true;
}

// GET*: posts a one-sided read of the slot's record if its address is cached and learnt
// under the placement this client knows; *found: an address was cached; *node: its owner.
bool PostOne(Client::Impl& c, ReadSlot& s, bool* found, uint32_t* node) {
  s.one_sided = false;
  OneSidedAddress a;
  if (!c.addresses->Lookup(s.keyspace, s.key, &a)) return false;
  *found = true;
  const auto pl = c.placements.find(s.part);
  const uint32_t owner = pl != c.placements.end() ? pl->second.owner : c.OwnerOf(s.part);
  const uint64_t epoch = pl != c.placements.end() ? pl->second.epoch : 0;
  NodeChannel* ch = nullptr;
  // An address learnt under another placement (the partition moved since) is not used.
  // It is dropped when this client knows a newer placement; an address newer than what
  // this client knows (learnt by another client sharing the cache) stays for the others.
  if (a.node != owner || a.placement_epoch != epoch ||
      !c.Connected(owner, ChannelKind::kFast, &ch).ok() || ch->hello().instance != a.instance) {
    if (a.placement_epoch <= epoch) c.addresses->Erase(s.keyspace, s.key, a);
    return false;
  }
  s.address = a;
  s.record.resize(a.length);
  s.record_epoch = a.record_epoch;
  s.one_sided = true;
  s.one_sided_done = false;
  ReadSlot* sp = &s;
  Status st = ch->conn()->PostRead(s.record.data(), ch->hello().arena, a.offset, a.length,
                                   [sp](const Status& done) {
                                     sp->one_sided_done = true;
                                     sp->one_sided_status = done;
                                   });
  if (!st.ok()) {
    s.one_sided = false;  // Busy or a closed connection: the GET+ fallback handles it
    return false;
  }
  c.stats.one_sided_reads++;
  *node = owner;
  return true;
}

// Round 1 for GET*: post one-sided reads for slots whose address is cached.
Status PostOneSided(Client::Impl& c, std::vector<ReadSlot>& slots, std::vector<size_t>& todo,
                    std::vector<uint32_t>* nodes) {
  uint64_t found = 0;
  for (size_t i : todo) {
    bool f = false;
    uint32_t owner = 0;
    const bool posted = PostOne(c, slots[i], &f, &owner);
    found += f;
    if (posted && std::find(nodes->begin(), nodes->end(), owner) == nodes->end()) {
      nodes->push_back(owner);
    }
  }
  c.addresses->Count(todo.size(), found, 0, 0);
  return Status::OK();
}

// What round 1 does with a slot whose one-sided read is over: true if the record is taken;
// false sends the slot to the request path (dropping a stale address).
bool TakeOneSided(Client::Impl& c, ReadSlot& s, const Timestamp& snapshot, uint64_t* hits,
                  uint64_t* fallbacks) {
  if (s.one_sided && s.one_sided_done &&
      AcceptOneSided(s, snapshot, c.options.debug_trust_one_sided)) {
    (*hits)++;
    // No reply header brought the server's clock: the version's own timestamp is what this
    // client's clock must pass (a conditional write of it must get a later one).
    c.clock.Observe(s.ts.time);
    c.stats.one_sided_hits++;
    c.one_sided_load[s.part]++;
    c.one_sided_unreported++;
    return true;
  }
  if (s.one_sided && !snapshot.zero() && s.one_sided_done && s.one_sided_status.ok()) {
    // Possibly just newer than the snapshot: the address may still be current.
    s.have = false;
    s.ts = Timestamp();
    s.value.clear();
    s.metadata.clear();
  } else if (s.one_sided) {
    // Invalid bit, reused memory, or a failed read: the address is stale (GET+ below
    // returns the current one).
    c.stats.one_sided_fallbacks++;
    (*fallbacks)++;
    c.addresses->Erase(s.keyspace, s.key, s.address);
  }
  return false;
}

// Sends GET requests for the listed slots (grouped by owner) and takes the replies.
// Slots whose partition moved stay without a version (the caller retries them).
// at_ts: per slot, the timestamp to read (zero: latest committed).
Status GetByRequest(Client::Impl& c, std::vector<ReadSlot>& slots, const std::vector<size_t>& todo,
                    const std::vector<Timestamp>& at_ts, bool want_address, bool at_is_snapshot,
                    std::vector<ItemStatus>* statuses) {
  // Per node, in batches of bounded size (a large read is several pipelined messages).
  std::vector<std::pair<uint32_t, std::vector<size_t>>> by_node;
  {
    std::map<uint32_t, size_t> open;
    for (size_t k = 0; k < todo.size(); k++) {
      const uint32_t node = c.OwnerOf(slots[todo[k]].part);
      auto it = open.find(node);
      if (it == open.end() || by_node[it->second].second.size() >= kMaxItemsPerMessage) {
        open[node] = by_node.size();
        by_node.emplace_back(node, std::vector<size_t>());
      }
      by_node[open[node]].second.push_back(k);
    }
  }
  std::vector<uint64_t> ids;
  std::vector<std::pair<uint32_t, std::vector<size_t>*>> sent;
  std::string body;
  for (auto& [node, ks] : by_node) {
    protocol::GetRequest req;
    req.flags = static_cast<uint8_t>((want_address ? protocol::kGetWantAddress : 0) |
                                     (at_is_snapshot ? protocol::kGetSnapshot : 0));
    req.items.reserve(ks.size());
    for (size_t k : ks) {
      const ReadSlot& s = slots[todo[k]];
      req.items.push_back(protocol::GetItem{s.part, s.key, at_ts[k]});
    }
    body.clear();
    protocol::Encode(req, &body);
    uint64_t id = 0;
    Status st =
        c.Call(node, c.ReadChannel(), Op::kGet, static_cast<uint32_t>(ks.size()), body, &id);
    if (!st.ok()) {
      for (uint64_t i : ids) c.calls.erase(i);
      return st;
    }
    ids.push_back(id);
    sent.emplace_back(node, &ks);
  }
  RAMP_RETURN_IF_ERROR(c.Wait(ids));
  statuses->assign(todo.size(), ItemStatus::kError);
  Status result;
  for (size_t n = 0; n < ids.size(); n++) {
    PendingCall reply;
    Status st = c.TakeReply(ids[n], &reply);
    protocol::GetReply gr;
    if (st.ok()) st = protocol::Decode(reply.body(), reply.header.count, &gr);
    const auto& ks = *sent[n].second;
    if (st.ok() && gr.results.size() != ks.size()) {
      st = Status::Corruption("GET reply with " + std::to_string(gr.results.size()) +
                              " results for " + std::to_string(ks.size()) + " items");
    }
    if (!st.ok()) {
      if (result.ok()) result = st.Annotate(c.NodeName(sent[n].first));
      continue;
    }
    NodeChannel* ch = nullptr;
    const bool fast = want_address && c.Connected(sent[n].first, ChannelKind::kFast, &ch).ok();
    for (size_t j = 0; j < ks.size(); j++) {
      const size_t k = ks[j];
      ReadSlot& s = slots[todo[k]];
      const auto& r = gr.results[j];
      (*statuses)[k] = r.status;
      switch (r.status) {
        case ItemStatus::kOk:
        case ItemStatus::kNotFound:
          Accept(s, r);
          if (fast && r.status == ItemStatus::kOk && r.address.valid()) {
            OneSidedAddress a;
            a.node = sent[n].first;
            a.length = r.address.length;
            a.instance = ch->hello().instance;
            a.placement_epoch = c.EpochOf(s.part);
            a.offset = r.address.offset;
            a.record_epoch = r.address.epoch;
            c.addresses->Store(s.keyspace, s.key, a);
          }
          break;
        case ItemStatus::kMoved:
          c.NoteMoved(s.part, r.owner, r.epoch);
          break;
        case ItemStatus::kCollected:
          break;
        case ItemStatus::kError:
          if (result.ok()) {
            result = Status::InvalidArgument("server refused to read key of " +
                                             std::to_string(s.key.size()) + " bytes");
          }
          break;
      }
    }
  }
  return result;
}

Status RoundOne(Client::Impl& c, std::vector<ReadSlot>& slots, const Timestamp& snapshot) {
  std::vector<size_t> todo(slots.size());
  for (size_t i = 0; i < slots.size(); i++) todo[i] = i;
  // Large reads (scans probing thousands of keys) go by request: one GET per node is cheaper
  // than a one-sided read per key, and caching thousands of addresses per read would cost
  // more (a string-keyed map insertion per key) than it ever saves.
  const bool get_star =
      c.options.read_path == ReadPath::kGetStar && slots.size() <= kMaxOneSidedItems;
  // One key whose placement is cached (GET*'s common case): its one-sided read without
  // the bookkeeping of a batch; if the record is not taken, the loop below asks by request.
  bool tried_one_sided = false;
  if (get_star && slots.size() == 1 && c.placements.count(slots[0].part) != 0) {
    ReadSlot& s = slots[0];
    bool found = false;
    uint32_t node = 0;
    const bool posted = PostOne(c, s, &found, &node);
    c.addresses->Count(1, found, 0, 0);
    if (posted) {
      RAMP_RETURN_IF_ERROR(c.WaitOneSided(std::span<const uint32_t>(&node, 1)));
      uint64_t hits = 0, fallbacks = 0;
      const bool taken = TakeOneSided(c, s, snapshot, &hits, &fallbacks);
      c.addresses->Count(0, 0, hits, fallbacks);
      if (taken) return Status::OK();
    }
    tried_one_sided = true;
  }
  for (int attempt = 0; attempt < kMaxMoves && !todo.empty(); attempt++) {
    c.MoveBackoff(attempt);
    std::vector<PartitionId> parts;
    for (size_t i : todo) parts.push_back(slots[i].part);
    RAMP_RETURN_IF_ERROR(c.ResolveOwners(parts));
    if (get_star && !(attempt == 0 && tried_one_sided)) {
      std::vector<uint32_t> nodes;
      RAMP_RETURN_IF_ERROR(PostOneSided(c, slots, todo, &nodes));
      if (!nodes.empty()) RAMP_RETURN_IF_ERROR(c.WaitOneSided(nodes));
      std::vector<size_t> rest;
      uint64_t hits = 0, fallbacks = 0;
      for (size_t i : todo) {
        if (!TakeOneSided(c, slots[i], snapshot, &hits, &fallbacks)) rest.push_back(i);
      }
      c.addresses->Count(0, 0, hits, fallbacks);
      todo.swap(rest);
      if (todo.empty()) break;
    }
    std::vector<Timestamp> latest(todo.size(), snapshot);
    std::vector<ItemStatus> statuses;
    RAMP_RETURN_IF_ERROR(
        GetByRequest(c, slots, todo, latest, get_star, !snapshot.zero(), &statuses));
    std::vector<size_t> rest;
    for (size_t k = 0; k < todo.size(); k++) {
      if (statuses[k] == ItemStatus::kMoved) rest.push_back(todo[k]);
    }
    todo.swap(rest);
  }
  if (!todo.empty()) {
    return Status::Unavailable("partition " + slots[todo[0]].part.ToString() +
                               " kept moving while it was read");
  }
  return Status::OK();
}

// What round 2 must fetch for one slot: the version at `ts`. `exact` when the metadata names
// the key (the version must exist); otherwise the transaction only touched the key's
// partition (a bulk write) and a miss means it did not write this key.
struct Need {
  Timestamp ts;
  bool exact = false;
};

void ComputeNeeds(const std::vector<ReadSlot>& slots, std::vector<Need>* needs) {
  needs->assign(slots.size(), Need());
  std::unordered_map<std::string, size_t> by_key;
  std::unordered_map<PartitionId, std::vector<size_t>, PartitionIdHash> by_part;
  for (size_t i = 0; i < slots.size(); i++) {
    by_key.emplace(AddressKey(slots[i].keyspace, slots[i].key), i);
    by_part[slots[i].part].push_back(i);
    if (!slots[i].required.zero()) (*needs)[i] = Need{slots[i].required, false};
  }
  // A bulk transaction names its partitions in every version it wrote: handle each such
  // transaction once, not once per version read (a scan-sized read would go quadratic).
  std::unordered_map<Timestamp, bool, TimestampHash> bulk_done;
  record::Metadata md;
  for (const ReadSlot& s : slots) {
    if (s.metadata.empty() || s.ts.zero()) continue;
    if (bulk_done.count(s.ts)) continue;
    if (!record::DecodeMetadata(s.metadata, &md).ok()) continue;
    if (md.mode == record::Metadata::Mode::kKeys) {
      for (const auto& sib : md.keys) {
        auto it = by_key.find(AddressKey(sib.keyspace, sib.key));
        if (it == by_key.end()) continue;
        Need& n = (*needs)[it->second];
        if (s.ts > n.ts || (s.ts == n.ts && !n.exact)) n = Need{s.ts, true};
      }
    } else if (md.mode == record::Metadata::Mode::kPartitions) {
      bulk_done.emplace(s.ts, true);
      for (const auto& p : md.partitions) {
        auto it = by_part.find(p);
        if (it == by_part.end()) continue;
        for (size_t j : it->second) {
          Need& n = (*needs)[j];
          if (s.ts > n.ts) n = Need{s.ts, false};
        }
      }
    }
  }
}

// The server instance behind a node's fast channel (0: not connected).
uint64_t InstanceOf(Client::Impl& c, uint32_t node) {
  NodeChannel* ch = nullptr;
  if (node >= c.nodes.size() || !c.Connected(node, ChannelKind::kFast, &ch).ok()) return 0;
  return ch->hello().instance;
}

// Whether round 1's read of `part` at `snapshot` is final: the partition was closed at that
// snapshot or a later one (every transaction at or below it decided there, none can prepare
// there any more) before this read began, under the placement and server instance it still
// has. Round 1 then returned the newest committed version at or below the snapshot, which
// no transaction at or below it can change: any version a sibling requires at or below the
// snapshot is that one or older.
bool ClosedAt(Client::Impl& c, const PartitionId& part, const Timestamp& snapshot) {
  auto it = c.closed_partitions.find(part);
  if (it == c.closed_partitions.end() || it->second.at.zero() || it->second.at < snapshot) {
    return false;
  }
  const auto pl = c.placements.find(part);
  return pl != c.placements.end() && pl->second.owner == it->second.owner &&
         pl->second.epoch == it->second.epoch &&
         InstanceOf(c, it->second.owner) == it->second.instance;
}

// Closes partitions at `snapshot` as a scan does (SCAN_OPEN: the owner raises its watermark
// to the snapshot and says how many transactions at or below it are still prepared there),
// so that later reads of the statement need no round 2 there. Sent before round 2's GETs and
// taken after them: no wait of its own. Best effort: a partition that moved, a failed
// request, or one with undecided transactions stays open.
struct Closing {
  std::vector<uint64_t> ids;
  std::vector<std::vector<PartitionId>> parts;
  std::vector<uint32_t> nodes;
};

void SendCloses(Client::Impl& c, const std::vector<PartitionId>& parts, const Timestamp& snapshot,
                Closing* out) {
  std::map<uint32_t, std::vector<PartitionId>> by_node;
  for (const PartitionId& p : parts) {
    if (c.placements.count(p) == 0) continue;
    by_node[c.OwnerOf(p)].push_back(p);
  }
  for (auto& [node, ps] : by_node) {
    protocol::ScanOpenRequest req;
    req.snapshot = snapshot;
    req.partitions = ps;
    std::string body;
    protocol::Encode(req, &body);
    uint64_t id = 0;
    if (!c.Call(node, c.ReadChannel(), Op::kScanOpen, static_cast<uint32_t>(ps.size()), body, &id)
             .ok()) {
      continue;
    }
    out->ids.push_back(id);
    out->parts.push_back(std::move(ps));
    out->nodes.push_back(node);
  }
}

void TakeCloses(Client::Impl& c, Closing& closing, const Timestamp& snapshot) {
  if (closing.ids.empty()) return;
  if (!c.Wait(closing.ids).ok()) return;  // Wait forgot the calls
  for (size_t n = 0; n < closing.ids.size(); n++) {
    PendingCall reply;
    protocol::ScanOpenReply r;
    if (!c.TakeReply(closing.ids[n], &reply).ok() ||
        !protocol::Decode(reply.body(), reply.header.count, &r).ok() ||
        r.partitions.size() != closing.parts[n].size()) {
      continue;
    }
    const uint64_t instance = InstanceOf(c, closing.nodes[n]);
    for (size_t k = 0; k < r.partitions.size(); k++) {
      const PartitionId& p = closing.parts[n][k];
      const auto pl = c.placements.find(p);
      if (r.partitions[k].pending != 0 || pl == c.placements.end() ||
          pl->second.owner != closing.nodes[n] || instance == 0) {
        continue;
      }
      ClosedPartition& cp = c.closed_partitions[p];
      if (!cp.at.zero() && snapshot < cp.at && cp.owner == closing.nodes[n] &&
          cp.epoch == pl->second.epoch && cp.instance == instance) {
        continue;  // closed at a later snapshot already
      }
      cp.at = snapshot;
      cp.owner = closing.nodes[n];
      cp.epoch = pl->second.epoch;
      cp.instance = instance;
      c.stats.partitions_closed++;
    }
  }
}

// Round 2: fetch by timestamp where round 1 returned an older version than some sibling
// says the key must have. Returns Aborted when the whole read must be retried.
//
// At a snapshot, a key of a partition closed at it (ClosedAt) needs no round 2 for versions
// at or below the snapshot. A bulk write names partitions, not keys, so a multi-key read of
// bulk-loaded rows would otherwise fetch by timestamp every row an older load transaction
// wrote in a partition a newer one touched (to find that the newer one did not write it):
// such a read closes the partitions it met (SendCloses), and the statement's later reads
// there skip round 2.
Status RoundTwo(Client::Impl& c, std::vector<ReadSlot>& slots, const Timestamp& snapshot) {
  // One key: its own metadata names only itself (at the version read), so only what the
  // caller requires can be newer than round 1 (ComputeNeeds would find the same).
  if (slots.size() == 1 && (slots[0].required.zero() || !(slots[0].ts < slots[0].required))) {
    return Status::OK();
  }
  std::vector<Need> needs;
  ComputeNeeds(slots, &needs);
  std::vector<size_t> todo;
  std::vector<Timestamp> at;
  std::vector<PartitionId> to_close;
  std::unordered_map<PartitionId, bool, PartitionIdHash> closed;  // ClosedAt, per partition
  for (size_t i = 0; i < slots.size(); i++) {
    if (needs[i].ts.zero() || !(slots[i].ts < needs[i].ts)) continue;
    if (!snapshot.zero() && needs[i].ts <= snapshot && !c.options.debug_no_round2_closes) {
      auto [it, fresh] = closed.try_emplace(slots[i].part, false);
      if (fresh) {
        it->second = ClosedAt(c, slots[i].part, snapshot);
        ClosedPartition& cp = c.closed_partitions[slots[i].part];
        if (!it->second && !needs[i].exact && cp.tried < snapshot) {
          cp.tried = snapshot;
          to_close.push_back(slots[i].part);
        }
      }
      if (it->second) {
        c.stats.round2_skipped++;
        continue;
      }
    }
    todo.push_back(i);
    at.push_back(needs[i].ts);
  }
  Closing closing;
  if (!to_close.empty()) SendCloses(c, to_close, snapshot, &closing);
  if (todo.empty()) {
    TakeCloses(c, closing, snapshot);
    return Status::OK();
  }
  c.stats.round2_reads += todo.size();
  // Round-2 replies overwrite the slots; keep round 1 for keys a bulk transaction turns
  // out not to have written.
  std::vector<ReadSlot> round1;
  round1.reserve(todo.size());
  for (size_t i : todo) round1.push_back(slots[i]);
  std::vector<ItemStatus> statuses;
  Status got = GetByRequest(c, slots, todo, at, false, false, &statuses);
  TakeCloses(c, closing, snapshot);
  RAMP_RETURN_IF_ERROR(got);
  // Items whose partition moved meanwhile are asked again at the new owner.
  for (int attempt = 1; attempt < kMaxMoves; attempt++) {
    std::vector<size_t> moved;
    std::vector<Timestamp> moved_at;
    std::vector<PartitionId> parts;
    for (size_t k = 0; k < todo.size(); k++) {
      if (statuses[k] != ItemStatus::kMoved) continue;
      moved.push_back(k);
      moved_at.push_back(at[k]);
      parts.push_back(slots[todo[k]].part);
    }
    if (moved.empty()) break;
    c.MoveBackoff(attempt);
    RAMP_RETURN_IF_ERROR(c.ResolveOwners(parts));
    std::vector<size_t> moved_slots;
    for (size_t k : moved) moved_slots.push_back(todo[k]);
    std::vector<ItemStatus> again;
    RAMP_RETURN_IF_ERROR(GetByRequest(c, slots, moved_slots, moved_at, false, false, &again));
    for (size_t j = 0; j < moved.size(); j++) statuses[moved[j]] = again[j];
  }
  for (size_t k = 0; k < todo.size(); k++) {
    ReadSlot& s = slots[todo[k]];
    switch (statuses[k]) {
      case ItemStatus::kOk:
        break;
      case ItemStatus::kNotFound:
        // Round 1 found no version of the key at all and the partition has none at that
        // timestamp either (a prepared one would be returned): the key is gone, deleted
        // longer ago than the GC grace and forgotten by its server. The sibling that names
        // it is older than that deletion: the key reads as deleted.
        if (needs[todo[k]].exact && !round1[k].ts.zero()) {
          return Status::Aborted("round 2 found no version " + at[k].ToString() + " of a key");
        }
        s = std::move(round1[k]);
        break;
      case ItemStatus::kCollected:
        return Status::Aborted("round-2 version was garbage collected");
      case ItemStatus::kMoved:
        return Status::Aborted("partition moved during round 2");
      case ItemStatus::kError:
        return Status::Internal("round-2 read failed");
    }
  }
  return Status::OK();
}

}  // namespace

Status RampReadOneSided(Client::Impl& c, KeyspaceId keyspace, std::string_view key,
                        OneSidedRead* out, bool* taken) {
  *taken = false;
  const PartitionId part = c.PartitionOf(keyspace, key);
  const auto pl = c.placements.find(part);
  if (pl == c.placements.end()) return Status::OK();
  // The address and the record's view are the client's, reused: a fresh one would be
  // zeroed first (a rep stos the compiler emits, dearer than the rest of the lookup).
  OneSidedAddress& a = c.one_sided_address;
  if (!c.addresses->Lookup(keyspace, key, &a)) return Status::OK();
  // Only the plain case: an address of another placement or server instance (which RampRead
  // drops), or a channel to open, is left to RampRead.
  // A large record (its copy outweighs any bookkeeping) goes by RampRead too, so that the
  // buffer this client keeps stays small.
  if (a.node != pl->second.owner || a.placement_epoch != pl->second.epoch ||
      a.node >= c.nodes.size() || a.length > kMaxFastRecordBytes) {
    return Status::OK();
  }
  NodeChannel& ch =
      c.nodes[a.node].channels[static_cast<int>(c.Effective(a.node, ChannelKind::kFast))];
  if (!ch.is_open() || ch.hello().instance != a.instance) return Status::OK();
  std::string& buf = c.one_sided_buffer;
  buf.resize(a.length);
  // A completion that comes after this read gave up (a timeout) must not touch a later one.
  const uint64_t seq = ++c.one_sided_seq;
  c.one_sided_done = false;
  Client::Impl* cp = &c;
  if (!ch.conn()
           ->PostRead(buf.data(), ch.hello().arena, a.offset, a.length,
                      [cp, seq](const Status& done) {
                        if (cp->one_sided_seq != seq) return;
                        cp->one_sided_done = true;
                        cp->one_sided_status = done;
                      })
           .ok()) {
    return Status::OK();  // Busy or a closed connection: RampRead's GET+ handles it
  }
  c.stats.one_sided_reads++;
  const uint32_t node = a.node;
  RAMP_RETURN_IF_ERROR(c.WaitOneSided(std::span<const uint32_t>(&node, 1)));
  record::RecordView& v = c.one_sided_view;
  if (!c.one_sided_done || !c.one_sided_status.ok() ||
      !CheckOneSided(buf, part, key, a.record_epoch, c.options.debug_trust_one_sided, &v)) {
    // Invalid bit, reused memory, or a failed read: the address is stale (RampRead's GET+
    // returns the current one).
    c.stats.one_sided_fallbacks++;
    c.addresses->Count(1, 1, 0, 1);
    c.addresses->Erase(keyspace, key, a);
    return Status::OK();
  }
  *taken = true;
  c.stats.reads++;
  c.stats.one_sided_hits++;
  c.addresses->Count(1, 1, 1, 0);
  // As TakeOneSided: the version's timestamp is what this client's clock must pass.
  c.clock.Observe(v.ts.time);
  if (c.last_load == nullptr || !(c.last_load_part == part)) {
    c.last_load = &c.one_sided_load[part];
    c.last_load_part = part;
  }
  ++*c.last_load;
  out->ts = v.ts;
  out->tombstone = v.tombstone();
  out->value = v.value;
  out->metadata = v.metadata;
  // The report goes by request (no one-sided read): the views above stay valid.
  if (++c.one_sided_unreported >= Client::Impl::kLoadReportEvery) c.ReportLoad();
  return Status::OK();
}

Status RampRead(Client::Impl& c, std::vector<ReadSlot>& slots, const Timestamp& snapshot) {
  c.stats.reads++;
  for (int attempt = 0;; attempt++) {
    for (auto& s : slots) {
      s.have = false;
      s.ts = Timestamp();
    }
    RAMP_RETURN_IF_ERROR(RoundOne(c, slots, snapshot));
    if (c.one_sided_unreported >= Client::Impl::kLoadReportEvery) c.ReportLoad();
    if (c.options.disable_round2) return Status::OK();
    Status st = RoundTwo(c, slots, snapshot);
    if (!st.Is(Status::Code::kAborted)) return st;
    c.stats.read_retries++;
    if (attempt + 1 >= kMaxReadRetries) {
      // Every attempt lost a race with writers (the versions it needed were overwritten and
      // collected, or moved): a conflict the caller may retry, not an unreachable server
      // (which would also make PostgreSQL reopen its connections).
      return Status::Conflict("read could not complete: " + st.message() + " (" +
                              std::to_string(kMaxReadRetries) + " attempts)");
    }
  }
}

}  // namespace ramp
