// ramp_hash scans: equality lookups. One GetGroup reads every entry of the value (one
// partition); the transaction's own buffered entries are overlaid; the rows are then read
// by the table AM with RowRequest::required taken from the entries' siblings, so index and
// table are read atomically together (an entry never leads to an older row version than
// the one written with it).
#include <algorithm>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ramp/client.h"
#include "ramp/hlc.h"

#include "ramp/read_session.h"
#include "rows/keys.hpp"
#include "sqlapi/guc.hpp"
#include "xact/session.hpp"
#include "xact/xact.hpp"

#include "boundary/boundary.hpp"
#include "boundary/context_owned.hpp"
#include "catalog/keyspace_catalog.hpp"
#include "hashindex/hashindex.hpp"
#include "rows/tid.hpp"
#include "xact/visibility.hpp"

namespace pgramp::hashindex {

namespace {

constexpr uint64_t kRaceWindowMs = 10000;
constexpr int kMaxLookupAttempts = 200;

struct HashScan {
  std::vector<uint64_t> rowids;
  size_t pos = 0;
  bool loaded = false;
};

struct HashScanOpaque {
  ContextOwned<HashScan>* state;
};

HashScan& StateOf(IndexScanDesc scan) {
  auto* opaque = static_cast<HashScanOpaque*>(scan->opaque);
  if (opaque == nullptr || opaque->state == nullptr || opaque->state->object == nullptr) {
    throw SqlError(ERRCODE_INTERNAL_ERROR, "ramp_hash scan used after its memory was released");
  }
  return *opaque->state->object;
}

ramp::KeyspaceRef TableKeyspace(IndexScanDesc scan) {
  if (scan->heapRelation != nullptr) return RelationKeyspace(scan->heapRelation);
  // Bitmap index scans have no heap relation: open it (the executor holds its lock).
  const Oid relid = scan->indexRelation->rd_index->indrelid;
  Relation heap = PgCall([&] { return RelationIdGetRelation(relid); });
  ramp::KeyspaceRef ks;
  try {
    ks = RelationKeyspace(heap);
  } catch (...) {
    PgCall([&] { RelationClose(heap); });
    throw;
  }
  PgCall([&] { RelationClose(heap); });
  return ks;
}

// Whether an entry was written in the same transaction as its row (DML, not a build):
// the row then has a version at exactly the entry's timestamp.
bool WrittenWithRow(const ramp::GroupEntry& e, ramp::KeyspaceId table_ks,
                    std::string_view row_key) {
  if (e.value == kEntryWithRow) return true;
  for (const auto& [key, ks] : e.siblings) {
    if (ks == table_ks && key == row_key) return true;
  }
  return false;
}

// A deletion younger than this may belong to a transaction whose commit has not reached the
// index partition yet; an older one is a stale entry (rows are deleted together with their
// entries, unless a server without the index deleted them) and is skipped.
bool RecentDeletion(const ramp::Timestamp& ts) {
  const uint64_t now = ramp::HybridClock::PhysicalNow();
  return ts.time + (kRaceWindowMs << 16) > now;
}

// Reads the entries of a group and, in one read-atomic ReadRows, the rows they lead to; the
// rows go to the session's prefetch cache, where the table fetches of this statement find
// them (one round trip for the rows instead of one per row).
//
// Consistency: rows never change in place (UPDATE writes a new row id), so a row read
// through an entry is either the version written with it or a deletion. A deletion means
// that a transaction removed the row and its entry (and perhaps inserted new ones) and is
// committed at the row's partition but not yet at the entry's: the lookup is repeated until
// the index partition shows that transaction's entries too. Entries written with their
// row pass the entry's timestamp as RowRequest::required, so a row whose transaction is
// committed at the index partition but not yet at the row's is still found.
void LookUp(const ramp::KeyspaceRef& index_ks, const ramp::KeyspaceRef& table_ks,
            const std::string& group, std::vector<uint64_t>* found) {
  Session& session = Session::Get();
  session.Define(index_ks);
  session.Define(table_ks);
  const XactState* x = XactIfAny();
  std::vector<ramp::GroupEntry> entries;
  std::vector<ramp::RowRequest> rows;
  std::vector<ramp::RowResult> results;
  for (int attempt = 0;; attempt++) {
    found->clear();
    ramp::ReadSession& reads = session.reads();
    session.Check(reads.GetGroup(index_ks.id, group, &entries), "reading a ramp_hash index");
    rows.clear();
    for (const ramp::GroupEntry& e : entries) {
      uint64_t rowid = 0;
      if (!DecodeRowKey(e.suffix, &rowid)) continue;
      found->push_back(rowid);
      // Rows this transaction wrote are decided by its own buffer.
      if (table_ks.fresh ||
          (x != nullptr && x->writes.Find(table_ks.id, ramp::EntryKey{0, rowid}))) {
        continue;
      }
      ramp::Timestamp required;
      if (WrittenWithRow(e, table_ks.id, e.suffix)) required = e.ts;
      rows.push_back(ramp::RowRequest{table_ks.id, rowid, required});
    }
    if (rows.empty()) return;
    // The versions of rows found are remembered by the read.
    session.Check(reads.ReadRows(rows, ramp::RowReads::kSnapshot, &results),
                  "reading rows through a ramp_hash index");
    bool racing = false;
    for (size_t i = 0; i < results.size() && i < rows.size(); i++) {
      if (!results[i].found && RecentDeletion(results[i].ts) && !results[i].ts.zero()) {
        racing = true;
      }
    }
    if (guc::debug_unchecked_lookups) racing = false;
    if (!racing || attempt + 1 >= kMaxLookupAttempts) {
      if (racing) {
        throw RampError(ramp::Status::Conflict("the entries of a ramp_hash index value kept "
                                               "changing while they were read"),
                        "reading rows through a ramp_hash index");
      }
      for (size_t i = 0; i < results.size() && i < rows.size(); i++) {
        ramp::RowResult& r = results[i];
        reads.Prefetch(table_ks.id, rows[i].rowid, r.ts, r.found, std::move(r.value));
      }
      return;
    }
    // A commit in flight: give it a moment (growing), then read the group again.
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::microseconds(100 * std::min(attempt + 1, 20));
    while (std::chrono::steady_clock::now() < until) {
      session.Check(WaitHook(), "reading a ramp_hash index");
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

void Load(IndexScanDesc scan, HashScan& state) {
  state.loaded = true;
  state.pos = 0;
  state.rowids.clear();
  if (scan->numberOfKeys < 1) {
    throw SqlError(ERRCODE_FEATURE_NOT_SUPPORTED, "ramp_hash scans need an equality condition");
  }
  uint64_t group_hash = 0;
  for (int i = 0; i < scan->numberOfKeys; i++) {
    ScanKey key = &scan->keyData[i];
    if (key->sk_flags & SK_ISNULL) return;  // = NULL matches nothing
    if (key->sk_strategy != 1) {
      throw SqlError(ERRCODE_FEATURE_NOT_SUPPORTED, "ramp_hash only supports equality");
    }
    const Oid subtype = key->sk_subtype;
    const Datum argument = key->sk_argument;
    const uint64_t h = PgCall([&] { return HashValue(scan->indexRelation, subtype, argument); });
    if (i == 0) {
      group_hash = h;
    } else if (h != group_hash) {
      return;  // a = x AND a = y with x <> y
    }
  }
  const std::string group = HashGroup(group_hash);

  const ramp::KeyspaceRef index_ks = RelationKeyspace(scan->indexRelation);
  const ramp::KeyspaceRef table_ks = TableKeyspace(scan);
  std::vector<uint64_t> found;
  if (!index_ks.fresh) LookUp(index_ks, table_ks, group, &found);
  if (const XactState* x = XactIfAny()) {
    const ramp::Visibility vis = VisibilityOf(scan->xs_snapshot);
    std::vector<uint64_t> removed;
    if (const ramp::WriteBatch::Keyspace* own = x->writes.Of(index_ks.id)) {
      own->ForEachInGroup(group_hash, 0, [&](const ramp::EntryKey& k, const ramp::BatchEntry& w) {
        if (vis.SeesDelete(w)) {
          removed.push_back(k.rowid);
        } else if (vis.SeesInsert(w)) {
          found.push_back(k.rowid);
        }
        return true;
      });
    }
    std::sort(removed.begin(), removed.end());
    std::erase_if(
        found, [&](uint64_t id) { return std::binary_search(removed.begin(), removed.end(), id); });
  }
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  state.rowids = std::move(found);
}

}  // namespace

IndexScanDesc BeginScan(Relation index, int nkeys, int norderbys) {
  IndexScanDesc scan = RelationGetIndexScan(index, nkeys, norderbys);
  auto* opaque = static_cast<HashScanOpaque*>(palloc0(sizeof(HashScanOpaque)));
  scan->opaque = opaque;
  opaque->state = Boundary([] { return OwnInCurrentContext(std::make_unique<HashScan>()); });
  return scan;
}

void Rescan(IndexScanDesc scan, ScanKey keys, int nkeys, ScanKey orderbys, int norderbys) {
  if (keys != nullptr && scan->numberOfKeys > 0) {
    memmove(scan->keyData, keys, scan->numberOfKeys * sizeof(ScanKeyData));
  }
  Boundary([&] {
    HashScan& state = StateOf(scan);
    state.loaded = false;
    state.rowids.clear();
    state.pos = 0;
  });
}

bool GetTuple(IndexScanDesc scan, ScanDirection direction) {
  return Boundary([&] {
    if (direction == BackwardScanDirection) {
      throw SqlError(ERRCODE_FEATURE_NOT_SUPPORTED, "ramp_hash cannot scan backward");
    }
    HashScan& state = StateOf(scan);
    if (!state.loaded) Load(scan, state);
    if (state.pos >= state.rowids.size()) return false;
    SetTid(&scan->xs_heaptid, state.rowids[state.pos++]);
    // Entries are grouped by hash: the executor rechecks the condition on the row.
    scan->xs_recheck = true;
    return true;
  });
}

int64 GetBitmap(IndexScanDesc scan, TIDBitmap* tbm) {
  return Boundary([&] {
    HashScan& state = StateOf(scan);
    Load(scan, state);
    const int n = static_cast<int>(state.rowids.size());
    if (n == 0) return int64{0};
    auto* tids =
        static_cast<ItemPointerData*>(PgCall([&] { return palloc(sizeof(ItemPointerData) * n); }));
    for (int i = 0; i < n; i++) SetTid(&tids[i], state.rowids[i]);
    PgCall([&] {
      tbm_add_tuples(tbm, tids, n, true);
      pfree(tids);
    });
    return static_cast<int64>(n);
  });
}

void EndScan(IndexScanDesc scan) {
  auto* opaque = static_cast<HashScanOpaque*>(scan->opaque);
  if (opaque != nullptr && opaque->state != nullptr) opaque->state->Destroy();
  if (opaque != nullptr) pfree(opaque);
  scan->opaque = nullptr;
}

}  // namespace pgramp::hashindex
