// ReadSession (ramp/read_session.h): statement-atomic reads of numbered rows, and the reads
// every client entry point shares (ReadSlots, ReadGroup).
#include "ramp/read_session.h"

#include <cstring>
#include <deque>
#include <unordered_map>
#include <unordered_set>

#include "client/transaction_state.h"
#include "ramp/hlc.h"

namespace ramp {

Status ReadSlots(Client::Impl& c, S2plLocks& locks, std::vector<ReadSlot>& slots,
                 const Timestamp& snapshot) {
  if (slots.empty()) return Status::OK();
  return c.options.protocol == Protocol::kS2pl ? S2plRead(c, locks, slots)
                                               : RampRead(c, slots, snapshot);
}

namespace {

// Whether the group version at `offset` of `node`'s arena still holds `expected`: one 8-byte
// one-sided read (false when it cannot be read: no fast channel, a failed read).
bool GroupVersionIs(Client::Impl& c, uint32_t node, uint64_t offset, uint64_t expected) {
  NodeChannel* ch = nullptr;
  if (!c.Connected(node, ChannelKind::kFast, &ch).ok()) return false;
  // As RampReadOneSided: a completion that comes after this read gave up (a timeout) must
  // not touch a later one.
  const uint64_t seq = ++c.one_sided_seq;
  c.one_sided_done = false;
  c.group_version_word = 0;
  Client::Impl* cp = &c;
  if (!ch->conn()
           ->PostRead(&c.group_version_word, ch->hello().arena, offset, sizeof(uint64_t),
                      [cp, seq](const Status& st) {
                        if (cp->one_sided_seq != seq) return;
                        cp->one_sided_done = true;
                        cp->one_sided_status = st;
                      })
           .ok()) {
    return false;
  }
  c.stats.one_sided_reads++;
  const Status waited = c.WaitOneSided(std::span<const uint32_t>(&node, 1));
  return waited.ok() && c.one_sided_done && c.one_sided_status.ok() &&
         c.group_version_word == expected;
}

uint64_t InstanceOf(Client::Impl& c, uint32_t node) {
  NodeChannel* ch = nullptr;
  if (node >= c.nodes.size() || !c.Connected(node, ChannelKind::kFast, &ch).ok()) return 0;
  return ch->hello().instance;
}

// The kept entries of a group, if its partition's group version still has the value they
// were read with: one 8-byte one-sided read of the owner's arena. A GET_GROUP at the moment
// of that read would return these entries (the server bumps the version before any of them
// changes), so what the caller gets is what the request would have got. false: read by
// request (nothing kept, another placement or server instance, a changed version, a read
// that failed). Kept privately first, else (a group of at most one entry) in the shared
// cache (SharedGroup: a small group), which another process may have filled.
bool ServeKept(Client::Impl& c, const std::string& cache_key, KeyspaceId keyspace,
               std::string_view group, const PartitionId& part, std::vector<GroupEntry>* out) {
  if (auto it = c.kept_groups.find(cache_key); it != c.kept_groups.end()) {
    const KeptGroup& k = it->second;
    bool current = c.options.debug_trust_group_cache;
    if (!current) {
      const auto pl = c.placements.find(k.part);
      current = pl != c.placements.end() && pl->second.owner == k.node &&
                pl->second.epoch == k.placement_epoch && InstanceOf(c, k.node) == k.instance &&
                GroupVersionIs(c, k.node, k.version_offset, k.version);
    }
    if (current) {
      *out = it->second.entries;
      c.stats.group_cache_hits++;
      return true;
    }
    c.kept_group_bytes -= it->second.bytes;
    c.kept_groups.erase(it);
  }
  SharedGroup g;
  if (!c.addresses->LookupGroup(keyspace, group, &g)) return false;
  if (c.placements.count(part) == 0) {
    // The placement is learnt once per partition (the request path would ask it too).
    const PartitionId parts[1] = {part};
    if (!c.ResolveOwners(parts).ok()) return false;
  }
  const auto pl = c.placements.find(part);
  const bool current = c.options.debug_trust_group_cache ||
                       (pl != c.placements.end() && pl->second.owner == g.node &&
                        (pl->second.epoch & 0x3FFFFFFF) == g.placement_epoch &&
                        static_cast<uint16_t>(InstanceOf(c, g.node)) == g.instance_hash &&
                        GroupVersionIs(c, g.node, g.version_offset, g.version));
  if (!current) return false;
  out->clear();
  out->reserve(g.entries.size());
  for (const SharedGroupEntry& s : g.entries) {
    GroupEntry& e = out->emplace_back();
    e.suffix.resize(sizeof(s.suffix));
    std::memcpy(e.suffix.data(), &s.suffix, sizeof(s.suffix));
    e.ts = Timestamp{s.ts_time, s.ts_client};
    if (g.value_flag) e.value.assign(1, '\x01');
  }
  c.stats.group_cache_hits++;
  c.stats.shared_group_hits++;
  return true;
}

void Keep(Client::Impl& c, std::string cache_key, const PartitionId& part, uint32_t node,
          const protocol::GetGroupReply& gr, const std::vector<GroupEntry>& entries) {
  NodeChannel* ch = nullptr;
  if (gr.version == 0 || c.options.group_cache_bytes == 0 ||
      c.options.read_path != ReadPath::kGetStar ||
      !c.Connected(node, ChannelKind::kFast, &ch).ok()) {
    return;
  }
  KeptGroup k;
  k.part = part;
  k.node = node;
  k.instance = ch->hello().instance;
  k.placement_epoch = c.EpochOf(part);
  k.version_offset = gr.version_offset;
  k.version = gr.version;
  k.bytes = sizeof(KeptGroup) + 2 * cache_key.size() + 64;
  for (const GroupEntry& e : entries) {
    k.bytes += sizeof(GroupEntry) + e.suffix.size() + e.value.size();
    for (const auto& sib : e.siblings) k.bytes += sizeof(sib) + sib.first.size();
  }
  // A small group whose entries name no siblings goes to the shared cache too (parallel
  // workers start without kept groups: at TPC-H SF 1 Q4's were cold on every run).
  if (entries.size() <= kMaxSharedGroupEntries) {
    const std::string_view value = entries.empty() ? std::string_view() : entries[0].value;
    bool shareable = value.empty() || value == std::string_view("\x01", 1);
    for (const GroupEntry& e : entries) {
      shareable = shareable && e.siblings.empty() && e.suffix.size() == sizeof(uint64_t) &&
                  e.value == value;
    }
    if (shareable) {
      SharedGroup g;
      g.node = node;
      g.instance_hash = static_cast<uint16_t>(k.instance);
      g.placement_epoch = static_cast<uint32_t>(k.placement_epoch & 0x3FFFFFFF);
      g.version_offset = k.version_offset;
      g.version = k.version;
      g.value_flag = !value.empty();
      g.entries.reserve(entries.size());
      for (const GroupEntry& e : entries) {
        SharedGroupEntry& s = g.entries.emplace_back();
        std::memcpy(&s.suffix, e.suffix.data(), sizeof(s.suffix));
        s.ts_time = e.ts.time;
        s.ts_client = e.ts.client;
      }
      c.addresses->StoreGroup(part.keyspace, cache_key.substr(sizeof(KeyspaceId)), g);
    }
  }
  if (k.bytes > c.options.group_cache_bytes / 4) return;
  // Full: drop kept groups (the first ones in the table's order: unrelated to their use).
  while (c.kept_group_bytes + k.bytes > c.options.group_cache_bytes && !c.kept_groups.empty()) {
    c.kept_group_bytes -= c.kept_groups.begin()->second.bytes;
    c.kept_groups.erase(c.kept_groups.begin());
  }
  k.entries = entries;
  auto [it, inserted] = c.kept_groups.try_emplace(std::move(cache_key));
  if (!inserted) c.kept_group_bytes -= it->second.bytes;
  c.kept_group_bytes += k.bytes;
  it->second = std::move(k);
}

}  // namespace

Status ReadGroup(Client::Impl& c, KeyspaceId keyspace, std::string_view group,
                 std::vector<GroupEntry>* out, bool keep) {
  out->clear();
  c.stats.group_reads++;
  keep = keep && c.options.group_cache_bytes != 0;
  uint32_t buckets = c.default_buckets;
  if (auto def = c.keyspaces.find(keyspace); def != c.keyspaces.end())
    buckets = def->second.buckets;
  const PartitionId part{keyspace, BucketOf(group, buckets)};
  std::string cache_key;
  if (keep) {
    cache_key = AddressKey(keyspace, group);
    if (ServeKept(c, cache_key, keyspace, group, part, out)) return Status::OK();
  }
  protocol::GetGroupRequest req{part, group};
  std::string body;
  protocol::Encode(req, &body);
  protocol::GetGroupReply gr;
  PendingCall reply;
  uint32_t owner = 0;
  for (int attempt = 0;; attempt++) {
    c.MoveBackoff(attempt);
    const PartitionId parts[1] = {part};
    RAMP_RETURN_IF_ERROR(c.ResolveOwners(parts));
    owner = c.OwnerOf(part);
    RAMP_RETURN_IF_ERROR(
        c.CallAndWait(owner, c.ReadChannel(), protocol::Op::kGetGroup, 0, body, &reply));
    RAMP_RETURN_IF_ERROR(protocol::Decode(reply.body(), reply.header.count, &gr));
    if (gr.status != protocol::ItemStatus::kMoved) break;
    c.NoteMoved(part, gr.owner, gr.epoch);
    if (attempt >= 63) return Status::Unavailable("partition " + part.ToString() + " kept moving");
  }
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
    out->push_back(std::move(ge));
  }
  if (keep) Keep(c, std::move(cache_key), part, owner, gr, *out);
  return Status::OK();
}

namespace {

// Rows tracked per statement at most (reads beyond it are read-atomic per request only).
constexpr size_t kMaxStatementRows = size_t{1} << 20;
// How long a RAMP commit may take to reach every partition (generously).
constexpr uint64_t kInFlightCommitMs = 2000;
constexpr size_t kMaxRememberedVersions = size_t{1} << 18;
constexpr size_t kMaxPrefetchedBytes = size_t{256} << 20;

struct RowRef {
  KeyspaceId ks;
  uint64_t rowid;
  bool operator==(const RowRef&) const = default;
};
struct RowRefHash {
  size_t operator()(const RowRef& r) const noexcept {
    return static_cast<size_t>((r.ks * 0x9E3779B97F4A7C15ull) ^ r.rowid);
  }
};

// The remembered versions: an open-addressing table (linear probing, power-of-two size, at
// most half full, backward-shift erase) with a FIFO of its keys, bounded to
// kMaxRememberedVersions. A std::unordered_map with a node per row cost a malloc and a free
// per row read once full (18 % of TPC-H SF 1 Q7 on ramp_hash indexes, 480 000 rows per
// participant, in RememberVersion alone).
class VersionTable {
 public:
  void Put(const RowRef& r, const Timestamp& ts) {
    // At the bound the table holds one more entry until the oldest goes: no growth for it
    // (2^19 slots, ~20 MiB, instead of 2^20 per backend and parallel worker).
    if ((count_ + 1) * 2 > slots_.size() && count_ < kMaxRememberedVersions) Grow();
    for (size_t i = Hash(r) & mask_;; i = (i + 1) & mask_) {
      Slot& s = slots_[i];
      if (!s.used) {
        s = Slot{r, ts, true};
        count_++;
        order_.push_back(r);
        if (order_.size() > kMaxRememberedVersions) {
          Erase(order_.front());
          order_.pop_front();
        }
        return;
      }
      if (s.ref == r) {
        s.ts = ts;
        return;
      }
    }
  }
  const Timestamp* Find(const RowRef& r) const {
    if (count_ == 0) return nullptr;
    for (size_t i = Hash(r) & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (!s.used) return nullptr;
      if (s.ref == r) return &s.ts;
    }
  }

 private:
  struct Slot {
    RowRef ref{0, 0};
    Timestamp ts;
    bool used = false;
  };
  static uint64_t Hash(const RowRef& r) {
    uint64_t h = r.rowid ^ (r.ks * 0x9E3779B97F4A7C15ull);
    h ^= h >> 31;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    return h;
  }
  void Erase(const RowRef& r) {
    size_t hole = Hash(r) & mask_;
    while (slots_[hole].used && !(slots_[hole].ref == r)) hole = (hole + 1) & mask_;
    if (!slots_[hole].used) return;
    for (size_t j = (hole + 1) & mask_; slots_[j].used; j = (j + 1) & mask_) {
      const size_t home = Hash(slots_[j].ref) & mask_;
      if (((j - home) & mask_) >= ((j - hole) & mask_)) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole].used = false;
    count_--;
  }
  void Grow() {
    std::vector<Slot> old = std::move(slots_);
    slots_ = std::vector<Slot>(old.empty() ? 64 : old.size() * 2);
    mask_ = slots_.size() - 1;
    for (const Slot& o : old) {
      if (!o.used) continue;
      size_t i = Hash(o.ref) & mask_;
      while (slots_[i].used) i = (i + 1) & mask_;
      slots_[i] = o;
    }
  }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t count_ = 0;
  std::deque<RowRef> order_;
};

}  // namespace

struct ReadSession::State {
  S2plLocks locks;
  StatementTag tag;
  bool have_tag = false;
  Timestamp snapshot;
  // Statement bounds (see NoteRead): versions read, lower bounds learned from metadata.
  std::unordered_map<RowRef, Timestamp, RowRefHash> statement_read;
  std::unordered_map<RowRef, Timestamp, RowRefHash> statement_need;
  bool statement_tracking = true;
  // Remembered versions: FIFO-bounded.
  VersionTable versions;
  // Prefetched rows of the current statement.
  std::unordered_map<RowRef, PrefetchedRow, RowRefHash> prefetched;
  size_t prefetched_bytes = 0;
  // Reused buffers.
  std::vector<std::string> keys;
  std::vector<ReadSlot> slots;

  Timestamp Required(const RowRef& r) const {
    if (statement_need.empty()) return Timestamp();
    auto it = statement_need.find(r);
    return it == statement_need.end() ? Timestamp() : it->second;
  }
  // Transactions this statement reads around (see NoteRead): their versions are never
  // returned, rows they wrote are read as they were before them.
  std::unordered_set<Timestamp, TimestampHash> excluded;
  std::vector<RowRef> siblings;  // NoteRead's, reused
  Status NoteRead(const RowRef& row, const Timestamp& ts, std::string_view metadata, bool* exclude);
};

// Every row read is noted with the metadata of its version: a sibling row named there must
// be read at least at that version later in the statement.
//
// The other way round, a sibling read earlier at an older version means the transaction was
// still being committed when that sibling was read (its PREPARE there came after, or was not
// decided yet). The rows already returned can't be taken back, so the statement reads around
// that transaction instead: *exclude asks the caller to read this row again as it was before
// the transaction, and every later read does the same for its versions. The statement sees
// none of its writes, which is read-atomic; failing with 40001, as before, made every long
// statement that met a commit in flight fail.
Status ReadSession::State::NoteRead(const RowRef& row, const Timestamp& ts,
                                    std::string_view metadata, bool* exclude) {
  *exclude = false;
  if (!statement_tracking) return Status::OK();
  if (!excluded.empty() && !ts.zero() && excluded.contains(ts)) {
    *exclude = true;
    return Status::OK();
  }
  if (statement_need.size() + statement_read.size() > kMaxStatementRows) {
    statement_tracking = false;
    statement_need.clear();
    statement_read.clear();
    excluded.clear();
    return Status::OK();
  }
  // Bulk writes name partitions, not keys: nothing per row to check. Their mode byte says so
  // without decoding the partition list of every row a scan-sized fetch reads.
  record::Metadata md;
  const bool names_keys =
      !metadata.empty() && !ts.zero() &&
      static_cast<uint8_t>(metadata[0]) == static_cast<uint8_t>(record::Metadata::Mode::kKeys) &&
      record::DecodeMetadata(metadata, &md).ok();
  if (!names_keys) {
    statement_read[row] = ts;
    return Status::OK();
  }
  // The sibling rows (not index entries or sequences), decoded once for both passes below.
  siblings.clear();
  for (const auto& sib : md.keys) {
    uint64_t sib_rowid = 0;
    if (!DecodeRowKey(sib.key, &sib_rowid)) continue;
    if (const RowRef ref{sib.keyspace, sib_rowid}; !(ref == row)) siblings.push_back(ref);
  }
  // A commit younger than this may still be on its way to some partitions; older ones
  // are complete (unless their client died mid-commit), and their deletions may have been
  // forgotten by the servers' GC (a row then reads as never written: not a fracture).
  const bool recent = ts.time + (kInFlightCommitMs << 16) > HybridClock::PhysicalNow();
  // First whether the statement already read around this transaction's writes, then (only
  // if not) the bounds its metadata sets.
  for (const RowRef& ref : siblings) {
    auto read = statement_read.find(ref);
    if (read != statement_read.end() && read->second < ts && (!read->second.zero() || recent)) {
      excluded.insert(ts);
      *exclude = true;
      return Status::OK();
    }
  }
  statement_read[row] = ts;
  for (const RowRef& ref : siblings) {
    auto [need, inserted] = statement_need.emplace(ref, ts);
    if (!inserted && need->second < ts) need->second = ts;
  }
  return Status::OK();
}

namespace {

// The newest timestamp below ts: a snapshot that reads what was there before ts.
Timestamp JustBelow(const Timestamp& ts) {
  if (ts.client != 0) return Timestamp{ts.time, ts.client - 1};
  return Timestamp{ts.time - 1, UINT64_MAX};
}

// Reads around an excluded transaction: re-reads never loop for long (each goes to an older
// version), but a chain of in-flight commits on one row is bounded all the same.
constexpr int kMaxReadsAround = 16;

}  // namespace

ReadSession::ReadSession(Client* client) : client_(client), state_(std::make_unique<State>()) {
  client->impl()->TakePushes();  // placements the homes pushed (a statement's reads route by them)
  state_->locks.txn_number = client->impl()->next_txn++;
}

ReadSession::~ReadSession() {
  if (client_->options().protocol == Protocol::kS2pl) S2plRelease(*client_->impl(), state_->locks);
}

std::unique_ptr<ReadSession> Client::NewReadSession() {
  return std::unique_ptr<ReadSession>(new ReadSession(this));
}

void ReadSession::SetStatement(const StatementTag& tag, const Timestamp& snapshot) {
  State& s = *state_;
  if (s.have_tag && tag == s.tag) return;
  s.have_tag = true;
  s.tag = tag;
  s.snapshot = snapshot;
  s.statement_need.clear();
  s.statement_read.clear();
  s.statement_tracking = true;
  s.excluded.clear();
  s.prefetched.clear();
  s.prefetched_bytes = 0;
}

const Timestamp& ReadSession::snapshot() const {
  return state_->snapshot;
}

Status ReadSession::ReadRows(std::span<const RowRequest> rows, RowReads how,
                             std::vector<RowResult>* out) {
  Client::Impl& c = *client_->impl();
  State& s = *state_;
  if (rows.size() > c.options.max_batch_items) {
    return Status::TooLarge("read of " + std::to_string(rows.size()) +
                            " items exceeds the batch limit of " +
                            std::to_string(c.options.max_batch_items));
  }
  out->clear();
  out->resize(rows.size());
  // The slots point into keys: reserve first, never reallocate.
  s.keys.clear();
  s.keys.reserve(rows.size());
  s.slots.clear();
  s.slots.reserve(rows.size());
  for (size_t i = 0; i < rows.size(); i++) {
    const RowRequest& r = rows[i];
    s.keys.push_back(RowKey(r.rowid));
    ReadSlot& slot = s.slots.emplace_back();
    slot.out = i;
    slot.keyspace = r.keyspace;
    slot.key = s.keys.back();
    slot.part = c.PartitionOf(r.keyspace, slot.key);
    slot.required = r.required;
    if (how == RowReads::kStatement) {
      const Timestamp bound = s.Required(RowRef{r.keyspace, r.rowid});
      if (slot.required < bound) slot.required = bound;
    }
  }
  RAMP_RETURN_IF_ERROR(
      ReadSlots(c, s.locks, s.slots, how == RowReads::kLatest ? Timestamp() : s.snapshot));
  for (ReadSlot& slot : s.slots) {
    RowResult& r = (*out)[slot.out];
    const RowRequest& req = rows[slot.out];
    r.ts = slot.ts;
    r.found = slot.have && !slot.tombstone && !slot.ts.zero();
    if (r.found) r.value = std::move(slot.value);
    if (how == RowReads::kStatement) {
      const RowRef ref{req.keyspace, req.rowid};
      bool exclude = false;
      RAMP_RETURN_IF_ERROR(s.NoteRead(ref, r.ts, slot.metadata, &exclude));
      for (int around = 0; exclude; around++) {
        // The row as it was before the excluded transaction (which is at or below the
        // statement's snapshot, so this is a version the snapshot could have returned).
        const Timestamp before = JustBelow(r.ts);
        if (around >= kMaxReadsAround || slot.required > before) {
          return Status::Conflict(
              "this statement read a row before and another row after the commit of the "
              "transaction that wrote both (" +
              r.ts.ToString() + ")");
        }
        std::vector<ReadSlot> again(1);
        again[0].keyspace = slot.keyspace;
        again[0].key = slot.key;
        again[0].part = slot.part;
        again[0].required = slot.required;
        RAMP_RETURN_IF_ERROR(ReadSlots(c, s.locks, again, before));
        c.stats.reads_around_commits++;
        r.ts = again[0].ts;
        r.found = again[0].have && !again[0].tombstone && !again[0].ts.zero();
        r.value = r.found ? std::move(again[0].value) : std::string();
        RAMP_RETURN_IF_ERROR(s.NoteRead(ref, r.ts, again[0].metadata, &exclude));
      }
    }
    if (how != RowReads::kLatest && r.found) RememberVersion(req.keyspace, req.rowid, r.ts);
  }
  return Status::OK();
}

Status ReadSession::Get(KeyspaceId keyspace, std::string_view key, ReadResult* out, bool latest) {
  Client::Impl& c = *client_->impl();
  State& s = *state_;
  if (key.size() > c.options.max_key_bytes) {
    return Status::TooLarge("key of " + std::to_string(key.size()) +
                            " bytes exceeds the limit of " +
                            std::to_string(c.options.max_key_bytes) + " bytes");
  }
  *out = ReadResult();
  std::vector<ReadSlot> slots(1);
  slots[0].keyspace = keyspace;
  slots[0].key = key;
  slots[0].part = c.PartitionOf(keyspace, key);
  RAMP_RETURN_IF_ERROR(ReadSlots(c, s.locks, slots, latest ? Timestamp() : s.snapshot));
  out->ts = slots[0].ts;
  out->found = slots[0].have && !slots[0].tombstone && !slots[0].ts.zero();
  if (out->found) out->value = std::move(slots[0].value);
  return Status::OK();
}

Status ReadSession::GetGroup(KeyspaceId keyspace, std::string_view group,
                             std::vector<GroupEntry>* out, bool fresh) {
  return ReadGroup(*client_->impl(), keyspace, group, out, /*keep=*/!fresh);
}

void ReadSession::RememberVersion(KeyspaceId keyspace, uint64_t rowid, const Timestamp& ts) {
  State& s = *state_;
  const RowRef r{keyspace, rowid};
  s.versions.Put(r, ts);
}

bool ReadSession::RecallVersion(KeyspaceId keyspace, uint64_t rowid, Timestamp* ts) const {
  const Timestamp* found = state_->versions.Find(RowRef{keyspace, rowid});
  if (found == nullptr) return false;
  *ts = *found;
  return true;
}

void ReadSession::Prefetch(KeyspaceId keyspace, uint64_t rowid, const Timestamp& ts, bool live,
                           std::string value) {
  State& s = *state_;
  const size_t bytes = value.size() + 64;
  if (s.prefetched_bytes + bytes > kMaxPrefetchedBytes) {
    // Only the rows of the lookups just made matter (their fetches follow them): start over
    // rather than stop keeping them.
    s.prefetched.clear();
    s.prefetched_bytes = 0;
  }
  s.prefetched_bytes += bytes;
  auto [it, inserted] = s.prefetched.try_emplace(RowRef{keyspace, rowid});
  const uint32_t holders = inserted ? 1 : it->second.holders + 1;
  it->second = PrefetchedRow{ts, live, std::move(value), holders};
}

void ReadSession::Unprefetch(KeyspaceId keyspace, uint64_t rowid) {
  State& s = *state_;
  auto it = s.prefetched.find(RowRef{keyspace, rowid});
  if (it == s.prefetched.end()) return;
  if (--it->second.holders > 0) return;
  const size_t bytes = it->second.value.size() + 64;
  s.prefetched_bytes -= std::min(bytes, s.prefetched_bytes);
  s.prefetched.erase(it);
}

const PrefetchedRow* ReadSession::Prefetched(KeyspaceId keyspace, uint64_t rowid) const {
  if (state_->prefetched.empty()) return nullptr;
  auto it = state_->prefetched.find(RowRef{keyspace, rowid});
  return it == state_->prefetched.end() ? nullptr : &it->second;
}

}  // namespace ramp
