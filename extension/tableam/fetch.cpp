// Reads of single rows by TID: index scans, TID scans, EvalPlanQual, triggers, and the
// multi-row fetch shared by bitmap and ANALYZE scans.
#include <algorithm>
#include <string>
#include <vector>

#include "ramp/client.h"
#include "ramp/hlc.h"

#include "rows/keys.hpp"
#include "sqlapi/guc.hpp"
#include "xact/session.hpp"
#include "xact/xact.hpp"

#include "catalog/keyspace_catalog.hpp"
#include "tableam/tableam.hpp"

namespace pgramp::tam {

namespace {

// What the transaction's own writes say about a row.
enum class Own { kUnknown, kVisible, kInvisible };

Own OwnVerdict(const ramp::KeyspaceRef& ks, const ramp::Visibility& vis, uint64_t rowid,
               const ramp::BatchEntry** entry) {
  *entry = nullptr;
  const XactState* x = XactIfAny();
  if (x == nullptr) return Own::kUnknown;
  const ramp::BatchEntry* w = x->writes.Find(ks.id, ramp::EntryKey{0, rowid});
  if (w == nullptr) return Own::kUnknown;
  *entry = w;
  if (vis.SeesDelete(*w)) return Own::kInvisible;
  // Updated in place by a command vis does not see yet: the committed version it replaces.
  if (w->in_place && !vis.SeesInsert(*w)) return Own::kUnknown;
  if (w->inserted) return vis.SeesInsert(*w) ? Own::kVisible : Own::kInvisible;
  return Own::kUnknown;  // a committed row this transaction deletes later than vis sees
}

// SnapshotAny sees every version of the TID. Heap keeps the versions of an updated row at
// different TIDs, so a fetch of the old TID returns the old version; a row updated in place
// keeps its TID, so the TID stands for the version before the update while the command that
// updated it runs (the AFTER trigger machinery of that command fetches OLD by TID: transition
// tables saw the new values), and for the new version in later commands (their UPDATE builds
// its new row from it). "The running command" is the active snapshot's: a volatile function
// called by the UPDATE may advance the command counter, not the UPDATE's snapshot.
ramp::Visibility AnyVisibility(const ramp::KeyspaceRef& ks, uint64_t rowid) {
  ramp::Visibility vis{ramp::kAllCommands, true};
  const XactState* x = XactIfAny();
  const ramp::BatchEntry* w =
      x == nullptr ? nullptr : x->writes.Find(ks.id, ramp::EntryKey{0, rowid});
  if (w == nullptr || !w->in_place) return vis;
  const CommandId running =
      ActiveSnapshotSet() ? GetActiveSnapshot()->curcid : GetCurrentCommandId(false);
  if (w->insert_cid >= running) vis.curcid = w->insert_cid;  // OwnVerdict: the committed one
  return vis;
}

struct IndexFetch {
  IndexFetchTableData base;
  // plain data: no C++ resources, so an abandoned fetch needs no cleanup
  bool ks_known;
  ramp::KeyspaceRef ks;
};

}  // namespace

void StoreVersion(TupleTableSlot* slot, Relation rel, const RowVersion& row) {
  StoreRow(slot, rel, row.rowid, row.value);
  if (row.own) {
    MarkOwnVersion(slot, row.own_cid);
  } else {
    MarkCommittedVersion(slot, row.ts.time, row.ts.client);
  }
}

void FetchRows(const ramp::KeyspaceRef& ks, const ramp::Visibility& vis,
               const std::vector<uint64_t>& rowids, FetchedRows* out) {
  out->rows.clear();
  out->dead = 0;
  ramp::ReadSession* reads = nullptr;  // set to the statement once, on first need
  std::vector<ramp::RowRequest> remote;
  for (uint64_t rowid : rowids) {
    const ramp::BatchEntry* own = nullptr;
    switch (OwnVerdict(ks, vis, rowid, &own)) {
      case Own::kVisible:
        out->rows.push_back(RowVersion{rowid, {}, true, own->value, true, own->insert_cid});
        break;
      case Own::kInvisible:
        break;
      case Own::kUnknown:
        if (ks.fresh) break;
        if (reads == nullptr) reads = &Session::Get().reads();
        if (const ramp::PrefetchedRow* p = reads->Prefetched(ks.id, rowid)) {
          if (p->live) {
            out->rows.push_back(RowVersion{rowid, p->ts, true, p->value});
          } else if (!p->ts.zero()) {
            out->dead++;
          }
          break;
        }
        remote.push_back(ramp::RowRequest{ks.id, rowid, {}});
        break;
    }
  }
  if (!remote.empty()) {
    Session& session = Session::Get();
    session.Define(ks);
    std::vector<ramp::RowResult> results;
    session.Check(reads->ReadRows(remote, ramp::RowReads::kStatement, &results),
                  "reading rows of a ramp table");
    for (size_t i = 0; i < results.size() && i < remote.size(); i++) {
      ramp::RowResult& r = results[i];
      if (r.found) {
        out->rows.push_back(RowVersion{remote[i].rowid, r.ts, true, std::move(r.value)});
      } else if (!r.ts.zero()) {
        out->dead++;
      }
    }
  }
  std::sort(out->rows.begin(), out->rows.end(),
            [](const RowVersion& a, const RowVersion& b) { return a.rowid < b.rowid; });
}

bool FetchRow(const ramp::KeyspaceRef& ks, const ramp::Visibility& vis, uint64_t rowid,
              RowVersion* out, bool* dead) {
  if (dead != nullptr) *dead = false;
  const ramp::BatchEntry* own = nullptr;
  switch (OwnVerdict(ks, vis, rowid, &own)) {
    case Own::kVisible:
      *out = RowVersion{rowid, {}, true, own->value, true, own->insert_cid};
      return true;
    case Own::kInvisible:
      return false;
    case Own::kUnknown:
      break;
  }
  if (ks.fresh) return false;
  Session& session = Session::Get();
  ramp::ReadSession& reads = session.reads();
  if (const ramp::PrefetchedRow* p = reads.Prefetched(ks.id, rowid)) {
    if (!p->live) {
      if (dead != nullptr) *dead = !p->ts.zero();
      out->ts = p->ts;
      return false;
    }
    *out = RowVersion{rowid, p->ts, true, p->value};
    return true;
  }
  session.Define(ks);
  const ramp::RowRequest row{ks.id, rowid, {}};
  std::vector<ramp::RowResult> results;
  session.Check(reads.ReadRows(std::span<const ramp::RowRequest>(&row, 1),
                               ramp::RowReads::kStatement, &results),
                "reading a row of a ramp table");
  if (results.empty() || !results[0].found) {
    if (dead != nullptr && !results.empty() && !results[0].ts.zero()) *dead = true;
    if (!results.empty()) out->ts = results[0].ts;  // the deletion's timestamp
    return false;
  }
  *out = RowVersion{rowid, results[0].ts, true, std::move(results[0].value)};
  return true;
}

struct IndexFetchTableData* IndexFetchBegin(Relation rel) {
  auto* fetch = static_cast<IndexFetch*>(palloc0(sizeof(IndexFetch)));
  fetch->base.rel = rel;
  fetch->ks_known = false;
  return &fetch->base;
}

void IndexFetchReset(struct IndexFetchTableData* data) {}

void IndexFetchEnd(struct IndexFetchTableData* data) {
  pfree(data);
}

// How old a deletion must be before index entries of the row may be killed (the time a
// RAMP commit takes to reach every partition, with a wide margin).
constexpr uint64_t kKillAfterMs = 500;

bool IndexFetchTuple(struct IndexFetchTableData* scan, ItemPointer tid, Snapshot snapshot,
                     TupleTableSlot* slot, bool* call_again, bool* all_dead) {
  *call_again = false;
  if (all_dead != nullptr) *all_dead = false;
  auto* fetch = reinterpret_cast<IndexFetch*>(scan);
  const bool found = Boundary([&] {
    uint64_t rowid = 0;
    if (!RowIdOfTid(tid, &rowid)) return false;
    if (!fetch->ks_known) {
      fetch->ks = RelationKeyspace(scan->rel);
      fetch->ks_known = true;
    }
    RowVersion row;
    bool dead = false;
    if (!FetchRow(fetch->ks, VisibilityOf(snapshot), rowid, &row, &dead)) {
      // A committed deletion is final for every reader (row ids are never reused): local
      // indexes may mark the entry dead and skip it from then on -- but only once the
      // deleting transaction has surely committed everywhere. Until then its new version of
      // the row (an UPDATE) may still be invisible at the other partition, and a scan that
      // skipped the old entry would find neither version: a lost UPDATE. Visiting the old
      // entry instead lets the statement's reads see it (ramp::ReadSession).
      if (all_dead != nullptr) {
        *all_dead = dead && !row.ts.zero() &&
                    ramp::HybridClock::PhysicalNow() > row.ts.time + (kKillAfterMs << 16);
      }
      return false;
    }
    if (snapshot != nullptr && snapshot->snapshot_type == SNAPSHOT_DIRTY &&
        !CheckCommandDeletesCurrent(fetch->ks, rowid, /*remote=*/!row.ts.zero())) {
      return false;
    }
    StoreVersion(slot, scan->rel, row);
    return true;
  });
  return found;
}

bool TupleFetchRowVersion(Relation rel, ItemPointer tid, Snapshot snapshot, TupleTableSlot* slot) {
  return Boundary([&] {
    uint64_t rowid = 0;
    if (!RowIdOfTid(tid, &rowid)) return false;
    RowVersion row;
    const ramp::KeyspaceRef ks = RelationKeyspace(rel);
    // SnapshotAny: the executor re-fetches a row it is about to UPDATE, to build the new row
    // from it. It must be the version the statement read, which the write names as the
    // expected one: a commit in flight when the statement started may have landed since.
    ramp::Timestamp read_ts;
    const bool any = snapshot != nullptr && snapshot->snapshot_type == SNAPSHOT_ANY;
    // The UPDATE locks the row now, and the lock's grant brings the newest version.
    if (any && FetchLockedRow(rel, ks, rowid, slot)) return true;
    const bool have_read = any && RecallVersion(ks.id, rowid, &read_ts);
    const bool found =
        FetchRow(ks, any ? AnyVisibility(ks, rowid) : VisibilityOf(snapshot), rowid, &row, nullptr);
    if (have_read && (!found || (!row.ts.zero() && !(row.ts == read_ts)))) {
      // Heap keeps the old tuple; a ramp row changed or deleted by a concurrent transaction
      // since this one read it is a write-write conflict (the commit would fail the same
      // way). The version read stays the expected one.
      Session::Get().reads().RememberVersion(ks.id, rowid, read_ts);
      if (found && guc::row_locks && !ks.fresh) {
        // With row locks the UPDATE locks the row next, finds that the version it read is
        // not the newest any more, and lets EvalPlanQual redo its change on the newest one
        // (tableam/row_locks.cpp): hand out the newest version for now.
        StoreVersion(slot, rel, row);
        return true;
      }
      throw RampError(ramp::Status::Conflict("row " + std::to_string(rowid) +
                                             (found ? " changed" : " was deleted") +
                                             " after this transaction read it"),
                      std::string("updating ramp table \"") + RelationGetRelationName(rel) + "\"");
    }
    if (!found) return false;
    StoreVersion(slot, rel, row);
    return true;
  });
}

bool TupleSatisfiesSnapshot(Relation rel, TupleTableSlot* slot, Snapshot snapshot) {
  return Boundary([&] {
    uint64_t rowid = 0;
    if (!RowIdOfTid(&slot->tts_tid, &rowid)) return false;
    const ramp::KeyspaceRef ks = RelationKeyspace(rel);
    // PostgreSQL's one caller with an MVCC snapshot is ExecCheckTupleVisible (ON CONFLICT
    // under REPEATABLE READ / SERIALIZABLE): for an invisible row it reads the slot's xmin,
    // and fails with 40001 unless the row is the transaction's own (rows/row_slot.hpp).
    RowVersion row;
    return FetchRow(ks, VisibilityOf(snapshot), rowid, &row, nullptr);
  });
}

TransactionId IndexDeleteTuples(Relation rel, TM_IndexDeleteOp* delstate) {
  // Entries the index AM already knows to be dead (IndexFetchTuple reported a committed
  // deletion) may go; no speculative work (bottom-up deletion finds nothing to delete).
  if (delstate->bottomup) {
    delstate->ndeltids = 0;
    return InvalidTransactionId;
  }
  int kept = 0;
  for (int i = 0; i < delstate->ndeltids; i++) {
    if (delstate->status[delstate->deltids[i].id].knowndeletable) {
      delstate->deltids[kept++] = delstate->deltids[i];
    }
  }
  delstate->ndeltids = kept;
  // Row versions live on the ramp cluster, not in this server's WAL: no conflict horizon
  // for standbys.
  return InvalidTransactionId;
}

}  // namespace pgramp::tam
