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
// The query is first put in a normal form: CTEs inlined as subqueries in FROM, join alias
// columns flattened, IN / NOT IN (subquery) rewritten as EXISTS / NOT EXISTS, outer joins
// split into branches (the inner join, plus per nullable side the preserved side's rows
// with NOT EXISTS a partner and NULLs), count(DISTINCT x) rewritten as count(x) over a
// DISTINCT subquery. The signed input rows of a statement on table T are then:
//   - T in FROM (k times, subqueries in FROM included): inclusion-exclusion over the
//     occurrences, each replaced by the transition tables (new +1, old -1) or left as is;
//   - T in an EXISTS / NOT EXISTS of WHERE: the outer rows whose subquery reads a changed
//     row, with +1 / -1 where the condition turned true / false (counts of matching rows
//     now, in the new and in the old transition rows give the count before);
//   - T under an aggregating subquery that is the only FROM item (nested aggregate): the
//     subquery's rows of the groups T's change touched, before (-1) and after (+1).
//
// This file has only PostgreSQL-style code (no C++ objects with destructors): errors are
// ereport(ERROR) and need no boundary (extension/NOTES.md, rule 1).
#include "rows/access_methods.hpp"

extern "C" {
#include "catalog/pg_aggregate.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_namespace.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/analyze.h"
#include "parser/parser.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteManip.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/ruleutils.h"
#include "utils/typcache.h"
}

namespace pgramp::immv {

namespace {

enum AggKind { kCount, kSum, kAvg, kMin, kMax };

struct AggInfo {
  Aggref* aggref;
  AggKind kind;
  bool star;
};

// One SELECT ... FROM ... WHERE whose rows, summed over the branches, are the query's input
// rows (outer joins give several; the others one).
struct Branch {
  Query* query;
  List* null_rtis;  // range-table indexes whose columns are NULL in this branch
};

struct ViewPlan {
  Query* original;  // as analyzed (the recomputation verify_immv compares with)
  Query* query;     // CTEs inlined, join aliases flattened (fill and recomputation read it)
  bool aggregate;
  bool distinct;
  bool has_minmax;
  List* group_exprs;  // Expr*, in GROUP BY order
  List* aggs;         // AggInfo*, each distinct Aggref once
  List* out_names;    // output column names (char*), non-junk target entries in order
  List* out_exprs;    // aggregate views: output expressions with Params for aggs / groups
  Node* having;       // aggregate views: HAVING with Params, or NULL
  List* branches;     // Branch*
  List* base_relids;  // the base tables (Oid), each once, in order of appearance
  List* serialize;    // per base table: 0, kSerializeTable, or a column (attnum > 0)
  ViewPlan* inner;    // nested aggregate: the aggregating subquery, the only FROM item
  int inner_rti;
};

constexpr int kAggParamBase = 10000;
constexpr int kGroupParamBase = 20000;
constexpr int kMaxOccurrences = 3;
// How writers of a base table wait for each other (ViewPlan::serialize): not at all (0), all
// of them (kSerializeTable), or those writing the same value of one column (its attnum).
constexpr int kSerializeTable = -1;

[[noreturn]] void Unsupported(const char* construct) {
  ereport(ERROR,
          (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
           errmsg("ramp.create_immv does not support %s", construct),
           errhint("Supported: selection, projection, inner and outer joins, self-joins, "
                   "subqueries in FROM and CTEs, EXISTS / NOT EXISTS / IN / NOT IN (subquery) "
                   "in WHERE, DISTINCT, count/sum/avg/min/max with GROUP BY and HAVING, "
                   "count(DISTINCT), over ramp tables.")));
}

template <typename F>
auto Walker(F f) {
  return reinterpret_cast<bool (*)()>(reinterpret_cast<void (*)()>(f));
}
template <typename F>
auto Mutator(F f) {
  return reinterpret_cast<Node* (*)()>(reinterpret_cast<void (*)()>(f));
}

const char* QualifiedName(Oid relid) {
  return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
                                    get_rel_name(relid));
}

// Constructs refused at every level of the query.
void CheckLevel(Query* q) {
  if (q->hasWindowFuncs) Unsupported("window functions");
  if (q->limitCount != nullptr || q->limitOffset != nullptr) Unsupported("LIMIT and OFFSET");
  if (q->hasTargetSRFs) Unsupported("set-returning functions");
  if (q->hasRecursive) Unsupported("WITH RECURSIVE");
  if (q->hasModifyingCTE) Unsupported("data-modifying statements");
  if (q->setOperations != nullptr) Unsupported("UNION, INTERSECT and EXCEPT");
  if (q->groupingSets != NIL) Unsupported("GROUPING SETS, ROLLUP and CUBE");
  if (q->rowMarks != NIL) Unsupported("FOR UPDATE and FOR SHARE");
  if (q->hasDistinctOn) Unsupported("DISTINCT ON");
}

void CheckRelation(RangeTblEntry* rte) {
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
}

// ---- normal form: CTEs inlined ----

struct CteContext {
  Query* top;
  int depth;
};

void InlineCtesIn(Query* q, CteContext* ctx);

bool InlineWalker(Node* node, void* arg) {
  if (node == nullptr) return false;
  auto* ctx = static_cast<CteContext*>(arg);
  if (IsA(node, Query)) {
    ++ctx->depth;
    InlineCtesIn(reinterpret_cast<Query*>(node), ctx);
    --ctx->depth;
    return false;
  }
  return expression_tree_walker(node, Walker(InlineWalker), arg);
}

void InlineCtesIn(Query* q, CteContext* ctx) {
  if (ctx->depth > 0 && q->cteList != NIL) Unsupported("WITH inside a subquery");
  ListCell* lc;
  foreach (lc, q->rtable) {
    auto* rte = static_cast<RangeTblEntry*>(lfirst(lc));
    if (rte->rtekind != RTE_CTE) continue;
    CommonTableExpr* cte = nullptr;
    ListCell* c;
    foreach (c, ctx->top->cteList) {
      auto* candidate = static_cast<CommonTableExpr*>(lfirst(c));
      if (strcmp(candidate->ctename, rte->ctename) == 0) cte = candidate;
    }
    if (cte == nullptr || rte->ctelevelsup != static_cast<Index>(ctx->depth)) {
      Unsupported("WITH inside a subquery");
    }
    if (cte->cterecursive) Unsupported("WITH RECURSIVE");
    auto* sub = reinterpret_cast<Query*>(copyObjectImpl(cte->ctequery));
    if (sub->commandType != CMD_SELECT) Unsupported("data-modifying statements in WITH");
    if (ctx->depth > 0) IncrementVarSublevelsUp(reinterpret_cast<Node*>(sub), ctx->depth, 1);
    if (rte->alias == nullptr) {
      rte->alias = makeAlias(rte->ctename, static_cast<List*>(copyObjectImpl(rte->eref->colnames)));
    }
    rte->rtekind = RTE_SUBQUERY;
    rte->subquery = sub;
    rte->security_barrier = false;
    rte->ctename = nullptr;
    rte->ctelevelsup = 0;
    rte->self_reference = false;
    rte->coltypes = NIL;
    rte->coltypmods = NIL;
    rte->colcollations = NIL;
  }
  query_tree_walker(q, Walker(InlineWalker), ctx, QTW_IGNORE_CTE_SUBQUERIES);
}

void InlineCtes(Query* q) {
  if (q->cteList == NIL) return;
  CteContext ctx{q, 0};
  InlineCtesIn(q, &ctx);
  q->cteList = NIL;
}

void FlattenJoinAliases(Query* q) {
  q->targetList =
      reinterpret_cast<List*>(flatten_join_alias_vars(q, reinterpret_cast<Node*>(q->targetList)));
  q->jointree =
      reinterpret_cast<FromExpr*>(flatten_join_alias_vars(q, reinterpret_cast<Node*>(q->jointree)));
  q->havingQual = flatten_join_alias_vars(q, q->havingQual);
}

// ---- the FROM tree ----

// The base-table entries reachable from the FROM tree of q (subqueries in FROM included, not
// subqueries in expressions), in a fixed order: the same for a copy of q.
void FromRelations(Query* q, Node* jt, List** out) {
  if (jt == nullptr) return;
  if (IsA(jt, FromExpr)) {
    ListCell* lc;
    foreach (lc, reinterpret_cast<FromExpr*>(jt)->fromlist) {
      FromRelations(q, static_cast<Node*>(lfirst(lc)), out);
    }
  } else if (IsA(jt, JoinExpr)) {
    FromRelations(q, reinterpret_cast<JoinExpr*>(jt)->larg, out);
    FromRelations(q, reinterpret_cast<JoinExpr*>(jt)->rarg, out);
  } else if (IsA(jt, RangeTblRef)) {
    RangeTblEntry* rte = rt_fetch(reinterpret_cast<RangeTblRef*>(jt)->rtindex, q->rtable);
    if (rte->rtekind == RTE_RELATION) {
      *out = lappend(*out, rte);
    } else if (rte->rtekind == RTE_SUBQUERY && rte->subquery != nullptr) {
      FromRelations(rte->subquery, reinterpret_cast<Node*>(rte->subquery->jointree), out);
    }
  }
}

List* Occurrences(Query* q, Oid relid) {
  List* all = NIL;
  FromRelations(q, reinterpret_cast<Node*>(q->jointree), &all);
  List* found = NIL;
  ListCell* lc;
  foreach (lc, all) {
    auto* rte = static_cast<RangeTblEntry*>(lfirst(lc));
    if (rte->relid == relid) found = lappend(found, rte);
  }
  return found;
}

// Makes a base-table entry read a transition table (ENR) or CTE of that name instead.
void ToTransition(RangeTblEntry* rte, const char* name) {
  if (rte->alias == nullptr) rte->alias = makeAlias(rte->eref->aliasname, NIL);
  rte->rtekind = RTE_CTE;
  rte->ctename = pstrdup(name);
  rte->ctelevelsup = 0;
  rte->self_reference = false;
  rte->relid = InvalidOid;
  rte->inh = false;
  rte->subquery = nullptr;
}

bool FindScalarSubLink(Node* node, void* arg) {
  if (node == nullptr) return false;
  if (IsA(node, SubLink) && reinterpret_cast<SubLink*>(node)->subLinkType == EXPR_SUBLINK) {
    *static_cast<bool*>(arg) = true;
    return true;
  }
  if (IsA(node, Query)) {
    return query_tree_walker(reinterpret_cast<Query*>(node), Walker(FindScalarSubLink), arg, 0);
  }
  return expression_tree_walker(node, Walker(FindScalarSubLink), arg);
}

// Checks the FROM tree of a level: ramp tables, inner joins (outer joins at the top level
// of a branch only), subqueries in FROM that neither aggregate nor filter with subqueries.
void CheckFrom(Query* q, Node* jt, bool outer_joins_ok) {
  if (jt == nullptr) return;
  if (IsA(jt, FromExpr)) {
    ListCell* lc;
    foreach (lc, reinterpret_cast<FromExpr*>(jt)->fromlist) {
      CheckFrom(q, static_cast<Node*>(lfirst(lc)), outer_joins_ok);
    }
    return;
  }
  if (IsA(jt, JoinExpr)) {
    auto* j = reinterpret_cast<JoinExpr*>(jt);
    if (j->jointype != JOIN_INNER && !outer_joins_ok) {
      Unsupported("outer joins inside a subquery in FROM or in WHERE");
    }
    if (j->jointype != JOIN_INNER && j->jointype != JOIN_LEFT && j->jointype != JOIN_RIGHT &&
        j->jointype != JOIN_FULL) {
      Unsupported("this kind of join");
    }
    if (checkExprHasSubLink(j->quals)) Unsupported("subqueries in JOIN ... ON");
    CheckFrom(q, j->larg, outer_joins_ok);
    CheckFrom(q, j->rarg, outer_joins_ok);
    return;
  }
  if (!IsA(jt, RangeTblRef)) Unsupported("this kind of FROM item");
  RangeTblEntry* rte = rt_fetch(reinterpret_cast<RangeTblRef*>(jt)->rtindex, q->rtable);
  switch (rte->rtekind) {
    case RTE_RELATION:
      CheckRelation(rte);
      return;
    case RTE_SUBQUERY: {
      Query* s = rte->subquery;
      CheckLevel(s);
      if (rte->lateral) Unsupported("LATERAL");
      if (s->hasAggs || s->groupClause != NIL || s->havingQual != nullptr) {
        Unsupported("aggregates in a subquery in FROM that is not the only FROM item");
      }
      if (s->distinctClause != NIL) {
        Unsupported("DISTINCT in a subquery in FROM that is not the only FROM item");
      }
      if (s->hasSubLinks) {
        bool scalar = false;
        query_tree_walker(s, Walker(FindScalarSubLink), &scalar, 0);
        Unsupported(scalar ? "scalar subqueries"
                           : "EXISTS and IN (subquery) inside a subquery in FROM");
      }
      FlattenJoinAliases(s);
      CheckFrom(s, reinterpret_cast<Node*>(s->jointree), false);
      return;
    }
    case RTE_FUNCTION:
      Unsupported("functions in FROM");
    case RTE_VALUES:
      Unsupported("VALUES in FROM");
    default:
      Unsupported("this kind of FROM item");
  }
}

// ---- subqueries in WHERE: EXISTS, NOT EXISTS, IN, NOT IN ----

const char* SubLinkName(SubLink* s) {
  switch (s->subLinkType) {
    case EXISTS_SUBLINK:
    case ANY_SUBLINK:
      return "EXISTS and IN (subquery) other than as an AND-ed condition of WHERE";
    case EXPR_SUBLINK:
      return "scalar subqueries";
    case ALL_SUBLINK:
      return "ALL (subquery)";
    case ARRAY_SUBLINK:
      return "ARRAY (subquery)";
    default:
      return "this kind of subquery in an expression";
  }
}

bool FindSubLink(Node* node, void* arg) {
  if (node == nullptr) return false;
  if (IsA(node, SubLink)) {
    *static_cast<SubLink**>(arg) = reinterpret_cast<SubLink*>(node);
    return true;
  }
  return expression_tree_walker(node, Walker(FindSubLink), arg);
}

[[noreturn]] void UnsupportedSubLink(Node* node) {
  SubLink* s = nullptr;
  FindSubLink(node, &s);
  Unsupported(s != nullptr ? SubLinkName(s) : "subqueries in expressions");
}

struct ParamSubst {
  List* tlist;
};

Node* SubstituteSubLinkParam(Node* node, void* arg) {
  if (node == nullptr) return nullptr;
  if (IsA(node, Param) && reinterpret_cast<Param*>(node)->paramkind == PARAM_SUBLINK) {
    auto* ctx = static_cast<ParamSubst*>(arg);
    auto* tle = static_cast<TargetEntry*>(
        list_nth(ctx->tlist, reinterpret_cast<Param*>(node)->paramid - 1));
    return static_cast<Node*>(copyObjectImpl(tle->expr));
  }
  return expression_tree_mutator(node, Mutator(SubstituteSubLinkParam), arg);
}

Node* NullTestOf(Node* arg) {
  NullTest* t = makeNode(NullTest);
  t->arg = reinterpret_cast<Expr*>(copyObjectImpl(arg));
  t->nulltesttype = IS_NULL;
  t->argisrow = false;
  t->location = -1;
  return reinterpret_cast<Node*>(t);
}

void AndQual(Query* s, Node* qual) {
  FromExpr* f = s->jointree;
  f->quals = f->quals == nullptr
                 ? qual
                 : reinterpret_cast<Node*>(makeBoolExpr(AND_EXPR, list_make2(f->quals, qual), -1));
}

// A subquery of EXISTS: reads ramp tables with inner joins, no aggregates, no subqueries.
void CheckWhereSubquery(Query* s) {
  CheckLevel(s);
  if (s->cteList != NIL) Unsupported("WITH inside a subquery");
  if (s->hasAggs || s->groupClause != NIL || s->havingQual != nullptr) {
    Unsupported("aggregates in a subquery in WHERE");
  }
  if (s->hasSubLinks) Unsupported("subqueries nested in a subquery in WHERE");
  s->distinctClause = NIL;  // EXISTS does not count rows
  s->sortClause = NIL;
  FlattenJoinAliases(s);
  ListCell* lc;
  foreach (lc, s->rtable) {
    auto* rte = static_cast<RangeTblEntry*>(lfirst(lc));
    if (rte->rtekind == RTE_SUBQUERY) Unsupported("subqueries in FROM of a subquery in WHERE");
  }
  CheckFrom(s, reinterpret_cast<Node*>(s->jointree), false);
}

SubLink* MakeExists(Query* s) {
  SubLink* l = makeNode(SubLink);
  l->subLinkType = EXISTS_SUBLINK;
  l->subLinkId = 0;
  l->subselect = reinterpret_cast<Node*>(s);
  l->location = -1;
  return l;
}

// An AND-ed condition of WHERE holding a subquery, as EXISTS (...) or NOT EXISTS (...).
Node* NormalizeSubLinkConjunct(Node* c) {
  bool anti = false;
  Node* e = c;
  if (is_notclause(e)) {
    anti = true;
    e = reinterpret_cast<Node*>(get_notclausearg(reinterpret_cast<Expr*>(e)));
  }
  if (!IsA(e, SubLink)) UnsupportedSubLink(c);
  auto* sl = reinterpret_cast<SubLink*>(e);
  auto* sub = reinterpret_cast<Query*>(copyObjectImpl(sl->subselect));
  if (sl->subLinkType == ANY_SUBLINK) {
    if (!IsA(sl->testexpr, OpExpr) ||
        list_length(reinterpret_cast<OpExpr*>(sl->testexpr)->args) != 2) {
      Unsupported("IN (subquery) of several columns");
    }
    if (sub->hasAggs || sub->groupClause != NIL) Unsupported("aggregates in a subquery in WHERE");
    Node* cond = static_cast<Node*>(copyObjectImpl(sl->testexpr));
    IncrementVarSublevelsUp(cond, 1, 0);
    ParamSubst ps{sub->targetList};
    cond = SubstituteSubLinkParam(cond, &ps);
    if (anti) {  // x NOT IN (ys): no y equals x, no y is NULL, x is not NULL (ys not empty)
      auto* op = reinterpret_cast<OpExpr*>(cond);
      cond = reinterpret_cast<Node*>(
          makeBoolExpr(OR_EXPR,
                       list_make3(cond, NullTestOf(static_cast<Node*>(linitial(op->args))),
                                  NullTestOf(static_cast<Node*>(lsecond(op->args)))),
                       -1));
    }
    AndQual(sub, cond);
  } else if (sl->subLinkType != EXISTS_SUBLINK) {
    Unsupported(SubLinkName(sl));
  }
  CheckWhereSubquery(sub);
  Node* exists = reinterpret_cast<Node*>(MakeExists(sub));
  return anti ? reinterpret_cast<Node*>(makeBoolExpr(NOT_EXPR, list_make1(exists), -1)) : exists;
}

// The EXISTS of an AND-ed condition EXISTS (...) or NOT EXISTS (...), or NULL.
SubLink* ExistsOf(Node* c, bool* anti) {
  *anti = false;
  if (is_notclause(c)) {
    *anti = true;
    c = reinterpret_cast<Node*>(get_notclausearg(reinterpret_cast<Expr*>(c)));
  }
  if (c != nullptr && IsA(c, SubLink) &&
      reinterpret_cast<SubLink*>(c)->subLinkType == EXISTS_SUBLINK) {
    return reinterpret_cast<SubLink*>(c);
  }
  return nullptr;
}

List* Conjuncts(Query* q) {
  if (q->jointree->quals == nullptr) return NIL;
  return list_copy(make_ands_implicit(reinterpret_cast<Expr*>(q->jointree->quals)));
}

void SetConjuncts(Query* q, List* conjuncts) {
  q->jointree->quals =
      conjuncts == NIL ? nullptr : reinterpret_cast<Node*>(make_ands_explicit(conjuncts));
}

// ---- outer joins: branches ----

JoinExpr* FirstOuterJoin(Node* jt) {
  if (jt == nullptr) return nullptr;
  if (IsA(jt, FromExpr)) {
    ListCell* lc;
    foreach (lc, reinterpret_cast<FromExpr*>(jt)->fromlist) {
      JoinExpr* j = FirstOuterJoin(static_cast<Node*>(lfirst(lc)));
      if (j != nullptr) return j;
    }
  } else if (IsA(jt, JoinExpr)) {
    auto* j = reinterpret_cast<JoinExpr*>(jt);
    if (j->jointype != JOIN_INNER) return j;
    JoinExpr* l = FirstOuterJoin(j->larg);
    return l != nullptr ? l : FirstOuterJoin(j->rarg);
  }
  return nullptr;
}

Node* ReplaceJoin(Node* jt, JoinExpr* target, Node* replacement) {
  if (jt == reinterpret_cast<Node*>(target)) return replacement;
  if (IsA(jt, FromExpr)) {
    ListCell* lc;
    foreach (lc, reinterpret_cast<FromExpr*>(jt)->fromlist) {
      lfirst(lc) = ReplaceJoin(static_cast<Node*>(lfirst(lc)), target, replacement);
    }
  } else if (IsA(jt, JoinExpr)) {
    auto* j = reinterpret_cast<JoinExpr*>(jt);
    j->larg = ReplaceJoin(j->larg, target, replacement);
    j->rarg = ReplaceJoin(j->rarg, target, replacement);
  }
  return jt;
}

struct LocalizeContext {
  int rti;
  int sublevels;
};

// Vars of range-table entry rti one level up become Vars of entry 1 of this level.
Node* LocalizeVars(Node* node, void* arg) {
  if (node == nullptr) return nullptr;
  auto* ctx = static_cast<LocalizeContext*>(arg);
  if (IsA(node, Var)) {
    auto* v = reinterpret_cast<Var*>(node);
    if (v->varno == ctx->rti && v->varlevelsup == static_cast<Index>(ctx->sublevels) + 1) {
      Var* n = static_cast<Var*>(copyObjectImpl(v));
      n->varno = 1;
      n->varnosyn = 1;
      n->varlevelsup = ctx->sublevels;
      return reinterpret_cast<Node*>(n);
    }
    return static_cast<Node*>(copyObjectImpl(node));
  }
  return expression_tree_mutator(node, Mutator(LocalizeVars), arg);
}

// The branch of an outer join where the nullable side (a single table, entry rti) has no
// partner: the join is replaced by its preserved side, WHERE gets NOT EXISTS (partner), and
// the nullable table's columns become NULL.
Branch* AntiBranch(Branch* b, bool nullable_right) {
  Query* q = static_cast<Query*>(copyObjectImpl(b->query));
  JoinExpr* j = FirstOuterJoin(reinterpret_cast<Node*>(q->jointree));
  Node* nullable = nullable_right ? j->rarg : j->larg;
  Node* kept = nullable_right ? j->larg : j->rarg;
  if (!IsA(nullable, RangeTblRef) ||
      rt_fetch(reinterpret_cast<RangeTblRef*>(nullable)->rtindex, q->rtable)->rtekind !=
          RTE_RELATION) {
    Unsupported("outer joins whose nullable side is not a single table");
  }
  const int rti = reinterpret_cast<RangeTblRef*>(nullable)->rtindex;
  Query* s = makeNode(Query);
  s->commandType = CMD_SELECT;
  s->querySource = QSRC_ORIGINAL;
  s->canSetTag = true;
  s->rtable = list_make1(copyObjectImpl(rt_fetch(rti, q->rtable)));
  RangeTblRef* ref = makeNode(RangeTblRef);
  ref->rtindex = 1;
  Node* quals = static_cast<Node*>(copyObjectImpl(j->quals));
  IncrementVarSublevelsUp(quals, 1, 0);
  LocalizeContext lctx{rti, 0};
  quals = LocalizeVars(quals, &lctx);
  s->jointree = makeFromExpr(list_make1(ref), quals);
  q->jointree =
      reinterpret_cast<FromExpr*>(ReplaceJoin(reinterpret_cast<Node*>(q->jointree), j, kept));
  // The join's entry is no longer in the FROM tree (the deparser expects every join entry
  // there): an empty RESULT entry in its place keeps the range-table indexes.
  if (j->rtindex > 0) rt_fetch(j->rtindex, q->rtable)->rtekind = RTE_RESULT;
  List* conjuncts = Conjuncts(q);
  conjuncts = lappend(conjuncts, makeBoolExpr(NOT_EXPR, list_make1(MakeExists(s)), -1));
  SetConjuncts(q, conjuncts);
  q->hasSubLinks = true;
  bool has_sublinks = false;
  q = reinterpret_cast<Query*>(
      ReplaceVarsFromTargetList(reinterpret_cast<Node*>(q), rti, 0, rt_fetch(rti, q->rtable), NIL,
                                REPLACEVARS_SUBSTITUTE_NULL, 0, &has_sublinks));
  auto* out = static_cast<Branch*>(palloc0(sizeof(Branch)));
  out->query = q;
  out->null_rtis = lappend_int(list_copy(b->null_rtis), rti);
  return out;
}

List* ExpandOuterJoins(Branch* first) {
  List* done = NIL;
  List* todo = list_make1(first);
  while (todo != NIL) {
    auto* b = static_cast<Branch*>(linitial(todo));
    todo = list_delete_first(todo);
    JoinExpr* j = FirstOuterJoin(reinterpret_cast<Node*>(b->query->jointree));
    if (j == nullptr) {
      done = lappend(done, b);
      continue;
    }
    const JoinType type = j->jointype;
    if (type == JOIN_LEFT || type == JOIN_FULL) todo = lappend(todo, AntiBranch(b, true));
    if (type == JOIN_RIGHT || type == JOIN_FULL) todo = lappend(todo, AntiBranch(b, false));
    j->jointype = JOIN_INNER;  // the matched rows
    todo = lappend(todo, b);
  }
  return done;
}
bool CollectAggs(Node* node, void* context) {
  if (node == nullptr) return false;
  auto* plan = static_cast<ViewPlan*>(context);
  if (IsA(node, Aggref)) {
    auto* aggref = reinterpret_cast<Aggref*>(node);
    if (aggref->aggdistinct != NIL)
      Unsupported("DISTINCT inside an aggregate");  // see RewriteCountDistinct
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

// ---- the view's analysis ----

bool IsAggregating(Query* s) {
  return s->hasAggs || s->groupClause != NIL || s->havingQual != nullptr ||
         s->distinctClause != NIL;
}

// Per branch, each base table: how often in FROM (k) and in subqueries of WHERE. A statement
// on a table is handled by inclusion-exclusion over its k occurrences in FROM, or as the
// one table of a subquery in WHERE it appears in; not both.
void AndArgs(Node* node, List** out) {
  if (node == nullptr) return;
  if (is_andclause(node)) {
    ListCell* lc;
    foreach (lc, reinterpret_cast<BoolExpr*>(node)->args)
      AndArgs(static_cast<Node*>(lfirst(lc)), out);
    return;
  }
  *out = lappend(*out, node);
}

// The column of relid (in the subquery s of an EXISTS) that an AND-ed condition of s equates
// with an expression of the outer query: a changed row of relid can only change the outer
// rows whose expression equals its value there. kSerializeTable when there is none.
int KeyColumn(Query* s, Oid relid) {
  int rti = 0;
  int i = 0;
  ListCell* lc;
  foreach (lc, s->rtable) {
    ++i;
    auto* rte = static_cast<RangeTblEntry*>(lfirst(lc));
    if (rte->rtekind == RTE_RELATION && rte->relid == relid) rti = i;
  }
  List* conjuncts = NIL;
  AndArgs(s->jointree->quals, &conjuncts);
  foreach (lc, conjuncts) {
    auto* node = static_cast<Node*>(lfirst(lc));
    if (!IsA(node, OpExpr) || list_length(reinterpret_cast<OpExpr*>(node)->args) != 2) continue;
    auto* op = reinterpret_cast<OpExpr*>(node);
    const Oid type = exprType(static_cast<Node*>(linitial(op->args)));
    if (!op_hashjoinable(op->opno, type) && !op_mergejoinable(op->opno, type)) continue;
    for (int side = 0; side < 2; ++side) {
      Node* mine = strip_implicit_coercions(static_cast<Node*>(list_nth(op->args, side)));
      Node* theirs = static_cast<Node*>(list_nth(op->args, 1 - side));
      if (IsA(mine, Var) && reinterpret_cast<Var*>(mine)->varno == rti &&
          reinterpret_cast<Var*>(mine)->varlevelsup == 0 &&
          reinterpret_cast<Var*>(mine)->varattno > 0 && !contain_vars_of_level(theirs, 0) &&
          OidIsValid(lookup_type_cache(reinterpret_cast<Var*>(mine)->vartype, TYPECACHE_HASH_PROC)
                         ->hash_proc)) {
        return reinterpret_cast<Var*>(mine)->varattno;
      }
    }
  }
  return kSerializeTable;
}

int MergeSerialize(int a, int b) {
  if (a == 0) return b;
  if (b == 0 || a == b) return a;
  return kSerializeTable;
}

void CollectBaseTables(ViewPlan* plan) {
  ListCell* bc;
  foreach (bc, plan->branches) {
    auto* b = static_cast<Branch*>(lfirst(bc));
    List* from = NIL;
    FromRelations(b->query, reinterpret_cast<Node*>(b->query->jointree), &from);
    List* in_where = NIL;
    List* subqueries = NIL;
    ListCell* lc;
    foreach (lc, Conjuncts(b->query)) {
      bool anti;
      SubLink* sl = ExistsOf(static_cast<Node*>(lfirst(lc)), &anti);
      if (sl == nullptr) continue;
      auto* s = reinterpret_cast<Query*>(sl->subselect);
      FromRelations(s, reinterpret_cast<Node*>(s->jointree), &in_where);
      subqueries = lappend(subqueries, s);
    }
    List* all = list_concat(list_copy(from), in_where);
    foreach (lc, all) {
      const Oid relid = static_cast<RangeTblEntry*>(lfirst(lc))->relid;
      int k_from = 0;
      int k_where = 0;
      ListCell* other;
      foreach (other, from) {
        if (static_cast<RangeTblEntry*>(lfirst(other))->relid == relid) ++k_from;
      }
      foreach (other, in_where) {
        if (static_cast<RangeTblEntry*>(lfirst(other))->relid == relid) ++k_where;
      }
      if (k_where > 0 && (k_where > 1 || k_from > 0)) {
        Unsupported("a table referenced both in a subquery in WHERE and elsewhere in the query");
      }
      if (k_from > kMaxOccurrences) Unsupported("a table referenced more than 3 times");
      int serialize = k_from > 1 ? kSerializeTable : 0;
      if (k_where > 0) {
        foreach (other, subqueries) {
          auto* s = static_cast<Query*>(lfirst(other));
          if (Occurrences(s, relid) != NIL) serialize = KeyColumn(s, relid);
        }
      }
      int i = 0;
      bool known = false;
      foreach (other, plan->base_relids) {
        if (lfirst_oid(other) == relid) {
          known = true;
          ListCell* cell = list_nth_cell(plan->serialize, i);
          cell->int_value = MergeSerialize(cell->int_value, serialize);
        }
        ++i;
      }
      if (!known) {
        plan->base_relids = lappend_oid(plan->base_relids, relid);
        plan->serialize = lappend_int(plan->serialize, serialize);
      }
    }
  }
}

void AnalyzeOutputs(ViewPlan* plan) {
  Query* q = plan->query;
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

void AnalyzeLevel(ViewPlan* plan, Query* q) {
  CheckLevel(q);
  if (q->cteList != NIL) Unsupported("WITH inside a subquery");
  FlattenJoinAliases(q);
  plan->query = q;
  FromExpr* f = q->jointree;
  if (list_length(f->fromlist) == 1 && IsA(linitial(f->fromlist), RangeTblRef)) {
    const int rti = static_cast<RangeTblRef*>(linitial(f->fromlist))->rtindex;
    RangeTblEntry* rte = rt_fetch(rti, q->rtable);
    if (rte->rtekind == RTE_SUBQUERY && IsAggregating(rte->subquery)) {
      // A nested aggregate: the subquery is maintained by groups (its rows before and after
      // a change), the query over it as a view over a table.
      if (rte->lateral) Unsupported("LATERAL");
      if (q->hasSubLinks) {
        UnsupportedSubLink(reinterpret_cast<Node*>(q));
      }
      auto* inner = static_cast<ViewPlan*>(palloc0(sizeof(ViewPlan)));
      AnalyzeLevel(inner, rte->subquery);
      if (inner->has_minmax) Unsupported("min and max in a subquery in FROM");
      if (inner->inner != nullptr) Unsupported("three levels of aggregation");
      plan->inner = inner;
      plan->inner_rti = rti;
      plan->base_relids = inner->base_relids;
      for (int i = 0; i < list_length(inner->base_relids); ++i) {
        plan->serialize = lappend_int(plan->serialize, kSerializeTable);
      }
      auto* b = static_cast<Branch*>(palloc0(sizeof(Branch)));
      b->query = q;
      plan->branches = list_make1(b);
      AnalyzeOutputs(plan);
      return;
    }
  }
  CheckFrom(q, reinterpret_cast<Node*>(q->jointree), true);
  if (checkExprHasSubLink(reinterpret_cast<Node*>(q->targetList))) {
    UnsupportedSubLink(reinterpret_cast<Node*>(q->targetList));
  }
  if (checkExprHasSubLink(q->havingQual)) UnsupportedSubLink(q->havingQual);
  Query* base = static_cast<Query*>(copyObjectImpl(q));
  List* conjuncts = NIL;
  ListCell* lc;
  foreach (lc, Conjuncts(base)) {
    auto* c = static_cast<Node*>(lfirst(lc));
    conjuncts = lappend(conjuncts, checkExprHasSubLink(c) ? NormalizeSubLinkConjunct(c) : c);
  }
  SetConjuncts(base, conjuncts);
  auto* b = static_cast<Branch*>(palloc0(sizeof(Branch)));
  b->query = base;
  plan->branches = ExpandOuterJoins(b);
  CollectBaseTables(plan);
  if (plan->base_relids == NIL) Unsupported("a query without a ramp table in FROM");
  AnalyzeOutputs(plan);
}

// count(DISTINCT x) (the query's only aggregate, maybe several times) becomes count(x) over
// SELECT DISTINCT <groups>, x: a nested aggregate. Returns the rewritten query, or NULL.
struct DistinctSearch {
  Aggref* found;
  bool others;
};

bool FindDistinctAggs(Node* node, void* arg) {
  if (node == nullptr) return false;
  auto* ctx = static_cast<DistinctSearch*>(arg);
  if (IsA(node, Aggref)) {
    auto* a = reinterpret_cast<Aggref*>(node);
    if (a->aggdistinct == NIL) {
      ctx->others = true;
    } else if (ctx->found == nullptr) {
      ctx->found = a;
    } else if (!equal(ctx->found, a)) {
      ctx->others = true;
    }
    return false;
  }
  return expression_tree_walker(node, Walker(FindDistinctAggs), arg);
}

struct DistinctRewrite {
  List* groups;
  Aggref* agg;
};

Node* DistinctToParams(Node* node, void* arg) {
  if (node == nullptr) return nullptr;
  auto* ctx = static_cast<DistinctRewrite*>(arg);
  int i = 0;
  ListCell* lc;
  foreach (lc, ctx->groups) {
    ++i;
    if (equal(node, lfirst(lc))) {
      return reinterpret_cast<Node*>(MakeParam(kGroupParamBase + i, node));
    }
  }
  if (equal(node, ctx->agg)) return reinterpret_cast<Node*>(MakeParam(kAggParamBase + 1, node));
  return expression_tree_mutator(node, Mutator(DistinctToParams), arg);
}

// Deparsed text with the group and aggregate Params ($n above kGroupParamBase and
// kAggParamBase) replaced by what `replace` appends; other Params stay as they are.
template <typename Replace>
char* SubstituteParams(const char* text, Replace replace) {
  StringInfoData s;
  initStringInfo(&s);
  for (const char* p = text; *p != '\0';) {
    if (*p == '$' && isdigit(static_cast<unsigned char>(p[1]))) {
      char* end;
      const long id = strtol(p + 1, &end, 10);
      if (id > kAggParamBase) {
        replace(&s, id);
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

char* ParamsToColumns(const char* text) {
  return SubstituteParams(text, [](StringInfo s, long id) {
    if (id > kGroupParamBase) {
      appendStringInfo(s, "__ramp_distinct.__dg%ld", id - kGroupParamBase);
    } else {
      appendStringInfoString(s, "count(__ramp_distinct.__dx)");
    }
  });
}

char* RewriteCountDistinct(Query* q) {
  DistinctSearch search{nullptr, false};
  ListCell* lc;
  foreach (lc, q->targetList) {
    FindDistinctAggs(reinterpret_cast<Node*>(static_cast<TargetEntry*>(lfirst(lc))->expr), &search);
  }
  FindDistinctAggs(q->havingQual, &search);
  if (search.found == nullptr) return nullptr;
  Aggref* agg = search.found;
  const char* name = get_func_name(agg->aggfnoid);
  if (search.others) Unsupported("DISTINCT inside an aggregate together with other aggregates");
  if (name == nullptr || strcmp(name, "count") != 0 ||
      get_func_namespace(agg->aggfnoid) != PG_CATALOG_NAMESPACE || list_length(agg->args) != 1) {
    Unsupported("DISTINCT inside an aggregate other than count(DISTINCT x)");
  }
  if (agg->aggorder != NIL && list_length(agg->aggorder) != list_length(agg->aggdistinct)) {
    Unsupported("ORDER BY inside an aggregate");
  }
  if (agg->aggfilter != nullptr) Unsupported("FILTER on an aggregate");
  if (agg->agglevelsup != 0) Unsupported("outer-level aggregates");
  if (q->distinctClause != NIL) Unsupported("DISTINCT together with aggregates");
  FlattenJoinAliases(q);
  DistinctRewrite ctx{NIL, agg};
  foreach (lc, q->groupClause) {
    ctx.groups = lappend(ctx.groups, get_sortgroupclause_expr(
                                         static_cast<SortGroupClause*>(lfirst(lc)), q->targetList));
  }
  // The inner SELECT DISTINCT: the query without aggregation, its groups and x.
  Query* inner = static_cast<Query*>(copyObjectImpl(q));
  List* tlist = NIL;
  int i = 0;
  foreach (lc, ctx.groups) {
    ++i;
    tlist = lappend(tlist, makeTargetEntry(static_cast<Expr*>(copyObjectImpl(lfirst(lc))), i,
                                           psprintf("__dg%d", i), false));
  }
  tlist = lappend(tlist, makeTargetEntry(static_cast<Expr*>(copyObjectImpl(
                                             static_cast<TargetEntry*>(linitial(agg->args))->expr)),
                                         i + 1, pstrdup("__dx"), false));
  inner->targetList = tlist;
  inner->hasAggs = false;
  inner->groupClause = NIL;
  inner->havingQual = nullptr;
  inner->sortClause = NIL;
  const char* inner_sql = pg_get_querydef(inner, false);
  while (*inner_sql == ' ' || *inner_sql == '\n') ++inner_sql;
  if (strncmp(inner_sql, "SELECT ", 7) != 0) Unsupported("this form of count(DISTINCT)");
  StringInfoData s;
  initStringInfo(&s);
  appendStringInfoString(&s, "SELECT ");
  i = 0;
  foreach (lc, q->targetList) {
    auto* tle = static_cast<TargetEntry*>(lfirst(lc));
    if (tle->resjunk) continue;
    Node* e = DistinctToParams(static_cast<Node*>(copyObjectImpl(tle->expr)), &ctx);
    appendStringInfo(&s, "%s%s AS %s", i++ > 0 ? ", " : "",
                     ParamsToColumns(deparse_expression(e, NIL, false, false)),
                     quote_identifier(tle->resname != nullptr ? tle->resname : "?column?"));
  }
  appendStringInfo(&s, " FROM (SELECT DISTINCT %s) __ramp_distinct", inner_sql + 7);
  for (int g = 1; g <= list_length(ctx.groups); ++g) {
    appendStringInfo(&s, "%s__ramp_distinct.__dg%d", g == 1 ? " GROUP BY " : ", ", g);
  }
  if (q->havingQual != nullptr) {
    Node* e = DistinctToParams(static_cast<Node*>(copyObjectImpl(q->havingQual)), &ctx);
    appendStringInfo(&s, " HAVING %s", ParamsToColumns(deparse_expression(e, NIL, false, false)));
  }
  return s.data;
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
  if (q->commandType != CMD_SELECT || q->utilityStmt != nullptr) {
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("ramp.create_immv needs a SELECT statement")));
  }
  CheckLevel(q);
  if (contain_volatile_functions(reinterpret_cast<Node*>(q))) Unsupported("volatile functions");
  if (plan->original == nullptr) plan->original = static_cast<Query*>(copyObjectImpl(q));
  InlineCtes(q);
  const char* rewritten = RewriteCountDistinct(q);
  if (rewritten != nullptr) {
    AnalyzeQuery(plan, rewritten);
    return;
  }
  AnalyzeLevel(plan, q);
}

// ---- the SQL ----

// Vars of the branch's NULL side replaced by NULLs.
Node* NullOut(const ViewPlan* plan, const Branch* b, Node* expr) {
  expr = static_cast<Node*>(copyObjectImpl(expr));
  ListCell* lc;
  foreach (lc, b->null_rtis) {
    const int rti = lfirst_int(lc);
    bool has_sublinks = false;
    expr = ReplaceVarsFromTargetList(expr, rti, 0, rt_fetch(rti, plan->query->rtable), NIL,
                                     REPLACEVARS_SUBSTITUTE_NULL, 0, &has_sublinks);
  }
  return expr;
}

// The FROM and WHERE of r (a copy of a branch's query, maybe reading transition tables),
// with one row per input row and the columns the log needs: aggregate views the GROUP BY
// expressions (__g1..) and aggregate arguments (__a1..), other views the output columns;
// extra target entries first.
char* RowQuery(const ViewPlan* plan, const Branch* b, Query* r, List* extra) {
  List* tlist = NIL;
  int resno = 0;
  ListCell* lc;
  foreach (lc, extra) {
    auto* tle = static_cast<TargetEntry*>(lfirst(lc));
    tle->resno = ++resno;
    tlist = lappend(tlist, tle);
  }
  if (plan->aggregate) {
    int i = 0;
    foreach (lc, plan->group_exprs) {
      ++i;
      tlist = lappend(
          tlist,
          makeTargetEntry(reinterpret_cast<Expr*>(NullOut(plan, b, static_cast<Node*>(lfirst(lc)))),
                          ++resno, psprintf("__g%d", i), false));
    }
    int j = 0;
    foreach (lc, plan->aggs) {
      ++j;
      auto* agg = static_cast<AggInfo*>(lfirst(lc));
      if (agg->star) continue;
      auto* arg = static_cast<TargetEntry*>(linitial(agg->aggref->args));
      tlist = lappend(tlist, makeTargetEntry(reinterpret_cast<Expr*>(NullOut(
                                                 plan, b, reinterpret_cast<Node*>(arg->expr))),
                                             ++resno, psprintf("__a%d", j), false));
    }
  } else {
    int k = 0;
    foreach (lc, r->targetList) {
      auto* tle = static_cast<TargetEntry*>(lfirst(lc));
      if (tle->resjunk) continue;
      const char* name = static_cast<char*>(list_nth(plan->out_names, k++));
      tlist = lappend(tlist, makeTargetEntry(tle->expr, ++resno, pstrdup(name), false));
    }
  }
  r->targetList = tlist;
  r->hasAggs = false;
  r->groupClause = NIL;
  r->havingQual = nullptr;
  r->distinctClause = NIL;
  r->hasDistinctOn = false;
  r->sortClause = NIL;
  return pg_get_querydef(r, false);
}

// The names of the columns RowQuery gives (after its extra entries).
void ColumnList(StringInfo s, const ViewPlan* plan, const char* prefix) {
  if (plan->aggregate) {
    int i;
    for (i = 1; i <= list_length(plan->group_exprs); ++i) {
      appendStringInfo(s, "%s%s__g%d", i > 1 ? ", " : "", prefix, i);
    }
    int j = 0;
    ListCell* lc;
    foreach (lc, plan->aggs) {
      ++j;
      if (static_cast<AggInfo*>(lfirst(lc))->star) continue;
      appendStringInfo(s, "%s%s__a%d", i++ > 1 ? ", " : "", prefix, j);
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

// Every input row of the query, with sign +1.
char* FullSource(const ViewPlan* plan) {
  Branch whole{plan->query, NIL};
  return psprintf("(SELECT 1 AS __ramp_sign, n.* FROM (%s) n)",
                  RowQuery(plan, &whole, static_cast<Query*>(copyObjectImpl(plan->query)), NIL));
}

void AppendTerm(StringInfo s, const char* term) {
  if (s->len > 0) appendStringInfoString(s, " UNION ALL ");
  appendStringInfoString(s, term);
}

Node* CountOf(Query* s) {
  Aggref* a = makeNode(Aggref);
  a->aggfnoid = F_COUNT_;
  a->aggtype = INT8OID;
  a->aggstar = true;
  a->aggkind = AGGKIND_NORMAL;
  a->aggsplit = AGGSPLIT_SIMPLE;
  a->location = -1;
  s->targetList =
      list_make1(makeTargetEntry(reinterpret_cast<Expr*>(a), 1, pstrdup("count"), false));
  s->hasAggs = true;
  SubLink* l = makeNode(SubLink);
  l->subLinkType = EXPR_SUBLINK;
  l->subselect = reinterpret_cast<Node*>(s);
  l->location = -1;
  return reinterpret_cast<Node*>(l);
}

Query* Variant(Query* sub, Oid relid, const char* transition) {
  auto* s = static_cast<Query*>(copyObjectImpl(sub));
  if (transition != nullptr) {
    ListCell* lc;
    foreach (lc, Occurrences(s, relid))
      ToTransition(static_cast<RangeTblEntry*>(lfirst(lc)), transition);
  }
  return s;
}

// The signed input rows of branch b for a statement on relid that is the table of the
// subquery in the AND-ed condition ci (EXISTS or NOT EXISTS) of WHERE: the outer rows whose
// subquery matches a transition row, +1 where the condition became true, -1 where it became
// false. Matching rows before = now - new + old.
void SubLinkTerm(const ViewPlan* plan, const Branch* b, int ci, Oid relid, bool has_new,
                 bool has_old, StringInfo out) {
  Query* c = static_cast<Query*>(copyObjectImpl(b->query));
  List* conjuncts = Conjuncts(c);
  bool anti;
  SubLink* sl = ExistsOf(static_cast<Node*>(list_nth(conjuncts, ci)), &anti);
  auto* sub = reinterpret_cast<Query*>(sl->subselect);
  // The outer rows a transition row matches: one EXISTS over an UPDATE's old and new rows
  // together (__ramp_both, registered by the trigger) rather than EXISTS (new) OR EXISTS
  // (old), which the planner can only check row by row over the whole outer table.
  const char* touched = has_new && has_old ? "__ramp_both" : has_new ? "__ramp_new" : "__ramp_old";
  list_nth_cell(conjuncts, ci)->ptr_value = MakeExists(Variant(sub, relid, touched));
  SetConjuncts(c, conjuncts);
  Const* zero = makeConst(INT8OID, -1, InvalidOid, 8, Int64GetDatum(0), false, FLOAT8PASSBYVAL);
  List* extra = list_make3(
      makeTargetEntry(reinterpret_cast<Expr*>(CountOf(Variant(sub, relid, nullptr))), 0,
                      pstrdup("__ramp_cn"), false),
      makeTargetEntry(reinterpret_cast<Expr*>(has_new ? CountOf(Variant(sub, relid, "__ramp_new"))
                                                      : reinterpret_cast<Node*>(zero)),
                      0, pstrdup("__ramp_cw"), false),
      makeTargetEntry(reinterpret_cast<Expr*>(has_old ? CountOf(Variant(sub, relid, "__ramp_old"))
                                                      : copyObjectImpl(zero)),
                      0, pstrdup("__ramp_co"), false));
  const char* rows = RowQuery(plan, b, c, extra);
  const char* before = "(t.__ramp_cn - t.__ramp_cw + t.__ramp_co)";
  const char* now_in = anti ? "t.__ramp_cn = 0" : "t.__ramp_cn > 0";
  const char* before_in = psprintf(anti ? "%s = 0" : "%s > 0", before);
  StringInfoData cols;
  initStringInfo(&cols);
  ColumnList(&cols, plan, "t.");
  AppendTerm(out, psprintf("SELECT s.* FROM (SELECT CASE WHEN (%s) AND NOT (%s) THEN 1 "
                           "WHEN (%s) AND NOT (%s) THEN -1 ELSE 0 END AS __ramp_sign, %s "
                           "FROM (%s) t) s WHERE s.__ramp_sign <> 0",
                           now_in, before_in, before_in, now_in, cols.data, rows));
}

// The signed input rows of a flat plan for a statement on relid (new and/or old transition
// rows). *may_remove: some rows may have sign -1.
char* DeltaTerms(const ViewPlan* plan, Oid relid, bool has_new, bool has_old, bool* may_remove) {
  StringInfoData out;
  initStringInfo(&out);
  *may_remove = has_old;
  ListCell* bc;
  foreach (bc, plan->branches) {
    auto* b = static_cast<Branch*>(lfirst(bc));
    const int k = list_length(Occurrences(b->query, relid));
    if (k > 0) {
      // Q(T') - Q(T' - D) over the k occurrences of T: every non-empty subset of them reads
      // D (new rows +1, old rows -1), the others T as it is now, with sign (-1)^(|S|+1).
      int total = 1;
      for (int i = 0; i < k; ++i) total *= 3;
      for (int code = 1; code < total; ++code) {
        int digits[kMaxOccurrences];
        bool valid = true;
        int chosen = 0;
        int olds = 0;
        for (int i = 0, rest = code; i < k; ++i, rest /= 3) {
          digits[i] = rest % 3;
          if ((digits[i] == 1 && !has_new) || (digits[i] == 2 && !has_old)) valid = false;
          if (digits[i] != 0) ++chosen;
          if (digits[i] == 2) ++olds;
        }
        if (!valid) continue;
        Query* c = static_cast<Query*>(copyObjectImpl(b->query));
        List* occurrences = Occurrences(c, relid);
        for (int i = 0; i < k; ++i) {
          if (digits[i] != 0) {
            ToTransition(static_cast<RangeTblEntry*>(list_nth(occurrences, i)),
                         digits[i] == 1 ? "__ramp_new" : "__ramp_old");
          }
        }
        const int sign = (chosen % 2 == 1 ? 1 : -1) * (olds % 2 == 1 ? -1 : 1);
        if (sign < 0) *may_remove = true;
        AppendTerm(&out, psprintf("SELECT %d AS __ramp_sign, t.* FROM (%s) t", sign,
                                  RowQuery(plan, b, c, NIL)));
      }
      continue;
    }
    int ci = 0;
    ListCell* lc;
    foreach (lc, Conjuncts(b->query)) {
      bool anti;
      SubLink* sl = ExistsOf(static_cast<Node*>(lfirst(lc)), &anti);
      if (sl != nullptr && Occurrences(reinterpret_cast<Query*>(sl->subselect), relid) != NIL) {
        SubLinkTerm(plan, b, ci, relid, has_new, has_old, &out);
        *may_remove = true;
      }
      ++ci;
    }
  }
  if (out.len == 0) elog(ERROR, "ramp.create_immv: table %u is not in the query", relid);
  return out.data;
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

// What LogRows sums: signed input rows (__ramp_sign, the aggregates' arguments __aN), or log
// rows (__ramp_cnt, __cN, __sN, __mN: a compaction merges them into fewer with the same totals).
enum class RowsOf { kInput, kLog };

// SELECT of log rows, per group, from rows of the source (aliased d), optionally filtered.
char* LogRows(const ViewPlan* plan, const char* source, const char* where,
              RowsOf of = RowsOf::kInput) {
  const bool input = of == RowsOf::kInput;
  StringInfoData s;
  initStringInfo(&s);
  appendStringInfoString(&s, "SELECT ");
  const bool grouped = !plan->aggregate || plan->group_exprs != NIL;
  if (grouped) {
    GroupList(&s, plan, "d.");
    appendStringInfoString(&s, ", ");
  }
  const char* count = input ? "sum(d.__ramp_sign)::bigint" : "sum(d.__ramp_cnt)::bigint";
  appendStringInfo(&s, "%s AS __ramp_cnt", count);
  int j = 0;
  ListCell* lc;
  foreach (lc, plan->aggs) {
    ++j;
    auto* agg = static_cast<AggInfo*>(lfirst(lc));
    // Non-null inputs (count(*): all rows), as a signed count.
    const char* nonnull =
        !input ? psprintf("sum(d.__c%d)::bigint", j)
        : agg->star
            ? count
            : psprintf("sum(CASE WHEN d.__a%d IS NULL THEN 0 ELSE d.__ramp_sign END)::bigint", j);
    switch (agg->kind) {
      case kCount:
        appendStringInfo(&s, ", %s AS __c%d", nonnull, j);
        break;
      case kSum:
      case kAvg: {
        appendStringInfo(&s, ", %s AS __c%d", nonnull, j);
        const char* cast =
            agg->kind == kAvg ? psprintf("::%s", format_type_be(agg->aggref->aggtype)) : "";
        if (input) {
          appendStringInfo(
              &s, ", sum((CASE WHEN d.__ramp_sign > 0 THEN d.__a%d ELSE -d.__a%d END)%s) AS __s%d",
              j, j, cast, j);
        } else {
          appendStringInfo(&s, ", sum(d.__s%d) AS __s%d", j, j);
        }
        break;
      }
      case kMin:
      case kMax:
        appendStringInfo(&s,
                         input ? ", %s(d.__a%d) FILTER (WHERE d.__ramp_sign > 0) AS __m%d"
                               : ", %s(d.__m%d) AS __m%d",
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
  if (input) {
    appendStringInfoString(
        &s, plan->aggregate ? " HAVING count(*) > 0" : " HAVING sum(d.__ramp_sign) <> 0");
  } else if (grouped) {
    appendStringInfoString(&s, " HAVING sum(d.__ramp_cnt) <> 0");
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
  return SubstituteParams(deparse_expression(expr, NIL, false, false), [&](StringInfo s, long id) {
    if (id > kGroupParamBase) {
      appendStringInfo(s, "__g%ld", id - kGroupParamBase);
    } else {
      const int j = static_cast<int>(id - kAggParamBase);
      appendStringInfo(s, "(%s)",
                       MergedAggregate(static_cast<AggInfo*>(list_nth(plan->aggs, j - 1)), j));
    }
  });
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

// The group (or output row) columns of the log, by name.
List* GroupColumns(const ViewPlan* plan) {
  List* out = NIL;
  if (plan->aggregate) {
    for (int i = 1; i <= list_length(plan->group_exprs); ++i)
      out = lappend(out, psprintf("__g%d", i));
  } else {
    ListCell* lc;
    foreach (lc, plan->out_names) {
      out = lappend(out, pstrdup(quote_identifier(static_cast<char*>(lfirst(lc)))));
    }
  }
  return out;
}

// r.<g> IS NOT DISTINCT FROM x.<g> AND ... (true without groups).
char* SameGroup(const ViewPlan* plan, const char* x) {
  StringInfoData s;
  initStringInfo(&s);
  appendStringInfoString(&s, "true");
  ListCell* lc;
  foreach (lc, GroupColumns(plan)) {
    const char* g = static_cast<char*>(lfirst(lc));
    appendStringInfo(&s, " AND r.%s IS NOT DISTINCT FROM %s.%s", g, x, g);
  }
  return s.data;
}

// The rows of full (a source of signed input rows) whose group is in keys (a CTE with the
// group columns): with = for groups without NULLs (a semi-join the planner can run as index
// lookups per key), IS NOT DISTINCT FROM for the others (a branch that runs only if keys
// holds a group with a NULL).
char* KeyedSource(const ViewPlan* plan, const char* full, const char* keys) {
  List* groups = GroupColumns(plan);
  if (groups == NIL) {
    return psprintf("(SELECT d.* FROM %s d WHERE EXISTS (SELECT 1 FROM %s))", full, keys);
  }
  StringInfoData d_cols, r_cols, d_null, r_null;
  initStringInfo(&d_cols);
  initStringInfo(&r_cols);
  initStringInfo(&d_null);
  initStringInfo(&r_null);
  int i = 0;
  ListCell* lc;
  foreach (lc, groups) {
    const char* g = static_cast<char*>(lfirst(lc));
    const char* sep = i++ > 0 ? ", " : "";
    const char* or_sep = i > 1 ? " OR " : "";
    appendStringInfo(&d_cols, "%sd.%s", sep, g);
    appendStringInfo(&r_cols, "%sr.%s", sep, g);
    appendStringInfo(&d_null, "%sd.%s IS NULL", or_sep, g);
    appendStringInfo(&r_null, "%sr.%s IS NULL", or_sep, g);
  }
  return psprintf(
      "(SELECT d.* FROM %s d WHERE (%s) IN (SELECT %s FROM %s r) UNION ALL "
      "SELECT d.* FROM %s d WHERE EXISTS (SELECT 1 FROM %s r WHERE %s) AND (%s) "
      "AND EXISTS (SELECT 1 FROM %s r WHERE %s))",
      full, d_cols.data, r_cols.data, keys, full, keys, r_null.data, d_null.data, keys,
      SameGroup(plan, "d"));
}

// The statement run after a statement on a base table: WITH [prefix,] __ramp_d (the signed
// input rows) the log gets their contributions. With min/max, groups that lost rows are
// recomputed from the base tables instead (their log rows replaced by one), in the same
// statement, so the log rows it removes and the base rows it reads come from the same
// snapshot. With only_reached, a group is recomputed only when a removed row's value
// reaches the group's extremum in the log (>= its max, <= its min, or the log has none):
// a removed value below the max leaves the max as it is. That is safe only because the
// writers removing rows of one group then wait for each other (GroupLocks: they take an
// intent per group before this statement, whose snapshot comes after the wait), so a
// skipping writer never decides on a max that a concurrent recomputation is replacing.
char* Maintenance(const ViewPlan* plan, const char* log, const char* prefix, const char* source,
                  bool may_remove, const char* full, bool only_reached = false) {
  StringInfoData s;
  initStringInfo(&s);
  appendStringInfoString(&s, "WITH ");
  if (prefix != nullptr) appendStringInfo(&s, "%s, ", prefix);
  appendStringInfo(&s, "__ramp_d AS (SELECT * FROM (%s) __ramp_src)", source);
  if (!plan->has_minmax || !may_remove) {
    appendStringInfo(&s, " INSERT INTO %s %s", log, LogRows(plan, "__ramp_d", nullptr));
    return s.data;
  }
  ListCell* lc;
  if (only_reached) {
    // The log's extremum of each group that lost rows (__ramp_x), then the groups where a
    // removed value reaches it (or where the log has no extremum for a non-null value).
    appendStringInfoString(&s, ", __ramp_rm AS (SELECT DISTINCT 1 AS __ramp_one");
    foreach (lc, GroupColumns(plan)) appendStringInfo(&s, ", o.%s", static_cast<char*>(lfirst(lc)));
    appendStringInfoString(&s, " FROM __ramp_d o WHERE o.__ramp_sign < 0), ");
    appendStringInfoString(&s, "__ramp_x AS (SELECT 1 AS __ramp_one");
    foreach (lc, GroupColumns(plan)) appendStringInfo(&s, ", l.%s", static_cast<char*>(lfirst(lc)));
    StringInfoData reached;
    initStringInfo(&reached);
    appendStringInfoString(&reached, "false");
    int j = 0;
    foreach (lc, plan->aggs) {
      ++j;
      const AggKind kind = static_cast<AggInfo*>(lfirst(lc))->kind;
      if (kind != kMin && kind != kMax) continue;
      appendStringInfo(&s, ", %s(l.__m%d) AS __x%d", kind == kMin ? "min" : "max", j, j);
      appendStringInfo(&reached, " OR COALESCE(o.__a%d %s r.__x%d, o.__a%d IS NOT NULL)", j,
                       kind == kMin ? "<=" : ">=", j, j);
    }
    appendStringInfo(&s, " FROM %s l WHERE EXISTS (SELECT 1 FROM __ramp_rm r WHERE %s)", log,
                     SameGroup(plan, "l"));
    if (GroupColumns(plan) != NIL) {
      appendStringInfoString(&s, " GROUP BY ");
      const char* sep = "";
      foreach (lc, GroupColumns(plan)) {
        appendStringInfo(&s, "%sl.%s", sep, static_cast<char*>(lfirst(lc)));
        sep = ", ";
      }
    }
    appendStringInfoString(&s, "), __ramp_rc AS (SELECT DISTINCT 1 AS __ramp_one");
    foreach (lc, GroupColumns(plan)) appendStringInfo(&s, ", o.%s", static_cast<char*>(lfirst(lc)));
    appendStringInfo(&s,
                     " FROM __ramp_d o LEFT JOIN __ramp_x r ON %s WHERE o.__ramp_sign < 0 AND "
                     "(%s)), ",
                     SameGroup(plan, "o"), reached.data);
  } else {
    appendStringInfoString(&s, ", __ramp_rc AS (SELECT DISTINCT 1 AS __ramp_one");
    foreach (lc, GroupColumns(plan)) appendStringInfo(&s, ", o.%s", static_cast<char*>(lfirst(lc)));
    appendStringInfoString(&s, " FROM __ramp_d o WHERE o.__ramp_sign < 0), ");
  }
  // With only_reached, one DELETE takes the log rows of every group that lost rows: those
  // recomputed (__ramp_rc) and those merged below (__ramp_cg), which it returns.
  appendStringInfo(&s,
                   "__ramp_gone AS (DELETE FROM %s l WHERE EXISTS (SELECT 1 FROM %s r "
                   "WHERE %s)%s), ",
                   log, only_reached ? "__ramp_rm" : "__ramp_rc", SameGroup(plan, "l"),
                   only_reached ? " RETURNING l.*" : "");
  appendStringInfo(&s, "__ramp_redo AS (INSERT INTO %s %s) ", log,
                   LogRows(plan, KeyedSource(plan, full, "__ramp_rc"), nullptr));
  const char* not_recomputed =
      psprintf("NOT EXISTS (SELECT 1 FROM __ramp_rc r WHERE %s)", SameGroup(plan, "d"));
  if (only_reached) {
    // The other groups that lost rows (__ramp_cg) are compacted instead: their log rows
    // and the statement's rows become one log row. Their removers wait for each other, as
    // above; rows that concurrent inserters append are not visible here, so they stay.
    // This keeps the log of a min/max view about as small as recomputing every group did.
    appendStringInfo(&s,
                     ", __ramp_cg AS (SELECT m.* FROM __ramp_rm m WHERE NOT EXISTS (SELECT 1 "
                     "FROM __ramp_rc r WHERE %s)), ",
                     SameGroup(plan, "m"));
    const char* in_cg =
        psprintf("EXISTS (SELECT 1 FROM __ramp_cg r WHERE %s)", SameGroup(plan, "d"));
    appendStringInfo(
        &s, "__ramp_merged AS (INSERT INTO %s %s) ", log,
        LogRows(plan,
                psprintf("(SELECT g.* FROM __ramp_gone g WHERE EXISTS (SELECT 1 FROM __ramp_cg r "
                         "WHERE %s) UNION ALL %s)",
                         SameGroup(plan, "g"), LogRows(plan, "__ramp_d", in_cg)),
                nullptr, RowsOf::kLog));
    not_recomputed = psprintf("%s AND NOT %s", not_recomputed, in_cg);
  }
  appendStringInfo(&s, "INSERT INTO %s %s", log, LogRows(plan, "__ramp_d", not_recomputed));
  return s.data;
}

// A nested aggregate: the CTEs giving the inner query's rows of the groups a statement on
// relid touched, before (__ramp_before) and after it (__ramp_after). After: the inner
// query's contributions of those groups now (__ramp_inow); before: the same minus the
// statement's contributions (__ramp_idd). Only count, sum and avg (invertible) inside.
char* NestedCtes(const ViewPlan* plan, Oid relid, bool has_new, bool has_old) {
  const ViewPlan* inner = plan->inner;
  bool may_remove;
  const char* delta = DeltaTerms(inner, relid, has_new, has_old, &may_remove);
  StringInfoData s;
  initStringInfo(&s);
  appendStringInfo(&s, "__ramp_id AS (SELECT * FROM (%s) __ramp_src), ", delta);
  appendStringInfoString(&s, "__ramp_ik AS (SELECT DISTINCT 1 AS __ramp_one");
  ListCell* lc;
  foreach (lc, GroupColumns(inner)) appendStringInfo(&s, ", d.%s", static_cast<char*>(lfirst(lc)));
  appendStringInfoString(&s, " FROM __ramp_id d), ");
  appendStringInfo(&s, "__ramp_inow AS (%s), ",
                   LogRows(inner, KeyedSource(inner, FullSource(inner), "__ramp_ik"), nullptr));
  appendStringInfo(&s, "__ramp_idd AS (%s), ", LogRows(inner, "__ramp_id", nullptr));
  StringInfoData neg;
  initStringInfo(&neg);
  foreach (lc, GroupColumns(inner)) appendStringInfo(&neg, "%s, ", static_cast<char*>(lfirst(lc)));
  appendStringInfoString(&neg, "-__ramp_cnt");
  int j = 0;
  foreach (lc, inner->aggs) {
    ++j;
    const AggKind kind = static_cast<AggInfo*>(lfirst(lc))->kind;
    appendStringInfo(&neg, ", -__c%d", j);
    if (kind == kSum || kind == kAvg) appendStringInfo(&neg, ", -__s%d", j);
  }
  StringInfoData cols;
  initStringInfo(&cols);
  RangeTblEntry* rte = rt_fetch(plan->inner_rti, plan->query->rtable);
  int i = 0;
  foreach (lc, rte->eref->colnames) {
    appendStringInfo(&cols, "%s%s", i++ > 0 ? ", " : "", quote_identifier(strVal(lfirst(lc))));
  }
  appendStringInfo(&s, "__ramp_after(%s) AS (%s), ", cols.data,
                   ViewQuery(inner, "(SELECT * FROM __ramp_inow) __ramp_l"));
  appendStringInfo(&s, "__ramp_before(%s) AS (%s)", cols.data,
                   ViewQuery(inner, psprintf("(SELECT * FROM __ramp_inow UNION ALL SELECT %s "
                                             "FROM __ramp_idd) __ramp_l",
                                             neg.data)));
  return s.data;
}

char* NestedSource(const ViewPlan* plan) {
  const Branch* b = static_cast<Branch*>(linitial(plan->branches));
  Query* after = static_cast<Query*>(copyObjectImpl(plan->query));
  ToTransition(rt_fetch(plan->inner_rti, after->rtable), "__ramp_after");
  Query* before = static_cast<Query*>(copyObjectImpl(plan->query));
  ToTransition(rt_fetch(plan->inner_rti, before->rtable), "__ramp_before");
  return psprintf(
      "SELECT 1 AS __ramp_sign, t.* FROM (%s) t UNION ALL "
      "SELECT -1 AS __ramp_sign, t.* FROM (%s) t",
      RowQuery(plan, b, after, NIL), RowQuery(plan, b, before, NIL));
}

// What a statement (new and/or old transition rows) on base table relid runs.
char* StatementMaintenance(const ViewPlan* plan, const char* log, Oid relid, bool has_new,
                           bool has_old, const char* full, bool only_reached) {
  if (plan->inner != nullptr) {
    return Maintenance(plan, log, NestedCtes(plan, relid, has_new, has_old), NestedSource(plan),
                       true, full);
  }
  bool may_remove;
  const char* source = DeltaTerms(plan, relid, has_new, has_old, &may_remove);
  return Maintenance(plan, log, nullptr, source, may_remove, full, only_reached);
}

// A SELECT of one hash per group that the statement's rows remove from (the type's own hash
// function per group column, so that equal values get one key), for the per-group waits of
// min/max views (see Maintenance); nullptr when the view cannot have them: no min/max, a
// nested aggregate, no removal, or a group column whose type has no hash function.
const char* GroupLocks(const ViewPlan* plan, Oid relid, bool has_new, bool has_old) {
  if (!plan->has_minmax || plan->inner != nullptr || !plan->aggregate) return nullptr;
  bool may_remove;
  const char* source = DeltaTerms(plan, relid, has_new, has_old, &may_remove);
  if (!may_remove) return nullptr;
  StringInfoData parts;
  initStringInfo(&parts);
  appendStringInfoString(&parts, "'g'");
  int i = 0;
  ListCell* lc;
  foreach (lc, plan->group_exprs) {
    ++i;
    const Oid hash =
        lookup_type_cache(exprType(static_cast<Node*>(lfirst(lc))), TYPECACHE_HASH_PROC)->hash_proc;
    if (!OidIsValid(hash)) return nullptr;
    appendStringInfo(&parts, ", %s(d.__g%d)",
                     quote_qualified_identifier(get_namespace_name(get_func_namespace(hash)),
                                                get_func_name(hash)),
                     i);
  }
  return psprintf("SELECT hashtext(concat_ws(',', %s)) AS h FROM (%s) d WHERE d.__ramp_sign < 0",
                  parts.data, source);
}

// What the maintenance trigger waits for before the delta (maintain.cpp): nothing more, all
// writers of the table ("serialize"), or the writers of the same keys: then a statement
// giving the keys' hashes comes before the delta. The keys are the values of a column of the
// transition rows (the type's own hash function: equal values, 1.0 and 1.00 too, get one
// key) and, for min/max views, the groups the statement removes rows from (GroupLocks).
// *only_reached: the delta may skip recomputing groups whose extremum the removed rows do
// not reach, because removers of one group wait for each other.
const char* LockTag(const ViewPlan* plan, Oid relid, int serialize, bool has_new, bool has_old,
                    bool* only_reached) {
  *only_reached = false;
  if (serialize == kSerializeTable) {
    *only_reached = plan->inner == nullptr && plan->aggregate;
    return "/* ramp_immv: serialize */ ";
  }
  const char* keys = nullptr;
  if (serialize > 0) {
    const auto attnum = static_cast<AttrNumber>(serialize);
    const char* column = quote_identifier(get_attname(relid, attnum, false));
    const Oid hash = lookup_type_cache(get_atttype(relid, attnum), TYPECACHE_HASH_PROC)->hash_proc;
    const char* hash_name = quote_qualified_identifier(get_namespace_name(get_func_namespace(hash)),
                                                       get_func_name(hash));
    const char* rows =
        has_new && has_old
            ? psprintf("SELECT %s FROM __ramp_new UNION ALL SELECT %s FROM __ramp_old", column,
                       column)
            : psprintf("SELECT %s FROM %s", column, has_new ? "__ramp_new" : "__ramp_old");
    keys = psprintf("SELECT %s(t.%s) AS h FROM (%s) t WHERE t.%s IS NOT NULL", hash_name, column,
                    rows, column);
  }
  const char* groups = GroupLocks(plan, relid, has_new, has_old);
  if (keys == nullptr && groups == nullptr) return "";
  *only_reached = groups != nullptr;
  const char* all = keys != nullptr && groups != nullptr ? psprintf("%s UNION ALL %s", keys, groups)
                    : keys != nullptr                    ? keys
                                                         : groups;
  return psprintf(
      "/* ramp_immv: lock */ SELECT DISTINCT h FROM (%s) __ramp_h\n/* ramp_immv: delta */\n", all);
}

// A statement's maintenance: its waits (LockTag), then its delta.
char* StatementSql(const ViewPlan* plan, const char* log, Oid relid, int serialize, bool has_new,
                   bool has_old, const char* full) {
  bool only_reached;
  const char* tag = LockTag(plan, relid, serialize, has_new, has_old, &only_reached);
  return psprintf("%s%s", tag,
                  StatementMaintenance(plan, log, relid, has_new, has_old, full, only_reached));
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
// = pg_catalog): the triggers run it whatever the writer's search_path. The statements of a
// base table whose writers must wait for each other (see maintain.cpp) begin with
// /* ramp_immv: serialize */, or with /* ramp_immv: lock */ and a statement taking the
// locks per key, then /* ramp_immv: delta */.
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
  const char* full = FullSource(&plan);
  const char* fill = LogRows(&plan, full, nullptr);
  Emit(rsinfo, "fill", 0, nullptr, fill);
  Emit(rsinfo, "view", 0, nullptr, ViewQuery(&plan, log));
  Emit(rsinfo, "query", 0, nullptr, pg_get_querydef(plan.original, false));
  const char* refresh =
      psprintf("WITH __ramp_gone AS (DELETE FROM %s) INSERT INTO %s %s", log, log, fill);
  Emit(rsinfo, "refresh", 0, nullptr, refresh);
  Emit(rsinfo, "compact", 0, nullptr,
       psprintf("WITH __ramp_gone AS (DELETE FROM %s RETURNING *) INSERT INTO %s %s", log, log,
                LogRows(&plan, "__ramp_gone", nullptr, RowsOf::kLog)));
  int base = 0;
  ListCell* lc;
  ListCell* sc;
  forboth(lc, plan.base_relids, sc, plan.serialize) {
    ++base;
    const Oid relid = lfirst_oid(lc);
    const char* table = QualifiedName(relid);
    const int serialize = lfirst_int(sc);
    const char* tag = serialize != 0 ? "/* ramp_immv: serialize */ " : "";
    Emit(rsinfo, "INSERT", base, table,
         StatementSql(&plan, log, relid, serialize, true, false, full));
    Emit(rsinfo, "DELETE", base, table,
         StatementSql(&plan, log, relid, serialize, false, true, full));
    Emit(rsinfo, "UPDATE", base, table,
         StatementSql(&plan, log, relid, serialize, true, true, full));
    Emit(rsinfo, "TRUNCATE", base, table, psprintf("%s%s", tag, refresh));
  }
  AtEOXact_GUC(true, guc_level);
  return (Datum)0;
}

}  // extern "C"
