// Table AM `ramp`: shared declarations of the callbacks (one file per concern).
// Include after every C++ standard / ramp header of the translation unit.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ramp/client.h"
#include "ramp/write_batch.h"
#include "rows/row_slot.hpp"
#include "rows/tid.hpp"
#include "rows/tuple_codec.hpp"
#include "tableam/row_source.hpp"
#include "xact/visibility.hpp"

#include "boundary/boundary.hpp"
#include "boundary/context_owned.hpp"
#include "boundary/pg.hpp"

namespace pgramp::tam {

extern const TableAmRoutine kRampMethods;
// What PostgreSQL gets for `ramp`: temporary relations to heap, the others to kRampMethods
// (local_temp.cpp).
extern const TableAmRoutine kDispatchMethods;
// Refuses CREATE TEMP TABLE ... USING ramp (a ProcessUtility hook).
void InstallTemporaryTableHook();
// Scrollable cursors: their ramp sequential scans are begun with kScanKeepsRows (an
// ExecutorStart hook, scroll_cursors.cpp), which keeps the rows handed out so that the scan
// can go back over them. Other scans only run forward.
constexpr uint32 kScanKeepsRows = 1u << 30;  // above PostgreSQL's SO_* flags
void InstallScrollCursorHook();

// ---- row reads with the transaction's own writes overlaid (fetch.cpp) ----
// StoreRow, and who wrote the version (the transaction or a committed one) for the slot's
// system columns.
void StoreVersion(TupleTableSlot* slot, Relation rel, const RowVersion& row);
struct FetchedRows {
  std::vector<RowVersion> rows;  // visible rows, ascending row id
  size_t dead = 0;               // ids whose latest version is a committed deletion
};
// Visible versions of the given rows (one ReadRows for those not decided by own writes).
void FetchRows(const ramp::KeyspaceRef& ks, const ramp::Visibility& vis,
               const std::vector<uint64_t>& rowids, FetchedRows* out);
// One row; *dead (optional) tells that the latest committed version is a deletion.
bool FetchRow(const ramp::KeyspaceRef& ks, const ramp::Visibility& vis, uint64_t rowid,
              RowVersion* out, bool* dead);

// ---- writes (modify.cpp) ----
// A unique check (dirty snapshot) met a live row (found_rowid): committed on the cluster
// (remote) or inserted by this transaction. Separate reads are each read-atomic but not atomic
// together: a concurrent UPDATE that moved a row may be committed at one partition and not yet
// at the other, so one statement can see both the old and the new version of a row (and
// update both: its own new row then collides with the second update's). So the rows this
// command deleted or updated away are read again in one ReadRows, with the found row if remote:
//  - one of them changed since this transaction read it: the "duplicate" is a concurrent
//    version of that very row, and this commit would fail with a conflict anyway, so that
//    conflict (40001, retryable) is raised now instead of a unique violation (23505);
//  - the found remote row reads as deleted in that read: returns false (it was the old
//    version of a row updated concurrently; no duplicate).
// Returns true when the row is live. Heap gets there by waiting on row locks instead.
bool CheckCommandDeletesCurrent(const ramp::KeyspaceRef& found_ks, uint64_t found_rowid,
                                bool remote);
// Inserts the slots' rows (fresh row ids), sets their TIDs.
void InsertSlots(Relation rel, TupleTableSlot** slots, int nslots, CommandId cid);

// ---- row locks on the cluster: write intents (row_locks.cpp) ----
struct RowLock {
  // The intent was taken by this call (false: the transaction held it already, and nothing
  // was learnt). Then: the row's newest committed version when it was granted.
  bool taken_now = false;
  bool live = false;
  ramp::Timestamp latest;
  std::string value;
  // Not live because an UPDATE gave the row a new row id (*moved_to, or 0 when it went to
  // another partition), not because it was deleted (ramp::kMovedTombstone).
  bool moved(uint64_t* moved_to) const {
    return !live && ramp::ParseMovedTombstone(value, moved_to);
  }
};
ramp::IntentMode IntentModeOf(LockTupleMode mode);
// Takes the row's intent, waiting for other holders as the policy says: false for SKIP
// LOCKED when it is held; NOWAIT raises 55P03; a deadlock 40P01; cancels and timeouts raise
// PostgreSQL's errors (through the boundary).
bool LockRow(Relation rel, const ramp::KeyspaceRef& ks, uint64_t rowid, ramp::IntentMode mode,
             LockWaitPolicy policy, RowLock* out);
// An intent on a key of the caller's own layout in a table's keyspace (not a row: keys of
// another length; a materialized view's waits, immv/maintain.cpp), held to the transaction's
// end, waited for as LockRow does (cancellable, lock_timeout, 40P01); `what` names it in
// messages. False when the transaction held it already in that mode (or exclusive). True
// when taken now: *latest is the key's newest committed version at the grant.
bool LockKey(const ramp::KeyspaceRef& ks, std::string_view key, ramp::IntentMode mode,
             const std::string& what, ramp::Timestamp* latest);
// A RAMP commit reaches its servers one by one: a lock's grant can be older than a version the
// locker knows committed (it read it, or the commit that moved a row there wrote it). Waits
// (up to ramp.timeout_ms, cancellable) until the row's server has that version committed, so
// that the locker's write, which names it as the version it replaces, passes the server's
// check instead of failing with 40001 ("latest committed version is ...").
void AwaitCommitHere(const ramp::KeyspaceRef& ks, uint64_t rowid, const ramp::Timestamp& version);
// The TM_FailureData of a verdict other than TM_Ok about the row at tid (no transaction id:
// ramp rows carry none). cmax: the command that changed it, when it was this transaction.
void FillFailure(TM_FailureData* tmfd, ItemPointer tid, CommandId cmax);
// Heap's TM_Updated for a row another transaction moved to row id moved_to: the executor
// calls tuple_lock next, which follows it there (LockCommittedRow), or raises 40001.
TM_Result MovedTo(uint64_t moved_to, TM_FailureData* tmfd);
// UPDATE and DELETE: locks a committed row the transaction has not written yet; TM_Updated
// or TM_Deleted (tmfd filled) when the version the statement read is no longer the newest,
// TM_Ok otherwise. Does nothing when ramp.row_locks is off.
TM_Result LockForWrite(Relation rel, ItemPointer tid, ramp::IntentMode mode, TM_FailureData* tmfd);
// The executor's SnapshotAny fetch of a committed row it is about to update: locks the row and
// stores the newest version, from the lock's grant, in the slot (the lock's round trip is the
// read). False, and nothing done, when the caller reads the row itself (row locks off, a
// table or row of this transaction, the lock held already).
bool FetchLockedRow(Relation rel, const ramp::KeyspaceRef& ks, uint64_t rowid,
                    TupleTableSlot* slot);
// The 40001 error for a row that a concurrent transaction moved to another partition while
// this one waited for it or after this statement read it, or that is gone in a way the lock's
// grant did not tell. A row deleted is heap's TM_Deleted instead, one moved to a new row id is
// followed there (TM_Updated, then tuple_lock).
RampError RowGone(Relation rel, uint64_t rowid);

// ---- callbacks, grouped by file ----
// scan.cpp
TableScanDesc ScanBegin(Relation rel, Snapshot snapshot, int nkeys, struct ScanKeyData* key,
                        ParallelTableScanDesc pscan, uint32 flags);
void ScanEnd(TableScanDesc scan);
void ScanRescan(TableScanDesc scan, struct ScanKeyData* key, bool set_params, bool allow_strat,
                bool allow_sync, bool allow_pagemode);
bool ScanGetNextSlot(TableScanDesc scan, ScanDirection direction, TupleTableSlot* slot);
Size ParallelScanEstimate(Relation rel);
Size ParallelScanInitialize(Relation rel, ParallelTableScanDesc pscan);
void ParallelScanReinitialize(Relation rel, ParallelTableScanDesc pscan);
bool ScanBitmapNextBlock(TableScanDesc scan, struct TBMIterateResult* tbmres);
bool ScanBitmapNextTuple(TableScanDesc scan, struct TBMIterateResult* tbmres, TupleTableSlot* slot);
bool ScanSampleNextBlock(TableScanDesc scan, struct SampleScanState* scanstate);
bool ScanSampleNextTuple(TableScanDesc scan, struct SampleScanState* scanstate,
                         TupleTableSlot* slot);
bool ScanAnalyzeNextBlock(TableScanDesc scan, BlockNumber blockno, BufferAccessStrategy bstrategy);
bool ScanAnalyzeNextTuple(TableScanDesc scan, TransactionId OldestXmin, double* liverows,
                          double* deadrows, TupleTableSlot* slot);
bool TupleTidValid(TableScanDesc scan, ItemPointer tid);
void TupleGetLatestTid(TableScanDesc scan, ItemPointer tid);

// fetch.cpp
struct IndexFetchTableData* IndexFetchBegin(Relation rel);
void IndexFetchReset(struct IndexFetchTableData* data);
void IndexFetchEnd(struct IndexFetchTableData* data);
bool IndexFetchTuple(struct IndexFetchTableData* scan, ItemPointer tid, Snapshot snapshot,
                     TupleTableSlot* slot, bool* call_again, bool* all_dead);
bool TupleFetchRowVersion(Relation rel, ItemPointer tid, Snapshot snapshot, TupleTableSlot* slot);
bool TupleSatisfiesSnapshot(Relation rel, TupleTableSlot* slot, Snapshot snapshot);
TransactionId IndexDeleteTuples(Relation rel, TM_IndexDeleteOp* delstate);

// modify.cpp
void TupleInsert(Relation rel, TupleTableSlot* slot, CommandId cid, int options,
                 struct BulkInsertStateData* bistate);
void TupleInsertSpeculative(Relation rel, TupleTableSlot* slot, CommandId cid, int options,
                            struct BulkInsertStateData* bistate, uint32 specToken);
void TupleCompleteSpeculative(Relation rel, TupleTableSlot* slot, uint32 specToken, bool succeeded);
void MultiInsert(Relation rel, TupleTableSlot** slots, int nslots, CommandId cid, int options,
                 struct BulkInsertStateData* bistate);
TM_Result TupleDelete(Relation rel, ItemPointer tid, CommandId cid, Snapshot snapshot,
                      Snapshot crosscheck, bool wait, TM_FailureData* tmfd, bool changingPart);
TM_Result TupleUpdate(Relation rel, ItemPointer otid, TupleTableSlot* slot, CommandId cid,
                      Snapshot snapshot, Snapshot crosscheck, bool wait, TM_FailureData* tmfd,
                      LockTupleMode* lockmode, bool* update_indexes);
TM_Result TupleLock(Relation rel, ItemPointer tid, Snapshot snapshot, TupleTableSlot* slot,
                    CommandId cid, LockTupleMode mode, LockWaitPolicy wait_policy, uint8 flags,
                    TM_FailureData* tmfd);

// ddl.cpp
void RelationSetNewFilenode(Relation rel, const RelFileNode* newrnode, char persistence,
                            TransactionId* freezeXid, MultiXactId* minmulti);
void RelationNontransactionalTruncate(Relation rel);
void RelationCopyData(Relation rel, const RelFileNode* newrnode);
void RelationCopyForCluster(Relation OldTable, Relation NewTable, Relation OldIndex, bool use_sort,
                            TransactionId OldestXmin, TransactionId* xid_cutoff,
                            MultiXactId* multi_cutoff, double* num_tuples, double* tups_vacuumed,
                            double* tups_recently_dead);

// maintenance.cpp
void RelationVacuum(Relation rel, struct VacuumParams* params, BufferAccessStrategy bstrategy);
double IndexBuildRangeScan(Relation table_rel, Relation index_rel, struct IndexInfo* index_info,
                           bool allow_sync, bool anyvisible, bool progress,
                           BlockNumber start_blockno, BlockNumber numblocks,
                           IndexBuildCallback callback, void* callback_state, TableScanDesc scan);
void IndexValidateScan(Relation table_rel, Relation index_rel, struct IndexInfo* index_info,
                       Snapshot snapshot, struct ValidateIndexState* state);

// estimate.cpp
uint64 RelationSize(Relation rel, ForkNumber forkNumber);
bool RelationNeedsToastTable(Relation rel);
void RelationEstimateSize(Relation rel, int32* attr_widths, BlockNumber* pages, double* tuples,
                          double* allvisfrac);
// Row-id blocks of the table as last seen (no network; 0 when unknown).
uint64_t CachedRowIdBlocks(Relation rel);
// Whether a serial sequential scan of a table with that many row-id blocks reads the
// partitions' pages (ramp.scan_method; scan.cpp) rather than probing row ids.
bool SequentialScanReadsPages(uint64_t row_id_blocks);

}  // namespace pgramp::tam
