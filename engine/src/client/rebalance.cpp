#include "ramp/rebalance.h"

#include <algorithm>
#include <chrono>

namespace ramp {
namespace {

double Imbalance(const std::vector<double>& load) {
  double total = 0, max = 0;
  for (double l : load) {
    total += l;
    max = std::max(max, l);
  }
  return total > 0 ? max / (total / static_cast<double>(load.size())) : 1.0;
}

}  // namespace

RebalancePlan PlanRebalance(const std::vector<PartitionStatus>& partitions, uint32_t nodes,
                            const std::map<PartitionId, uint64_t>& last_moved_ms, uint64_t now_ms,
                            const RebalanceOptions& options) {
  RebalancePlan plan;
  plan.load_before.assign(nodes, 0.0);
  std::vector<std::vector<const PartitionStatus*>> owned(nodes);
  double total = 0;
  for (const PartitionStatus& p : partitions) {
    if (p.owner >= nodes) continue;
    plan.load_before[p.owner] += p.ops_per_sec;
    owned[p.owner].push_back(&p);
    total += p.ops_per_sec;
  }
  plan.load_after = plan.load_before;
  plan.imbalance_before = plan.imbalance_after = Imbalance(plan.load_before);
  if (nodes < 2) {
    plan.why = "a single server";
    return plan;
  }
  if (total < options.min_total_load) {
    plan.why = "the cluster is idle";
    return plan;
  }
  const double mean = total / nodes;
  std::vector<PartitionId> moved;
  for (;;) {
    std::vector<double>& load = plan.load_after;
    plan.imbalance_after = Imbalance(load);
    if (plan.imbalance_after <= options.threshold) {
      plan.why = "balanced: max/mean load " + std::to_string(plan.imbalance_after) +
                 " <= " + std::to_string(options.threshold);
      return plan;
    }
    if (static_cast<int>(plan.moves.size()) >= options.max_moves) {
      plan.why = "at most " + std::to_string(options.max_moves) + " moves per plan";
      return plan;
    }
    const auto hot =
        static_cast<uint32_t>(std::max_element(load.begin(), load.end()) - load.begin());
    const auto cold =
        static_cast<uint32_t>(std::min_element(load.begin(), load.end()) - load.begin());
    // The partition whose move lowers the hottest server the most without making the
    // coldest one hotter than the hottest was.
    const PartitionStatus* best = nullptr;
    double best_peak = load[hot];
    for (const PartitionStatus* p : owned[hot]) {
      if (p->migrating || std::find(moved.begin(), moved.end(), p->id) != moved.end()) continue;
      auto lm = last_moved_ms.find(p->id);
      if (lm != last_moved_ms.end() && now_ms < lm->second + options.cooldown_ms) continue;
      const double peak = std::max(load[hot] - p->ops_per_sec, load[cold] + p->ops_per_sec);
      if (peak < best_peak) {
        best_peak = peak;
        best = p;
      }
    }
    if (best == nullptr || load[hot] - best_peak < options.hysteresis * mean) {
      plan.why = "no move of a partition (outside its cool-down) off node " + std::to_string(hot) +
                 " lowers its load by " + std::to_string(options.hysteresis) + " x mean or more";
      return plan;
    }
    plan.moves.push_back(PlannedMove{best->id, hot, cold, best->ops_per_sec});
    moved.push_back(best->id);
    load[hot] -= best->ops_per_sec;
    load[cold] += best->ops_per_sec;
    owned[cold].push_back(best);
    std::erase(owned[hot], best);
  }
}

Status Client::PlanRebalance(const RebalanceOptions& options, RebalancePlan* out) {
  std::vector<PartitionStatus> parts;
  RAMP_RETURN_IF_ERROR(Partitions(&parts));
  std::vector<MigrationStatus> moves;
  RAMP_RETURN_IF_ERROR(Migrations(&moves));
  std::map<PartitionId, uint64_t> last;
  for (const MigrationStatus& m : moves) {
    if (m.phase != "done") continue;
    uint64_t& t = last[m.id];
    t = std::max(t, m.started_unix_ms);
  }
  const auto now = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                             std::chrono::system_clock::now().time_since_epoch())
                                             .count());
  *out = ramp::PlanRebalance(parts, node_count(), last, now, options);
  return Status::OK();
}

}  // namespace ramp
