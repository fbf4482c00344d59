// State shared by every worker of one rampd: the store, the directory, the lock table, the
// clock, limits and counters.
#pragma once

#include <atomic>
#include <cstdint>
#include <shared_mutex>
#include <string>

#include "ramp/hlc.h"
#include "server/cluster_config.h"
#include "server/directory.h"
#include "server/intent_table.h"
#include "server/lock_table.h"
#include "store/store.h"

namespace ramp::server {

struct Limits {
  size_t max_key_bytes = 4096;
  size_t max_value_bytes = 32u << 20;
  size_t max_batch_items = 1u << 20;
  size_t max_connections = 1024;
};

class PageService;
class InDoubt;
class Migrations;
class Membership;

struct ServerContext {
  store::Store* store = nullptr;
  PageService* pages = nullptr;  // remote page I/O (null: READ_PAGES is refused)
  Directory* directory = nullptr;
  LockTable* locks = nullptr;
  IntentTable* intents = nullptr;    // write intents (row locks of SQL writers)
  InDoubt* in_doubt = nullptr;       // recovered transactions still undecided (in_doubt.h)
  Migrations* migrations = nullptr;  // live migration (migration.h)
  HybridClock* clock = nullptr;
  Membership* membership = nullptr;  // the cluster file as it is now (membership.h)
  uint32_t self = 0;
  uint64_t instance = 0;  // random per start: clients drop cached addresses when it changes
  uint64_t started_ms = 0;
  Limits limits;
  bool test_ack_before_durable = false;  // ServerOptions::test_ack_before_durable
  // SCAN_OPEN raises watermarks holding it shared; a strict-2PL WRITE_LOCKED draws its
  // timestamp above its partitions' watermarks and installs its versions holding it
  // exclusively, so that no scan opens between the two (its snapshot could be above the
  // timestamp, and the versions would appear in its pages late).
  std::shared_mutex watermarks_mu;
  std::atomic<uint64_t> ops{0};
  std::atomic<uint64_t> connections{0};
  std::atomic<uint64_t> next_session{1};
};

}  // namespace ramp::server
