// Index AM `ramp_hash`: entries live in the index's own (grouped) keyspace on the ramp
// cluster, grouped by the 64-bit hash of the indexed value, so that one lookup reads one
// partition; they are written in the same RAMP PUT as the rows, so index and table are
// read-atomic together. Equality only, one column, no NULLs stored.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ramp/write_batch.h"

#include "boundary/pg.hpp"

namespace pgramp::hashindex {

// Value of an entry written in the same transaction as its row (INSERT, UPDATE, COPY):
// a lookup then asks for at least that version of the row. Entries of index builds point
// at rows committed earlier and have an empty value.
inline constexpr std::string_view kEntryWithRow{"\x01", 1};

// The group of a value: the opclass's support function 1 (extended hash, seed 0) for the
// value's type (cross-type lookups use the family's function for the other type), big-endian.
// PostgreSQL side: call through PgCall.
uint64 HashValue(Relation index, Oid value_type, Datum value);

// Callbacks.
IndexBuildResult* Build(Relation heap, Relation index, struct IndexInfo* index_info);
void BuildEmpty(Relation index);
bool Insert(Relation index, Datum* values, bool* isnull, ItemPointer heap_tid, Relation heap,
            IndexUniqueCheck check_unique, bool index_unchanged, struct IndexInfo* index_info);
IndexBulkDeleteResult* BulkDelete(IndexVacuumInfo* info, IndexBulkDeleteResult* stats,
                                  IndexBulkDeleteCallback callback, void* callback_state);
IndexBulkDeleteResult* VacuumCleanup(IndexVacuumInfo* info, IndexBulkDeleteResult* stats);
bytea* Options(Datum reloptions, bool validate);
void CostEstimate(struct PlannerInfo* root, struct IndexPath* path, double loop_count,
                  Cost* startup_cost, Cost* total_cost, Selectivity* selectivity,
                  double* correlation, double* pages);
bool Validate(Oid opclass);
IndexScanDesc BeginScan(Relation index, int nkeys, int norderbys);
void Rescan(IndexScanDesc scan, ScanKey keys, int nkeys, ScanKey orderbys, int norderbys);
bool GetTuple(IndexScanDesc scan, ScanDirection direction);
int64 GetBitmap(IndexScanDesc scan, TIDBitmap* tbm);
void EndScan(IndexScanDesc scan);

void InitReloptions();

}  // namespace pgramp::hashindex
