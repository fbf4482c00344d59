// DROP DATABASE runs in another database, so no event trigger of the dropped database sees
// it: when this library is loaded in the backend that runs it (always, with pg_ramp in
// shared_preload_libraries or session_preload_libraries), a ProcessUtility hook removes
// from the cluster the keyspaces this PostgreSQL server registered for the dropped database
// (by oid, in the cluster's keyspace catalog). Otherwise ramp.collect_garbage(), run in any
// database of this server that has the extension, finds them (their database oid is no
// longer in pg_database).
#include "catalog/keyspace_catalog.hpp"

#include "boundary/boundary.hpp"

namespace pgramp {

namespace {

ProcessUtility_hook_type previous_process_utility = nullptr;

void OnProcessUtility(PlannedStmt* pstmt, const char* query_string, bool read_only_tree,
                      ProcessUtilityContext context, ParamListInfo params,
                      QueryEnvironment* query_env, DestReceiver* dest, QueryCompletion* qc) {
  Oid dropped = InvalidOid;
  if (IsA(pstmt->utilityStmt, DropdbStmt)) {
    auto* stmt = reinterpret_cast<DropdbStmt*>(pstmt->utilityStmt);
    dropped = get_database_oid(stmt->dbname, true);
  }
  if (previous_process_utility != nullptr) {
    previous_process_utility(pstmt, query_string, read_only_tree, context, params, query_env, dest,
                             qc);
  } else {
    standard_ProcessUtility(pstmt, query_string, read_only_tree, context, params, query_env, dest,
                            qc);
  }
  // The database is gone (DROP DATABASE cannot run in a transaction block and removed its
  // files already); best effort: ramp.collect_garbage() finds what this misses.
  if (OidIsValid(dropped) && ClusterCatalogEnabled()) {
    BoundaryWarn(
        "could not remove the ramp keyspaces of the dropped database (run SELECT "
        "ramp.collect_garbage() in another database of this server later)",
        [&] { DropDatabaseKeyspaces(dropped); });
  }
}

}  // namespace

void InstallDropDatabaseHook() {
  previous_process_utility = ProcessUtility_hook;
  ProcessUtility_hook = OnProcessUtility;
}

}  // namespace pgramp
