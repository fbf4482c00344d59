// Hybrid logical clock: monotonic, ahead of everything observed, unique across threads.
#include "ramp/hlc.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <thread>
#include <vector>

namespace ramp {
namespace {

TEST(HybridClockTest, NowIsStrictlyIncreasingAndNearWallClock) {
  HybridClock clock;
  const uint64_t before = HybridClock::PhysicalNow();
  uint64_t last = 0;
  for (int i = 0; i < 100000; ++i) {
    const uint64_t t = clock.Now();
    ASSERT_GT(t, last);
    last = t;
  }
  EXPECT_GE(last, before);
  EXPECT_EQ(clock.Peek(), last);
}

TEST(HybridClockTest, NowPassesObservedTimestamps) {
  HybridClock clock;
  const uint64_t future = HybridClock::PhysicalNow() + (uint64_t{60000} << 16);
  clock.Observe(future);
  EXPECT_EQ(clock.Peek(), future);
  EXPECT_GT(clock.Now(), future);
  // Observing the past changes nothing.
  const uint64_t now = clock.Peek();
  clock.Observe(1);
  EXPECT_EQ(clock.Peek(), now);
}

TEST(HybridClockTest, ReadingsAreUniqueAcrossThreads) {
  HybridClock clock;
  constexpr int kThreads = 4;
  constexpr int kPerThread = 50000;
  std::vector<std::vector<uint64_t>> seen(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        seen[t].push_back(clock.Now());
        if (i % 1000 == 0) clock.Observe(seen[t].back() + 5);
      }
    });
  }
  for (auto& th : threads) th.join();
  std::vector<uint64_t> all;
  for (const auto& v : seen) {
    EXPECT_TRUE(std::is_sorted(v.begin(), v.end()));
    all.insert(all.end(), v.begin(), v.end());
  }
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end());
}

}  // namespace
}  // namespace ramp
