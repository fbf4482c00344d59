// VACUUM and index builds over ramp tables.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <vector>

#include "rows/keys.hpp"
#include "xact/row_ids.hpp"
#include "xact/session.hpp"
#include "xact/xact.hpp"

#include "catalog/keyspace_catalog.hpp"
#include "rows/access_methods.hpp"
#include "tableam/tableam.hpp"

extern "C" {
#include "utils/tuplesort.h"
}

namespace pgramp::tam {

namespace {

// Row ids whose latest version is a committed deletion (palloc'd, sorted).
struct DeadRows {
  int64 count;
  double live;
  uint64_t ids[FLEXIBLE_ARRAY_MEMBER];
};

DeadRows* CollectDeadRows(Relation rel) {
  const ramp::KeyspaceRef ks = RelationKeyspace(rel);
  std::vector<uint64_t> dead;
  double live = 0;
  if (!ks.fresh) {
    const uint64_t hw = HighWater(ks);
    auto source = MakeProbeRowSource(
        ks, SerialBlockRanges(0, (hw + kRowsPerBlock - 1) / kRowsPerBlock, 4), true);
    std::vector<RowVersion> batch;
    while (source->NextBatch(&batch)) {
      for (const RowVersion& row : batch) {
        if (row.live) {
          live += 1;
        } else {
          dead.push_back(row.rowid);
        }
      }
    }
  }
  const size_t bytes =
      offsetof(DeadRows, ids) + sizeof(uint64_t) * std::max<size_t>(dead.size(), 1);
  auto* out = static_cast<DeadRows*>(PgCall([&] { return palloc(bytes); }));
  out->count = static_cast<int64>(dead.size());
  out->live = live;
  std::copy(dead.begin(), dead.end(), out->ids);  // the probe reads in row-id order
  return out;
}

bool IsDeadTid(ItemPointer tid, void* state) {
  const auto* dead = static_cast<const DeadRows*>(state);
  uint64_t rowid = 0;
  if (!RowIdOfTid(tid, &rowid)) return false;
  return std::binary_search(dead->ids, dead->ids + dead->count, rowid);
}

}  // namespace

// VACUUM: the servers collect old versions themselves; what PostgreSQL keeps locally are
// indexes other than ramp_hash (btree, ...), whose entries for deleted rows are removed here.
// A row is dead when its latest committed version is a deletion: row ids are never reused
// and reads always see the latest committed version, so no reader can still need it.
void RelationVacuum(Relation rel, struct VacuumParams* params, BufferAccessStrategy bstrategy) {
  int nindexes = 0;
  Relation* indexes = nullptr;
  vac_open_indexes(rel, RowExclusiveLock, &nindexes, &indexes);
  int local = 0;
  for (int i = 0; i < nindexes; i++) {
    if (!IsRampHashIndex(indexes[i])) local++;
  }
  if (local > 0) {
    DeadRows* dead = Boundary([&] { return CollectDeadRows(rel); });
    for (int i = 0; i < nindexes; i++) {
      if (IsRampHashIndex(indexes[i])) continue;
      IndexVacuumInfo info;
      info.index = indexes[i];
      info.analyze_only = false;
      info.report_progress = false;
      info.estimated_count = false;
      info.message_level = (params->options & VACOPT_VERBOSE) ? INFO : DEBUG2;
      info.num_heap_tuples = dead->live;
      info.strategy = bstrategy;
      IndexBulkDeleteResult* stats = index_bulk_delete(&info, nullptr, IsDeadTid, dead);
      stats = index_vacuum_cleanup(&info, stats);
      if (stats != nullptr && !stats->estimated_count) {
        vac_update_relstats(indexes[i], stats->num_pages, stats->num_index_tuples, 0, false,
                            InvalidTransactionId, InvalidMultiXactId, nullptr, nullptr, false);
      }
      if (stats != nullptr) pfree(stats);
    }
    ereport(params->options & VACOPT_VERBOSE ? INFO : DEBUG2,
            (errmsg("ramp table \"%s\": %.0f live rows, " INT64_FORMAT
                    " deleted row ids removed from %d local index(es)",
                    RelationGetRelationName(rel), dead->live, dead->count, local)));
    pfree(dead);
  }
  vac_close_indexes(nindexes, indexes, NoLock);
}

// Index builds (CREATE INDEX, REINDEX, btree's parallel build): every visible row is handed
// to the index AM's callback. Our scans return rows in row-id (= TID) order.
double IndexBuildRangeScan(Relation table_rel, Relation index_rel, struct IndexInfo* index_info,
                           bool allow_sync, bool anyvisible, bool progress,
                           BlockNumber start_blockno, BlockNumber numblocks,
                           IndexBuildCallback callback, void* callback_state, TableScanDesc scan) {
  double reltuples = 0;
  Datum values[INDEX_MAX_KEYS];
  bool isnull[INDEX_MAX_KEYS];
  EState* estate = CreateExecutorState();
  ExprContext* econtext = GetPerTupleExprContext(estate);
  TupleTableSlot* slot = table_slot_create(table_rel, nullptr);
  econtext->ecxt_scantuple = slot;
  ExprState* predicate = ExecPrepareQual(index_info->ii_Predicate, estate);
  Snapshot snapshot = nullptr;
  bool unregister = false;
  if (scan == nullptr) {
    // Concurrent builds use an MVCC snapshot; others see every row including the
    // transaction's own writes (rows it deleted are left out: they die at commit).
    if (index_info->ii_Concurrent) {
      snapshot = RegisterSnapshot(GetTransactionSnapshot());
      unregister = true;
    } else {
      snapshot = SnapshotSelf;
    }
    scan = table_beginscan_strat(table_rel, snapshot, 0, nullptr, true, allow_sync);
  }
  const bool ranged = start_blockno != 0 || numblocks != InvalidBlockNumber;
  while (table_scan_getnextslot(scan, ForwardScanDirection, slot)) {
    CHECK_FOR_INTERRUPTS();
    if (ranged) {
      const BlockNumber block = ItemPointerGetBlockNumber(&slot->tts_tid);
      if (block < start_blockno ||
          (numblocks != InvalidBlockNumber && block >= start_blockno + numblocks)) {
        continue;
      }
    }
    MemoryContextReset(econtext->ecxt_per_tuple_memory);
    if (predicate != nullptr && !ExecQual(predicate, econtext)) continue;
    FormIndexDatum(index_info, slot, estate, values, isnull);
    callback(index_rel, &slot->tts_tid, values, isnull, true, callback_state);
    reltuples += 1;
  }
  table_endscan(scan);
  if (unregister) UnregisterSnapshot(snapshot);
  ExecDropSingleTupleTableSlot(slot);
  FreeExecutorState(estate);
  index_info->ii_ExpressionsState = NIL;
  index_info->ii_PredicateState = nullptr;
  return reltuples;
}

// CREATE INDEX CONCURRENTLY, phase 3: insert the rows the build missed. The index's TIDs come
// sorted from state->tuplesort; the scan returns rows in TID order: a merge.
void IndexValidateScan(Relation table_rel, Relation index_rel, struct IndexInfo* index_info,
                       Snapshot snapshot, struct ValidateIndexState* state) {
  Datum values[INDEX_MAX_KEYS];
  bool isnull[INDEX_MAX_KEYS];
  EState* estate = CreateExecutorState();
  ExprContext* econtext = GetPerTupleExprContext(estate);
  TupleTableSlot* slot = table_slot_create(table_rel, nullptr);
  econtext->ecxt_scantuple = slot;
  ExprState* predicate = ExecPrepareQual(index_info->ii_Predicate, estate);
  TableScanDesc scan = table_beginscan_strat(table_rel, snapshot, 0, nullptr, true, false);
  bool sorted_done = false;
  bool have_cursor = false;
  ItemPointerData cursor;
  while (table_scan_getnextslot(scan, ForwardScanDirection, slot)) {
    CHECK_FOR_INTERRUPTS();
    state->htups += 1;
    ItemPointer tid = &slot->tts_tid;
    while (!sorted_done && (!have_cursor || ItemPointerCompare(&cursor, tid) < 0)) {
      Datum encoded;
      bool encoded_null;
      sorted_done = !tuplesort_getdatum(state->tuplesort, true, &encoded, &encoded_null, nullptr);
      if (!sorted_done) {
        itemptr_decode(&cursor, DatumGetInt64(encoded));
        have_cursor = true;
      }
    }
    if (!sorted_done && have_cursor && ItemPointerCompare(&cursor, tid) == 0) continue;
    MemoryContextReset(econtext->ecxt_per_tuple_memory);
    if (predicate != nullptr && !ExecQual(predicate, econtext)) continue;
    FormIndexDatum(index_info, slot, estate, values, isnull);
    index_insert(index_rel, values, isnull, tid, table_rel,
                 index_info->ii_Unique ? UNIQUE_CHECK_YES : UNIQUE_CHECK_NO, false, index_info);
    state->tups_inserted += 1;
  }
  table_endscan(scan);
  ExecDropSingleTupleTableSlot(slot);
  FreeExecutorState(estate);
  index_info->ii_ExpressionsState = NIL;
  index_info->ii_PredicateState = nullptr;
}

}  // namespace pgramp::tam
