// Transaction: a WriteBatch with read-your-writes reads over it, for clients that manage
// their own keys (benchmarks, tools, tests). The PostgreSQL extension uses ReadSession and
// WriteBatch + Client::Write instead.
#include <algorithm>
#include <unordered_map>

#include "client/transaction_state.h"

namespace ramp {

void TransactionStateDeleter::operator()(Transaction::State* state) const {
  delete state;
}

Transaction::Transaction(Client* client) : client_(client) {
  Client::Impl& c = *client->impl();
  if (c.spare_transaction_state != nullptr) {
    // The last transaction's state (emptied when it ended), as new.
    state_.reset(c.spare_transaction_state.release());
    state_->locks.locked_nodes.clear();
    state_->finished = false;
    state_->return_metadata = false;
    state_->read_snapshot = Timestamp();
  } else {
    state_ = std::make_unique<State>();
  }
  state_->locks.txn_number = c.next_txn++;
  state_->writes.set_limits(client->write_limits());
}

Transaction::~Transaction() {
  if (!state_->finished) Abort();
  Client::Impl& c = *client_->impl();
  if (c.spare_transaction_state == nullptr) {
    // Commit and Abort emptied its write batch: nothing of it reaches the next transaction.
    c.spare_transaction_state.reset(state_.release());
  }
}

std::unique_ptr<Transaction> Client::Begin() {
  impl_->TakePushes();
  return std::unique_ptr<Transaction>(new Transaction(this));
}

size_t Transaction::buffered_writes() const {
  return state_->writes.size();
}

namespace {
// Reads check keys only: values are checked where they are written (WriteBatch).
Status CheckKey(const ClientOptions& o, std::string_view key) {
  if (key.size() > o.max_key_bytes) {
    return Status::TooLarge("key of " + std::to_string(key.size()) +
                            " bytes exceeds the limit of " + std::to_string(o.max_key_bytes) +
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
  return GetInto(items, out->data());
}

Status Transaction::GetInto(std::span<const ReadItem> items, ReadResult* out) {
  Client::Impl& c = *client_->impl();
  std::vector<ReadSlot> slots;
  slots.reserve(items.size());
  for (size_t i = 0; i < items.size(); i++) {
    const ReadItem& it = items[i];
    RAMP_RETURN_IF_ERROR(CheckKey(c.options, it.key));
    // Read-your-writes: a buffered write answers without asking the servers.
    if (const KeyWrite* w = state_->writes.FindKey(it.keyspace, it.key)) {
      out[i].found = !w->tombstone;
      out[i].value = w->value;
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
  RAMP_RETURN_IF_ERROR(ReadSlots(c, state_->locks, slots, state_->read_snapshot));
  for (auto& s : slots) {
    ReadResult& r = out[s.out];
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
  if (state_->finished) return Status::InvalidArgument("transaction already finished");
  Client::Impl& c = *client_->impl();
  // The result's strings keep their capacity (a caller reading in a loop reuses them).
  out->found = false;
  out->ts = Timestamp();
  out->value.clear();
  out->metadata.clear();
  // GET* of a key this transaction did not write, at the latest version: one one-sided
  // read when its placement and address are cached (RampReadOneSided), else the general path.
  if (c.options.read_path == ReadPath::kGetStar && c.options.protocol != Protocol::kS2pl &&
      state_->read_snapshot.zero() && key.size() <= c.options.max_key_bytes &&
      state_->writes.FindKey(keyspace, key) == nullptr) {
    OneSidedRead r;
    bool taken = false;
    RAMP_RETURN_IF_ERROR(RampReadOneSided(c, keyspace, key, &r, &taken));
    if (taken) {
      out->ts = r.ts;
      out->found = !r.tombstone && !r.ts.zero();
      if (out->found) out->value.assign(r.value);
      if (state_->return_metadata) out->metadata.assign(r.metadata);
      return Status::OK();
    }
  }
  const ReadItem item{keyspace, key, Timestamp()};
  return GetInto(std::span<const ReadItem>(&item, 1), out);
}

Status Transaction::GetGroup(KeyspaceId keyspace, std::string_view group,
                             std::vector<GroupEntry>* out) {
  Client::Impl& c = *client_->impl();
  out->clear();
  if (state_->finished) return Status::InvalidArgument("transaction already finished");
  RAMP_RETURN_IF_ERROR(ReadGroup(c, keyspace, group, out));
  std::unordered_map<std::string, size_t> by_suffix;
  for (size_t i = 0; i < out->size(); i++) by_suffix[(*out)[i].suffix] = i;
  // Overlay this transaction's buffered writes to the group.
  std::vector<bool> deleted(out->size(), false);
  for (const KeyWrite& w : state_->writes.key_writes()) {
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

Status Transaction::Put(KeyspaceId keyspace, std::string_view key, std::string_view value,
                        const Timestamp* expected) {
  if (state_->finished) return Status::InvalidArgument("transaction already finished");
  return state_->writes.PutKey(keyspace, key, value, expected);
}

Status Transaction::Delete(KeyspaceId keyspace, std::string_view key, const Timestamp* expected) {
  if (state_->finished) return Status::InvalidArgument("transaction already finished");
  return state_->writes.DeleteKey(keyspace, key, expected);
}

Status Transaction::Commit(Timestamp* commit_ts) {
  if (state_->finished) return Status::InvalidArgument("transaction already finished");
  Client::Impl& c = *client_->impl();
  Status st = CommitBatch(c, state_->writes, state_->locks, commit_ts);
  state_->finished = true;
  state_->writes.Clear();
  if (c.options.protocol == Protocol::kS2pl) S2plRelease(c, state_->locks);
  return st;
}

void Transaction::Abort() {
  if (state_->finished) return;
  state_->finished = true;
  state_->writes.Clear();
  if (client_->options().protocol == Protocol::kS2pl) S2plRelease(*client_->impl(), state_->locks);
}

}  // namespace ramp
