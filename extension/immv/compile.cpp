// Incrementally maintained materialized views (ramp.create_immv): what a view's query may
// contain, and the SQL that fills and maintains it (extension/immv/NOTES.md has the design).
//
// A view is kept as a *delta log*: a ramp table whose rows are signed contributions
// (a count and, per aggregate, partial sums / minima / maxima) of a group or of an output
// row. Every statement on a base table appends the contributions of its transition rows
// to the log in the same PostgreSQL transaction, hence in the same RAMP PUT as the base
// rows. The view itself is a plain view that merges the log (GROUP BY, sum of the parts).
// Appending never updates an existing row, so concurrent writers (of the same group, on
// several PostgreSQL servers) neither conflict nor lose updates; only min/max after a
// delete recompute their groups (delete the group's log rows, append a fresh row).
//
// This file has only PostgreSQL-style code (no C++ objects with destructors): errors are
// ereport(ERROR) and need no boundary (extension/NOTES.md, rule 1).
#include "rows/access_methods.hpp"

extern "C" {
#include "catalog/pg_inherits.h"
#include "catalog/pg_namespace.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "parser/analyze.h"
#include "parser/parser.h"
#include "parser/parsetree.h"
#include "utils/ruleutils.h"
}

namespace pgramp::immv {

namespace {

enum AggKind { kCount, kSum, kAvg, kMin, kMax };

struct AggInfo {
  Aggref* aggref;
  AggKind kind;
  bool star;
};

struct ViewPlan {
  Query* query;
  bool aggregate;
  bool distinct;
  bool has_minmax;
  List* group_exprs;  // Expr*, in GROUP BY order
  List* aggs;         // AggInfo*, each distinct Aggref once
  List* out_names;    // output column names (char*), non-junk target entries in order
  List* out_exprs;    // aggregate views: output expressions with Params for aggs / groups
  Node* having;       // aggregate views: HAVING with Params, or NULL
  List* base_rtis;    // range-table indexes (int) of the base tables, in rtable order
};

constexpr int kAggParamBase = 10000;
constexpr int kGroupParamBase = 20000;

[[noreturn]] void Unsupported(const char* construct) {
  ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                  errmsg("ramp.create_immv does not support %s", construct),
                  errhint("Supported: selection, projection, inner joins, DISTINCT, "
                          "count/sum/avg/min/max with GROUP BY and HAVING over ramp tables.")));
}

const char* QualifiedName(Oid relid) {
  return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
                                    get_rel_name(relid));
}

void CheckRangeTable(ViewPlan* plan) {
  Query* q = plan->query;
  List* seen = NIL;
  int rti = 0;
  ListCell* lc;
  foreach (lc, q->rtable) {
    ++rti;
    auto* rte = static_cast<RangeTblEntry*>(lfirst(lc));
    switch (rte->rtekind) {
      case RTE_RELATION: {
        if (rte->tablesample != nullptr) Unsupported("TABLESAMPLE");
        const char relkind = get_rel_relkind(rte->relid);
        if (relkind == RELKIND_VIEW) Unsupported("views over views (a view in FROM)");
        if (relkind == RELKIND_MATVIEW) Unsupported("materialized views in FROM");
        if (relkind == RELKIND_PARTITIONED_TABLE) Unsupported("partitioned tables");
        if (relkind != RELKIND_RELATION) {
          ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                          errmsg("ramp.create_immv does not support non-ramp base tables: "
                                 "\"%s\" is not a table",
                                 get_rel_name(rte->relid))));
        }
        Relation rel = table_open(rte->relid, AccessShareLock);
        const bool ramp = IsRampTable(rel);
        table_close(rel, AccessShareLock);
        if (!ramp) {
          ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                          errmsg("ramp.create_immv does not support non-ramp base tables: "
                                 "\"%s\" is not a ramp table",
                                 get_rel_name(rte->relid)),
                          errhint("Create it USING ramp.")));
        }
        if (has_subclass(rte->relid)) Unsupported("tables with inheritance children");
        if (list_member_oid(seen, rte->relid)) {
          Unsupported("a table referenced twice (self-joins)");
        }
        seen = lappend_oid(seen, rte->relid);
        plan->base_rtis = lappend_int(plan->base_rtis, rti);
        break;
      }
      case RTE_JOIN:
        if (rte->jointype != JOIN_INNER) Unsupported("outer joins");
        break;
      case RTE_SUBQUERY:
        Unsupported("subqueries in FROM");
      case RTE_CTE:
        Unsupported("WITH queries (CTEs)");
      case RTE_FUNCTION:
        Unsupported("functions in FROM");
      case RTE_VALUES:
        Unsupported("VALUES in FROM");
      default:
        Unsupported("this kind of FROM item");
    }
  }
  if (plan->base_rtis == NIL) Unsupported("a query without a ramp table in FROM");
}

bool CollectAggs(Node* node, void* context) {
  if (node == nullptr) return false;
  auto* plan = static_cast<ViewPlan*>(context);
  if (IsA(node, Aggref)) {
    auto* aggref = reinterpret_cast<Aggref*>(node);
    if (aggref->aggdistinct != NIL) Unsupported("DISTINCT inside an aggregate");
    if (aggref->aggorder != NIL) Unsupported("ORDER BY inside an aggregate");
    if (aggref->aggfilter != nullptr) Unsupported("FILTER on an aggregate");
    if (aggref->agglevelsup != 0) Unsupported("outer-level aggregates");
    const char* name = get_func_name(aggref->aggfnoid);
    if (get_func_namespace(aggref->aggfnoid) != PG_CATALOG_NAMESPACE || name == nullptr) {
      Unsupported(psprintf("the aggregate %s", format_procedure(aggref->aggfnoid)));
    }
    AggInfo info{aggref, kCount, aggref->aggstar};
    if (strcmp(name, "count") == 0) {
      info.kind = kCount;
    } else if (strcmp(name, "sum") == 0) {
      info.kind = kSum;
    } else if (strcmp(name, "avg") == 0) {
      info.kind = kAvg;
      if (aggref->aggtype != NUMERICOID && aggref->aggtype != FLOAT8OID) {
        Unsupported(psprintf("avg of type %s", format_type_be(aggref->aggtype)));
      }
    } else if (strcmp(name, "min") == 0) {
      info.kind = kMin;
    } else if (strcmp(name, "max") == 0) {
      info.kind = kMax;
    } else {
      Unsupported(psprintf("the aggregate %s (count, sum, avg, min and max are supported)",
                           format_procedure(aggref->aggfnoid)));
    }
    if (!info.star && list_length(aggref->args) != 1) {
      Unsupported("aggregates of several arguments");
    }
    ListCell* lc;
    foreach (lc, plan->aggs) {
      if (equal(static_cast<AggInfo*>(lfirst(lc))->aggref, aggref)) return false;
    }
    auto* stored = static_cast<AggInfo*>(palloc(sizeof(AggInfo)));
    *stored = info;
    plan->aggs = lappend(plan->aggs, stored);
    if (info.kind == kMin || info.kind == kMax) plan->has_minmax = true;
    return false;
  }
  return expression_tree_walker(
      node, reinterpret_cast<bool (*)()>(reinterpret_cast<void (*)()>(CollectAggs)), context);
}

Param* MakeParam(int id, Node* like) {
  Param* p = makeNode(Param);
  p->paramkind = PARAM_EXTERN;
  p->paramid = id;
  p->paramtype = exprType(like);
  p->paramtypmod = exprTypmod(like);
  p->paramcollid = exprCollation(like);
  p->location = -1;
  return p;
}

// Replaces group expressions and aggregates by numbered Params (printed as $N by the
// deparser, then replaced by expressions over the log's columns).
Node* ToParams(Node* node, void* context) {
  if (node == nullptr) return nullptr;
  auto* plan = static_cast<ViewPlan*>(context);
  int i = 0;
  ListCell* lc;
  foreach (lc, plan->group_exprs) {
    ++i;
    if (equal(node, lfirst(lc)))
      return reinterpret_cast<Node*>(MakeParam(kGroupParamBase + i, node));
  }
  if (IsA(node, Aggref)) {
    int j = 0;
    foreach (lc, plan->aggs) {
      ++j;
      if (equal(static_cast<AggInfo*>(lfirst(lc))->aggref, node)) {
        return reinterpret_cast<Node*>(MakeParam(kAggParamBase + j, node));
      }
    }
    elog(ERROR, "ramp.create_immv: aggregate not collected");
  }
  return expression_tree_mutator(
      node, reinterpret_cast<Node* (*)()>(reinterpret_cast<void (*)()>(ToParams)), context);
}

void AnalyzeQuery(ViewPlan* plan, const char* query_text);

// Errors with a position in the view's query point into that query (as errors in the body
// of a SQL function do), not into the statement that called ramp.create_immv.
void QueryErrorContext(void* arg) {
  const int position = geterrposition();
  if (position > 0) {
    errposition(0);
    internalerrposition(position);
    internalerrquery(static_cast<const char*>(arg));
  }
  errcontext("query of the materialized view");
}

void Analyze(ViewPlan* plan, const char* query_text) {
  ErrorContextCallback callback;
  callback.callback = QueryErrorContext;
  callback.arg = const_cast<char*>(query_text);
  callback.previous = error_context_stack;
  error_context_stack = &callback;
  AnalyzeQuery(plan, query_text);
  error_context_stack = callback.previous;
}

void AnalyzeQuery(ViewPlan* plan, const char* query_text) {
  List* raw = raw_parser(query_text, RAW_PARSE_DEFAULT);
  if (list_length(raw) != 1) {
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("ramp.create_immv needs exactly one SELECT statement")));
  }
  auto* raw_stmt = static_cast<RawStmt*>(linitial(raw));
  if (!IsA(raw_stmt->stmt, SelectStmt)) {
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("ramp.create_immv needs a SELECT statement")));
  }
  Query* q = parse_analyze_fixedparams(raw_stmt, query_text, nullptr, 0, nullptr);
  plan->query = q;
  if (q->commandType != CMD_SELECT || q->utilityStmt != nullptr) {
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("ramp.create_immv needs a SELECT statement")));
  }
  if (q->hasWindowFuncs) Unsupported("window functions");
  if (q->limitCount != nullptr || q->limitOffset != nullptr) Unsupported("LIMIT and OFFSET");
  if (q->hasTargetSRFs) Unsupported("set-returning functions");
  if (q->cteList != NIL || q->hasRecursive) Unsupported("WITH queries (CTEs)");
  if (q->hasSubLinks) Unsupported("subqueries in expressions (EXISTS, IN, scalar subqueries)");
  if (q->setOperations != nullptr) Unsupported("UNION, INTERSECT and EXCEPT");
  if (q->groupingSets != NIL) Unsupported("GROUPING SETS, ROLLUP and CUBE");
  if (q->rowMarks != NIL) Unsupported("FOR UPDATE and FOR SHARE");
  if (q->hasDistinctOn) Unsupported("DISTINCT ON");
  if (q->hasModifyingCTE) Unsupported("data-modifying statements");
  if (contain_volatile_functions(reinterpret_cast<Node*>(q))) Unsupported("volatile functions");
  CheckRangeTable(plan);

  plan->aggregate = q->hasAggs || q->groupClause != NIL || q->havingQual != nullptr;
  plan->distinct = q->distinctClause != NIL;
  if (plan->aggregate && plan->distinct) Unsupported("DISTINCT together with aggregates");

  ListCell* lc;
  foreach (lc, q->targetList) {
    auto* tle = static_cast<TargetEntry*>(lfirst(lc));
    if (tle->resjunk) continue;
    const char* name = tle->resname != nullptr ? tle->resname : "?column?";
    if (strncmp(name, "__ramp", 6) == 0) {
      ereport(ERROR, (errcode(ERRCODE_INVALID_NAME),
                      errmsg("ramp.create_immv: output column names beginning with \"__ramp\" "
                             "are reserved")));
    }
    ListCell* other;
    foreach (other, plan->out_names) {
      if (strcmp(static_cast<char*>(lfirst(other)), name) == 0) {
        ereport(ERROR, (errcode(ERRCODE_DUPLICATE_COLUMN),
                        errmsg("column \"%s\" specified more than once in the view", name),
                        errhint("Give the output columns distinct names with AS.")));
      }
    }
    plan->out_names = lappend(plan->out_names, pstrdup(name));
  }
  if (plan->out_names == NIL) Unsupported("a view without columns");

  if (plan->aggregate) {
    foreach (lc, q->groupClause) {
      auto* sgc = static_cast<SortGroupClause*>(lfirst(lc));
      plan->group_exprs = lappend(plan->group_exprs, get_sortgroupclause_expr(sgc, q->targetList));
    }
    foreach (lc, q->targetList) {
      auto* tle = static_cast<TargetEntry*>(lfirst(lc));
      if (!tle->resjunk) CollectAggs(reinterpret_cast<Node*>(tle->expr), plan);
    }
    CollectAggs(q->havingQual, plan);
    foreach (lc, q->targetList) {
      auto* tle = static_cast<TargetEntry*>(lfirst(lc));
      if (tle->resjunk) continue;
      Node* e = ToParams(static_cast<Node*>(copyObjectImpl(tle->expr)), plan);
      if (contain_var_clause(e)) Unsupported("output columns that are not grouped or aggregated");
      plan->out_exprs = lappend(plan->out_exprs, e);
    }
    if (q->havingQual != nullptr) {
      plan->having = ToParams(static_cast<Node*>(copyObjectImpl(q->havingQual)), plan);
      if (contain_var_clause(plan->having)) Unsupported("HAVING on columns not grouped");
    }
  }
}

// The query's FROM and WHERE, with one row per input row and the columns the log needs:
// aggregate views the GROUP BY expressions (__g1..) and aggregate arguments (__a1..), other
// views the output columns. delta_rti > 0 reads that base table's transition table (enr).
char* RowQuery(const ViewPlan* plan, int delta_rti, const char* enr) {
  Query* r = static_cast<Query*>(copyObjectImpl(plan->query));
  List* tlist = NIL;
  int resno = 0;
  ListCell* lc;
  if (plan->aggregate) {
    int i = 0;
    foreach (lc, plan->group_exprs) {
      ++i;
      tlist = lappend(tlist, makeTargetEntry(static_cast<Expr*>(copyObjectImpl(lfirst(lc))),
                                             ++resno, psprintf("__g%d", i), false));
    }
    int j = 0;
    foreach (lc, plan->aggs) {
      ++j;
      auto* agg = static_cast<AggInfo*>(lfirst(lc));
      if (agg->star) continue;
      auto* arg = static_cast<TargetEntry*>(linitial(agg->aggref->args));
      tlist = lappend(tlist, makeTargetEntry(static_cast<Expr*>(copyObjectImpl(arg->expr)), ++resno,
                                             psprintf("__a%d", j), false));
    }
  } else {
    foreach (lc, r->targetList) {
      auto* tle = static_cast<TargetEntry*>(lfirst(lc));
      if (tle->resjunk) continue;
      const char* name = static_cast<char*>(list_nth(plan->out_names, resno));
      ++resno;
      tlist = lappend(tlist, makeTargetEntry(tle->expr, resno, pstrdup(name), false));
    }
  }
  r->targetList = tlist;
  r->hasAggs = false;
  r->groupClause = NIL;
  r->havingQual = nullptr;
  r->distinctClause = NIL;
  r->hasDistinctOn = false;
  r->sortClause = NIL;
  if (delta_rti > 0) {
    RangeTblEntry* rte = rt_fetch(delta_rti, r->rtable);
    if (rte->alias == nullptr) rte->alias = makeAlias(rte->eref->aliasname, NIL);
    rte->rtekind = RTE_CTE;
    rte->ctename = pstrdup(enr);
    rte->ctelevelsup = 0;
    rte->self_reference = false;
    rte->relid = InvalidOid;
    rte->inh = false;
  }
  return pg_get_querydef(r, false);
}

const char* Sources(const char* rows_new, const char* rows_old) {
  if (rows_new != nullptr && rows_old != nullptr) {
    return psprintf(
        "(SELECT 1 AS __ramp_sign, n.* FROM (%s) n UNION ALL SELECT -1, o.* FROM (%s) o)", rows_new,
        rows_old);
  }
  if (rows_new != nullptr) return psprintf("(SELECT 1 AS __ramp_sign, n.* FROM (%s) n)", rows_new);
  return psprintf("(SELECT -1 AS __ramp_sign, o.* FROM (%s) o)", rows_old);
}

void GroupList(StringInfo s, const ViewPlan* plan, const char* prefix) {
  if (plan->aggregate) {
    for (int i = 1; i <= list_length(plan->group_exprs); ++i) {
      appendStringInfo(s, "%s%s__g%d", i > 1 ? ", " : "", prefix, i);
    }
  } else {
    int i = 0;
    ListCell* lc;
    foreach (lc, plan->out_names) {
      appendStringInfo(s, "%s%s%s", i++ > 0 ? ", " : "", prefix,
                       quote_identifier(static_cast<char*>(lfirst(lc))));
    }
  }
}

// SELECT of log rows from signed input rows (source, aliased d), optionally filtered.
char* LogRows(const ViewPlan* plan, const char* source, const char* where) {
  StringInfoData s;
  initStringInfo(&s);
  appendStringInfoString(&s, "SELECT ");
  const bool grouped = !plan->aggregate || plan->group_exprs != NIL;
  if (grouped) {
    GroupList(&s, plan, "d.");
    appendStringInfoString(&s, ", ");
  }
  appendStringInfoString(&s, "sum(d.__ramp_sign)::bigint AS __ramp_cnt");
  int j = 0;
  ListCell* lc;
  foreach (lc, plan->aggs) {
    ++j;
    auto* agg = static_cast<AggInfo*>(lfirst(lc));
    switch (agg->kind) {
      case kCount:
        if (agg->star) {
          appendStringInfo(&s, ", sum(d.__ramp_sign)::bigint AS __c%d", j);
        } else {
          appendStringInfo(
              &s, ", sum(CASE WHEN d.__a%d IS NULL THEN 0 ELSE d.__ramp_sign END)::bigint AS __c%d",
              j, j);
        }
        break;
      case kSum:
      case kAvg: {
        appendStringInfo(
            &s, ", sum(CASE WHEN d.__a%d IS NULL THEN 0 ELSE d.__ramp_sign END)::bigint AS __c%d",
            j, j);
        const char* cast =
            agg->kind == kAvg ? psprintf("::%s", format_type_be(agg->aggref->aggtype)) : "";
        appendStringInfo(
            &s, ", sum((CASE WHEN d.__ramp_sign > 0 THEN d.__a%d ELSE -d.__a%d END)%s) AS __s%d", j,
            j, cast, j);
        break;
      }
      case kMin:
      case kMax:
        appendStringInfo(&s, ", %s(d.__a%d) FILTER (WHERE d.__ramp_sign > 0) AS __m%d",
                         agg->kind == kMin ? "min" : "max", j, j);
        break;
    }
  }
  appendStringInfo(&s, " FROM %s d", source);
  if (where != nullptr) appendStringInfo(&s, " WHERE %s", where);
  if (grouped) {
    appendStringInfoString(&s, " GROUP BY ");
    GroupList(&s, plan, "d.");
  }
  appendStringInfoString(
      &s, plan->aggregate ? " HAVING count(*) > 0" : " HAVING sum(d.__ramp_sign) <> 0");
  return s.data;
}

// Merges log rows (source) into fewer log rows with the same totals (compaction).
char* MergedLogRows(const ViewPlan* plan, const char* source) {
  StringInfoData s;
  initStringInfo(&s);
  appendStringInfoString(&s, "SELECT ");
  const bool grouped = !plan->aggregate || plan->group_exprs != NIL;
  if (grouped) {
    GroupList(&s, plan, "");
    appendStringInfoString(&s, ", ");
  }
  appendStringInfoString(&s, "sum(__ramp_cnt)::bigint");
  int j = 0;
  ListCell* lc;
  foreach (lc, plan->aggs) {
    ++j;
    auto* agg = static_cast<AggInfo*>(lfirst(lc));
    switch (agg->kind) {
      case kCount:
        appendStringInfo(&s, ", sum(__c%d)::bigint", j);
        break;
      case kSum:
      case kAvg:
        appendStringInfo(&s, ", sum(__c%d)::bigint, sum(__s%d)", j, j);
        break;
      case kMin:
        appendStringInfo(&s, ", min(__m%d)", j);
        break;
      case kMax:
        appendStringInfo(&s, ", max(__m%d)", j);
        break;
    }
  }
  appendStringInfo(&s, " FROM %s", source);
  if (grouped) {
    appendStringInfoString(&s, " GROUP BY ");
    GroupList(&s, plan, "");
    appendStringInfoString(&s, " HAVING sum(__ramp_cnt) <> 0");
  }
  return s.data;
}

// An aggregate's value from the log's columns (the view merges the log per group).
char* MergedAggregate(const AggInfo* agg, int j) {
  const char* type = format_type_be(agg->aggref->aggtype);
  switch (agg->kind) {
    case kCount:
      return psprintf("COALESCE(sum(__c%d), 0)::bigint", j);
    case kSum:
      return psprintf("(CASE WHEN sum(__c%d) > 0 THEN sum(__s%d) END)::%s", j, j, type);
    case kAvg:
      return psprintf("(sum(__s%d)::%s / NULLIF(sum(__c%d), 0)::%s)", j, type, j, type);
    case kMin:
      return psprintf("min(__m%d)", j);
    case kMax:
      return psprintf("max(__m%d)", j);
  }
  return nullptr;
}

// Deparses an expression whose only leaves are Params and constants, and replaces the
// Params by expressions over the log's columns.
char* ExpressionOverLog(const ViewPlan* plan, Node* expr) {
  const char* text = deparse_expression(expr, NIL, false, false);
  StringInfoData s;
  initStringInfo(&s);
  for (const char* p = text; *p != '\0';) {
    if (*p == '$' && isdigit(static_cast<unsigned char>(p[1]))) {
      char* end;
      const long id = strtol(p + 1, &end, 10);
      if (id > kGroupParamBase) {
        appendStringInfo(&s, "__g%ld", id - kGroupParamBase);
      } else if (id > kAggParamBase) {
        const int j = static_cast<int>(id - kAggParamBase);
        appendStringInfo(&s, "(%s)",
                         MergedAggregate(static_cast<AggInfo*>(list_nth(plan->aggs, j - 1)), j));
      } else {
        appendBinaryStringInfo(&s, p, static_cast<int>(end - p));
      }
      p = end;
    } else {
      appendStringInfoChar(&s, *p++);
    }
  }
  return s.data;
}

char* ViewQuery(const ViewPlan* plan, const char* log) {
  StringInfoData s;
  initStringInfo(&s);
  if (!plan->aggregate) {
    if (plan->distinct) {
      appendStringInfoString(&s, "SELECT ");
      GroupList(&s, plan, "");
      appendStringInfo(&s, " FROM %s GROUP BY ", log);
      GroupList(&s, plan, "");
      appendStringInfoString(&s, " HAVING sum(__ramp_cnt) > 0");
    } else {
      appendStringInfoString(&s, "SELECT ");
      GroupList(&s, plan, "m.");
      appendStringInfoString(&s, " FROM (SELECT ");
      GroupList(&s, plan, "");
      appendStringInfo(&s, ", sum(__ramp_cnt) AS __ramp_n FROM %s GROUP BY ", log);
      GroupList(&s, plan, "");
      appendStringInfoString(&s, ") m, generate_series(1, m.__ramp_n::bigint) AS __ramp_copy");
    }
    return s.data;
  }
  appendStringInfoString(&s, "SELECT ");
  int i = 0;
  ListCell* lc;
  ListCell* name;
  forboth(lc, plan->out_exprs, name, plan->out_names) {
    appendStringInfo(&s, "%s%s AS %s", i++ > 0 ? ", " : "",
                     ExpressionOverLog(plan, static_cast<Node*>(lfirst(lc))),
                     quote_identifier(static_cast<char*>(lfirst(name))));
  }
  appendStringInfo(&s, " FROM %s", log);
  if (plan->group_exprs != NIL) {
    appendStringInfoString(&s, " GROUP BY ");
    GroupList(&s, plan, "");
    appendStringInfoString(&s, " HAVING sum(__ramp_cnt) > 0");
    if (plan->having != nullptr) {
      appendStringInfo(&s, " AND (%s)", ExpressionOverLog(plan, plan->having));
    }
  } else if (plan->having != nullptr) {
    appendStringInfo(&s, " HAVING %s", ExpressionOverLog(plan, plan->having));
  }
  return s.data;
}

// r.__g1 IS NOT DISTINCT FROM x.__g1 AND ... (true without GROUP BY).
char* SameGroup(const ViewPlan* plan, const char* x) {
  StringInfoData s;
  initStringInfo(&s);
  appendStringInfoString(&s, "true");
  for (int i = 1; i <= list_length(plan->group_exprs); ++i) {
    appendStringInfo(&s, " AND r.__g%d IS NOT DISTINCT FROM %s.__g%d", i, x, i);
  }
  return s.data;
}

// The statement run after a statement on a base table: the log gets the contributions of
// the transition rows. With min/max, groups that lost rows are recomputed from the base
// tables instead (their log rows replaced by one), in the same statement, so the log rows
// it removes and the base rows it reads come from the same snapshot.
char* Maintenance(const ViewPlan* plan, const char* log, const char* rows_new, const char* rows_old,
                  const char* rows_full) {
  const char* source = Sources(rows_new, rows_old);
  if (!plan->has_minmax || rows_old == nullptr) {
    return psprintf("INSERT INTO %s %s", log, LogRows(plan, source, nullptr));
  }
  StringInfoData s;
  initStringInfo(&s);
  appendStringInfo(&s, "WITH __ramp_rc AS (SELECT DISTINCT 1 AS __ramp_one");
  for (int i = 1; i <= list_length(plan->group_exprs); ++i) appendStringInfo(&s, ", o.__g%d", i);
  appendStringInfo(&s, " FROM (%s) o), ", rows_old);
  appendStringInfo(&s,
                   "__ramp_gone AS (DELETE FROM %s l WHERE EXISTS (SELECT 1 FROM __ramp_rc r "
                   "WHERE %s)), ",
                   log, SameGroup(plan, "l"));
  appendStringInfo(
      &s, "__ramp_redo AS (INSERT INTO %s %s) ", log,
      LogRows(plan, Sources(rows_full, nullptr),
              psprintf("EXISTS (SELECT 1 FROM __ramp_rc r WHERE %s)", SameGroup(plan, "d"))));
  appendStringInfo(
      &s, "INSERT INTO %s %s", log,
      LogRows(plan, source,
              psprintf("NOT EXISTS (SELECT 1 FROM __ramp_rc r WHERE %s)", SameGroup(plan, "d"))));
  return s.data;
}

void Emit(ReturnSetInfo* rsinfo, const char* kind, int base, const char* base_table,
          const char* sql) {
  Datum values[4];
  bool nulls[4] = {false, false, base_table == nullptr, false};
  values[0] = CStringGetTextDatum(kind);
  values[1] = Int32GetDatum(base);
  values[2] = base_table != nullptr ? CStringGetTextDatum(base_table) : (Datum)0;
  values[3] = CStringGetTextDatum(sql);
  tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
}

}  // namespace

}  // namespace pgramp::immv

extern "C" {

// ramp._immv_compile(query text, log_table text) -> (kind, base, base_table, sql): checks the
// query and returns the SQL of the view (kind 'view'), of the log's contents ('fill'), of a
// refresh ('refresh'), a compaction ('compact'), the query itself with every name qualified
// ('query') and, per base table (base = 1..n), what its INSERT, DELETE, UPDATE and TRUNCATE
// statement triggers run. Names in the SQL are schema-qualified (deparsed with search_path
// = pg_catalog): the triggers run it whatever the writer's search_path.
PG_FUNCTION_INFO_V1(ramp_immv_compile);
Datum ramp_immv_compile(PG_FUNCTION_ARGS) {
  using namespace pgramp::immv;
  InitMaterializedSRF(fcinfo, 0);
  auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
  const char* query_text = text_to_cstring(PG_GETARG_TEXT_PP(0));
  const char* log = text_to_cstring(PG_GETARG_TEXT_PP(1));

  ViewPlan plan{};
  Analyze(&plan, query_text);

  const int guc_level = NewGUCNestLevel();
  (void)set_config_option("search_path", "pg_catalog", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
                          true, 0, false);
  const char* rows_full = RowQuery(&plan, 0, nullptr);
  const char* fill = LogRows(&plan, Sources(rows_full, nullptr), nullptr);
  Emit(rsinfo, "fill", 0, nullptr, fill);
  Emit(rsinfo, "view", 0, nullptr, ViewQuery(&plan, log));
  Emit(rsinfo, "query", 0, nullptr, pg_get_querydef(plan.query, false));
  const char* refresh =
      psprintf("WITH __ramp_gone AS (DELETE FROM %s) INSERT INTO %s %s", log, log, fill);
  Emit(rsinfo, "refresh", 0, nullptr, refresh);
  Emit(rsinfo, "compact", 0, nullptr,
       psprintf("WITH __ramp_gone AS (DELETE FROM %s RETURNING *) INSERT INTO %s %s", log, log,
                MergedLogRows(&plan, "__ramp_gone")));
  int base = 0;
  ListCell* lc;
  foreach (lc, plan.base_rtis) {
    ++base;
    const int rti = lfirst_int(lc);
    const char* table = QualifiedName(rt_fetch(rti, plan.query->rtable)->relid);
    const char* rows_new = RowQuery(&plan, rti, "__ramp_new");
    const char* rows_old = RowQuery(&plan, rti, "__ramp_old");
    Emit(rsinfo, "INSERT", base, table, Maintenance(&plan, log, rows_new, nullptr, rows_full));
    Emit(rsinfo, "DELETE", base, table, Maintenance(&plan, log, nullptr, rows_old, rows_full));
    Emit(rsinfo, "UPDATE", base, table, Maintenance(&plan, log, rows_new, rows_old, rows_full));
    Emit(rsinfo, "TRUNCATE", base, table, refresh);
  }
  AtEOXact_GUC(true, guc_level);
  return (Datum)0;
}

}  // extern "C"
