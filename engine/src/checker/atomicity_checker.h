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

#include "ramp/client.h"
#include "ramp/status.h"

namespace ramp::checker {

struct AtomicityCheckOptions {
  ClientOptions client;  // each thread opens its own Client with these options
  KeyspaceId keyspace = 0xA70311C17E57ull;
  int writers = 2;
  int readers = 2;
  int groups = 8;
  int keys_per_group = 6;
  int duration_ms = 3000;
  // Stop every thread at the first fractured read.
  bool stop_at_first_fracture = false;
  // Errors writers and readers tolerate (e.g. while servers are killed and restarted):
  // when true, Unavailable/Timeout are counted and retried instead of failing the check.
  bool tolerate_unavailable = false;
  // Called by writers after each acknowledged commit with (group, tag) — crash tests use it
  // to remember what must survive.
  std::function<void(int group, uint64_t tag)> on_commit;
};

struct AtomicityReport {
  uint64_t commits = 0;
  uint64_t reads = 0;
  uint64_t fractured = 0;
  uint64_t errors_tolerated = 0;
  std::string first_fracture;  // what the first fractured read saw
  Status error;                // the first error not tolerated
  std::string Summary() const;
};

// Runs writers and readers for the duration and reports.
AtomicityReport RunAtomicityCheck(const AtomicityCheckOptions& options);

// The key of member i of group g.
std::string GroupMemberKey(int group, int member);

}  // namespace ramp::checker
