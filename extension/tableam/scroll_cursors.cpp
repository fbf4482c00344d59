// Scrollable cursors over ramp tables (an ExecutorStart hook; only PostgreSQL code here).
//
// A ramp sequential scan runs forward only: its rows come partition by partition from the
// page reader, in an order that a second pass need not repeat. PostgreSQL assumes every
// table AM can scan backward (ExecSupportsBackwardScan says yes for any SeqScan), so a
// cursor declared SCROLL, or declared without SCROLL/NO SCROLL over a plan that looks
// scrollable, would call the AM backward on FETCH PRIOR / FETCH ABSOLUTE / MOVE BACKWARD.
// The executor tells which queries may run backward: ExecutorStart gets EXEC_FLAG_BACKWARD
// exactly for scrollable portals. For those, when the plan scans a ramp table sequentially,
// the plan gets a Material node on top (what the planner itself adds for a SCROLL cursor
// over a plan that cannot go backward): the scan below runs forward once, and Material's
// tuplestore serves the backward fetches. It stores only the rows fetched so far.
#include "tableam/tableam.hpp"

#include "rows/access_methods.hpp"

namespace pgramp::tam {

namespace {

ExecutorStart_hook_type previous_executor_start = nullptr;

struct PlanFacts {
  List* rtable = nullptr;
  bool ramp_seqscan = false;
  int max_node_id = 0;
};

bool IsRampRelation(Oid relid) {
  Relation relation = RelationIdGetRelation(relid);
  if (relation == nullptr) return false;
  const bool ramp = IsRampTable(relation);
  RelationClose(relation);
  return ramp;
}

void Walk(Plan* plan, PlanFacts* facts);

void WalkList(List* plans, PlanFacts* facts) {
  ListCell* lc;
  foreach (lc, plans) Walk(static_cast<Plan*>(lfirst(lc)), facts);
}

void Walk(Plan* plan, PlanFacts* facts) {
  if (plan == nullptr) return;
  facts->max_node_id = Max(facts->max_node_id, plan->plan_node_id);
  switch (nodeTag(plan)) {
    case T_SeqScan:
    case T_TidRangeScan: {
      const Index rti = reinterpret_cast<Scan*>(plan)->scanrelid;
      if (!facts->ramp_seqscan && rti > 0 &&
          rti <= static_cast<Index>(list_length(facts->rtable))) {
        RangeTblEntry* rte = rt_fetch(rti, facts->rtable);
        if (rte->rtekind == RTE_RELATION && IsRampRelation(rte->relid)) facts->ramp_seqscan = true;
      }
      break;
    }
    case T_Append:
      WalkList(reinterpret_cast<Append*>(plan)->appendplans, facts);
      break;
    case T_MergeAppend:
      WalkList(reinterpret_cast<MergeAppend*>(plan)->mergeplans, facts);
      break;
    case T_SubqueryScan:
      Walk(reinterpret_cast<SubqueryScan*>(plan)->subplan, facts);
      break;
    case T_BitmapAnd:
      WalkList(reinterpret_cast<BitmapAnd*>(plan)->bitmapplans, facts);
      break;
    case T_BitmapOr:
      WalkList(reinterpret_cast<BitmapOr*>(plan)->bitmapplans, facts);
      break;
    case T_CustomScan:
      WalkList(reinterpret_cast<CustomScan*>(plan)->custom_plans, facts);
      break;
    default:
      break;
  }
  Walk(plan->lefttree, facts);
  Walk(plan->righttree, facts);
}

void StartExecutor(QueryDesc* query, int eflags) {
  PlannedStmt* stmt = query->plannedstmt;
  if ((eflags & EXEC_FLAG_BACKWARD) != 0 && stmt != nullptr && stmt->commandType == CMD_SELECT &&
      stmt->planTree != nullptr && !IsA(stmt->planTree, Material)) {
    PlanFacts facts;
    facts.rtable = stmt->rtable;
    Walk(stmt->planTree, &facts);
    ListCell* lc;
    foreach (lc, stmt->subplans) Walk(static_cast<Plan*>(lfirst(lc)), &facts);
    if (facts.ramp_seqscan) {
      // A copy of the statement: the original may belong to a cached plan.
      PlannedStmt* copy = static_cast<PlannedStmt*>(palloc(sizeof(PlannedStmt)));
      *copy = *stmt;
      Plan* material = materialize_finished_plan(stmt->planTree);
      material->plan_node_id = facts.max_node_id + 1;
      copy->planTree = material;
      query->plannedstmt = copy;
    }
  }
  if (previous_executor_start != nullptr) {
    previous_executor_start(query, eflags);
  } else {
    standard_ExecutorStart(query, eflags);
  }
}

}  // namespace

void InstallScrollCursorHook() {
  previous_executor_start = ExecutorStart_hook;
  ExecutorStart_hook = StartExecutor;
}

}  // namespace pgramp::tam
