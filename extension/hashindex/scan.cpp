// ramp_hash scans: equality lookups. One GetGroup reads every entry of the value (one
// partition); the transaction's own buffered entries are overlaid; the rows are then read
// by the table AM with RowRequest::required taken from the entries' siblings, so index and
// table are read atomically together (an entry never leads to an older row version than
// the one written with it).
#include <algorithm>
#include <chrono>
#include <memory>
#include <span>
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

// The rows of a lookup's entries are read in one ReadRows, all together (index and table
// read-atomically). An index scan (GetTuple) whose value has several entries first reads only
// the row of its smallest row id: a semi or anti join, or an EXISTS, stops at the first row
// that qualifies, and a read of all of a value's rows costs a round trip per node plus RAMP's
// round 2 over bulk-loaded rows (TPC-H Q22 on ramp_hash: 1 895 lookups of 10-15 entries for
// existence, 0.24 ms each). The rest are read when the executor asks for a second row: in
// one ReadRows of every entry again (the first row included), so what the scan returns is
// still one read-atomic read; if the first row's version differs there (a transaction
// committed in between), the statement fails with a conflict rather than mix the two reads.
struct HashScan {
  std::vector<uint64_t> rowids;
  size_t pos = 0;
  bool loaded = false;
  // Set while only the first row is read (see above).
  bool rest_pending = false;
  std::vector<ramp::RowRequest> rows;  // every entry's row, to read when more are needed
  uint64_t first_rowid = 0;
  ramp::Timestamp first_ts;
  bool first_live = false;
  std::string group;
  uint64_t group_hash = 0;
  ramp::KeyspaceRef index_ks;
  ramp::KeyspaceRef table_ks;
  // Set by an index scan (GetTuple): the executor fetched each row it handed out right
  // away, so its prefetched rows can go when the scan moves on (Forget).
  bool tuple_scan = false;
};

// The prefetched rows of an index scan's previous key (read and fetched by now): forgotten,
// so that a nested loop's thousands of lookups do not grow the statement's prefetch table
// (whose lookups then miss the CPU caches: a tenth of TPC-H Q7's time on ramp_hash).
void Forget(HashScan& state) {
  if (!state.tuple_scan || !state.loaded || state.rowids.empty()) return;
  ramp::ReadSession& reads = Session::Get().reads();
  for (uint64_t id : state.rowids) reads.Unprefetch(state.table_ks.id, id);
}

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

// The entries of a group: the row ids they name (`found`) and the rows to read from the
// servers for them (`rows`: not the rows this transaction wrote, which its own buffer
// decides). Entries written with their row pass the entry's timestamp as
// RowRequest::required, so a row whose transaction is committed at the index partition but
// not yet at the row's is still found.
//
// Unless `fresh`, the entries may be ones the client kept from an earlier read of the group,
// served after a one-sided read of the partition's group version found that nothing in the
// partition changed since (ReadSession::GetGroup): what a GetGroup request would return at
// that moment, without its round trip.
void ReadGroup(Session& session, const ramp::KeyspaceRef& index_ks,
               const ramp::KeyspaceRef& table_ks, const std::string& group, bool fresh,
               std::vector<uint64_t>* found, std::vector<ramp::RowRequest>* rows) {
  const XactState* x = XactIfAny();
  std::vector<ramp::GroupEntry> entries;
  found->clear();
  rows->clear();
  session.Check(session.reads().GetGroup(index_ks.id, group, &entries, fresh),
                "reading a ramp_hash index");
  for (const ramp::GroupEntry& e : entries) {
    uint64_t rowid = 0;
    if (!DecodeRowKey(e.suffix, &rowid)) continue;
    found->push_back(rowid);
    if (table_ks.fresh || (x != nullptr && x->writes.Find(table_ks.id, ramp::EntryKey{0, rowid}))) {
      continue;
    }
    ramp::Timestamp required;
    if (WrittenWithRow(e, table_ks.id, e.suffix)) required = e.ts;
    rows->push_back(ramp::RowRequest{table_ks.id, rowid, required});
  }
}

// One read-atomic ReadRows of entries' rows. False if a row was deleted recently (a commit
// in flight: the group must be read again); otherwise the rows go to the session's prefetch
// cache, where the table fetches of this statement find them.
bool ReadEntryRows(Session& session, const ramp::KeyspaceRef& table_ks,
                   std::span<const ramp::RowRequest> rows) {
  ramp::ReadSession& reads = session.reads();
  std::vector<ramp::RowResult> results;
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
  if (racing) return false;
  for (size_t i = 0; i < results.size() && i < rows.size(); i++) {
    ramp::RowResult& r = results[i];
    reads.Prefetch(table_ks.id, rows[i].rowid, r.ts, r.found, std::move(r.value));
  }
  return true;
}

// Reads the entries of a group and, in one read-atomic ReadRows, the rows they lead to (one
// round trip for the rows instead of one per row).
//
// Consistency: rows never change in place (UPDATE writes a new row id), so a row read
// through an entry is either the version written with it or a deletion. A deletion means
// that a transaction removed the row and its entry (and perhaps inserted new ones) and is
// committed at the row's partition but not yet at the entry's: the lookup is repeated until
// the index partition shows that transaction's entries too.
//
// With `scan` (an index scan, not a bitmap), a value with several rows to read has only
// the row of its smallest row id read now; the scan keeps the rest (HashScan).
void LookUp(const ramp::KeyspaceRef& index_ks, const ramp::KeyspaceRef& table_ks,
            const std::string& group, std::vector<uint64_t>* found, HashScan* scan = nullptr) {
  Session& session = Session::Get();
  session.Define(index_ks);
  session.Define(table_ks);
  std::vector<ramp::RowRequest> rows;
  for (int attempt = 0;; attempt++) {
    // A retry (a commit in flight) asks the server: the kept entries would be the same.
    ReadGroup(session, index_ks, table_ks, group, /*fresh=*/attempt > 0, found, &rows);
    if (rows.empty()) return;
    if (scan != nullptr && attempt == 0 && rows.size() > 1) {
      const auto first = std::min_element(
          rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.rowid < b.rowid; });
      if (ReadEntryRows(session, table_ks, std::span<const ramp::RowRequest>(&*first, 1))) {
        const ramp::PrefetchedRow* p = session.reads().Prefetched(table_ks.id, first->rowid);
        scan->rest_pending = true;
        scan->first_rowid = first->rowid;
        scan->first_live = p != nullptr && p->live;
        scan->first_ts = p != nullptr ? p->ts : ramp::Timestamp{};
        scan->rows = std::move(rows);
        return;
      }
      // A commit in flight: read everything together, as below.
    } else if (ReadEntryRows(session, table_ks, rows)) {
      return;
    }
    if (attempt + 1 >= kMaxLookupAttempts) {
      throw RampError(ramp::Status::Conflict("the entries of a ramp_hash index value kept "
                                             "changing while they were read"),
                      "reading rows through a ramp_hash index");
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

// The transaction's own entries of the group overlaid on `found` (sorted, unique).
void OverlayOwn(IndexScanDesc scan, const ramp::KeyspaceRef& index_ks, uint64_t group_hash,
                std::vector<uint64_t>* found) {
  if (const XactState* x = XactIfAny()) {
    const ramp::Visibility vis = VisibilityOf(scan->xs_snapshot);
    std::vector<uint64_t> removed;
    if (const ramp::WriteBatch::Keyspace* own = x->writes.Of(index_ks.id)) {
      own->ForEachInGroup(group_hash, 0, [&](const ramp::EntryKey& k, const ramp::BatchEntry& w) {
        if (vis.SeesDelete(w)) {
          removed.push_back(k.rowid);
        } else if (vis.SeesInsert(w)) {
          found->push_back(k.rowid);
        }
        return true;
      });
    }
    std::sort(removed.begin(), removed.end());
    std::erase_if(*found, [&](uint64_t id) {
      return std::binary_search(removed.begin(), removed.end(), id);
    });
  }
  std::sort(found->begin(), found->end());
  found->erase(std::unique(found->begin(), found->end()), found->end());
}

// The executor wants more rows than the first: read every entry's row together (the first
// again), and make sure the rows handed out already are what that read says.
void ReadRest(IndexScanDesc scan, HashScan& state) {
  state.rest_pending = false;
  Session& session = Session::Get();
  std::vector<uint64_t> found;
  if (ReadEntryRows(session, state.table_ks, state.rows)) {
    found = state.rowids;  // the same entries, already overlaid
  } else {
    LookUp(state.index_ks, state.table_ks, state.group, &found);
    OverlayOwn(scan, state.index_ks, state.group_hash, &found);
  }
  state.rows.clear();
  std::vector<uint64_t> handed(state.rowids.begin(),
                               state.rowids.begin() + static_cast<std::ptrdiff_t>(state.pos));
  std::sort(handed.begin(), handed.end());
  const ramp::PrefetchedRow* p = session.reads().Prefetched(state.table_ks.id, state.first_rowid);
  const bool first_handed = std::binary_search(handed.begin(), handed.end(), state.first_rowid);
  const bool same_first = p != nullptr && p->live == state.first_live && p->ts == state.first_ts &&
                          std::binary_search(found.begin(), found.end(), state.first_rowid);
  if (first_handed && !same_first && (state.first_live || (p != nullptr && p->live))) {
    throw RampError(ramp::Status::Conflict("a row found through a ramp_hash index changed "
                                           "while the index scan read the value's rows"),
                    "reading rows through a ramp_hash index");
  }
  // What is left: every row id of the full read not handed out yet, in order.
  std::erase_if(found,
                [&](uint64_t id) { return std::binary_search(handed.begin(), handed.end(), id); });
  std::vector<uint64_t> rowids(state.rowids.begin(),
                               state.rowids.begin() + static_cast<std::ptrdiff_t>(state.pos));
  rowids.insert(rowids.end(), found.begin(), found.end());
  state.rowids = std::move(rowids);
}

void Load(IndexScanDesc scan, HashScan& state, bool first_only) {
  state.loaded = true;
  state.pos = 0;
  state.rowids.clear();
  state.rest_pending = false;
  state.rows.clear();
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
  state.group = HashGroup(group_hash);
  state.group_hash = group_hash;
  state.index_ks = RelationKeyspace(scan->indexRelation);
  state.table_ks = TableKeyspace(scan);
  std::vector<uint64_t> found;
  if (!state.index_ks.fresh) {
    LookUp(state.index_ks, state.table_ks, state.group, &found,
           first_only && !guc::debug_hash_all_rows ? &state : nullptr);
  }
  OverlayOwn(scan, state.index_ks, group_hash, &found);
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
    Forget(state);
    state.loaded = false;
    state.rowids.clear();
    state.pos = 0;
    state.rest_pending = false;
    state.rows.clear();
  });
}

bool GetTuple(IndexScanDesc scan, ScanDirection direction) {
  return Boundary([&] {
    if (direction == BackwardScanDirection) {
      throw SqlError(ERRCODE_FEATURE_NOT_SUPPORTED, "ramp_hash cannot scan backward");
    }
    HashScan& state = StateOf(scan);
    if (!state.loaded) {
      pgstat_count_index_scan(scan->indexRelation);  // idx_scan, as btree counts it
      Load(scan, state, /*first_only=*/true);
      state.tuple_scan = true;
    }
    if (state.rest_pending && state.pos >= 1) ReadRest(scan, state);
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
    pgstat_count_index_scan(scan->indexRelation);
    Load(scan, state, /*first_only=*/false);
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
