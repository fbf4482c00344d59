// Table AM `ramp`: the TableAmRoutine and its handler function.
#include "rows/access_methods.hpp"
#include "rows/row_slot.hpp"
#include "tableam/tableam.hpp"

namespace pgramp::tam {

namespace {

const TupleTableSlotOps* SlotCallbacks(Relation rel) {
  return &kRowSlotOps;
}

}  // namespace

// Every callback PostgreSQL 15 asserts on is set. TID-range scans are left out (the planner
// then never plans them); bitmap scans are provided (without them the planner would skip
// index AMs that only support bitmaps).
extern const TableAmRoutine kRampMethods = {
    .type = T_TableAmRoutine,
    .slot_callbacks = SlotCallbacks,
    .scan_begin = ScanBegin,
    .scan_end = ScanEnd,
    .scan_rescan = ScanRescan,
    .scan_getnextslot = ScanGetNextSlot,
    .scan_set_tidrange = nullptr,
    .scan_getnextslot_tidrange = nullptr,
    .parallelscan_estimate = ParallelScanEstimate,
    .parallelscan_initialize = ParallelScanInitialize,
    .parallelscan_reinitialize = ParallelScanReinitialize,
    .index_fetch_begin = IndexFetchBegin,
    .index_fetch_reset = IndexFetchReset,
    .index_fetch_end = IndexFetchEnd,
    .index_fetch_tuple = IndexFetchTuple,
    .tuple_fetch_row_version = TupleFetchRowVersion,
    .tuple_tid_valid = TupleTidValid,
    .tuple_get_latest_tid = TupleGetLatestTid,
    .tuple_satisfies_snapshot = TupleSatisfiesSnapshot,
    .index_delete_tuples = IndexDeleteTuples,
    .tuple_insert = TupleInsert,
    .tuple_insert_speculative = TupleInsertSpeculative,
    .tuple_complete_speculative = TupleCompleteSpeculative,
    .multi_insert = MultiInsert,
    .tuple_delete = TupleDelete,
    .tuple_update = TupleUpdate,
    .tuple_lock = TupleLock,
    .finish_bulk_insert = nullptr,
    .relation_set_new_filenode = RelationSetNewFilenode,
    .relation_nontransactional_truncate = RelationNontransactionalTruncate,
    .relation_copy_data = RelationCopyData,
    .relation_copy_for_cluster = RelationCopyForCluster,
    .relation_vacuum = RelationVacuum,
    .scan_analyze_next_block = ScanAnalyzeNextBlock,
    .scan_analyze_next_tuple = ScanAnalyzeNextTuple,
    .index_build_range_scan = IndexBuildRangeScan,
    .index_validate_scan = IndexValidateScan,
    .relation_size = RelationSize,
    .relation_needs_toast_table = RelationNeedsToastTable,
    .relation_toast_am = nullptr,
    .relation_fetch_toast_slice = nullptr,
    .relation_estimate_size = RelationEstimateSize,
    .scan_bitmap_next_block = ScanBitmapNextBlock,
    .scan_bitmap_next_tuple = ScanBitmapNextTuple,
    .scan_sample_next_block = ScanSampleNextBlock,
    .scan_sample_next_tuple = ScanSampleNextTuple,
};

}  // namespace pgramp::tam

namespace pgramp {

// Temporary relations of the `ramp` access method are local heap tables (local_temp.cpp).
bool IsRampTable(Relation rel) {
  return rel->rd_tableam == &tam::kDispatchMethods &&
         rel->rd_rel->relpersistence != RELPERSISTENCE_TEMP;
}

}  // namespace pgramp

extern "C" {
PG_FUNCTION_INFO_V1(ramp_tableam_handler);
Datum ramp_tableam_handler(PG_FUNCTION_ARGS) {
  PG_RETURN_POINTER(&pgramp::tam::kDispatchMethods);
}
}
