// The writes of one PostgreSQL transaction to ramp keyspaces, buffered in the backend until
// pre-commit sends them as one RAMP PUT (DESIGN §8).
//
// The client library's Transaction buffers writes too, but it knows nothing of command ids
// and savepoints, so the extension keeps its own buffer:
//  - command-id visibility: a scan sees a buffered insert/delete only when its command id is
//    older than the scan's (snapshot curcid), so an UPDATE does not re-see the rows it makes;
//  - subtransactions: an undo log records what each write replaced, with the subtransaction
//    id that made it; ROLLBACK TO undoes the log back to that subtransaction;
//  - per keyspace, entries are keyed by (group, row id): the group is the 64-bit hash of a
//    ramp_hash entry's value (0 in table keyspaces), the row id the row's or the entry's
//    suffix. A hash map serves point lookups; ordered visits (the rows a scan adds after the
//    remote ones, the entries of one ramp_hash value) use a key list sorted lazily, so that
//    appending rows with growing row ids (INSERT, COPY) costs no ordering work.
// PostgreSQL-free: command and subtransaction ids are plain integers here.
#pragma once

#include <algorithm>
#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "ramp/types.h"

namespace pgramp {

using CommandIdT = uint32_t;
using SubXactIdT = uint32_t;
inline constexpr CommandIdT kAllCommands = 0xFFFFFFFFu;  // InvalidCommandId: sees everything
inline constexpr SubXactIdT kTopSubXact = 1;             // TopSubTransactionId

struct KeyspaceRef {
  ramp::KeyspaceId id = 0;
  uint32_t buckets = ramp::kDefaultBuckets;
  bool grouped = false;
  // Created by the current transaction: nothing of it can be on the cluster yet.
  bool fresh = false;
};

// (group, row id) inside one keyspace; group is 0 in table keyspaces.
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

struct BufferedWrite {
  std::string value;
  bool inserted = false;      // holds a value written by this transaction (at insert_cid)
  bool deleted = false;       // deleted by this transaction (at delete_cid)
  bool remote = false;        // the key may have a committed version: a delete must be sent
  bool has_expected = false;  // the version this transaction read (write-write conflicts)
  // An UPDATE that kept the row id (no indexed column changed): value replaces the
  // committed version `expected` at commit; commands up to insert_cid still see that one.
  bool in_place = false;
  CommandIdT insert_cid = 0;
  CommandIdT delete_cid = 0;
  ramp::Timestamp expected;
};

// Which buffered writes a reader sees.
struct Visibility {
  CommandIdT curcid = kAllCommands;
  bool see_deleted = false;  // SnapshotAny: rows deleted by this transaction stay visible

  bool SeesInsert(const BufferedWrite& w) const { return w.inserted && w.insert_cid < curcid; }
  bool SeesDelete(const BufferedWrite& w) const {
    return !see_deleted && w.deleted && w.delete_cid < curcid;
  }
};

class WriteBuffer {
 public:
  // The writes to one keyspace.
  class Keyspace {
   public:
    explicit Keyspace(const KeyspaceRef& ref) : ref_(ref) {}
    const KeyspaceRef& ref() const { return ref_; }
    const BufferedWrite* Find(const EntryKey& key) const {
      auto it = map_.find(key);
      return it == map_.end() ? nullptr : &it->second;
    }
    // Calls fn(key, write) for the entries of `group` with row id >= from, in row-id order,
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
    const std::unordered_map<EntryKey, BufferedWrite, EntryKeyHash>& entries() const {
      return map_;
    }
    size_t size() const { return map_.size(); }

   private:
    friend class WriteBuffer;
    void Sort() const;

    KeyspaceRef ref_;
    std::unordered_map<EntryKey, BufferedWrite, EntryKeyHash> map_;
    // Every key ever added (undone ones too); [0, sorted_) is sorted and without duplicates.
    mutable std::vector<EntryKey> order_;
    mutable size_t sorted_ = 0;
  };

  // A committed row (read at `expected`) gets a new value under its own key.
  void UpdateInPlace(const KeyspaceRef& ks, EntryKey key, std::string value, CommandIdT cid,
                     SubXactIdT sub, const ramp::Timestamp& expected);
  // A new key (fresh row id, new index entry) with its value.
  void Insert(const KeyspaceRef& ks, EntryKey key, std::string value, CommandIdT cid,
              SubXactIdT sub);
  // Deletes a key. remote: it may have a committed version on the cluster; expected: the
  // version this transaction read (Commit fails with Conflict if it changed).
  void Delete(const KeyspaceRef& ks, EntryKey key, CommandIdT cid, SubXactIdT sub, bool remote,
              const ramp::Timestamp* expected);

  const BufferedWrite* Find(ramp::KeyspaceId ks, EntryKey key) const {
    const Keyspace* k = Of(ks);
    return k == nullptr ? nullptr : k->Find(key);
  }
  // The writes to ks (nullptr: none).
  const Keyspace* Of(ramp::KeyspaceId ks) const {
    auto it = keyspaces_.find(ks);
    return it == keyspaces_.end() ? nullptr : &it->second;
  }
  const std::map<ramp::KeyspaceId, Keyspace>& keyspaces() const { return keyspaces_; }
  bool HasWritesTo(ramp::KeyspaceId ks) const {
    const Keyspace* k = Of(ks);
    return k != nullptr && k->size() > 0;
  }

  // Undoes every write made by subtransaction `sub` or its children (ROLLBACK TO).
  void RollbackSubtransaction(SubXactIdT sub);
  // Drops every write to ks, without undo (non-transactional truncate).
  void DiscardKeyspace(ramp::KeyspaceId ks);
  void Clear();

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

 private:
  struct Undo {
    ramp::KeyspaceId keyspace;
    EntryKey key;
    std::optional<BufferedWrite> previous;
    SubXactIdT sub;
  };
  BufferedWrite& Slot(const KeyspaceRef& ks, EntryKey key, SubXactIdT sub);

  std::map<ramp::KeyspaceId, Keyspace> keyspaces_;
  std::vector<Undo> undo_;  // only writes made inside subtransactions
  size_t size_ = 0;
};

}  // namespace pgramp
