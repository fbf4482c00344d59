// Transaction: the write buffer, read-your-writes overlay, and the dispatch to RAMP-Fast or
// the strict 2PL baseline.
#include <algorithm>
#include <unordered_map>

#include "client/transaction_state.h"

namespace ramp {

Transaction::Transaction(Client* client) : client_(client), state_(std::make_unique<State>()) {
  state_->txn_number = client->impl()->next_txn++;
}

Transaction::~Transaction() {
  if (!state_->finished) Abort();
}

std::unique_ptr<Transaction> Client::Begin() {
  return std::unique_ptr<Transaction>(new Transaction(this));
}

size_t Transaction::buffered_writes() const {
  return state_->writes.size();
}

namespace {
Status CheckSizes(const ClientOptions& o, std::string_view key, std::string_view value) {
  if (key.size() > o.max_key_bytes) {
    return Status::TooLarge("key of " + std::to_string(key.size()) +
                            " bytes exceeds the limit of " + std::to_string(o.max_key_bytes) +
                            " bytes");
  }
  if (value.size() > o.max_value_bytes) {
    return Status::TooLarge("value of " + std::to_string(value.size()) +
                            " bytes exceeds the limit of " + std::to_string(o.max_value_bytes) +
                            " bytes");
  }
  return Status::OK();
}
}  // namespace

Status Transaction::GetAll(std::span<const ReadItem> items, std::vector<ReadResult>* out) {
  Client::Impl& c = *client_->impl();
  if (state_->finished) return Status::InvalidArgument("transaction already finished");
  if (items.size() > c.options.max_batch_items) {
    return Status::TooLarge("read of " + std::to_string(items.size()) +
                            " items exceeds the batch limit of " +
                            std::to_string(c.options.max_batch_items));
  }
  out->assign(items.size(), ReadResult());
  std::vector<ReadSlot> slots;
  slots.reserve(items.size());
  for (size_t i = 0; i < items.size(); i++) {
    const ReadItem& it = items[i];
    RAMP_RETURN_IF_ERROR(CheckSizes(c.options, it.key, {}));
    // Read-your-writes: a buffered write answers without asking the servers.
    if (const BufferedWrite* w = state_->Find(it.keyspace, it.key)) {
      (*out)[i].found = !w->tombstone;
      (*out)[i].value = w->value;
      continue;
    }
    ReadSlot s;
    s.out = i;
    s.keyspace = it.keyspace;
    s.key = it.key;
    s.part = c.PartitionOf(it.keyspace, it.key);
    s.required = it.required;
    slots.push_back(std::move(s));
  }
  if (slots.empty()) return Status::OK();
  Status st = c.options.protocol == Protocol::kS2pl ? S2plRead(c, *state_, slots)
                                                    : RampRead(c, slots, state_->read_snapshot);
  RAMP_RETURN_IF_ERROR(st);
  for (auto& s : slots) {
    ReadResult& r = (*out)[s.out];
    r.ts = s.ts;
    r.found = s.have && !s.tombstone && !s.ts.zero();
    if (r.found) r.value = std::move(s.value);
    if (state_->return_metadata) r.metadata = std::move(s.metadata);
  }
  return Status::OK();
}

void Transaction::ReturnMetadata(bool on) {
  state_->return_metadata = on;
}

void Transaction::SetReadSnapshot(const Timestamp& snapshot) {
  state_->read_snapshot = snapshot;
}

Timestamp Transaction::SnapshotNow() const {
  // Every version this client wrote or saw is at or before its clock; every transaction that
  // committed before this moment on a clock-synchronized machine is at or before wall-clock
  // time (HLC time is milliseconds << 16: the whole current millisecond is included).
  const uint64_t clock = client_->impl()->clock.Peek();
  const uint64_t wall = (HybridClock::PhysicalNow() | 0xFFFF);
  return Timestamp{std::max(clock, wall), ~uint64_t{0}};
}

Status Transaction::Get(KeyspaceId keyspace, std::string_view key, ReadResult* out) {
  ReadItem item{keyspace, key, Timestamp()};
  std::vector<ReadResult> results;
  RAMP_RETURN_IF_ERROR(GetAll(std::span<const ReadItem>(&item, 1), &results));
  *out = std::move(results[0]);
  return Status::OK();
}

Status Transaction::GetGroup(KeyspaceId keyspace, std::string_view group,
                             std::vector<GroupEntry>* out) {
  Client::Impl& c = *client_->impl();
  out->clear();
  if (state_->finished) return Status::InvalidArgument("transaction already finished");
  PartitionId part{keyspace, BucketOf(group, client_->BucketsOf(keyspace))};
  protocol::GetGroupRequest req{part, group};
  std::string body;
  protocol::Encode(req, &body);
  protocol::GetGroupReply gr;
  PendingCall reply;
  for (int attempt = 0;; attempt++) {
    const PartitionId parts[1] = {part};
    RAMP_RETURN_IF_ERROR(c.ResolveOwners(parts));
    RAMP_RETURN_IF_ERROR(
        c.CallAndWait(c.OwnerOf(part), c.ReadChannel(), protocol::Op::kGetGroup, 0, body, &reply));
    RAMP_RETURN_IF_ERROR(protocol::Decode(reply.body(), reply.header.count, &gr));
    if (gr.status != protocol::ItemStatus::kMoved) break;
    c.NoteMoved(part, gr.owner, gr.epoch);
    if (attempt >= 3) return Status::Unavailable("partition " + part.ToString() + " kept moving");
  }
  std::unordered_map<std::string, size_t> by_suffix;
  record::Metadata md;
  for (const auto& e : gr.entries) {
    std::string_view g, suffix;
    if (!DecodeGroupKey(e.key, &g, &suffix) || g != group) continue;
    GroupEntry ge;
    ge.suffix.assign(suffix);
    ge.ts = e.ts;
    ge.value.assign(e.value);
    if (!e.metadata.empty() && record::DecodeMetadata(e.metadata, &md).ok() &&
        md.mode == record::Metadata::Mode::kKeys) {
      for (const auto& sib : md.keys) ge.siblings.emplace_back(sib.key, sib.keyspace);
    }
    by_suffix[ge.suffix] = out->size();
    out->push_back(std::move(ge));
  }
  // Overlay this transaction's buffered writes to the group.
  std::vector<bool> deleted(out->size(), false);
  for (const auto& w : state_->writes) {
    if (w.keyspace != keyspace) continue;
    std::string_view g, suffix;
    if (!DecodeGroupKey(w.key, &g, &suffix) || g != group) continue;
    auto it = by_suffix.find(std::string(suffix));
    if (w.tombstone) {
      if (it != by_suffix.end()) deleted[it->second] = true;
      continue;
    }
    GroupEntry ge;
    ge.suffix.assign(suffix);
    ge.value = w.value;
    if (it != by_suffix.end()) {
      (*out)[it->second] = std::move(ge);
      deleted[it->second] = false;
    } else {
      by_suffix.emplace(std::string(suffix), out->size());
      out->push_back(std::move(ge));
      deleted.push_back(false);
    }
  }
  size_t kept = 0;
  for (size_t i = 0; i < out->size(); i++) {
    if (deleted[i]) continue;
    // No self-move: libstdc++ clears a string moved onto itself.
    if (kept != i) (*out)[kept] = std::move((*out)[i]);
    kept++;
  }
  out->resize(kept);
  return Status::OK();
}

namespace {
void Buffer(Transaction::State& t, BufferedWrite w) {
  std::string k = AddressKey(w.keyspace, w.key);
  auto it = t.index.find(k);
  if (it != t.index.end()) {
    BufferedWrite& old = t.writes[it->second];
    // The first expected version of a key is the one the transaction read from the servers.
    if (old.has_expected && !w.has_expected) {
      w.has_expected = true;
      w.expected = old.expected;
    }
    old = std::move(w);
    return;
  }
  t.index.emplace(std::move(k), t.writes.size());
  t.writes.push_back(std::move(w));
}
}  // namespace

Status Transaction::Put(KeyspaceId keyspace, std::string_view key, std::string_view value,
                        const Timestamp* expected) {
  if (state_->finished) return Status::InvalidArgument("transaction already finished");
  RAMP_RETURN_IF_ERROR(CheckSizes(client_->options(), key, value));
  BufferedWrite w;
  w.keyspace = keyspace;
  w.key.assign(key);
  w.value.assign(value);
  if (expected) {
    w.has_expected = true;
    w.expected = *expected;
  }
  Buffer(*state_, std::move(w));
  return Status::OK();
}

Status Transaction::Delete(KeyspaceId keyspace, std::string_view key, const Timestamp* expected) {
  if (state_->finished) return Status::InvalidArgument("transaction already finished");
  RAMP_RETURN_IF_ERROR(CheckSizes(client_->options(), key, {}));
  BufferedWrite w;
  w.keyspace = keyspace;
  w.key.assign(key);
  w.tombstone = true;
  if (expected) {
    w.has_expected = true;
    w.expected = *expected;
  }
  Buffer(*state_, std::move(w));
  return Status::OK();
}

Status Transaction::Commit(Timestamp* commit_ts) {
  if (state_->finished) return Status::InvalidArgument("transaction already finished");
  Client::Impl& c = *client_->impl();
  if (const size_t writes = state_->writes.size(); writes > c.options.max_batch_items) {
    Abort();  // clears the writes: the message counts them before
    return Status::TooLarge("transaction of " + std::to_string(writes) +
                            " writes exceeds the batch limit of " +
                            std::to_string(c.options.max_batch_items));
  }
  Status st = c.options.protocol == Protocol::kS2pl ? S2plCommit(c, *state_)
                                                    : RampCommit(c, state_->writes, commit_ts);
  state_->finished = true;
  state_->writes.clear();
  state_->index.clear();
  return st;
}

void Transaction::Abort() {
  if (state_->finished) return;
  state_->finished = true;
  state_->writes.clear();
  state_->index.clear();
  if (client_->options().protocol == Protocol::kS2pl) S2plRelease(*client_->impl(), *state_);
}

}  // namespace ramp
