// The cluster's keyspace catalog (ramp/keyspace_catalog.h).
#include "ramp/keyspace_catalog.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <random>
#include <thread>

#include "ramp/client.h"

#include "common/little_endian.h"

namespace ramp {

namespace {

constexpr uint8_t kEntryVersion = 1;
constexpr int kAttempts = 64;
constexpr size_t kListBatch = 4096;

std::string U64(uint64_t v) {
  std::string s(8, '\0');
  le::Store64(reinterpret_cast<uint8_t*>(s.data()), v);
  return s;
}

bool ParseU64(std::string_view s, uint64_t* v) {
  if (s.size() != 8) return false;
  *v = le::Load64(reinterpret_cast<const uint8_t*>(s.data()));
  return true;
}

std::string Numbered(const char* prefix, uint64_t n) {
  char buf[48];
  std::snprintf(buf, sizeof(buf), "%s%020" PRIu64, prefix, n);
  return buf;
}

std::string CatalogEntryKey(KeyspaceId id) {
  return Numbered("ks/", id);
}
std::string SlotKey(uint64_t n) {
  return Numbered("slot/", n);
}
const std::string& SeqKey() {
  static const std::string key = "seq";
  return key;
}
std::string NameKey(const KeyspaceEntry& e) {
  std::string key = "name/";
  key += e.kind;
  for (const std::string* part : {&e.database, &e.schema, &e.relation}) {
    key += '\0';
    key += *part;
  }
  return key;
}

uint64_t NowMs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

void PutString(std::string* out, const std::string& s) {
  uint8_t len[4];
  le::Store32(len, static_cast<uint32_t>(s.size()));
  out->append(reinterpret_cast<const char*>(len), 4);
  out->append(s);
}

bool GetString(std::string_view* in, std::string* s) {
  if (in->size() < 4) return false;
  const uint32_t len = le::Load32(reinterpret_cast<const uint8_t*>(in->data()));
  in->remove_prefix(4);
  if (in->size() < len) return false;
  s->assign(in->data(), len);
  in->remove_prefix(len);
  return true;
}

// Backs off a little (random, growing) after a conflict; the client's wait hook may cancel.
Status Backoff(Client* client, int attempt, std::minstd_rand* jitter) {
  const int max_ms = 1 << std::min(attempt, 6);
  const auto until = std::chrono::steady_clock::now() +
                     std::chrono::microseconds((*jitter)() % (max_ms * 1000 + 1));
  while (std::chrono::steady_clock::now() < until) {
    if (client->options().wait_hook) {
      Status s = client->options().wait_hook();
      if (!s.ok()) return s;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return Status::OK();
}

}  // namespace

std::string EncodeKeyspaceEntry(const KeyspaceEntry& e) {
  std::string out;
  uint8_t fixed[1 + 8 + 1 + 4 + 8 + 4 + 8 + 1 + 8];
  uint8_t* p = fixed;
  *p++ = kEntryVersion;
  le::Store64(p, e.id);
  p += 8;
  *p++ = static_cast<uint8_t>(e.kind);
  le::Store32(p, e.buckets);
  p += 4;
  le::Store64(p, e.system_id);
  p += 8;
  le::Store32(p, e.database_oid);
  p += 4;
  le::Store64(p, e.created_ms);
  p += 8;
  *p++ = static_cast<uint8_t>(e.state);
  le::Store64(p, e.dropped_ms);
  p += 8;
  out.append(reinterpret_cast<const char*>(fixed), p - fixed);
  PutString(&out, e.database);
  PutString(&out, e.schema);
  PutString(&out, e.relation);
  return out;
}

bool DecodeKeyspaceEntry(std::string_view in, KeyspaceEntry* e) {
  constexpr size_t kFixed = 1 + 8 + 1 + 4 + 8 + 4 + 8 + 1 + 8;
  if (in.size() < kFixed) return false;
  const auto* p = reinterpret_cast<const uint8_t*>(in.data());
  if (*p++ != kEntryVersion) return false;
  e->id = le::Load64(p);
  p += 8;
  e->kind = static_cast<char>(*p++);
  e->buckets = le::Load32(p);
  p += 4;
  e->system_id = le::Load64(p);
  p += 8;
  e->database_oid = le::Load32(p);
  p += 4;
  e->created_ms = le::Load64(p);
  p += 8;
  const uint8_t state = *p++;
  if (state > 1) return false;
  e->state = static_cast<KeyspaceState>(state);
  e->dropped_ms = le::Load64(p);
  in.remove_prefix(kFixed);
  return GetString(&in, &e->database) && GetString(&in, &e->schema) &&
         GetString(&in, &e->relation) && in.empty();
}

const char* KeyspaceStateName(KeyspaceState s) {
  return s == KeyspaceState::kLive ? "live" : "dropped";
}

KeyspaceCatalog::KeyspaceCatalog(Client* client) : client_(client) {
  client_->DefineKeyspace(kCatalogKeyspace, kCatalogBuckets);
}

Status KeyspaceCatalog::Register(KeyspaceEntry* entry, bool* attached, bool* id_taken,
                                 bool allow_attach) {
  *attached = false;
  *id_taken = false;
  if (entry->id < kFirstUserKeyspace) {
    return Status::InvalidArgument("keyspace ids below 65536 are reserved");
  }
  if (entry->created_ms == 0) entry->created_ms = NowMs();
  entry->state = KeyspaceState::kLive;
  const std::string name_key = NameKey(*entry);
  const std::string entry_key = CatalogEntryKey(entry->id);
  std::minstd_rand jitter(static_cast<unsigned>(entry->id ^ client_->client_id()));
  for (int attempt = 0; attempt < kAttempts; attempt++) {
    auto txn = client_->Begin();
    const ReadItem items[3] = {{kCatalogKeyspace, name_key, {}},
                               {kCatalogKeyspace, entry_key, {}},
                               {kCatalogKeyspace, SeqKey(), {}}};
    std::vector<ReadResult> got;
    Status s = txn->GetAll(items, &got);
    if (!s.ok()) return s.Annotate("reading the keyspace catalog");
    const ReadResult& name = got[0];
    const ReadResult& mine = got[1];
    const ReadResult& seq = got[2];
    uint64_t named = 0;
    if (allow_attach && name.found && ParseU64(name.value, &named) && named != entry->id) {
      KeyspaceEntry other;
      bool found = false;
      s = Get(named, &other, &found);
      if (!s.ok()) return s;
      if (found && other.live() && other.system_id != entry->system_id &&
          other.kind == entry->kind) {
        *entry = other;
        *attached = true;
        return Status::OK();
      }
    }
    if (mine.found || !mine.ts.zero()) {
      *id_taken = true;
      return Status::OK();
    }
    uint64_t n = 0;
    if (seq.found && !ParseU64(seq.value, &n)) {
      return Status::Corruption("the keyspace catalog's sequence is not 8 bytes");
    }
    const Timestamp zero;
    if (!(s = txn->Put(kCatalogKeyspace, SeqKey(), U64(n + 1), &seq.ts)).ok() ||
        !(s = txn->Put(kCatalogKeyspace, SlotKey(n), U64(entry->id), &zero)).ok() ||
        !(s = txn->Put(kCatalogKeyspace, entry_key, EncodeKeyspaceEntry(*entry), &zero)).ok() ||
        !(s = txn->Put(kCatalogKeyspace, name_key, U64(entry->id), &name.ts)).ok()) {
      return s.Annotate("registering a keyspace");
    }
    s = txn->Commit();
    if (s.ok()) return s;
    if (!s.Is(Status::Code::kConflict)) return s.Annotate("registering a keyspace");
    if (!(s = Backoff(client_, attempt, &jitter)).ok()) return s;
  }
  return Status::Conflict("too many concurrent registrations in the keyspace catalog");
}

Status KeyspaceCatalog::Get(KeyspaceId id, KeyspaceEntry* out, bool* found) {
  auto txn = client_->Begin();
  ReadResult r;
  Status s = txn->Get(kCatalogKeyspace, CatalogEntryKey(id), &r);
  if (!s.ok()) return s.Annotate("reading the keyspace catalog");
  *found = r.found;
  if (r.found && !DecodeKeyspaceEntry(r.value, out)) {
    return Status::Corruption("keyspace catalog entry " + std::to_string(id) + " is invalid");
  }
  return Status::OK();
}

Status KeyspaceCatalog::List(std::vector<KeyspaceEntry>* out) {
  out->clear();
  auto txn = client_->Begin();
  ReadResult seq;
  Status s = txn->Get(kCatalogKeyspace, SeqKey(), &seq);
  if (!s.ok()) return s.Annotate("reading the keyspace catalog");
  uint64_t n = 0;
  if (seq.found && !ParseU64(seq.value, &n)) {
    return Status::Corruption("the keyspace catalog's sequence is not 8 bytes");
  }
  for (uint64_t from = 0; from < n; from += kListBatch) {
    const uint64_t to = std::min<uint64_t>(n, from + kListBatch);
    std::vector<std::string> keys;
    for (uint64_t i = from; i < to; i++) keys.push_back(SlotKey(i));
    std::vector<ReadItem> items;
    for (const auto& k : keys) items.push_back({kCatalogKeyspace, k, {}});
    std::vector<ReadResult> slots;
    if (!(s = txn->GetAll(items, &slots)).ok()) return s.Annotate("reading the keyspace catalog");
    keys.clear();
    for (const ReadResult& r : slots) {
      uint64_t id = 0;
      if (r.found && ParseU64(r.value, &id)) keys.push_back(CatalogEntryKey(id));
    }
    items.clear();
    for (const auto& k : keys) items.push_back({kCatalogKeyspace, k, {}});
    std::vector<ReadResult> entries;
    if (!(s = txn->GetAll(items, &entries)).ok()) return s.Annotate("reading the keyspace catalog");
    for (const ReadResult& r : entries) {
      if (!r.found) continue;
      KeyspaceEntry e;
      if (!DecodeKeyspaceEntry(r.value, &e)) {
        return Status::Corruption("the keyspace catalog holds an invalid entry");
      }
      out->push_back(std::move(e));
    }
  }
  std::sort(out->begin(), out->end(),
            [](const KeyspaceEntry& a, const KeyspaceEntry& b) { return a.id < b.id; });
  return Status::OK();
}

Status KeyspaceCatalog::MarkDropped(KeyspaceId id, bool* was_live) {
  if (was_live != nullptr) *was_live = false;
  const std::string key = CatalogEntryKey(id);
  std::minstd_rand jitter(static_cast<unsigned>(id ^ client_->client_id()));
  for (int attempt = 0; attempt < kAttempts; attempt++) {
    auto txn = client_->Begin();
    ReadResult r;
    Status s = txn->Get(kCatalogKeyspace, key, &r);
    if (!s.ok()) return s.Annotate("reading the keyspace catalog");
    if (!r.found) return Status::OK();
    KeyspaceEntry e;
    if (!DecodeKeyspaceEntry(r.value, &e)) {
      return Status::Corruption("keyspace catalog entry " + std::to_string(id) + " is invalid");
    }
    if (!e.live()) return Status::OK();
    e.state = KeyspaceState::kDropped;
    e.dropped_ms = NowMs();
    if (!(s = txn->Put(kCatalogKeyspace, key, EncodeKeyspaceEntry(e), &r.ts)).ok()) return s;
    s = txn->Commit();
    if (s.ok()) {
      if (was_live != nullptr) *was_live = true;
      return s;
    }
    if (!s.Is(Status::Code::kConflict)) return s.Annotate("dropping a keyspace");
    if (!(s = Backoff(client_, attempt, &jitter)).ok()) return s;
  }
  return Status::Conflict("too many concurrent updates of a keyspace catalog entry");
}

Status KeyspaceCatalog::Drop(KeyspaceId id, bool* was_live) {
  if (id == kCatalogKeyspace)
    return Status::InvalidArgument("the keyspace catalog cannot be dropped");
  Status s = MarkDropped(id, was_live);
  if (!s.ok()) return s;
  return client_->DropKeyspace(id);
}

}  // namespace ramp
