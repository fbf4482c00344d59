// Hybrid logical clock: monotonic, ahead of everything observed, unique across threads.
#include "ramp/hlc.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
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

// The statement-snapshot rule that lets a commit be acknowledged without waiting for the
// next millisecond (extension/xact: Session::StatementSnapshot, CommitWrites): a commit drawn
// at or after NextMicro(now) and acknowledged once Reached is in every snapshot taken after
// the acknowledgement, and in no snapshot taken before its writes.
uint64_t UnixMicrosNow() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

TEST(HybridClockTest, PhysicalNowCarriesTheMicrosecondBelowTheMillisecond) {
  const uint64_t us = UnixMicrosNow();
  const uint64_t t = HybridClock::PhysicalNow();
  EXPECT_GE(t >> 16, us / 1000);
  EXPECT_LE(t >> 16, us / 1000 + 1000);
  EXPECT_LT((t & 0xFFFF) >> HybridClock::kMicroShift, 1000u);
  EXPECT_EQ(t & HybridClock::kMicroMask, 0u);
  EXPECT_EQ(HybridClock::SnapshotAtMicros(1'700'000'000'123'456),
            (uint64_t{1'700'000'000'123} << 16) | (456u << HybridClock::kMicroShift) |
                HybridClock::kMicroMask);
}

TEST(HybridClockTest, AcknowledgedCommitsAreInLaterSnapshotsAndNotInEarlierOnes) {
  HybridClock clock;
  uint64_t before_write = 0, committed = 0;
  for (int i = 0; i < 20000; ++i) {
    // A statement starts, then a writer writes and commits (a few clock readings, as a
    // commit's PREPARE and COMMIT take), and waits for the clock before acknowledging.
    const uint64_t earlier = HybridClock::SnapshotAtMicros(UnixMicrosNow());
    clock.Observe(HybridClock::NextMicro(HybridClock::PhysicalNow()));
    for (int k = 0; k <= i % 3; ++k) committed = clock.Now();
    ASSERT_GT(committed, earlier) << "a commit whose writes came after a statement started is "
                                     "in its snapshot (iteration "
                                  << i << ")";
    while (!HybridClock::Reached(committed)) {
    }
    const uint64_t later = HybridClock::SnapshotAtMicros(UnixMicrosNow());
    ASSERT_GE(later, committed) << "an acknowledged commit is missing from a later statement's "
                                   "snapshot (iteration "
                                << i << ")";
    before_write = earlier;
  }
  EXPECT_GT(committed, before_write);
}

}  // namespace
}  // namespace ramp
