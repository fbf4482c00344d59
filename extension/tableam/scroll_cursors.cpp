// Scrollable cursors over ramp tables (an ExecutorStart hook; only PostgreSQL code here).
//
// A ramp sequential scan reads partition by partition from the page reader, in an order that
// a second pass need not repeat, so it cannot simply turn around. PostgreSQL assumes every
// table AM can (ExecSupportsBackwardScan says yes for any SeqScan): a cursor declared SCROLL,
// or declared without SCROLL/NO SCROLL over such a plan, calls the scan backward on FETCH
// PRIOR, FETCH ABSOLUTE or MOVE BACKWARD. ExecutorStart gets EXEC_FLAG_BACKWARD exactly for
// those portals. For them, this hook begins every ramp sequential scan of the plan itself,
// before the executor's first fetch would, with kScanKeepsRows: the scan keeps the rows it
// hands out and goes back over them (scan.cpp). A Material node on top would do the same
// for the fetches, but UPDATE ... WHERE CURRENT OF cannot see through it to the scan.
#include "tableam/tableam.hpp"

#include "rows/access_methods.hpp"

namespace pgramp::tam {

namespace {

ExecutorStart_hook_type previous_executor_start = nullptr;

bool BeginKeepingScans(PlanState* node, void* context) {
  if (node == nullptr) return false;
  if (IsA(node, SeqScanState)) {
    auto* scan = reinterpret_cast<SeqScanState*>(node);
    Relation rel = scan->ss.ss_currentRelation;
    if (rel != nullptr && scan->ss.ss_currentScanDesc == nullptr && IsRampTable(rel)) {
      // What SeqNext's table_beginscan would ask for, plus kScanKeepsRows.
      const uint32 flags =
          SO_TYPE_SEQSCAN | SO_ALLOW_STRAT | SO_ALLOW_SYNC | SO_ALLOW_PAGEMODE | kScanKeepsRows;
      scan->ss.ss_currentScanDesc =
          rel->rd_tableam->scan_begin(rel, node->state->es_snapshot, 0, nullptr, nullptr, flags);
    }
  }
  // PostgreSQL 15 declares walkers without parameters: cast through void (*)().
  return planstate_tree_walker(
      node, reinterpret_cast<bool (*)()>(reinterpret_cast<void (*)()>(BeginKeepingScans)), context);
}

void StartExecutor(QueryDesc* query, int eflags) {
  if (previous_executor_start != nullptr) {
    previous_executor_start(query, eflags);
  } else {
    standard_ExecutorStart(query, eflags);
  }
  if ((eflags & EXEC_FLAG_BACKWARD) != 0 && (eflags & EXEC_FLAG_EXPLAIN_ONLY) == 0 &&
      query->planstate != nullptr) {
    // In the query's context, as SeqNext's own table_beginscan would be.
    MemoryContext previous = MemoryContextSwitchTo(query->estate->es_query_cxt);
    BeginKeepingScans(query->planstate, nullptr);
    MemoryContextSwitchTo(previous);
  }
}

}  // namespace

void InstallScrollCursorHook() {
  previous_executor_start = ExecutorStart_hook;
  ExecutorStart_hook = StartExecutor;
}

}  // namespace pgramp::tam
