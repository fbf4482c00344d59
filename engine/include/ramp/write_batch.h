// A write batch: the writes of one transaction, buffered in the client until
// Client::Write(batch) sends them as one RAMP PUT (like leveldb's WriteBatch + DB::Write).
// It is the only write buffer of the client library: a Transaction keeps its writes in one.
//
// Two kinds of entries:
//  - numbered rows (Insert, UpdateInPlace, Delete): per keyspace, keyed by (group, row id);
//    the key sent is RowKey(id), or EncodeGroupKey(RowKey(group), RowKey(id)) when the
//    keyspace is grouped (ramp/keys.h). They carry what a SQL engine needs from its write
//    buffer, with plain integers for its command and subtransaction ids:
//     - command-id visibility: a reader sees an insert/delete only when its command id is
//       older than the reader's (Visibility), so an UPDATE does not re-see the rows it makes;
//     - subtransactions: an undo log records what each write replaced, with the
//       subtransaction id that made it; RollbackSubtransaction undoes the log back to it;
//     - a hash map serves point lookups; ordered visits (the rows a scan adds after the
//       remote ones, the entries of one group) use a key list sorted lazily, so that
//       appending rows with growing ids (INSERT, COPY) costs no ordering work;
//     - in-place updates: a committed row gets a new value under its own key, with the
//       version read as the expected one.
//  - keys of the caller's own layout (PutKey, DeleteKey): benchmarks, tools, tests.
//
// Limits (WriteLimits) are checked here, once, when a write is added. PostgreSQL-free.
#pragma once

#include <algorithm>
#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ramp/status.h"
#include "ramp/types.h"

namespace ramp {

using CommandId = uint32_t;
using SubTxnId = uint32_t;
inline constexpr CommandId kAllCommands = 0xFFFFFFFFu;  // a reader that sees every command
inline constexpr SubTxnId kTopSubTxn = 1;               // the top-level (sub)transaction

// A keyspace of numbered rows as its writer knows it. Client::Write defines the keyspace
// (buckets, grouping) from it: the one place where grouping is decided for a write.
struct KeyspaceRef {
  KeyspaceId id = 0;
  uint32_t buckets = kDefaultBuckets;
  bool grouped = false;
  // Created by the current transaction: nothing of it can be on the cluster yet.
  bool fresh = false;
};

// (group, row id) inside one keyspace; group is 0 in keyspaces that are not grouped.
struct EntryKey {
  uint64_t group = 0;
  uint64_t rowid = 0;
  auto operator<=>(const EntryKey&) const = default;
  bool operator==(const EntryKey&) const = default;
};

// Row ids are dense and group hashes random: row id XOR scrambled group spreads keys over
// libstdc++'s prime-sized bucket arrays evenly (consecutive row ids land in consecutive
// buckets). A multiplicative mix of the row id clustered them: 4x slower inserts.
struct EntryKeyHash {
  size_t operator()(const EntryKey& k) const noexcept {
    return static_cast<size_t>(k.rowid ^ (k.group * 0x9E3779B97F4A7C15ull));
  }
};

// The buffered state of one row key.
struct BatchEntry {
  std::string value;
  bool inserted = false;  // holds a value written by this transaction (at insert_cid)
  bool deleted = false;   // deleted by this transaction (at delete_cid)
  // The deletion is half of an update that gave the row a new key (PostgreSQL: a new row id,
  // or another partition): its tombstone says so (kMovedTombstone), and a writer that waited
  // for the row fails instead of skipping it as deleted.
  bool moved = false;
  uint64_t moved_to = 0;  // with moved: the row's new row id in the same keyspace (0: none)
  bool remote = false;        // the key may have a committed version: a delete must be sent
  bool has_expected = false;  // the version this transaction read (write-write conflicts)
  // An update that kept the row id: value replaces the committed version `expected` at
  // commit; commands up to insert_cid still see that one.
  bool in_place = false;
  // value is committed on the cluster already, ahead of the transaction
  // (Client::WriteAhead): Client::Write does not send it again. A later write of the key
  // clears it (and sets remote: the key now has a committed version to replace).
  bool streamed = false;
  CommandId insert_cid = 0;
  CommandId delete_cid = 0;
  Timestamp expected;

  // What Client::Write sends for it: nothing (inserted and deleted here, never written, or
  // written ahead), a tombstone or the value.
  bool sent() const { return deleted ? remote : inserted && !streamed; }
};

// The value of a tombstone written for a BatchEntry with `moved` (a plain deletion's is
// empty): kMovedTombstone, then the new row id (8 bytes, little-endian) when the row stayed
// in its keyspace. Whoever is granted the key's intent next reads it (IntentResult::value)
// and can follow the row there, as heap follows an updated tuple's ctid.
inline constexpr std::string_view kMovedTombstone = "moved";
std::string MovedTombstone(uint64_t moved_to);
// True for a moved row's tombstone value; *moved_to is its new row id (0: not known).
bool ParseMovedTombstone(std::string_view value, uint64_t* moved_to);

// Which buffered row writes a reader sees.
struct Visibility {
  CommandId curcid = kAllCommands;
  bool see_deleted = false;  // rows deleted by this transaction stay visible

  bool SeesInsert(const BatchEntry& w) const { return w.inserted && w.insert_cid < curcid; }
  bool SeesDelete(const BatchEntry& w) const {
    return !see_deleted && w.deleted && w.delete_cid < curcid;
  }
};

// A write to a key of the caller's own layout.
struct KeyWrite {
  KeyspaceId keyspace = 0;
  std::string key;
  std::string value;
  bool tombstone = false;
  bool has_expected = false;
  Timestamp expected;
};

struct WriteLimits {
  size_t max_key_bytes = 4096;
  size_t max_value_bytes = 32u << 20;
};

class WriteBatch {
 public:
  // The row writes to one keyspace.
  class Keyspace {
   public:
    explicit Keyspace(const KeyspaceRef& ref) : ref_(ref) {}
    const KeyspaceRef& ref() const { return ref_; }
    const BatchEntry* Find(const EntryKey& key) const {
      auto it = map_.find(key);
      return it == map_.end() ? nullptr : &it->second;
    }
    // Calls fn(key, entry) for the entries of `group` with row id >= from, in row-id order,
    // until fn returns false.
    template <class Fn>
    void ForEachInGroup(uint64_t group, uint64_t from, Fn&& fn) const {
      Sort();
      auto it = std::lower_bound(order_.begin(), order_.end(), EntryKey{group, from});
      for (; it != order_.end() && it->group == group; ++it) {
        auto found = map_.find(*it);
        if (found == map_.end()) continue;  // undone since it was listed
        if (!fn(found->first, found->second)) return;
      }
    }
    // Every entry, in no particular order.
    const std::unordered_map<EntryKey, BatchEntry, EntryKeyHash>& entries() const { return map_; }
    size_t size() const { return map_.size(); }

   private:
    friend class WriteBatch;
    void Sort() const;

    KeyspaceRef ref_;
    std::unordered_map<EntryKey, BatchEntry, EntryKeyHash> map_;
    // Every key ever added (undone ones too); [0, sorted_) is sorted and without duplicates.
    mutable std::vector<EntryKey> order_;
    mutable size_t sorted_ = 0;
  };

  explicit WriteBatch(const WriteLimits& limits = {}) : limits_(limits) {}
  void set_limits(const WriteLimits& limits) { limits_ = limits; }
  const WriteLimits& limits() const { return limits_; }
  // TooLarge when a value of this size may not be written (the one value-size check);
  // `what` names it in the message ("a row of N bytes exceeds the limit of M bytes").
  Status CheckValue(size_t bytes, const char* what = "value") const;

  // ---- numbered rows ----
  // A new key (fresh row id, new index entry) with its value. TooLarge (and nothing
  // buffered) when the value is over the limit.
  Status Insert(const KeyspaceRef& ks, EntryKey key, std::string value, CommandId cid,
                SubTxnId sub);
  // A committed row (read at `expected`) gets a new value under its own key. TooLarge (and
  // nothing buffered) when the value is over the limit.
  Status UpdateInPlace(const KeyspaceRef& ks, EntryKey key, std::string value, CommandId cid,
                       SubTxnId sub, const Timestamp& expected);
  // Deletes a key. remote: it may have a committed version on the cluster; expected: the
  // version this transaction read (the commit fails with Conflict if it changed); moved: the
  // row lives on under another key (BatchEntry::moved).
  void Delete(const KeyspaceRef& ks, EntryKey key, CommandId cid, SubTxnId sub, bool remote,
              const Timestamp* expected, bool moved = false);
  // The new row id of a row Delete marked moved (the key's entry must be that deletion).
  void SetMovedTo(KeyspaceId ks, EntryKey key, uint64_t rowid);

  const BatchEntry* Find(KeyspaceId ks, EntryKey key) const {
    const Keyspace* k = Of(ks);
    return k == nullptr ? nullptr : k->Find(key);
  }
  // The row writes to ks (nullptr: none).
  const Keyspace* Of(KeyspaceId ks) const {
    auto it = keyspaces_.find(ks);
    return it == keyspaces_.end() ? nullptr : &it->second;
  }
  const std::map<KeyspaceId, Keyspace>& keyspaces() const { return keyspaces_; }
  bool HasWritesTo(KeyspaceId ks) const {
    const Keyspace* k = Of(ks);
    return k != nullptr && k->size() > 0;
  }

  // Marks an entry written ahead (BatchEntry::streamed), or not any more (its write ahead
  // was aborted: Client::Write sends it). False if there is no such entry.
  bool SetStreamed(KeyspaceId ks, EntryKey key, bool streamed);

  // Undoes every row write made by subtransaction `sub` or its children (ids grow).
  void RollbackSubtransaction(SubTxnId sub);
  // Drops every row write to ks, without undo (non-transactional truncate).
  void DiscardKeyspace(KeyspaceId ks);

  // ---- keys of the caller's layout ----
  // expected (optional): the version this transaction read (write-write conflicts). A second
  // write of a key replaces the first and keeps its expected version.
  Status PutKey(KeyspaceId ks, std::string_view key, std::string_view value,
                const Timestamp* expected = nullptr);
  Status DeleteKey(KeyspaceId ks, std::string_view key, const Timestamp* expected = nullptr);
  const KeyWrite* FindKey(KeyspaceId ks, std::string_view key) const;
  const std::vector<KeyWrite>& key_writes() const { return key_writes_; }

  void Clear();
  bool empty() const { return size_ == 0 && key_writes_.empty(); }
  // Buffered entries (row entries not sent, such as rows inserted and deleted here, count).
  size_t size() const { return size_ + key_writes_.size(); }

 private:
  struct Undo {
    KeyspaceId keyspace;
    EntryKey key;
    std::optional<BatchEntry> previous;
    SubTxnId sub;
  };
  BatchEntry& Slot(const KeyspaceRef& ks, EntryKey key, SubTxnId sub);
  Status CheckKey(std::string_view key) const;
  void Buffer(KeyWrite w);

  WriteLimits limits_;
  std::map<KeyspaceId, Keyspace> keyspaces_;
  std::vector<Undo> undo_;  // only writes made inside subtransactions
  size_t size_ = 0;
  std::vector<KeyWrite> key_writes_;
  std::unordered_map<std::string, size_t> key_index_;  // (keyspace, key) → key_writes_[i]
};

}  // namespace ramp
