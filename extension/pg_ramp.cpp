// pg_ramp: module initialization (GUCs, transaction callbacks, planner hook).
#include <algorithm>
#include <cmath>

#include "xact/xact.hpp"

#include "catalog/keyspace_catalog.hpp"

#include "fdw/fdw.hpp"
#include "hashindex/hashindex.hpp"
#include "rows/access_methods.hpp"
#include "sqlapi/guc.hpp"
#include "tableam/tableam.hpp"
#include "xact/shared_addresses.hpp"

extern "C" {
PG_MODULE_MAGIC;
}

namespace pgramp {

namespace {

set_rel_pathlist_hook_type previous_set_rel_pathlist = nullptr;
get_relation_info_hook_type previous_get_relation_info = nullptr;

bool IsBitmapHeapPath(Path* path) {
  return IsA(path, BitmapHeapPath);
}

// Drops the bitmap heap paths of a list (see below).
List* WithoutBitmapHeapPaths(List* paths) {
  ListCell* lc;
  foreach (lc, paths) {
    if (IsBitmapHeapPath(static_cast<Path*>(lfirst(lc)))) {
      paths = foreach_delete_current(paths, lc);
    }
  }
  return paths;
}

// PostgreSQL's divisor of a parallel path's rows among its participants (costsize.c).
double ParallelDivisor(const Path* path) {
  if (path->parallel_workers <= 0) return 1;
  double divisor = path->parallel_workers;
  const double leader = 1.0 - 0.3 * path->parallel_workers;
  if (parallel_leader_participation && leader > 0) divisor += leader;
  return divisor;
}

// Fetching one ramp row by TID is a read from the cluster (a one-sided read of a few
// microseconds when the address is cached, a request otherwise), where heap reads a tuple
// from a page it usually holds already. PostgreSQL's index costs count pages, and a
// correlated index scan (TPC-H's lineitem by l_orderkey) costs it almost nothing per row: at
// SF 0.1 Q3 chose 14 159 index lookups of lineitem (1.7 s cold, 0.35 s warm) over the hash join
// heap runs in 50 ms. Index paths of ramp tables pay ramp.row_fetch_cost per row they fetch
// (ramp_hash's own estimate counts its reads already): the rows the index conditions select
// (cost_index's tuples_fetched), not the rows left after the other conditions: a full
// index scan of part filtered down to 52 rows fetches all 20 000 (TPC-H Q19 took it, 85 ms,
// over the 12 ms sequential scan once those cost more per row).
void AddRowFetchCosts(List* paths, double tuples) {
  ListCell* lc;
  foreach (lc, paths) {
    Path* path = static_cast<Path*>(lfirst(lc));
    if (!IsA(path, IndexPath)) continue;
    auto* index_path = reinterpret_cast<IndexPath*>(path);
    if (index_path->indexinfo->amcostestimate ==
        reinterpret_cast<void (*)()>(hashindex::CostEstimate)) {
      continue;
    }
    const double fetched =
        std::max(path->rows, clamp_row_est(index_path->indexselectivity * tuples));
    path->total_cost += fetched / ParallelDivisor(path) * guc::row_fetch_cost;
  }
}

// A sequential scan of a ramp table decodes and checks every row it reads on the client
// (record checksums, visibility, the hand-over to the executor): at SF 0.1 it took 2-3x heap's
// time for lineitem where its cost (the servers' pages and cpu_tuple_cost per row) was 1.3x
// heap's. Plans then scanned lineitem in parallel hash joins where index lookups were faster
// (Q8: 2.8-4.4x heap's time that way, 1.1-2.0x with the index plan this cost leads to).
// Sequential scan paths of ramp tables pay ramp.scan_row_cost per row they read: each
// participant its share of a parallel scan (PostgreSQL's divisor).
void AddScanRowCosts(List* paths, double tuples) {
  ListCell* lc;
  foreach (lc, paths) {
    Path* path = static_cast<Path*>(lfirst(lc));
    if (path->pathtype != T_SeqScan) continue;
    path->total_cost += tuples / ParallelDivisor(path) * guc::scan_row_cost;
  }
}

// Planner hook for ramp tables (only PostgreSQL code here: no boundary needed).
//  - Parallel workers cannot see the leader's buffered ramp writes: once the transaction has
//    written anything, ramp tables are planned without partial (parallel) paths.
//  - Bitmap heap scans prefetch table blocks through md.c, which fails for blocks beyond the
//    first segment of the (empty) local main fork: with prefetching on, tables whose row-id
//    blocks go past RELSEG_SIZE (33.5 M row ids) get no bitmap heap paths (index scans and
//    sequential scans remain).
//  - Parallel sequential scans of larger tables read whole partitions' pages per worker, at
//    one snapshot the leader draws (tableam/scan.cpp), like serial ones.
void SetRelPathlist(PlannerInfo* root, RelOptInfo* rel, Index rti, RangeTblEntry* rte) {
  if (previous_set_rel_pathlist != nullptr) previous_set_rel_pathlist(root, rel, rti, rte);
  if (rte->rtekind != RTE_RELATION || rte->relkind != RELKIND_RELATION) return;
  const XactState* x = XactIfAny();
  const bool has_writes = x != nullptr && !x->writes.empty();
  const bool prefetching = get_tablespace_io_concurrency(rel->reltablespace) > 0;
  const bool fetch_costs = guc::row_fetch_cost > 0 && rel->indexlist != NIL;
  const bool scan_costs = guc::scan_row_cost > 0;
  if (!(rel->partial_pathlist != NIL && has_writes) && !prefetching && !fetch_costs &&
      !scan_costs) {
    return;
  }
  Relation relation = RelationIdGetRelation(rte->relid);
  if (relation == nullptr) return;
  const bool ramp = IsRampTable(relation);
  const uint64_t blocks = ramp ? tam::CachedRowIdBlocks(relation) : 0;
  const bool big = ramp && prefetching && blocks >= RELSEG_SIZE;
  RelationClose(relation);
  if (!ramp) return;
  if (fetch_costs) {
    AddRowFetchCosts(rel->pathlist, rel->tuples);
    AddRowFetchCosts(rel->partial_pathlist, rel->tuples);
  }
  if (scan_costs) {
    AddScanRowCosts(rel->pathlist, rel->tuples);
    AddScanRowCosts(rel->partial_pathlist, rel->tuples);
  }
  if (has_writes) rel->partial_pathlist = NIL;
  if (big) {
    rel->pathlist = WithoutBitmapHeapPaths(rel->pathlist);
    rel->partial_pathlist = WithoutBitmapHeapPaths(rel->partial_pathlist);
  }
}

// The pages heap would need for the table's rows: what PostgreSQL's own estimate for a heap
// table without a size uses (table_block_relation_estimate_size): data width from the
// statistics, tuple header and line pointer per row, full pages.
double HeapEquivalentPages(Oid relid, double tuples) {
  const int32 width = get_relation_data_width(relid, nullptr) + MAXALIGN(SizeofHeapTupleHeader) +
                      static_cast<int32>(sizeof(ItemIdData));
  const double per_page = std::max(1.0, std::floor((BLCKSZ - SizeOfPageHeaderData) / width));
  return std::ceil(tuples / per_page);
}

// Relation-info hook:
//  - once the transaction has written to the cluster, a ramp table gets no parallel workers
//    at all. SetRelPathlist covers queries; this covers the other caller of
//    compute_parallel_worker, plan_create_index_workers: a parallel index build (CREATE INDEX
//    after INSERT, or after CREATE MATERIALIZED VIEW, in one transaction) would hand the table
//    to workers that cannot see the leader's buffered writes;
//  - otherwise a ramp table gets the parallel workers heap would plan for the same rows
//    (ramp.heap_parallel_workers). Its pages for the planner are the servers' bytes, about
//    1.45x heap's pages for TPC-H's tables (record headers, metadata), and PostgreSQL gives a
//    scan one more worker at every tripling of the pages: SF 0.1 orders (3 900 ramp pages,
//    2 610 heap) got 2 workers where heap got 1, and Q18 then scanned lineitem three times
//    for its hash (once per participant) on 2 cores. Costs still use the servers' pages.
//    A parallel_workers reloption wins, as for heap.
void GetRelationInfo(PlannerInfo* root, Oid relid, bool inhparent, RelOptInfo* rel) {
  if (previous_get_relation_info != nullptr) {
    previous_get_relation_info(root, relid, inhparent, rel);
  }
  const XactState* x = XactIfAny();
  const bool has_writes = x != nullptr && !x->writes.empty();
  if (!has_writes && (!guc::heap_parallel_workers || rel->rel_parallel_workers != -1)) return;
  Relation relation = RelationIdGetRelation(relid);
  if (relation == nullptr) return;
  const bool ramp = IsRampTable(relation);
  RelationClose(relation);
  if (!ramp) return;
  if (has_writes) {
    rel->rel_parallel_workers = 0;
    return;
  }
  const double pages = HeapEquivalentPages(relid, rel->tuples);
  rel->rel_parallel_workers =
      compute_parallel_worker(rel, std::min(pages, static_cast<double>(MaxBlockNumber)), -1,
                              max_parallel_workers_per_gather);
}

}  // namespace

}  // namespace pgramp

extern "C" {
void _PG_init(void) {
  pgramp::guc::Define();
  pgramp::hashindex::InitReloptions();
  pgramp::InstallXactCallbacks();
  pgramp::previous_set_rel_pathlist = set_rel_pathlist_hook;
  set_rel_pathlist_hook = pgramp::SetRelPathlist;
  pgramp::previous_get_relation_info = get_relation_info_hook;
  get_relation_info_hook = pgramp::GetRelationInfo;
  pgramp::tam::InstallTemporaryTableHook();
  pgramp::tam::InstallScrollCursorHook();
  pgramp::InstallDropDatabaseHook();
  pgramp::fdw::InstallXactCallbacks();
  pgramp::InstallSharedAddressCache();
}
}
