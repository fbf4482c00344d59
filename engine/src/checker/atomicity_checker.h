// The read-atomicity checker (DESIGN §10): writer transactions write one tag to every key of
// a group spread over partitions and servers; readers read whole groups and report a
// fractured read when the tags they get are not all the same. Used by tests (which also
// prove it catches fractured reads when RAMP's second round is switched off) and by the
// ramp_check tool under load, migrations and restarts.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ramp/client.h"
#include "ramp/status.h"

namespace ramp::checker {

struct AtomicityCheckOptions {
  ClientOptions client;  // each thread opens its own Client with these options (its own
                         // random client_id: the one given here is not used)
  KeyspaceId keyspace = 0xA70311C17E57ull;
  int writers = 2;
  int readers = 2;
  int groups = 8;
  int keys_per_group = 6;
  int duration_ms = 3000;
  // When set and true, the run ends early (as at the end of its duration).
  const std::atomic<bool>* cancel = nullptr;
  // Stop every thread at the first fractured read.
  bool stop_at_first_fracture = false;
  // Errors writers and readers tolerate (e.g. while servers are killed and restarted):
  // when true, Unavailable/Timeout are counted and retried instead of failing the check.
  bool tolerate_unavailable = false;
  // Also the other transient outcomes a fault can give (a conflict with a transaction left
  // prepared, an abort, a moved partition, no credits): counted and retried (fault harness).
  bool tolerate_transient = false;
  // When not empty, every writer transaction also writes one key of its own, ledger_prefix +
  // its tag, with the tag as value: a record that survives later overwrites of the group, so
  // that every acknowledged commit can be read back after the faults (VerifyLedger).
  std::string ledger_prefix;
  // Called by writers after each acknowledged commit with (group, tag) — crash tests use it
  // to remember what must survive.
  std::function<void(int group, uint64_t tag)> on_commit;
};

struct AtomicityReport {
  uint64_t commits = 0;
  uint64_t reads = 0;
  uint64_t fractured = 0;
  uint64_t errors_tolerated = 0;
  uint64_t max_wait_us = 0;    // the longest Commit or GetAll call, errors included
  std::string first_fracture;  // what the first fractured read saw
  // The writers' client ids (the client part of their commit timestamps); each run draws
  // new random ones, so that checkers running at once never share a timestamp.
  std::vector<uint64_t> writer_client_ids;
  Status error;  // the first error not tolerated
  std::string Summary() const;
};

// Runs writers and readers for the duration and reports.
AtomicityReport RunAtomicityCheck(const AtomicityCheckOptions& options);

// The key of member i of group g.
std::string GroupMemberKey(int group, int member);

// The ledger check after the faults healed: every key of `ledger` (ledger key -> the tag its
// acknowledged commit wrote) must be readable with that value; then every group is written
// once more (all members, one new tag), which fails while a transaction of the run is still
// prepared on one of its keys.
struct LedgerReport {
  uint64_t acknowledged = 0;
  uint64_t lost = 0;       // not found, or another value
  std::string first_lost;  // key and what was read
  uint64_t groups_rewritten = 0;
  std::string rewrite_error;  // the first group that could not be written (empty: none)
  Status error;               // the reads themselves failed
  std::string Summary() const;
};
LedgerReport VerifyLedger(const AtomicityCheckOptions& options,
                          const std::vector<std::pair<std::string, std::string>>& ledger);

}  // namespace ramp::checker
