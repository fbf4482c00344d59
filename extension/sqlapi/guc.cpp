// ramp.* settings.
#include <cstdio>
#include <vector>

#include "ramp/status.h"
#include "ramp/transport/endpoint.h"

#include "boundary/pg.hpp"
#include "sqlapi/guc.hpp"

namespace pgramp::guc {

char* nodes = nullptr;
int transport = 0;
int read_path = 2;
int timeout_ms = 10000;
int connect_timeout_ms = 5000;
char* token_file = nullptr;
int buckets = 16;
int write_ahead_rows = 16384;
int scan_method = 0;
bool rescan_cache = true;
bool heap_parallel_workers = true;
double row_fetch_cost = 1.5;
double scan_row_cost = 0.03;
bool row_locks = true;
int address_cache_entries = -1;
int debug_commit_delay_us = 0;
bool debug_unchecked_lookups = false;
bool debug_hash_all_rows = false;
bool debug_scan_own_snapshots = false;
bool debug_scan_full_path = false;
int debug_immv_separate_put_ms = 0;
bool debug_immv_local_waits = false;

namespace {

// The names the client library parses (ParseClientOptions); order = GUC enum values.
const struct config_enum_entry kTransportOptions[] = {
    {"shm", 0, false}, {"tcp", 1, false}, {"verbs", 2, false}, {nullptr, 0, false}};
const struct config_enum_entry kScanMethodOptions[] = {
    {"auto", 0, false}, {"probe", 1, false}, {"pages", 2, false}, {nullptr, 0, false}};
const struct config_enum_entry kReadPathOptions[] = {
    {"rpc", 0, false}, {"get+", 1, false}, {"get*", 2, false}, {nullptr, 0, false}};

uint64_t generation = 1;

bool CheckNodes(char** newval, void** extra, GucSource source) {
  if (*newval == nullptr || **newval == '\0') return true;
  char error[512] = "";
  bool ok = false;
  try {
    std::vector<ramp::transport::Endpoint> endpoints;
    ramp::Status s = ramp::transport::ParseEndpointList(*newval, &endpoints);
    if (s.ok()) {
      ok = true;
    } else {
      snprintf(error, sizeof error, "%s", s.message().c_str());
    }
  } catch (...) {
    snprintf(error, sizeof error, "could not parse the endpoint list");
  }
  if (!ok) {
    GUC_check_errdetail("%s", error);
    GUC_check_errhint(
        "ramp.nodes is a comma-separated list such as "
        "'tcp://10.0.0.5:7400,tcp://10.0.0.6:7400'.");
  }
  return ok;
}

void BumpString(const char* newval, void* extra) {
  generation++;
}
void BumpInt(int newval, void* extra) {
  generation++;
}

}  // namespace

const char* TransportName() {
  return kTransportOptions[transport].name;
}
const char* ReadPathName() {
  return kReadPathOptions[read_path].name;
}
uint64_t ConfigGeneration() {
  return generation;
}

void Define() {
  DefineCustomStringVariable(
      "ramp.nodes", "Seed servers of the ramp cluster (comma-separated endpoints).",
      "For example tcp://10.0.0.5:7400,tcp://10.0.0.6:7400; the servers tell the client "
      "about the rest of the cluster.",
      &nodes, "", PGC_USERSET, 0, CheckNodes, BumpString, nullptr);
  DefineCustomEnumVariable("ramp.transport",
                           "Provider of the ring and one-sided connections (shm, tcp, verbs).",
                           "The rpc read path always uses tcp.", &transport, 0, kTransportOptions,
                           PGC_USERSET, 0, nullptr, BumpInt, nullptr);
  DefineCustomEnumVariable(
      "ramp.scan_method", "How sequential scans read ramp tables (auto, probe, pages).",
      "pages: the partitions' pages through remote page I/O (one snapshot per scan); probe: "
      "row-id lookups in batches; auto: pages for tables beyond 32768 row ids. Parallel page "
      "scans share one snapshot and give each worker whole partitions.",
      &scan_method, 0, kScanMethodOptions, PGC_USERSET, 0, nullptr, nullptr, nullptr);
  DefineCustomBoolVariable(
      "ramp.rescan_cache", "Whether rescans of a ramp table replay the rows of an earlier pass.",
      "A rescanned sequential scan (the inner side of a nested loop) keeps the rows it read, up "
      "to work_mem, and replays them with the scan's snapshot instead of reading the table "
      "from the cluster again.",
      &rescan_cache, true, PGC_USERSET, 0, nullptr, nullptr, nullptr);
  DefineCustomBoolVariable(
      "ramp.heap_parallel_workers",
      "Whether scans of ramp tables get the parallel workers heap would plan for their rows.",
      "The planner gives a scan one more worker at every tripling of the table's pages; a ramp "
      "table's pages are its bytes on the servers (about 1.45x heap's). On: the workers follow "
      "the pages heap would need for the same rows (width from the statistics); costs keep the "
      "servers' pages. A parallel_workers reloption wins.",
      &heap_parallel_workers, true, PGC_USERSET, 0, nullptr, nullptr, nullptr);
  DefineCustomRealVariable(
      "ramp.row_fetch_cost",
      "The planner's cost of fetching one row of a ramp table through an index.",
      "Added per row to the cost of index scans of ramp tables (not ramp_hash's, whose "
      "estimate counts its reads), in units of seq_page_cost.",
      &row_fetch_cost, 1.5, 0, 1e6, PGC_USERSET, 0, nullptr, nullptr, nullptr);
  DefineCustomRealVariable(
      "ramp.scan_row_cost",
      "The planner's cost of each row a sequential scan of a ramp table reads.",
      "Added per row read (each participant's share of a parallel scan) to the cost of "
      "sequential scans of ramp tables, in units of seq_page_cost: the client decodes and "
      "checks every row, which costs more than cpu_tuple_cost says.",
      &scan_row_cost, 0.03, 0, 1e6, PGC_USERSET, 0, nullptr, nullptr, nullptr);
  DefineCustomEnumVariable("ramp.read_path", "How reads reach the servers (rpc, get+, get*).",
                           "rpc: request/response over sockets; get+: requests through message "
                           "rings; get*: one-sided reads with an address cache.",
                           &read_path, 2, kReadPathOptions, PGC_USERSET, 0, nullptr, BumpInt,
                           nullptr);
  DefineCustomIntVariable(
      "ramp.timeout_ms", "How long a request to the ramp cluster may wait for an answer.", nullptr,
      &timeout_ms, 10000, 1, 3600 * 1000, PGC_USERSET, GUC_UNIT_MS, nullptr, BumpInt, nullptr);
  DefineCustomIntVariable("ramp.connect_timeout_ms",
                          "How long connecting to a ramp server may take.", nullptr,
                          &connect_timeout_ms, 5000, 1, 600 * 1000, PGC_USERSET, GUC_UNIT_MS,
                          nullptr, BumpInt, nullptr);
  DefineCustomStringVariable("ramp.token_file",
                             "File holding the cluster token that authenticates this client.",
                             "Empty: no token (clusters started without --token-file).",
                             &token_file, "", PGC_SUSET, 0, nullptr, BumpString, nullptr);
  DefineCustomIntVariable("ramp.buckets", "Partitions of a new ramp table or index.",
                          "Fixed when the relation's storage is created (CREATE, TRUNCATE).",
                          &buckets, 16, 1, 65536, PGC_USERSET, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable(
      "ramp.write_ahead_rows",
      "Rows a bulk load into a table created or truncated by its transaction commits ahead of "
      "the transaction, per RAMP PUT.",
      "Such a table is seen by no one else before the transaction commits: its rows go to the "
      "cluster in PUTs of this many while the load runs, and COMMIT has only the rest to send. "
      "0: every row is sent at COMMIT.",
      &write_ahead_rows, 16384, 0, 1 << 20, PGC_USERSET, 0, nullptr, nullptr, nullptr);
  DefineCustomIntVariable("ramp.debug_commit_delay_us",
                          "Test only: commits reach one server this long before the others.",
                          nullptr, &debug_commit_delay_us, 0, 0, 10 * 1000 * 1000, PGC_SUSET,
                          GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE, nullptr, BumpInt, nullptr);
  DefineCustomBoolVariable(
      "ramp.row_locks", "Lock ramp rows on the cluster for UPDATE, DELETE and FOR UPDATE/SHARE.",
      "On: a row another transaction is changing is waited for, then its newest version is "
      "re-checked (EvalPlanQual), as heap does. Off: no row locks; a concurrent change makes "
      "the commit fail with a serialization failure (40001).",
      &row_locks, true, PGC_USERSET, 0, nullptr, nullptr, nullptr);
  DefineCustomBoolVariable("ramp.debug_unchecked_lookups",
                           "Test only: ramp_hash lookups skip their consistency check.", nullptr,
                           &debug_unchecked_lookups, false, PGC_SUSET,
                           GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE, nullptr, nullptr, nullptr);
  DefineCustomBoolVariable("ramp.debug_hash_all_rows",
                           "Test only: ramp_hash index scans read every row of a value at once "
                           "instead of the first one first.",
                           nullptr, &debug_hash_all_rows, false, PGC_USERSET,
                           GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE, nullptr, nullptr, nullptr);
  DefineCustomBoolVariable("ramp.debug_scan_own_snapshots",
                           "Test only: every page scan, and every participant of a parallel "
                           "one, reads at a snapshot of its own instead of the statement's.",
                           nullptr, &debug_scan_own_snapshots, false, PGC_SUSET,
                           GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE, nullptr, nullptr, nullptr);
  DefineCustomBoolVariable("ramp.debug_scan_full_path",
                           "Test only: sequential scans hand every row out through the full "
                           "path instead of the fast one for rows of page scans.",
                           nullptr, &debug_scan_full_path, false, PGC_USERSET,
                           GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE, nullptr, nullptr, nullptr);
  DefineCustomIntVariable("ramp.debug_immv_separate_put_ms",
                          "Test only: materialized-view deltas commit in a RAMP PUT of their own, "
                          "this long after the base rows.",
                          nullptr, &debug_immv_separate_put_ms, 0, 0, 60 * 1000, PGC_SUSET,
                          GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE, nullptr, nullptr, nullptr);
  DefineCustomBoolVariable("ramp.debug_immv_local_waits",
                           "Test only: materialized views' writers wait for each other with "
                           "locks of this PostgreSQL server instead of the cluster's intents.",
                           nullptr, &debug_immv_local_waits, false, PGC_SUSET,
                           GUC_NO_SHOW_ALL | GUC_NOT_IN_SAMPLE, nullptr, nullptr, nullptr);
  // A PGC_POSTMASTER setting can only be defined while the library is preloaded (loading it
  // later would fail the backend); without preloading there is no shared cache to size.
  if (process_shared_preload_libraries_in_progress) {
    DefineCustomIntVariable(
        "ramp.address_cache_entries",
        "Row addresses the backends of this server share for one-sided reads (GET*).",
        "Needs pg_ramp in shared_preload_libraries; each entry takes 64 bytes of shared memory. "
        "-1: half of shared_buffers' size (at least 524288 entries). 0, or without "
        "preloading: each backend keeps its own cache.",
        &address_cache_entries, -1, -1, 64 * 1024 * 1024, PGC_POSTMASTER, 0, nullptr, nullptr,
        nullptr);
  }
  MarkGUCPrefixReserved("ramp");
}

}  // namespace pgramp::guc
