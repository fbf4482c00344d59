// Temporary tables under `default_table_access_method = ramp` (DESIGN §8).
//
// A temporary table belongs to one backend and has no business on the cluster. PostgreSQL
// picks a new relation's access method before the extension can see the statement (the AM
// handler that loads the library runs inside DefineRelation), and REFRESH MATERIALIZED VIEW
// CONCURRENTLY creates its temporary diff table with the view's access method. So the
// routine PostgreSQL gets for `ramp` dispatches per relation: temporary relations go to
// heap's callbacks (they are local heap tables in all but the name in pg_am), every other
// relation to the ramp callbacks (kRampMethods). An explicit `USING ramp` on a temporary
// table is refused by the utility hook (RefuseExplicitTemporaryRamp) once the library is
// loaded.
#include "tableam/tableam.hpp"

namespace pgramp::tam {

// A named namespace: the callbacks share their names with the ramp ones (tableam.hpp).
namespace dispatch {
namespace {

bool IsTemporary(Relation rel) {
  return rel->rd_rel->relpersistence == RELPERSISTENCE_TEMP;
}

// A temporary relation's relcache entry is pointed at heap's routine for good (until the
// entry is rebuilt, when the next call here does it again): heap's code checks that the
// relations it scans are heap's (heap_getnext), and the calls that follow skip this dispatch.
const TableAmRoutine* For(Relation rel) {
  if (!IsTemporary(rel)) return &kRampMethods;
  rel->rd_tableam = GetHeapamTableAmRoutine();
  return rel->rd_tableam;
}

const TableAmRoutine* For(TableScanDesc scan) {
  return For(scan->rs_rd);
}

const TupleTableSlotOps* SlotCallbacks(Relation rel) {
  return For(rel)->slot_callbacks(rel);
}

TableScanDesc ScanBegin(Relation rel, Snapshot snapshot, int nkeys, ScanKey key,
                        ParallelTableScanDesc pscan, uint32 flags) {
  return For(rel)->scan_begin(rel, snapshot, nkeys, key, pscan, flags);
}

void ScanEnd(TableScanDesc scan) {
  For(scan)->scan_end(scan);
}

void ScanRescan(TableScanDesc scan, ScanKey key, bool set_params, bool allow_strat, bool allow_sync,
                bool allow_pagemode) {
  For(scan)->scan_rescan(scan, key, set_params, allow_strat, allow_sync, allow_pagemode);
}

bool ScanGetNextSlot(TableScanDesc scan, ScanDirection direction, TupleTableSlot* slot) {
  return For(scan)->scan_getnextslot(scan, direction, slot);
}

Size ParallelScanEstimate(Relation rel) {
  return For(rel)->parallelscan_estimate(rel);
}

Size ParallelScanInitialize(Relation rel, ParallelTableScanDesc pscan) {
  return For(rel)->parallelscan_initialize(rel, pscan);
}

void ParallelScanReinitialize(Relation rel, ParallelTableScanDesc pscan) {
  For(rel)->parallelscan_reinitialize(rel, pscan);
}

IndexFetchTableData* IndexFetchBegin(Relation rel) {
  return For(rel)->index_fetch_begin(rel);
}

void IndexFetchReset(IndexFetchTableData* data) {
  For(data->rel)->index_fetch_reset(data);
}

void IndexFetchEnd(IndexFetchTableData* data) {
  For(data->rel)->index_fetch_end(data);
}

bool IndexFetchTuple(IndexFetchTableData* data, ItemPointer tid, Snapshot snapshot,
                     TupleTableSlot* slot, bool* call_again, bool* all_dead) {
  return For(data->rel)->index_fetch_tuple(data, tid, snapshot, slot, call_again, all_dead);
}

bool TupleFetchRowVersion(Relation rel, ItemPointer tid, Snapshot snapshot, TupleTableSlot* slot) {
  return For(rel)->tuple_fetch_row_version(rel, tid, snapshot, slot);
}

bool TupleTidValid(TableScanDesc scan, ItemPointer tid) {
  return For(scan)->tuple_tid_valid(scan, tid);
}

void TupleGetLatestTid(TableScanDesc scan, ItemPointer tid) {
  For(scan)->tuple_get_latest_tid(scan, tid);
}

bool TupleSatisfiesSnapshot(Relation rel, TupleTableSlot* slot, Snapshot snapshot) {
  return For(rel)->tuple_satisfies_snapshot(rel, slot, snapshot);
}

TransactionId IndexDeleteTuples(Relation rel, TM_IndexDeleteOp* delstate) {
  return For(rel)->index_delete_tuples(rel, delstate);
}

void TupleInsert(Relation rel, TupleTableSlot* slot, CommandId cid, int options,
                 BulkInsertStateData* bistate) {
  For(rel)->tuple_insert(rel, slot, cid, options, bistate);
}

void TupleInsertSpeculative(Relation rel, TupleTableSlot* slot, CommandId cid, int options,
                            BulkInsertStateData* bistate, uint32 spec_token) {
  For(rel)->tuple_insert_speculative(rel, slot, cid, options, bistate, spec_token);
}

void TupleCompleteSpeculative(Relation rel, TupleTableSlot* slot, uint32 spec_token,
                              bool succeeded) {
  For(rel)->tuple_complete_speculative(rel, slot, spec_token, succeeded);
}

void MultiInsert(Relation rel, TupleTableSlot** slots, int nslots, CommandId cid, int options,
                 BulkInsertStateData* bistate) {
  For(rel)->multi_insert(rel, slots, nslots, cid, options, bistate);
}

TM_Result TupleDelete(Relation rel, ItemPointer tid, CommandId cid, Snapshot snapshot,
                      Snapshot crosscheck, bool wait, TM_FailureData* tmfd, bool changing_part) {
  return For(rel)->tuple_delete(rel, tid, cid, snapshot, crosscheck, wait, tmfd, changing_part);
}

TM_Result TupleUpdate(Relation rel, ItemPointer otid, TupleTableSlot* slot, CommandId cid,
                      Snapshot snapshot, Snapshot crosscheck, bool wait, TM_FailureData* tmfd,
                      LockTupleMode* lockmode, bool* update_indexes) {
  return For(rel)->tuple_update(rel, otid, slot, cid, snapshot, crosscheck, wait, tmfd, lockmode,
                                update_indexes);
}

TM_Result TupleLock(Relation rel, ItemPointer tid, Snapshot snapshot, TupleTableSlot* slot,
                    CommandId cid, LockTupleMode mode, LockWaitPolicy wait_policy, uint8 flags,
                    TM_FailureData* tmfd) {
  return For(rel)->tuple_lock(rel, tid, snapshot, slot, cid, mode, wait_policy, flags, tmfd);
}

void FinishBulkInsert(Relation rel, int options) {
  const TableAmRoutine* methods = For(rel);
  if (methods->finish_bulk_insert != nullptr) methods->finish_bulk_insert(rel, options);
}

// The persistence of the new storage decides (rd_rel may not say it yet for a new relation).
void RelationSetNewFilenode(Relation rel, const RelFileNode* newrnode, char persistence,
                            TransactionId* freeze_xid, MultiXactId* minmulti) {
  if (persistence != RELPERSISTENCE_TEMP) {
    kRampMethods.relation_set_new_filenode(rel, newrnode, persistence, freeze_xid, minmulti);
    return;
  }
  rel->rd_tableam = GetHeapamTableAmRoutine();
  rel->rd_tableam->relation_set_new_filenode(rel, newrnode, persistence, freeze_xid, minmulti);
}

void RelationNontransactionalTruncate(Relation rel) {
  For(rel)->relation_nontransactional_truncate(rel);
}

void RelationCopyData(Relation rel, const RelFileNode* newrnode) {
  For(rel)->relation_copy_data(rel, newrnode);
}

void RelationCopyForCluster(Relation old_table, Relation new_table, Relation old_index,
                            bool use_sort, TransactionId oldest_xmin, TransactionId* xid_cutoff,
                            MultiXactId* multi_cutoff, double* num_tuples, double* tups_vacuumed,
                            double* tups_recently_dead) {
  For(old_table)->relation_copy_for_cluster(old_table, new_table, old_index, use_sort, oldest_xmin,
                                            xid_cutoff, multi_cutoff, num_tuples, tups_vacuumed,
                                            tups_recently_dead);
}

void RelationVacuum(Relation rel, VacuumParams* params, BufferAccessStrategy bstrategy) {
  For(rel)->relation_vacuum(rel, params, bstrategy);
}

bool ScanAnalyzeNextBlock(TableScanDesc scan, BlockNumber blockno, BufferAccessStrategy bstrategy) {
  return For(scan)->scan_analyze_next_block(scan, blockno, bstrategy);
}

bool ScanAnalyzeNextTuple(TableScanDesc scan, TransactionId oldest_xmin, double* liverows,
                          double* deadrows, TupleTableSlot* slot) {
  return For(scan)->scan_analyze_next_tuple(scan, oldest_xmin, liverows, deadrows, slot);
}

double IndexBuildRangeScan(Relation table_rel, Relation index_rel, IndexInfo* index_info,
                           bool allow_sync, bool anyvisible, bool progress,
                           BlockNumber start_blockno, BlockNumber numblocks,
                           IndexBuildCallback callback, void* callback_state, TableScanDesc scan) {
  return For(table_rel)->index_build_range_scan(table_rel, index_rel, index_info, allow_sync,
                                                anyvisible, progress, start_blockno, numblocks,
                                                callback, callback_state, scan);
}

void IndexValidateScan(Relation table_rel, Relation index_rel, IndexInfo* index_info,
                       Snapshot snapshot, ValidateIndexState* state) {
  For(table_rel)->index_validate_scan(table_rel, index_rel, index_info, snapshot, state);
}

uint64 RelationSize(Relation rel, ForkNumber fork) {
  return For(rel)->relation_size(rel, fork);
}

bool RelationNeedsToastTable(Relation rel) {
  return For(rel)->relation_needs_toast_table(rel);
}

// Only asked when RelationNeedsToastTable said yes, which ramp tables never do.
Oid RelationToastAm(Relation rel) {
  return GetHeapamTableAmRoutine()->relation_toast_am(rel);
}

void RelationFetchToastSlice(Relation toastrel, Oid valueid, int32 attrsize, int32 sliceoffset,
                             int32 slicelength, struct varlena* result) {
  GetHeapamTableAmRoutine()->relation_fetch_toast_slice(toastrel, valueid, attrsize, sliceoffset,
                                                        slicelength, result);
}

void RelationEstimateSize(Relation rel, int32* attr_widths, BlockNumber* pages, double* tuples,
                          double* allvisfrac) {
  For(rel)->relation_estimate_size(rel, attr_widths, pages, tuples, allvisfrac);
}

bool ScanBitmapNextBlock(TableScanDesc scan, TBMIterateResult* tbmres) {
  return For(scan)->scan_bitmap_next_block(scan, tbmres);
}

bool ScanBitmapNextTuple(TableScanDesc scan, TBMIterateResult* tbmres, TupleTableSlot* slot) {
  return For(scan)->scan_bitmap_next_tuple(scan, tbmres, slot);
}

bool ScanSampleNextBlock(TableScanDesc scan, SampleScanState* scanstate) {
  return For(scan)->scan_sample_next_block(scan, scanstate);
}

bool ScanSampleNextTuple(TableScanDesc scan, SampleScanState* scanstate, TupleTableSlot* slot) {
  return For(scan)->scan_sample_next_tuple(scan, scanstate, slot);
}

ProcessUtility_hook_type previous_process_utility = nullptr;

bool NamesRamp(const char* access_method) {
  return access_method != nullptr && strcmp(access_method, "ramp") == 0;
}

void RefuseTemporaryRamp() {
  ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED), errmsg("ramp tables cannot be temporary"),
                  errdetail("Their rows live on the ramp cluster, shared by every session."),
                  errhint("Leave out USING ramp: temporary tables are heap tables.")));
}

// Refuses an explicit `USING ramp` on CREATE TEMP TABLE (... AS); the default access method
// makes them local (see above).
void RefuseExplicitTemporaryRamp(PlannedStmt* pstmt, const char* query_string, bool read_only_tree,
                                 ProcessUtilityContext context, ParamListInfo params,
                                 QueryEnvironment* query_env, DestReceiver* dest,
                                 QueryCompletion* qc) {
  Node* node = pstmt->utilityStmt;
  if (IsA(node, CreateStmt)) {
    auto* stmt = reinterpret_cast<CreateStmt*>(node);
    if (stmt->relation->relpersistence == RELPERSISTENCE_TEMP && NamesRamp(stmt->accessMethod)) {
      RefuseTemporaryRamp();
    }
  } else if (IsA(node, CreateTableAsStmt)) {
    auto* stmt = reinterpret_cast<CreateTableAsStmt*>(node);
    if (stmt->into != nullptr && stmt->into->rel->relpersistence == RELPERSISTENCE_TEMP &&
        NamesRamp(stmt->into->accessMethod)) {
      RefuseTemporaryRamp();
    }
  }
  if (previous_process_utility != nullptr) {
    previous_process_utility(pstmt, query_string, read_only_tree, context, params, query_env, dest,
                             qc);
  } else {
    standard_ProcessUtility(pstmt, query_string, read_only_tree, context, params, query_env, dest,
                            qc);
  }
}

}  // namespace
}  // namespace dispatch

extern const TableAmRoutine kDispatchMethods = {
    .type = T_TableAmRoutine,
    .slot_callbacks = dispatch::SlotCallbacks,
    .scan_begin = dispatch::ScanBegin,
    .scan_end = dispatch::ScanEnd,
    .scan_rescan = dispatch::ScanRescan,
    .scan_getnextslot = dispatch::ScanGetNextSlot,
    .scan_set_tidrange = nullptr,
    .scan_getnextslot_tidrange = nullptr,
    .parallelscan_estimate = dispatch::ParallelScanEstimate,
    .parallelscan_initialize = dispatch::ParallelScanInitialize,
    .parallelscan_reinitialize = dispatch::ParallelScanReinitialize,
    .index_fetch_begin = dispatch::IndexFetchBegin,
    .index_fetch_reset = dispatch::IndexFetchReset,
    .index_fetch_end = dispatch::IndexFetchEnd,
    .index_fetch_tuple = dispatch::IndexFetchTuple,
    .tuple_fetch_row_version = dispatch::TupleFetchRowVersion,
    .tuple_tid_valid = dispatch::TupleTidValid,
    .tuple_get_latest_tid = dispatch::TupleGetLatestTid,
    .tuple_satisfies_snapshot = dispatch::TupleSatisfiesSnapshot,
    .index_delete_tuples = dispatch::IndexDeleteTuples,
    .tuple_insert = dispatch::TupleInsert,
    .tuple_insert_speculative = dispatch::TupleInsertSpeculative,
    .tuple_complete_speculative = dispatch::TupleCompleteSpeculative,
    .multi_insert = dispatch::MultiInsert,
    .tuple_delete = dispatch::TupleDelete,
    .tuple_update = dispatch::TupleUpdate,
    .tuple_lock = dispatch::TupleLock,
    .finish_bulk_insert = dispatch::FinishBulkInsert,
    .relation_set_new_filenode = dispatch::RelationSetNewFilenode,
    .relation_nontransactional_truncate = dispatch::RelationNontransactionalTruncate,
    .relation_copy_data = dispatch::RelationCopyData,
    .relation_copy_for_cluster = dispatch::RelationCopyForCluster,
    .relation_vacuum = dispatch::RelationVacuum,
    .scan_analyze_next_block = dispatch::ScanAnalyzeNextBlock,
    .scan_analyze_next_tuple = dispatch::ScanAnalyzeNextTuple,
    .index_build_range_scan = dispatch::IndexBuildRangeScan,
    .index_validate_scan = dispatch::IndexValidateScan,
    .relation_size = dispatch::RelationSize,
    .relation_needs_toast_table = dispatch::RelationNeedsToastTable,
    .relation_toast_am = dispatch::RelationToastAm,
    .relation_fetch_toast_slice = dispatch::RelationFetchToastSlice,
    .relation_estimate_size = dispatch::RelationEstimateSize,
    .scan_bitmap_next_block = dispatch::ScanBitmapNextBlock,
    .scan_bitmap_next_tuple = dispatch::ScanBitmapNextTuple,
    .scan_sample_next_block = dispatch::ScanSampleNextBlock,
    .scan_sample_next_tuple = dispatch::ScanSampleNextTuple,
};

void InstallTemporaryTableHook() {
  dispatch::previous_process_utility = ProcessUtility_hook;
  ProcessUtility_hook = dispatch::RefuseExplicitTemporaryRamp;
}

}  // namespace pgramp::tam
