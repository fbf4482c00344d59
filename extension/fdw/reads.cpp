// The ramp FDW's reads (C++): the keyspace of a foreign table, point reads of pushed-down
// keys (one multi-key RAMP read) and page I/O scans, both at the statement's snapshot and
// overlaid with the transaction's own buffered writes.
#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ramp/client.h"
#include "ramp/keyspace_catalog.h"

#include "fdw/writes.hpp"
#include "sqlapi/guc.hpp"
#include "xact/session.hpp"

#include "boundary/boundary.hpp"
#include "fdw/fdw.hpp"

namespace pgramp::fdw {

namespace {

bool ParseId(const char* s, ramp::KeyspaceId* out) {
  if (s == nullptr || *s == '\0') return false;
  uint64_t v = 0;
  for (const char* p = s; *p != '\0'; p++) {
    if (*p < '0' || *p > '9') return false;
    const uint64_t digit = static_cast<uint64_t>(*p - '0');
    if (v > (UINT64_MAX - digit) / 10) return false;
    v = v * 10 + digit;
  }
  *out = v;
  return true;
}

bool SameSetting(const char* server, const char* session) {
  return std::string_view(server) == std::string_view(session != nullptr ? session : "");
}

// Own writes of earlier commands overlay what the cluster returned.
class PointReads : public Reader {
 public:
  PointReads(const Keyspace& ks, std::vector<std::string> keys, uint32_t cid, bool remember)
      : ks_(ks), keys_(std::move(keys)), cid_(cid), remember_(remember) {}

  bool Next(RawRow* row) override {
    if (!read_) Read();
    while (pos_ < keys_.size()) {
      const size_t i = pos_++;
      const std::string& key = keys_[i];
      if (const OwnWrite* own = own_[i]) {
        if (own->tombstone) continue;
        stats_.own_writes++;
        stats_.found++;
        *row = RawRow{key.data(), key.size(), own->value.data(), own->value.size()};
        return true;
      }
      const ramp::ReadResult& r = results_[remote_index_[i]];
      if (!r.found) continue;
      stats_.found++;
      *row = RawRow{key.data(), key.size(), r.value.data(), r.value.size()};
      return true;
    }
    return false;
  }

  ReadStats stats() const override { return stats_; }

 private:
  void Read() {
    read_ = true;
    stats_.keys = keys_.size();
    const ForeignWrites* writes = ForeignWrites::GetIfAny();
    std::vector<ramp::ReadItem> items;
    own_.assign(keys_.size(), nullptr);
    remote_index_.assign(keys_.size(), 0);
    for (size_t i = 0; i < keys_.size(); i++) {
      if (writes != nullptr) own_[i] = writes->Visible(ks_.id, keys_[i], cid_);
      if (own_[i] != nullptr && !remember_) continue;
      remote_index_[i] = items.size();
      items.push_back(ramp::ReadItem{ks_.id, keys_[i], {}});
    }
    if (items.empty()) return;
    Session& session = Session::Get();
    session.Define(ramp::KeyspaceRef{ks_.id, ks_.buckets, false, false});
    const ramp::Timestamp snapshot = session.reads().snapshot();
    auto txn = session.client().Begin();
    txn->SetReadSnapshot(snapshot);
    session.Check(txn->GetAll(items, &results_), "reading keys of a ramp foreign table");
    if (remember_) {
      ForeignWrites& w = ForeignWrites::Get();
      for (size_t i = 0; i < items.size(); i++) {
        if (!results_[i].ts.zero()) w.RememberVersion(ks_.id, items[i].key, results_[i].ts);
      }
    }
  }

  Keyspace ks_;
  std::vector<std::string> keys_;
  uint32_t cid_;
  bool remember_;
  bool read_ = false;
  std::vector<const OwnWrite*> own_;
  std::vector<size_t> remote_index_;
  std::vector<ramp::ReadResult> results_;
  size_t pos_ = 0;
  ReadStats stats_;
};

class ScanReads : public Reader {
 public:
  ScanReads(const Keyspace& ks, uint32_t cid, bool remember)
      : ks_(ks), cid_(cid), remember_(remember) {}

  bool Next(RawRow* row) override {
    const ForeignWrites* writes = ForeignWrites::GetIfAny();
    Session& session = Session::Get();
    while (!remote_done_) {
      if (pos_ >= part_.size()) {
        if (scanner_ == nullptr) {
          session.Define(ramp::KeyspaceRef{ks_.id, ks_.buckets, false, false});
          ramp::ScanOptions options;
          // The statement's snapshot: the scan and every other read of the statement see one
          // state, and every key once.
          options.snapshot = session.reads().snapshot();
          session.Check(session.client().OpenScan(ks_.id, options, &scanner_),
                        "opening a scan of a ramp foreign table");
        }
        bool end = false;
        session.Check(scanner_->NextRows(&part_, &end), "scanning a ramp foreign table");
        pos_ = 0;
        if (end) {
          const ramp::ScanStats s = scanner_->stats();
          stats_.partitions = s.partitions;
          stats_.pages = s.pages;
          scanner_.reset();
          part_ = {};
          remote_done_ = true;
          break;
        }
        continue;
      }
      const ramp::ScanRow& r = part_[pos_++];
      if (remember_) ForeignWrites::Get().RememberVersion(ks_.id, r.key, r.ts);
      const OwnWrite* own = writes != nullptr ? writes->Visible(ks_.id, r.key, cid_) : nullptr;
      if (own != nullptr) {
        seen_own_.emplace(r.key);
        if (own->tombstone) continue;
        stats_.own_writes++;
        stats_.found++;
        *row = RawRow{r.key.data(), r.key.size(), own->value.data(), own->value.size()};
        return true;
      }
      stats_.found++;
      *row = RawRow{r.key.data(), r.key.size(), r.value.data(), r.value.size()};
      return true;
    }
    // Keys only this transaction wrote (in earlier commands).
    if (!own_listed_) {
      own_listed_ = true;
      if (writes != nullptr) {
        writes->ForEachVisible(ks_.id, cid_, [&](const std::string& key, const OwnWrite& w) {
          if (!w.tombstone && seen_own_.count(key) == 0) own_rows_.emplace_back(key, &w);
        });
      }
    }
    if (own_pos_ < own_rows_.size()) {
      const auto& [key, w] = own_rows_[own_pos_++];
      stats_.own_writes++;
      stats_.found++;
      *row = RawRow{key.data(), key.size(), w->value.data(), w->value.size()};
      return true;
    }
    return false;
  }

  ReadStats stats() const override {
    ReadStats s = stats_;
    if (scanner_ != nullptr) {
      s.partitions = scanner_->stats().partitions;
      s.pages = scanner_->stats().pages;
    }
    return s;
  }

 private:
  Keyspace ks_;
  uint32_t cid_;
  bool remember_;
  std::unique_ptr<ramp::Scanner> scanner_;
  std::span<const ramp::ScanRow> part_;
  size_t pos_ = 0;
  bool remote_done_ = false;
  std::unordered_set<std::string> seen_own_;
  bool own_listed_ = false;
  std::vector<std::pair<std::string, const OwnWrite*>> own_rows_;
  size_t own_pos_ = 0;
  ReadStats stats_;
};

}  // namespace

Keyspace ResolveKeyspace(const char* option, uint32_t buckets, const char* server_nodes,
                         const char* server_token_file, const char* server_name) {
  // The FDW reads and writes through the session's connection, so that its reads share the
  // statement's snapshot and its writes the transaction's RAMP PUT: a server naming another
  // cluster is refused rather than silently read from the wrong one.
  if (server_nodes != nullptr && !SameSetting(server_nodes, guc::nodes)) {
    throw SqlError(ERRCODE_FEATURE_NOT_SUPPORTED,
                   std::string("foreign server \"") + server_name + "\" names the cluster at '" +
                       server_nodes + "', not the one of this session's ramp.nodes",
                   "The ramp foreign data wrapper reads and writes through the session's "
                   "connection to the cluster, at the snapshot and in the RAMP PUT of its "
                   "ramp tables.",
                   "Set ramp.nodes to the server's nodes, or drop the server's nodes option.");
  }
  if (server_token_file != nullptr && !SameSetting(server_token_file, guc::token_file)) {
    throw SqlError(ERRCODE_FEATURE_NOT_SUPPORTED,
                   std::string("foreign server \"") + server_name +
                       "\" names a token file other than this session's ramp.token_file",
                   "", "Set ramp.token_file to the server's token_file, or drop the option.");
  }
  Keyspace ks;
  ks.label[0] = '\0';
  ks.buckets = buckets;
  if (ParseId(option, &ks.id)) {
    if (ks.id < ramp::kFirstUserKeyspace) {
      throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE,
                     std::string("keyspace ") + option + " is reserved (ids below 65536)");
    }
    if (ks.buckets == 0) {
      Session& session = Session::Get();
      ramp::KeyspaceCatalog catalog(&session.client());
      ramp::KeyspaceEntry e;
      bool found = false;
      session.Check(catalog.Get(ks.id, &e, &found), "reading the cluster's keyspace catalog");
      ks.buckets = found ? e.buckets : ramp::kDefaultBuckets;
      if (found && e.kind == 'k') {
        snprintf(ks.label, sizeof(ks.label), "%.*s.%.*s", NAMEDATALEN - 1, e.schema.c_str(),
                 NAMEDATALEN - 1, e.relation.c_str());
      }
    }
    return ks;
  }
  // SCHEMA.NAME of a key-value entry of the catalog.
  const char* dot = std::strchr(option, '.');
  if (dot == nullptr) {
    throw SqlError(ERRCODE_INVALID_PARAMETER_VALUE,
                   std::string("invalid keyspace \"") + option + "\"", "",
                   "Give a keyspace id (decimal) or SCHEMA.NAME of a key-value keyspace "
                   "of ramp.cluster_keyspaces().");
  }
  const std::string schema(option, dot), name(dot + 1);
  Session& session = Session::Get();
  ramp::KeyspaceCatalog catalog(&session.client());
  std::vector<ramp::KeyspaceEntry> entries;
  session.Check(catalog.List(&entries), "reading the cluster's keyspace catalog");
  const ramp::KeyspaceEntry* match = nullptr;
  for (const ramp::KeyspaceEntry& e : entries) {
    if (e.kind == 'k' && e.live() && e.schema == schema && e.relation == name) {
      if (match == nullptr || e.created_ms >= match->created_ms) match = &e;
    }
  }
  if (match == nullptr) {
    throw SqlError(ERRCODE_UNDEFINED_OBJECT,
                   std::string("no live key-value keyspace named \"") + option +
                       "\" in the cluster's keyspace catalog",
                   "", "SELECT * FROM ramp.cluster_keyspaces() WHERE kind = 'k' lists them.");
  }
  ks.id = match->id;
  if (ks.buckets == 0) ks.buckets = match->buckets;
  snprintf(ks.label, sizeof(ks.label), "%.*s.%.*s", NAMEDATALEN - 1, schema.c_str(),
           NAMEDATALEN - 1, name.c_str());
  return ks;
}

std::unique_ptr<Reader> PointReader(const Keyspace& ks, std::vector<std::string> keys, uint32_t cid,
                                    bool remember) {
  return std::make_unique<PointReads>(ks, std::move(keys), cid, remember);
}

std::unique_ptr<Reader> ScanReader(const Keyspace& ks, uint32_t cid, bool remember) {
  return std::make_unique<ScanReads>(ks, cid, remember);
}

}  // namespace pgramp::fdw
