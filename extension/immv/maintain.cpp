// The statement trigger that maintains a materialized view (ramp.create_immv): after each
// INSERT, UPDATE, DELETE (transition tables __ramp_new / __ramp_old) and TRUNCATE of a base
// table it runs the statement ramp._immv_compile made for that table and event, which
// appends the view's delta to its log table. It runs in the writer's transaction, so the
// delta goes into the same WriteBatch, hence the same RAMP PUT, as the base rows.
//
// The statement runs as the owner of the view's log table (writers of a base table need no
// privilege on the log, as with heap triggers of pg_ivm), in a security-restricted
// operation, with search_path = pg_catalog (the stored SQL is fully qualified).
//
// PostgreSQL-style code (no C++ objects with destructors) except the one Boundary of the test
// switch below.
#include "sqlapi/guc.hpp"
#include "xact/session.hpp"
#include "xact/xact.hpp"

#include <algorithm>
#include <chrono>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "ramp/client.h"
#include "ramp/hlc.h"

#include "rows/keys.hpp"
#include "tableam/tableam.hpp"

#include "boundary/boundary.hpp"
#include "catalog/keyspace_catalog.hpp"
#include "tableam/tableam.hpp"

extern "C" {
#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_collation_d.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "storage/proc.h"
#include "utils/fmgrprotos.h"
#include "utils/lsyscache.h"
#include "utils/tuplestore.h"
}

namespace {

const char* EventName(TriggerData* td) {
  if (TRIGGER_FIRED_BY_INSERT(td->tg_event)) return "INSERT";
  if (TRIGGER_FIRED_BY_DELETE(td->tg_event)) return "DELETE";
  if (TRIGGER_FIRED_BY_UPDATE(td->tg_event)) return "UPDATE";
  if (TRIGGER_FIRED_BY_TRUNCATE(td->tg_event)) return "TRUNCATE";
  return nullptr;
}

// A join view's delta for a statement on base table i reads the other base tables as they
// are now. Two transactions writing two different base tables concurrently would each miss
// the other's uncommitted rows, and the pairs of their new rows would be in neither delta.
// So writers of different base tables of one join view wait for each other's commit, and the
// later one's delta then reads the earlier one's rows; writers of the same table run side by
// side. Writers of a table whose delta is not linear in its own rows (a self-join, NOT IN, a
// table under a nested aggregate or count(DISTINCT): compile.cpp tags their statements
// "serialize") wait for every writer of the view. Where the table is in an EXISTS / IN
// subquery (or an outer join's nullable side) that equates one of its columns with the outer
// query, its statements begin with "/* ramp_immv: lock */", a statement giving the hashes
// of that column's values in the transition rows, then "/* ramp_immv: delta */": writers of
// the same value wait for each other (and for the writers of the other tables, as above).
//
// The waits are write intents on the cluster (tam::LockKey), so they hold between writers on
// any number of PostgreSQL servers: in the log table's keyspace, on keys that are not rows
// (other lengths than a row key's; scans skip them), held to the transaction's end:
//  - kWritersKey: group intent (GroupIntent(i)) of a writer of base table i, which goes with
//    writers of table i and conflicts with those of other tables; "serialize" writers take
//    it exclusive;
//  - kValueKey + 8 bytes of hash, exclusive, after kWritersKey, in hash order (two such
//    writers cannot deadlock on them; deadlocks with other locks give 40P01).
// Each key taken is also written (an empty value) in the transaction's RAMP PUT, so the
// grant a waiter gets names the holder's commit (the key's newest version, the commit having
// reached the key's server before the release): the waiter's clock goes past it before its
// delta takes its snapshot, whichever server the holder used.
// Test only: ramp.debug_immv_local_waits takes the former locks of one PostgreSQL server
// instead (lock objects per (log, table) and advisory locks per value), so that a test can
// show that they miss changes of writers on two servers.
constexpr const char kSerializeTag[] = "/* ramp_immv: serialize */";
constexpr const char kLockTag[] = "/* ramp_immv: lock */";
constexpr const char kDeltaTag[] = "/* ramp_immv: delta */";
constexpr std::string_view kWritersKey{"\0immv-writers", 13};
constexpr std::string_view kValueKey{"\0immv-value", 11};
// A statement whose rows have more values than this waits for all writers of the view
// instead (one intent instead of one per value).
constexpr int kMaxValueIntents = 64;

void LocalLocks(Oid log_oid, int base, int bases, bool serialize, const char* key_locks) {
  if (bases >= 2 || serialize) {
    for (int j = 1; j <= bases; ++j) {
      LockDatabaseObject(RelationRelationId, log_oid, static_cast<uint16>(j),
                         j != base   ? ShareLock
                         : serialize ? ExclusiveLock
                                     : RowExclusiveLock);
    }
  }
  if (key_locks == nullptr) return;
  const int32 space = DatumGetInt32(DirectFunctionCall1Coll(
      hashtext, DEFAULT_COLLATION_OID, CStringGetTextDatum(get_rel_name(log_oid))));
  for (uint64 i = 0; i < SPI_processed; ++i) {
    bool isnull = false;
    const Datum h = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
    if (!isnull) DirectFunctionCall2(pg_advisory_xact_lock_int4, Int32GetDatum(space), h);
  }
}

// A transaction that writes one base table of a join view (holding that table's group
// intent) and then another one (an order, then its items) waits for the other writers of
// the first table; when one of them does the same, the two wait for each other: 40P01 after
// deadlock_timeout, every time two such transactions overlap. pg_ivm avoids it by locking
// a view exclusively for every write, which also makes writers of one table take turns.
// Here a backend learns which views its transactions write several base tables of: from
// then on, its transaction blocks take such a view's writers intent exclusive at their first
// write (so a later write of another table holds what it needs), while writers of one table
// keep running side by side. A backend's first such transaction may still meet the
// deadlock. Returns whether the view is one of those.
struct ViewWriters {
  LocalTransactionId lxid = InvalidLocalTransactionId;
  std::vector<std::pair<Oid, int>> written;  // this transaction's (log, base table) waits
  std::vector<Oid> several;                  // views this backend writes several tables of
};
ViewWriters view_writers;

bool NoteBaseWritten(Oid log_oid, int base) {
  ViewWriters& v = view_writers;
  if (v.lxid != MyProc->lxid) {
    v.lxid = MyProc->lxid;
    v.written.clear();
  }
  bool another = false, same = false;
  for (const auto& [log, b] : v.written) {
    if (log != log_oid) continue;
    (b == base ? same : another) = true;
  }
  if (!same) v.written.emplace_back(log_oid, base);
  const bool known = std::find(v.several.begin(), v.several.end(), log_oid) != v.several.end();
  if (another && !known) v.several.push_back(log_oid);
  return another || known;
}

// Waits (cluster-wide) for the writers this one must follow; hashes: the values' (sorted),
// when key_locks. Returns once the clock is past the commits waited for.
void ClusterWaits(Oid log_oid, int base, int bases, bool serialize,
                  const std::vector<int32>& hashes, bool key_locks) {
  Relation rel = table_open(log_oid, AccessShareLock);
  const ramp::KeyspaceRef ks = pgramp::RelationKeyspace(rel);
  const std::string what =
      std::string("the writers of materialized view log \"") + RelationGetRelationName(rel) + "\"";
  table_close(rel, AccessShareLock);
  if (ks.fresh) return;  // created by this transaction: no one else writes the view
  const bool in_block = IsTransactionBlock();
  const bool writes_several = NoteBaseWritten(log_oid, base);
  pgramp::Boundary([&] {
    pgramp::XactState& x = pgramp::Xact();
    const bool may_write_another = bases >= 2 && in_block && writes_several;
    const bool all = serialize || may_write_another ||
                     (key_locks && hashes.size() > kMaxValueIntents) ||
                     static_cast<uint32_t>(base) >= ramp::kIntentGroups;
    const ramp::IntentMode mode = all ? ramp::IntentMode::kExclusive : ramp::GroupIntent(base);
    ramp::Timestamp newest;
    auto take = [&](std::string_view key, ramp::IntentMode m) {
      ramp::Timestamp latest;
      if (!pgramp::tam::LockKey(ks, key, m, what, &latest)) return;
      if (latest > newest) newest = latest;
      pgramp::Session::Get().Check(x.writes.PutKey(ks.id, key, ""), "noting a view's writer");
    };
    take(kWritersKey, mode);
    if (key_locks && !all) {
      std::string key(kValueKey);
      for (int32 h : hashes) {
        key.resize(kValueKey.size());
        key.append(pgramp::EncodeU64(static_cast<uint32_t>(h)));
        take(key, ramp::IntentMode::kExclusive);
      }
    }
    if (newest == ramp::Timestamp()) return;
    // The delta's snapshot is the wall clock (Session::StatementSnapshot): let it pass the
    // newest commit of a holder, as that holder's own COMMIT does before it returns (its
    // release went out before that wait), and let this transaction's commit come after.
    pgramp::Session::Get().client().AdvanceClock(newest.time);
    for (int spins = 0; !ramp::HybridClock::Reached(newest.time) && spins < 10000; spins++) {
      std::this_thread::sleep_for(std::chrono::microseconds(10));
    }
  });
}

// Test only (ramp.debug_immv_separate_put_ms): the log's keyspace is committed apart.
void NoteViewLog(Oid log_oid) {
  Relation rel = table_open(log_oid, AccessShareLock);
  pgramp::Boundary([&] { pgramp::Xact().view_logs.push_back(pgramp::RelationKeyspace(rel).id); });
  table_close(rel, AccessShareLock);
}

constexpr const char* kCatalogQuery =
    "SELECT s.sql, c.relowner, c.oid, pg_catalog.cardinality(i.base_tables)"
    " FROM ramp.immv_sql s"
    " JOIN ramp.immvs i ON i.name OPERATOR(pg_catalog.=) s.immv"
    " JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) "
    "pg_catalog.to_regclass(i.log_table)"
    " JOIN pg_catalog.pg_roles r ON r.rolname OPERATOR(pg_catalog.=) i.owner"
    " AND r.oid OPERATOR(pg_catalog.=) c.relowner"
    " WHERE s.immv OPERATOR(pg_catalog.=) $1 AND s.base OPERATOR(pg_catalog.=) $2"
    " AND s.kind OPERATOR(pg_catalog.=) $3";
SPIPlanPtr catalog_plan = nullptr;

// Plans of delta statements, by their text (saved SPI plans: the plan cache revalidates them
// after DDL; the transition tables are found by name when they run).
constexpr int kPlanCacheSize = 64;
constexpr int64 kCachedPlanMaxRows = 64;
struct CachedDeltaPlan {
  char* sql;
  SPIPlanPtr plan;
};
CachedDeltaPlan plan_cache[kPlanCacheSize];
int plan_cache_next = 0;

SPIPlanPtr DeltaPlan(const char* sql) {
  for (CachedDeltaPlan& entry : plan_cache) {
    if (entry.sql != nullptr && strcmp(entry.sql, sql) == 0) return entry.plan;
  }
  SPIPlanPtr plan = SPI_prepare(sql, 0, nullptr);
  if (plan == nullptr) elog(ERROR, "preparing a materialized view's maintenance failed");
  if (SPI_keepplan(plan) != 0) elog(ERROR, "SPI_keepplan failed");
  CachedDeltaPlan& slot = plan_cache[plan_cache_next];
  plan_cache_next = (plan_cache_next + 1) % kPlanCacheSize;
  if (slot.plan != nullptr) SPI_freeplan(slot.plan);
  if (slot.sql != nullptr) pfree(slot.sql);
  slot.sql = MemoryContextStrdup(TopMemoryContext, sql);
  slot.plan = plan;
  return plan;
}

int64 TransitionRows(TriggerData* td) {
  int64 rows = 0;
  if (td->tg_newtable != nullptr) rows += tuplestore_tuple_count(td->tg_newtable);
  if (td->tg_oldtable != nullptr) rows += tuplestore_tuple_count(td->tg_oldtable);
  return rows;
}

// An UPDATE's old and new transition rows together, as the relation __ramp_both: the delta
// of an EXISTS / IN condition asks for the outer rows that match either (compile.cpp,
// SubLinkTerm). One EXISTS over both lets the planner join from the few transition rows to
// the outer table's index; EXISTS (new) OR EXISTS (old) is a filter on a scan of the whole
// outer table, every statement. Returns the copy (the caller ends it), or nullptr.
Tuplestorestate* RegisterBothTransitions(TriggerData* td) {
  if (td->tg_newtable == nullptr || td->tg_oldtable == nullptr) return nullptr;
  Tuplestorestate* both = tuplestore_begin_heap(false, false, work_mem);
  TupleTableSlot* slot =
      MakeSingleTupleTableSlot(RelationGetDescr(td->tg_relation), &TTSOpsMinimalTuple);
  for (Tuplestorestate* rows : {td->tg_oldtable, td->tg_newtable}) {
    // A read pointer of our own, as the executor's scans of a transition table take theirs
    // (and select it before every read).
    const int ptr = tuplestore_alloc_read_pointer(rows, 0);
    tuplestore_select_read_pointer(rows, ptr);
    tuplestore_rescan(rows);
    while (tuplestore_gettupleslot(rows, true, false, slot)) tuplestore_puttupleslot(both, slot);
    tuplestore_select_read_pointer(rows, 0);
  }
  ExecDropSingleTupleTableSlot(slot);
  auto* enr = static_cast<EphemeralNamedRelation>(palloc0(sizeof(EphemeralNamedRelationData)));
  enr->md.name = pstrdup("__ramp_both");
  enr->md.reliddesc = RelationGetRelid(td->tg_relation);
  enr->md.tupdesc = nullptr;
  enr->md.enrtype = ENR_NAMED_TUPLESTORE;
  enr->md.enrtuples = static_cast<double>(tuplestore_tuple_count(both));
  enr->reldata = both;
  if (SPI_register_relation(enr) != SPI_OK_REL_REGISTER) {
    elog(ERROR, "SPI_register_relation(__ramp_both) failed");
  }
  return both;
}

}  // namespace

extern "C" {

PG_FUNCTION_INFO_V1(ramp_immv_maintain);
Datum ramp_immv_maintain(PG_FUNCTION_ARGS) {
  if (!CALLED_AS_TRIGGER(fcinfo)) {
    ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                    errmsg("ramp._immv_maintain() must be called as a trigger")));
  }
  auto* td = reinterpret_cast<TriggerData*>(fcinfo->context);
  const char* event = EventName(td);
  if (!TRIGGER_FIRED_AFTER(td->tg_event) || !TRIGGER_FIRED_FOR_STATEMENT(td->tg_event) ||
      event == nullptr || td->tg_trigger->tgnargs != 2) {
    ereport(ERROR, (errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
                    errmsg("ramp._immv_maintain() must be an AFTER ... FOR EACH STATEMENT "
                           "trigger with two arguments (view, base table number)")));
  }
  const char* view = td->tg_trigger->tgargs[0];
  const int base = pg_strtoint32(td->tg_trigger->tgargs[1]);

  if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "SPI_connect failed");
  if (SPI_register_trigger_data(td) != SPI_OK_TD_REGISTER) {
    elog(ERROR, "SPI_register_trigger_data failed");
  }
  Oid saved_user;
  int saved_context;
  GetUserIdAndSecContext(&saved_user, &saved_context);
  const int guc_level = NewGUCNestLevel();
  (void)set_config_option("search_path", "pg_catalog, pg_temp", PGC_USERSET, PGC_S_SESSION,
                          GUC_ACTION_SAVE, true, 0, false);
  // The catalog is read as the bootstrap superuser: writers need no privilege on schema ramp
  // (the query is fixed and fully qualified).
  SetUserIdAndSecContext(BOOTSTRAP_SUPERUSERID, saved_context | SECURITY_LOCAL_USERID_CHANGE |
                                                    SECURITY_RESTRICTED_OPERATION);
  Oid argtypes[3] = {TEXTOID, INT4OID, TEXTOID};
  Datum args[3] = {CStringGetTextDatum(view), Int32GetDatum(base), CStringGetTextDatum(event)};
  if (catalog_plan == nullptr) {
    SPIPlanPtr plan = SPI_prepare(kCatalogQuery, 3, argtypes);
    if (plan == nullptr) elog(ERROR, "preparing the lookup in ramp.immv_sql failed");
    if (SPI_keepplan(plan) != 0) elog(ERROR, "SPI_keepplan failed");
    catalog_plan = plan;
  }
  const int rc = SPI_execute_plan(catalog_plan, args, nullptr, true, 1);
  if (rc != SPI_OK_SELECT) elog(ERROR, "reading ramp.immv_sql failed");
  if (SPI_processed != 1) {
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("materialized view %s has no maintenance for %s on its base table %d",
                           view, event, base),
                    errhint("ramp.immvs and ramp.immv_sql must name the view, and the view's "
                            "owner must own its log table; recreate the view.")));
  }
  char* sql = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
  bool isnull = false;
  const Oid owner =
      DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));

  const Oid log_oid =
      DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull));
  const int bases =
      DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &isnull));
  const bool serialize = strncmp(sql, kSerializeTag, sizeof(kSerializeTag) - 1) == 0;
  // Before the statement taking the keys' locks, which may read it too (GroupLocks).
  Tuplestorestate* both =
      strstr(sql, "__ramp_both") != nullptr ? RegisterBothTransitions(td) : nullptr;
  const char* key_locks = nullptr;
  if (strncmp(sql, kLockTag, sizeof(kLockTag) - 1) == 0) {
    char* delta = strstr(sql, kDeltaTag);
    if (delta == nullptr) elog(ERROR, "materialized view %s: malformed maintenance SQL", view);
    *delta = '\0';
    key_locks = sql;
    sql = delta + sizeof(kDeltaTag) - 1;
  }
  std::vector<int32> hashes;
  if (key_locks != nullptr) {
    if (SPI_execute(key_locks, false, 0) != SPI_OK_SELECT) {
      elog(ERROR, "reading the keys of materialized view %s failed", view);
    }
    if (!pgramp::guc::debug_immv_local_waits) {
      for (uint64 i = 0; i < SPI_processed; ++i) {
        bool null = false;
        const Datum h = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &null);
        if (!null) hashes.push_back(DatumGetInt32(h));
      }
      std::sort(hashes.begin(), hashes.end());
    }
  }
  if (pgramp::guc::debug_immv_local_waits) {
    LocalLocks(log_oid, base, bases, serialize, key_locks);
  } else if (bases >= 2 || serialize || key_locks != nullptr) {
    ClusterWaits(log_oid, base, bases, serialize, hashes, key_locks != nullptr);
  }
  if (pgramp::guc::debug_immv_separate_put_ms > 0) NoteViewLog(log_oid);
  // Having waited for them, read what the writers of the other base tables committed.
  if (bases >= 2 || serialize || key_locks != nullptr) {
    pgramp::Session::Get().SetNestedStatementStart(GetCurrentTimestamp());
  }

  // Statements that changed few rows (the common case) reuse a plan of the delta statement;
  // larger ones are planned for their transition tables' size.
  const bool small = TransitionRows(td) <= kCachedPlanMaxRows;

  // The view's delta is written as the view's owner.
  SetUserIdAndSecContext(
      owner, saved_context | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
  const int result = small ? SPI_execute_plan(DeltaPlan(sql), nullptr, nullptr, false, 0)
                           : SPI_execute(sql, false, 0);
  if (both != nullptr) tuplestore_end(both);
  if (result < 0) elog(ERROR, "maintaining materialized view %s failed (SPI %d)", view, result);
  pgramp::Session::Get().SetNestedStatementStart(0);
  SetUserIdAndSecContext(saved_user, saved_context);
  AtEOXact_GUC(true, guc_level);
  SPI_finish();
  return PointerGetDatum(nullptr);
}

}  // extern "C"
