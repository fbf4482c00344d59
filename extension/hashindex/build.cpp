// ramp_hash: building, inserting, vacuuming, options.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "ramp/client.h"

#include "rows/keys.hpp"
#include "xact/session.hpp"
#include "xact/xact.hpp"

#include "boundary/boundary.hpp"
#include "boundary/context_owned.hpp"
#include "catalog/keyspace_catalog.hpp"
#include "hashindex/hashindex.hpp"
#include "rows/access_methods.hpp"
#include "rows/tid.hpp"

namespace pgramp::hashindex {

namespace {

relopt_kind reloption_kind;

struct RampHashOptions {
  int32 vl_len_;  // varlena header: no options yet
};

// Index builds write their entries straight to the cluster in batches of their own RAMP
// transactions instead of the transaction's single PUT, which holds every write in backend
// memory until COMMIT and is capped by the client's max_batch_items (a build of a large
// table would not fit). The keyspace is new and invisible to every other reader until the
// CREATE INDEX commits (the catalog says so); if the transaction aborts, the keyspace is
// removed (XactState::drop_after_abort). The rows the entries point to are already
// committed (or are this transaction's own), so no entry needs their versions. (Batches
// were 256 entries while RAMP-Fast metadata listed every key of a transaction; bulk
// transactions now name partitions, so a batch costs no more per entry than a single PUT.)
constexpr size_t kBuildBatch = 8192;

struct BuildState {
  ramp::KeyspaceRef ks;
  double entries;
  ramp::WriteBatch* batch;  // entries waiting for the next flush
};

void FlushBuild(BuildState* st) {
  if (st->batch->empty()) return;
  Session& session = Session::Get();
  session.Define(st->ks);
  session.Check(session.client().Write(*st->batch), "building a ramp_hash index");
  st->batch->Clear();
  XactState& x = Xact();
  if (st->ks.fresh) {
    // The keyspace now holds committed data: scans must read it, and an abort removes it.
    st->ks.fresh = false;
    for (auto& [storage, ref] : x.created) {
      if (ref.id == st->ks.id) ref.fresh = false;
    }
    x.drop_after_abort.emplace_back(st->ks.id, GetCurrentSubTransactionId());
  }
}

// What ramp_hash cannot do gets a clear error before anything is built.
void CheckSupported(Relation heap, Relation index, struct IndexInfo* info) {
  if (!IsRampTable(heap)) {
    ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                    errmsg("ramp_hash indexes can only be created on ramp tables"),
                    errdetail("Table \"%s\" does not use the ramp table access method.",
                              RelationGetRelationName(heap)),
                    errhint("Use a btree or hash index, or create the table with USING ramp.")));
  }
  if (info->ii_Expressions != NIL) {
    ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                    errmsg("ramp_hash does not support expression indexes"),
                    errhint("Index a plain column (a generated column can hold the expression).")));
  }
  if (info->ii_Predicate != NIL) {
    ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                    errmsg("ramp_hash does not support partial indexes")));
  }
  if (info->ii_Concurrent) {
    ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                    errmsg("ramp_hash indexes cannot be built concurrently"),
                    errhint("Drop the invalid index left behind and use CREATE INDEX without "
                            "CONCURRENTLY (ramp_hash builds do not block concurrent writers on "
                            "other PostgreSQL servers anyway).")));
  }
  if (info->ii_NumIndexAttrs != 1 || info->ii_IndexAttrNumbers[0] <= 0) {
    ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                    errmsg("ramp_hash indexes have exactly one key column")));
  }
}

void BuildCallback(Relation index, ItemPointer tid, Datum* values, bool* isnull, bool alive,
                   void* state) {
  if (isnull[0]) return;  // NULLs are not indexed: equality never matches them
  auto* st = static_cast<BuildState*>(state);
  Boundary([&] {
    uint64_t rowid = 0;
    if (!RowIdOfTid(tid, &rowid)) return;
    const Datum value = values[0];
    const uint64 hash = PgCall([&] { return HashValue(index, InvalidOid, value); });
    // Empty value: a built entry (not written with its row). Nothing to undo (own PUTs).
    Session::Get().Check(
        st->batch->Insert(st->ks, ramp::EntryKey{hash, rowid}, std::string(), 0, ramp::kTopSubTxn),
        "building a ramp_hash index");
    st->entries += 1;
    if (st->batch->size() >= kBuildBatch) FlushBuild(st);
  });
}

}  // namespace

IndexBuildResult* Build(Relation heap, Relation index, struct IndexInfo* index_info) {
  CheckSupported(heap, index, index_info);
  BuildState state;
  state.entries = 0;
  state.batch = nullptr;
  state.ks = Boundary([&] {
    ramp::KeyspaceRef ks = CreateRelationKeyspace(index, &index->rd_node, kKindIndex);
    // Rebuilding storage created by this transaction (TRUNCATE of a new table): start over.
    Xact().writes.DiscardKeyspace(ks.id);
    const auto& attached = Xact().attached;
    if (!ks.fresh && std::find(attached.begin(), attached.end(), ks.id) == attached.end()) {
      Session& session = Session::Get();
      session.Check(session.client().DropKeyspace(ks.id), "rebuilding a ramp_hash index");
    }
    return ks;
  });
  // The batch is owned by the current memory context (freed if the build fails).
  state.batch =
      Boundary([] { return OwnInCurrentContext(std::make_unique<ramp::WriteBatch>()); })->object;
  const double reltuples =
      table_index_build_scan(heap, index, index_info, true, true, BuildCallback, &state, nullptr);
  Boundary([&] { FlushBuild(&state); });
  auto* result = static_cast<IndexBuildResult*>(palloc0(sizeof(IndexBuildResult)));
  result->heap_tuples = reltuples;
  result->index_tuples = state.entries;
  return result;
}

void BuildEmpty(Relation index) {
  // Unlogged indexes: no local contents to initialize.
}

bool Insert(Relation index, Datum* values, bool* isnull, ItemPointer heap_tid, Relation heap,
            IndexUniqueCheck check_unique, bool index_unchanged, struct IndexInfo* index_info) {
  if (isnull[0]) return false;
  Boundary([&] {
    uint64_t rowid = 0;
    if (!RowIdOfTid(heap_tid, &rowid)) return;
    const Datum value = values[0];
    const uint64 hash = PgCall([&] { return HashValue(index, InvalidOid, value); });
    const ramp::KeyspaceRef ks = RelationKeyspace(index);
    Session::Get().Check(
        Xact().writes.Insert(ks, ramp::EntryKey{hash, rowid}, std::string(kEntryWithRow),
                             GetCurrentCommandId(false), GetCurrentSubTransactionId()),
        "inserting into a ramp_hash index");
  });
  return false;
}

IndexBulkDeleteResult* BulkDelete(IndexVacuumInfo* info, IndexBulkDeleteResult* stats,
                                  IndexBulkDeleteCallback callback, void* callback_state) {
  // Entries are deleted with their rows, in the same RAMP PUT (the table AM does it), so
  // there is nothing to remove here. The table AM's VACUUM never asks ramp_hash; PostgreSQL
  // only would for CREATE INDEX CONCURRENTLY, which ramp_hash refuses.
  if (stats == nullptr) {
    stats = static_cast<IndexBulkDeleteResult*>(palloc0(sizeof(IndexBulkDeleteResult)));
  }
  stats->estimated_count = true;
  return stats;
}

IndexBulkDeleteResult* VacuumCleanup(IndexVacuumInfo* info, IndexBulkDeleteResult* stats) {
  if (info->analyze_only) return stats;
  if (stats == nullptr) {
    stats = static_cast<IndexBulkDeleteResult*>(palloc0(sizeof(IndexBulkDeleteResult)));
    stats->num_index_tuples = info->num_heap_tuples;
  }
  stats->estimated_count = true;
  return stats;
}

bytea* Options(Datum reloptions, bool validate) {
  return static_cast<bytea*>(
      build_reloptions(reloptions, validate, reloption_kind, sizeof(RampHashOptions), nullptr, 0));
}

void InitReloptions() {
  reloption_kind = add_reloption_kind();
}

}  // namespace pgramp::hashindex
