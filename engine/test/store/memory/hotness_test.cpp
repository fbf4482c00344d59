// The decaying ops/s average behind PartitionInfo::ops_per_sec.
#include "store/memory/hotness.h"

#include <gtest/gtest.h>

namespace ramp::store {
namespace {

TEST(HotnessTest, ConvergesToASteadyRateAndDecaysWhenIdle) {
  uint64_t now = 5000;
  Hotness h(now);
  EXPECT_EQ(h.Rate(now), 0.0);
  for (int second = 0; second < 120; ++second) {
    h.Count(1000);
    now += 1000;
    h.Rate(now);
  }
  EXPECT_NEAR(h.Rate(now), 1000.0, 1.0);
  // One quiet time constant later, about 1/e of it is left.
  now += 10000;
  EXPECT_NEAR(h.Rate(now), 1000.0 / 2.718281828, 1.0);
}

TEST(HotnessTest, DoesNotDependOnHowOftenItIsSampled) {
  uint64_t now_a = 0, now_b = 0;
  Hotness often(now_a), rarely(now_b);
  for (int step = 0; step < 100; ++step) {
    often.Count(50);
    rarely.Count(50);
    now_a += 100;
    now_b += 100;
    often.Rate(now_a);
  }
  // A steady rate reads the same whether sampled every 100 ms or once.
  EXPECT_NEAR(often.Rate(now_a), 500.0 * (1 - std::exp(-1.0)), 2.0);
  EXPECT_NEAR(rarely.Rate(now_b), 500.0 * (1 - std::exp(-1.0)), 2.0);
  // Time that does not advance changes nothing.
  EXPECT_EQ(rarely.Rate(now_b), rarely.Rate(now_b - 10));
}

}  // namespace
}  // namespace ramp::store
