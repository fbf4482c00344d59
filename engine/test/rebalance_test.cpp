// The rebalancer's decision (ramp/rebalance.h): it moves the hottest partitions off the
// most loaded server until max/mean is under the threshold, never moves a partition in its
// cool-down, never makes a move that only shifts the hot spot, and a plan applied and planned
// again moves nothing more (no thrashing).
#include "ramp/rebalance.h"

#include <gtest/gtest.h>

#include <set>

namespace ramp {
namespace {

PartitionStatus P(uint32_t bucket, uint32_t owner, double load) {
  PartitionStatus s;
  s.id = PartitionId{7, bucket};
  s.owner = owner;
  s.ops_per_sec = load;
  return s;
}

std::vector<PartitionStatus> Apply(std::vector<PartitionStatus> parts, const RebalancePlan& plan) {
  for (const PlannedMove& m : plan.moves) {
    for (auto& p : parts) {
      if (p.id == m.id) p.owner = m.to;
    }
  }
  return parts;
}

TEST(RebalanceTest, BalancedClusterStaysPut) {
  std::vector<PartitionStatus> parts = {P(0, 0, 100), P(1, 1, 110), P(2, 2, 95), P(3, 0, 10)};
  RebalancePlan plan = PlanRebalance(parts, 3, {}, 0, RebalanceOptions());
  EXPECT_TRUE(plan.moves.empty()) << plan.why;
  EXPECT_NE(plan.why.find("balanced"), std::string::npos) << plan.why;
}

TEST(RebalanceTest, HotServerIsRelievedAndThePlanIsStable) {
  // Node 0 carries a Zipf-like hot set, nodes 1..3 little.
  std::vector<PartitionStatus> parts;
  const double hot[] = {300, 150, 100, 75, 60, 50, 43, 37};
  for (uint32_t b = 0; b < 8; b++) parts.push_back(P(b, 0, hot[b]));
  for (uint32_t b = 8; b < 16; b++) parts.push_back(P(b, 1 + b % 3, 20));
  RebalanceOptions o;
  o.max_moves = 16;
  RebalancePlan plan = PlanRebalance(parts, 4, {}, 0, o);
  EXPECT_GT(plan.imbalance_before, 2.0);
  EXPECT_FALSE(plan.moves.empty());
  EXPECT_EQ(plan.moves.front().from, 0u);
  EXPECT_EQ(plan.moves.front().id, (PartitionId{7, 0}));  // the hottest first
  std::set<PartitionId> once;
  for (const auto& m : plan.moves) EXPECT_TRUE(once.insert(m.id).second) << "moved twice";
  EXPECT_LE(plan.imbalance_after, o.threshold) << plan.why;
  // Planned again on the result: nothing moves (and nothing would move back).
  RebalancePlan again = PlanRebalance(Apply(parts, plan), 4, {}, 0, o);
  EXPECT_TRUE(again.moves.empty()) << again.why;
}

TEST(RebalanceTest, PartitionsInTheirCoolDownDoNotMove) {
  std::vector<PartitionStatus> parts = {P(0, 0, 500), P(1, 0, 300), P(2, 1, 10), P(3, 2, 10)};
  RebalanceOptions o;
  std::map<PartitionId, uint64_t> last = {{PartitionId{7, 0}, 1000}, {PartitionId{7, 1}, 1000}};
  RebalancePlan plan = PlanRebalance(parts, 3, last, 1000 + o.cooldown_ms - 1, o);
  EXPECT_TRUE(plan.moves.empty()) << plan.why;
  EXPECT_NE(plan.why.find("cool-down"), std::string::npos) << plan.why;
  plan = PlanRebalance(parts, 3, last, 1000 + o.cooldown_ms, o);
  EXPECT_FALSE(plan.moves.empty()) << plan.why;
}

TEST(RebalanceTest, OneHugePartitionIsNotBouncedAround) {
  // Moving the only hot partition would just make another server the hot one.
  std::vector<PartitionStatus> parts = {P(0, 0, 1000), P(1, 1, 10), P(2, 2, 10)};
  RebalancePlan plan = PlanRebalance(parts, 3, {}, 0, RebalanceOptions());
  EXPECT_TRUE(plan.moves.empty()) << plan.why;
}

TEST(RebalanceTest, SmallGainsAreNotWorthAMove) {
  // Above the threshold, but the best move lowers the peak by less than the hysteresis.
  std::vector<PartitionStatus> parts = {P(0, 0, 130), P(1, 0, 1), P(2, 1, 100), P(3, 2, 69)};
  RebalanceOptions o;
  o.threshold = 1.1;
  o.hysteresis = 0.05;
  RebalancePlan plan = PlanRebalance(parts, 3, {}, 0, o);
  EXPECT_TRUE(plan.moves.empty()) << plan.why;
}

TEST(RebalanceTest, IdleClusterStaysPut) {
  std::vector<PartitionStatus> parts = {P(0, 0, 5), P(1, 1, 0)};
  EXPECT_TRUE(PlanRebalance(parts, 3, {}, 0, RebalanceOptions()).moves.empty());
}

}  // namespace
}  // namespace ramp
