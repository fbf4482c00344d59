// GUCs of the extension (ramp.*). Defined in _PG_init.
#pragma once

#include <cstdint>

namespace pgramp::guc {

extern char* nodes;             // ramp.nodes: comma-separated seed endpoints
extern int transport;           // ramp.transport: index into kTransportNames
extern int read_path;           // ramp.read_path: index into kReadPathNames
extern int timeout_ms;          // ramp.timeout_ms
extern int connect_timeout_ms;  // ramp.connect_timeout_ms
extern char* token_file;        // ramp.token_file (superuser only)
extern int buckets;             // ramp.buckets: partitions of a new keyspace
// ramp.write_ahead_rows: bulk loads commit ahead in PUTs of this many rows
extern int write_ahead_rows;
extern int scan_method;        // ramp.scan_method: 0 auto, 1 probe, 2 pages
extern bool rescan_cache;      // ramp.rescan_cache: rescans replay an earlier pass's rows
extern double row_fetch_cost;  // ramp.row_fetch_cost: planner cost of a row fetched by TID
// ramp.address_cache_entries: shared GET* cache size (-1: from shared_buffers, see
// xact/shared_addresses.cpp)
extern int address_cache_entries;
extern bool row_locks;  // ramp.row_locks: UPDATE/DELETE/FOR UPDATE take write intents
// ramp.heap_parallel_workers: ramp scans get the parallel workers heap would plan
extern bool heap_parallel_workers;
// ramp.scan_row_cost: planner cost of each row a sequential scan of a ramp table reads
extern double scan_row_cost;
// Fault injection for tests (superuser, hidden): the client's debug_commit_delay_us, and
// ramp_hash lookups without their consistency check (the atomicity test proves with it
// that it catches fractured reads).
extern int debug_commit_delay_us;
extern bool debug_unchecked_lookups;
// Test only: ramp_hash index scans read all of a value's rows at once, as bitmap scans do
// (hashindex/scan.cpp reads the first row first): the tests compare the two.
extern bool debug_hash_all_rows;
// Test only: page scans (and each participant of a parallel one) draw their own snapshots
// instead of reading at the statement's (then not read-atomic with the statement's other reads).
extern bool debug_scan_own_snapshots;
// Test and benchmark only: sequential scans hand every row out through the full path
// (TableScan::Next inside a boundary) instead of the fast one for page-scanned rows
// (tableam/scan.cpp NextStableRow): the tests compare the two.
extern bool debug_scan_full_path;
// Test only: a transaction's materialized-view deltas commit in a RAMP PUT of their own, this
// many milliseconds after the base rows' PUT (0: one PUT, the normal case; immv/).
extern int debug_immv_separate_put_ms;
// Test only: materialized views' writers wait with locks of one PostgreSQL server (lock
// objects, advisory locks) instead of the cluster's write intents (immv/maintain.cpp).
extern bool debug_immv_local_waits;

const char* TransportName();  // "shm", "tcp", "verbs"
const char* ReadPathName();   // "rpc", "get+", "get*"

// Bumped whenever a setting that shapes the client changes: the session reopens its client.
uint64_t ConfigGeneration();

void Define();

}  // namespace pgramp::guc
