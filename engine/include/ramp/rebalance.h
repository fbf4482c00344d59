// The hot-partition rebalancer's decision (DESIGN §7): from the partitions' loads (decaying
// operations per second at their owners, one-sided reads reported by clients included),
// which partitions to move so that no server carries much more than the mean. A pure
// function, shared by the servers' rebalancer loop and the dry runs (rampctl rebalance
// --dry-run, ramp.rebalance(dry_run => true)).
//
// Rules, to converge and never thrash:
//  - nothing moves while max / mean load is at or below `threshold`;
//  - each move goes from the most loaded server to the least loaded one and must lower the
//    most loaded server's load by at least `hysteresis` x mean (small gains are not worth a
//    move, and a move that would only swap which server is the hottest is never made);
//  - a partition moved less than `cooldown_ms` ago, or migrating now, does not move;
//  - at most `max_moves` per plan.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ramp/client.h"

namespace ramp {

struct RebalanceOptions {
  double threshold = 1.25;
  double hysteresis = 0.05;
  uint64_t cooldown_ms = 60000;
  int max_moves = 4;
  double min_total_load = 10;  // ops/s over the whole cluster below which nothing moves
};

struct PlannedMove {
  PartitionId id;
  uint32_t from = 0;
  uint32_t to = 0;
  double load = 0;
};

struct RebalancePlan {
  std::vector<double> load_before;  // per node
  std::vector<double> load_after;
  double imbalance_before = 0;  // max / mean
  double imbalance_after = 0;
  std::vector<PlannedMove> moves;
  std::string why;  // why nothing (more) moves
};

// last_moved_ms: when each partition last moved (unix ms); now_ms likewise.
RebalancePlan PlanRebalance(const std::vector<PartitionStatus>& partitions, uint32_t nodes,
                            const std::map<PartitionId, uint64_t>& last_moved_ms, uint64_t now_ms,
                            const RebalanceOptions& options);

}  // namespace ramp
