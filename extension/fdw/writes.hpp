// The ramp FDW's per-transaction state (C++): its buffered key writes, with command-id
// visibility and subtransaction undo, and the versions its UPDATE/DELETE scans read.
// The writes join the transaction's ramp::WriteBatch at pre-commit (one RAMP PUT with the
// ramp tables' writes; xact/xact.hpp SetPreCommitFlush).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ramp/types.h"
#include "ramp/write_batch.h"

namespace pgramp::fdw {

struct OwnWrite {
  bool tombstone = false;
  std::string value;
  uint32_t cid = 0;
  uint32_t sub = 0;
};

class ForeignWrites {
 public:
  // The transaction's state, created on first use; nullptr when it has none.
  static ForeignWrites& Get();
  static ForeignWrites* GetIfAny();
  static void End() noexcept;

  void Write(ramp::KeyspaceId ks, uint32_t buckets, std::string_view key, bool tombstone,
             std::string_view value, uint32_t cid, uint32_t sub);
  // The own write a reader of command cid sees (one of an earlier command), or nullptr.
  const OwnWrite* Visible(ramp::KeyspaceId ks, std::string_view key, uint32_t cid) const;
  // Every key of ks with a write visible to cid, in key order.
  void ForEachVisible(ramp::KeyspaceId ks, uint32_t cid,
                      const std::function<void(const std::string&, const OwnWrite&)>& fn) const;

  void RememberVersion(ramp::KeyspaceId ks, std::string_view key, const ramp::Timestamp& ts);

  void RollbackSubtransaction(uint32_t sub);
  // Moves the writes into batch (PutKey/DeleteKey, expected = the version read) and defines
  // their keyspaces on the session's client.
  void FlushInto(ramp::WriteBatch& batch);
  bool empty() const { return entries_.empty(); }

 private:
  using Key = std::pair<ramp::KeyspaceId, std::string>;
  struct Entry {
    OwnWrite current;
    std::optional<OwnWrite> before;  // the write of an earlier command, when current's replaced it
    uint32_t buckets = 0;
  };
  struct Undo {
    Key key;
    std::optional<Entry> previous;
    uint32_t sub;
  };
  std::map<Key, Entry> entries_;
  std::vector<Undo> undo_;
  // Versions read by scans of UPDATE/DELETE targets (bounded: the oldest are forgotten, and
  // a write of a forgotten key then carries no expected version).
  std::map<Key, ramp::Timestamp> versions_;
  std::vector<Key> version_order_;
  size_t version_head_ = 0;
};

}  // namespace pgramp::fdw
