// The FdwRoutine of `ramp` (fdw.hpp): options, planning (which quals become point reads),
// execution entry points and EXPLAIN. PostgreSQL code; the C++ side (reads.cpp, writes.cpp)
// runs inside Boundary and hands back plain values.
#include <set>
#include <string>
#include <vector>

#include "ramp/types.h"

#include "sqlapi/guc.hpp"
#include "xact/session.hpp"

#include "boundary/boundary.hpp"
#include "boundary/context_owned.hpp"
#include "fdw/fdw.hpp"

namespace pgramp::fdw {

namespace {

// ---- options ---------------------------------------------------------------------------------

struct ValidOption {
  const char* name;
  Oid context;
};

const ValidOption kOptions[] = {
    {"nodes", ForeignServerRelationId},   {"token_file", ForeignServerRelationId},
    {"keyspace", ForeignTableRelationId}, {"buckets", ForeignTableRelationId},
    {"role", AttributeRelationId},
};

const char* OptionString(List* options, const char* name) {
  ListCell* lc;
  foreach (lc, options) {
    DefElem* d = static_cast<DefElem*>(lfirst(lc));
    if (strcmp(d->defname, name) == 0) return defGetString(d);
  }
  return nullptr;
}

uint32 ParseBuckets(const char* s) {
  char* end = nullptr;
  errno = 0;
  const long v = strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || errno != 0 || v < 1 || v > 65536) {
    ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                    errmsg("invalid value for option \"buckets\": \"%s\"", s),
                    errhint("Give the keyspace's partition count, 1 to 65536.")));
  }
  return static_cast<uint32>(v);
}

// What a foreign table's options say (PostgreSQL side).
struct TableOptions {
  const char* keyspace;
  uint32 buckets;  // 0: the catalog entry's, else the default
  const char* nodes;
  const char* token_file;
  const char* server_name;
  AttrNumber key_attno;
  AttrNumber value_attno;  // 0: no value column
};

// The key column: role 'key', else the column named "key", else the first one. The value
// column: role 'value', else "value", else the one other column. Any further column is an
// error.
void MapColumns(Relation rel, AttrNumber* key, AttrNumber* value) {
  TupleDesc desc = RelationGetDescr(rel);
  AttrNumber by_role[2] = {0, 0}, by_name[2] = {0, 0};
  int live = 0;
  AttrNumber first = 0, other = 0;
  for (int i = 0; i < desc->natts; i++) {
    Form_pg_attribute att = TupleDescAttr(desc, i);
    if (att->attisdropped) continue;
    live++;
    if (first == 0) first = att->attnum;
    const char* role =
        OptionString(GetForeignColumnOptions(RelationGetRelid(rel), att->attnum), "role");
    if (role != nullptr) by_role[strcmp(role, "key") == 0 ? 0 : 1] = att->attnum;
    if (strcmp(NameStr(att->attname), "key") == 0) by_name[0] = att->attnum;
    if (strcmp(NameStr(att->attname), "value") == 0) by_name[1] = att->attnum;
  }
  *key = by_role[0] != 0 ? by_role[0] : by_name[0] != 0 ? by_name[0] : first;
  *value = by_role[1] != 0 ? by_role[1] : by_name[1];
  if (*value == *key) *value = 0;
  for (int i = 0; i < desc->natts && *value == 0; i++) {
    Form_pg_attribute att = TupleDescAttr(desc, i);
    if (!att->attisdropped && att->attnum != *key && live == 2) other = att->attnum;
    if (other != 0) *value = other;
  }
  if (*key == 0) {
    ereport(ERROR,
            (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
             errmsg("foreign table \"%s\" has no key column", RelationGetRelationName(rel))));
  }
  for (int i = 0; i < desc->natts; i++) {
    Form_pg_attribute att = TupleDescAttr(desc, i);
    if (att->attisdropped || att->attnum == *key || att->attnum == *value) continue;
    ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                    errmsg("column \"%s\" of foreign table \"%s\" is neither its key nor its value",
                           NameStr(att->attname), RelationGetRelationName(rel)),
                    errhint("A ramp foreign table has a key column and at most one value column "
                            "(named key and value, or marked with the column option role 'key' / "
                            "'value').")));
  }
}

TableOptions ReadOptions(Relation rel) {
  TableOptions o{};
  ForeignTable* table = GetForeignTable(RelationGetRelid(rel));
  ForeignServer* server = GetForeignServer(table->serverid);
  o.keyspace = OptionString(table->options, "keyspace");
  if (o.keyspace == nullptr) {
    ereport(ERROR,
            (errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
             errmsg("foreign table \"%s\" has no keyspace option", RelationGetRelationName(rel))));
  }
  const char* buckets = OptionString(table->options, "buckets");
  o.buckets = buckets != nullptr ? ParseBuckets(buckets) : 0;
  o.nodes = OptionString(server->options, "nodes");
  o.token_file = OptionString(server->options, "token_file");
  o.server_name = server->servername;
  MapColumns(rel, &o.key_attno, &o.value_attno);
  return o;
}

Keyspace Resolve(const TableOptions& o) {
  return Boundary(
      [&] { return ResolveKeyspace(o.keyspace, o.buckets, o.nodes, o.token_file, o.server_name); });
}

// ---- planning --------------------------------------------------------------------------------

enum KeyQualKind { kEquals = 0, kAny = 1 };

struct RelPlan {
  Keyspace ks;
  AttrNumber key_attno;
  AttrNumber value_attno;
  List* key_exprs;  // the constant side of each pushed-down qual
  List* key_kinds;  // KeyQualKind per qual
  Oid key_type;
  double keys;   // estimated keys read (point reads)
  double total;  // keys in the keyspace
};

bool IsKeyVar(Node* node, Index relid, AttrNumber key_attno) {
  while (node != nullptr && IsA(node, RelabelType)) {
    node = reinterpret_cast<Node*>(reinterpret_cast<RelabelType*>(node)->arg);
  }
  if (node == nullptr || !IsA(node, Var)) return false;
  Var* v = reinterpret_cast<Var*>(node);
  return v->varno == static_cast<int>(relid) && v->varattno == key_attno && v->varlevelsup == 0;
}

// A side of a qual that is constant during a scan: no column of this relation, no volatile
// function (columns of other relations only when outer: a parameterized path's join clause).
bool ConstantDuringScan(PlannerInfo* root, Node* node, Index relid, bool outer) {
  if (contain_volatile_functions(node) || contain_subplans(node)) return false;
  if (!outer) return !contain_var_clause(node);
  return !bms_is_member(static_cast<int>(relid), pull_varnos(root, node));
}

// Equality of the key type (byte equality of what is stored): text, bytea, integers.
bool KeyEquality(Oid opno, Oid inputcollid) {
  switch (get_opcode(opno)) {
    case F_TEXTEQ:
    case F_BYTEAEQ:
    case F_INT2EQ:
    case F_INT4EQ:
    case F_INT8EQ:
    case F_INT24EQ:
    case F_INT42EQ:
    case F_INT28EQ:
    case F_INT82EQ:
    case F_INT48EQ:
    case F_INT84EQ:
      break;
    default:
      return false;
  }
  return !OidIsValid(inputcollid) || get_collation_isdeterministic(inputcollid);
}

// Whether clause is `key = c`, `c = key` or `key = ANY(array)`; sets *expr and *kind.
bool KeyQual(PlannerInfo* root, Expr* clause, Index relid, AttrNumber key_attno, bool outer,
             Expr** expr, KeyQualKind* kind) {
  auto constant = [&](Node* n) { return ConstantDuringScan(root, n, relid, outer); };
  if (IsA(clause, OpExpr)) {
    OpExpr* op = reinterpret_cast<OpExpr*>(clause);
    if (list_length(op->args) != 2 || !KeyEquality(op->opno, op->inputcollid)) return false;
    Node* l = static_cast<Node*>(linitial(op->args));
    Node* r = static_cast<Node*>(lsecond(op->args));
    if (IsKeyVar(l, relid, key_attno) && constant(r)) {
      *expr = reinterpret_cast<Expr*>(r);
    } else if (IsKeyVar(r, relid, key_attno) && constant(l)) {
      *expr = reinterpret_cast<Expr*>(l);
    } else {
      return false;
    }
    *kind = kEquals;
    return true;
  }
  if (IsA(clause, ScalarArrayOpExpr)) {
    ScalarArrayOpExpr* op = reinterpret_cast<ScalarArrayOpExpr*>(clause);
    if (!op->useOr || list_length(op->args) != 2 || !KeyEquality(op->opno, op->inputcollid)) {
      return false;
    }
    Node* l = static_cast<Node*>(linitial(op->args));
    Node* r = static_cast<Node*>(lsecond(op->args));
    if (!IsKeyVar(l, relid, key_attno) || !constant(r)) return false;
    *expr = reinterpret_cast<Expr*>(r);
    *kind = kAny;
    return true;
  }
  return false;
}

double KeysOf(Expr* expr, KeyQualKind kind) {
  if (kind == kEquals) return 1;
  if (IsA(expr, Const) && !reinterpret_cast<Const*>(expr)->constisnull) {
    ArrayType* a = DatumGetArrayTypeP(reinterpret_cast<Const*>(expr)->constvalue);
    return ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a));
  }
  return 10;
}

void GetForeignRelSize(PlannerInfo* root, RelOptInfo* baserel, Oid foreigntableid) {
  RelPlan* plan = static_cast<RelPlan*>(palloc0(sizeof(RelPlan)));
  Relation rel = table_open(foreigntableid, NoLock);
  const TableOptions o = ReadOptions(rel);
  const Oid key_type = TupleDescAttr(RelationGetDescr(rel), o.key_attno - 1)->atttypid;
  table_close(rel, NoLock);
  plan->ks = Resolve(o);
  plan->key_attno = o.key_attno;
  plan->value_attno = o.value_attno;
  plan->key_type = key_type;
  plan->keys = -1;
  ListCell* lc;
  foreach (lc, baserel->baserestrictinfo) {
    RestrictInfo* ri = static_cast<RestrictInfo*>(lfirst(lc));
    Expr* expr = nullptr;
    KeyQualKind kind = kEquals;
    if (!KeyTypePushable(getBaseType(key_type)) ||
        !KeyQual(root, ri->clause, baserel->relid, o.key_attno, false, &expr, &kind)) {
      continue;
    }
    plan->key_exprs = lappend(plan->key_exprs, expr);
    plan->key_kinds = lappend_int(plan->key_kinds, kind);
    const double n = KeysOf(expr, kind);
    if (plan->keys < 0 || n < plan->keys) plan->keys = n;
  }
  // Keys in the keyspace (the partitions' counts, cached briefly; 1000 when unknown).
  const ramp::KeyspaceId id = plan->ks.id;
  plan->total = static_cast<double>(Boundary([&] {
    Session& session = Session::Get();
    if (session.RecentlyFailed()) return uint64_t{1000};
    return session.SizeOf(id, std::chrono::milliseconds(1000)).keys;
  }));
  if (plan->total < 1) plan->total = 1;
  baserel->tuples = plan->total;
  const Selectivity sel =
      clauselist_selectivity(root, baserel->baserestrictinfo, 0, JOIN_INNER, nullptr);
  baserel->rows =
      clamp_row_est(plan->keys >= 0 ? Min(plan->keys, plan->total * sel + 1) : plan->total * sel);
  baserel->fdw_private = plan;
}

struct KeyMember {
  Index relid;
  AttrNumber key_attno;
};

bool MatchesKey(PlannerInfo* root, RelOptInfo* rel, EquivalenceClass* ec, EquivalenceMember* em,
                void* arg) {
  const KeyMember* k = static_cast<const KeyMember*>(arg);
  return IsKeyVar(reinterpret_cast<Node*>(em->em_expr), k->relid, k->key_attno);
}

void GetForeignPaths(PlannerInfo* root, RelOptInfo* baserel, Oid foreigntableid) {
  const RelPlan* plan = static_cast<RelPlan*>(baserel->fdw_private);
  Cost startup, total;
  if (plan->keys >= 0) {
    // One multi-key RAMP read: a round trip, then a little per key.
    startup = 10;
    total = startup + plan->keys * (cpu_tuple_cost + 0.05);
  } else {
    // Every partition's pages, read in bulk.
    startup = 100;
    total = startup + plan->total * (cpu_tuple_cost + 0.01);
  }
  total += baserel->rows * cpu_tuple_cost;
  add_path(baserel,
           reinterpret_cast<Path*>(create_foreignscan_path(
               root, baserel, nullptr, baserel->rows, startup, total, NIL, nullptr, nullptr, NIL)));
  // Join clauses `key = outer.column` (ON clauses of outer joins, and the equalities of
  // the key's equivalence classes): paths parameterized by the outer relations, one
  // multi-key read per outer row (a nested loop's lookups).
  if (!KeyTypePushable(getBaseType(plan->key_type))) return;
  List* candidates = list_copy(baserel->joininfo);
  if (baserel->has_eclass_joins) {
    KeyMember arg{baserel->relid, plan->key_attno};
    candidates =
        list_concat(candidates, generate_implied_equalities_for_column(
                                    root, baserel, MatchesKey, &arg, baserel->lateral_referencers));
  }
  ListCell* lc;
  foreach (lc, candidates) {
    RestrictInfo* ri = static_cast<RestrictInfo*>(lfirst(lc));
    Expr* expr = nullptr;
    KeyQualKind kind = kEquals;
    if (!join_clause_is_movable_to(ri, baserel) ||
        !KeyQual(root, ri->clause, baserel->relid, plan->key_attno, true, &expr, &kind)) {
      continue;
    }
    Relids outer = bms_difference(ri->clause_relids, baserel->relids);
    if (bms_is_empty(outer)) continue;
    ParamPathInfo* param = get_baserel_parampathinfo(root, baserel, outer);
    const double keys = KeysOf(expr, kind);
    const Cost p_startup = 10;
    const Cost p_total =
        p_startup + keys * (cpu_tuple_cost + 0.05) + param->ppi_rows * cpu_tuple_cost;
    add_path(baserel, reinterpret_cast<Path*>(create_foreignscan_path(
                          root, baserel, nullptr, param->ppi_rows, p_startup, p_total, NIL, outer,
                          nullptr, list_make1(ri))));
  }
}

// fdw_private of the plan: keyspace id (decimal string), buckets, label, key attno, value
// attno, key qual kinds (fdw_exprs holds the quals' constant sides).
enum PlanPrivate { kPrivId, kPrivBuckets, kPrivLabel, kPrivKeyAtt, kPrivValueAtt, kPrivKinds };

ForeignScan* GetForeignPlan(PlannerInfo* root, RelOptInfo* baserel, Oid foreigntableid,
                            ForeignPath* best_path, List* tlist, List* scan_clauses,
                            Plan* outer_plan) {
  const RelPlan* plan = static_cast<RelPlan*>(baserel->fdw_private);
  // Every qual is also checked here (the pushed-down ones cost a comparison per row).
  scan_clauses = extract_actual_clauses(scan_clauses, false);
  List* key_exprs = list_copy(plan->key_exprs);
  List* key_kinds = list_copy(plan->key_kinds);
  ListCell* lc;
  foreach (lc, best_path->fdw_private) {  // the join clause of a parameterized path
    RestrictInfo* ri = static_cast<RestrictInfo*>(lfirst(lc));
    Expr* expr = nullptr;
    KeyQualKind kind = kEquals;
    if (KeyQual(root, ri->clause, baserel->relid, plan->key_attno, true, &expr, &kind)) {
      key_exprs = lappend(key_exprs, expr);
      key_kinds = lappend_int(key_kinds, kind);
    }
  }
  List* priv =
      list_make4(makeString(psprintf("%llu", static_cast<unsigned long long>(plan->ks.id))),
                 makeInteger(static_cast<int>(plan->ks.buckets)),
                 makeString(pstrdup(plan->ks.label)), makeInteger(plan->key_attno));
  priv = lappend(priv, makeInteger(plan->value_attno));
  priv = lappend(priv, key_kinds);
  return make_foreignscan(tlist, scan_clauses, baserel->relid, key_exprs, priv, NIL, NIL,
                          outer_plan);
}

Keyspace KeyspaceOfPlan(List* priv) {
  Keyspace ks{};
  ks.id = strtoull(strVal(list_nth(priv, kPrivId)), nullptr, 10);
  ks.buckets = static_cast<uint32_t>(intVal(list_nth(priv, kPrivBuckets)));
  strlcpy(ks.label, strVal(list_nth(priv, kPrivLabel)), sizeof(ks.label));
  return ks;
}

// ---- scans -----------------------------------------------------------------------------------

struct ScanState {
  Keyspace ks;
  AttrNumber key_attno;
  AttrNumber value_attno;
  List* key_states;  // ExprState per pushed-down qual
  List* key_exprs;
  List* key_kinds;
  bool remember;  // the scan feeds an UPDATE/DELETE: versions read are the expected ones
  ContextOwned<Reader>* reader;
  ReadStats done;  // of the readers closed (rescans)
  int64 reads;     // readers opened: one RAMP read each for point reads
};

void AddStats(ReadStats* to, const ReadStats& s) {
  to->keys += s.keys;
  to->found += s.found;
  to->partitions += s.partitions;
  to->pages += s.pages;
  to->own_writes += s.own_writes;
}

struct RawKey {
  int qual;
  const char* data;
  int len;
};

void BeginForeignScan(ForeignScanState* node, int eflags) {
  ForeignScan* fsplan = reinterpret_cast<ForeignScan*>(node->ss.ps.plan);
  ScanState* st = static_cast<ScanState*>(palloc0(sizeof(ScanState)));
  List* priv = fsplan->fdw_private;
  st->ks = KeyspaceOfPlan(priv);
  st->key_attno = static_cast<AttrNumber>(intVal(list_nth(priv, kPrivKeyAtt)));
  st->value_attno = static_cast<AttrNumber>(intVal(list_nth(priv, kPrivValueAtt)));
  st->key_kinds = static_cast<List*>(list_nth(priv, kPrivKinds));
  st->key_exprs = fsplan->fdw_exprs;
  st->key_states = ExecInitExprList(fsplan->fdw_exprs, reinterpret_cast<PlanState*>(node));
  st->remember = ExecRelationIsTargetRelation(node->ss.ps.state, fsplan->scan.scanrelid);
  node->fdw_state = st;
}

// The keys of the pushed-down quals (each qual's keys, flattened), in the per-query memory.
RawKey* EvaluateKeys(ScanState* st, ExprContext* econtext, int* n) {
  int cap = 16, count = 0;
  RawKey* keys = static_cast<RawKey*>(palloc(sizeof(RawKey) * cap));
  auto add = [&](int qual, Datum d, Oid type) {
    if (count == cap) {
      cap *= 2;
      keys = static_cast<RawKey*>(repalloc(keys, sizeof(RawKey) * cap));
    }
    int len = 0;
    char* data = EncodeDatum(d, type, &len);
    keys[count++] = RawKey{qual, data, len};
  };
  int qual = 0;
  ListCell *ls, *le, *lk;
  forthree(ls, st->key_states, le, st->key_exprs, lk, st->key_kinds) {
    ExprState* es = static_cast<ExprState*>(lfirst(ls));
    const Oid type = exprType(static_cast<Node*>(lfirst(le)));
    bool isnull = false;
    Datum d = ExecEvalExpr(es, econtext, &isnull);
    if (lfirst_int(lk) == kEquals) {
      if (!isnull) add(qual, d, type);
    } else if (!isnull) {
      ArrayType* a = DatumGetArrayTypeP(d);
      const Oid elem = ARR_ELEMTYPE(a);
      int16 elmlen;
      bool elmbyval;
      char elmalign;
      get_typlenbyvalalign(elem, &elmlen, &elmbyval, &elmalign);
      Datum* values;
      bool* nulls;
      int nvalues;
      deconstruct_array(a, elem, elmlen, elmbyval, elmalign, &values, &nulls, &nvalues);
      for (int i = 0; i < nvalues; i++) {
        if (!nulls[i]) add(qual, values[i], elem);
      }
    }
    qual++;
  }
  *n = count;
  return keys;
}

// Opens the reader: one RAMP read of the keys both (all) quals allow, or a scan.
void OpenReader(ForeignScanState* node, ScanState* st) {
  EState* estate = node->ss.ps.state;
  MemoryContext old = MemoryContextSwitchTo(estate->es_query_cxt);
  const uint32_t cid = estate->es_snapshot->curcid;
  const int quals = list_length(st->key_states);
  int n = 0;
  RawKey* keys = quals > 0 ? EvaluateKeys(st, node->ss.ps.ps_ExprContext, &n) : nullptr;
  const Keyspace ks = st->ks;
  const bool remember = st->remember;
  st->reads++;
  st->reader = Boundary([&] {
    std::unique_ptr<Reader> reader;
    if (quals == 0) {
      reader = ScanReader(ks, cid, remember);
    } else {
      // Keys every qual allows (the quals are ANDed), in key order, each once.
      std::vector<std::set<std::string>> per(static_cast<size_t>(quals));
      for (int i = 0; i < n; i++) per[keys[i].qual].emplace(keys[i].data, keys[i].len);
      std::vector<std::string> wanted;
      for (const std::string& k : per[0]) {
        bool all = true;
        for (size_t q = 1; q < per.size() && all; q++) all = per[q].count(k) != 0;
        if (all) wanted.push_back(k);
      }
      reader = PointReader(ks, std::move(wanted), cid, remember);
    }
    return OwnInCurrentContext(std::move(reader));
  });
  MemoryContextSwitchTo(old);
}

TupleTableSlot* IterateForeignScan(ForeignScanState* node) {
  ScanState* st = static_cast<ScanState*>(node->fdw_state);
  TupleTableSlot* slot = node->ss.ss_ScanTupleSlot;
  ExecClearTuple(slot);
  if (st->reader == nullptr) OpenReader(node, st);
  Reader* reader = st->reader->object;
  RawRow row{};
  const bool found = Boundary([&] { return reader->Next(&row); });
  if (!found) return slot;
  Relation rel = node->ss.ss_currentRelation;
  TupleDesc desc = slot->tts_tupleDescriptor;
  for (int i = 0; i < desc->natts; i++) slot->tts_isnull[i] = true;
  Form_pg_attribute key_att = TupleDescAttr(desc, st->key_attno - 1);
  slot->tts_values[st->key_attno - 1] =
      DecodeDatum(row.key, row.key_len, key_att, rel, row.key, row.key_len);
  slot->tts_isnull[st->key_attno - 1] = false;
  if (st->value_attno != 0) {
    Form_pg_attribute value_att = TupleDescAttr(desc, st->value_attno - 1);
    slot->tts_values[st->value_attno - 1] =
        DecodeDatum(row.value, row.value_len, value_att, rel, row.key, row.key_len);
    slot->tts_isnull[st->value_attno - 1] = false;
  }
  return ExecStoreVirtualTuple(slot);
}

void CloseReader(ScanState* st) {
  if (st->reader == nullptr) return;
  Reader* reader = st->reader->object;
  if (reader != nullptr) AddStats(&st->done, Boundary([&] { return reader->stats(); }));
  st->reader->Destroy();
  st->reader = nullptr;
}

void ReScanForeignScan(ForeignScanState* node) {
  CloseReader(static_cast<ScanState*>(node->fdw_state));
}

void EndForeignScan(ForeignScanState* node) {
  ScanState* st = static_cast<ScanState*>(node->fdw_state);
  if (st != nullptr) CloseReader(st);
}

const char* ReadPathLabel() {
  switch (guc::read_path) {
    case 0:
      return "RPC GET";
    case 1:
      return "GET+";
    default:
      return "GET*";
  }
}

bool AllConst(List* exprs) {
  ListCell* lc;
  foreach (lc, exprs) {
    if (!IsA(lfirst(lc), Const)) return false;
  }
  return true;
}

// The partitions (buckets) of the keys the quals allow, when the keys are constants.
char* PartitionsOf(ForeignScanState* node, ScanState* st) {
  int n = 0;
  RawKey* keys = EvaluateKeys(st, node->ss.ps.ps_ExprContext, &n);
  const int quals = list_length(st->key_states);
  // Keys of the first qual that every other qual allows (as OpenReader intersects them).
  bool* used = static_cast<bool*>(palloc0(sizeof(bool) * (st->ks.buckets + 1)));
  int touched = 0;
  for (int i = 0; i < n; i++) {
    if (keys[i].qual != 0) continue;
    bool all = true;
    for (int q = 1; q < quals && all; q++) {
      bool in = false;
      for (int j = 0; j < n && !in; j++) {
        in = keys[j].qual == q && keys[j].len == keys[i].len &&
             memcmp(keys[j].data, keys[i].data, keys[i].len) == 0;
      }
      all = in;
    }
    if (!all) continue;
    const uint32 b = ramp::BucketOf(std::string_view(keys[i].data, keys[i].len), st->ks.buckets);
    if (!used[b]) touched++;
    used[b] = true;
  }
  StringInfoData s;
  initStringInfo(&s);
  for (uint32 b = 0; b < st->ks.buckets; b++) {
    if (used[b]) appendStringInfo(&s, "%s%u", s.len > 0 ? ", " : "", b);
  }
  if (touched == 0) appendStringInfoString(&s, "none");
  appendStringInfo(&s, " (%d of %u)", touched, st->ks.buckets);
  return s.data;
}

void ExplainForeignScan(ForeignScanState* node, ExplainState* es) {
  ScanState* st = static_cast<ScanState*>(node->fdw_state);
  const bool point = st->key_states != NIL;
  if (point) {
    ExplainPropertyText(
        "Ramp Read",
        psprintf("%s multi-key read at the statement's snapshot (read-atomic)", ReadPathLabel()),
        es);
  } else {
    ExplainPropertyText("Ramp Read",
                        "page I/O scan of every partition at the statement's snapshot "
                        "(read-atomic)",
                        es);
  }
  if (!es->verbose) return;
  ExplainPropertyText(
      "Ramp Keyspace",
      psprintf("%llu%s%s%s, %u partitions", static_cast<unsigned long long>(st->ks.id),
               st->ks.label[0] != '\0' ? " (" : "", st->ks.label,
               st->ks.label[0] != '\0' ? ")" : "", st->ks.buckets),
      es);
  if (point) {
    // The deparse context is this node's: EXPLAIN set it to show the Filter, which holds
    // every pushed-down qual too.
    StringInfoData s;
    initStringInfo(&s);
    ListCell *le, *lk;
    forboth(le, st->key_exprs, lk, st->key_kinds) {
      char* text = deparse_expression(static_cast<Node*>(lfirst(le)), es->deparse_cxt, true, false);
      appendStringInfo(&s, "%skey = %s%s%s", s.len > 0 ? " AND " : "",
                       lfirst_int(lk) == kAny ? "ANY (" : "", text,
                       lfirst_int(lk) == kAny ? ")" : "");
    }
    ExplainPropertyText("Ramp Keys", s.data, es);
    if (AllConst(st->key_exprs)) {
      ExplainPropertyText("Ramp Partitions", PartitionsOf(node, st), es);
    } else {
      ExplainPropertyText("Ramp Partitions", "those of the keys, known at execution", es);
    }
  } else {
    ExplainPropertyText("Ramp Partitions", psprintf("all %u", st->ks.buckets), es);
  }
  if (es->analyze) {
    ReadStats stats = st->done;
    if (st->reader != nullptr && st->reader->object != nullptr) {
      Reader* reader = st->reader->object;
      AddStats(&stats, Boundary([&] { return reader->stats(); }));
    }
    if (point) {
      ExplainPropertyInteger("Ramp Reads", nullptr, st->reads, es);
      ExplainPropertyUInteger("Ramp Keys Read", nullptr, stats.keys, es);
    } else {
      ExplainPropertyUInteger("Ramp Partitions Scanned", nullptr, stats.partitions, es);
      ExplainPropertyUInteger("Ramp Pages Read", nullptr, stats.pages, es);
    }
    ExplainPropertyUInteger("Ramp Rows Found", nullptr, stats.found, es);
    ExplainPropertyUInteger("Ramp Own Writes", nullptr, stats.own_writes, es);
  }
}

// ---- writes ----------------------------------------------------------------------------------

constexpr const char* kKeyJunk = "ramp_key";

struct ModifyState {
  Keyspace ks;
  AttrNumber key_attno;
  AttrNumber value_attno;
  AttrNumber key_junk;  // UPDATE/DELETE: the row's key in the plan's output
  bool resolved;
};

void AddForeignUpdateTargets(PlannerInfo* root, Index rtindex, RangeTblEntry* target_rte,
                             Relation target_relation) {
  AttrNumber key = 0, value = 0;
  MapColumns(target_relation, &key, &value);
  Form_pg_attribute att = TupleDescAttr(RelationGetDescr(target_relation), key - 1);
  Var* var = makeVar(rtindex, key, att->atttypid, att->atttypmod, att->attcollation, 0);
  add_row_identity_var(root, var, rtindex, kKeyJunk);
}

// INSERT ... ON CONFLICT: a PUT overwrites; DO NOTHING would silently do the opposite.
List* PlanForeignModify(PlannerInfo* root, ModifyTable* plan, Index result_relation,
                        int subplan_index) {
  if (plan->onConflictAction != ONCONFLICT_NONE) {
    ereport(ERROR,
            (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
             errmsg("INSERT ... ON CONFLICT is not supported on ramp foreign tables"),
             errdetail("An INSERT into a ramp foreign table is a PUT: it overwrites the key.")));
  }
  return NIL;
}

ModifyState* NewModifyState(Relation rel, bool resolve) {
  ModifyState* m = static_cast<ModifyState*>(palloc0(sizeof(ModifyState)));
  const TableOptions o = ReadOptions(rel);
  m->key_attno = o.key_attno;
  m->value_attno = o.value_attno;
  if (resolve) {
    m->ks = Resolve(o);
    m->resolved = true;
  }
  return m;
}

void BeginForeignModify(ModifyTableState* mtstate, ResultRelInfo* rinfo, List* fdw_private,
                        int subplan_index, int eflags) {
  ModifyState* m = NewModifyState(rinfo->ri_RelationDesc, (eflags & EXEC_FLAG_EXPLAIN_ONLY) == 0);
  if (mtstate->operation == CMD_UPDATE || mtstate->operation == CMD_DELETE) {
    Plan* subplan = outerPlanState(mtstate)->plan;
    m->key_junk = ExecFindJunkAttributeInTlist(subplan->targetlist, kKeyJunk);
    if (!AttributeNumberIsValid(m->key_junk)) {
      elog(ERROR, "could not find the key junk column of a ramp foreign table");
    }
  }
  rinfo->ri_FdwState = m;
}

void BeginForeignInsert(ModifyTableState* mtstate, ResultRelInfo* rinfo) {
  rinfo->ri_FdwState = NewModifyState(rinfo->ri_RelationDesc, true);
}

void EndForeignModify(EState* estate, ResultRelInfo* rinfo) {}
void EndForeignInsert(EState* estate, ResultRelInfo* rinfo) {}

// The bytes of a column of slot for a write; NULL is refused.
char* ColumnBytes(TupleTableSlot* slot, Relation rel, AttrNumber attno, int* len) {
  bool isnull = false;
  Datum d = slot_getattr(slot, attno, &isnull);
  Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), attno - 1);
  if (isnull) {
    ereport(ERROR,
            (errcode(ERRCODE_NOT_NULL_VIOLATION),
             errmsg("column \"%s\" of ramp foreign table \"%s\" cannot be NULL",
                    NameStr(att->attname), RelationGetRelationName(rel)),
             errdetail("A raw keyspace stores a key and its value's bytes: neither has a NULL.")));
  }
  return EncodeDatum(d, att->atttypid, len);
}

char* OldKeyBytes(ModifyState* m, TupleTableSlot* plan_slot, Relation rel, int* len) {
  bool isnull = false;
  Datum d = ExecGetJunkAttribute(plan_slot, m->key_junk, &isnull);
  if (isnull) elog(ERROR, "the key of a ramp foreign table row is NULL");
  return EncodeDatum(d, TupleDescAttr(RelationGetDescr(rel), m->key_attno - 1)->atttypid, len);
}

void Put(ModifyState* m, const char* key, int key_len, const char* value, int value_len) {
  const uint32_t cid = GetCurrentCommandId(true);
  const uint32_t sub = GetCurrentSubTransactionId();
  const Keyspace ks = m->ks;
  Boundary([&] {
    BufferPut(ks, std::string_view(key, key_len), std::string_view(value, value_len), cid, sub);
  });
}

void Delete(ModifyState* m, const char* key, int key_len) {
  const uint32_t cid = GetCurrentCommandId(true);
  const uint32_t sub = GetCurrentSubTransactionId();
  const Keyspace ks = m->ks;
  Boundary([&] { BufferDelete(ks, std::string_view(key, key_len), cid, sub); });
}

TupleTableSlot* ExecForeignInsert(EState* estate, ResultRelInfo* rinfo, TupleTableSlot* slot,
                                  TupleTableSlot* plan_slot) {
  ModifyState* m = static_cast<ModifyState*>(rinfo->ri_FdwState);
  Relation rel = rinfo->ri_RelationDesc;
  int key_len = 0, value_len = 0;
  char* key = ColumnBytes(slot, rel, m->key_attno, &key_len);
  const char* value = m->value_attno != 0 ? ColumnBytes(slot, rel, m->value_attno, &value_len) : "";
  Put(m, key, key_len, value, value_len);
  return slot;
}

TupleTableSlot* ExecForeignUpdate(EState* estate, ResultRelInfo* rinfo, TupleTableSlot* slot,
                                  TupleTableSlot* plan_slot) {
  ModifyState* m = static_cast<ModifyState*>(rinfo->ri_FdwState);
  Relation rel = rinfo->ri_RelationDesc;
  int old_len = 0, key_len = 0, value_len = 0;
  char* old_key = OldKeyBytes(m, plan_slot, rel, &old_len);
  char* key = ColumnBytes(slot, rel, m->key_attno, &key_len);
  const char* value = m->value_attno != 0 ? ColumnBytes(slot, rel, m->value_attno, &value_len) : "";
  if (old_len != key_len || memcmp(old_key, key, key_len) != 0) Delete(m, old_key, old_len);
  Put(m, key, key_len, value, value_len);
  return slot;
}

TupleTableSlot* ExecForeignDelete(EState* estate, ResultRelInfo* rinfo, TupleTableSlot* slot,
                                  TupleTableSlot* plan_slot) {
  ModifyState* m = static_cast<ModifyState*>(rinfo->ri_FdwState);
  Relation rel = rinfo->ri_RelationDesc;
  int old_len = 0;
  char* old_key = OldKeyBytes(m, plan_slot, rel, &old_len);
  Delete(m, old_key, old_len);
  // RETURNING sees the key (the value is not read again).
  ExecClearTuple(slot);
  for (int i = 0; i < slot->tts_tupleDescriptor->natts; i++) slot->tts_isnull[i] = true;
  bool isnull = false;
  slot->tts_values[m->key_attno - 1] = ExecGetJunkAttribute(plan_slot, m->key_junk, &isnull);
  slot->tts_isnull[m->key_attno - 1] = isnull;
  return ExecStoreVirtualTuple(slot);
}

int IsForeignRelUpdatable(Relation rel) {
  return (1 << CMD_INSERT) | (1 << CMD_UPDATE) | (1 << CMD_DELETE);
}

void ExplainForeignModify(ModifyTableState* mtstate, ResultRelInfo* rinfo, List* fdw_private,
                          int subplan_index, ExplainState* es) {
  ExplainPropertyText("Ramp Write",
                      mtstate->operation == CMD_DELETE
                          ? "deletions buffered, sent in the transaction's RAMP PUT at commit"
                          : "PUTs buffered, sent in the transaction's RAMP PUT at commit",
                      es);
}

List* ImportSchema(ImportForeignSchemaStmt* stmt, Oid server_oid) {
  return ImportForeignSchema(stmt, server_oid);
}

}  // namespace

}  // namespace pgramp::fdw

extern "C" {

PG_FUNCTION_INFO_V1(ramp_fdw_handler);
Datum ramp_fdw_handler(PG_FUNCTION_ARGS) {
  using namespace pgramp::fdw;
  FdwRoutine* r = makeNode(FdwRoutine);
  r->GetForeignRelSize = GetForeignRelSize;
  r->GetForeignPaths = GetForeignPaths;
  r->GetForeignPlan = GetForeignPlan;
  r->BeginForeignScan = BeginForeignScan;
  r->IterateForeignScan = IterateForeignScan;
  r->ReScanForeignScan = ReScanForeignScan;
  r->EndForeignScan = EndForeignScan;
  r->ExplainForeignScan = ExplainForeignScan;
  r->AddForeignUpdateTargets = AddForeignUpdateTargets;
  r->PlanForeignModify = PlanForeignModify;
  r->BeginForeignModify = BeginForeignModify;
  r->ExecForeignInsert = ExecForeignInsert;
  r->ExecForeignUpdate = ExecForeignUpdate;
  r->ExecForeignDelete = ExecForeignDelete;
  r->EndForeignModify = EndForeignModify;
  r->BeginForeignInsert = BeginForeignInsert;
  r->EndForeignInsert = EndForeignInsert;
  r->IsForeignRelUpdatable = IsForeignRelUpdatable;
  r->ExplainForeignModify = ExplainForeignModify;
  r->ImportForeignSchema = ImportSchema;
  PG_RETURN_POINTER(r);
}

PG_FUNCTION_INFO_V1(ramp_fdw_validator);
Datum ramp_fdw_validator(PG_FUNCTION_ARGS) {
  using namespace pgramp::fdw;
  List* options = untransformRelOptions(PG_GETARG_DATUM(0));
  const Oid context = PG_GETARG_OID(1);
  bool has_keyspace = false;
  ListCell* lc;
  foreach (lc, options) {
    DefElem* d = static_cast<DefElem*>(lfirst(lc));
    bool known = false;
    for (const ValidOption& o : kOptions)
      known |= o.context == context && strcmp(o.name, d->defname) == 0;
    if (!known) {
      StringInfoData valid;
      initStringInfo(&valid);
      for (const ValidOption& o : kOptions) {
        if (o.context == context)
          appendStringInfo(&valid, "%s%s", valid.len > 0 ? ", " : "", o.name);
      }
      ereport(ERROR, (errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
                      errmsg("invalid option \"%s\"", d->defname),
                      valid.len > 0 ? errhint("Valid options in this context are: %s", valid.data)
                                    : errhint("There are no valid options in this context.")));
    }
    const char* v = defGetString(d);
    if (strcmp(d->defname, "buckets") == 0) ParseBuckets(v);
    if (strcmp(d->defname, "keyspace") == 0) {
      has_keyspace = true;
      if (*v == '\0') {
        ereport(ERROR,
                (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("option \"keyspace\" is empty"),
                 errhint("Give a keyspace id (decimal) or SCHEMA.NAME of a key-value "
                         "keyspace of ramp.cluster_keyspaces().")));
      }
    }
    if (strcmp(d->defname, "role") == 0 && strcmp(v, "key") != 0 && strcmp(v, "value") != 0) {
      ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                      errmsg("invalid value for option \"role\": \"%s\"", v),
                      errhint("Valid values are key and value.")));
    }
  }
  if (context == ForeignTableRelationId && !has_keyspace) {
    ereport(ERROR, (errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
                    errmsg("a ramp foreign table needs the option keyspace"),
                    errhint("Give a keyspace id (decimal) or SCHEMA.NAME of a key-value "
                            "keyspace of ramp.cluster_keyspaces().")));
  }
  PG_RETURN_VOID();
}
}
